"""A folder's whole state, to show that a run changed nothing in it (the sandbox and path tests' canaries)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def tree_snapshot(root: Path, folders: bool = False) -> dict[str, Any]:
    """Every path under `root`: a folder, a symlink (its target), a file (its content, mtime, mode and owner); with
    `folders`, `root` itself and each folder's mtime too (an entry made and removed again shows)."""
    out: dict[str, Any] = {str(root): ("dir", root.stat().st_mtime_ns)} if folders else {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            st = path.lstat()
            if path.is_symlink():
                out[str(path)] = ("link", os.readlink(path))
            elif path.is_dir():
                out[str(path)] = ("dir", st.st_mtime_ns) if folders else ("dir",)
            else:
                out[str(path)] = (path.read_bytes(), st.st_mtime_ns, st.st_mode, st.st_uid)
    return out
