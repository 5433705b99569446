"""What makes an image's layer unsafe to unpack, read as a naive unpacker would write it (the OCI image spec's layer
changesets, image-spec `layer.md`): an entry naming a path above the root, written through a symlink that leads out
of the root (absolute, or `..` past it), a hard link to such a path, a device node, or anything but a folder where
the runtime mounts the container's own `/dev`, `/proc` or `/sys`. `oci_image.py` reads each layer through `Links`
before umoci sees it.
"""

from __future__ import annotations

import posixpath
import tarfile
from collections.abc import Sequence

MAX_LINKS = 40
RUNTIME_MOUNTS = ("dev", "proc", "sys")
"""Top-level folders the runtime mounts the container's own filesystems on: a symlink there would be followed on
this machine while the root is built."""


class Links:
    """The symlinks of the layers read so far, by normalized path: what an entry written later would go through."""

    def __init__(self) -> None:
        self.links: dict[str, str] = {}

    def check(self, member: tarfile.TarInfo) -> str | None:
        """Why `member` is unsafe, or None (then it is recorded)."""
        parts = path_parts(member.name)
        if parts is None:
            return "names a path above the image's root"
        if member.ischr() or member.isblk():
            kind = "character" if member.ischr() else "block"
            return f"is a {kind} device node ({member.devmajor}:{member.devminor}), which would be the machine's device"
        if len(parts) == 1 and parts[0] in RUNTIME_MOUNTS and not member.isdir():
            return f"is not a folder, where the runtime mounts the container's own /{parts[0]}"
        through = self.outside(parts[:-1])
        if through is not None:
            return f"is written through symlink {through[0]!r} -> {through[1]!r}, which leads out of the image's root"
        if member.islnk():
            target = path_parts(member.linkname)
            if target is None:
                return f"is a hard link to {member.linkname!r}, above the image's root"
            through = self.outside(target[:-1])
            if through is not None:
                return (
                    f"is a hard link through symlink {through[0]!r} -> {through[1]!r}, which leads out of the "
                    "image's root"
                )
        base = parts[-1] if parts else ""
        parent = "/".join(parts[:-1])
        if base == ".wh..wh..opq":
            self._drop(parent, keep_self=True)
        elif base.startswith(".wh."):
            self._drop(posixpath.join(parent, base[4:]), keep_self=False)
        elif parts:
            path = "/".join(parts)
            self._drop(path, keep_self=False)
            if member.issym():
                self.links[path] = member.linkname
        return None

    def _drop(self, path: str, keep_self: bool) -> None:
        prefix = path + "/" if path else ""
        for link in [p for p in self.links if p.startswith(prefix) or (p == path and not keep_self)]:
            del self.links[link]

    def outside(self, parts: Sequence[str]) -> tuple[str, str] | None:
        """(link, target) of a symlink on the way to `parts` that leads out of the root (absolute, or `..` past it:
        what a naive unpacker would follow onto the machine), or None."""
        resolved: list[str] = []
        todo = list(parts)
        hops = 0
        while todo:
            part = todo.pop(0)
            if part == "..":
                if not resolved:
                    return ("..", "..")
                resolved.pop()
                continue
            path = "/".join([*resolved, part])
            target = self.links.get(path)
            if target is None:
                resolved.append(part)
                continue
            hops += 1
            if hops > MAX_LINKS or target.startswith("/"):
                return (path, target)
            depth = len(resolved)
            steps = [p for p in target.split("/") if p not in ("", ".")]
            for step in steps:
                depth += -1 if step == ".." else 1
                if depth < 0:
                    return (path, target)
            todo = steps + todo
        return None


def path_parts(name: str) -> list[str] | None:
    """A tar entry's path inside the root, as parts (absolute names are taken relative to it, as unpackers do), or
    None where `..` climbs above the root."""
    out: list[str] = []
    for part in name.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not out:
                return None
            out.pop()
            continue
        out.append(part)
    return out
