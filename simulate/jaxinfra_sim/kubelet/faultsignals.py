"""The signals an attempt's faults time (`options.Faults`: `kill`, `preempt`), sent by the pod workers' loop
(`pod_workers`): each so many seconds after its pod's JAX container started; a preemption (the pod deleted, as by a node
drain or a Spot reclaim) signals every container of the pod, its SIGKILL once the pod's grace period is over.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

from jaxinfra_sim.core import events
from jaxinfra_sim.core.options import Faults
from jaxinfra_sim.core.podrun import PodRun, container_name, involved
from jaxinfra_sim.runtime import shim


class FaultSignals:
    """The timed signals of one attempt's pods, begun at `t0` (monotonic); `grace`: a stopped pod's grace period;
    `record`: the attempt's events."""

    def __init__(
        self,
        faults: Faults,
        runs: list[PodRun],
        t0: float,
        grace: Callable[[PodRun], float],
        record: Callable[..., None],
    ) -> None:
        # Timed signals per pod: (seconds after its JAX container starts, signal, to every container of the pod or
        # to that one); a preemption (the pod deleted) signals them all, its SIGKILL after its SIGTERM.
        self.timed = {
            id(r): [(t, signal.SIGKILL, False) for t in [faults.lookup(faults.kill, r.pod)] if t is not None]
            + [(t, signal.SIGTERM, True) for t in [faults.lookup(faults.preempt, r.pod)] if t is not None]
            for r in runs
        }
        self.t0 = t0
        self.grace = grace
        self.record = record

    def replaced(self, r: PodRun) -> None:
        """A pod created in place of a failed one: faults are the first pods' alone."""
        self.timed[id(r)] = []

    def send(self, runs: list[PodRun], now: float, wake: list[float]) -> None:
        """Send each signal that is due; the loop wakes when the next one is."""
        t0 = self.t0
        for r in runs:
            if r.pid is None or r.reaped:
                continue
            for entry in list(self.timed[id(r)]):
                after, signum, whole = entry
                at = t0 + r.timings["started"] + after
                if now < at:
                    wake.append(at)
                    continue
                self.timed[id(r)].remove(entry)
                for p in r.processes if whole else [r]:
                    p.request(signum)
                    if signum == signal.SIGTERM:
                        self.record(events.killing(now - t0, involved(p), container_name(p)))
                if signum == signal.SIGTERM:  # a node drain or a Spot reclaim: the kubelet's graceful stop
                    r.preempted, r.deaf = now - t0, shim.unhandled(r.pid, signum)
                    self.timed[id(r)].append((r.preempted - r.timings["started"] + self.grace(r), signal.SIGKILL, True))
