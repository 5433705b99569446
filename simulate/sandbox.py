"""The pod sandbox: the namespaces the container runtime gives a pod before its container starts.

On a node every pod has its own UTS and mount namespaces: its own hostname, and an /etc/hosts
that the kubelet writes for it (`dns.hosts_file`). Each simulated pod gets the same, in its own
process right after the fork: a mount namespace in which its hosts file is bind-mounted over
/etc/hosts (glibc, c-ares inside JAX's gRPC, and Python all read it) and a UTS namespace holding
its hostname. The machine's own /etc/hosts and hostname are untouched. Its container also gets
a PID namespace, in which it is PID 1 (`shim`: how the kernel signals PID 1 decides how a stopped
container ends); /proc stays the machine's (mounting a new one is refused in a user namespace
wherever a container runtime masked parts of it), which /proc/self does not notice. Not emulated:
a network namespace (that needs a veth pair per pod, hence privileges); each pod has its own
loopback address instead.

Created per pod, after the fork, because that is where it can succeed: unshare(CLONE_NEWUSER)
fails with EINVAL in a multithreaded process (unshare(2)), and the simulator's own process has
threads once JAX is imported. A forked child has one thread.

Two ways in (`preflight` picks the first that works, once per simulation, before anything runs):
- `privileged`: with CAP_SYS_ADMIN (root), new mount, UTS and PID namespaces;
- `user`: anyone, where the kernel allows unprivileged user namespaces: a user namespace that
  maps only the caller's own uid and gid (nothing is gained outside it), owning the new mount,
  UTS and PID namespaces.
Where neither works, `Unavailable` says why and what fixes it; no faithful fallback exists
without a mount namespace (the hosts-file path is compiled into glibc and c-ares).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jaxinfra.errors import CommandFailed

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the ServiceAccount token volume is mounted in every container that gets one."""

STRATEGIES: dict[str, int] = {
    "privileged": CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWPID,
    "user": CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWPID,
}
"""The unshare(2) flags of each way in, tried in this order."""

UNAVAILABLE = 3
"""Exit status of `jaxinfra simulate` when this machine cannot isolate pods (not a verdict on the job)."""

SYSCTLS = {
    "user.max_user_namespaces": "/proc/sys/user/max_user_namespaces",
    "kernel.unprivileged_userns_clone": "/proc/sys/kernel/unprivileged_userns_clone",
    "kernel.apparmor_restrict_unprivileged_userns": "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
}
"""Kernel settings that decide whether an unprivileged user may create user namespaces."""


class SandboxError(OSError):
    """One step of entering a sandbox failed: which step, and the errno."""

    def __init__(self, step: str, code: int):
        super().__init__(code, f"{step}: {os.strerror(code)}")
        self.step = step


class Unavailable(CommandFailed):
    """No pod can get its own /etc/hosts and hostname here: the cause and its fix, in one line."""

    def __init__(self, cause: str, fix: str):
        super().__init__(f"cannot simulate here: {cause}; fix: {fix}", UNAVAILABLE)
        self.cause, self.fix = cause, fix


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _call(result: int, step: str) -> None:
    if result != 0:
        raise SandboxError(step, ctypes.get_errno())


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text)
    except OSError as err:
        raise SandboxError(f"write {path}", err.errno or errno.EPERM) from None


def _mount(libc: ctypes.CDLL, source: str | None, target: Path, fstype: str | None, flags: int, step: str) -> None:
    _call(libc.mount(source.encode() if source else None, str(target).encode(), fstype.encode() if fstype else None, flags,
                     b"mode=0755" if fstype == "tmpfs" else None), step)


def _cover(libc: ctypes.CDLL, folder: Path, cover: Path, keep: Path | None) -> None:
    """Put at `cover` a tmpfs holding every entry of `folder` (bound from `keep`, a bind of it, or from `folder`)."""
    _mount(libc, "tmpfs", cover, "tmpfs", 0, f"tmpfs over {cover}")
    source = keep or folder
    for entry in os.scandir(source):
        placed = cover / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), placed)
            continue
        placed.mkdir() if entry.is_dir() else placed.touch()
        _mount(libc, entry.path, placed, None, MS_BIND | MS_REC, f"bind {placed}")


def _make_room(libc: ctypes.CDLL, target: Path, scratch: Path, is_dir: bool = True) -> None:
    """Create `target` where it does not exist, without touching the machine: the deepest existing folder on its way
    is covered by a tmpfs (in this mount namespace only) into which every entry it had is bound back."""
    folder = target
    while not folder.exists():
        folder = folder.parent
    keep = scratch / f"kept-{len(list(scratch.glob('kept-*')))}"
    keep.mkdir(parents=True)
    _mount(libc, str(folder), keep, None, MS_BIND | MS_REC, f"keep {folder}")
    handle = os.open(keep, os.O_PATH | os.O_DIRECTORY)   # `keep` may lie inside `folder`, which the tmpfs hides
    try:
        _cover(libc, folder, folder, Path(f"/proc/self/fd/{handle}"))
    finally:
        os.close(handle)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.mkdir() if is_dir else target.touch()


def _new_root(libc: ctypes.CDLL, paths: Sequence[tuple[str, bool]], scratch: Path) -> None:
    """Mount paths under a top-level folder this machine lacks (such as /checkpoints): the pod gets a root of its
    own, a tmpfs holding every top-level entry of the machine's (bound in) and those paths (folder or file), and
    changes into it (chroot; the machine's root is untouched)."""
    root = scratch / "root"
    root.mkdir(parents=True)
    _cover(libc, Path("/"), root, None)
    for path, is_dir in paths:
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.mkdir(exist_ok=True) if is_dir else target.touch()
    _call(libc.chroot(str(root).encode()), "chroot into the pod's root")
    os.chdir("/")


def _volumes(libc: ctypes.CDLL, mounts: Sequence[tuple[Path, str, bool]], scratch: Path) -> None:
    """Each volume at its mount path (read-only where the mount says so), making room for paths that do not exist."""
    outside = [(path, source.is_dir()) for source, path, _ in mounts
               if len(Path(path).parts) > 1 and not (Path("/") / Path(path).parts[1]).exists()]
    if outside:
        _new_root(libc, outside, scratch)
    for source, path, read_only in mounts:
        target = Path(path)
        if not target.exists():
            _make_room(libc, target, scratch, source.is_dir())
        _mount(libc, str(source), target, None, MS_BIND | MS_REC, f"mount a volume at {target}")
        if read_only:
            _mount(libc, None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY, f"make {target} read-only")


def _service_account(libc: ctypes.CDLL, volume: Path | None, scratch: Path) -> None:
    """The token volume, read-only, exactly when the pod gets one; otherwise nothing there, even where this machine
    has one (when the simulator itself runs in a Kubernetes pod)."""
    target = SERVICE_ACCOUNT_DIR.resolve()
    if volume is None:
        if target.is_dir():
            _mount(libc, "tmpfs", target, "tmpfs", 0, "hide the machine's ServiceAccount volume")
        return
    if not target.is_dir():
        _make_room(libc, target, scratch)
    _mount(libc, str(volume), target, None, MS_BIND, "mount the ServiceAccount volume")
    _mount(libc, None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY, "make the ServiceAccount volume read-only")


def enter(strategy: str, hostname: str, hosts: Path, service_account: Path | None = None,
          mounts: Sequence[tuple[Path, str, bool]] = ()) -> None:
    """In a freshly forked (single-threaded) pod process: its own namespaces, hostname, /etc/hosts, the
    ServiceAccount token volume (`service_account`: the folder with token, ca.crt, namespace), if it gets one, and
    its volumes (`mounts`: source folder or file, mount path, read-only). Files it needs go next to `hosts`."""
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    _call(libc.unshare(STRATEGIES[strategy]), f"unshare({strategy})")
    if strategy == "user":  # map only ourselves: the pod runs as the same user as the simulator
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _call(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    _call(libc.mount(str(hosts).encode(), b"/etc/hosts", None, MS_BIND, None), "bind-mount /etc/hosts")
    name = hostname.encode()
    _call(libc.sethostname(name, len(name)), "sethostname")
    _service_account(libc, service_account, hosts.parent)
    _volumes(libc, mounts, hosts.parent)


@dataclass(frozen=True)
class Attempt:
    strategy: str
    step: str | None = None      # None: it worked
    errno: int = 0


def _try_in_child(strategy: str, hosts: Path) -> Attempt:
    """Enter the sandbox in a throwaway child (the caller's namespaces stay as they are)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        result = {"step": None, "errno": 0}
        try:
            enter(strategy, "jaxinfra-preflight", hosts)
        except SandboxError as err:
            result = {"step": err.step, "errno": err.errno}
        except BaseException as err:  # noqa: BLE001 - whatever it is, the parent must hear of it
            result = {"step": f"{type(err).__name__}: {err}", "errno": errno.EINVAL}
        finally:
            os.write(write, json.dumps(result).encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    found = json.loads(data or b'{"step": "the check died", "errno": 5}')
    return Attempt(strategy, found["step"], found["errno"])


@functools.cache
def preflight() -> str:
    """The way in that works on this machine; raises `Unavailable` with the cause and the fix. Asked once per
    process (jaxinfra simulate asks early, in its warm child, before JAX makes forking it slower)."""
    if sys.platform != "linux":
        raise Unavailable(*diagnose(sys.platform, os.getuid(), [], {}, 0))
    attempts = []
    for strategy in STRATEGIES:   # the machine's own hosts file bound over itself: nothing to write, nothing left over
        attempt = _try_in_child(strategy, Path("/etc/hosts"))
        if attempt.step is None:
            return strategy
        attempts.append(attempt)
    raise Unavailable(*diagnose(sys.platform, os.getuid(), attempts, read_sysctls(), seccomp_mode()))


def read_sysctls() -> dict[str, str]:
    out = {}
    for name, path in SYSCTLS.items():
        try:
            out[name] = Path(path).read_text().strip()
        except OSError:
            pass
    return out


def seccomp_mode() -> int:
    """This process's seccomp mode from /proc/self/status: 0 none, 1 strict, 2 filter (a container runtime's profile)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Seccomp:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def diagnose(platform: str, uid: int, attempts: list[Attempt], sysctls: Mapping[str, str], seccomp: int) -> tuple[str, str]:
    """(cause, fix) for a machine where no way in worked: the first known cause that applies."""
    sudo = "" if uid == 0 else ", or run it as root (sudo)"
    if platform != "linux":
        return (f"this is {platform}, not Linux: simulated pods get their own /etc/hosts and hostname from Linux namespaces",
                "run jaxinfra simulate in a Linux VM (Lima, WSL 2, a cloud VM) or a Linux container started with "
                "--cap-add SYS_ADMIN --security-opt apparmor=unconfined")
    user = next((a for a in attempts if a.strategy == "user"), None)
    if user is not None and user.step == "unshare(user)":
        if sysctls.get("user.max_user_namespaces") == "0":
            return ("user namespaces are disabled (user.max_user_namespaces = 0)",
                    f"sudo sysctl -w user.max_user_namespaces=15000{sudo}")
        if sysctls.get("kernel.unprivileged_userns_clone") == "0" and uid != 0:
            return ("unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)",
                    f"sudo sysctl -w kernel.unprivileged_userns_clone=1{sudo}")
    if uid != 0 and sysctls.get("kernel.apparmor_restrict_unprivileged_userns") == "1":
        return ("AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1, "
                "as on Ubuntu 24.04 and GitHub's ubuntu-24.04 runners)",
                f"sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0{sudo}")
    if seccomp == 2 and all(a.errno == errno.EPERM for a in attempts):
        return ("a seccomp filter forbids new namespaces (as a container runtime's default profile does, Docker's for one)",
                "run it where unshare(2) is allowed: start a Docker container with --cap-add SYS_ADMIN "
                "--security-opt apparmor=unconfined (or --security-opt seccomp=unconfined --security-opt apparmor=unconfined)")
    last = attempts[-1] if attempts else Attempt("user", "unshare(user)", errno.EPERM)
    if last.step in ("make / private", "bind-mount /etc/hosts") and last.errno in (errno.EPERM, errno.EACCES):
        return (f"{last.step} was denied ({os.strerror(last.errno)}) inside a new namespace: a security module "
                "(AppArmor's docker-default profile, SELinux) forbids mounts",
                "start the container with --security-opt apparmor=unconfined, or run on a host without that policy")
    return (f"{last.step}: {os.strerror(last.errno)}",
            f"allow unprivileged user namespaces (`unshare -U -m --map-root-user true` must succeed){sudo}")
