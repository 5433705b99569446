"""Who the kernel's OOM killer ends first when this machine runs out of memory, as on a node: each container's
`oom_score_adj` from its pod's QoS class, and the node's own agents (here the simulator) out of its reach.

From kubernetes v1.33: pkg/apis/core/v1/helper/qos/qos.go `ComputePodQOS` (cpu and memory only; a quantity of
zero counts as none; Guaranteed when every container, init containers included, limits both and the requests summed
equal the limits summed) and pkg/kubelet/qos/policy.go `GetContainerOOMScoreAdjust` (Guaranteed and node-critical
pods -997, BestEffort 1000, Burstable 1000 - 1000 x the container's memory request / the node's memory, kept
between 3 and 999, a sidecar no higher than the pod's smallest regular container); the kubelet itself runs at -999
(`KubeletOOMScoreAdj`). A container given only a limit has that limit as its request, the API server's defaulting
(pkg/apis/core/v1/defaults.go `SetDefaults_Pod`). Pod-level resources (`spec.resources`) are not read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

from jaxinfra_sim.core.security import CAPABILITIES

NODE_AGENT = -999
"""The kubelet's own score (`KubeletOOMScoreAdj`): the simulator, the node's agents here, takes it where it may."""
GUARANTEED, BEST_EFFORT = -997, 1000
CRITICAL_CLASSES = frozenset({"system-node-critical", "system-cluster-critical"})
"""The built-in PriorityClasses at or past the system-critical priority (2,000,000,000): node-critical pods."""
COMPUTE = ("cpu", "memory")


def _amounts(section: Any) -> dict[str, Fraction]:
    from jaxinfra_sim.core.inputs import quantity  # the project's one Quantity parser

    out: dict[str, Fraction] = {}
    for name in COMPUTE:
        q = quantity(section.get(name)) if isinstance(section, Mapping) and name in section else None
        if q is not None and q > 0:
            out[name] = Fraction(q)
    return out


def _resources(container: Mapping) -> tuple[dict[str, Fraction], dict[str, Fraction]]:
    """(requests, limits) of cpu and memory, a request defaulting to its limit."""
    res = container.get("resources") or {}
    limits = _amounts(res.get("limits") if isinstance(res, Mapping) else None)
    requests = {**limits, **_amounts(res.get("requests") if isinstance(res, Mapping) else None)}
    return requests, limits


def _memory_request(container: Mapping) -> Fraction:
    return _resources(container)[0].get("memory", Fraction(0))


def _containers(spec: Mapping) -> Iterable[Mapping]:
    for key in ("containers", "initContainers"):
        yield from (c for c in spec.get(key) or () if isinstance(c, Mapping))


def pod_qos(spec: Mapping) -> str:
    """The pod's QoS class: "Guaranteed", "Burstable" or "BestEffort"."""
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for container in _containers(spec):
        own_requests, own_limits = _resources(container)
        for total, own in ((requests, own_requests), (limits, own_limits)):
            for name, amount in own.items():
                total[name] = total.get(name, Fraction(0)) + amount
        guaranteed = guaranteed and set(own_limits) >= set(COMPUTE)
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests == limits:
        return "Guaranteed"
    return "Burstable"


def _burstable(memory_request: Fraction, capacity: int) -> int:
    return 1000 - int(1000 * memory_request // capacity) if capacity > 0 else BEST_EFFORT  # unknown: as no request


def oom_score_adj(spec: Mapping, container: Mapping, capacity: int | None = None) -> int:
    """The score the kubelet gives `container` of the pod `spec` on a node of `capacity` bytes of memory (None:
    this machine's, read only for a Burstable pod, the one class that weighs it)."""
    qos = pod_qos(spec)
    if qos == "Guaranteed" or spec.get("priorityClassName") in CRITICAL_CLASSES:
        return GUARANTEED
    if qos == "BestEffort":
        return BEST_EFFORT
    if capacity is None:
        capacity = node_memory()
    adjust = _burstable(_memory_request(container), capacity)
    sidecar = container.get("restartPolicy") == "Always" and any(
        container is c for c in spec.get("initContainers") or ()
    )
    regular = [_memory_request(c) for c in spec.get("containers") or () if isinstance(c, Mapping)]
    if sidecar and regular:
        adjust = min(adjust, _burstable(min(regular), capacity))
    if adjust < 1000 + GUARANTEED:  # a Guaranteed pod using all the node's memory scores 3: a Burstable one, no lower
        return 1000 + GUARANTEED
    return BEST_EFFORT - 1 if adjust == BEST_EFFORT else adjust  # a Burstable pod outlives a BestEffort one


def node_memory() -> int:
    """The node's memory capacity: this machine's MemTotal (cAdvisor's MachineInfo.MemoryCapacity)."""
    from jaxinfra_sim.node.capacity import total_memory

    return total_memory()


def own() -> int:
    """This process's oom_score_adj (0 where /proc cannot tell)."""
    try:
        return int(Path("/proc/self/oom_score_adj").read_text(encoding="ascii"))
    except (OSError, ValueError):
        return 0


def set_own(score: int) -> bool:
    """Write this process's oom_score_adj, inherited by every process it forks from now; False where the kernel
    refused (a score below the lowest this process may set without CAP_SYS_RESOURCE)."""
    try:
        with open("/proc/self/oom_score_adj", "w", encoding="ascii") as f:
            f.write(str(score))
    except OSError:
        return False
    return True


def may_lower() -> bool:
    """Whether this process may lower a score: CAP_SYS_RESOURCE in its effective set (root in a container may lack
    it)."""
    try:
        status = Path("/proc/self/status").read_text(encoding="ascii")
        effective = int(next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff:")), 16)
    except (OSError, StopIteration, ValueError):
        return False
    return bool(effective >> CAPABILITIES["SYS_RESOURCE"] & 1)


def protect_node_agents() -> None:
    """The simulator's processes as the kubelet's, where this process may lower its score (`may_lower`): the OOM
    killer then ends any pod's process first. Elsewhere the simulator keeps its own score, and its pods' scores are
    never set below it (`reachable`): a BestEffort or Burstable pod still goes first."""
    if may_lower():
        set_own(NODE_AGENT)


def reachable(score: int) -> int:
    """`score`, or this process's own where that is higher: what a pod forked from it may set for itself."""
    return max(score, own())
