"""The objects the simulated API server holds, as a cluster holds them: where each kind is served
(its REST resource), what every cluster has besides the inputs (namespaces, the `kubernetes`
Service), the Endpoints the endpoints controller keeps, and the RBAC objects with aggregated
ClusterRoles filled in; one immutable `Snapshot` per attempt, indexed for get, list and discovery.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jaxinfra.admission.store import CLUSTER_SCOPED
from jaxinfra.upstream import (
    BATCH_API,
    JAXJOB_API,
    JOBSET_API,
    NAMESPACE_NAME_LABEL,
    RBAC_API,
    SYSTEM_NAMESPACES,
    TRAINER_API,
)
from jaxinfra_sim.apiserver.rbac import RBAC_KINDS, Policy
from jaxinfra_sim.apiserver.selectors import fields_match, matches, parse_fields, parse_labels, selectable_fields
from jaxinfra_sim.core.inputs import meta, namespace_of, strings

__all__ = ["Resource", "Snapshot", "plural", "resource_of", "cluster_objects", "derived_endpoints", "READ_VERBS"]

READ_VERBS = ("get", "list", "watch")


@dataclass(frozen=True)
class Resource:
    """A REST resource: where a kind is served."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """schema.GroupResource.String(): how errors name the resource (`jobs.batch`, `pods`)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


# Kinds served even when no input has one (a list answers empty); the cluster-scoped ones are
# `CLUSTER_SCOPED`'s (the rest are namespaced). Kinds not here are served by their apiVersion and kind.
KNOWN_KINDS = (
    ("v1", "Pod"),
    ("v1", "Service"),
    ("v1", "Endpoints"),
    ("v1", "ServiceAccount"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Namespace"),
    (BATCH_API, "Job"),
    (JOBSET_API, "JobSet"),
    (JAXJOB_API, "JAXJob"),
    (TRAINER_API, "TrainJob"),
    (TRAINER_API, "TrainingRuntime"),
    (TRAINER_API, "ClusterTrainingRuntime"),
    *((RBAC_API, k) for k in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")),
)


def plural(kind: str) -> str:
    """apimachinery/pkg/api/meta/restmapper.go `UnsafeGuessKindToResource`, which CRDs and the
    built-in kinds follow (Endpoints stays itself, -s takes -es, -y takes -ies)."""
    lower = kind.lower()
    if lower.endswith("endpoints"):
        return lower
    if lower.endswith("s"):
        return lower + "es"
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + "s"


def resource_of(api_version: str, kind: str) -> Resource:
    group, _, version = api_version.rpartition("/")
    return Resource(group, version, kind, plural(kind), kind not in CLUSTER_SCOPED)


def _ready(pod: Mapping) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _target_port(port: Mapping, pod: Mapping) -> int | None:
    """A Service port's targetPort on one pod: a number, or a container port's name (podutil.FindPort)."""
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int) or str(target).isdigit():
        return int(target)
    for container in (pod.get("spec") or {}).get("containers") or ():
        for cp in container.get("ports") or ():
            if cp.get("name") == target and cp.get("protocol", "TCP") == port.get("protocol", "TCP"):
                return cp.get("containerPort")
    return None


def derived_endpoints(service: Mapping, pods: Sequence[Mapping]) -> dict | None:
    """The Endpoints the endpoints controller keeps for a Service with a selector
    (pkg/controller/endpoint/endpoints_controller.go): its pods that have an IP and are not
    terminal, ready ones (or all, with publishNotReadyAddresses) as `addresses`, the rest as
    `notReadyAddresses`, with `hostname` where the pod's subdomain is the Service; one subset per
    set of resolved ports; labels of the Service plus `service.kubernetes.io/headless`."""
    spec = service.get("spec") or {}
    selector = spec.get("selector")
    if not selector:
        return None
    ns, name = namespace_of(service), meta(service).get("name", "")
    headless = spec.get("clusterIP") == "None"
    ports = spec.get("ports") or ()
    if not ports and not headless:
        return None
    wanted = strings(selector)
    subsets: dict[tuple, dict[str, list]] = {}
    for pod in pods:
        labels, status, pspec = strings(meta(pod).get("labels")), pod.get("status") or {}, pod.get("spec") or {}
        if (
            namespace_of(pod) != ns
            or any(labels.get(k) != v for k, v in wanted.items())
            or not status.get("podIP")
            or status.get("phase") in ("Succeeded", "Failed")
            or meta(pod).get("deletionTimestamp")
        ):
            continue
        resolved = tuple((p.get("name"), _target_port(p, pod), p.get("protocol", "TCP")) for p in ports)
        resolved = tuple(p for p in resolved if p[1] is not None)
        address: dict[str, Any] = {"ip": status["podIP"]}
        if pspec.get("hostname") and pspec.get("subdomain") == name:
            address["hostname"] = pspec["hostname"]
        if pspec.get("nodeName"):
            address["nodeName"] = pspec["nodeName"]
        address["targetRef"] = {
            "kind": "Pod",
            "namespace": ns,
            "name": meta(pod).get("name", ""),
            **({"uid": meta(pod)["uid"]} if meta(pod).get("uid") else {}),
        }
        ready = spec.get("publishNotReadyAddresses") or _ready(pod)
        subsets.setdefault(resolved, {"addresses": [], "notReadyAddresses": []})[
            "addresses" if ready else "notReadyAddresses"
        ].append(address)
    labels = strings(meta(service).get("labels")) | ({"service.kubernetes.io/headless": ""} if headless else {})
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": name, "namespace": ns, **({"labels": labels} if labels else {})},
        "subsets": [
            {
                **{k: sorted(v, key=lambda a: a["ip"]) for k, v in groups.items() if v},
                **(
                    {
                        "ports": [
                            {**({"name": n} if n else {}), "port": p, "protocol": proto}
                            for n, p, proto in sorted(key, key=lambda t: str(t[0]))
                        ]
                    }
                    if key
                    else {}
                ),
            }
            for key, groups in sorted(subsets.items(), key=lambda kv: str(kv[0]))
        ],
    }


def _identity(obj: Mapping) -> tuple[str, str, str]:
    kind = str(obj.get("kind", ""))
    return kind, namespace_of(obj) if kind not in CLUSTER_SCOPED else "", str(meta(obj).get("name", ""))


def cluster_objects(objects: Sequence[Mapping], host: str, port: int) -> list[dict]:
    """What every cluster holds besides the inputs: its namespaces (the system ones and each the
    inputs use) and the `kubernetes` Service in `default` with its Endpoints, here this server."""
    used = {namespace_of(o) for o in objects if o.get("kind") not in CLUSTER_SCOPED}
    namespaces = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {NAMESPACE_NAME_LABEL: ns}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }
        for ns in sorted({*SYSTEM_NAMESPACES, *used})
    ]
    https = {"name": "https", "port": port, "protocol": "TCP"}
    labels = {"component": "apiserver", "provider": "kubernetes"}
    return [
        *namespaces,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
            "spec": {
                "clusterIP": host,
                "clusterIPs": [host],
                "ports": [{**https, "targetPort": port}],
                "type": "ClusterIP",
                "sessionAffinity": "None",
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
            "subsets": [{"addresses": [{"ip": host}], "ports": [https]}],
        },
    ]


class Snapshot:
    """The objects of one attempt as the API server holds them: indexed by resource, each
    namespaced object with its namespace, every object with a resourceVersion and string labels."""

    def __init__(self, objects: Sequence[Mapping], generation: int, host: str, port: int):
        self.resource_version = str(generation)
        self.policy = Policy(objects)
        served = [
            o for o in objects if not (o.get("kind") in RBAC_KINDS and str(o.get("apiVersion", "")).startswith("rbac."))
        ]
        given = {_identity(o) for o in served}
        served += [o for o in cluster_objects(served, host, port) if _identity(o) not in given]
        has_endpoints = {
            (namespace_of(o), meta(o).get("name"))
            for o in served
            if (o.get("apiVersion"), o.get("kind")) == ("v1", "Endpoints")
        }
        pods = sorted(
            (o for o in served if (o.get("apiVersion"), o.get("kind")) == ("v1", "Pod")),
            key=lambda o: meta(o).get("name", ""),
        )
        served += [
            e
            for o in served
            if (o.get("apiVersion"), o.get("kind")) == ("v1", "Service")
            and (namespace_of(o), meta(o).get("name")) not in has_endpoints
            and (e := derived_endpoints(o, pods))
        ]
        served += self.policy.objects()
        self.resources: dict[tuple[str, str, str], Resource] = {}
        for api_version, kind in KNOWN_KINDS:
            resource = resource_of(api_version, kind)
            self.resources[(resource.group, resource.version, resource.plural)] = resource
        self.items: dict[Resource, list[tuple[str, str, dict]]] = {r: [] for r in self.resources.values()}
        for obj in served:
            if not obj.get("apiVersion") or not obj.get("kind"):
                continue
            resource = resource_of(str(obj["apiVersion"]), str(obj["kind"]))
            resource = self.resources.setdefault((resource.group, resource.version, resource.plural), resource)
            md = dict(meta(obj))
            for key in ("labels", "annotations"):
                if key in md:
                    md[key] = strings(md[key])
            if resource.namespaced:
                md["namespace"] = namespace_of(obj)
            md.setdefault("resourceVersion", self.resource_version)
            self.items.setdefault(resource, []).append(
                (md.get("namespace", ""), str(md.get("name", "")), {**obj, "metadata": md})
            )
        for entries in self.items.values():
            entries.sort(key=lambda e: (e[0], e[1]))

    def find(self, group: str, version: str, plural_: str) -> Resource | None:
        return self.resources.get((group, version, plural_))

    def get(self, resource: Resource, namespace: str, name: str) -> dict | None:
        return next((o for ns, n, o in self.items[resource] if (ns, n) == (namespace, name)), None)

    def select(self, resource: Resource, namespace: str, query: Mapping[str, str]) -> list[dict]:
        labels, fields = parse_labels(query.get("labelSelector", "")), parse_fields(query.get("fieldSelector", ""))
        fields_match(
            fields, selectable_fields(resource.plural, resource.group, {})
        )  # 400 for a field it lacks, items or not
        return [
            o
            for ns, _, o in self.items[resource]
            if (not namespace or ns == namespace)
            and matches(labels, meta(o).get("labels"))
            and fields_match(fields, selectable_fields(resource.plural, resource.group, o))
        ]

    def groups(self) -> dict[str, list[str]]:
        """Each API group's versions, in order of first appearance (the core group is "")."""
        found: dict[str, list[str]] = {}
        for r in self.resources.values():
            if r.version not in found.setdefault(r.group, []):
                found[r.group].append(r.version)
        return found

    def resource_list(self, group: str, version: str) -> dict:
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": [
                {
                    "name": r.plural,
                    "singularName": r.kind.lower(),
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": list(READ_VERBS),
                }
                for r in sorted(self.resources.values(), key=lambda r: r.plural)
                if (r.group, r.version) == (group, version)
            ],
        }
