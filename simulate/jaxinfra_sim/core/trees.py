"""Folder trees as the node measures and removes them: the bytes a tree holds on disk, as the eviction manager and
the image cache count them (`usage`), and a tree removed whole, read-only folders too (`remove_tree`). Both walk by
descriptor and never follow a link."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path


def usage(folder: Path | str) -> int:
    """Bytes allocated under `folder` (st_blocks x 512, hard links once, on its own file system only: `du -x`),
    walked by descriptor without following a link; 0 where it does not exist or cannot be read. A file removed while
    it is walked is skipped."""
    seen: set[tuple[int, int]] = set()
    total, device = 0, None
    try:
        for _, dirs, files, fd in os.fwalk(folder, follow_symlinks=False):
            if device is None:  # the folder itself, as du counts it (each folder below is counted from its parent)
                st = os.fstat(fd)
                device = st.st_dev
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
            for name in (*dirs, *files):
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue
                if st.st_dev != device:  # a mount point: neither counted nor entered
                    if name in dirs:
                        dirs.remove(name)
                    continue
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    except OSError:
        pass
    return total


def remove_tree(path: Path) -> None:
    """`path` and all it holds removed, its read-only folders too (an image's folders keep their modes, a container
    leaves folders of mode 0555, overlayfs its work folders of mode 0: each stops an unprivileged owner's rmtree):
    every folder made the caller's to write first (fwalk lists a link as a link, never as a folder); as root,
    nothing stops it. What cannot be removed (another user's files) is left."""
    if os.geteuid() != 0:
        with contextlib.suppress(OSError):  # (nothing there: nothing to do)
            if stat.S_ISDIR(os.lstat(path).st_mode):
                os.chmod(path, 0o700)
            for _, dirs, _, fd in os.fwalk(path, follow_symlinks=False):
                for name in dirs:
                    with contextlib.suppress(OSError):
                        os.chmod(name, 0o700, dir_fd=fd)
    shutil.rmtree(path, ignore_errors=True)
