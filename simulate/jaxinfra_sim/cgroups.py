"""Limits are limits: a pod's `resources.limits` enforced by the kernel, as on a node.

On a node the kubelet asks the container runtime for a cgroup per container, and runc writes the
limits into it (libcontainer/cgroups/fs/memory.go: memory.limit_in_bytes, then
memory.memsw.limit_in_bytes; fs2/memory.go: memory.max, memory.swap.max; the CPU limit becomes a
CFS quota, kubelet's MilliCPUToQuota: quota = millicores x period / 1000 over a 100 ms period, at
least 1 ms). A container that allocates past its memory limit is killed by the kernel's OOM killer
(SIGKILL: exit 137); containerd's shim watches the group (v1: an eventfd on memory.oom_control; v2:
the oom_kill count in memory.events), publishes a TaskOOM event, and the CRI reports the
container's termination reason as `OOMKilled`. The simulator forks one process per pod, so each
pod with a limit gets a group of its own here, and the same kernel does the same thing to it.

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

Layout: <this process's group>/jaxinfra-<pid>-<name>/<pod>, per controller hierarchy. A pod with a
limit gets a group; one without gets a memory group with no limit where asked (`watch`: as every
container has a cgroup on a node), for its OOM kills alone. The pod process moves itself
in right after the fork (`PodGroup.enter`); what its parent had already touched stays charged to
the parent (moving a task does not move its charges), as a container starts with nothing charged.

Leftovers: `Session.close` (also on `with`, and at interpreter exit in the creating process)
kills what is left in its groups and removes them; a simulator killed outright leaves its groups,
which the next `Session.create` sweeps: any jaxinfra-<pid>-* group whose creator pid is no longer
alive (in this pid namespace) is emptied and removed (`sweep`).

Whose OOM kill: the kernel counts each process its OOM killer ends, whichever OOM (the machine's
memory exhausted, or a memory cgroup's limit reached), machine-wide (/proc/vmstat oom_kill) and in
the victim's own memory group (v1: memory.oom_control oom_kill; v2: memory.events oom_kill, "the
number of processes belonging to this cgroup killed by any kind of OOM killer", kernel 4.13 on:
mm/oom_kill.c __oom_kill_process), even when the process was a child its container's process
survives (a shell). Its own limit reached is told apart by the group's own count of that (v2:
memory.events oom, "the cgroup's memory usage was reached the limit"; v1: memory.failcnt and
memory.memsw.failcnt, the times a charge failed at this group's own limits, not an ancestor's, or,
where the kernel keeps those at 0 as this 6.18 one does, its peak, memory.max_usage_in_bytes,
within `LIMIT_SLACK_BYTES` of its limit): an OOM kill in a pod's group without one is the
machine's (or an ancestor group's limit: the machine the simulation was given), `machine_oom_killed`. On v1 a
group's count is its own alone (mm/memcontrol.c memcg_memory_event stops at the group outside the default hierarchy),
so a pod's count sums its group and the groups under it (the OCI runtime's group for its container, made under the
pod's); on v2 memory.events counts the whole subtree already.

The process limit (the kubelet's `--pod-max-pids`, podPidsLimit: kubernetes pkg/kubelet/cm/
pod_container_manager_linux.go EnsureExists sets ResourceConfig.PidsLimit on the pod's group, cgroup_manager_linux.go
writes it as the pids controller's pids.max, v1 and v2 alike): a cluster's default is none (-1), but this machine
must not be forked empty by one pod, so every pod's group gets `capacity.POD_PIDS_LIMIT` (each container's group
here, a pod's group on a node). A fork or a new thread past it fails with EAGAIN in that pod only
(kernel/cgroup/pids.c pids_can_fork). Where no pids controller can be used (unprivileged, nothing delegated),
`capacity.nproc_limit` gives the value for the container's RLIMIT_NPROC instead, and the report's notes say the
cgroup does not enforce it.
"""

from __future__ import annotations

import atexit
import errno
import functools
import os
import re
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from jaxinfra_sim.errors import InvalidArgument
from jaxinfra_sim.paths import safe_name

ROOT = Path("/sys/fs/cgroup")
"""Where the cgroup file systems are mounted (systemd's layout, and every container runtime's)."""
SELF_CGROUP = Path("/proc/self/cgroup")
PREFIX = "jaxinfra-"
CFS_PERIOD_US = 100_000
"""The CFS period the kubelet uses (its default cpuCFSQuotaPeriod, 100 ms)."""
MIN_QUOTA_US = 1_000
"""kubelet's MinQuotaPeriod: a quota below 1 ms is raised to it (the kernel refuses less)."""
LIMIT_SLACK_BYTES = 1 << 20
"""v1: a pod whose peak came this close to its memory limit reached it (the kernel charges in batches of 64 pages;
kernels that keep memory.failcnt at 0 leave only the peak, memory.max_usage_in_bytes, to tell)."""
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


def _mkdir(path: Path) -> None:
    """Make a group (the kernel fills it with its interface files)."""
    os.mkdir(path, 0o755)


def _rmdir(path: Path) -> None:
    """Remove a group with no processes and no child groups (its interface files go with it)."""
    os.rmdir(path)


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read(path: Path) -> str:
    with open(path, encoding="ascii") as f:
        return f.read()


def _field(path: Path, key: str) -> int | None:
    """The number after `key` in a flat keyed file (memory.oom_control, memory.events), or None."""
    try:
        for line in _read(path).splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return None


def _failures(group: Path) -> int | None:
    """v1: the times a charge failed at the group's own limit, memory's or (with swap accounting, runc's
    memory+swap limit, the one reached first) memory+swap's (memory.failcnt + memory.memsw.failcnt), or None."""
    try:
        count = int(_read(group / "memory.failcnt"))
    except (OSError, ValueError):
        return None
    try:
        return count + int(_read(group / "memory.memsw.failcnt"))
    except (OSError, ValueError):
        return count


def _why(err: OSError, uid: int) -> str:
    if err.errno in (errno.EACCES, errno.EPERM):
        return f"not writable by uid {uid} (no delegation)"
    if err.errno == errno.EROFS:
        return "mounted read-only (as a container runtime mounts it by default)"
    return os.strerror(err.errno or 0).lower()


# --- probing -------------------------------------------------------------------------------------


def membership(self_cgroup: str | None = None) -> tuple[dict[str, tuple[str, str]], str | None]:
    """Where this process sits: per v1 controller, (its hierarchy's mount folder name, this process's path), and its
    v2 path (None without a v2 line), from /proc/self/cgroup (or `self_cgroup`, its text)."""
    text = _read(SELF_CGROUP) if self_cgroup is None else self_cgroup
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
        _mkdir(trial)
    except FileExistsError:
        pass
    except OSError as e:
        return _why(e, os.geteuid())
    try:
        for name in (limit_file, *more):
            if not (trial / name).exists():
                return f"a new group has no {name}"
            if not os.access(trial / name, os.W_OK):
                return f"{name} of a new group is not writable by uid {os.geteuid()}"
        return ""
    finally:
        _remove_tree(trial)


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
        available = _read(group / "cgroup.controllers").split()
        enabled = _read(group / "cgroup.subtree_control").split()
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
        if not is_root and _read(group / "cgroup.procs").split():
            return None, (
                f"{where} has processes of its own, so it cannot pass the {name} controller to groups under it "
                "(cgroup v2's no-internal-processes rule); run the simulator from a group that does"
            )
        try:
            _write(group / "cgroup.subtree_control", f"+{name}")
        except OSError as e:
            return None, f"{where}: cannot enable {name} for groups under it: {_why(e, os.geteuid())}"
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


def _kill(group: Path) -> None:
    """SIGKILL every process left in `group` (v2's cgroup.kill where the kernel has it: the whole subtree)."""
    if (group / "cgroup.kill").exists():
        try:
            _write(group / "cgroup.kill", "1")
            return
        except OSError:
            pass
    try:
        pids = _read(group / "cgroup.procs").split()
    except OSError:
        return
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def _remove_tree(group: Path) -> bool:
    """Remove `group` and the groups under it, children first, killing what runs in them; retried briefly
    (EBUSY until a killed process has exited). True when nothing is left."""
    try:
        children = [Path(e.path) for e in os.scandir(group) if e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return True
    except OSError:
        children = []
    ok = all([_remove_tree(child) for child in children])
    deadline = time.monotonic() + _SETTLE_S
    while True:
        try:
            _rmdir(group)
            return ok
        except FileNotFoundError:
            return ok
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() > deadline:
                return False
        _kill(group)
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
            if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))) and _remove_tree(entry):
                removed.append(entry)
    return removed


# --- sessions and pods ---------------------------------------------------------------------------


@dataclass
class PodGroup:
    """One pod's group (one per hierarchy its limits need). Made by `Session.pod`, entered by the pod itself."""

    pod_id: str
    version: int
    memory_bytes: int | None  # the limit enforced (None: none)
    cpu_millis: int | None
    paths: tuple[Path, ...]  # the group in each hierarchy
    _procs: tuple[bytes, ...] = ()  # their cgroup.procs, ready for `enter`
    _memory: Path | None = None  # the group holding the memory controller
    _oom_base: int = 0
    _limit_base: int = 0  # its own limit's count (v2: memory.events oom; v1: memory.failcnt) when made
    closed: bool = False
    pids_max: int | None = None  # its process limit (pids.max), where the pids controller enforces one
    _pids: Path | None = None  # the group holding the pids controller

    def enter(self) -> None:
        """Move the calling process (and every thread of it) into the pod's groups: call it in the forked pod
        process, before it allocates and before it makes namespaces (with this process's privileges).

        A few writes and nothing else: it runs in a fork of a big JAX process. "0" is the writer itself, in
        both versions (it needs no pid, so it is the same in any pid namespace); cgroup.procs rather than v1's
        tasks moves all threads, the same thing for a single-threaded fork. Raises OSError: the pod should
        then end with the message, rather than run unlimited."""
        for path in self._procs:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def adopt(self, pid: int) -> None:
        """Move process `pid` (a container's first process, made by the OCI runtime in a group of its own beneath
        this one, not started yet) into the pod's groups, where v1 counts its OOM kills (v1 does not add a child
        group's to its parent's memory.oom_control)."""
        for path in self._procs:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, str(pid).encode())
            finally:
                os.close(fd)

    def _oom_kills(self) -> bool:
        """Whether the kernel's OOM killer ended a process of this pod, any of them, for whatever OOM: its
        group's oom_kill count rose, as containerd reads it (v1: memory.oom_control, kernel 4.13 on; v2:
        memory.events)."""
        if self._memory is None:
            return False
        if self.version == 2:  # the whole subtree's already
            count = _field(self._memory / "memory.events", "oom_kill")
            return count is not None and count > self._oom_base
        counts = [_field(Path(folder) / "memory.oom_control", "oom_kill") for folder, _, _ in os.walk(self._memory)]
        return sum(c for c in counts if c is not None) > self._oom_base

    def _own_limit_reached(self) -> bool:
        """Whether the pod reached its own memory limit (v2: memory.events oom; v1: `_failures`, which only this
        group's limits raise, not an ancestor's, else its peak within `LIMIT_SLACK_BYTES` of its limit); where
        neither can be read, a pod with a limit did."""
        if self.memory_bytes is None or self._memory is None:
            return False
        if self.version == 2:
            count = _field(self._memory / "memory.events", "oom")
            return count is None or count > self._limit_base
        count, peak = _failures(self._memory), self.peak_bytes()
        if count is not None and count > self._limit_base:
            return True
        return peak is None or peak > self.memory_bytes - LIMIT_SLACK_BYTES

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer killed a process of this pod for its own memory limit (the cluster's
        OOMKilled; read once the pod has ended)."""
        return self._oom_kills() and self._own_limit_reached()

    def machine_oom_killed(self) -> bool:
        """Whether the kernel's OOM killer killed a process of this pod (any: a shell's child too) while the pod
        was within its own limit, or had none: this machine's memory ran out (or its given group's), not the pod's.
        Readable while the pod runs."""
        return self._oom_kills() and not self._own_limit_reached()

    @property
    def enforced(self) -> bool:
        """Whether it enforces a limit (a watched group without one enforces none)."""
        return self.memory_bytes is not None or self.cpu_millis is not None

    def peak_bytes(self) -> int | None:
        """The most memory the pod had charged at once (v1: memory.max_usage_in_bytes; v2: memory.peak, kernel
        5.19 on), or None where unknown."""
        if self._memory is None:
            return None
        try:
            return int(_read(self._memory / ("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")))
        except (OSError, ValueError):
            return None

    def pids_peak(self) -> int | None:
        """The most tasks (processes and threads) the pod held at once (pids.peak, kernel 6.1 on), or None."""
        if self._pids is None:
            return None
        try:
            return int(_read(self._pids / "pids.peak"))
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        """Remove the pod's groups, killing what is left in them (idempotent). Read `oom_killed` first."""
        if not self.closed:
            self.closed = all([_remove_tree(p) for p in self.paths])


@dataclass
class Session:
    """One simulation's groups: a parent per hierarchy, and a child per pod that has a limit. Use it as a
    context manager (or call `close`): every group it made goes, whatever ended the simulation."""

    controllers: Controllers  # what this session enforces (a failure to make its group turns one off)
    groups: dict[Path, Path]  # this process's group -> the session's group under it
    pods: list[PodGroup] = field(default_factory=list)
    creator: int = field(default_factory=os.getpid)
    closed: bool = False

    @classmethod
    def create(cls, name: str, controllers: Controllers | None = None) -> Session:
        """A session's groups, `jaxinfra-<pid>-<name>` under this process's group in each usable hierarchy
        (after sweeping stale ones). Never raises for want of cgroups: `controllers` then says what is off."""
        controllers = controllers if controllers is not None else probe()
        sweep(controllers)
        found = {"memory": controllers.memory, "cpu": controllers.cpu, "pids": controllers.pids}
        reasons = {"memory": controllers.memory_reason, "cpu": controllers.cpu_reason, "pids": controllers.pids_reason}
        groups: dict[Path, Path] = {}
        for parent in dict.fromkeys(c.group for c in found.values() if c is not None):
            users = [c for c in found.values() if c is not None and c.group == parent]
            group = parent / f"{PREFIX}{os.getpid()}-{safe_name(name)}"
            try:
                group = _fresh(group)
                if users[0].version == 2:
                    _write(group / "cgroup.subtree_control", " ".join(f"+{c.name}" for c in users))
                groups[parent] = group
            except OSError as e:
                _remove_tree(group)
                for c in users:
                    found[c.name], reasons[c.name] = (
                        None,
                        f"cgroup v{c.version} {c.name} at {group}: {_why(e, os.geteuid())}",
                    )
        session = cls(
            Controllers(
                found["memory"], found["cpu"], reasons["memory"], reasons["cpu"], found["pids"], reasons["pids"]
            ),
            groups,
        )
        atexit.register(session.close)
        return session

    def pod(
        self,
        pod_id: str,
        memory_bytes: int | None,
        cpu_millis: int | None,
        watch: bool = False,
        pids_max: int | None = None,
    ) -> PodGroup | None:
        """A group for one pod with its limits (bytes; millicores; tasks), or None when it has none this session
        enforces; with `watch`, a memory group without a memory limit too (to see its OOM kills). Each call makes
        a fresh group (a restarted pod gets a new one, as a new container does). Raises OSError where the kernel
        refuses: a limit that cannot be set is not silently dropped."""
        for value in (memory_bytes, cpu_millis, pids_max):
            if value is not None and value <= 0:
                raise InvalidArgument(f"a limit must be positive, not {value}")
        memory = self.controllers.memory if memory_bytes is not None or watch else None
        cpu = self.controllers.cpu if cpu_millis is not None else None
        pids = self.controllers.pids if pids_max is not None else None
        wanted = [c for c in (memory, cpu, pids) if c is not None]
        if not wanted or self.closed:
            return None
        paths: list[Path] = []
        pod = PodGroup(pod_id, wanted[0].version, memory_bytes if memory else None, cpu_millis if cpu else None, ())
        pod.pids_max = pids_max if pids else None
        values = {"memory": memory_bytes, "cpu": cpu_millis, "pids": pids_max}
        try:
            for parent in dict.fromkeys(c.group for c in wanted):
                path = _fresh(self.groups[parent] / safe_name(pod_id))
                paths.append(path)
                for c in wanted:
                    if c.group == parent:
                        value = values[c.name]
                        if value is not None:  # (a watched group without a memory limit: none to write)
                            _limit(path, c, value)
                        if c.name == "memory":
                            pod._memory = path
                        elif c.name == "pids":
                            pod._pids = path
        except OSError:
            for path in paths:
                _remove_tree(path)
            raise
        pod.paths = tuple(paths)
        pod._procs = tuple(os.fsencode(p / "cgroup.procs") for p in paths)
        if pod._memory is not None:
            pod._oom_base = (
                _field(pod._memory / ("memory.oom_control" if pod.version == 1 else "memory.events"), "oom_kill") or 0
            )
            pod._limit_base = (
                _failures(pod._memory) if pod.version == 1 else _field(pod._memory / "memory.events", "oom")
            ) or 0
        self.pods.append(pod)
        return pod

    def close(self) -> None:
        """Remove every group this session made: pods' first, then its own; processes left in them are killed.
        Idempotent; a no-op in any process but the creator (a forked pod inherits the object and the atexit hook)."""
        if self.closed or os.getpid() != self.creator:
            return
        for pod in self.pods:
            pod.close()
        left = [g for g in self.groups.values() if not _remove_tree(g)]
        self.closed = not left and all(p.closed for p in self.pods)
        if self.closed:
            atexit.unregister(self.close)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fresh(path: Path) -> Path:
    """Make the group `path`, or `path-2`, `path-3`, ... where that name is taken."""
    for n in range(1, 1000):
        candidate = path if n == 1 else path.with_name(f"{path.name}-{n}")
        try:
            _mkdir(candidate)
            return candidate
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free group name", str(path))


def _limit(group: Path, c: Controller, value: int) -> None:
    """Write one limit as runc does for a container (see the module's docstring)."""
    if c.name == "memory" and c.version == 1:
        _write(group / "memory.limit_in_bytes", str(value))
        if (group / "memory.memsw.limit_in_bytes").exists():  # memory+swap: swapping must not stand in for the OOM kill
            _write(group / "memory.memsw.limit_in_bytes", str(value))
        elif (group / "memory.swappiness").exists():  # no swap accounting: keep the group out of swap
            _write(group / "memory.swappiness", "0")
    elif c.name == "pids":  # the kubelet's podPidsLimit, v1 and v2 alike (runc fs/pids.go, fs2/pids.go)
        _write(group / "pids.max", str(value))
    elif c.name == "memory":
        _write(group / "memory.max", str(value))
        if (group / "memory.swap.max").exists():
            _write(group / "memory.swap.max", "0")
        if (group / "memory.oom.group").exists():  # the kubelet's default on v2 since 1.28: the container dies whole
            _write(group / "memory.oom.group", "1")
    else:
        quota = max(MIN_QUOTA_US, value * CFS_PERIOD_US // 1000)
        if c.version == 1:
            _write(group / "cpu.cfs_period_us", str(CFS_PERIOD_US))
            _write(group / "cpu.cfs_quota_us", str(quota))
        else:
            _write(group / "cpu.max", f"{quota} {CFS_PERIOD_US}")


def container_limits(container: Mapping) -> tuple[int | None, int | None]:
    """(memory bytes, cpu millicores) of a container's `resources.limits`, rounded up as the kubelet's
    Quantity.Value() and MilliValue() do, and as they do saturated at 2**63 - 1 (an int64; the API server stores
    `memory: 1e5000` as written; kubernetes staging/src/k8s.io/apimachinery/pkg/api/resource/math.go @ 13ab804c6d76,
    scaledValue and positiveScaleInt64: "Value saturates for a quantity outside int64"); None where there is none (a
    request is not a limit), it does not parse, or it is not positive."""
    from jaxinfra_sim.inputs import (
        quantity,
    )  # the project's one Quantity parser; imported here to keep this module light

    limits = (container.get("resources") or {}).get("limits") or {}
    out: list[int | None] = []
    for key, scale in (("memory", 1), ("cpu", 1000)):
        q = quantity(limits[key]) if key in limits else None
        out.append(min(-(-q.numerator * scale // q.denominator), MAX_INT64) if q is not None and q > 0 else None)
    return out[0], out[1]


MAX_INT64 = 2**63 - 1
"""The most a limit can be as the kubelet reads it (bytes, millicores)."""
