"""The only place a manifest string meets the filesystem.

A simulated cluster runs hostile YAML on the machine it simulates on, so nothing a manifest says is
ever a host path by itself. Every folder the simulator makes for a manifest object is named by
`safe_name` (or by a counter: pods are `pod-<index>`), and every relative path a manifest joins onto
such a folder (a ConfigMap, Secret, downwardAPI or projected volume's file, a subPath) goes through
`inside`, which refuses what could leave that folder — also through symlinks already on disk, which
a container may have planted in a volume it writes (an emptyDir, a claim) before it restarts.

The API server and the kubelet refuse most such paths first (`volumes.py` applies their rules, so a
manifest learns it with Kubernetes' own words); this module holds whatever gets past them.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from jaxinfra_sim.core.errors import UnsafePath

NAME_MAX = 255
"""The longest file name Linux file systems take (bytes): a longer path element fails with ENAMETOOLONG."""
_UNSAFE = re.compile(r"[^a-z0-9._-]+")
_PREFIX = 40  # readable part of a safe name; with "-" and 16 hex digits of the hash: at most 57 characters


def safe_name(text: str) -> str:
    """A file name for any string: deterministic, at most 57 characters of [a-z0-9._-], never "." or ".." nor
    hidden: a readable prefix of it (lowercased, other characters folded into "-") and a hash of all of it, so
    two different strings get two different names."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    prefix = _UNSAFE.sub("-", text.lower())[:_PREFIX].strip(".-")
    return f"{prefix}-{digest}" if prefix else digest


def why_unsafe(relative: object) -> str | None:
    """Why a relative path from a manifest cannot be joined onto a folder, or None: it must be a non-empty string,
    relative, with no '..' element, no NUL byte and no element longer than NAME_MAX bytes."""
    if not isinstance(relative, str):
        return f"must be a string, not {type(relative).__name__}"
    if not relative:
        return "must not be empty"
    if "\0" in relative:
        return "must not contain a NUL byte"
    if relative.startswith("/"):
        return "must be a relative path"
    parts = relative.split("/")
    if ".." in parts:
        return "must not contain '..'"
    if any(len(part.encode("utf-8", "surrogatepass")) > NAME_MAX for part in parts):
        return f"has a path element longer than {NAME_MAX} bytes (file name too long)"
    return None


def normal(path: str) -> str:
    """A path as a node (a hostPath's) or a container (a mountPath) resolves it: absolute and normal (`a//b/` and `./`
    folded, nothing above `/`, a leading `//` one `/`; a relative path is the kubelet's working directory's, `/`)."""
    return os.path.normpath("/" + path.lstrip("/"))


def on_node(root: Path, path: str, what: str = "hostPath") -> Path:
    """A node's path (`normal`) inside `root`, the folder standing in for that node's filesystem (`/` is `root`
    itself), joined by `inside`, which refuses a NUL byte and a symlink a container planted on the way out."""
    return inside(root, normal(path).lstrip("/") or ".", what)


def inside(root: Path, relative: str, what: str = "path") -> Path:
    """`relative` (a path a manifest gives) joined under `root`, with the symlinks already on disk resolved; raises
    UnsafePath (`what` names the manifest field) for a path that could leave `root`: absolute, with a '..'
    element, empty, with a NUL byte, or reaching out of `root` through a symlink. Nothing is created."""
    why = why_unsafe(relative)
    fix = "use a path relative to the volume, without '..', that stays inside it"
    if why is None:
        top = os.path.realpath(root)
        target = os.path.realpath(os.path.join(top, relative))
        if os.path.commonpath([top, target]) == top:
            return Path(target)
        why = f"leads out of its volume through a symlink (to {target})"
        fix = "leave no symlink out of the volume on the way (a container that wrote one: the kubelet refuses it too)"
    raise UnsafePath(what, relative, f"{why}: the simulator refuses to join it onto a folder of this machine", fix)


KERNEL_VIEWS = ("/sys", "/proc/sys")
"""The node's kernel filesystems a hostPath may name: the container's own, read-only, stands in."""


def kernel_view(path: str) -> str | None:
    """The container's own path that stands in for a hostPath of the node's kernel filesystems (`/sys`, `/proc/sys`
    and below), or None."""
    found = normal(path)
    return found if any(found == k or found.startswith(k + "/") for k in KERNEL_VIEWS) else None
