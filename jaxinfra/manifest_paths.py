"""Manifest arguments as `kubectl apply -f PATH ... -R` takes them: a file as given (whatever its name),
a folder's `.json`, `.yaml` and `.yml` files, recursively, in the order Go's `filepath.Walk` visits
them (each folder's entries sorted by name, depth first; a symlink to a folder is not followed).

Source: kubernetes/kubectl pkg/cmd/util/resource (FileExtensions), cli-runtime pkg/resource/visitor.go
(ExpandPathsToFileVisitors, ignoreFile). Used by `jaxinfra simulate` and `jaxinfra validate`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from jaxinfra.errors import Problem

EXTENSIONS = (".json", ".yaml", ".yml")
"""What a folder contributes (case-sensitive, as kubectl compares them)."""


def _extension(name: str) -> str:
    """filepath.Ext: from the name's last dot (`.yaml` is a file with the extension `.yaml`)."""
    dot = name.rfind(".")
    return name[dot:] if dot >= 0 else ""


def walk(folder: Path, problems: list[Problem]) -> list[Path]:
    """The manifest files under `folder`, in filepath.Walk's order; an unreadable folder is a problem."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as err:
        problems.append(
            Problem(
                str(folder), str(folder), f"cannot read the folder: {err.strerror or err}", "pass a readable folder"
            )
        )
        return []
    out: list[Path] = []
    for entry in entries:
        path = folder / entry.name
        if entry.is_dir(follow_symlinks=False):
            out += walk(path, problems)
        elif _extension(entry.name) in EXTENSIONS:
            out.append(path)
    return out


def expand(paths: Iterable[Path], problems: list[Problem]) -> list[Path]:
    """Every manifest file the arguments name, in order, each once (where it first comes): files as given,
    folders walked. A missing file stays in the list (reading it reports it)."""
    out: list[Path] = []
    seen: set[Path] = set()
    for path in map(Path, paths):
        for found in walk(path, problems) if path.is_dir() else [path]:
            key = found.resolve()
            if key not in seen:
                seen.add(key)
                out.append(found)
    return out
