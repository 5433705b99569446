"""GKE's Cloud Storage FUSE webhook: a pod annotated `gke-gcsfuse/volumes: "true"` gets the driver's sidecar mounter
as a native sidecar, first among its init containers (after istio-proxy), with its emptyDir volumes, as a cluster
whose nodes support native sidecars (GKE 1.29 and later) injects it. Its image is stood in (`platform.standins`).

Source: GoogleCloudPlatform/gcs-fuse-csi-driver @5fcdc04a pkg/webhook/mutatingwebhook.go `Handle` (the annotation's
values 'true' and 'True'; no second injection), injection.go `injectSidecarContainer` (a container the pod declares
under the sidecar's name gives its image and is replaced), sidecar_spec.go `GetNativeSidecarContainerSpec`,
`GetSecurityContext`, `GetSidecarContainerVolumeSpec`; deploy/base/node/node.yaml (the image).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jaxinfra.upstream import GCSFUSE_ANNOTATION

GCSFUSE_SIDECAR = "gke-gcsfuse-sidecar"
"""The sidecar's container name (sidecar_spec.go GcsFuseSidecarName)."""
GCSFUSE_IMAGE = "gke.gcr.io/gcs-fuse-csi-driver-sidecar-mounter"
"""The sidecar's image as GKE's webhook injects it (deploy/base/node/node.yaml; GKE picks the tag per version)."""
ISTIO_PROXY = "istio-proxy"
"""The container the webhook injects after, when present (injection.go IstioSidecarName)."""


def gcsfuse_requested(annotations: Mapping[str, str]) -> bool:
    """Whether the pod asks GKE's webhook for the Cloud Storage FUSE sidecar: the values it accepts as true."""
    return annotations.get(GCSFUSE_ANNOTATION) in ("true", "True")


_GCSFUSE_TMP = ("gke-gcsfuse-tmp", "/gcsfuse-tmp")
_GCSFUSE_OWN = (("gke-gcsfuse-buffer", "/gcsfuse-buffer"), ("gke-gcsfuse-cache", "/gcsfuse-cache"))
"""The sidecar's volumes: its tmp volume always; the buffer and cache ones unless the pod has its own of that name."""


def gcsfuse_webhook(pod_spec: Mapping[str, Any], annotations: Mapping[str, str]) -> Mapping[str, Any]:
    """The pod spec as GKE's Cloud Storage FUSE webhook leaves it when the pod asks for its sidecar: the native sidecar
    `gke-gcsfuse-sidecar` first among the init containers (after istio-proxy), mounting its emptyDir volumes. A pod
    without the annotation, or with the sidecar injected already, is returned as it is."""
    if not gcsfuse_requested(annotations):
        return pod_spec
    inits = [c for c in pod_spec.get("initContainers") or [] if isinstance(c, Mapping)]
    mains = [c for c in pod_spec.get("containers") or [] if isinstance(c, Mapping)]
    if any(c.get("name") == GCSFUSE_SIDECAR and c.get("restartPolicy") == "Always" for c in inits):
        return pod_spec
    declared = next((c for c in [*inits, *mains] if c.get("name") == GCSFUSE_SIDECAR), None)  # its image is used
    volumes = [
        v for v in pod_spec.get("volumes") or [] if not (isinstance(v, Mapping) and v.get("name") == _GCSFUSE_TMP[0])
    ]
    names = {v.get("name") for v in volumes if isinstance(v, Mapping)}
    mounted = [_GCSFUSE_TMP, *_GCSFUSE_OWN]
    sidecar = {
        "name": GCSFUSE_SIDECAR,
        "image": str(declared.get("image") or GCSFUSE_IMAGE) if declared is not None else GCSFUSE_IMAGE,
        "args": ["--v=5"],
        "env": [{"name": "NATIVE_SIDECAR", "value": "TRUE"}],
        "restartPolicy": "Always",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "runAsGroup": 65534,
        },
        "volumeMounts": [{"name": name, "mountPath": path} for name, path in mounted],
    }
    inits = [c for c in inits if c is not declared]
    at = next((i + 1 for i, c in enumerate(inits) if c.get("name") == ISTIO_PROXY), 0)
    return {
        **pod_spec,
        "initContainers": [*inits[:at], sidecar, *inits[at:]],
        "containers": [c for c in mains if c is not declared],
        "volumes": [*volumes, *({"name": n, "emptyDir": {}} for n, _ in mounted if n not in names)],
    }
