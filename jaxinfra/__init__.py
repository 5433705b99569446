"""jaxinfra: declare accelerator node pools and JAX jobs in Python; synthesize, render and simulate them.

Names are imported lazily so that `jaxinfra --help` and `jaxinfra catalog` stay fast.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CPU",
    "GPU",
    "PVC",
    "TPU",
    "Cluster",
    "ConfigMapRef",
    "GCSBucket",
    "JaxJob",
    "NodePool",
    "Resources",
    "SecretRef",
    "Shadow",
    "Sidecar",
    "SpecError",
    "Toleration",
    "manifests",
]

_SPEC = {
    "CPU",
    "GPU",
    "PVC",
    "TPU",
    "Cluster",
    "ConfigMapRef",
    "GCSBucket",
    "JaxJob",
    "NodePool",
    "Resources",
    "SecretRef",
    "Shadow",
    "Sidecar",
    "Toleration",
}


def manifests(cluster: Any) -> list[dict[str, Any]]:
    """Every Kubernetes object of a validated `Cluster`, in apply order."""
    from jaxinfra.plan import plan as _plan
    from jaxinfra.render import render

    return render(_plan(cluster))


def __getattr__(name: str) -> Any:
    if name in _SPEC:
        from jaxinfra import spec

        return getattr(spec, name)
    if name == "SpecError":
        from jaxinfra.errors import SpecError

        return SpecError
    raise AttributeError(name)
