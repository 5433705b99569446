"""The manifests as the API server would hold them: parsed, indexed by kind, namespace and name.

Everything downstream reads objects through here: the workloads' controllers (`controllers/`),
the kubelet (ConfigMaps and Secrets for env), the cluster DNS (Services). Also what a cluster has
without the manifests: the `default` namespace, the system PriorityClasses, and the upstream
`jax-distributed` ClusterTrainingRuntime that the Kubeflow Trainer installs
(manifests/base/runtimes/jax_distributed.yaml at kubeflow/trainer@8c0f5059), with its other built-in runtimes,
which the simulator reads only for their name and mlPolicy.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from jaxinfra import yamlio
from jaxinfra.admission import gobase64
from jaxinfra.admission.store import Store
from jaxinfra.errors import ManifestError
from jaxinfra.quantity import parse as quantity
from jaxinfra.upstream import (
    GPU_RESOURCE,
    INSTALLED_RUNTIMES,
    KUEUE_API_GROUP,
    SYSTEM_PRIORITY_CLASSES,
    TPU_RESOURCE,
    TRAINER_API,
    TRAINER_JAX_RUNTIME,
)
from jaxinfra_sim.core import model

UPSTREAM_RUNTIME = TRAINER_JAX_RUNTIME
"""The ClusterTrainingRuntime installed with the Kubeflow Trainer, so present without the manifests."""

# Kinds that create no pods; accepted silently (Services, ConfigMaps and Secrets are read).
PASSIVE_KINDS = frozenset(
    {
        "Namespace",
        "ServiceAccount",
        "Service",
        "ConfigMap",
        "Secret",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "NetworkPolicy",
        "PriorityClass",
        # Kueue queueing objects (jaxinfra may emit them); they gate admission, not pod shape.
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
        "WorkloadPriorityClass",
        "Topology",
        "AdmissionCheck",
        "ProvisioningRequestConfig",
        "Cohort",
        # Trainer v2 runtimes: read by TrainJobs.
        "TrainingRuntime",
        "ClusterTrainingRuntime",
        # Storage: what pods' volumes claim.
        "PersistentVolumeClaim",
        "PersistentVolume",
        "StorageClass",
    }
)


#: The Kueue objects that decide a workload's admission (`kueue.scheduler.admit`), kept by (kind, namespace, name).
KUEUE_KINDS = (
    "LocalQueue",
    "ClusterQueue",
    "ResourceFlavor",
    "AdmissionCheck",
    "ProvisioningRequestConfig",
    "WorkloadPriorityClass",
    "Topology",
    "Cohort",
)


def load_files(paths: Iterable[str | Path]) -> list[dict]:
    """Every manifest of some multi-document YAML files; all unreadable files reported at once."""
    manifests, problems = yamlio.read_manifests(paths)
    if problems:
        raise ManifestError(problems)
    return manifests


def meta(obj: Mapping) -> Mapping:
    return obj.get("metadata") or {}


def namespace_of(obj: Mapping) -> str:
    return meta(obj).get("namespace") or "default"


def oid(obj: Mapping) -> str:
    """`Kind/namespace/name`: how problems and workloads name an object."""
    return f"{obj.get('kind')}/{namespace_of(obj)}/{meta(obj).get('name')}"


def fake_uid(*parts: str) -> str:
    """A deterministic fake UID (metadata.uid is random upstream)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "jaxinfra-sim/" + "/".join(parts)))


def b64(value: Any) -> str:
    """A `[]byte` value (a Secret's `data`, a ConfigMap's `binaryData`) as the API server decodes it (Go's
    encoding/base64: `gobase64`), its bytes kept exactly (surrogate escapes, which the volume writer and the env turn
    back into the same bytes); kept as written where it is not base64 (the front door refuses such an object)."""
    try:
        return gobase64.decode(str(value)).decode("utf-8", "surrogateescape")
    except ValueError:
        return str(value)


def str_value(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def strings(mapping: Mapping | None) -> dict[str, str]:
    """Labels/annotations/data as the API stores them: string values (a null one "": JSON's null decodes into a Go
    map[string]string's value as the zero string, encoding/json's "null ... has no effect on the value")."""
    return {str(k): "" if v is None else str_value(v) for k, v in (mapping or {}).items()}


@dataclass(frozen=True)
class ServicePort:
    """One of a Service's ports as kube-proxy serves it: `target` a number, or a container port's name."""

    name: str
    port: int
    target: int | str
    protocol: str = "TCP"  # TCP | UDP | SCTP


@dataclass(frozen=True)
class Service:
    """A Service as DNS and kube-proxy see it; `origin` says who creates it (the manifests or a controller);
    `cluster_ip` its virtual IP as the API server allocated it (None: headless, or none)."""

    namespace: str
    name: str
    selector: Mapping[str, str] | None
    headless: bool
    publish_not_ready: bool
    ports: tuple[tuple[int, Any], ...]  # (port, targetPort)
    origin: str
    operator_owned: bool = False  # created by an operator with no setting for it (Training Operator v1)
    cluster_ip: str | None = None
    port_specs: tuple[ServicePort, ...] = ()

    def selects(self, pod: model.Pod) -> bool:
        if not self.selector:
            return False
        return pod.namespace == self.namespace and all(pod.labels.get(k) == v for k, v in self.selector.items())


def service_of(obj: Mapping) -> Service:
    spec = obj.get("spec") or {}
    ports = tuple((p.get("port"), p.get("targetPort", p.get("port"))) for p in spec.get("ports") or [])
    selector = spec.get("selector")
    headless = spec.get("clusterIP") == "None"
    cluster_ip = spec.get("clusterIP")
    return Service(
        namespace_of(obj),
        meta(obj).get("name", ""),
        strings(selector) if selector else None,
        headless,
        bool(spec.get("publishNotReadyAddresses", False)),
        ports,
        oid(obj),
        cluster_ip=cluster_ip if isinstance(cluster_ip, str) and cluster_ip and not headless else None,
        port_specs=tuple(
            ServicePort(
                str(p.get("name") or ""),
                p["port"],
                p.get("targetPort") or p["port"],
                str(p.get("protocol") or "TCP"),
            )
            for p in spec.get("ports") or []
            if isinstance(p, Mapping) and isinstance(p.get("port"), int)
        ),
    )


@dataclass
class Objects:
    """The passive objects pods read: Services (DNS), ConfigMaps and Secrets (env), PriorityClasses,
    ServiceAccounts (admission), Kueue's queues; and the API server's store of every applied object, against which
    what the controllers create is admitted."""

    services: dict[tuple[str, str], Service] = field(default_factory=dict)
    config_maps: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    secrets: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    priority_classes: dict[str, int] = field(default_factory=lambda: dict(SYSTEM_PRIORITY_CLASSES))
    namespaces: set[str] = field(default_factory=lambda: {"default"})
    runtimes: dict[tuple[str, str, str], Mapping] = field(default_factory=dict)  # (kind, namespace or "", name)
    service_accounts: dict[tuple[str, str], Mapping] = field(default_factory=dict)
    namespace_labels: dict[str, dict[str, str]] = field(
        default_factory=dict
    )  # of the Namespace objects among the inputs
    claims: set[tuple[str, str]] = field(default_factory=set)  # PersistentVolumeClaims
    kueue: dict[tuple[str, str, str], Mapping] = field(
        default_factory=dict
    )  # (kind, namespace or "", name): Kueue's queues
    restarts: int = 0  # JobSet status.restarts: stamped on its Jobs and pods
    recreated: int = 0  # times the pods were recreated: each time, new pod names
    store: Store = field(default_factory=Store)  # every applied object, as the front door stored it

    def add(self, obj: Mapping) -> None:
        kind, key = obj.get("kind"), (namespace_of(obj), meta(obj).get("name", ""))
        self.namespaces.add(meta(obj).get("name", "") if kind == "Namespace" else key[0])
        if kind == "Service":
            self.services.setdefault(key, service_of(obj))
        elif kind == "ConfigMap":
            binary = {k: b64(v) for k, v in (obj.get("binaryData") or {}).items()}
            self.config_maps[key] = strings(obj.get("data")) | binary  # the kubelet's: both, as files and env
        elif kind == "Secret":
            data = {k: b64(v) for k, v in (obj.get("data") or {}).items()}
            self.secrets[key] = data | strings(obj.get("stringData"))
        elif kind == "ServiceAccount":
            self.service_accounts[key] = obj
        elif kind == "PersistentVolumeClaim":
            self.claims.add(key)
        elif kind == "Namespace":
            self.namespace_labels[key[1]] = strings(meta(obj).get("labels"))
        elif kind in KUEUE_KINDS and str(obj.get("apiVersion", "")).startswith(f"{KUEUE_API_GROUP}/"):
            self.kueue[(kind, key[0] if kind == "LocalQueue" else "", key[1])] = obj
        elif kind == "PriorityClass" and isinstance(obj.get("value"), int):
            self.priority_classes[key[1]] = obj["value"]
        elif kind in ("TrainingRuntime", "ClusterTrainingRuntime") and obj.get("apiVersion") == TRAINER_API:
            self.runtimes[(kind, key[0] if kind == "TrainingRuntime" else "", key[1])] = obj

    def runtime(self, kind: str, namespace: str, name: str) -> Mapping | None:
        """A TrainJob's runtimeRef: from the manifests, else the upstream `jax-distributed` ClusterTrainingRuntime, else
        another of the Trainer's built-in ones (`builtin_runtime`)."""
        found = self.runtimes.get((kind, namespace if kind == "TrainingRuntime" else "", name))
        if found is None and kind == "ClusterTrainingRuntime" and name == UPSTREAM_RUNTIME:
            return upstream_runtime()
        if found is None and kind == "ClusterTrainingRuntime" and name in INSTALLED_RUNTIMES:
            return builtin_runtime(name)
        return found


def builtin_runtime(name: str) -> Mapping:
    """One of the Trainer's other built-in ClusterTrainingRuntimes (`INSTALLED_RUNTIMES`) as far as the simulator reads
    it: its name and its mlPolicy, which is not JAX's (the TrainJob is refused as a runtime not emulated)."""
    return {
        "apiVersion": TRAINER_API,
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": {"mlPolicy": {"numNodes": 1, INSTALLED_RUNTIMES[name]: {}}},
    }


@lru_cache(maxsize=1)
def upstream_runtime() -> Mapping:
    """The upstream `jax-distributed` ClusterTrainingRuntime (package data, loaded on first use)."""
    text = resources.files(__package__).joinpath("jax_distributed_runtime.yaml").read_text(encoding="utf-8")
    [runtime] = yamlio.load(text)
    return runtime


def to_int(value: Any, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def limit(container: Mapping, resource: str) -> Any:
    """A container's limit for a resource, falling back to its request (extended resources need both equal)."""
    res = container.get("resources") or {}
    return (res.get("limits") or {}).get(resource, (res.get("requests") or {}).get(resource))


def accelerator(container: Mapping) -> tuple[str, Any]:
    for kind, resource in (("tpu", TPU_RESOURCE), ("gpu", GPU_RESOURCE)):
        value = limit(container, resource)
        if value is not None and quantity(value):
            return kind, value
    return "cpu", None
