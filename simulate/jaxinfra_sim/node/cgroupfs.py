"""The kernel's cgroup file systems as this simulator finds them: which memory, cpu and pids controllers this process
may make groups with (`probe`, by trying), the file operations on groups (one seam each for the tests' fake tree), and
removing groups, this simulation's or those a killed one left.

Both cgroup versions (kernel docs, Documentation/admin-guide/cgroup-v1/memory.rst and
Documentation/admin-guide/cgroup-v2.rst):
- v1, one hierarchy per controller (/sys/fs/cgroup/memory, /sys/fs/cgroup/cpu, ...): groups are
  made under this process's own group in each; root may, others only where it was delegated
  (chowned) to them.
- v2, one hierarchy (/sys/fs/cgroup, or /sys/fs/cgroup/unified beside v1): a controller reaches a
  group's children only when the group lists it in cgroup.subtree_control, and a non-root group
  with processes of its own cannot do that (the "no internal processes" rule). The session's group
  has none, so pods can have limits under it; but the session's group itself only gets the memory
  controller when this process's group already passes it down, which it cannot while this
  process lives in it, unless that group is the hierarchy's root. `probe` tries, and says why not.
  Moving pods out of this process's group needs write access to its cgroup.procs (delegation:
  systemd's Delegate=yes hands a user that).

Leftovers: `Session.close` (also on `with`, and at interpreter exit in the creating process)
kills what is left in its groups and removes them; a simulator killed outright leaves its groups,
which the next `Session.create` sweeps: any jaxinfra-<pid>-* group whose creator pid is no longer
alive (in this pid namespace) is emptied and removed (`sweep`).
"""

from __future__ import annotations

import errno
import functools
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
"""Where the cgroup file systems are mounted (systemd's layout, and every container runtime's)."""
SELF_CGROUP = Path("/proc/self/cgroup")
PREFIX = "jaxinfra-"
_STALE = re.compile(rf"{PREFIX}(\d+)[-.]")
_SETTLE_S = 2.0


@dataclass(frozen=True)
class Controller:
    """One controller this process may make groups for: its cgroup version and this process's own group."""

    name: str  # "memory", "cpu" or "pids"
    version: int  # 1 or 2
    group: Path  # this process's group in the controller's hierarchy: session groups go under it


@dataclass(frozen=True)
class Controllers:
    """What `probe` found: a usable controller each for memory, cpu and pids, or why there is none (one line)."""

    memory: Controller | None
    cpu: Controller | None
    memory_reason: str = ""
    cpu_reason: str = ""
    pids: Controller | None = None
    pids_reason: str = ""  # "" with no pids controller: none was looked for (a hand-made Controllers)

    def unenforced(self, limited: bool = True) -> list[str]:
        """Lines for the report: which limits the kernel will not enforce here, and why, one per limit: memory's and
        cpu's where a pod has such a limit (`limited`), the simulator's own per-pod process limit always."""
        asked = [("memory", self.memory, self.memory_reason), ("cpu", self.cpu, self.cpu_reason)] if limited else []
        if self.pids_reason:
            asked.append(("pids", self.pids, self.pids_reason))
        return [f"{what} limits not enforced: {why}" for what, c, why in asked if c is None]


_LIMIT_FILE = {
    (1, "memory"): "memory.limit_in_bytes",
    (1, "cpu"): "cpu.cfs_quota_us",
    (2, "memory"): "memory.max",
    (2, "cpu"): "cpu.max",
    (1, "pids"): "pids.max",
    (2, "pids"): "pids.max",
}


# --- the file system, one seam each for the tests' fake tree -----------------------------------------


def mkdir(path: Path) -> None:
    """Make a group (the kernel fills it with its interface files)."""
    os.mkdir(path, 0o755)


def rmdir(path: Path) -> None:
    """Remove a group with no processes and no child groups (its interface files go with it)."""
    os.rmdir(path)


def write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def read(path: Path) -> str:
    with open(path, encoding="ascii") as f:
        return f.read()


def keyed(path: Path, key: str) -> int | None:
    """The number after `key` in a flat keyed file (memory.oom_control, memory.events), or None."""
    try:
        for line in read(path).splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return None


def failures(group: Path) -> int | None:
    """v1: the times a charge failed at the group's own limit, memory's or (with swap accounting, runc's
    memory+swap limit, the one reached first) memory+swap's (memory.failcnt + memory.memsw.failcnt), or None."""
    try:
        count = int(read(group / "memory.failcnt"))
    except (OSError, ValueError):
        return None
    try:
        return count + int(read(group / "memory.memsw.failcnt"))
    except (OSError, ValueError):
        return count


def why_not(err: OSError, uid: int) -> str:
    if err.errno in (errno.EACCES, errno.EPERM):
        return f"not writable by uid {uid} (no delegation)"
    if err.errno == errno.EROFS:
        return "mounted read-only (as a container runtime mounts it by default)"
    return os.strerror(err.errno or 0).lower()


# --- probing -------------------------------------------------------------------------------------


def membership(self_cgroup: str | None = None) -> tuple[dict[str, tuple[str, str]], str | None]:
    """Where this process sits: per v1 controller, (its hierarchy's mount folder name, this process's path), and its
    v2 path (None without a v2 line), from /proc/self/cgroup (or `self_cgroup`, its text)."""
    text = read(SELF_CGROUP) if self_cgroup is None else self_cgroup
    v1: dict[str, tuple[str, str]] = {}
    v2_path: str | None = None
    for line in text.splitlines():
        hid, _, rest = line.partition(":")
        names, _, path = rest.partition(":")
        if hid == "0" and names == "":
            v2_path = path
        else:
            for name in names.split(","):
                v1[name] = (names, path)
    return v1, v2_path


@functools.cache
def probe(root: Path = ROOT, self_cgroup: str | None = None) -> Controllers:
    """Which memory, cpu and pids controllers this process can make limited child groups with, found by trying
    (a throwaway group, made and removed), or why not. Memoised: the answer does not change during a run.

    `root` is where the hierarchies are mounted and `self_cgroup` the text of /proc/self/cgroup (read when
    None): both only for tests pointing it at a fake tree."""
    v1, v2_path = membership(self_cgroup)
    found: dict[str, Controller | None] = {}
    reasons: dict[str, str] = {}
    for name in ("memory", "cpu", "pids"):
        if name in v1:
            found[name], reasons[name] = _probe_v1(root, name, *v1[name])
        elif v2_path is not None:
            found[name], reasons[name] = _probe_v2(root, name, v2_path)
        else:
            found[name], reasons[name] = (
                None,
                f"no cgroup {name} controller: /proc/self/cgroup names neither a v1 {name} hierarchy nor v2",
            )
    return Controllers(found["memory"], found["cpu"], reasons["memory"], reasons["cpu"], found["pids"], reasons["pids"])


def _trial(group: Path, limit_file: str, *more: str) -> str:
    """Make and remove a throwaway group under `group`: "" when it has `limit_file` and the process may write
    it (and `more`), else why not."""
    trial = group / f"{PREFIX}{os.getpid()}.probe"
    try:
        mkdir(trial)
    except FileExistsError:
        pass
    except OSError as e:
        return why_not(e, os.geteuid())
    try:
        for name in (limit_file, *more):
            if not (trial / name).exists():
                return f"a new group has no {name}"
            if not os.access(trial / name, os.W_OK):
                return f"{name} of a new group is not writable by uid {os.geteuid()}"
        return ""
    finally:
        remove_tree(trial)


def _probe_v1(root: Path, name: str, mount: str, path: str) -> tuple[Controller | None, str]:
    hierarchy = next((root / d for d in (mount, name) if (root / d).is_dir()), None)
    if hierarchy is None:
        return None, f"cgroup v1 {name} controller is not mounted under {root}"
    group = hierarchy / path.lstrip("/")
    if not group.is_dir():  # v1 in a container without a cgroup namespace: the mount is this group itself
        group = hierarchy
    why = _trial(group, _LIMIT_FILE[(1, name)], "cgroup.procs")
    if why:
        return None, f"cgroup v1 {name} controller at {group}: {why}"
    return Controller(name, 1, group), ""


def _probe_v2(root: Path, name: str, path: str) -> tuple[Controller | None, str]:
    hierarchy = root if (root / "cgroup.controllers").is_file() else root / "unified"
    group = hierarchy / path.lstrip("/")
    where = f"cgroup v2 group {group}"
    try:
        available = read(group / "cgroup.controllers").split()
        enabled = read(group / "cgroup.subtree_control").split()
    except OSError as e:
        return None, f"{where}: {os.strerror(e.errno or 0).lower()}"
    if name not in available:
        return (
            None,
            f"{where}: the {name} controller is not delegated to it "
            f"(cgroup.controllers: {' '.join(available) or 'none'})",
        )
    if name not in enabled:
        is_root = path.strip("/") == ""
        if not is_root and read(group / "cgroup.procs").split():
            return None, (
                f"{where} has processes of its own, so it cannot pass the {name} controller to groups under it "
                "(cgroup v2's no-internal-processes rule); run the simulator from a group that does"
            )
        try:
            write(group / "cgroup.subtree_control", f"+{name}")
        except OSError as e:
            return None, f"{where}: cannot enable {name} for groups under it: {why_not(e, os.geteuid())}"
    if not os.access(group / "cgroup.procs", os.W_OK):
        return (
            None,
            f"{where}: its cgroup.procs is not writable by uid {os.geteuid()}, "
            "so pods cannot move out of it (no delegation)",
        )
    why = _trial(group, _LIMIT_FILE[(2, name)], "cgroup.subtree_control", "cgroup.procs")
    if why:
        return None, f"{where}: {why}"
    return Controller(name, 2, group), ""


# --- removing groups -----------------------------------------------------------------------------


def kill(group: Path) -> None:
    """SIGKILL every process left in `group` (v2's cgroup.kill where the kernel has it: the whole subtree)."""
    if (group / "cgroup.kill").exists():
        try:
            write(group / "cgroup.kill", "1")
            return
        except OSError:
            pass
    try:
        pids = read(group / "cgroup.procs").split()
    except OSError:
        return
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def remove_tree(group: Path) -> bool:
    """Remove `group` and the groups under it, children first, killing what runs in them; retried briefly
    (EBUSY until a killed process has exited). True when nothing is left."""
    try:
        children = [Path(e.path) for e in os.scandir(group) if e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return True
    except OSError:
        children = []
    ok = all([remove_tree(child) for child in children])
    deadline = time.monotonic() + _SETTLE_S
    while True:
        try:
            rmdir(group)
            return ok
        except FileNotFoundError:
            return ok
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() > deadline:
                return False
        kill(group)
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(controllers: Controllers) -> list[Path]:
    """Remove the groups of simulations whose creator process is gone (killed before it could close them).

    A group's creator is the pid in its name; a live pid (possibly reused) keeps it. Simulators in another
    pid namespace sharing the same parent group would look dead: not a layout this project runs."""
    removed = []
    for parent in {c.group for c in (controllers.memory, controllers.cpu, controllers.pids) if c is not None}:
        try:
            entries = [Path(e.path) for e in os.scandir(parent) if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        for entry in entries:
            m = _STALE.match(entry.name)
            if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))) and remove_tree(entry):
                removed.append(entry)
    return removed
