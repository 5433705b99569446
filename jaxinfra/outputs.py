"""Output paths: each one checked before a command does any work, and written whole or not at all.

`check` finds, by option, every output path that could not be written (a folder where a file goes, a file
where a folder goes, a folder missing or not writable), so a command stops before its work with one line per
problem. `os.access` cannot see everything (root may write anywhere except where the disk refuses), so
`write` also turns an OSError at write time into the same kind of problem, or, for a full disk or quota,
exit status 3: the machine's limit, not the input's.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from jaxinfra.errors import MACHINE_LIMIT, CommandFailed, OutputError, Problem

LIMITS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""The errors of a write that the machine's limits cause: a full disk, a quota, a file size limit."""


def _nearest(path: Path) -> Path:
    """`path` or its nearest ancestor that exists: where creating it must write."""
    return next((p for p in (path, *path.parents) if p.exists()), Path("."))


def _writable(folder: Path) -> bool:
    """Whether files can be created in `folder` (entering it too); root passes unless the file system is read-only."""
    return os.access(folder, os.W_OK | os.X_OK)


def _dangling(option: str, path: Path) -> list[Problem]:
    """A link whose target's folder does not exist: writing through it fails, whatever the permissions."""
    real = Path(os.path.realpath(path))
    if not path.is_symlink() or real.parent.is_dir():
        return []
    return [
        Problem(
            option,
            str(path),
            f"a link to {real}, whose folder does not exist",
            "remove the link, or create its target's folder",
        )
    ]


def _file(option: str, path: Path) -> list[Problem]:
    """A file output's problems: a folder in its place, its folder missing or not writable, the file read-only."""
    if path.is_dir():
        return [Problem(option, str(path), "is a folder, not a file", "name a file (in it, or elsewhere)")]
    if not path.parent.is_dir():
        return [
            Problem(
                option,
                str(path),
                "its folder does not exist",
                f"create {path.parent} first, or write the file elsewhere",
            )
        ]
    if path.exists() and not os.access(path, os.W_OK):
        return [Problem(option, str(path), "not writable", "make it writable, or write the file elsewhere")]
    if dangling := _dangling(option, path):
        return dangling
    if not path.exists() and not _writable(path.parent):
        return [Problem(option, str(path), f"its folder {path.parent} is not writable", "write the file elsewhere")]
    return []


def _folder(option: str, folder: Path, names: Iterable[str]) -> list[Problem]:
    """A folder output's problems (created if missing): a file in its place, a folder it cannot write or create, and
    a folder where one of its files (`names`, relative to it) goes."""
    if folder.exists() and not folder.is_dir():
        return [Problem(option, str(folder), "is a file, not a folder", "name a folder (it is created if missing)")]
    targets = [folder / name for name in names]
    problems = []
    for place in dict.fromkeys([_nearest(folder), *(_nearest(t.parent) for t in targets)]):  # ordered, no repeats
        verb = "written" if folder.exists() else "created"
        if not place.is_dir():  # a file on the way to the folder (the folder itself was checked above)
            problems.append(
                Problem(
                    option,
                    str(folder),
                    f"cannot be {verb}: {place} is a file",
                    "write elsewhere, or move the file away",
                )
            )
        elif not _writable(place):
            what = "not writable" if place == folder else f"cannot be {verb}: {place} is not writable"
            problems.append(Problem(option, str(folder), what, "write elsewhere, or make it writable"))
    problems += [
        Problem(
            option, str(t), "is a folder, where a file is to be written", "move the folder away, or write elsewhere"
        )
        for t in targets
        if t.is_dir()
    ]
    return problems + [p for t in targets for p in _dangling(option, t)]


def check(
    files: Mapping[str, Path | None] | None = None,
    folders: Mapping[str, tuple[Path | None, Sequence[str]]] | None = None,
) -> list[Problem]:
    """Every problem of a command's outputs, by option: `files` (option -> file, None when not asked for) and
    `folders` (option -> (folder, the names of the files to write in it)). Nothing is created."""
    problems = [p for option, path in (files or {}).items() if path is not None for p in _file(option, path)]
    return problems + [
        p
        for option, (folder, names) in (folders or {}).items()
        if folder is not None
        for p in _folder(option, folder, names)
    ]


def failed(option: str, path: Path, err: OSError) -> Exception:
    """The exception to raise for `err`, met writing `path`: an OutputError (exit 2), or at the machine's limit (ENOSPC,
    a quota) a CommandFailed with status 3, whose error line is printed here (entry.status prints only its summary)."""
    reason = f"cannot be written: {err.strerror or err}"
    if err.errno in LIMITS:
        print(
            f"error: {Problem(option, str(path), reason, 'free space (or quota) on its disk, or write elsewhere')}",
            file=sys.stderr,
        )
        return CommandFailed("1 problem (the machine's limit); nothing written", MACHINE_LIMIT)
    return OutputError([Problem(option, str(path), reason, "write elsewhere, or make it writable")])


def write(files: Sequence[tuple[str, Path, str]]) -> None:
    """Write each (option, path, text), creating missing folders: every regular file into a temporary file beside it
    first, and none renamed into place until all are written, so a failure leaves nothing: no file half-written, no
    folder created. A path that exists but is no regular file (/dev/stdout, a FIFO) is written as it is.
    Raises `failed`'s exception on an OSError."""
    staged: list[tuple[str, Path, Path, Path]] = []  # option, path, temporary file, the file it replaces
    created: list[Path] = []
    option, path = "", Path()
    try:
        for option, path, text in files:
            for folder in reversed([p for p in path.parents if not p.exists()]):  # the folders named, not a link's
                folder.mkdir()
                created.append(folder)
            real = Path(os.path.realpath(path))  # a link's target is replaced, not the link
            if real.exists() and not real.is_file():
                with open(real, "w", encoding="utf-8") as stream:
                    stream.write(text)
                continue
            tmp = real.with_name(f".{real.name}.{os.getpid()}.tmp")
            staged.append((option, path, tmp, real))
            tmp.write_text(text, encoding="utf-8")
        for _, _, tmp, real in staged:
            os.replace(tmp, real)
    except BaseException as err:  # a Ctrl-C too leaves nothing behind
        for _, _, tmp, _ in staged:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        for folder in reversed(created):
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(err, OSError):
            raise failed(option, path, err) from None
        raise
