"""The image cache: the caller's own folder, bounded, pruned as the kubelet's image garbage collector prunes.

Where: `$XDG_CACHE_HOME/jaxinfra/images`, else `.cache/jaxinfra/images` in the home the password database gives the
caller (not `$HOME`, which `sudo -E` keeps: root would follow it into the user's folder; `$HOME` only for a caller
whose home is not theirs). Whose: every folder on the
way is checked by descriptor, each symlink on it read where it lies (`owned`): owned by root or the caller, writable
by no one else (a sticky folder such as /tmp only above a folder the caller owns), the cache's own folders the
caller's and 0700. Any other is refused with the fix (`CacheError`, exit 2): a folder another user owns or may write
lets that user swap what root unpacks, or reach its setuid programs.

Bounded (`Bounds`): an image's unpacked size (default half the cache's filesystem's free space) and files; the
cache's total, pruned least recently used first, as the kubelet's image GC frees down to its low threshold
(kubernetes/kubernetes pkg/kubelet/images/image_gc_manager.go `GarbageCollect`, `freeSpace`: images by last use,
oldest first, never one in use), and pruned too while the filesystem is fuller than the kubelet's
`imageGCHighThresholdPercent` (85), down to `imageGCLowThresholdPercent` (80) (pkg/kubelet/apis/config/v1beta1
defaults.go). An entry's last use is its folder's mtime, touched by each load.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pwd
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from jaxinfra.errors import INPUT_ERROR, CommandFailed
from jaxinfra_sim.core import trees
from jaxinfra_sim.core.errors import SimulatorError

FOLDERS = ("unpacked", "archives")
"""The cache's entries: images unpacked by manifest digest, archives converted to layouts by their sha256."""
HIGH_PERCENT, LOW_PERCENT = 85, 80
"""The kubelet's image GC thresholds (`imageGCHighThresholdPercent`, `imageGCLowThresholdPercent` defaults)."""
MAX_HOPS = 40
"""Symlinks followed on the way to the cache (the kernel's MAXSYMLINKS)."""


@dataclass(frozen=True)
class Bounds:
    """What one image and the whole cache may take (`--image-limits`)."""

    image_bytes: int | None = None  # None: half the cache's filesystem's free space when the image is unpacked
    image_files: int = 1_000_000
    cache_bytes: int = 64 << 30
    seconds: float = 900.0

    def resolved(self, cache: Path) -> Bounds:
        """These bounds with the image's bytes a figure: half the cache's free space now, where none was given."""
        if self.image_bytes is not None:
            return self
        free = os.statvfs(cache)
        return dataclasses.replace(self, image_bytes=free.f_bavail * free.f_frsize // 2)

    @property
    def image_limit(self) -> int:
        if self.image_bytes is None:
            raise ValueError("Bounds.resolved first")
        return self.image_bytes


class CacheError(SimulatorError, CommandFailed):
    """A cache folder the simulator will not use: which, why and the fix (exit status 2)."""

    def __init__(self, folder: Path | str, why: str, fix: str):
        super().__init__(f"image cache {folder}: {why}; fix: {fix}", INPUT_ERROR)


def root() -> Path:
    """`$XDG_CACHE_HOME/jaxinfra/images`, else under the caller's home as the password database gives it (`$HOME`
    only where that home is not a folder the caller owns, as nobody's /nonexistent)."""
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg) / "jaxinfra" / "images"
    try:
        home = Path(pwd.getpwuid(os.geteuid()).pw_dir)
        owner = home.stat().st_uid
    except (KeyError, OSError):
        home, owner = Path(), -1
    if owner != os.geteuid():
        home = Path(os.environ.get("HOME") or tempfile.gettempdir())
    return home / ".cache" / "jaxinfra" / "images"


def owned(cache: Path) -> Path:
    """`cache` made where missing (0700) and checked (see the module's docstring): it, lexically normal."""
    if not cache.is_absolute() or ".." in cache.parts:
        raise CacheError(cache, "not an absolute path without `..`", "set XDG_CACHE_HOME to an absolute path")
    me = os.geteuid()
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        todo, hops = list(cache.parts[1:]), 0
        where = Path("/")
        while todo:
            name = todo.pop(0)
            mine = len(todo) < 2  # the last two (jaxinfra/images): the cache's own folders
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                os.mkdir(name, 0o700, dir_fd=fd)
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                hops += 1
                _trusted(where / name, st, me, mine=False)
                if hops > MAX_HOPS:
                    raise CacheError(cache, "too many symlinks on the way", "set XDG_CACHE_HOME to a real folder")
                target = Path(os.readlink(name, dir_fd=fd))
                if target.is_absolute():
                    os.close(fd)
                    fd, where = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), Path("/")
                todo = [p for p in target.parts if p != "/"] + todo
                continue
            if name == "..":
                raise CacheError(cache, f"a symlink on the way climbs out of {where}", "use a folder without one")
            _trusted(where / name, st, me, mine)
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd, where = nxt, where / name
            if mine and stat.S_IMODE(st.st_mode) != 0o700:
                os.fchmod(fd, 0o700)
        for folder in FOLDERS:
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, 0o700, dir_fd=fd)
            st = os.stat(folder, dir_fd=fd, follow_symlinks=False)
            _trusted(cache / folder, st, me, mine=True)
    except OSError as err:
        raise CacheError(cache, f"cannot be made or read ({err.strerror})", _FIX) from None
    finally:
        os.close(fd)
    return cache


_FIX = "set XDG_CACHE_HOME to a folder of your own (as root: one root owns, e.g. /root/.cache; sudo without -E)"


def _trusted(path: Path, st: os.stat_result, me: int, mine: bool) -> None:
    who = "you" if me else "root"
    if mine and (st.st_uid != me or not stat.S_ISDIR(st.st_mode)):
        raise CacheError(path, f"its folder {path} is not a folder {who} own(s) (owner uid {st.st_uid})", _FIX)
    if st.st_uid not in (0, me):
        raise CacheError(path, f"folder {path} on the way is owned by uid {st.st_uid}, who could swap it", _FIX)
    if stat.S_ISLNK(st.st_mode):
        return
    if not stat.S_ISDIR(st.st_mode):
        raise CacheError(path, f"{path} on the way is not a folder", _FIX)
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (st.st_mode & stat.S_ISVTX and not mine):
        raise CacheError(
            path, f"folder {path} on the way is writable by others (mode {stat.S_IMODE(st.st_mode):o})", _FIX
        )


def touch(entry: Path) -> None:
    """Mark an entry used now (its last use: the GC's order)."""
    with contextlib.suppress(OSError):
        os.utime(entry)


SIZE = "size"
"""The file in an entry that holds its bytes on disk, written once it is made (`record`): the GC reads it, never walks
an entry's tree again."""


def record(entry: Path, used: int) -> None:
    (entry / SIZE).write_text(str(used), encoding="utf-8")


def _recorded(entry: Path) -> int:
    with contextlib.suppress(OSError, ValueError):
        return int((entry / SIZE).read_text(encoding="utf-8"))
    return trees.usage(entry)


def _entries(cache: Path) -> Iterator[tuple[float, Path]]:
    for folder in FOLDERS:
        with contextlib.suppress(OSError), os.scandir(cache / folder) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False) and not entry.name.startswith("tmp"):
                    yield entry.stat(follow_symlinks=False).st_mtime, Path(entry.path)


def prune(cache: Path, bounds: Bounds, keep: frozenset[Path]) -> list[Path]:
    """Remove the least recently used entries (never those in `keep`) while the cache holds more than
    `bounds.cache_bytes`, or its filesystem is fuller than `HIGH_PERCENT` (then down to `LOW_PERCENT`); what was
    removed, oldest first."""
    entries = sorted(_entries(cache))
    sizes = {path: _recorded(path) for _, path in entries}
    total = sum(sizes.values())
    fs = os.statvfs(cache)
    used = (fs.f_blocks - fs.f_bfree) * fs.f_frsize
    capacity = fs.f_blocks * fs.f_frsize or 1
    goal = used - capacity * LOW_PERCENT // 100 if used * 100 > capacity * HIGH_PERCENT else 0
    removed = []
    for _, path in entries:
        if total <= bounds.cache_bytes and goal <= 0:
            break
        if path in keep:
            continue
        trees.remove_tree(path)
        total, goal = total - sizes[path], goal - sizes[path]
        removed.append(path)
    return removed
