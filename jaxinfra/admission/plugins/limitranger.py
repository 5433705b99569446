"""The LimitRanger admission plugin: mutating (container defaults from type Container items, recorded in the
`kubernetes.io/limit-ranger` annotation) and validating (min / max / maxLimitRequestRatio per container, on the pod's
sums, and on a claim's requests). LimitRanges are read as stored: their defaults already filled in from max and min.

Emulated from (facts and message texts, not code):
- kubernetes/kubernetes plugin/pkg/admission/limitranger/admission.go (the stored copy with validateContainerLimits;
  the index names no commit; commit 0061479890ddf827bd55570ccbf8bd59352543c3 for the annotation and defaulting):
  defaults from type Container items fill missing requests/limits of containers and init containers and are recorded
  in the `kubernetes.io/limit-ranger` annotation; min/max/ratio for type Container per container, for type Pod on
  the pod's summed requests/limits, for type PersistentVolumeClaim on spec.resources.requests; exact comparisons;
  every violation of the first LimitRange that has any is reported.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jaxinfra.admission.decoded import as_list, as_map, as_str
from jaxinfra.admission.plugins.resources import (
    CONTAINER_KINDS,
    Amount,
    aggregate,
    container_resources,
    parse_amount,
    pod_containers,
    resource_amounts,
    show_amount,
)
from jaxinfra.admission.store import Finding, Path, Store, meta

# --- LimitRanger --------------------------------------------------------------------------------------------------


def _fill(c: Any, key: str, values: Mapping[str, Any]) -> list[str]:
    """Add to a container's resources.<key> the entries it lacks (creating the maps only when one is added); the
    names added, sorted. A container or map of an odd type is left alone (the schema step reports it)."""
    if not isinstance(c, dict):
        return []
    res = c.get("resources", {})
    have = res.get(key, {}) if isinstance(res, dict) else None
    if not isinstance(have, dict):
        return []
    added = sorted(k for k in values if k not in have)
    if added:
        have.update({k: values[k] for k in added})
        res[key] = have
        c["resources"] = res
    return added


@dataclass(frozen=True)
class _LimitItem:
    """One spec.limits[] entry after SetDefaults_LimitRangeItem, with the raw default values for writing back."""

    type: str
    min: dict[str, Amount]
    max: dict[str, Amount]
    ratio: dict[str, Amount]
    default: dict[str, Any]
    default_request: dict[str, Any]


def _limit_items(limit_range: Mapping) -> list[_LimitItem]:
    """A LimitRange's items as stored: their default and defaultRequest already filled from max and min
    (`defaults`, SetDefaults_LimitRange)."""
    items = []
    for raw in as_list(as_map(limit_range.get("spec")).get("limits")):
        if not isinstance(raw, Mapping):
            continue
        default = {k: v for k, v in as_map(raw.get("default")).items() if parse_amount(v) is not None}
        request = {k: v for k, v in as_map(raw.get("defaultRequest")).items() if parse_amount(v) is not None}
        items.append(
            _LimitItem(
                as_str(raw.get("type")),
                resource_amounts(raw.get("min")),
                resource_amounts(raw.get("max")),
                resource_amounts(raw.get("maxLimitRequestRatio")),
                default,
                request,
            )
        )
    return items


def limit_ranges(store: Store, namespace: str) -> list[tuple[str, list[_LimitItem]]]:
    return [(as_str(meta(lr).get("name")), _limit_items(lr)) for lr in store.of_kind("LimitRange", namespace)]


def limit_defaults(pod: dict, ranges: list[tuple[str, list[_LimitItem]]]) -> None:
    """Mutating LimitRanger: fill each container's missing requests/limits from every LimitRange in turn."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    for _, items in ranges:
        limits: dict[str, Any] = {}
        requests: dict[str, Any] = {}
        for item in items:
            if item.type == "Container":
                limits.update(item.default)
                requests.update(item.default_request)
        notes: list[str] = []
        for field, label in CONTAINER_KINDS:
            for c in as_list(spec.get(field)):
                for key, values, word in (("limits", limits, "limit"), ("requests", requests, "request")):
                    if added := _fill(c, key, values):
                        notes.append(f"{', '.join(added)} {word} for {label} {as_str(c.get('name'))}")
        metadata = pod.setdefault("metadata", {})
        if notes and isinstance(metadata, dict):
            annotations = metadata.setdefault("annotations", {})
            if isinstance(annotations, dict):
                annotations["kubernetes.io/limit-ranger"] = "LimitRanger plugin set: " + "; ".join(notes)


_Violation = tuple[str, str] | None
"""A LimitRange rule's verdict: (upstream message, the field to change: requests or limits), or None."""


def _min(
    kind: str, name: str, enforced: Amount, requests: Mapping[str, Amount], limits: Mapping[str, Amount] | None
) -> _Violation:
    head = f"minimum {name} usage per {kind} is {show_amount(enforced)}"
    if name not in requests:
        return f"{head}.  No request is specified", "requests"
    if enforced[0] > requests[name][0]:
        return f"{head}, but request is {show_amount(requests[name])}", "requests"
    if limits is not None and name in limits and enforced[0] > limits[name][0]:
        return f"{head}, but limit is {show_amount(limits[name])}", "limits"
    return None


def _max(
    kind: str, name: str, enforced: Amount, requests: Mapping[str, Amount], limits: Mapping[str, Amount] | None
) -> _Violation:
    """maxConstraint, or maxRequestConstraint when `limits` is None (a claim has requests only)."""
    head = f"maximum {name} usage per {kind} is {show_amount(enforced)}"
    if limits is not None:
        if name not in limits:
            return f"{head}.  No limit is specified", "limits"
        if limits[name][0] > enforced[0]:
            return f"{head}, but limit is {show_amount(limits[name])}", "limits"
    elif name not in requests:
        return f"{head}.  No request is specified", "requests"
    if name in requests and requests[name][0] > enforced[0]:
        return f"{head}, but request is {show_amount(requests[name])}", "requests"
    return None


def _ratio(
    kind: str, name: str, enforced: Amount, requests: Mapping[str, Amount], limits: Mapping[str, Amount]
) -> _Violation:
    head = f"{name} max limit to request ratio per {kind} is {show_amount(enforced)}"
    if name not in requests or requests[name][0] == 0:
        return f"{head}, but no request is specified or request is 0", "requests"
    if name not in limits or limits[name][0] == 0:
        return f"{head}, but no limit is specified or limit is 0", "limits"
    ratio = abs(limits[name][0]) / abs(requests[name][0])
    if ratio > enforced[0]:
        return f"{head}, but provided ratio is {float(ratio):.6f}", "limits"
    return None


def _check(
    item: _LimitItem, at: Path, requests: Mapping[str, Amount], limits: Mapping[str, Amount]
) -> Iterator[Finding]:
    """One LimitRange item's min, max and ratio on one set of requests/limits, resources in name order."""
    for rule, bounds in ((_min, item.min), (_max, item.max), (_ratio, item.ratio)):
        for name in sorted(bounds):
            if (verdict := rule(item.type, name, bounds[name], requests, limits)) is not None:
                message, field = verdict
                yield Finding(
                    (*at, field, name),
                    show_amount(bounds[name]),
                    message,
                    f"set resources.{field}.{name} within the LimitRange's bounds for type {item.type}, "
                    "or change the LimitRange",
                )


def limit_validate(pod: Mapping, ranges: list[tuple[str, list[_LimitItem]]]) -> list[Finding]:
    """Validating LimitRanger: the first LimitRange with violations refuses the pod with all of them."""
    for _, items in ranges:
        found: list[Finding] = []
        for item in items:
            if item.type == "Container":
                for at, c in pod_containers(pod):
                    found.extend(_check(item, (*at, "resources"), *container_resources(c)))
            elif item.type == "Pod":
                found.extend(_check(item, ("spec", "resources"), aggregate(pod, 0, False), aggregate(pod, 1, False)))
        if found:
            return found
    return []


def claim_limits(claim: Mapping, store: Store, namespace: str) -> list[Finding]:
    """Validating LimitRanger on a claim: min and max of type PersistentVolumeClaim on spec.resources.requests."""
    requests = resource_amounts(as_map(as_map(claim.get("spec")).get("resources")).get("requests"))
    at: Path = ("spec", "resources", "requests")
    for _, items in limit_ranges(store, namespace):
        found = []
        for item in items:
            if item.type != "PersistentVolumeClaim":
                continue
            for rule, bounds in ((_min, item.min), (_max, item.max)):
                for name in sorted(bounds):
                    limits: dict[str, Amount] | None = {} if rule is _min else None
                    if (verdict := rule(item.type, name, bounds[name], requests, limits)) is not None:
                        found.append(
                            Finding(
                                (*at, name),
                                show_amount(bounds[name]),
                                verdict[0],
                                f"request {name} within the LimitRange's bounds, or change it",
                            )
                        )
        if found:
            return found
    return []
