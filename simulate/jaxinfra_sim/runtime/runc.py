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
  settings are a stranger's. Unprivileged, runc's rootless mode maps the container's uid and gid to the caller's own;
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxinfra_sim.core import programs
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


def create(state: Path) -> Runtime:
    """The runtime for one simulation, its state in `state` (made here)."""
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    return Runtime(binary(), state)


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


def config(
    proc: Mapping[str, Any],
    root: Path,
    hostname: str,
    security: Security,
    views: Sequence[tuple[str, str]] = (),
    privileged: bool = False,
    name: str = "",
) -> dict[str, Any]:
    """The container's `config.json`: `proc` (`process`) in `root` (built already), with its namespaces, id maps,
    /proc and its masked paths; `views`, (the kernel's own path, mount path), are the node's /sys and /proc/sys a
    hostPath shows, read-only. `privileged`: the runtime runs as the machine's root, which gives the container a user
    namespace of its own (ids from `ID_BASE`) and a cgroup `name` beneath the pod's (relative to its shim's)."""
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
    # As root, a user namespace of the container's own, its ids ID_BASE on; unprivileged, the one its shim made, in
    # which the caller is root (`sandbox.node_mounts`): runc's own mapping would need the container's root mapped.
    kinds = ("pid", "ipc", "uts", "mount", "cgroup") + (("user",) if privileged else ())
    block = [{"containerID": 0, "hostID": id_base(), "size": ID_COUNT}]
    linux: dict[str, Any] = {
        "namespaces": [{"type": kind} for kind in kinds],
        **({"uidMappings": block, "gidMappings": block} if privileged else {}),
        "maskedPaths": ["/" + p for p in rootfs.MASKED],
        "readonlyPaths": ["/" + p for p in rootfs.READ_ONLY],
    }
    if privileged:
        linux["cgroupsPath"] = name
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
