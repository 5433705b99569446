"""A pod's effective requests (or limits), spelled once for every reader of pod specs: the admission plugins
(ResourceQuota, LimitRanger) and the simulator's Kueue, which all count a pod the same way on a cluster.

Emulated from (facts, not code): kubernetes/kubernetes pkg/api/v1/resource/helpers.go (`PodRequests`, `PodLimits`),
the arithmetic KEP-753 (sidecar containers) gave them, which Kueue reuses for a workload's pod sets:

- the regular containers' values add up, and so do the restartable init containers' (`restartPolicy: Always`, native
  sidecars), which run beside them for the pod's whole life;
- a regular init container runs alone but for the sidecars declared before it, so it counts as its own value plus
  theirs; the largest such sum (and the sidecars' own sum as each starts) is what the init phase needs;
- per resource the larger of the two phases wins;
- pod-level resources, where the pod sets them, replace cpu, memory and hugepages-*;
- the pod's overhead (from its RuntimeClass) then adds: to every request, and to limits only where one is set.

Values are whatever the caller reads a container's ResourceList as (an exact Fraction, an admission plugin's
(Fraction, format) pair); `add` adds two of them and `size` gives the number compared. Entries of an odd shape are
skipped: the schema step reports them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, TypeVar

__all__ = ["POD_LEVEL", "pod_resources", "exact_pod_requests"]

Q = TypeVar("Q")

POD_LEVEL = ("cpu", "memory")
"""The resources pod-level requests/limits replace (with every hugepages-* one)."""


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def pod_resources(
    spec: Mapping[str, Any],
    of: Callable[[Mapping[str, Any]], Mapping[str, Q]],
    add: Callable[[Q, Q], Q],
    size: Callable[[Q], Fraction],
    *,
    pod_level: Mapping[str, Q] | None = None,
    overhead: Mapping[str, Q] | None = None,
    limits: bool = False,
) -> dict[str, Q]:
    """The pod spec's effective values (its requests, or with `limits` its limits), `of` reading one container's:
    containers and sidecars summed, against each regular init container with the sidecars started before it, the
    larger per resource; then `pod_level` replacing cpu/memory/hugepages and `overhead` added (module docstring)."""

    def add_into(total: dict[str, Q], more: Mapping[str, Q]) -> None:
        for name, q in more.items():
            total[name] = add(total[name], q) if name in total else q

    def max_into(total: dict[str, Q], more: Mapping[str, Q]) -> None:
        for name, q in more.items():
            if name not in total or size(q) > size(total[name]):
                total[name] = q

    total: dict[str, Q] = {}
    for c in _list(spec.get("containers")):
        if isinstance(c, Mapping):
            add_into(total, of(c))
    sidecars: dict[str, Q] = {}  # the restartable init containers declared so far
    init: dict[str, Q] = {}  # the most the init phase holds at once
    for c in _list(spec.get("initContainers")):
        if not isinstance(c, Mapping):
            continue
        own = of(c)
        if c.get("restartPolicy") == "Always":
            add_into(total, own)
            add_into(sidecars, own)
            max_into(init, sidecars)
        else:
            alone = dict(own)
            add_into(alone, sidecars)
            max_into(init, alone)
    max_into(total, init)
    for name, q in (pod_level or {}).items():
        if name in POD_LEVEL or name.startswith("hugepages-"):
            total[name] = q
    for name, q in (overhead or {}).items():
        if not limits or name in total:
            total[name] = add(total[name], q) if name in total else q
    return total


def exact_pod_requests(spec: Mapping[str, Any], parse: Callable[[Any], Fraction | None]) -> dict[str, Fraction]:
    """`pod_resources` over exact values (`parse` reading a quantity): the pod's requests as a defaulted pod holds
    them (a container's limit standing in for a request it does not make, as the API server's defaulting copies it),
    its overhead added."""

    def of(container: Mapping[str, Any]) -> dict[str, Fraction]:
        res = _map(container.get("resources"))
        return _exact({**_map(res.get("limits")), **_map(res.get("requests"))}, parse)

    return pod_resources(spec, of, operator.add, lambda q: q, overhead=_exact(_map(spec.get("overhead")), parse))


def _exact(values: Mapping[str, Any], parse: Callable[[Any], Fraction | None]) -> dict[str, Fraction]:
    return {str(k): q for k, v in values.items() if (q := parse(v)) is not None}
