"""Paths inside a container's root, resolved as the container resolves them and reached by descriptor only.

A container's root is built before the runtime starts it, and once a volume is bound in it (an emptyDir, a claim)
another container that shares that volume can change what is beneath it at any moment: swap a folder for a symlink
between the moment a mount point is checked and the moment something is mounted there. A mount(2) of a path string
follows that symlink wherever it leads, out of the root too (into the machine's own folders in the shim's mount
namespace, where the runtime's binary is found next). runc closes the same race for the mounts it makes by opening
each destination inside the root first and mounting onto the descriptor (runc @ f19387a6 libcontainer/utils/utils.go
`WithProcfd`, the securejoin'd path checked through /proc/self/fd; since 1.2.8 every mountpoint by descriptor: runc @
948d6e9d "rootfs: switch to fd-based handling of mountpoint targets"), and resolves a mount's destination with
securejoin's rules: `..` stops at the root, a symlink's target, absolute or not, is read inside the root.

`open_in` does it one element at a time by descriptor: each name opened with O_PATH | O_NOFOLLOW relative to the
folder before it, a symlink read through its own descriptor and resolved inside the root, `..` taken from the
folders already opened (never the kernel's parent), what is missing made without following anything (`make`). The
kernel never follows a symlink on the way, so whatever is swapped meanwhile moves a target at most within the root.
`Opened` is the result, mounted through `/proc/self/fd/N` and never by its path again.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

MAX_LINKS = 255
"""How many symlinks one resolution follows before it gives up (ELOOP), as securejoin does."""
STEP = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Opened:
    """A path, opened: its descriptor (O_PATH) and where it was opened (inside a root, the path the container sees it
    at)."""

    fd: int
    path: str  # inside a root: absolute, as the container sees it ("/dev/null")

    @property
    def proc(self) -> str:
        """What mount(2) is given for it: the descriptor's own link, which the kernel follows to that very folder."""
        return f"/proc/self/fd/{self.fd}"

    def close(self) -> None:
        os.close(self.fd)


def _names(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def create(at: int, name: str, folder: bool, owner: tuple[int, int] | None = None) -> None:
    """`name` in the folder `at`, a folder or an empty file, never through a symlink; owned by `owner` (the machine's
    ids of the container's root, where they are not the machine's). One made meanwhile is left as it is."""
    try:
        if folder:
            os.mkdir(name, 0o777, dir_fd=at)
        else:
            os.close(os.open(name, CREATE, 0o666, dir_fd=at))
    except FileExistsError:
        return
    if owner is not None:
        os.chown(name, owner[0], owner[1], dir_fd=at, follow_symlinks=False)


def open_in(root: int, path: str, make: str = "", owner: tuple[int, int] | None = None) -> Opened:
    """`path` resolved inside the folder `root` is open at (a descriptor of the caller's, left open), as the
    container will resolve it; OSError otherwise (FileNotFoundError for what is missing, ELOOP past MAX_LINKS,
    ENOTDIR for a file on the way). `make`: "dir" or "file": what is missing is made, the folders on the way and the
    last element as `make`, each owned by `owner`."""
    parts, links = _names(path), 0
    folders = [os.dup(root)]  # the folders opened on the way, the root first: `..` pops one, never past the root
    seen: list[str] = []
    try:
        while parts:
            name = parts.pop(0)
            if name == "..":
                if len(folders) > 1:
                    os.close(folders.pop())
                    seen.pop()
                continue
            try:
                fd = os.open(name, STEP, dir_fd=folders[-1])
            except FileNotFoundError:
                if not make:
                    raise
                create(folders[-1], name, bool(parts) or make == "dir", owner)
                fd = os.open(name, STEP, dir_fd=folders[-1])
            mode = os.fstat(fd).st_mode
            if stat.S_ISLNK(mode):
                links += 1
                target = os.readlink("", dir_fd=fd)
                os.close(fd)
                if links > MAX_LINKS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
                if target.startswith("/"):
                    for extra in folders[1:]:
                        os.close(extra)
                    del folders[1:], seen[:]
                parts = _names(target) + parts
                continue
            if parts and not stat.S_ISDIR(mode):
                os.close(fd)
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
            folders.append(fd)
            seen.append(name)
        return Opened(os.dup(folders[-1]), "/" + "/".join(seen))
    finally:
        for fd in folders:
            os.close(fd)
