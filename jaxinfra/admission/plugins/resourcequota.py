"""The ResourceQuota admission plugin, last in order: what each created object is charged (a pod's compute resources,
services, claims, object counts), which quotas cover it (hard resources tracked, every scope matching), the pod
Constraints, the check against each quota, and `Usage`, the usage accumulated so far from which each quota's
status.used follows.

Emulated from (facts and message texts, not code):
- kubernetes/apiserver pkg/admission/plugin/resourcequota/controller.go (commit
  24a394e516bfda066d7e2221d7d92c052de27c54): CheckRequest -- a quota applies when one of its hard resources is tracked
  for the object and every scope matches; Constraints first (`failed quota: <name>: ...`), negative usage refused,
  zero usage ignored, then `exceeded quota: <name>, requested: ..., used: ..., limited: ...` with prettyPrint's
  sorted `name=quantity` lists; no evaluator means a generic `count/<resource>.<group>` one; same repository,
  pkg/quota/v1/generic/evaluator.go (object counts; scoped quotas never match them) and pkg/quota/v1/resources.go.
- kubernetes/kubernetes pkg/quota/v1/evaluator/core/pods.go (commit 05e7cb29dcda163fe2adfc6952f89c164dc061b3): the
  resources a pod is charged (pods, count/pods, cpu, memory, ephemeral-storage with requests./limits. forms,
  hugepages-*, extended resources only as requests.<name>), the cpu/memory-only rule `must specify <resource> for:
  <containers>`, scopes Terminating / NotTerminating / BestEffort / NotBestEffort / PriorityClass /
  CrossNamespacePodAffinity; services.go (commit 04791b4906602ffda5ccf9bc4c84d3329f1d7080);
  persistent_volume_claims.go (commit 008ef699a50afe9b8c52df50b6d2cfc21c4f7240); registry.go (commit
  1163218c3bf4cde4615b0c36e89e666d7ae95ece) for the legacy aliases configmaps, secrets, resourcequotas,
  replicationcontrollers; pkg/quota/v1/install/registry.go for the resources quota ignores (events, reviews).

Knowingly not emulated: the quota controller's own delay (a quota's status is taken as already synced, `status
unknown for quota` never occurs), AdmissionConfiguration limitedResources, and DefaultStorageClass (a claim without
a class is charged to no class).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from jaxinfra.admission.decoded import as_list, as_map, as_str
from jaxinfra.admission.plugins.resources import (
    ZERO,
    Amount,
    add_amounts,
    aggregate,
    container_resources,
    pod_containers,
    resource_amounts,
    show_amount,
)
from jaxinfra.admission.store import Finding, Path, Store, meta, namespace_of
from jaxinfra.podresources import POD_LEVEL


def _pretty(items: Mapping[str, Amount]) -> str:
    """controller.go prettyPrint: `name=quantity` sorted by name, comma-joined."""
    return ",".join(f"{name}={show_amount(items[name])}" for name in sorted(items))


# --- ResourceQuota: what each kind is charged, and which quotas it falls under ------------------------------------

_POD_RESOURCES = frozenset(
    {
        "count/pods",
        "pods",
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
    }
)
_MUST_SPECIFY = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
_SERVICE_RESOURCES = frozenset({"count/services", "services", "services.nodeports", "services.loadbalancers"})
_CLAIM_RESOURCES = ("persistentvolumeclaims", "requests.storage")
_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
_ALIASES = {
    "configmaps": "configmaps",
    "secrets": "secrets",
    "resourcequotas": "resourcequotas",
    "replicationcontrollers": "replicationcontrollers",
}
IGNORED = frozenset(
    {
        "bindings",
        "componentstatuses",
        "events",
        "events.events.k8s.io",
        "tokenreviews.authentication.k8s.io",
        "selfsubjectreviews.authentication.k8s.io",
        "subjectaccessreviews.authorization.k8s.io",
        "selfsubjectaccessreviews.authorization.k8s.io",
        "localsubjectaccessreviews.authorization.k8s.io",
        "selfsubjectrulesreviews.authorization.k8s.io",
    }
)
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def _native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _extended(name: str) -> bool:
    """helper.IsExtendedResourceName: a domain-qualified, non-kubernetes.io name (nvidia.com/gpu, google.com/tpu)."""
    if _native(name) or name.startswith("requests."):
        return False
    prefix, _, short = name.rpartition("/")
    return bool(prefix) and len(short) <= 63 and _NAME.fullmatch(short) is not None


def _matching(group_resource: str, names: Iterable[str]) -> list[str]:
    """The evaluator's MatchingResources: which of a quota's hard names an object of this resource is charged."""
    out = []
    for name in names:
        if group_resource == "pods":
            hit = (
                name in _POD_RESOURCES
                or name.startswith(("hugepages-", "requests.hugepages-"))
                or (not _native(name) and name.startswith("requests."))
            )
        elif group_resource == "services":
            hit = name in _SERVICE_RESOURCES
        elif group_resource == "persistentvolumeclaims":
            hit = name in (*_CLAIM_RESOURCES, "count/persistentvolumeclaims") or any(
                name.endswith(_CLASS_SUFFIX + r) for r in _CLAIM_RESOURCES
            )
        else:
            hit = name == f"count/{group_resource}" or name == _ALIASES.get(group_resource)
        if hit:
            out.append(name)
    return out


def pod_usage(pod: Mapping, computing: bool = True) -> dict[str, Amount]:
    """PodUsageFunc: count/pods always; pods and compute resources while the pod is not terminal."""
    usage: dict[str, Amount] = {"count/pods": (Fraction(1), "DecimalSI")}
    if not computing:
        return usage
    usage["pods"] = (Fraction(1), "DecimalSI")
    requests, limits = aggregate(pod, 0), aggregate(pod, 1)
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            usage[name] = usage[f"requests.{name}"] = requests[name]
        if name in limits:
            usage[f"limits.{name}"] = limits[name]
    for name, q in requests.items():
        if name.startswith("hugepages-"):
            usage[name] = usage[f"requests.{name}"] = q
        elif _extended(name):
            usage[f"requests.{name}"] = q
    return usage


def _missing(pod: Mapping, required: set[str]) -> tuple[str, Path] | None:
    """podEvaluator.Constraints: each container must state the cpu/memory requests and limits a quota tracks."""
    missing: dict[str, set[str]] = {}
    first: Path | None = None
    for at, c in pod_containers(pod):
        requests, limits = container_resources(c)
        have = {f"{w}{r}" for r in ("cpu", "memory") if r in requests for w in ("", "requests.")}
        have |= {f"limits.{r}" for r in ("cpu", "memory") if r in limits}
        for name in sorted(required - have):
            missing.setdefault(name, set()).add(as_str(c.get("name")))
            first = first or (*at, "resources", "limits" if name.startswith("limits.") else "requests")
    if not missing or first is None:
        return None
    parts = "; ".join(f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing))
    return f"must specify {parts}", first


def pod_facts(pod: Mapping) -> dict[str, bool | str]:
    """What the pod scopes look at (podMatchesScopeFunc), taken when the pod is charged."""
    spec = as_map(pod.get("spec"))
    deadline = spec.get("activeDeadlineSeconds")
    terminating = isinstance(deadline, int) and not isinstance(deadline, bool) and deadline >= 0
    compute = [container_resources(c) for _, c in pod_containers(pod)]
    pod_level = as_map(spec.get("resources"))
    compute.append((resource_amounts(pod_level.get("requests")), resource_amounts(pod_level.get("limits"))))
    best_effort = not any(q[0] != 0 for pair in compute for side in pair for n, q in side.items() if n in POD_LEVEL)
    affinity = as_map(spec.get("affinity"))
    terms = []
    for kind in ("podAffinity", "podAntiAffinity"):
        rules = as_map(affinity.get(kind))
        terms += as_list(rules.get("requiredDuringSchedulingIgnoredDuringExecution"))
        preferred = as_list(rules.get("preferredDuringSchedulingIgnoredDuringExecution"))
        terms += [as_map(w).get("podAffinityTerm") for w in preferred]
    cross = any(
        isinstance(t, Mapping) and (bool(as_list(t.get("namespaces"))) or t.get("namespaceSelector") is not None)
        for t in terms
    )
    return {
        "Terminating": terminating,
        "NotTerminating": not terminating,
        "BestEffort": best_effort,
        "NotBestEffort": not best_effort,
        "PriorityClass": as_str(spec.get("priorityClassName")),
        "CrossNamespacePodAffinity": cross,
    }


def _scope_matches(selector: Mapping, facts: Mapping[str, bool | str] | None) -> bool:
    """One scope selector against an object's facts; objects with no scope facts match no scope."""
    if facts is None or (scope := as_str(selector.get("scopeName"))) not in facts:
        return False
    value = facts[scope]
    if isinstance(value, bool):
        return value
    operator, values = selector.get("operator"), [v for v in as_list(selector.get("values")) if isinstance(v, str)]
    if operator == "Exists":
        return bool(value)
    if operator == "DoesNotExist":
        return not value
    if operator == "In":
        return bool(value) and value in values
    if operator == "NotIn":
        return not value or value not in values
    return False


@dataclass(frozen=True)
class _Quota:
    name: str
    hard: dict[str, Amount]
    selectors: tuple[Mapping, ...]

    @classmethod
    def of(cls, obj: Mapping) -> _Quota:
        spec = as_map(obj.get("spec"))
        selectors: list[Mapping[str, Any]] = [
            {"scopeName": s, "operator": "Exists"} for s in as_list(spec.get("scopes")) if isinstance(s, str)
        ]
        selectors += [
            s for s in as_list(as_map(spec.get("scopeSelector")).get("matchExpressions")) if isinstance(s, Mapping)
        ]
        return cls(as_str(meta(obj).get("name")), resource_amounts(spec.get("hard")), tuple(selectors))

    def covers(self, group_resource: str, facts: Mapping[str, bool | str] | None) -> bool:
        """generic.Matches: one hard resource is tracked for the object and every scope matches it."""
        return bool(_matching(group_resource, self.hard)) and all(_scope_matches(s, facts) for s in self.selectors)


@dataclass
class Charge:
    group_resource: str
    usage: dict[str, Amount]
    facts: dict[str, bool | str] | None


class Usage:
    """The quota usage accumulated so far in a cluster: every admitted object's charge, by namespace, from which each
    quota's status.used follows (as the quota controller recounts it, so a quota admitted after the objects it covers
    still sees them). Starts empty."""

    def __init__(self) -> None:
        self._charges: dict[str, dict[tuple[str, str], Charge]] = {}
        self._unnamed = 0
        # status.used already summed, by namespace and quota, kept up to date as charges arrive (a namespace's
        # entries are dropped when a charge leaves or changes), so admitting n pods costs n, not n squared.
        self._sums: dict[str, dict[str, tuple[_Quota, dict[str, Amount]]]] = {}

    def used(self, quota: Mapping) -> dict[str, str]:
        """A ResourceQuota's status.used: every hard resource, shown as the API server prints it."""
        q = _Quota.of(quota)
        return {name: show_amount(used) for name, used in sorted(self._used(namespace_of(quota), q).items())}

    def release(self, obj: Mapping) -> None:
        """The object was deleted: its charge goes back to every quota."""
        if self._charges.get(namespace_of(obj), {}).pop(_key(obj), None) is not None:
            self._sums.pop(namespace_of(obj), None)

    def finish(self, pod: Mapping) -> None:
        """The pod reached Succeeded or Failed: it keeps only its count/pods charge."""
        charge = self._charges.get(namespace_of(pod), {}).get(_key(pod))
        if charge is not None and charge.group_resource == "pods":
            charge.usage = pod_usage(pod, computing=False)
            self._sums.pop(namespace_of(pod), None)

    def _used(self, namespace: str, quota: _Quota) -> dict[str, Amount]:
        sums = self._sums.setdefault(namespace, {})
        if (cached := sums.get(repr(quota))) is None:
            used = {name: ZERO for name in quota.hard}
            for charge in self._charges.get(namespace, {}).values():
                _count(used, quota, charge)
            cached = sums[repr(quota)] = (quota, used)
        return dict(cached[1])

    def _charge(self, obj: Mapping, charge: Charge) -> None:
        namespace, key = namespace_of(obj), _key(obj)
        if not key[1]:
            self._unnamed += 1
            key = (key[0], f"{as_str(meta(obj).get('generateName'))}#{self._unnamed}")
        charges = self._charges.setdefault(namespace, {})
        if key in charges:
            self._sums.pop(namespace, None)
        charges[key] = charge
        for quota, used in self._sums.get(namespace, {}).values():
            _count(used, quota, charge)


def _count(used: dict[str, Amount], quota: _Quota, charge: Charge) -> None:
    """Add one charge to a quota's used, where the quota covers it."""
    if quota.covers(charge.group_resource, charge.facts):
        for name in _matching(charge.group_resource, quota.hard):
            if name in charge.usage:
                used[name] = add_amounts(used[name], charge.usage[name])


def _key(obj: Mapping) -> tuple[str, str]:
    return as_str(obj.get("kind")) or "Pod", as_str(meta(obj).get("name"))


def quota_check(obj: Mapping, store: Store, usage: Usage, charge: Charge) -> list[Finding]:
    """ResourceQuota's CheckRequest for one created object, then its charge when admitted."""
    namespace = namespace_of(obj)
    quotas = [
        q
        for q in map(_Quota.of, store.of_kind("ResourceQuota", namespace))
        if q.covers(charge.group_resource, charge.facts)
    ]
    if charge.group_resource == "pods":
        for q in quotas:
            required = set(_matching("pods", q.hard)) & _MUST_SPECIFY
            if (miss := _missing(obj, required)) is not None:
                return [
                    Finding(
                        miss[1],
                        None,
                        f"failed quota: {q.name}: {miss[0]}",
                        "set resources.requests and resources.limits for cpu and memory on every container "
                        "(or a LimitRange default) since the quota tracks them",
                    )
                ]
    negative = sorted(name for name, q in charge.usage.items() if q[0] < 0)
    if negative:
        return [
            Finding(
                (),
                None,
                f"quota usage is negative for resource(s): {','.join(negative)}",
                "request no negative quantity",
            )
        ]
    delta = {name: q for name, q in charge.usage.items() if q[0] != 0}
    for q in quotas if delta else ():
        requested = {name: v for name, v in delta.items() if name in q.hard}
        if not requested:
            continue
        used = usage._used(namespace, q)
        exceeded = sorted(n for n, v in requested.items() if add_amounts(used[n], v)[0] > q.hard[n][0])
        if exceeded:
            pick = {n: requested[n] for n in exceeded}
            return [
                Finding(
                    (),
                    _pretty(pick),
                    f"exceeded quota: {q.name}, requested: {_pretty(pick)}, used: "
                    f"{_pretty({n: used[n] for n in exceeded})}, limited: "
                    f"{_pretty({n: q.hard[n] for n in exceeded})}",
                    f"raise spec.hard of ResourceQuota {q.name} in namespace {namespace}, or ask for less "
                    "(fewer replicas or smaller requests)",
                )
            ]
    usage._charge(obj, charge)
    return []


def group_resource_of(obj: Mapping, store: Store) -> str:
    """`<resource>` or `<resource>.<group>`: the plural from the input CRD for the kind, else the RESTMapper's guess."""
    api_version, kind = as_str(obj.get("apiVersion")), as_str(obj.get("kind"))
    group = api_version.rpartition("/")[0]
    plural = ""
    for crd in store.of_kind("CustomResourceDefinition"):
        spec = as_map(crd.get("spec"))
        names = as_map(spec.get("names"))
        if spec.get("group") == group and names.get("kind") == kind:
            plural = as_str(names.get("plural"))
    if not plural:
        lower = kind.lower()
        plural = (
            lower
            if lower.endswith("endpoints")
            else f"{lower}es"
            if lower.endswith("s")
            else f"{lower[:-1]}ies"
            if lower.endswith("y")
            else f"{lower}s"
        )
    return f"{plural}.{group}" if group else plural


def object_usage(obj: Mapping, group_resource: str) -> dict[str, Amount]:
    one: Amount = (Fraction(1), "DecimalSI")
    spec = as_map(obj.get("spec"))
    if group_resource == "services":
        ports = as_list(spec.get("ports"))
        kind = spec.get("type")
        if kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is False:
            node_ports = sum(1 for p in ports if isinstance(p, Mapping) and p.get("nodePort"))
        else:
            node_ports = len(ports) if kind in ("NodePort", "LoadBalancer") else 0
        return {
            "count/services": one,
            "services": one,
            "services.nodeports": (Fraction(node_ports), "DecimalSI"),
            "services.loadbalancers": (Fraction(int(kind == "LoadBalancer")), "DecimalSI"),
        }
    if group_resource == "persistentvolumeclaims":
        out = {"persistentvolumeclaims": one, "count/persistentvolumeclaims": one}
        annotations = as_map(meta(obj).get("annotations"))
        storage_class = as_str(annotations.get("volume.beta.kubernetes.io/storage-class")) or as_str(
            spec.get("storageClassName")
        )
        if storage_class:
            out[f"{storage_class}{_CLASS_SUFFIX}persistentvolumeclaims"] = one
        storage = resource_amounts(as_map(spec.get("resources")).get("requests")).get("storage")
        if storage is not None:
            storage = (Fraction(math.ceil(storage[0])), storage[1])
            out["requests.storage"] = storage
            if storage_class:
                out[f"{storage_class}{_CLASS_SUFFIX}requests.storage"] = storage
        return out
    names = [f"count/{group_resource}"] + ([_ALIASES[group_resource]] if group_resource in _ALIASES else [])
    return {name: one for name in names}


def claim_facts(claim: Mapping) -> dict[str, bool | str]:
    """The one claim scope, VolumeAttributesClass."""
    return {"VolumeAttributesClass": as_str(as_map(claim.get("spec")).get("volumeAttributesClassName"))}
