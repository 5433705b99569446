"""The kubelet's volume manager: what each volume of a pod holds and where its JAX container sees it.

Source: kubernetes pkg/kubelet/volumemanager and pkg/volume/{emptydir,configmap,secret,downwardapi,
projected}; GKE's Cloud Storage FUSE CSI driver (gcsfuse.csi.storage.gke.io, which needs the pod
annotation `gke-gcsfuse/volumes: "true"` for its sidecar; cloud.google.com/kubernetes-engine/docs/
how-to/persistent-volumes/cloud-storage-fuse-csi-driver). A volume the kubelet cannot set up (a
claim, ConfigMap or Secret that does not exist, a type it has no plugin for here) leaves the pod
Pending: a problem before anything starts. What the volumes hold lives with them:

- `emptyDir` (`medium: Memory` too): per pod; it survives the container's in-place restarts, not the
  pod (a recreated pod gets a new one);
- a PersistentVolumeClaim: one folder per claim for the whole simulation, kept across restarts;
- a GCS FUSE CSI volume: one folder per bucket, likewise;
- `configMap`, `secret`, `downwardAPI` and `projected` (of those): their files, read-only;
- `hostPath`: the path on the pod's node. Each simulated pod has a node of its own (`downward.PodFacts`), and each
  node a private, empty folder of the simulation standing in for its filesystem: a hostPath is the path inside
  it (so every container of a pod, and its restarts, share it; two hostPaths one inside the other nest, as on a
  node), never this machine's path; `--host-path PATH=DIR` (the manifest's path, exactly) makes it DIR instead,
  the user's own choice and the only way a hostPath reaches a real folder. The node's kernel filesystems stand in
  as the container's own, read-only: a hostPath of `/sys` or under it, or of `/proc/sys` or under it, shows the
  container's own read-only `/sys` or `/proc/sys` there (an empty folder would break a daemon that reads them,
  this machine's would let one write them). Read-only where the volumeMount says so.
`--volume NAME=DIR` puts a claim or a bucket in a folder that outlives the simulation.

A hostPath's `type` is checked as the kubelet checks the node's path before it mounts it (kubernetes @006d84d2
pkg/volume/hostpath/host_path.go `hostPathMounter.SetUp`, `checkType`, `typeMatchedOrError`, `makeDir` 0755,
`makeFile` 0644), and a missing path of the unset type is created as containerd creates a missing bind source
(containerd @1754af31 internal/cri/opts/spec_linux_opts.go `withMounts`: MkdirAll 0755). On a mapped hostPath the
check is the kubelet's, on DIR: a mismatch is a problem before anything starts (`mapped_problems`). On a node's
private folder, where the simulator cannot know what a GKE node has: `DirectoryOrCreate` and the unset type create a
folder, `FileOrCreate` an empty file; `Directory` and `File` are taken to exist on the node (an empty folder, an
empty file stands in, and a note says so); `Socket`, `CharDevice` and `BlockDevice` get an empty file with a note
(nothing listens there, no device backs it); any other type is the kubelet's "invalid volume type" and the pod
stays Pending.

Every path a pod spec gives for a volume is checked as the API server checks it before the pod exists
(kubernetes pkg/apis/core/validation/validation.go: `validateVolumes` (volume names, IsDNS1123Label),
`validateKeyToPath` and `validateDownwardAPIVolumeFile` (item paths, `validateLocalNonReservedPath`:
relative, no '..' element, not starting with '..'), `ValidateVolumeMounts` (mountPath required; subPath,
`validateLocalDescendingPath`: relative, no '..' element)); a ConfigMap's or Secret's keys as it checks
those objects (`ValidateConfigMap`/`ValidateSecret`: k8s.io/apimachinery pkg/util/validation/validation.go
`IsConfigMapKey`); and the files as the kubelet writes them (kubernetes pkg/volume/util/atomic_writer.go
`validatePath`: at most 4096 bytes, 255 per element). What they reject is a problem of the pod: nothing
starts. The simulator's own guard behind these rules is `paths.inside`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from jaxinfra.admission.validation import config_map_key, dns1123_label, local_descending_path, local_non_reserved_path
from jaxinfra.errors import Problem, Refused
from jaxinfra.upstream import GCSFUSE_ANNOTATION, GCSFUSE_DRIVER
from jaxinfra_sim.core import model, paths
from jaxinfra_sim.core.inputs import Objects
from jaxinfra_sim.kubelet.downward import PodFacts
from jaxinfra_sim.platform.gcsfuse import gcsfuse_requested

FILE_SOURCES = ("configMap", "secret", "downwardAPI", "projected")
SUPPORTED = (
    "emptyDir, persistentVolumeClaim, csi (gcsfuse.csi.storage.gke.io), configMap, secret, downwardAPI, projected, "
    "hostPath"
)
HOST_PATH_TYPES = {
    "": "",
    "DirectoryOrCreate": "directory",
    "Directory": "directory",
    "FileOrCreate": "file",
    "File": "file",
    "Socket": "socket file",
    "CharDevice": "character device",
    "BlockDevice": "block device",
}
"""The hostPath types the kubelet knows (host_path.go checkType), each with what it requires at the path."""
HOST_PATH_FILES = frozenset(t for t in HOST_PATH_TYPES if t not in ("", "DirectoryOrCreate", "Directory"))
"""The types whose path is not a folder: a file stands in for it on a node's private folder."""

MAX_PATH_BYTES, MAX_NAME_BYTES = 4096, 255  # the kubelet's atomic writer (validatePath)
DEFAULT_MODE = 0o644
"""A configMap, secret, downwardAPI or projected volume's files' mode where neither defaultMode nor the item's mode
says (kubernetes pkg/apis/core/v1/defaults.go: SecretVolumeSourceDefaultMode, ConfigMapVolumeSourceDefaultMode,
DownwardAPIVolumeSourceDefaultMode, ProjectedVolumeSourceDefaultMode, all 0644)."""
Files = dict[str, tuple[str, int]]  # a file volume's payload: relative path -> (content, mode)
Rejection = tuple[str, Any, str, str]  # (field, value, why the API server rejects it, fix)


def _first(reasons: list[str]) -> str | None:
    return reasons[0] if reasons else None


def descending_path(value: str) -> str | None:
    """Why the API server rejects a subPath (validateLocalDescendingPath), or None."""
    return _first(local_descending_path(value))


def non_reserved_path(value: str) -> str | None:
    """Why the API server rejects a volume item's path (validateLocalNonReservedPath: ..data is the kubelet's), or
    None."""
    return _first(local_non_reserved_path(value))


def config_key(key: str) -> str | None:
    """Why the API server rejects a ConfigMap's or Secret's key (IsConfigMapKey), or None."""
    return _first(config_map_key(key))


def volume_name(name: str) -> str | None:
    """Why the API server rejects a volume's name (IsDNS1123Label), or None."""
    return "; ".join(dns1123_label(name)) or None if name else "Required value"


_PATH_FIX = {
    "must be a relative path": "drop the leading '/': an item's path is relative to the volume's mountPath",
    "must not contain '..'": "name a file inside the volume, without '..' elements",
    "must not start with '..'": "rename it: names starting with '..' are the kubelet's own (..data)",
    "Required value": "set it",
}


def _item_paths(items: Any, field: str, keyed: bool) -> Iterator[Rejection]:
    """A configMap/secret (`keyed`) or downwardAPI source's items as validateKeyToPath/validateDownwardAPIVolumeFile
    see them."""
    for k, item in enumerate(items if isinstance(items, list) else []):
        item = item if isinstance(item, Mapping) else {}
        where = f"{field}.items[{k}]"
        if keyed and not item.get("key"):
            yield f"{where}.key", item.get("key"), "Required value", "set the key of the ConfigMap or Secret to project"
        value = item.get("path")
        why = "Required value" if value in (None, "") else non_reserved_path(str(value))
        if why:
            yield f"{where}.path", value, why, _PATH_FIX[why]


def _rejected_volume(volume: Mapping, field: str) -> Iterator[Rejection]:
    """What the API server rejects in one entry of a pod's spec.volumes (`field`: its path, e.g. spec.volumes[2])."""
    name = str(volume.get("name") or "")
    if why := volume_name(name):
        yield f"{field}.name", name, why, "name the volume with lowercase letters, digits and '-' (e.g. 'scratch')"
    for kind in ("configMap", "secret", "downwardAPI"):
        if isinstance(volume.get(kind), Mapping):
            yield from _item_paths(volume[kind].get("items"), f"{field}.{kind}", keyed=kind != "downwardAPI")
    projected = volume.get("projected")
    for j, source in enumerate((projected.get("sources") if isinstance(projected, Mapping) else None) or []):
        for kind in ("configMap", "secret", "downwardAPI"):
            if isinstance(source, Mapping) and isinstance(source.get(kind), Mapping):
                yield from _item_paths(
                    source[kind].get("items"), f"{field}.projected.sources[{j}].{kind}", keyed=kind != "downwardAPI"
                )


def _rejected_mount(vm: Mapping, field: str) -> Iterator[Rejection]:
    """What the API server rejects in one volumeMount (`field`: e.g. spec.containers[0].volumeMounts[1])."""
    if not vm.get("mountPath"):
        yield (
            f"{field}.mountPath",
            vm.get("mountPath"),
            "Required value",
            "set the path where the container sees the volume",
        )
    sub = vm.get("subPath")
    if sub not in (None, "") and (why := descending_path(str(sub))):
        yield (
            f"{field}.subPath",
            sub,
            why,
            (
                "drop the leading '/': a subPath is relative to the volume's root"
                if why == "must be a relative path"
                else "name a folder inside the volume, without '..'"
            ),
        )


def _unwritable(files: Mapping[str, object]) -> str | None:
    """Why the kubelet cannot write a file volume's payload (atomic_writer.go validatePath; a path that is the volume
    itself or lies under another file), or None."""
    for name in sorted(files):
        if len(name.encode()) > MAX_PATH_BYTES:
            return f"invalid path: must be less than or equal to {MAX_PATH_BYTES} characters"
        if any(len(part.encode()) > MAX_NAME_BYTES for part in name.split("/")):
            return f"invalid path: filenames must be less than or equal to {MAX_NAME_BYTES} characters"
        if paths.why_unsafe(name) is not None:
            return f"invalid path {name!r}: {paths.why_unsafe(name)}"
        if all(part in ("", ".") for part in name.split("/")):
            return f"invalid path {name!r}: names the volume's folder itself, not a file"
    seen: set[str] = set()
    normal = sorted("/".join(p for p in name.split("/") if p not in ("", ".")) for name in files)
    for name in normal:
        if name in seen:
            return f"two files at {name!r}"
        seen.add(name)
    for name in normal:
        parts = name.split("/")
        folder = next((f for f in ("/".join(parts[:i]) for i in range(1, len(parts))) if f in seen), None)
        if folder is not None:
            return f"the file {folder!r} is also a folder of {name!r}"
    return None


def _mode(value: object, default: int) -> int:
    """A defaultMode or an item's mode: the value where it is one (0 to 0777: the API server rejects others),
    else `default`."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0o777 else default


def _object_files(
    kind: str, source: Mapping, namespace: str, objects: Objects, default: int
) -> tuple[Files, str | None]:
    """A configMap/secret source's files (all keys, or `items` key -> path), each with its mode (the item's, else
    `default`: the volume's defaultMode; secret.go and configmap.go `MakePayload`), and why it cannot be set up."""
    name = source.get("name") or source.get("secretName") or ""
    data = (objects.config_maps if kind == "configMap" else objects.secrets).get((namespace, name))
    what = "configmap" if kind == "configMap" else "secret"
    if data is None:
        return {}, None if source.get("optional") else f'{what} "{name}" not found'
    bad = next(((key, why) for key in sorted(data) if (why := config_key(key))), None)
    if bad is not None:  # such an object never exists: the API server rejected it
        return {}, (f'the API server rejects {what} "{name}" (data key {bad[0]!r}: {bad[1]}), so it does not exist')
    items = source.get("items")
    if not items:
        return {key: (value, default) for key, value in data.items()}, None
    files: Files = {}
    missing = []
    for item in items if isinstance(items, list) else []:
        key = item.get("key") if isinstance(item, Mapping) else None
        if isinstance(key, str) and key in data:
            files[str(item.get("path"))] = (data[key], _mode(item.get("mode"), default))
        else:
            missing.append(str(key))
    return files, (
        f'{what} "{name}" has no key {", ".join(missing)}' if missing and not source.get("optional") else None
    )


def _downward_files(items: Sequence[Mapping], facts: PodFacts, default: int) -> Files:
    """A downwardAPI source's files: whole label/annotation maps as `key="value"` lines, or single fields; each with
    its mode (the item's, else `default`: downwardapi.go `CollectData`)."""
    files: Files = {}
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, Mapping):
            continue
        ref = item.get("fieldRef") or {}
        path = ref.get("fieldPath", "")
        if path in ("metadata.labels", "metadata.annotations"):
            values = facts.labels if path == "metadata.labels" else facts.annotations
            content = "\n".join(f'{k}="{v}"' for k, v in sorted(values.items()))
        elif item.get("resourceFieldRef"):
            content = facts.resource(item["resourceFieldRef"], facts.containers[0])
        else:
            content = facts.field_ref(path) or ""
        files[str(item.get("path"))] = (content, _mode(item.get("mode"), default))
    return files


def _files(volume: Mapping, namespace: str, facts: PodFacts, objects: Objects) -> tuple[Files, str | None]:
    """A file volume's payload, each file with its mode: the item's, else the volume's defaultMode (a projected
    volume's for all its sources: projected.go), else 0644."""
    if "downwardAPI" in volume:
        downward = volume["downwardAPI"] or {}
        default = _mode(downward.get("defaultMode"), DEFAULT_MODE)
        return _downward_files(downward.get("items") or [], facts, default), None
    if "projected" in volume:
        files: Files = {}
        default = _mode((volume["projected"] or {}).get("defaultMode"), DEFAULT_MODE)
        for source in (volume["projected"] or {}).get("sources") or []:
            kind = next((k for k in ("configMap", "secret", "downwardAPI") if k in source), None)
            if kind is None:
                return {}, f"projected source {sorted(source)} is not emulated"
            made, why = (
                (_downward_files((source[kind] or {}).get("items") or [], facts, default), None)
                if kind == "downwardAPI"
                else _object_files(kind, source[kind] or {}, namespace, objects, default)
            )
            if why:
                return {}, why
            files.update(made)
        return files, None
    kind = "configMap" if "configMap" in volume else "secret"
    source = volume[kind] or {}
    return _object_files(kind, source, namespace, objects, _mode(source.get("defaultMode"), DEFAULT_MODE))


def _source(
    volume: Mapping, namespace: str, annotations: Mapping[str, str], facts: PodFacts, objects: Objects
) -> tuple[model.Mount, str | None]:
    """A volume as a Mount template (no mount path yet), and why the kubelet could not set it up."""
    name = str(volume.get("name", ""))
    if "emptyDir" in volume:
        source = volume["emptyDir"] if isinstance(volume["emptyDir"], Mapping) else {}
        size, medium = source.get("sizeLimit"), str(source.get("medium") or "")
        return model.Mount(name, "", kind="emptyDir", size_limit="" if size is None else str(size), medium=medium), None
    if "persistentVolumeClaim" in volume:
        claim = str((volume["persistentVolumeClaim"] or {}).get("claimName", ""))
        found = (namespace, claim) in objects.claims
        return (
            model.Mount(
                name,
                "",
                kind="claim",
                key=claim,
                read_only=bool((volume["persistentVolumeClaim"] or {}).get("readOnly")),
            ),
            None if found else f'persistentvolumeclaim "{claim}" not found',
        )
    if "csi" in volume and (volume["csi"] or {}).get("driver") == GCSFUSE_DRIVER:
        bucket = str(((volume["csi"] or {}).get("volumeAttributes") or {}).get("bucketName", ""))
        why = (
            None
            if gcsfuse_requested(annotations)
            else (
                f"the {GCSFUSE_DRIVER} driver finds no sidecar: "
                f'the pod lacks the annotation {GCSFUSE_ANNOTATION}: "true"'
            )
        )
        return model.Mount(
            name, "", kind="bucket", key=bucket, read_only=bool((volume["csi"] or {}).get("readOnly"))
        ), why
    if any(k in volume for k in FILE_SOURCES):
        files, why = _files(volume, namespace, facts, objects)
        why = why or _unwritable(files)
        safe = {path: made for path, made in files.items() if paths.why_unsafe(path) is None}  # never a host path
        payload = tuple((path, content) for path, (content, _) in sorted(safe.items()))
        modes = tuple((path, mode) for path, (_, mode) in sorted(safe.items()))
        return model.Mount(name, "", kind="files", read_only=True, files=payload, modes=modes), why
    if "hostPath" in volume:
        source = volume["hostPath"] if isinstance(volume["hostPath"], Mapping) else {}
        path, host_type = str(source.get("path") or ""), str(source.get("type") or "")
        why = None if host_type in HOST_PATH_TYPES else f"{host_type} is an invalid volume type"  # checkType
        return model.Mount(name, "", kind="hostPath", key=path, host_type=host_type, node=facts.node), why
    kind = next((k for k in volume if k != "name"), "?")
    return model.Mount(name, "", kind=kind), f"volume type {kind} is not emulated (supported: {SUPPORTED})"


def resolve(
    where: str,
    pod_spec: Mapping,
    containers: Sequence[tuple[str, Mapping]],
    namespace: str,
    annotations: Mapping[str, str],
    facts: PodFacts,
    objects: Objects,
    problems: list[tuple[str, Problem]],
) -> list[tuple[model.Mount, ...]]:
    """Each container's mounts (`containers`: each with its path in the pod spec, `spec.containers[0]`); every volume
    of the pod that cannot be set up is a problem (the pod stays Pending), and so is every volume and mount the API
    server rejects (the pod is never created)."""
    sources: dict[str, model.Mount] = {}
    rejected: set[str] = set()

    def reject(found: Iterator[Rejection]) -> bool:
        any_found = False
        for field, value, why, fix in found:
            any_found = True
            problems.append(
                (
                    f"api|{field}|{why}",
                    Refused(f"{where} {field}", value, f"{why}: the API server rejects the pod", fix),
                )
            )
        return any_found

    for i, volume in enumerate(pod_spec.get("volumes") or []):
        if not isinstance(volume, Mapping):
            continue
        mount, why = _source(volume, namespace, annotations, facts, objects)
        sources[mount.volume] = mount
        if reject(_rejected_volume(volume, f"spec.volumes[{i}]")):  # the kubelet never sees it
            rejected.add(mount.volume)
        elif why:
            problems.append(
                (
                    f"volume|{mount.volume}",
                    Problem(
                        f"{where} volume {mount.volume}",
                        mount.kind,
                        f"the kubelet cannot set it up, so the pod stays Pending: {why}",
                        _fix(mount, why),
                    ),
                )
            )
    return [_mounts(where, path, c, sources, rejected, reject, problems) for path, c in containers]


def _mounts(
    where: str,
    path: str,
    container: Mapping,
    sources: Mapping[str, model.Mount],
    rejected: set[str],
    reject: Callable[[Iterator[Rejection]], bool],
    problems: list[tuple[str, Problem]],
) -> tuple[model.Mount, ...]:
    """One container's volumeMounts, onto the pod's volumes `sources`."""
    mounts = []
    for m, vm in enumerate(container.get("volumeMounts") or []):
        if not isinstance(vm, Mapping) or reject(_rejected_mount(vm, f"{path}.volumeMounts[{m}]")):
            continue
        if str(vm.get("name")) in rejected:
            continue
        source = sources.get(str(vm.get("name")))
        sub = str(vm.get("subPath") or "")
        if (
            source is not None and sub and (why := paths.why_unsafe(sub))
        ):  # past the API server, not the kubelet's mkdir
            problems.append(
                (
                    f"subpath|{vm.get('name')}|{why}",
                    Problem(
                        f"{where} {path}.volumeMounts[{m}].subPath",
                        sub,
                        f"the kubelet cannot create it, so the pod stays Pending: {why}",
                        "name a folder inside the volume, with shorter names",
                    ),
                )
            )
            continue
        if source is None:
            problems.append(
                (
                    f"mount|{vm.get('name')}",
                    Refused(
                        f"{where} volumeMounts {vm.get('name')}",
                        vm.get("name"),
                        "no volume of the pod has this name: the API server rejects the pod",
                        "add the volume to spec.volumes, or fix the name",
                    ),
                )
            )
            continue
        mounts.append(
            replace(
                source,
                path=str(vm.get("mountPath", "")),
                sub_path=sub,
                read_only=source.read_only or bool(vm.get("readOnly")),
            )
        )
    return tuple(mounts)


_FILE_TYPES = {
    "directory": (stat.S_ISDIR, "Directory"),
    "file": (stat.S_ISREG, "File"),
    "socket file": (stat.S_ISSOCK, "Socket"),
    "character device": (stat.S_ISCHR, "CharDevice"),
    "block device": (stat.S_ISBLK, "BlockDevice"),
}
"""What each kind of path `HOST_PATH_TYPES` requires is tested by, and the HostPathType the kubelet names a path of
that kind by (hostutil GetFileType)."""


def type_mismatch(path: Path, host_type: str, shown: str) -> str | None:
    """Why the kubelet refuses the node's `path` for a hostPath of `host_type` (host_path.go typeMatchedOrError; the
    message names `shown`), or None. The unset type is not checked; the ...OrCreate types only where `path` exists."""
    want = HOST_PATH_TYPES.get(host_type, "")
    if not want:
        return None
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None if host_type.endswith("OrCreate") else f"hostPath {shown} doesn't exist"
    if _FILE_TYPES[want][0](mode):
        return None
    found = next((name for test, name in _FILE_TYPES.values() if test(mode)), "unknown type")
    return f"hostPath type check failed: {shown} is not a {want}, it's a {found}"


def _host_mounts(workload: model.Workload) -> Iterator[model.Mount]:
    """Each distinct hostPath mount of the workload's containers (one per volume and mode)."""
    seen: set[tuple[str, bool]] = set()
    for pod in workload.pods:
        for mounts in [pod.mounts, *(c.mounts for c in pod.others)]:
            for m in mounts:
                if m.kind == "hostPath" and (m.volume, m.read_only) not in seen:
                    seen.add((m.volume, m.read_only))
                    yield m


def mapped_problems(workload: model.Workload, host_paths: Mapping[str, Path]) -> list[Problem]:
    """The kubelet's type check of each hostPath `--host-path` maps (the manifest's path, exactly) against the folder
    or file it names: a mismatch leaves the pod in ContainerCreating on a cluster, so nothing starts."""
    out = []
    for m in _host_mounts(workload):
        if m.key in host_paths and (why := type_mismatch(host_paths[m.key], m.host_type, str(host_paths[m.key]))):
            out.append(
                Problem(
                    f"{workload.id} volume {m.volume} hostPath.type",
                    m.host_type,
                    f"the kubelet cannot mount --host-path {m.key}={host_paths[m.key]}: {why}",
                    f"map {m.key} to a {HOST_PATH_TYPES[m.host_type]} (--host-path {m.key}=PATH), or fix hostPath.type",
                )
            )
    return list({p.path: p for p in out}.values())


def host_path_notes(workload: model.Workload, host_paths: Mapping[str, Path]) -> list[str]:
    """What the report says of each hostPath of the workload: where it is, what stands in for it."""
    out = []
    for m in _host_mounts(workload):
        head = f"{workload.id}: hostPath volume {m.volume} ({m.key})"
        mode = "read-only" if m.read_only else "read-write"
        if m.key in host_paths:
            out.append(f"{head} is {host_paths[m.key]} (--host-path), {mode}")
        elif (view := paths.kernel_view(m.key)) is not None:
            out.append(
                f"{head} shows the container's own {view}, read-only: this machine's kernel settings are never "
                "written (on a cluster it is the node's)"
            )
        else:
            stand_in = _STAND_INS.get(m.host_type, "an empty folder")
            out.append(
                f"{head} is {stand_in} of the pod's own node, {mode}, not this machine's {paths.normal(m.key)} "
                f"(--host-path {m.key}=DIR maps it to a folder or file of yours)"
            )
    return out


_STAND_INS = {
    "Directory": "an empty folder (standing in for the node's existing one)",
    "File": "an empty file (standing in for the node's existing one)",
    "FileOrCreate": "an empty file",
    "Socket": "an empty file (no socket: nothing listens there)",
    "CharDevice": "an empty file (no device backs it)",
    "BlockDevice": "an empty file (no device backs it)",
}


def _fix(mount: model.Mount, why: str) -> str:
    if mount.kind == "claim":
        return f"add the PersistentVolumeClaim '{mount.key}' to the manifests (--volume {mount.key}=DIR keeps its data)"
    if mount.kind == "bucket":
        return f'add the annotation {GCSFUSE_ANNOTATION}: "true" to the pod template'
    if "not emulated" in why:
        return f"use one of {SUPPORTED}"
    if mount.kind == "hostPath":
        return f"set hostPath.type to one of {', '.join(repr(t) for t in HOST_PATH_TYPES)}"
    if "the API server rejects" in why:
        return (
            "rename the key: letters, digits, '-', '_' and '.', not '.', '..' or starting with '..' "
            "(items[].path sets the file's name)"
        )
    if why.startswith(("invalid path", "the file", "two files")):
        return "give each item its own file path inside the volume (relative, without '..', no file also a folder)"
    return "add the object to the manifests, or mark the volume source optional: true"
