"""The pod sandbox: what the container runtime gives a pod's container before its program starts.

On a node every container has its own user, mount, UTS and PID namespaces (runc's libcontainer),
its own root filesystem, the pod's network namespace, and the identity and capabilities its
securityContext asks for. Each simulated pod gets the same, in its own process right after the fork:

- a user namespace. As root it maps every uid and gid to itself (a pod's uid 1000 is the machine's
  1000, as on a node), yet the pod's capabilities hold only inside it: a `privileged` container, or
  a root one, cannot reach past its own mounts, and the machine's mounts it sees stay read-only
  (the kernel locks them). Unprivileged, it maps the container's uid and gid to the caller's own
  (the only ids such a user may map without newuidmap), so `id` shows what securityContext asks;
  supplementary groups cannot be set then (setgroups is denied), which the report notes;
- a mount namespace holding the container's root (`rootfs`): the machine's system copy-on-write,
  the users' folders empty, its /etc/hosts (`dns.hosts_file`), its ServiceAccount token volume and
  its volumes, each at a path resolved inside the root, in containerd's order (by depth), with the
  simulator's own Python and sitecustomize put back over any volume that covers them; a hostPath of
  the node's /sys or /proc/sys shows the container's own, read-only; a UTS namespace with its hostname;
- a PID namespace, in which its program is PID 1 (`shim`) and mounts its own /proc;
- the simulation's pod network (`netns`), joined before any of this;
- its identity: runAsUser, runAsGroup, fsGroup and supplementalGroups, the bounding and effective
  capabilities containerd gives (`security`), no_new_privs for allowPrivilegeEscalation: false.

Created per pod, after the fork, because that is where it can succeed: unshare(CLONE_NEWUSER)
fails with EINVAL in a multithreaded process (unshare(2)), and the simulator's own process has
threads once JAX is imported. A forked child has one thread.

Two ways in (`preflight` picks the first that works, once per simulation, before anything runs):
- `privileged`: as root, a user namespace with the identity mapping of every id;
- `user`: anyone, where the kernel allows unprivileged user namespaces (the caller's ids only).
Where neither works, `Unavailable` says why and what fixes it; no faithful fallback exists
without these namespaces.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import json
import os
import stat
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jaxinfra.errors import MACHINE_LIMIT
from jaxinfra_sim.core import fds, paths
from jaxinfra_sim.core.errors import SandboxError, Unavailable
from jaxinfra_sim.core.security import CAPABILITIES, Security
from jaxinfra_sim.runtime import mount_points, rootfs, runc, subpath

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAPSET_VERSION_3 = 0x20080522

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the ServiceAccount token volume is mounted in every container that gets one."""

FLAGS = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID
STRATEGIES: tuple[str, ...] = ("privileged", "user")
"""The ways in, tried in this order: both unshare(2) FLAGS; they differ in the ids they map."""

UNAVAILABLE = MACHINE_LIMIT
"""Exit status of `jaxinfra simulate` when this machine cannot isolate pods (not a verdict on the job)."""

SYSCTLS = {
    "user.max_user_namespaces": "/proc/sys/user/max_user_namespaces",
    "kernel.unprivileged_userns_clone": "/proc/sys/kernel/unprivileged_userns_clone",
    "kernel.apparmor_restrict_unprivileged_userns": "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
}
"""Kernel settings that decide whether an unprivileged user may create user namespaces."""


@dataclass(frozen=True)
class Spec:
    """What one container's sandbox holds, decided in the simulator before the fork."""

    hostname: str
    scratch: Path  # the container's own folder (its root and layers are made in it)
    hosts: Path  # its /etc/hosts
    token: Path | None = None  # its ServiceAccount token volume (token, ca.crt, namespace), if any
    mounts: Sequence[tuple[subpath.Source, str, bool]] = ()  # its volumes: (source, mount path, read-only)
    image: Path | None = None  # the folder standing in for its image's top layer (--image NAME=DIR)
    workdir: str = "/"  # its workingDir, resolved inside its root
    security: Security = field(default_factory=Security)
    site: Path | None = None  # the simulator's sitecustomize, seen at rootfs.SITE
    views: Sequence[tuple[str, str]] = ()  # (its own path, mount path): hostPaths of the node's /sys and /proc/sys
    rootfs: Path | None = None  # its image unpacked (--image NAME=LAYOUT|ARCHIVE): its whole root, nothing of ours
    shifted: bool = False  # that image's owners are the container's ids already (root's cache): seen through no idmap


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


@dataclass(frozen=True)
class Handshake:
    """The pipes over which a pod's process asks its parent, still in the machine's user namespace, to write its
    id maps: a process may map more than its own id only from outside (user_namespaces(7); newuidmap's reason)."""

    ask: int  # the pod writes a byte once it has its user namespace
    done: int  # its parent writes a byte once the maps are written

    @staticmethod
    def pair(ask_r: int, ask_w: int, done_r: int, done_w: int) -> tuple[Handshake, Handshake]:
        """(the pod's ends, the parent's ends) of two pipes (`fds.pipes(2)`)."""
        return Handshake(ask_w, done_r), Handshake(ask_r, done_w)

    def close(self) -> None:
        fds.close((self.ask, self.done))


WHOLE_RANGE = "0 0 4294967295"
"""Every id as itself: the machine's own mapping, handed to a pod's user namespace by root."""


def grant(pid: int, parent: Handshake, timeout: float = 30.0) -> None:
    """In the parent of a pod created as root: once it asks, write its identity maps; it goes on when told.
    A pod that dies first is simply not answered."""
    if fds.readable([parent.ask], timeout):
        answer(pid, parent)


def answer(pid: int, parent: Handshake) -> None:
    """`grant` once the pod has asked (its ask end is readable), for a parent that waits on many pods at once; a pod
    that died before asking (the end at EOF) is not answered."""
    if not os.read(parent.ask, 1):
        return
    try:
        for name in ("uid_map", "gid_map"):
            Path(f"/proc/{pid}/{name}").write_text(WHOLE_RANGE)
    except OSError:
        pass  # the pod sees it failed: its maps are empty
    with contextlib.suppress(OSError):  # it died since it asked: nobody reads the answer
        os.write(parent.done, b"k")


def _namespaces(libc: ctypes.CDLL, strategy: str, security: Security, handshake: Handshake | None) -> None:
    """New user, mount, UTS and PID namespaces; the user namespace's ids: all of them as themselves (root, written
    by the parent over `handshake`), or the container's own onto the caller's; later mounts stay in this namespace."""
    uid, gid = os.getuid(), os.getgid()
    _call(libc.unshare(FLAGS), f"unshare({strategy})")
    if strategy == "privileged":
        if handshake is None or os.write(handshake.ask, b"m") != 1 or os.read(handshake.done, 1) != b"k":
            raise SandboxError("map the pod's ids", errno.EPERM)
        if os.getuid() != 0:
            raise SandboxError("write /proc/self/uid_map", errno.EPERM)
    else:
        _map_ids(security, uid, gid)
    _call(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")


def _map_ids(security: Security, uid: int, gid: int) -> None:
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{security.uid} {uid} 1")
    _write("/proc/self/gid_map", f"{security.gid} {gid} 1")


def _depth(path: str) -> int:
    """A mount path's number of parts, which orders the mounts (containerd @1754af31 internal/cri/opts/
    spec_linux_opts.go `withMounts`: "Sort mounts in number of parts", so a volume at /tmp never hides one at
    /tmp/x)."""
    return len(paths.normal(path).split("/"))


def _volumes(b: rootfs.Builder, spec: Spec, trusted: Sequence[runc.Trusted] = ()) -> None:
    """/etc/hosts, the token volume and each volume, as containerd mounts them: in order of their paths' depth (a
    stable sort, so the kubelet's order otherwise), each at its path resolved inside the root, each bound from a
    descriptor (`subpath.Source.open`: beneath the folder the simulator made, no symlink followed) through
    /proc/self/fd, never from its path string (the kubelet's doBindSubPath). A source that is no longer there as it
    was prepared (a container swapped a folder for a symlink since) fails the container's start, as the kubelet's
    CreateContainerConfigError does. Each is bound onto its mount point opened inside the root
    (`rootfs.Builder.opened`): one that lands at or over a path the OCI runtime takes as it finds it while it sets the
    container up (`trusted`: a symlink another container left in a shared volume can bring it to /dev) is refused, as
    it is before anything starts where the manifest names such a path (`runc.refuse_holes`). Then what is the
    simulator's own, wherever a volume went over it: its sitecustomize and its Python, put back on top (an image's own
    Python is not in the way of a volume at /tmp or /root; the simulator's may live there)."""
    mounts = [(path, source, read_only, True) for source, path, read_only in spec.mounts]
    if spec.token is not None:
        mounts.append((SERVICE_ACCOUNT_DIR, subpath.Source(spec.token.parent, spec.token.name, "token"), True, False))
    mounts.append(("/etc/hosts", subpath.Source(spec.hosts.parent, spec.hosts.name, "/etc/hosts"), False, False))
    for path, source, read_only, recursive in sorted(mounts, key=lambda m: _depth(m[0])):
        target = rootfs.join(b.root, path)
        try:
            fd = source.open()
        except OSError as err:
            raise SandboxError(
                f"CreateContainerConfigError: failed to prepare {source.what or source.path}: {err.strerror or err}",
                err.errno or errno.EIO,
            ) from None
        try:
            mount_points.place(b, target, stat.S_ISDIR(os.fstat(fd).st_mode))
            with b.opened(target) as at:
                why = runc.refusal(trusted, f"volume {source.what} (mountPath {path})", at.path)
                if why is not None:
                    raise SandboxError("; fix: ".join(why), errno.EPERM)
                b.bind(subpath.proc_path(fd), at, read_only=read_only, recursive=recursive, volume=True)
        finally:
            os.close(fd)
    if spec.site is not None:
        target = rootfs.join(b.root, rootfs.SITE)
        mount_points.place(b, target, True)
        b.bind(str(spec.site), target, read_only=True, recursive=False)
    covered = [paths.normal(path) for _, path, _ in spec.mounts]
    for python in rootfs.machine().python if spec.rootfs is None else ():
        if any(python == c or python.startswith(c.rstrip("/") + "/") for c in covered):
            target = b.root / python.lstrip("/")
            mount_points.place(b, target, True)
            b.overlay([python], target)


def _views(libc: ctypes.CDLL, root: Path, views: Sequence[tuple[str, str]]) -> None:
    """In the container's PID 1, its own /proc mounted: each hostPath of the node's /sys or /proc/sys shown as the
    container's own, read-only (the machine's kernel settings are never written through it)."""
    b = rootfs.Builder(libc, root, root.parent / "layers", read_only=False)
    for own, path in views:
        source, target = rootfs.join(root, own), rootfs.join(root, path)
        if source.exists() and source.is_dir() == target.is_dir():
            b.bind(str(source), target, read_only=True, recursive=own.startswith("/sys"))


def enter(strategy: str, spec: Spec, handshake: Handshake | None = None) -> str:
    """In a freshly forked (single-threaded) pod process: its own namespaces, hostname and root filesystem, built
    under `spec.scratch` (nothing of the machine changes). Returns the container's working directory, as the
    container sees it. The container's PID 1, forked next, calls `start`."""
    libc = _libc()
    _namespaces(libc, strategy, spec.security, handshake)
    name = spec.hostname.encode()
    _call(libc.sethostname(name, len(name)), "sethostname")
    return build(libc, spec)


def node_mounts(subordinate: tuple[tuple[int, int], tuple[int, int]] | None = None, join: str | None = None) -> None:
    """In a pod's process that runs its container under the OCI runtime: a mount namespace of its own, in which its
    root is built and its volumes bound (nothing of the machine's mounts changes). Root makes it at once. An
    unprivileged user, inside the pods' network's user namespace (holding every capability there), makes a user
    namespace of its own too, in which it is root: the caller's uid and gid are its 0, and with `subordinate` ranges
    (mapped by that namespace) its 1 and on are theirs, written by a child left outside (a process may map more than
    its own id only from the parent namespace, user_namespaces(7)), as rootless Podman's user namespace is made.
    `join` (unprivileged): the user namespace of the pod's pause (`kubelet.podsandbox`), made that way already, which
    it joins instead (as the owner of that namespace's parent it may), the mount namespace made in it."""
    libc = _libc()
    if os.geteuid() == 0 or join is not None:
        if join is not None:
            fd = os.open(join, os.O_RDONLY | os.O_CLOEXEC)
            try:
                _call(libc.setns(fd, CLONE_NEWUSER), "setns(the pod's user namespace)")
            finally:
                os.close(fd)
        _call(libc.unshare(CLONE_NEWNS), "unshare(mount)")
        _call(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
        return
    uid, gid = os.getuid(), os.getgid()
    helper = None
    if subordinate is not None:
        ask_r, ask_w = os.pipe()
        helper = os.fork()
        if helper == 0:
            code = 1
            try:
                os.close(ask_w)
                if os.read(ask_r, 1) == b"m":
                    target = os.getppid()
                    (us, uc), (gs, gc) = subordinate
                    Path(f"/proc/{target}/uid_map").write_text(f"0 {uid} 1\n1 {us} {uc}\n")
                    Path(f"/proc/{target}/gid_map").write_text(f"0 {gid} 1\n1 {gs} {gc}\n")
                    code = 0
            finally:
                os._exit(code)
        os.close(ask_r)
    made = libc.unshare(CLONE_NEWUSER | CLONE_NEWNS)
    error = ctypes.get_errno()
    if helper is not None:
        os.write(ask_w, b"m" if made == 0 else b"x")
        os.close(ask_w)
        _, status = os.waitpid(helper, 0)
        if made == 0 and status != 0:
            raise SandboxError("map the pod's ids", errno.EPERM)
    if made != 0:
        raise SandboxError("unshare(user, mount)", error)
    if helper is None:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {uid} 1")
        _write("/proc/self/gid_map", f"0 {gid} 1")
    _call(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")


def start(strategy: str, spec: Spec, cwd: str) -> None:
    """In the container's PID 1: its /proc, its root (pivoted into), its working directory, its identity."""
    libc = _libc()
    root = spec.scratch / "root"
    try:
        rootfs.proc(libc, root)
        _views(libc, root, spec.views)
        rootfs.pivot(libc, root)
    except rootfs.RootError as err:
        raise SandboxError(err.step, err.errno or errno.EIO) from None
    os.chdir(cwd)
    become_user(libc, strategy, spec.security)


def become_user(libc: ctypes.CDLL, strategy: str, s: Security) -> None:
    """The process's uid, gid, groups and capabilities, in the order runc sets them (libcontainer/init_linux.go
    finalizeNamespace: bounding set, then ids, then the capability sets; no_new_privs before the program)."""
    keep = Security.mask(s.bounding)
    for number in range(max(CAPABILITIES.values()) + 1):
        if not keep & (1 << number):
            libc.prctl(PR_CAPBSET_DROP, number, 0, 0, 0)  # EINVAL for a number this kernel lacks: nothing to drop
    try:
        if strategy == "privileged":
            os.setgroups(list(s.groups))
        os.setresgid(s.gid, s.gid, s.gid)
        os.setresuid(s.uid, s.uid, s.uid)
    except OSError as err:
        raise SandboxError(f"set the container's ids ({s.uid}:{s.gid})", err.errno or errno.EPERM) from None
    held = Security.mask(s.effective)
    header = (ctypes.c_uint32 * 2)(CAPSET_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)(held & 0xFFFFFFFF, held & 0xFFFFFFFF, 0, held >> 32, held >> 32, 0)
    _call(libc.capset(header, data), "capset")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if s.no_new_privs:
        _call(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def unapplied(strategy: str, s: Security, runtime: bool = False) -> list[str]:
    """What of a container's securityContext this way in cannot give it, for the report; `runtime`: it runs under
    the OCI runtime, whose user namespace maps the caller's subordinate ids (`node_mounts`), groups included."""
    out = list(s.notes)
    if strategy == "user" and s.groups and not runtime:
        out.append(
            f"supplementary groups {list(s.groups)} (fsGroup, supplementalGroups) not set: setgroups(2) is denied "
            "in an unprivileged user namespace without newuidmap"
        )
    if strategy == "user" and s.fs_group is not None:
        out.append("fsGroup ownership of volumes not applied: only root can give files away")
    if s.privileged:
        out.append(
            "privileged: its capabilities hold inside the pod's user namespace only; the machine's devices, /sys "
            "and /proc/sys stay read-only"
        )
    return out


@dataclass(frozen=True)
class Attempt:
    strategy: str
    step: str | None = None  # None: it worked
    errno: int = 0


def _rehearse(strategy: str, handshake: Handshake) -> None:
    """A whole container's start, in a throwaway process: its root built in a tmpfs over the temp folder (in its own
    mount namespace only: nothing is written to the machine), PID 1's /proc and pivot, a non-root identity."""
    libc = _libc()
    security = Security(uid=0 if strategy == "user" else 65534, gid=0 if strategy == "user" else 65534)
    _namespaces(libc, strategy, security, handshake)
    _call(libc.mount(b"tmpfs", tempfile.gettempdir().encode(), b"tmpfs", 0, b"mode=0755"), "tmpfs for the rehearsal")
    scratch = Path(tempfile.gettempdir()) / "preflight"
    scratch.mkdir()
    (scratch / "hosts").write_text("127.0.0.1 localhost\n")
    spec = Spec("jaxinfra-preflight", scratch, scratch / "hosts", security=security)
    cwd = build(libc, spec)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            start(strategy, spec, cwd)
        except SandboxError as err:
            os.write(write, json.dumps({"step": err.step, "errno": err.errno}).encode())
        except BaseException as err:  # noqa: BLE001 - never back into the caller's code from this fork
            os.write(write, json.dumps({"step": f"{type(err).__name__}: {err}", "errno": errno.EINVAL}).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        failed = pipe.read()
    os.waitpid(pid, 0)
    if failed:  # the step that failed in PID 1, for `diagnose`
        found = json.loads(failed)
        raise SandboxError(found["step"], found["errno"])


def build(
    libc: ctypes.CDLL,
    spec: Spec,
    owner: tuple[int, int] | None = None,
    runtime: bool = False,
    idmap: int | None = None,
    trusted: Sequence[runc.Trusted] = (),
) -> str:
    """The container's root under `spec.scratch`, in a mount namespace of its own already; its working directory.
    `owner`: the machine's ids of the container's root, where they are not the machine's (`rootfs.Builder`);
    `runtime`: the OCI runtime makes its device nodes (`runc.config`); `idmap`: the machine's files seen through it
    (`rootfs.Builder`); `trusted`: what that runtime takes as it finds it (`runc.Runtime.trusted`), where no volume
    may land."""
    root, layers = spec.scratch / "root", spec.scratch / "layers"
    for folder in (root, layers):
        folder.mkdir(parents=True, exist_ok=True)
    try:
        b = rootfs.Builder(libc, root, layers, spec.security.read_only_root, owner, idmap)
        os.chmod(layers, 0o700)  # every layer's writes on disk, in the container's folder: removed with it
        if spec.rootfs is not None:
            b.image(spec.rootfs, spec.shifted)
        else:
            b.system(rootfs.machine(), spec.image)
        b.devices(runtime)
        b.sysfs(rootfs.machine())
        _volumes(b, spec, trusted)
        for own, path in spec.views:  # their mount points, made while the layers above may still be written
            mount_points.place(b, rootfs.join(root, path), os.path.isdir(own))  # the machine's kernel: the container's
        cwd = rootfs.join(root, spec.workdir)
        mount_points.place(b, cwd, True)
        b.finish()
    except rootfs.RootError as err:
        raise SandboxError(err.step, err.errno or errno.EIO) from None
    return "/" + str(cwd.relative_to(root)).lstrip(".")


def _try_in_child(strategy: str) -> Attempt:
    """Rehearse a container's start in a throwaway child (the caller's namespaces stay as they are)."""
    read, write = os.pipe()
    mine, theirs = Handshake.pair(*fds.pipes(2))
    pid = os.fork()
    if pid == 0:
        result: dict[str, str | int | None] = {"step": None, "errno": 0}
        try:
            theirs.close()
            _rehearse(strategy, mine)
        except SandboxError as err:
            result = {"step": err.step, "errno": err.errno}
        except BaseException as err:  # noqa: BLE001 - whatever it is, the parent must hear of it
            result = {"step": f"{type(err).__name__}: {err}", "errno": errno.EINVAL}
        finally:
            os.write(write, json.dumps(result).encode())
            os._exit(0)
    os.close(write)
    mine.close()
    if strategy == "privileged":
        grant(pid, theirs, timeout=10.0)
    theirs.close()
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
    for strategy in STRATEGIES if os.geteuid() == 0 else STRATEGIES[1:]:
        attempt = _try_in_child(strategy)
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
    """This process's seccomp mode from /proc/self/status: 0 none, 1 strict, 2 filter (a container runtime's
    profile)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Seccomp:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def diagnose(
    platform: str, uid: int, attempts: list[Attempt], sysctls: Mapping[str, str], seccomp: int
) -> tuple[str, str]:
    """(cause, fix) for a machine where no way in worked: the first known cause that applies."""
    sudo = "" if uid == 0 else ", or run it as root (sudo)"
    if platform != "linux":
        return (
            f"this is {platform}, not Linux: simulated pods are Linux processes in Linux namespaces",
            "run jaxinfra simulate in a Linux VM (Lima, WSL 2, a cloud VM) or a Linux container started with "
            "--cap-add SYS_ADMIN --security-opt apparmor=unconfined, after `jaxinfra doctor --install` there",
        )
    user = next((a for a in attempts if a.strategy == "user"), None)
    if user is not None and user.step == "unshare(user)":
        if sysctls.get("user.max_user_namespaces") == "0":
            return (
                "user namespaces are disabled (user.max_user_namespaces = 0)",
                f"sudo sysctl -w user.max_user_namespaces=15000{sudo}",
            )
        if sysctls.get("kernel.unprivileged_userns_clone") == "0" and uid != 0:
            return (
                "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)",
                f"sudo sysctl -w kernel.unprivileged_userns_clone=1{sudo}",
            )
    if uid != 0 and sysctls.get("kernel.apparmor_restrict_unprivileged_userns") == "1":
        return (
            "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1, "
            "as on Ubuntu 24.04 and GitHub's ubuntu-24.04 runners)",
            f"sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0{sudo}",
        )
    if seccomp == 2 and all(a.errno == errno.EPERM for a in attempts):
        return (
            "a seccomp filter forbids new namespaces (as a container runtime's default profile does, Docker's for one)",
            "run it where unshare(2) is allowed: start a Docker container with --cap-add SYS_ADMIN "
            "--security-opt apparmor=unconfined "
            "(or --security-opt seccomp=unconfined --security-opt apparmor=unconfined)",
        )
    last = attempts[-1] if attempts else Attempt("user", "unshare(user)", errno.EPERM)
    mounting = ("make / private", "tmpfs at", "bind ", "overlay at", "mount /proc", "make ", "mask ", "pivot_root")
    if (last.step or "").startswith(mounting) and last.errno in (errno.EPERM, errno.EACCES):
        return (
            f"{last.step} was denied ({os.strerror(last.errno)}) inside a new namespace: a security module "
            "(AppArmor's docker-default profile, SELinux) forbids mounts",
            "start the container with --security-opt apparmor=unconfined, or run on a host without that policy",
        )
    return (
        f"{last.step}: {os.strerror(last.errno)}",
        f"allow unprivileged user namespaces (`unshare -U -m --map-root-user true` must succeed){sudo}",
    )
