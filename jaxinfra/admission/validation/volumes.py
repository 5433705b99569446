"""A PodSpec's volumes and volume mounts, as the API server's validation step checks them, with the downward API
field and resource selectors they share with container env.

Emulated from pkg/apis/core/validation/validation.go @000f26050b9b (kubernetes/kubernetes; the commit is the stored
version read): ValidateVolumes, validateVolumeSource (and the sources below), validateKeyToPath,
validateDownwardAPIVolumeFile, validateProjectionSources, validateObjectFieldSelector,
validateContainerResourceFieldSelector, ValidateVolumeMounts, validateMountPropagation.

Knowingly not emulated: the volume sources other than emptyDir, hostPath, secret, configMap, persistentVolumeClaim,
downwardAPI, projected, csi, nfs and ephemeral (their "exactly one source" rule is).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from jaxinfra import quantity
from jaxinfra.admission.decoded import as_int, as_map, as_str, entries
from jaxinfra.admission.store import Finding, Path
from jaxinfra.admission.validation.messages import (
    duplicate_value,
    forbidden,
    invalid_each,
    invalid_value,
    not_found,
    not_supported,
    required_value,
    too_long,
)
from jaxinfra.admission.validation.meta import NAME_FIX
from jaxinfra.admission.validation.names import (
    LABEL,
    byte_size,
    dns1123_label,
    dns1123_subdomain,
    local_descending_path,
    local_non_reserved_path,
    qualified_name,
)

_VOLUME_SOURCES = (  # validateVolumeSource's order; the path it names when a second one is set
    ("emptyDir", "emptyDir"),
    ("hostPath", "hostPath"),
    ("gitRepo", "gitRepo"),
    ("gcePersistentDisk", "gcePersistentDisk"),
    ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("secret", "secret"),
    ("nfs", "nfs"),
    ("iscsi", "iscsi"),
    ("glusterfs", "glusterfs"),
    ("flocker", "flocker"),
    ("persistentVolumeClaim", "persistentVolumeClaim"),
    ("rbd", "rbd"),
    ("cinder", "cinder"),
    ("cephfs", "cephFS"),
    ("quobyte", "quobyte"),
    ("downwardAPI", "downwarAPI"),
    ("fc", "fc"),
    ("flexVolume", "flexVolume"),
    ("configMap", "configMap"),
    ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"),
    ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"),
    ("azureDisk", "azureDisk"),
    ("storageos", "storageos"),
    ("projected", "projected"),
    ("scaleIO", "scaleIO"),
    ("csi", "csi"),
    ("ephemeral", "ephemeral"),
    ("image", "image"),
)
_FILE_MODE = "must be a number between 0 and 0777 (octal), both inclusive"
_VOLUME_FIELD_PATHS = ("metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid")
_RESOURCE_FIELDS = (
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
)
_PATH_FIX = {
    "must be a relative path": "drop the leading '/': the path is relative to the volume",
    "must not contain '..'": "name a path inside the volume, without '..' elements",
    "must not start with '..'": "rename it: names starting with '..' are the kubelet's own (..data)",
}


def _mode(at: Path, value: Any) -> list[Finding]:
    n = as_int(value)
    return (
        [invalid_value(at, n, _FILE_MODE, "use an octal mode such as 0644 (420 in decimal)")]
        if n is not None and not 0 <= n <= 0o777
        else []
    )


def _item_path(at: Path, path: str, reserved_ok: bool = False) -> list[Finding]:
    reasons = local_descending_path(path) if reserved_ok else local_non_reserved_path(path)
    return [invalid_value(at, path, r, _PATH_FIX[r]) for r in reasons]


def _key_to_path(item: Mapping, at: Path) -> list[Finding]:
    """validateKeyToPath: a configMap/secret item."""
    out: list[Finding] = []
    if not as_str(item.get("key")):
        out.append(required_value(at + ("key",), "name the key of the ConfigMap or Secret to project"))
    path = as_str(item.get("path"))
    if not path:
        out.append(required_value(at + ("path",), "name the file the key becomes"))
    return out + _item_path(at + ("path",), path) + _mode(at + ("mode",), item.get("mode"))


_FIELD_LABELS = frozenset(
    {  # pods.ConvertDownwardAPIFieldLabel, v1
        "metadata.annotations",
        "metadata.labels",
        "metadata.name",
        "metadata.namespace",
        "metadata.uid",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.schedulerName",
        "status.phase",
        "status.hostIP",
        "status.hostIPs",
        "status.podIP",
        "status.podIPs",
    }
)


def validate_field_ref(ref: Mapping, at: Path, allowed: Sequence[str]) -> list[Finding]:
    """validateObjectFieldSelector (apiVersion defaults to v1)."""
    path = as_str(ref.get("fieldPath"))
    if not path:
        return [required_value(at + ("fieldPath",), "name the pod field, e.g. metadata.name")]
    if m := re.fullmatch(r"(metadata\.(?:annotations|labels))\['(.*)'\]", path):
        key = m.group(2).lower() if m.group(1).endswith("annotations") else m.group(2)
        return invalid_each(at, key, qualified_name(key), "subscript a valid label or annotation key")
    if path not in _FIELD_LABELS:
        return [
            invalid_value(
                at + ("fieldPath",),
                path,
                f"error converting fieldPath: field label not supported: {path}",
                "use a supported pod field, e.g. metadata.name",
            )
        ]
    if path not in allowed:
        return [not_supported(at + ("fieldPath",), path, allowed, "use one of the supported pod fields")]
    return []


def validate_resource_ref(ref: Mapping, at: Path, volume: bool) -> list[Finding]:
    """validateContainerResourceFieldSelector (hugepages prefixes allowed)."""
    resource = as_str(ref.get("resource"))
    if volume and not as_str(ref.get("containerName")):
        return [required_value(at + ("containerName",), "name the container whose resources to expose")]
    if not resource:
        return [required_value(at + ("resource",), "name the resource, e.g. limits.cpu")]
    if resource not in _RESOURCE_FIELDS and not resource.startswith(("requests.hugepages-", "limits.hugepages-")):
        return [not_supported(at + ("resource",), resource, _RESOURCE_FIELDS, "expose one of the supported fields")]
    return []


def _downward_file(item: Mapping, at: Path) -> list[Finding]:
    """validateDownwardAPIVolumeFile: `at` is the source's path (upstream does not index the item)."""
    out: list[Finding] = []
    path = as_str(item.get("path"))
    if not path:
        out.append(required_value(at + ("path",), "name the file the field becomes"))
    out += _item_path(at + ("path",), path)
    field_ref, resource_ref = item.get("fieldRef"), item.get("resourceFieldRef")
    if isinstance(field_ref, Mapping):
        out += validate_field_ref(field_ref, at + ("fieldRef",), _VOLUME_FIELD_PATHS)
        if isinstance(resource_ref, Mapping):
            out.append(
                invalid_value(
                    at,
                    "resource",
                    "fieldRef and resourceFieldRef can not be specified simultaneously",
                    "keep one of them per item",
                )
            )
    elif isinstance(resource_ref, Mapping):
        out += validate_resource_ref(resource_ref, at + ("resourceFieldRef",), volume=True)
    else:
        out.append(
            required_value(at, "set fieldRef or resourceFieldRef", "one of fieldRef and resourceFieldRef is required")
        )
    return out + _mode(at + ("mode",), item.get("mode"))


def _projected(source: Mapping, at: Path) -> list[Finding]:
    """validateProjectedVolumeSource and validateProjectionSources (one kind per source, no path twice)."""
    out = _mode(at + ("defaultMode",), source.get("defaultMode"))
    seen: set[str] = set()

    def claim(path: str, value: Any) -> None:
        if path in seen:
            out.append(invalid_value(at, value, "conflicting duplicate paths", "give each projected file its own path"))
        seen.add(path)

    for i, src in entries(source.get("sources")):
        where = at + ("sources", i)
        kinds = [
            k
            for k in (
                "secret",
                "configMap",
                "downwardAPI",
                "serviceAccountToken",
                "clusterTrustBundle",
                "podCertificate",
            )
            if isinstance(src.get(k), Mapping)
        ]
        for kind in ("secret", "configMap"):
            ref = as_map(src.get(kind))
            if kind not in kinds:
                continue
            if not as_str(ref.get("name")):
                out.append(required_value(where + (kind, "name"), f"name the {kind} to project"))
            for j, item in entries(ref.get("items")):
                out += _key_to_path(item, where + (kind, "items", j))
                if as_str(item.get("path")):
                    claim(as_str(item.get("path")), as_str(ref.get("name")))
        if "downwardAPI" in kinds:
            for _, item in entries(src["downwardAPI"].get("items")):
                out += _downward_file(item, where + ("downwardAPI",))
                if as_str(item.get("path")):
                    claim(as_str(item.get("path")), as_str(item.get("path")))
        if "serviceAccountToken" in kinds:
            token = src["serviceAccountToken"]
            seconds = as_int(token.get("expirationSeconds"))
            if seconds is not None and seconds < 600:
                out.append(
                    invalid_value(
                        where + ("serviceAccountToken", "expirationSeconds"),
                        seconds,
                        "may not specify a duration less than 10 minutes",
                        "use at least 600 seconds",
                    )
                )
            if seconds is not None and seconds > 1 << 32:
                out.append(
                    invalid_value(
                        where + ("serviceAccountToken", "expirationSeconds"),
                        seconds,
                        "may not specify a duration larger than 2^32 seconds",
                        "use a shorter duration",
                    )
                )
            path = as_str(token.get("path"))
            if not path:
                out.append(required_value(at + ("path",), "name the token's file"))
            else:
                out += _item_path(at + ("path",), path)
        if len(kinds) > 1:
            out.append(
                forbidden(
                    where, "may not specify more than 1 volume type per source", "split it into one source per kind"
                )
            )
    return out


def _volume_source(volume: Mapping, at: Path) -> list[Finding]:
    """validateVolumeSource: exactly one source, and the rules of the common ones."""
    out: list[Finding] = []
    count = 0
    for key, named in _VOLUME_SOURCES:
        if key not in volume or volume[key] is None:
            continue
        if count:
            out.append(
                forbidden(
                    at + (named,),
                    "may not specify more than 1 volume type",
                    "split it into two volumes, one source each",
                )
            )
            continue
        count += 1
        out += _source_rules(key, as_map(volume[key]), at + (key,))
    if not count:
        out.append(required_value(at, "give the volume a source, e.g. emptyDir: {}", "must specify a volume type"))
    return out


def _source_rules(key: str, src: Mapping, at: Path) -> list[Finding]:
    out: list[Finding] = []
    if key == "emptyDir" and "sizeLimit" in src:
        size = quantity.parse(src["sizeLimit"])
        if size is None:
            out.append(invalid_value(at + ("sizeLimit",), src["sizeLimit"], quantity.MESSAGE, "write a quantity: 1Gi"))
        elif size < 0:
            out.append(
                forbidden(
                    at + ("sizeLimit",), "SizeLimit field must be a valid resource quantity", "use a non-negative size"
                )
            )
    elif key == "hostPath":
        path = as_str(src.get("path"))
        if not path:
            out.append(required_value(at + ("path",), "name the node's path"))
        elif ".." in path.split("/"):
            out.append(invalid_value(at + ("path",), path, "must not contain '..'", "name the path without '..'"))
    elif key in ("secret", "configMap"):
        name_key = "secretName" if key == "secret" else "name"
        if not as_str(src.get(name_key)):
            out.append(required_value(at + (name_key,), f"name the {key} to mount"))
        out += _mode(at + ("defaultMode",), src.get("defaultMode"))
        for i, item in entries(src.get("items")):
            out += _key_to_path(item, at + ("items", i))
    elif key == "persistentVolumeClaim" and not as_str(src.get("claimName")):
        out.append(required_value(at + ("claimName",), "name the PersistentVolumeClaim"))
    elif key == "downwardAPI":
        out += _mode(at + ("defaultMode",), src.get("defaultMode"))
        for _, item in entries(src.get("items")):
            out += _downward_file(item, at)
    elif key == "projected":
        out += _projected(src, at)
    elif key == "csi":
        driver = as_str(src.get("driver"))
        if not driver:
            out.append(required_value(at + ("driver",), "name the CSI driver, e.g. gcsfuse.csi.storage.gke.io"))
        if byte_size(driver) > 63:
            out.append(too_long(at + ("driver",), 63, "use the driver's registered name"))
        out += invalid_each(
            at + ("driver",), driver, dns1123_subdomain(driver.lower()), "use the driver's registered name"
        )
    elif key == "nfs":
        for field in ("server", "path"):
            if not as_str(src.get(field)):
                out.append(required_value(at + (field,), f"set the NFS {field}"))
        if not as_str(src.get("path")).startswith("/"):
            out.append(
                invalid_value(
                    at + ("path",),
                    as_str(src.get("path")),
                    "must be an absolute path",
                    "start the export path with '/'",
                )
            )
    elif key == "ephemeral" and not isinstance(src.get("volumeClaimTemplate"), Mapping):
        out.append(required_value(at + ("volumeClaimTemplate",), "give the ephemeral volume a volumeClaimTemplate"))
    return out


def validate_volumes(volumes: Any, at: Path) -> tuple[dict[str, Mapping], list[Finding]]:
    """ValidateVolumes: the volumes that passed (mounts may name only those) and what was wrong."""
    valid: dict[str, Mapping] = {}
    out: list[Finding] = []
    for i, volume in entries(volumes):
        name = as_str(volume.get("name"))
        errs = _volume_source(volume, at + (i,))
        if not name:
            errs.append(required_value(at + (i, "name"), "name the volume, e.g. scratch"))
        else:
            errs += invalid_each(at + (i, "name"), name, dns1123_label(name), NAME_FIX[LABEL])
        if name in valid:
            errs.append(duplicate_value(at + (i, "name"), name, "give each volume its own name"))
        if errs:
            out += errs
        else:
            valid[name] = volume
    return valid, out


_PROPAGATIONS = ("Bidirectional", "HostToContainer", "None")


def validate_mounts(container: Mapping, volumes: Mapping[str, Mapping], at: Path) -> list[Finding]:
    """ValidateVolumeMounts (subPath and subPathExpr errors name the list, not the entry, as upstream does)."""
    out: list[Finding] = []
    seen: set[str] = set()
    privileged = as_map(container.get("securityContext")).get("privileged") is True
    for i, mount in entries(container.get("volumeMounts")):
        where = at + (i,)
        name, path = as_str(mount.get("name")), as_str(mount.get("mountPath"))
        if not name:
            out.append(required_value(where + ("name",), "name the volume to mount"))
        if name not in volumes:
            out.append(not_found(where + ("name",), name, "add a volume of this name to spec.volumes, or fix the name"))
        if not path:
            out.append(required_value(where + ("mountPath",), "set the path where the container sees the volume"))
        if path in seen:
            out.append(
                invalid_value(where + ("mountPath",), path, "must be unique", "mount each volume at its own path")
            )
        seen.add(path)
        if isinstance(volumes.get(name, {}).get("image"), Mapping):
            for key in ("subPath", "subPathExpr"):
                if as_str(mount.get(key)):
                    out.append(
                        invalid_value(
                            where + (key,),
                            mount[key],
                            "not allowed in image volume sources",
                            f"drop {key}: an image volume mounts whole",
                        )
                    )
        sub, expr = as_str(mount.get("subPath")), as_str(mount.get("subPathExpr"))
        out += _item_path(at + ("subPath",), sub, reserved_ok=True) if sub else []
        if expr:
            if sub:
                out.append(
                    invalid_value(
                        where + ("subPathExpr",),
                        expr,
                        "subPathExpr and subPath are mutually exclusive",
                        "keep one of them",
                    )
                )
            out += _item_path(at + ("subPathExpr",), expr, reserved_ok=True)
        propagation = mount.get("mountPropagation")
        if isinstance(propagation, str):
            if propagation not in _PROPAGATIONS:
                out.append(
                    not_supported(at + ("mountPropagation",), propagation, _PROPAGATIONS, "use None or HostToContainer")
                )
            elif propagation == "Bidirectional" and not privileged:
                out.append(
                    forbidden(
                        at + ("mountPropagation",),
                        "Bidirectional mount propagation is available only to privileged containers",
                        "use HostToContainer",
                    )
                )
    return out
