"""Kueue's ClusterQueue quota while the workloads of a simulation run side by side: a workload Kueue admits takes its
usage of the most the queue may take (its nominal quota and what its cohort lends it: `scheduler.admit` counts it and
picks the flavor) from when it starts until it
ends; one that does not fit what is left waits, suspended, until enough has been given back. One whose
ProvisioningRequest check never becomes Ready (`--provision CHECK@never`) keeps the quota Kueue reserved for it.

Order, as Kueue's scheduler takes a ClusterQueue's pending workloads (kubernetes-sigs/kueue @ 05c6e9a8
pkg/queue/cluster_queue_strict_fifo.go `byPriority`, the queue heap's order: the higher priority first, then the earlier
creationTimestamp; here the order of the inputs): under StrictFIFO a workload waits while one before it in its queue
waits, whether it would fit or not; under BestEffortFIFO (the default) one that fits is admitted past those that do not
(pkg/queue/cluster_queue_best_effort_fifo.go: an inadmissible head is set aside).

Not played: what the other members of a cohort use of the quota they lend (each ClusterQueue is checked against the
most it may take, as if its cohort's other members used none), preemption, fair sharing, and a second flavor tried
when the first lacks the quota left (each workload keeps the flavor `scheduler.admit` assigned it against the whole
quota).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from jaxinfra_sim.core import model
from jaxinfra_sim.core.results import WorkloadResult


class Quotas:
    """The quota each ClusterQueue has given out, and the workloads waiting for it, in the order Kueue takes them."""

    def __init__(self, workloads: Sequence[WorkloadResult]):
        self._position = {id(r): position for position, r in enumerate(workloads)}
        self._queue = sorted((r for r in workloads if r.workload.quota is not None), key=self.order)
        self._started: set[int] = set()  # id() of each workload admitted so far
        self._used: dict[tuple[str, str, str], Fraction] = {}  # (cluster queue, flavor, resource) -> in use

    def order(self, result: WorkloadResult) -> tuple[int, int]:
        """Where `result` stands among the workloads waiting to start: a higher priority first, then the inputs' order
        (a workload Kueue does not manage has priority 0 here)."""
        quota = result.workload.quota
        return (-quota.priority if quota is not None else 0, self._position[id(result)])

    def blocked(self, result: WorkloadResult) -> str | None:
        """What `result` waits for before Kueue admits it (None: it may start now). Asked in `order`."""
        quota = result.workload.quota
        if quota is None:
            return None
        if quota.strategy == model.QueueingStrategy.STRICT_FIFO:
            for ahead in self._queue:
                if ahead is result:
                    break
                if _quota(ahead).cluster_queue == quota.cluster_queue and id(ahead) not in self._started:
                    return (
                        f"its turn in ClusterQueue {quota.cluster_queue} (StrictFIFO): {ahead.workload.id}, ahead of "
                        "it, was waiting"
                    )
        short = self._fits(result)
        return None if short is None else f"quota in ClusterQueue {quota.cluster_queue}: {short}"

    def _fits(self, result: WorkloadResult) -> str | None:
        """What of its ClusterQueue's quota is short for `result` now (None: it fits)."""
        quota = _quota(result)
        most = {(flavor, resource): amount for flavor, resource, amount in quota.most}
        short = [
            f"{resource} {float(amount):g} of flavor {flavor} beside {float(used):g} in use "
            f"(at most {float(most[flavor, resource]):g})"
            for flavor, resource, amount in quota.usage
            for used in [self._used.get((quota.cluster_queue, flavor, resource), Fraction(0))]
            if used + amount > most[flavor, resource]
        ]
        return "; ".join(short) or None

    def admit(self, result: WorkloadResult) -> None:
        """Kueue admits `result`: its usage counts against its ClusterQueue until it ends."""
        self._started.add(id(result))
        self._add(result, 1)

    def release(self, result: WorkloadResult) -> None:
        """`result` has ended (finished or failed): its quota is free again."""
        self._add(result, -1)

    def _add(self, result: WorkloadResult, sign: int) -> None:
        quota = result.workload.quota
        if quota is None:
            return
        for flavor, resource, amount in quota.usage:
            key = (quota.cluster_queue, flavor, resource)
            self._used[key] = self._used.get(key, Fraction(0)) + sign * amount


def _quota(result: WorkloadResult) -> model.Quota:
    quota = result.workload.quota
    assert quota is not None
    return quota
