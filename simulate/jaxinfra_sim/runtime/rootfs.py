"""A container's root filesystem, built from this machine's own system instead of an image.

On a node, runc gives each container a root of its own (libcontainer/rootfs_linux.go: the image's
layers under an overlay, `/proc` of its PID namespace, a small `/dev`, `/sys` read-only, masked and
read-only `/proc` paths) and pivots into it. The simulator does the same in each pod's mount
namespace, with this machine's system standing in for the image:

- `/` is a folder of the container's writable layer; each top-level folder of the machine appears
  copy-on-write (an overlay whose upper layer is the container's: a write, a `pip install`, lands
  there, on disk, and is removed with the container). A folder with other mounts beneath it is
  bound read-only instead (an overlay cannot take it in a user namespace).
- Folders that hold the machine's users' data are empty folders of the writable layer instead:
  `/root`, `/home`, `/tmp`, `/var/tmp`, `/run`, `/mnt`, `/media`, the caller's `$HOME` and the
  folder simulations keep their scratch files in; the simulator's Python, where it lies inside one
  of those, is put back (copy-on-write) at the same path, so the pods' interpreter and libraries
  work. `/etc/shadow`,
  `/etc/gshadow` and the SSH host keys are empty files.
- `--image IMAGE=DIR` is the image's top layer: its files appear at the same paths in the root,
  over the machine's own (DIR's `train.py` is `/train.py`; with `workingDir: /app`, DIR's `app/`),
  copy-on-write, so a pod's writes never reach DIR, and its symlinks resolve inside the container.
- `/dev` holds null, zero, full, random, urandom and tty (bound from the machine), shm (a tmpfs)
  and the usual links: a tmpfs made afresh at each start (containerd @ 301026e5 pkg/oci/mounts.go
  defaultMounts), neither in the writable layer nor on a volume, so that only the runtime puts its device nodes
  there; `/sys` is the machine's, read-only throughout; `/proc` is mounted by the
  container's PID 1 for its own PID namespace, with runc's masked paths (kcore, keys, timer_list,
  sched_debug, ...) hidden and its read-only paths (sys, sysrq-trigger, irq, bus, fs) read-only —
  also for `privileged` containers, whose capabilities hold only inside the pod's user namespace.
- `readOnlyRootFilesystem`: every layer of the root is read-only; volumes keep their own mode.

Every path a manifest names (a volume's mountPath, workingDir) is resolved inside the root, its
symlinks read as the container would (`join`), before anything is created or mounted there; each mount
point is then opened there by descriptor (`Builder.opened`, `root_paths`) and mounted through it, so a
folder another container swaps for a symlink in a shared volume meanwhile never leads a mount out.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import platform
import shutil
import struct
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from jaxinfra_sim.core.errors import RootError
from jaxinfra_sim.runtime import root_paths
from jaxinfra_sim.runtime.root_paths import MAX_LINKS, Opened

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MNT_DETACH = 2

SYSTEM = ("bin", "etc", "lib", "lib32", "lib64", "libx32", "sbin", "usr")
"""The machine's top-level entries a container's root takes (an allowlist: the system an image would hold); every
other top-level folder of the machine is absent, but those in `HIDDEN`."""
HIDDEN = ("root", "home", "tmp", "run", "mnt", "media", "var")
"""Top-level folders every image has, which a container sees empty: its users' files and other processes' state."""
HIDDEN_NESTED = ("var/tmp",)
SPECIAL = ("proc", "dev", "sys")
"""Built for the container, never taken from the machine as they are."""
SECRETS = ("etc/shadow", "etc/shadow-", "etc/gshadow", "etc/gshadow-", "etc/security/opasswd")
SECRET_GLOBS = ("etc/ssh/ssh_host_*key",)
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
    "ptmx": "pts/ptmx",
    "core": "/proc/kcore",
}
MASKED = (
    "proc/acpi",
    "proc/asound",
    "proc/kcore",
    "proc/keys",
    "proc/latency_stats",
    "proc/timer_list",
    "proc/timer_stats",
    "proc/sched_debug",
    "proc/scsi",
    "sys/firmware",
    "sys/devices/virtual/powercap",
)
"""containerd's default masked paths (pkg/oci/spec.go populateDefaultUnixSpec)."""
READ_ONLY = ("proc/bus", "proc/fs", "proc/irq", "proc/sys", "proc/sysrq-trigger")
"""containerd's default read-only paths, same source."""
SITE = "/run/jaxinfra/site"
"""Where the simulator's own sitecustomize (for --run-command pods) is seen inside a container."""
COPY_LIMIT = 16 << 20
"""A top-level file of the image or the machine up to this size is copied into the container's root; larger, bound."""
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
"""pivot_root(2) has no glibc wrapper."""
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442
"""The new mount API's calls (the same number on every architecture: include/uapi/asm-generic/unistd.h)."""
AT_FDCWD, AT_EMPTY_PATH, AT_RECURSIVE = -100, 0x1000, 0x8000
OPEN_TREE_CLONE, O_CLOEXEC, MOVE_MOUNT_F_EMPTY_PATH, MOUNT_ATTR_IDMAP = 1, 0o2000000, 4, 0x00100000
CLONE_NEWUSER = 0x10000000
IDS = 65536
"""The ids a container's user namespace maps (`runc.ID_COUNT`)."""


def id_namespace(libc: ctypes.CDLL, first: int, count: int) -> int:
    """A descriptor of a user namespace mapping ids 0..count-1 to the machine's first.. (for `Builder.mapped`): made by
    a child that unshares one and waits, its maps written from here (root), the child then gone."""
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(done_w)
        code = 1
        try:
            if libc.unshare(CLONE_NEWUSER) == 0:
                os.write(ready_w, b"u")
                os.read(done_r, 1)
                code = 0
        finally:
            os._exit(code)
    os.close(ready_w)
    os.close(done_r)
    try:
        if os.read(ready_r, 1) != b"u":
            raise RootError("make the user namespace of the container's ids", errno.EPERM)
        for name in ("uid_map", "gid_map"):
            Path(f"/proc/{pid}/{name}").write_text(f"0 {first} {count}")
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as err:
        raise RootError("map the container's ids", err.errno or errno.EPERM) from None
    finally:
        os.close(done_w)
        os.close(ready_r)
        os.waitpid(pid, 0)


@dataclass(frozen=True)
class Machine:
    """What the machine's root holds, read once per simulation (the same for every pod)."""

    entries: tuple[tuple[str, str], ...]  # top-level (name, "dir" | "file" | "link:<target>")
    mounted: frozenset[str]  # top-level folders with other mounts beneath them
    hidden: tuple[str, ...]  # absolute paths shown empty (HIDDEN, $HOME, the scratch folder)
    python: tuple[str, ...]  # the simulator's Python inside hidden paths, put back at the same path
    sys_mounts: tuple[str, ...]  # mounts beneath /sys, each made read-only


def _mount_points() -> list[str]:
    points = []
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            if len(fields) > 4:
                points.append(fields[4].encode().decode("unicode_escape"))
    except OSError:
        pass
    return points


def _python_paths() -> set[str]:
    """Folders the simulator's Python runs from: its prefixes, its import path, its own packages (an editable
    install)."""
    paths = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        str(Path(sys.executable).resolve().parent),
    }
    here = os.getcwd()
    paths |= {p for p in sys.path if p and p != here and os.path.isdir(p)}  # not the caller's folder (`python -m`)
    for name in ("jaxinfra", "jaxinfra_sim"):
        module = sys.modules.get(name)
        paths |= set(getattr(module, "__path__", []) or [])
    return {os.path.realpath(p) for p in paths} | paths


def _inside(path: str, folders: Iterable[str]) -> bool:
    """Whether `path` is one of `folders` or lies beneath one."""
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _outermost(paths: Iterable[str]) -> tuple[str, ...]:
    """Paths, without those inside another of them."""
    out: list[str] = []
    for p in sorted(set(paths), key=lambda p: (p.count("/"), p)):
        if not _inside(p, out):
            out.append(p)
    return tuple(out)


@functools.cache
def machine() -> Machine:
    entries = []
    for entry in sorted(os.scandir("/"), key=lambda e: e.name):
        if entry.name not in SYSTEM + HIDDEN:
            continue
        kind = f"link:{os.readlink(entry.path)}" if entry.is_symlink() else "dir" if entry.is_dir() else "file"
        entries.append((entry.name, kind))
    system = [os.path.realpath(f"/{name}") for name in SYSTEM if os.path.exists(f"/{name}")]
    points = _mount_points()
    # A folder with mounts beneath it: an overlay of it in a user namespace would show what they cover (EINVAL).
    mounted = frozenset(n for n, _ in entries if any(_inside(p, [f"/{n}"]) and p != f"/{n}" for p in points))
    home = os.path.realpath(os.environ.get("HOME") or "/")
    scratch = os.path.realpath(tempfile.gettempdir())
    hidden = _outermost(
        [
            *(f"/{n}" for n in HIDDEN),
            *(f"/{n}" for n in HIDDEN_NESTED),
            *(p for p in (home, scratch) if p != "/" and not _inside(p, ["/usr", "/etc"])),
        ]
    )
    python = _outermost(p for p in _python_paths() if not _inside(p, system) and os.path.isdir(p))
    sys_mounts = tuple(p for p in points if p.startswith("/sys/"))
    return Machine(tuple(entries), mounted, hidden, python, sys_mounts)


def join(root: Path, path: str) -> Path:
    """`path` as the container resolves it, inside `root`: `..` stops at the root, a symlink's target (absolute or
    not) is read inside the root too. What does not exist yet is joined as written."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    resolved: list[str] = []
    links = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        candidate = root.joinpath(*resolved, part)
        if candidate.is_symlink():
            links += 1
            if links > MAX_LINKS:
                raise RootError(f"resolve {path}", errno.ELOOP)
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = []
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
            continue
        resolved.append(part)
    return root.joinpath(*resolved)


class Builder:
    """Builds one container's root under `root` (an empty folder), in the pod's own mount namespace."""

    def __init__(
        self,
        libc: ctypes.CDLL,
        root: Path,
        layers: Path,
        read_only: bool,
        owner: tuple[int, int] | None = None,
        idmap: int | None = None,
    ):
        """`owner`: this machine's (uid, gid) for the container's root, which owns the folders made for it (its
        `/`, the users' empty folders, `/dev`), where its ids are not the machine's; `idmap`: then a user namespace
        (a descriptor) whose id maps the machine's files are seen through, so that what the machine's root owns the
        container's root owns (`id_namespace`)."""
        self.libc, self.root, self.layers, self.read_only, self.owner = libc, root, layers, read_only, owner
        self.idmap = idmap
        self.count = 0

    @contextlib.contextmanager
    def at(self, path: Path | Opened, make: str = "") -> Iterator[Opened | str]:
        """`path` as mount(2) may be given it: inside the root, `opened` there; elsewhere (the layers' folder, the
        machine's own) the path itself."""
        if isinstance(path, Opened) or not path.is_relative_to(self.root):
            yield path if isinstance(path, Opened) else str(path)
            return
        with self.opened(path, make) as found:
            yield found

    @contextlib.contextmanager
    def opened(self, path: Path, make: str = "") -> Iterator[Opened]:
        """`path`, inside the root, opened there as the container resolves it (`root_paths.open_in`, `make` what is
        missing, owned by `owner`): nothing a container swaps in meanwhile leads out of the root."""
        try:
            top = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                found = root_paths.open_in(top, str(path.relative_to(self.root)), make, self.owner)
            finally:
                os.close(top)
        except OSError as err:
            raise RootError(f"{'create' if make else 'open'} {path}", err.errno or errno.EIO) from None
        try:
            yield found
        finally:
            found.close()

    def mount(
        self, source: str | None, target: Path | Opened, fstype: str | None, flags: int, data: str | None, step: str
    ) -> None:
        """mount(2), its target (and a bind's source) inside the root by descriptor (`at`)."""
        inside = source is not None and flags & MS_BIND and source.startswith("/")
        origin = self.at(Path(source)) if source is not None and inside else contextlib.nullcontext(source)
        with self.at(target) as where, origin as what:
            if (
                self.libc.mount(
                    mountable(what).encode() if what else None,
                    mountable(where).encode(),
                    fstype.encode() if fstype else None,
                    flags,
                    data.encode() if data else None,
                )
                != 0
            ):
                raise RootError(step, ctypes.get_errno())

    def tmpfs(self, target: Path | Opened, mode: str = "0755", owned: bool = True) -> None:
        """Memory, where a node's container has memory too (its /dev, /dev/shm)."""
        data = f"mode={mode}" + (f",uid={self.owner[0]},gid={self.owner[1]}" if self.owner and owned else "")
        self.mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, data, f"tmpfs at {target}")

    def writable(self, target: Path | Opened, mode: int = 0o755) -> None:
        """A fresh empty folder of the container's writable layer at `target`, nosuid and nodev: on disk, in
        `layers` (as containerd's overlayfs snapshotter keeps each container's upper layer in a folder of its own
        under its root on the node's disk), so what the container writes there is ephemeral storage, counted by the
        eviction manager, never memory charged to the container."""
        self.count += 1
        folder = self.layers / f"{self.count}d"
        folder.mkdir()
        os.chmod(folder, mode)
        if self.owner is not None:
            os.chown(folder, self.owner[0], self.owner[1])
        self.bind(str(folder), target, read_only=False, recursive=False, volume=True)

    def bind(
        self, source: str, target: Path | Opened, read_only: bool, recursive: bool = True, volume: bool = False
    ) -> None:
        """`source` at `target`; a `volume` nosuid and nodev, as the issue's hostile manifests need (containerd adds
        neither): no setuid program or device node a container leaves in one works through it. Where it takes flags
        it is bound and remounted first at a mount point of the layers' folder, which no container reaches, then
        bound at `target` with them in one step: nothing is ever remounted by a path inside the root, where a swap
        could leave it without them."""
        rec = MS_REC if recursive else 0
        flags = (MS_NOSUID | MS_NODEV if volume else 0) | (MS_RDONLY if read_only else 0)
        if flags:
            stage = Path(tempfile.mkdtemp(prefix="s", dir=self.layers))
            if not os.path.isdir(source):  # a file's mount point is a file
                stage.rmdir()
                stage.touch()
            self.mount(source, stage, None, MS_BIND | rec, None, f"bind {source}")
            self.mount(None, stage, None, MS_REMOUNT | MS_BIND | flags, None, f"make {source} nosuid, nodev, ro")
            source = str(stage)
        self.mount(source, target, None, MS_BIND | rec, None, f"bind {source} at {_shown(target)}")

    def remount_read_only(self, target: Path) -> None:
        self.mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None, f"make {target} read-only")

    def mapped(self, source: str) -> str:
        """`source` as the container's ids see it: an idmapped mount of it (mount_setattr(2) MOUNT_ATTR_IDMAP, as
        containerd gives a user-namespaced pod's layers), made in the layers' folder; `source` itself without an
        idmap."""
        if self.idmap is None:
            return source
        self.count += 1
        target = self.layers / f"{self.count}m"
        self.place(target, os.path.isdir(source))
        fd = self.libc.syscall(SYS_OPEN_TREE, AT_FDCWD, source.encode(), OPEN_TREE_CLONE | O_CLOEXEC | AT_RECURSIVE)
        if fd < 0:
            raise RootError(f"clone {source}", ctypes.get_errno())
        try:
            attr = ctypes.create_string_buffer(struct.pack("QQQQ", MOUNT_ATTR_IDMAP, 0, 0, self.idmap))
            if self.libc.syscall(SYS_MOUNT_SETATTR, fd, b"", AT_EMPTY_PATH | AT_RECURSIVE, attr, len(attr.raw)) != 0:
                raise RootError(f"idmap {source} (its filesystem must allow idmapped mounts)", ctypes.get_errno())
            if self.libc.syscall(SYS_MOVE_MOUNT, fd, b"", AT_FDCWD, str(target).encode(), MOVE_MOUNT_F_EMPTY_PATH):
                raise RootError(f"mount {source} at {target}", ctypes.get_errno())
        finally:
            os.close(fd)
        return str(target)

    def overlay(self, lowers: Sequence[str], target: Path, mapped: bool = True) -> None:
        """Copy-on-write over `lowers` (the first on top), seen through the idmap unless not `mapped`; read-only (no
        upper layer) under readOnlyRootFilesystem."""
        lowers = [self.mapped(s) for s in lowers] if mapped else list(lowers)
        lower = ":".join(s.replace(":", "\\:") for s in lowers)
        if self.read_only and len(lowers) == 1:
            self.bind(lowers[0], target, read_only=True)
            return
        if self.read_only:
            self.mount("overlay", target, "overlay", MS_RDONLY, f"userxattr,lowerdir={lower}", f"overlay at {target}")
            return
        self.count += 1
        upper, work = self.layers / f"{self.count}u", self.layers / f"{self.count}w"
        upper.mkdir()
        work.mkdir()
        if self.idmap is not None:  # the merged folder's own owner and mode are its upper layer's: the top lower's
            top = os.stat(lowers[0])
            os.chown(upper, top.st_uid, top.st_gid)
            os.chmod(upper, top.st_mode & 0o7777)
        self.mount(
            "overlay",
            target,
            "overlay",
            0,
            f"userxattr,lowerdir={lower},upperdir={upper},workdir={work}",
            f"overlay at {target}",
        )

    def place(self, target: Path, is_dir: bool) -> None:
        """Create a mount point at `target` (inside the root, as the container resolves it: `at`); what is made inside
        the root is the container's root's (`owner`), as the runtime makes it, where the container's ids are not the
        machine's."""
        if not target.is_relative_to(self.root):  # the layers' folder: the simulator's own
            if is_dir:
                target.mkdir()
            else:
                target.touch()
            return
        with self.opened(target, "dir" if is_dir else "file"):
            pass

    def system(self, m: Machine, image: Path | None) -> None:
        """The machine's top level, its hidden folders and its Python; the image's files over them."""
        self.writable(self.root)
        emptied: list[Path] = []  # the users' folders, read-only under readOnlyRootFilesystem once the Python is back
        own = {e.name: e for e in os.scandir(image)} if image is not None else {}
        names = {name: kind for name, kind in m.entries}
        for name in sorted(set(names) | {n for n in own if n not in SPECIAL}):
            target, kind, mine = self.root / name, names.get(name), own.get(name)
            if mine is not None and not mine.is_dir(follow_symlinks=False):
                self._entry(target, mine.path, "link" if mine.is_symlink() else "file")
            elif mine is None and kind != "dir":
                self._entry(target, f"/{name}", kind or "file")
            else:
                self.place(target, True)
                hidden = f"/{name}" in m.hidden
                host = [] if hidden or kind is None else [os.path.realpath(f"/{name}")]
                if host and name in m.mounted:
                    self.bind(self.mapped(host[0]), target, read_only=True)  # no image files merged over it then
                elif mine is not None or host:
                    self.overlay(([mine.path] if mine is not None else []) + host, target)
                else:
                    self.writable(target, 0o1777 if name == "tmp" else 0o755)
                    emptied.append(target)
        for folder in m.hidden:
            target = join(self.root, folder)
            if folder.count("/") > 1 and target.parent.is_dir() and not target.is_symlink():
                self.place(target, True)
                self.writable(target, 0o1777 if folder.endswith("tmp") else 0o755)
                emptied.append(target)
        for path in m.python:
            target = self.root / path.lstrip("/")
            self.place(target, True)
            self.overlay([path], target)
        for target in emptied if self.read_only else []:  # before the volumes: one mounted there keeps its own mode
            self.remount_read_only(target)
        for secret in SECRETS:
            self._blank(self.root / secret)
        for pattern in SECRET_GLOBS:
            for found in sorted(self.root.glob(pattern)):
                self._blank(found)

    def image(self, unpacked: Path, shifted: bool = False) -> None:
        """An image's unpacked layers as the whole root, copy-on-write (its writes in a layer of this container's
        own, as containerd's overlayfs snapshotter gives each container an upper layer over the image's): nothing of
        the machine's is in it, neither its programs nor its Python. Under readOnlyRootFilesystem too, so that the
        mount points made next (`/dev`, `/proc`, `/etc/hosts`, volumes) land in that layer: `finish` makes it
        read-only. `shifted`: its owners are the container's ids already (root's image cache), so no idmap."""
        read_only, self.read_only = self.read_only, False
        try:
            self.overlay([str(unpacked)], self.root, mapped=not shifted)
        finally:
            self.read_only = read_only

    def _entry(self, target: Path, source: str, kind: str) -> None:
        """A top-level link (as it is) or file: copied into the root, so the container may change it (copy-on-write
        by hand: an overlay takes folders only); bound read-only when large, or under readOnlyRootFilesystem."""
        if kind.startswith("link"):
            os.symlink(os.readlink(source), target)
        elif self.read_only or os.path.getsize(source) > COPY_LIMIT:
            self.place(target, False)
            self.bind(self.mapped(source), target, read_only=True)
        else:
            try:
                shutil.copy2(source, target, follow_symlinks=False)
            except PermissionError:
                return  # a file this user may not read: not in the container either
            mine = os.stat(source)
            if self.owner is not None and max(mine.st_uid, mine.st_gid) < IDS:  # its owner as the container sees it
                os.chown(target, self.owner[0] + mine.st_uid, self.owner[1] + mine.st_gid)

    def _blank(self, target: Path) -> None:
        if target.is_file() and not target.is_symlink():
            self.bind("/dev/null", target, read_only=True)

    def devices(self, runtime: bool = False) -> None:
        """A small /dev: its device nodes bound from the machine's, unless the OCI runtime makes them (`runtime`: runc
        binds its default devices itself, and opening a bound tty there fails), its links, `pts`, a tmpfs `shm`."""
        dev = self.root / "dev"
        self.place(dev, True)
        self.tmpfs(dev)
        with self.opened(dev) as fresh:  # the tmpfs just made, by descriptor (an image's /dev may be a symlink)
            for name in ("pts", "shm", *(("mqueue",) if runtime else ())):
                os.mkdir(name, dir_fd=fresh.fd)
            for name, target in DEV_LINKS.items():
                os.symlink(target, name, dir_fd=fresh.fd)
            for name in () if runtime else DEVICES:
                if os.path.exists(f"/dev/{name}"):
                    root_paths.create(fresh.fd, name, folder=False)
                    self.bind(f"/dev/{name}", dev / name, read_only=False, recursive=False)
        self.tmpfs(dev / "shm", "1777")

    def sysfs(self, m: Machine) -> None:
        """The machine's /sys, read-only throughout; its cgroup hierarchies hidden under an empty read-only tmpfs
        (one mount instead of a remount per controller; the container's own cgroup is not shown)."""
        target = self.root / "sys"
        self.place(target, True)
        self.bind("/sys", target, read_only=True)
        cgroup = "/sys/fs/cgroup"
        if any(_inside(p, [cgroup]) for p in m.sys_mounts):
            self.mount(
                "tmpfs",
                self.root / cgroup.lstrip("/"),
                "tmpfs",
                MS_RDONLY | MS_NOSUID | MS_NODEV,
                "mode=0555",
                "hide the machine's cgroups",
            )
        for point in m.sys_mounts:  # a recursive bind's read-only flag is its top mount's only
            inner = self.root / point.lstrip("/")
            if _inside(point, [cgroup]) or not inner.is_dir():
                continue
            try:
                self.remount_read_only(inner)
            except RootError:
                pass  # one the kernel will not remount (locked): it is read-only already or not writable to us

    def finish(self) -> None:
        self.place(self.root / "proc", True)
        if self.read_only:
            self.remount_read_only(self.root)


def proc(libc: ctypes.CDLL, root: Path) -> None:
    """In the container's PID 1: its own /proc, with runc's masked and read-only paths."""
    b = Builder(libc, root, root.parent / "layers", read_only=False)
    b.mount("proc", root / "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None, "mount /proc")
    for path in MASKED:
        target = root / path
        if target.is_dir() and not target.is_symlink():
            b.mount("tmpfs", target, "tmpfs", MS_RDONLY, None, f"mask {target}")
        elif target.exists():
            b.bind("/dev/null", target, read_only=False, recursive=False)
    for path in READ_ONLY:
        target = root / path
        if target.exists():
            b.bind(str(target), target, read_only=True)


def mountable(target: Opened | str | None) -> str:
    """What mount(2) is given for `target`: an opened one's descriptor link, else the path."""
    return target.proc if isinstance(target, Opened) else target or ""


def _shown(target: Path | Opened) -> str:
    return target.path if isinstance(target, Opened) else str(target)


def pivot(libc: ctypes.CDLL, root: Path) -> None:
    """Make `root` the process's `/` (pivot_root, so no chroot escape leads back), the old root detached."""
    os.chdir(root)
    if libc.syscall(SYS_PIVOT_ROOT[platform.machine()], b".", b".") != 0:
        raise RootError("pivot_root", ctypes.get_errno())
    if libc.umount2(b".", MNT_DETACH) != 0:
        raise RootError("detach the machine's root", ctypes.get_errno())
    os.chdir("/")
