"""The API server's built-in admission plugins that act on pods and on object counts: LimitRanger, Priority and
ResourceQuota, in the order kube-apiserver runs them, so a plan is refused here exactly where a cluster refuses it.

Order (the API server stops at the first plugin that refuses): mutating LimitRanger (container defaults), mutating
Priority (spec.priority, spec.preemptionPolicy), then validating LimitRanger (min / max / maxLimitRequestRatio) and
ResourceQuota last. Before them, admit_pod applies the one pod default these plugins depend on
(`defaults.requests_from_limits`, SetDefaults_Pod: a container limit without a request gives the request, so a
LimitRange's defaultRequest never overrides it). LimitRanges are read as stored: their defaults already filled in
from max and min.

One module per plugin, over one shared low module (each names its upstream sources):
- `resources`: quantities added and shown back as resource.Quantity does, a pod's containers and summed requests/limits;
- `priority`: Priority (a pod's priority and preemptionPolicy; a PriorityClass's single-default rule);
- `limitranger`: LimitRanger (defaults and min / max / maxLimitRequestRatio, on pods and on claims);
- `resourcequota`: ResourceQuota (what an object is charged, the constraints, the quota check, `Usage`).
This module holds the two entry points and so the order.

Knowingly not emulated: in-place resize and updates, and the pod validation that runs between the mutating and
validating plugins (e.g. a LimitRange default limit below the container's request).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jaxinfra.admission import defaults
from jaxinfra.admission.decoded import as_str
from jaxinfra.admission.plugins.limitranger import (
    claim_limits,
    limit_defaults,
    limit_ranges,
    limit_validate,
)
from jaxinfra.admission.plugins.priority import pod_priority, priority_class_check
from jaxinfra.admission.plugins.resourcequota import (
    IGNORED,
    Charge,
    Usage,
    claim_facts,
    group_resource_of,
    object_usage,
    pod_facts,
    pod_usage,
    quota_check,
)
from jaxinfra.admission.store import Finding, Store, namespace_of

__all__ = ["Usage", "admit_pod", "admit_object"]

# --- the two entry points -----------------------------------------------------------------------------------------


def default_pod(pod: dict, ranges: list[tuple[str, list[Any]]]) -> None:
    """A pod's spec as stored, in place: SetDefaults_Pod's requests from limits (which runs before admission), then
    LimitRanger's mutation, its containers' missing requests and limits from the namespace's LimitRanges `ranges`."""
    if isinstance(pod.get("spec"), dict):
        defaults.requests_from_limits(pod["spec"])
    limit_defaults(pod, ranges)


def admit_pod(pod: dict, store: Store, usage: Usage) -> list[Finding]:
    """One pod a controller creates, through LimitRanger, Priority and ResourceQuota: mutated in place, the
    findings of the first plugin that refuses it (then nothing is charged), or [] and its usage is charged."""
    if not isinstance(pod, dict):
        return []
    ranges = limit_ranges(store, namespace_of(pod))
    default_pod(pod, ranges)
    found = pod_priority(pod, store) or limit_validate(pod, ranges)
    if found:
        return found
    return quota_check(pod, store, usage, Charge("pods", pod_usage(pod), pod_facts(pod)))


def admit_object(obj: Mapping, store: Store, usage: Usage) -> list[Finding]:
    """One non-pod object being created: PriorityClass's single-default rule, LimitRanger on claims, then the
    ResourceQuota object counts (and services' / claims' own resources); a pod (as a dict) goes to admit_pod."""
    kind = as_str(obj.get("kind"))
    if kind == "Pod":
        return admit_pod(obj, store, usage) if isinstance(obj, dict) else []
    if kind == "PriorityClass":
        return priority_class_check(obj, store)
    namespace = namespace_of(obj)
    if not kind or not namespace:
        return []
    group_resource = group_resource_of(obj, store)
    if group_resource in IGNORED:
        return []
    if group_resource == "persistentvolumeclaims":
        if found := claim_limits(obj, store, namespace):
            return found
    return quota_check(
        obj,
        store,
        usage,
        Charge(
            group_resource,
            object_usage(obj, group_resource),
            claim_facts(obj) if group_resource == "persistentvolumeclaims" else None,
        ),
    )
