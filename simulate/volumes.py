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
- `configMap`, `secret`, `downwardAPI` and `projected` (of those): their files, read-only.
`--volume NAME=DIR` puts a claim or a bucket in a folder that outlives the simulation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from jaxinfra.errors import Problem

from . import model
from .inputs import Objects

if TYPE_CHECKING:
    from .kubelet import PodFacts

GCSFUSE_DRIVER = "gcsfuse.csi.storage.gke.io"
GCSFUSE_ANNOTATION = "gke-gcsfuse/volumes"
FILE_SOURCES = ("configMap", "secret", "downwardAPI", "projected")
SUPPORTED = "emptyDir, persistentVolumeClaim, csi (gcsfuse.csi.storage.gke.io), configMap, secret, downwardAPI, projected"


def _object_files(kind: str, source: Mapping, namespace: str, objects: Objects) -> tuple[dict[str, str], str | None]:
    """A configMap/secret source's files (all keys, or `items` key -> path), and why it cannot be set up, if so."""
    name = source.get("name") or source.get("secretName") or ""
    data = (objects.config_maps if kind == "configMap" else objects.secrets).get((namespace, name))
    what = "configmap" if kind == "configMap" else "secret"
    if data is None:
        return {}, None if source.get("optional") else f'{what} "{name}" not found'
    items = source.get("items")
    if not items:
        return dict(data), None
    files, missing = {}, []
    for item in items:
        if item.get("key") in data:
            files[str(item.get("path"))] = data[item["key"]]
        else:
            missing.append(str(item.get("key")))
    return files, (f'{what} "{name}" has no key {", ".join(missing)}' if missing and not source.get("optional") else None)


def _downward_files(items: Sequence[Mapping], facts: PodFacts) -> dict[str, str]:
    """A downwardAPI source's files: whole label/annotation maps as `key="value"` lines, or single fields."""
    files = {}
    for item in items:
        ref = item.get("fieldRef") or {}
        path = ref.get("fieldPath", "")
        if path in ("metadata.labels", "metadata.annotations"):
            values = facts.labels if path == "metadata.labels" else facts.annotations
            files[str(item.get("path"))] = "\n".join(f'{k}="{v}"' for k, v in sorted(values.items()))
        elif item.get("resourceFieldRef"):
            files[str(item.get("path"))] = facts.resource(item["resourceFieldRef"], facts.containers[0])
        else:
            files[str(item.get("path"))] = facts.field_ref(path) or ""
    return files


def _files(volume: Mapping, namespace: str, facts: PodFacts, objects: Objects) -> tuple[dict[str, str], str | None]:
    if "downwardAPI" in volume:
        return _downward_files((volume["downwardAPI"] or {}).get("items") or [], facts), None
    if "projected" in volume:
        files: dict[str, str] = {}
        for source in (volume["projected"] or {}).get("sources") or []:
            kind = next((k for k in ("configMap", "secret", "downwardAPI") if k in source), None)
            if kind is None:
                return {}, f"projected source {sorted(source)} is not emulated"
            made, why = (_downward_files((source[kind] or {}).get("items") or [], facts), None) if kind == "downwardAPI" \
                else _object_files(kind, source[kind] or {}, namespace, objects)
            if why:
                return {}, why
            files.update(made)
        return files, None
    kind = "configMap" if "configMap" in volume else "secret"
    return _object_files(kind, volume[kind] or {}, namespace, objects)


def _source(volume: Mapping, namespace: str, annotations: Mapping[str, str], facts: PodFacts,
            objects: Objects) -> tuple[model.Mount, str | None]:
    """A volume as a Mount template (no mount path yet), and why the kubelet could not set it up."""
    name = str(volume.get("name", ""))
    if "emptyDir" in volume:
        return model.Mount(name, "", kind="emptyDir"), None
    if "persistentVolumeClaim" in volume:
        claim = str((volume["persistentVolumeClaim"] or {}).get("claimName", ""))
        found = (namespace, claim) in objects.claims
        return (model.Mount(name, "", kind="claim", key=claim, read_only=bool(volume["persistentVolumeClaim"].get("readOnly"))),
                None if found else f'persistentvolumeclaim "{claim}" not found')
    if "csi" in volume and (volume["csi"] or {}).get("driver") == GCSFUSE_DRIVER:
        bucket = str(((volume["csi"] or {}).get("volumeAttributes") or {}).get("bucketName", ""))
        why = None if annotations.get(GCSFUSE_ANNOTATION) == "true" else (
            f"the {GCSFUSE_DRIVER} driver finds no sidecar: the pod lacks the annotation {GCSFUSE_ANNOTATION}: \"true\"")
        return model.Mount(name, "", kind="bucket", key=bucket, read_only=bool(volume["csi"].get("readOnly"))), why
    if any(k in volume for k in FILE_SOURCES):
        files, why = _files(volume, namespace, facts, objects)
        return model.Mount(name, "", kind="files", read_only=True, files=tuple(sorted(files.items()))), why
    kind = next((k for k in volume if k != "name"), "?")
    return model.Mount(name, "", kind=kind), f"volume type {kind} is not emulated (supported: {SUPPORTED})"


def resolve(where: str, pod_spec: Mapping, container: Mapping, namespace: str, annotations: Mapping[str, str],
            facts: PodFacts, objects: Objects, problems: list[tuple[str, Problem]]) -> tuple[model.Mount, ...]:
    """The JAX container's mounts; every volume of the pod that cannot be set up is a problem (the pod stays Pending)."""
    sources: dict[str, model.Mount] = {}
    for volume in pod_spec.get("volumes") or []:
        mount, why = _source(volume, namespace, annotations, facts, objects)
        sources[mount.volume] = mount
        if why:
            problems.append((f"volume|{mount.volume}", Problem(f"{where} volume {mount.volume}", mount.kind,
                                                                f"the kubelet cannot set it up, so the pod stays Pending: {why}",
                                                                _fix(mount, why))))
    mounts = []
    for vm in container.get("volumeMounts") or []:
        source = sources.get(str(vm.get("name")))
        if source is None:
            problems.append((f"mount|{vm.get('name')}", Problem(f"{where} volumeMounts {vm.get('name')}", vm.get("name"),
                                                                 "no volume of the pod has this name: the API server rejects the pod",
                                                                 "add the volume to spec.volumes, or fix the name")))
            continue
        mounts.append(model.Mount(source.volume, str(vm.get("mountPath", "")), str(vm.get("subPath") or ""),
                                  source.read_only or bool(vm.get("readOnly")), source.kind, source.key, source.files))
    return tuple(mounts)


def _fix(mount: model.Mount, why: str) -> str:
    if mount.kind == "claim":
        return f"add the PersistentVolumeClaim '{mount.key}' to the manifests (--volume {mount.key}=DIR keeps its data)"
    if mount.kind == "bucket":
        return f'add the annotation {GCSFUSE_ANNOTATION}: "true" to the pod template'
    if "not emulated" in why:
        return f"use one of {SUPPORTED}"
    return "add the object to the manifests, or mark the volume source optional: true"

