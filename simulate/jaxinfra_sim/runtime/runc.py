"""The OCI runtime: runc runs every container of a `--run-command` pod, as containerd drives it on a node.

containerd's CRI plugin writes an OCI bundle per container (a `config.json` beside the root filesystem) and its shim
(containerd-shim-runc-v2) drives runc: `runc create` (the container's process made and held before the user's program),
`runc start`, `runc kill`, `runc exec` for probes and hooks, `runc delete` once it has exited; the shim is the child
subreaper that the container's PID 1 is reparented to, so it reaps it and reports its exit (containerd @ 1754af31
`cmd/containerd-shim-runc-v2/process/init.go`, `pkg/process`; runc @ v1.1.5 `create.go`, `start.go`, `exec.go`,
`delete.go`). The simulator does the same, with runc's state in the simulation's own folder (`--root`), never
/run/runc.

What the bundle says (`config`), as containerd's `WithDefaultSpec` and the CRI's container options build it (containerd
`pkg/oci/spec.go` `populateDefaultUnixSpec`, `internal/cri/server/container_create_linux.go`):
- its own PID, IPC, UTS, mount, cgroup and user namespaces; the pod's network namespace is the one its shim is in
  (no `network` entry: runc keeps the runtime's own), as a pod's containers join their sandbox's;
- a user namespace always. As root the container's ids 0-65535 map to a block of this machine's ids that nothing uses
  (`ID_BASE`), as Kubernetes' user-namespaced pods (`hostUsers: false`, KEP-127) get from the kubelet: the container's
  root is never this machine's root, so a `privileged` container's files, setuid bits and writes to the kernel's
  settings are a stranger's. Unprivileged, one nested in its shim's, each id as itself (`nested_ids`). Either way the
  container's capabilities never hold in the namespace runc runs in, so no container can ptrace runc as it joins it;
- the root filesystem built by `sandbox` (read-only under readOnlyRootFilesystem), `/proc` of its PID namespace,
  containerd's masked and read-only paths (`rootfs.MASKED`, `rootfs.READ_ONLY`);
- the securityContext's identity and capabilities (`security.Security`), `noNewPrivileges`;
- no terminal: stdin is /dev/null, stdout and stderr the pod's pipes, and runc passes nothing else on.
"""

from __future__ import annotations

import functools
import json
import os
import pwd
import stat
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxinfra_sim.core import model, paths, programs
from jaxinfra_sim.core.errors import Unavailable
from jaxinfra_sim.core.security import Security
from jaxinfra_sim.runtime import rootfs, seccomp

ID_BASE = 1 << 30
"""The first of the machine's ids that a root simulation's containers run as (container id N is this machine's
ID_BASE + N): far above the ids a distribution hands out (useradd's SUB_UID_MAX is 600100000), and checked against
/etc/subuid and /etc/passwd at start (`id_base`)."""
ID_COUNT = rootfs.IDS
"""Ids per container: 0-65535, as the kubelet gives each user-namespaced pod."""


@dataclass(frozen=True)
class Runtime:
    """runc, and the folder that holds its state for one simulation."""

    binary: str
    state: Path
    trusted: tuple[Trusted, ...] = ()  # what it takes as it finds it in a container's tree (its known holes)

    def argv(self, *args: str, log: Path | None = None) -> list[str]:
        """A runc command line; its own messages go to `log` (JSON lines), never to the container's streams."""
        logging = ["--log", str(log), "--log-format", "json"] if log is not None else []
        return [self.binary, "--root", str(self.state), *logging, *args]


def failure(log: Path) -> str:
    """The runtime's error from its log, as the kubelet shows a container that could not start."""
    message = "the OCI runtime failed"
    try:
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("level") in ("error", "fatal"):
                message = str(entry.get("msg", message))
    except OSError:
        pass
    return message


@functools.cache
def binary() -> str:
    """The runtime found on this machine (runc); `Unavailable` (exit 3) otherwise."""
    return programs.required("runc")


@dataclass(frozen=True)
class Trusted:
    """What a runc with a known hole takes as it finds it in a container's own tree while it sets the container up
    (`node.runc_advisories`, from its version): the container paths no volume may be at or over, what it does with
    them (`why`), its version, the hole's CVEs and the releases that fix it."""

    version: str
    cves: tuple[str, ...]
    fixed: tuple[str, ...]
    paths: tuple[str, ...]
    why: str


def refusal(trusted: Iterable[Trusted], what: str, path: str) -> tuple[str, str] | None:
    """(cause, fix) where a mount at `path` (in the container; `what` names the pod's volume) is at or over a path a
    runc with a hole `trusted` takes as it finds it, else None."""
    where = paths.normal(path)
    for t in trusted:
        for kept in t.paths:
            if kept == where or kept.startswith(where.rstrip("/") + "/"):
                return (
                    f"{what} is mounted {'at' if kept == where else 'over'} {kept}, and this machine's runc "
                    f"{t.version} has {', '.join(t.cves)}: it {t.why}",
                    f"upgrade runc to {', '.join(t.fixed[:-1])} or {t.fixed[-1]} (or later in the same line), or "
                    "mount the volume elsewhere",
                )
    return None


def refuse_holes(pods: Iterable[model.Pod], trusted: Sequence[Trusted]) -> None:
    """Before anything starts: `Unavailable` (exit 3, this machine's limit) for the first volume of any container of
    `pods` mounted at or over a path this machine's runc takes as it finds it (`refusal`); one a symlink brings there
    is refused at its container's start (`sandbox.build`)."""
    for pod in pods if trusted else ():
        for c in (pod, *(pod.as_container(o) for o in pod.others)):
            for m in c.mounts:
                if m.kind == "hostPath" and paths.kernel_view(m.key) is not None:
                    continue  # the container's own /sys or /proc/sys, read-only: no container can swap a thing in it
                why = refusal(trusted, f"pod {pod.hostname} container {c.container} volume {m.volume}", m.path)
                if why is not None:
                    raise Unavailable(*why)


def scratch_parent() -> str | None:
    """Where a root simulation keeps its folder: the temp folder, unless a folder on the way to it is closed to
    others (a HOME of mode 0700 as TMPDIR), which the runtime, as the container's ids, could not pass: then /tmp."""
    if os.geteuid() != 0:
        return None
    folder = Path(tempfile.gettempdir()).resolve()
    for step in (folder, *folder.parents):
        if not step.stat().st_mode & stat.S_IXOTH:
            return "/tmp"
    return None


def create(state: Path, trusted: Sequence[Trusted] = ()) -> Runtime:
    """The runtime for one simulation, its state in `state` (made here); `trusted`: what this machine's runc takes as
    it finds it (`node.parts.runc_trusted`)."""
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    return Runtime(binary(), state, tuple(trusted))


@functools.cache
def id_base() -> int:
    """`ID_BASE`, or the first block of `ID_COUNT` ids above every range /etc/subuid and /etc/subgid give away and
    every id /etc/passwd names."""
    used = [0]
    for name in ("/etc/subuid", "/etc/subgid"):
        try:
            for line in Path(name).read_text().splitlines():
                fields = line.split(":")
                if len(fields) == 3 and fields[1].isdigit() and fields[2].isdigit():
                    used.append(int(fields[1]) + int(fields[2]))
        except OSError:
            pass
    used += [entry.pw_uid + 1 for entry in pwd.getpwall()]
    top = max(used)
    return ID_BASE if top <= ID_BASE else (top + ID_COUNT - 1) // ID_COUNT * ID_COUNT


def _caps(names: Sequence[str]) -> list[str]:
    return [f"CAP_{name}" for name in names]


def process(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str,
    security: Security,
    nproc: int | None = None,
    oom_score_adj: int | None = None,
) -> dict[str, Any]:
    """The OCI `process`: the program, its env and working directory, its identity and capabilities
    (containerd's: bounding = permitted; effective for root only, as execve(2) leaves a non-root process none), and
    the OOM score the kubelet gives it (CRI LinuxContainerResources.oom_score_adj, `qos`)."""
    caps = {
        "bounding": _caps(security.bounding),
        "permitted": _caps(security.effective),
        "effective": _caps(security.effective),
        "inheritable": [],
        "ambient": [],
    }
    user: dict[str, Any] = {"uid": security.uid, "gid": security.gid}
    if security.groups:
        user["additionalGids"] = list(security.groups)
    out: dict[str, Any] = {
        "terminal": False,
        "user": user,
        "args": list(argv),
        "env": [f"{k}={v}" for k, v in env.items()],
        "cwd": cwd,
        "capabilities": caps,
        "noNewPrivileges": security.no_new_privs,
    }
    if nproc is not None:
        out["rlimits"] = [{"type": "RLIMIT_NPROC", "hard": nproc, "soft": nproc}]
    if oom_score_adj is not None:
        out["oomScoreAdj"] = oom_score_adj
    return out


def nested_ids(kind: str, own: Path = Path("/proc/self")) -> list[dict[str, int]]:
    """The id map (`kind`: "uid_map" or "gid_map") of a user namespace nested in this process's that maps each of its
    ids as itself: a container's ids are its shim's, and runc, root in the shim's namespace, writes the map itself.
    What the nesting buys, by the kernel's rule: runc makes its init non-dumpable before it joins a container's
    namespaces (runc @ f19387a6 libcontainer/nsenter/nsexec.c, PR_SET_DUMPABLE), and such a process may be ptraced,
    its /proc entries read, its descriptors copied (pidfd_getfd(2)) only with CAP_SYS_PTRACE in the user namespace
    its memory was made in, runc's own (torvalds/linux @ bfedb589 kernel/ptrace.c `__ptrace_may_access`: `mm->user_ns`);
    a container's capabilities hold in its own namespace, a child of runc's, and below."""
    out = []
    for line in (own / kind).read_text().splitlines():
        inside, _, count = (int(field) for field in line.split())
        out.append({"containerID": inside, "hostID": inside, "size": count})
    return out


def config(
    proc: Mapping[str, Any],
    root: Path,
    hostname: str,
    security: Security,
    views: Sequence[tuple[str, str]] = (),
    privileged: bool = False,
    name: str = "",
    joined: Mapping[str, str] | None = None,
    sysctl: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The container's `config.json`: `proc` (`process`) in `root` (built already), with its namespaces, id maps,
    /proc and its masked paths; `views`, (the kernel's own path, mount path), are the node's /sys and /proc/sys a
    hostPath shows, read-only. `privileged`: the runtime runs as the machine's root, which gives the container a user
    namespace of its own (ids from `ID_BASE`) and a cgroup `name` beneath the pod's (relative to its shim's).
    `joined`: the namespaces it joins instead of making (OCI type -> path: its pod's pause's, `kubelet.podsandbox`);
    `sysctl`: the kernel settings runc writes in its namespaces once it has entered them (`linux.sysctl`: the pod's IPC
    ones, `kubelet.sysctls`)."""
    mounts: list[dict[str, Any]] = [
        {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
        {
            "destination": "/dev/pts",
            "type": "devpts",
            "source": "devpts",
            "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"],
        },
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
    ]
    for own, path in views:
        options = ["rbind" if own.startswith("/sys") else "bind", "ro", "nosuid", "nodev", "noexec"]
        mounts.append({"destination": path, "type": "bind", "source": own, "options": options})
    # A user namespace of the container's own always: as root its ids ID_BASE on; unprivileged, nested in the one its
    # shim made (`sandbox.node_mounts`), each id as itself (`nested_ids`). Never the namespace runc runs in: there a
    # privileged container's CAP_SYS_PTRACE would reach runc's init as it joins the container (`runc exec`).
    kinds = ("pid", "ipc", "uts", "mount", "cgroup", "user")
    block = [{"containerID": 0, "hostID": id_base(), "size": ID_COUNT}]
    linux: dict[str, Any] = {
        "namespaces": [
            {"type": kind, **({"path": joined[kind]} if joined and kind in joined else {})} for kind in kinds
        ],
        "uidMappings": block if privileged else nested_ids("uid_map"),
        "gidMappings": block if privileged else nested_ids("gid_map"),
        "maskedPaths": ["/" + p for p in rootfs.MASKED],
        "readonlyPaths": ["/" + p for p in rootfs.READ_ONLY],
    }
    if privileged:
        linux["cgroupsPath"] = name
    if sysctl:
        linux["sysctl"] = dict(sysctl)
    confined = seccomp.profile(security.seccomp, security.privileged, security.bounding)
    if confined is not None:
        linux["seccomp"] = confined
    return {
        "ociVersion": "1.0.2",
        "process": dict(proc),
        "root": {"path": str(root), "readonly": security.read_only_root},
        "hostname": hostname,
        "mounts": mounts,
        "linux": linux,
    }


def write(folder: Path, name: str, data: Mapping[str, Any]) -> Path:
    path = folder / name
    path.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    return path


def unmapped(ids: set[int], subordinate: tuple[tuple[int, int], tuple[int, int]] | None) -> set[int]:
    """Of a container's uids and gids, those an unprivileged simulation cannot give it: beyond 0 (the caller) and the
    caller's subordinate ids (`netns_setup.subordinate_ids`)."""
    count = min(subordinate[0][1], subordinate[1][1]) if subordinate is not None else 0
    return {i for i in ids if i > count}


def run(argv: Sequence[str], stdout: int, stderr: int) -> int:
    """One runc command, its output on the pod's streams, no terminal and no other descriptor; its exit status."""
    done = subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, check=False)
    return done.returncode
