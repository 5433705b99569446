"""The kubelet's volume manager, at a container's start: each volume of a pod set up on this machine as the kubelet
sets it up before the container runtime binds it (kubernetes pkg/kubelet/volumemanager and the volume plugins under
pkg/volume: emptydir, hostpath, configmap, secret, downwardapi, projected; subPath by pkg/volume/util/subpath). What
each volume holds was resolved from the manifests before anything started (`volumes`); here its folder is made, its
files written, its ownership given (`SetVolumeOwnership`), and its source handed to the sandbox as a descriptor-opened
`subpath.Source`. Every path a manifest joins onto a volume is checked by one helper, `subpath.resolve` (which holds
`paths.inside`), and reached by descriptor only from then on."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from jaxinfra_sim.core import model, paths
from jaxinfra_sim.core.security import Security
from jaxinfra_sim.kubelet import volumes
from jaxinfra_sim.runtime import subpath


def sources(
    pod: model.Pod, pod_dir: Path, folder: Path, storage: Callable[[model.Mount], Path], shift: int = 0
) -> list[tuple[subpath.Source, str, bool]]:
    """Each mount's source: an emptyDir lives with the pod (kept across its container's restarts), a claim or a
    bucket with the simulation (or in --volume's folder), a hostPath with its node (or in --host-path's folder), a
    configMap/secret/downwardAPI volume's files are written afresh at each start, each with its mode (defaultMode,
    items[].mode: 0644 unless set). Folders are named by `paths.safe_name`, and every path the manifest joins onto one
    (a file's, a subPath, a hostPath's path) stays inside it (`paths.inside`, which raises `paths.UnsafePath`
    otherwise), its symlinks evaluated once, here; from then on it is reached by descriptor only (`subpath`): what is
    created beneath a volume is made without following a symlink, and the container's start binds each source from
    a descriptor opened beneath its trusted folder (`subpath.Source`), so a container that swaps a folder for a
    symlink meanwhile gets its start refused, never a folder of this machine. A hostPath of the node's kernel
    filesystems is not among them (`kernel_views`). `shift`: the machine's id of the container's 0 (its ids are shifted
    under the OCI runtime as root), which owns what the kubelet makes as root (`_own`)."""
    out = []
    for m in pod.mounts:
        what = f"{pod.workload} pod {pod.hostname} volume {m.volume}"
        if m.kind == "hostPath" and paths.kernel_view(m.key) is not None:
            continue
        if m.kind == "hostPath":
            with _guarded(what, m.key):
                source = _host_path(storage, m, what, shift)
        else:
            if m.kind == "emptyDir":
                root = pod_dir / "volumes" / paths.safe_name(m.volume)
            elif m.kind == "files":
                root = folder / "volumes" / paths.safe_name(m.volume)
            else:
                root = storage(m)
            made = not root.exists()  # a folder of the simulation's (a user's --volume DIR stays as it is)
            root.mkdir(parents=True, exist_ok=True)
            if made and shift:
                os.chown(root, shift, shift)
            source = subpath.Source(Path(os.path.realpath(root)), "", what)
            if m.kind == "files":  # the kubelet's atomic writer: each file with its mode (fchmod, not the umask)
                modes = dict(m.modes)
                top = subpath.open_root(source.root)
                try:
                    for relative, content in m.files:
                        subpath.resolve(source.root, relative, f"{what} file")  # the one check of a path
                        with _guarded(f"{what} file", relative):
                            data = content.encode("utf-8", "surrogateescape")
                            mode = modes.get(relative, volumes.DEFAULT_MODE)
                            subpath.write_file(top, relative, data, mode, shift or None)  # the kubelet's root's
                finally:
                    os.close(top)
            _own(source.root, m, pod.security, shift)
        if m.sub_path:  # the kubelet creates a missing subPath as a folder, with its volume's mode (SafeMakeDir)
            inner = subpath.resolve(source.path, m.sub_path, f"{what} subPath")  # within the volume, links read once
            with _guarded(f"{what} subPath", m.sub_path):
                top = subpath.open_root(source.root)
                try:
                    volume = subpath.open_beneath(top, source.relative)
                finally:
                    os.close(top)
                try:
                    mode = stat.S_IMODE(os.fstat(volume).st_mode)
                    os.close(subpath.make_dirs(volume, os.path.relpath(inner.path, source.path), mode, shift or None))
                finally:
                    os.close(volume)
            source = subpath.Source(source.root, os.path.relpath(inner.path, source.root), inner.what)
        out.append((source, m.path, m.read_only))
    return out


def _host_path(storage: Callable[[model.Mount], Path], mount: model.Mount, what: str, shift: int) -> subpath.Source:
    """A hostPath's path on its node's own folder as the kubelet and containerd leave it before the mount
    (`volumes.py` cites them): a missing one made, a file for the types whose path is not a folder (an empty file
    stands in for a node's File, Socket or device), else a folder, each folder on the way 0755 — all beneath the
    node's folder, never through a symlink (`subpath.make_dirs`). What exists is left as it is (a mapped folder,
    what an earlier container left on the node), its type checked before anything started (mapped) or the
    container's own doing; neither ownership nor mode is changed (the kubelet manages no hostPath). Its source: the
    node's folder and the path beneath it (`storage` evaluated its symlinks once, within the node's folder), or the
    folder (or file) --host-path names, the user's own."""
    found = storage(mount)
    node = storage(dataclasses.replace(mount, key=""))  # the node's folder itself: "" is never a --host-path
    if found != node and not found.is_relative_to(node):  # --host-path: the user's folder, trusted as it is
        return subpath.Source(found.parent, found.name, what)
    source = subpath.Source(node, os.path.relpath(found, node), what)
    if not node.exists():  # the node's own root folder, its root's (the container's, shifted)
        node.mkdir(parents=True)
        if shift:
            os.chown(node, shift, shift)
    top = subpath.open_root(node)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.close(subpath.open_beneath(top, source.relative))
            return source
        if mount.host_type in volumes.HOST_PATH_FILES:
            with contextlib.suppress(FileExistsError):  # made meanwhile: left as it is
                subpath.write_file(top, source.relative, b"", 0o644, shift or None)
        else:  # made by the node's root: as root under the OCI runtime, the container's (`shift`)
            os.close(subpath.make_dirs(top, source.relative, 0o755, shift or None))
    finally:
        os.close(top)
    return source


def kernel_views(pod: model.Pod) -> tuple[tuple[str, str], ...]:
    """(the container's own path, mount path) of each hostPath of the node's kernel filesystems (`/sys`, `/proc/sys`
    and below, their subPath joined): shown read-only, as the container's own (`sandbox.start`)."""
    out = []
    for m in pod.mounts:
        view = paths.kernel_view(m.key) if m.kind == "hostPath" else None
        if view is not None:
            out.append((paths.normal(f"{view}/{m.sub_path}") if m.sub_path else view, m.path))
    return tuple(out)


def _own(source: Path, mount: model.Mount, security: Security, shift: int = 0) -> None:
    """A volume's ownership as the kubelet leaves it: an emptyDir is world-writable (pkg/volume/emptydir: 0777);
    with the pod's fsGroup, its files and a claim's or bucket's are that group's, group-writable and setgid on
    folders, and a configMap/secret/downwardAPI volume's files that group's and group-readable whatever their mode
    (pkg/volume/volume_linux.go SetVolumeOwnership, changeFilePermission: roMask 0440 for a read-only volume), else as
    they are — a `--volume NAME=DIR` too, as the kubelet does to the disk it stands for. The walk goes by descriptors
    (`subpath.give_tree`): a symlink is never followed, not even one a container swaps in while it runs, and an entry
    gone meanwhile is skipped. Only root can give them away; unprivileged, the container's ids are the caller's, who
    owns them already. With a `shift` the fsGroup is the machine's `shift` + fsGroup (the kubelet's own files and
    folders are made as the container's root already: `_volumes`)."""
    files = mount.kind == "files"
    if (mount.read_only and not files) or mount.kind == "hostPath":
        return
    if mount.kind == "emptyDir":
        source.chmod(0o777)
    if security.fs_group is None or os.geteuid() != 0:
        return
    top = subpath.open_root(source)
    try:
        group = shift + security.fs_group
        subpath.give_tree(top, group, 0o440 if files else 0o060, 0o2550 if files else 0o2070)
    finally:
        os.close(top)


@contextlib.contextmanager
def _guarded(what: str, relative: str) -> Iterator[None]:
    """Around creating what a manifest path names: a symlink met on the way (a container swapped a folder for one
    since its path was checked) or another OSError (a file in the way, a name too long) is its problem."""
    try:
        yield
    except subpath.Unsafe as err:
        raise paths.UnsafePath(
            what,
            relative,
            f"{err.strerror}: it changed since the kubelet checked it, and the kubelet never follows a symlink there",
            "leave no symlink on the way to a volume's path (a container that swaps one in: the kubelet refuses it)",
        ) from None
    except OSError as err:
        raise paths.UnsafePath(
            what,
            relative,
            f"the kubelet cannot create it: {err.strerror or err}",
            "give each file its own path inside the volume",
        ) from None
