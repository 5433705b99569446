"""A mount point inside a container's root, for a volume, a kernel view, its working directory: made where the
container resolves its path (`rootfs.Builder.place`, by descriptor), and where the layer above refuses (its folder
belongs to an id the user namespace does not map, as the machine's /usr does to an unprivileged user's container), a
fresh folder of the container's writable layer over the deepest folder that exists, every entry it had bound back
in, as containerd's snapshotter would have had the image's folder copied up."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from jaxinfra_sim.runtime import root_paths, rootfs


def place(b: rootfs.Builder, target: Path, is_dir: bool) -> None:
    """A mount point inside the root; where the layer above refuses (its folder belongs to an id this user namespace
    does not map), a fresh folder of the writable layer covers the deepest existing folder with every entry it had
    bound back in."""
    try:
        b.place(target, is_dir)
        return
    except rootfs.RootError as err:
        if err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS, errno.EOVERFLOW):
            raise
    folder = target.parent
    while not exists(b, folder):
        folder = folder.parent
    keep = Path(tempfile.mkdtemp(prefix="kept-", dir=b.layers))
    with b.opened(folder) as found:  # by descriptor, here and below: a shared volume's folders may be swapped meanwhile
        b.bind(rootfs.mountable(found), keep, read_only=False)
        b.writable(found)
    kept = os.open(keep, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in os.listdir(keep):
            entry = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=kept)
            try:
                mode = os.fstat(entry).st_mode
                with b.opened(folder) as top:  # the fresh layer
                    if stat.S_ISLNK(mode):
                        os.symlink(os.readlink("", dir_fd=entry), name, dir_fd=top.fd)
                        continue
                    root_paths.create(top.fd, name, stat.S_ISDIR(mode), b.owner)
                b.bind(root_paths.Opened(entry, name).proc, folder / name, read_only=False)
            finally:
                os.close(entry)
    finally:
        os.close(kept)
    b.place(target, is_dir)


def exists(b: rootfs.Builder, path: Path) -> bool:
    """Whether `path` is there inside the root, as the container resolves it."""
    try:
        with b.opened(path):
            return True
    except rootfs.RootError as err:
        if err.errno in (errno.ENOENT, errno.ENOTDIR):
            return False
        raise
