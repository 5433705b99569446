"""What every admission step shares: a finding (where in the object, the value, the message, the fix) and the
store (the objects the API server holds so far, which plugins and webhooks look up)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
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


def meta(obj: Mapping) -> Mapping:
    m = obj.get("metadata")
    return m if isinstance(m, Mapping) else {}


def namespace_of(obj: Mapping) -> str:
    """The object's namespace as the API server files it: none for cluster-scoped kinds, else `default` if unset."""
    if obj.get("kind") in CLUSTER_SCOPED:
        return ""
    ns = meta(obj).get("namespace")
    return ns if isinstance(ns, str) and ns else "default"


Key = tuple[str, str, str]
"""An object's identity in the store: (kind, namespace, name), the namespace "" for cluster-scoped kinds."""

Index = Callable[[Mapping], Iterable[Hashable]]
"""What a secondary index files an object under: no value, one, or several (client-go's IndexFunc)."""


def key_of(obj: Mapping) -> Key | None:
    """The object's identity in the store, None without a kind or a name (the store keeps no such object)."""
    kind, name = obj.get("kind"), meta(obj).get("name")
    return (kind, namespace_of(obj), name) if isinstance(kind, str) and isinstance(name, str) else None


class Store:
    """The objects admitted so far, by (kind, namespace, name); the namespace is "" for cluster-scoped kinds.
    Kinds are matched by name alone: the inputs hold one API group per kind name.

    Indexed as client-go's informer caches are (kubernetes/kubernetes @046d201c45ce
    staging/src/k8s.io/client-go/tools/cache/thread_safe_store.go: an item per key, and each index's values of an
    object updated on every add, update and delete, `updateIndices`, an emptied value dropped), so no lookup reads
    objects it does not return: by key (`get`), by kind and by kind and namespace (`of_kind`), and by
    what a caller's `Index` files an object of a kind under (`by_index`, the Services by cluster IP). Admitting N
    objects against it costs O(N), where scanning every object held on each lookup cost O(N^2) (issue #56: 10,000
    documents took 8 to 10 s, 20,000 took 54 s)."""

    def __init__(self, objects: Iterable[Mapping] = ()) -> None:
        self._by_key: dict[Key, Mapping] = {}
        self._by_kind: dict[str, dict[Key, Mapping]] = {}
        self._by_namespace: dict[tuple[str, str], dict[Key, Mapping]] = {}
        self._indices: dict[str, dict[Index, dict[Hashable, dict[Key, Mapping]]]] = {}  # kind -> index -> value
        for obj in objects:
            self.add(obj)

    def add(self, obj: Mapping) -> None:
        """Store `obj`, replacing the object stored under its key (which keeps its place in the order admitted)."""
        key = key_of(obj)
        if key is None:
            return
        before = self._by_key.get(key)
        self._by_key[key] = obj
        self._by_kind.setdefault(key[0], {})[key] = obj
        self._by_namespace.setdefault(key[:2], {})[key] = obj
        for index, values in self._indices.get(key[0], {}).items():
            if before is not None:
                _unfile(values, index(before), key)
            _file(values, index(obj), key, obj)

    def remove(self, kind: str, namespace: str, name: str) -> Mapping | None:
        """Delete the object stored under (kind, namespace, name); the one removed, or None where none was."""
        key = (kind, "" if kind in CLUSTER_SCOPED else namespace, name)
        obj = self._by_key.pop(key, None)
        if obj is None:
            return None
        _drop(self._by_kind, key[0], key)
        _drop(self._by_namespace, key[:2], key)
        for index, values in self._indices.get(key[0], {}).items():
            _unfile(values, index(obj), key)
        return obj

    def __iter__(self) -> Iterator[Mapping]:
        """Every object held, in the order admitted."""
        return iter(self._by_key.values())

    def get(self, kind: str, namespace: str, name: str) -> Mapping | None:
        return self._by_key.get((kind, "" if kind in CLUSTER_SCOPED else namespace, name))

    def of_kind(self, kind: str, namespace: str | None = None) -> Iterator[Mapping]:
        """Every object of `kind` (in `namespace` when given), in the order admitted."""
        held = self._by_kind.get(kind) if namespace is None else self._by_namespace.get((kind, namespace))
        yield from (held or {}).values()

    def by_index(self, kind: str, index: Index, value: Hashable) -> list[Mapping]:
        """The objects of `kind` that `index` files under `value`, in the order admitted. The index is built on its
        first use (one pass over the kind's objects) and kept in step with every add and remove after it."""
        values = self._indices.setdefault(kind, {}).get(index)
        if values is None:
            values = self._indices[kind][index] = {}
            for key, obj in self._by_kind.get(kind, {}).items():
                _file(values, index(obj), key, obj)
        return list(values.get(value, {}).values())

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        """A namespace's labels, with the one the API server sets on every namespace (kubernetes.io/metadata.name)."""
        ns = self.get("Namespace", "", namespace) or {}
        labels = meta(ns).get("labels")
        out = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}
        return {**out, NAMESPACE_NAME_LABEL: namespace}


def _drop(held: dict[Any, dict[Key, Mapping]], at: Hashable, key: Key) -> None:
    """Take `key` out of the group `at` of `held`, and the group itself once empty."""
    del held[at][key]
    if not held[at]:
        del held[at]


def _file(values: dict[Hashable, dict[Key, Mapping]], under: Iterable[Hashable], key: Key, obj: Mapping) -> None:
    """File the object `key` under each of an index's values `under` (addKeyToIndex)."""
    for value in under:
        values.setdefault(value, {})[key] = obj


def _unfile(values: dict[Hashable, dict[Key, Mapping]], under: Iterable[Hashable], key: Key) -> None:
    """Take the object `key` out of each of an index's values `under`, a value left empty with it
    (deleteKeyFromIndex)."""
    for value in under:
        held = values.get(value)
        if held is not None:
            held.pop(key, None)
            if not held:
                del values[value]
