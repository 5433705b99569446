"""Paths beneath a folder the simulator trusts, opened by descriptor: the kubelet's own safe handling of volumes.

A container writes its volumes (an emptyDir, a claim, a hostPath on its node's folder) while the simulator prepares
the next container's: a native sidecar can swap a folder for a symlink between the moment a path is checked and the
moment it is used, and a check of a path string followed by a bind of the same string binds wherever the link leads
(CVE-2017-1002101, CVE-2021-25741). Upstream closes it in kubernetes/kubernetes @
002d7746eaf9d2526eaf8e1835e929fe87db6de1 pkg/volume/util/subpath/subpath_linux.go, whose steps this module follows
(facts carried over, no code):

- `doBindSubPath`: the symlinks of a subPath are evaluated once, the result must stay within the volume
  (`safeOpenSubPath`: "subpath %q not within volume path %q"), then it is opened by descriptor and the mount source is
  `/proc/<kubelet's pid>/fd/<fd>`, never the path again: a swap after the open changes nothing, a swap before it
  fails the open;
- `doSafeOpen`: from the volume's folder (itself opened with O_NOFOLLOW), each path element opened with
  `openat(O_PATH|O_NOFOLLOW)` relative to the previous one, a symlink refused ("unexpected symlink found");
- `doSafeMakeDir` (with `findExistingPrefix`): missing folders made one by one, `mkdirat` then `openat` with
  O_NOFOLLOW (a folder swapped for a link in between is refused), then `fchmod` to the mode asked (not the umask's).

Where the kernel has it (Linux 5.6), the open is one `openat2(2)` with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
RESOLVE_NO_MAGICLINKS: the kernel refuses a symlink, a magic link and a '..' that would leave the folder, on every
element. Elsewhere (ENOSYS; a seccomp profile that answers EPERM for a syscall it does not know) the walk above.

`Source` is what a container's start binds: the folder the simulator made (a volume's, a node's) and the path
beneath it the manifest named, resolved when the container was prepared (`resolve`); `Source.open` gives the
descriptor that `sandbox` binds through `proc_path`. `make_dirs` and `write_file` make what the kubelet makes beneath a
volume (a subPath, a hostPath on its node, a projected file with its mode); `walk` and `give_tree` visit a tree by
descriptors only, for the fsGroup ownership change (pkg/volume/volume_linux.go `changeFilePermission`, which upstream
does by path), so a symlink swapped in while it runs is never followed.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from jaxinfra_sim.core import paths

SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}
"""openat2(2) has no glibc wrapper; the same number on both (the generic syscall table and x86_64's)."""
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
RESOLVE = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
MISSING = (errno.ENOSYS, errno.EPERM)
"""openat2's answers where it does not exist: ENOSYS from the kernel, EPERM from an older seccomp profile."""
STEP = os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
"""How a folder on the way is opened: never through a symlink, never anything but a folder (a FIFO never blocks)."""
FOLDER = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_NONBLOCK | os.O_CLOEXEC
"""How a folder whose mode or owner is changed is opened (fchmod and fchown need more than O_PATH)."""
CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
"""How a file is made: only where nothing is, never through a symlink."""


class Unsafe(OSError):
    """A path beneath a trusted folder that cannot be opened without following a symlink or leaving the folder: the
    kubelet's "subpath ... not within volume path" / "unexpected symlink found". `strerror` says which element and
    why; the errno is ELOOP (a symlink), EXDEV (it leaves the folder) or EINVAL (an absolute path, a '..')."""

    def __init__(self, code: int, relative: str, why: str):
        super().__init__(code, f"subpath {relative!r} not within volume path: {why}")
        self.relative = relative


def names(relative: str) -> list[str]:
    """The elements of a path relative to a folder (empty and '.' elements dropped); `Unsafe` for an absolute path,
    a '..' element or a NUL byte, which nothing here ever resolves."""
    if relative.startswith("/"):
        raise Unsafe(errno.EINVAL, relative, "an absolute path")
    if "\0" in relative:
        raise Unsafe(errno.EINVAL, relative, "a NUL byte")
    out = [n for n in relative.split("/") if n not in ("", ".")]
    if ".." in out:
        raise Unsafe(errno.EINVAL, relative, "a '..' element")
    return out


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_missing = False  # openat2 answered ENOSYS (or EPERM) once: this process walks from then on


def _openat2(dirfd: int, path: str, flags: int, resolve: int) -> int:
    """openat2(2); OSError with its errno."""
    number = SYS_OPENAT2.get(platform.machine())
    if number is None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
    how = _OpenHow(flags, 0, resolve)
    fd = int(_libc.syscall(number, dirfd, os.fsencode(path), ctypes.byref(how), ctypes.sizeof(how)))
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return fd


def _refused(err: OSError, relative: str, at: int, name: str) -> OSError:
    """What a failed step of the walk means: a symlink where a folder was is `Unsafe`, anything else as it is."""
    if err.errno in (errno.ELOOP, errno.ENOTDIR):
        try:
            if stat.S_ISLNK(os.stat(name, dir_fd=at, follow_symlinks=False).st_mode):
                return Unsafe(errno.ELOOP, relative, f"{name!r} is a symlink (never followed)")
        except OSError:
            pass
    return err


def _walk(root: int, relative: str, steps: list[str], flags: int) -> int:
    """`doSafeOpen`: each folder on the way opened relative to the one before, O_NOFOLLOW|O_DIRECTORY; the last
    element with `flags` and O_NOFOLLOW (a symlink there is refused too)."""
    at = os.dup(root)
    try:
        for i, name in enumerate(steps):
            last = i == len(steps) - 1
            try:
                fd = os.open(name, (flags | os.O_NOFOLLOW | os.O_CLOEXEC) if last else STEP, dir_fd=at)
            except OSError as err:
                raise _refused(err, relative, at, name) from None
            os.close(at)
            at = fd
        return at
    except BaseException:
        os.close(at)
        raise


def open_beneath(root: int, relative: str, flags: int = os.O_PATH) -> int:
    """A descriptor (close-on-exec) of `relative` beneath the folder open at `root`, no symlink followed on the way
    or at its end, never out of `root`: `Unsafe` otherwise, another OSError (ENOENT, EACCES) as the kernel says.
    `flags`: O_PATH (the default: what a bind needs, and nothing opened for reading), or e.g. O_RDONLY|O_DIRECTORY."""
    global _missing
    steps = names(relative)
    if not steps:
        return os.open(".", flags | os.O_CLOEXEC, dir_fd=root)
    if not _missing:
        try:
            fd = _openat2(root, "/".join(steps), flags | os.O_CLOEXEC, RESOLVE)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise Unsafe(errno.ELOOP, relative, "a symlink on the way (never followed)") from None
            if err.errno == errno.EXDEV:
                raise Unsafe(errno.EXDEV, relative, "it leads out of its folder") from None
            if err.errno not in MISSING:
                raise
            _missing = True
        else:
            return _checked(fd, relative)
    return _checked(_walk(root, relative, steps, flags), relative)


def _checked(fd: int, relative: str) -> int:
    """`doSafeOpen`'s last check: what was opened is no symlink (an O_PATH|O_NOFOLLOW open would give the link)."""
    if stat.S_ISLNK(os.fstat(fd).st_mode):
        os.close(fd)
        raise Unsafe(errno.ELOOP, relative, "a symlink (never followed)")
    return fd


def open_root(folder: Path) -> int:
    """A descriptor of a folder the simulator made (or the user named): the one place a path string is opened; its
    last element may not be a symlink (`doSafeOpen`: "Base dir is not allowed to be a symlink")."""
    return os.open(folder, STEP)


def make_dirs(root: int, relative: str, mode: int = 0o755, owner: int | None = None) -> int:
    """`doSafeMakeDir`: the folder `relative` beneath the folder open at `root`, each missing folder made with
    mkdirat and opened again with O_NOFOLLOW (one swapped for a symlink in between is `Unsafe`), then given `mode`
    by fchmod (the umask does not apply). What exists is taken as it is: a folder, never through a symlink. Returns a
    descriptor of the deepest folder (close-on-exec; O_PATH where it existed), for the caller to close. `owner`: the
    uid and gid of each folder made (None: this process's)."""
    at = os.open(".", STEP, dir_fd=root)
    try:
        for name in names(relative):
            fd = _step(at, name, relative, mode, owner)
            os.close(at)
            at = fd
        return at
    except BaseException:
        os.close(at)
        raise


def _step(at: int, name: str, relative: str, mode: int, owner: int | None = None) -> int:
    """One element of `make_dirs`: the folder `name` in the folder open at `at`, made if missing."""
    try:
        return os.open(name, STEP, dir_fd=at)
    except FileNotFoundError:
        pass
    except OSError as err:
        raise _refused(err, relative, at, name) from None
    try:
        os.mkdir(name, mode & 0o777, dir_fd=at)
    except FileExistsError:  # made meanwhile by another: taken as it is, never through a symlink
        try:
            return os.open(name, STEP, dir_fd=at)
        except OSError as err:
            raise _refused(err, relative, at, name) from None
    try:
        fd = os.open(name, FOLDER, dir_fd=at)
    except OSError as err:
        raise _refused(err, relative, at, name) from None
    try:
        if owner is not None:
            os.fchown(fd, owner, owner)
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_file(root: int, relative: str, data: bytes, mode: int = 0o644, owner: int | None = None) -> None:
    """A new file at `relative` beneath the folder open at `root` (its folders made by `make_dirs`, 0755), with
    `data` and `mode` (fchmod on its own descriptor: the umask does not apply). It must not exist: O_EXCL and
    O_NOFOLLOW, so nothing already there, a symlink least of all, is ever written through. `owner`: its uid and
    gid and its new folders' (None: this process's)."""
    steps = names(relative)
    if not steps:
        raise Unsafe(errno.EINVAL, relative, "names the folder itself, not a file")
    parent = make_dirs(root, "/".join(steps[:-1]), owner=owner)
    try:
        fd = os.open(steps[-1], CREATE, 0o600, dir_fd=parent)
    finally:
        os.close(parent)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if owner is not None:
            os.fchown(fd, owner, owner)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def proc_path(fd: int) -> str:
    """The mount source that binds what `fd` is open at (`doBindSubPath`'s /proc/<pid>/fd/<fd>): the kernel follows
    this magic link to the descriptor's own file, whatever its path has become since."""
    return f"/proc/self/fd/{fd}"


def walk(root: int) -> Iterator[tuple[int, list[str]]]:
    """Each folder of the tree open at `root`, itself first, as (a descriptor of it, O_RDONLY, valid until the next
    step; the names of its entries other than folders: files, symlinks, ...), by descriptors only. A sub-folder is
    opened relative to its parent with O_NOFOLLOW|O_DIRECTORY: one swapped for a symlink (to anywhere) is never
    entered, one gone meanwhile is skipped. Depth first, one descriptor per level."""
    stack: list[tuple[int, list[str]]] = []
    try:
        at = os.open(".", FOLDER, dir_fd=root)
        while at >= 0:
            folders, others = _entries(at)
            stack.append((at, folders))
            yield at, others
            at = -1
            while stack and at < 0:
                parent, pending = stack[-1]
                if not pending:
                    os.close(parent)
                    stack.pop()
                    continue
                try:
                    at = os.open(pending.pop(), FOLDER, dir_fd=parent)
                except OSError:
                    continue  # gone, or no longer a folder (a symlink now): not entered
    finally:
        for fd, _ in stack:
            os.close(fd)


def _entries(at: int) -> tuple[list[str], list[str]]:
    """(the folders, the other entries) of the folder open at `at`, by lstat: a symlink is never a folder here."""
    folders: list[str] = []
    others: list[str] = []
    try:
        found = os.listdir(at)
    except OSError:
        found = []
    for name in found:
        try:
            mode = os.stat(name, dir_fd=at, follow_symlinks=False).st_mode
        except OSError:
            continue  # gone meanwhile
        (folders if stat.S_ISDIR(mode) else others).append(name)
    return folders, others


def give_tree(root: int, group: int, files: int, folders: int) -> None:
    """The kubelet's fsGroup ownership change (pkg/volume/volume_linux.go `changeFilePermission`, which skips
    symlinks) by descriptors: the tree open at `root`, itself included, given to `group`, each file's mode OR'd with
    `files`, each folder's with `folders`. Each entry is opened O_PATH|O_NOFOLLOW and changed through its own
    descriptor (`proc_path`), so a symlink is never followed, not even one swapped in after the listing; an entry
    gone or changed meanwhile is skipped. Root only (chown)."""
    for at, others in walk(root):
        with contextlib.suppress(OSError):
            os.fchown(at, -1, group)
            os.fchmod(at, (os.fstat(at).st_mode | folders) & 0o7777)
        for name in others:
            try:
                fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=at)
            except OSError:
                continue
            try:
                mode = os.fstat(fd).st_mode
                if not (stat.S_ISLNK(mode) or stat.S_ISDIR(mode)):  # a folder swapped in: not walked, not changed
                    os.chown(proc_path(fd), -1, group)
                    os.chmod(proc_path(fd), (mode | files) & 0o7777)
            except OSError:
                pass  # gone meanwhile
            finally:
                os.close(fd)


@dataclass(frozen=True)
class Source:
    """What a container's start binds: `root`, a folder the simulator made (a volume's, a node's: nothing a container
    writes lies on the way to it) or one the user named (--volume, --host-path), and `relative`, the path beneath it
    that the manifest named (a subPath, a hostPath on its node's folder), its symlinks evaluated once when the
    container was prepared (`resolve`, the kubelet's EvalSymlinks before `doSafeOpen`). `what` names it in errors."""

    root: Path
    relative: str = ""
    what: str = ""

    @property
    def path(self) -> Path:
        """Its path, for messages and the simulator's own checks: never what is bound."""
        return self.root.joinpath(*names(self.relative))

    def open(self, flags: int = os.O_PATH) -> int:
        """A descriptor of it (`open_beneath`): O_PATH by default. `Unsafe` where a symlink or a '..' now lies on the
        way (a container swapped a folder since it was prepared), another OSError where it is gone."""
        top = open_root(self.root)
        try:
            return open_beneath(top, self.relative, flags)
        finally:
            os.close(top)


def resolve(root: Path, relative: str, what: str) -> Source:
    """`relative` beneath `root`, its symlinks evaluated once (the kubelet's EvalSymlinks) and required to stay
    within `root` (`paths.inside`, which raises `paths.UnsafePath` otherwise): the `Source` whose open refuses any
    symlink from then on. What does not exist yet is taken as written (`make_dirs` creates it)."""
    top = Path(os.path.realpath(root))
    target = paths.inside(top, relative, what) if relative else top
    return Source(top, os.path.relpath(target, top) if target != top else "", what)
