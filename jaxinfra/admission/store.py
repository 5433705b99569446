"""What every admission step shares: a finding (where in the object, the value, the message, the fix) and the
store (the objects the API server holds so far, which plugins and webhooks look up)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jaxinfra.upstream import NAMESPACE_NAME_LABEL

Path = tuple[str | int, ...]
"""A field's location inside one object: ("spec", "template", "spec", "containers", 0, "image")."""


@dataclass(frozen=True)
class Finding:
    """One thing an admission step says about an object: refused, unless `warning` (accepted, with a warning the
    API server sends back, as Pod Security does for a workload whose pods it would refuse)."""

    at: Path
    value: Any
    message: str
    fix: str
    warning: bool = False
    step: str = ""  # which step of the create said it, where the API server's error differs: "webhook" (a validating
    # webhook's denial), "admission" (an admission plugin's or Pod Security's Forbidden); "": decoding or validation


CLUSTER_SCOPED = frozenset(
    {
        # built in
        "Namespace",
        "Node",
        "PersistentVolume",
        "StorageClass",
        "PriorityClass",
        "RuntimeClass",
        "IngressClass",
        "CSIDriver",
        "CSINode",
        "VolumeAttachment",
        "CertificateSigningRequest",
        "CustomResourceDefinition",
        "APIService",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ClusterRole",
        "ClusterRoleBinding",
        # Kueue, Trainer
        "ResourceFlavor",
        "ClusterQueue",
        "WorkloadPriorityClass",
        "Topology",
        "ProvisioningRequestConfig",
        "AdmissionCheck",
        "MultiKueueCluster",
        "MultiKueueConfig",
        "Cohort",
        "ClusterTrainingRuntime",
        # GKE multi-networking (the bundled CRDs: `scope: Cluster`)
        "Network",
        "GKENetworkParamSet",
    }
)
"""Kinds whose identity has no namespace (the API server ignores metadata.namespace on them): the one list the front
door, the simulator's API server and its notes read."""
"""Kinds whose identity has no namespace (the API server ignores metadata.namespace on them)."""


def meta(obj: Mapping) -> Mapping:
    m = obj.get("metadata")
    return m if isinstance(m, Mapping) else {}


def namespace_of(obj: Mapping) -> str:
    """The object's namespace as the API server files it: none for cluster-scoped kinds, else `default` if unset."""
    if obj.get("kind") in CLUSTER_SCOPED:
        return ""
    ns = meta(obj).get("namespace")
    return ns if isinstance(ns, str) and ns else "default"


class Store:
    """The objects admitted so far, by (kind, namespace, name); the namespace is "" for cluster-scoped kinds.
    Kinds are matched by name alone: the inputs hold one API group per kind name."""

    def __init__(self, objects: Iterable[Mapping] = ()) -> None:
        self._by_key: dict[tuple[str, str, str], Mapping] = {}
        for obj in objects:
            self.add(obj)

    def add(self, obj: Mapping) -> None:
        name = meta(obj).get("name")
        if isinstance(obj.get("kind"), str) and isinstance(name, str):
            self._by_key[(obj["kind"], namespace_of(obj), name)] = obj

    def get(self, kind: str, namespace: str, name: str) -> Mapping | None:
        return self._by_key.get((kind, "" if kind in CLUSTER_SCOPED else namespace, name))

    def of_kind(self, kind: str, namespace: str | None = None) -> Iterator[Mapping]:
        """Every object of `kind` (in `namespace` when given), in the order admitted."""
        for (k, ns, _), obj in self._by_key.items():
            if k == kind and (namespace is None or ns == namespace):
                yield obj

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        """A namespace's labels, with the one the API server sets on every namespace (kubernetes.io/metadata.name)."""
        ns = self.get("Namespace", "", namespace) or {}
        labels = meta(ns).get("labels")
        out = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}
        return {**out, NAMESPACE_NAME_LABEL: namespace}
