"""The end of an attempt's containers (`pod_workers`): each shim reaped as it exits — what its container wrote last, how
it ended, its pod's status (`podstatus`) — and, when the group ends, every container still running stopped, reaped and
its pipes closed, so that nothing is left behind.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Generator

from jaxinfra_sim.controllers.running import Running
from jaxinfra_sim.core import events
from jaxinfra_sim.core.podrun import ENDED_WITH_GROUP, ContainerRun, Phase, PodRun, Process, container_name, involved
from jaxinfra_sim.core.steps import Wait
from jaxinfra_sim.kubelet.podstatus import PodStatus, exit_status
from jaxinfra_sim.kubelet.relay import Relay
from jaxinfra_sim.node.machine import oom_group


class Reaper:
    """Reaps the shims of one attempt's containers, begun at `t0` (monotonic): their pipes are `relay`'s, their control
    pipes in `controls`; `record`: the attempt's events."""

    def __init__(
        self,
        relay: Relay,
        status: PodStatus,
        controls: set[int],
        controllers: Running,
        record: Callable[..., None],
        t0: float,
    ) -> None:
        self.relay = relay
        self.status = status
        self.controls = controls
        self.controllers = controllers
        self.record = record
        self.t0 = t0

    def reap(self, runs: list[PodRun]) -> None:
        """Reap every shim that has exited, and settle its pod's status."""
        for r in runs:
            reaped = False
            for p in r.processes if r.others else (r,):
                if p.pid is None or p.reaped:
                    continue
                pid, status = os.waitpid(p.pid, os.WNOHANG)
                if pid == 0:
                    continue
                reaped = True
                self._exited(p, status)
                oom_group(p)
                p.reason = self.status.why(p)
                if isinstance(p, ContainerRun):
                    p.ended = time.monotonic() - self.t0
                elif r.preempted is not None:  # deleted by the drain, whatever its container said
                    r.reason = self.status.preemption(r)
            if reaped:
                self.status.settle(r)

    def ending(self, runs: list[PodRun]) -> Generator[Wait, None, None]:
        """Stop every container still running, reap it, close its pipes: nothing is left behind.

        After a preemption, and after the workload completed with pods still running, they are stopped as a
        controller deleting them is — the stop signal, then
        SIGKILL once their grace period is over — so a program that checkpoints on SIGTERM may finish its save, as
        on a cluster; the preempted pod keeps its own deadline (containerd sends a container the stop signal once).
        After a crash they are killed at once: a group that lost a process can save nothing together, and JAX's own
        SIGTERM handler would only hold the verdict up for the grace period."""
        # what the pods never created waited for, read before the others are stopped (a stopped pod opens no gate)
        gates = {id(r): self.controllers.waiting(r, runs) for r in runs if not r.begun}
        for r in runs:  # a pod still waiting for its id maps is no shim yet: it ends on the handshake's EOF instead
            for p in r.processes:
                self.relay.close_handshake(p)
        live = [(r, p, p.pid) for r in runs for p in r.processes if p.live and p.pid is not None]
        graceful = any(r.preempted is not None or r.deleted or r.deadline_exceeded for r in runs)  # deleted pods
        now = time.monotonic()
        deadline = {}
        for r in runs:  # the Job controller deletes its active pods: a completed workload's, a Job past its deadline
            if (r.deleted or r.deadline_exceeded) and r.pod.job and any(p.live for p in r.processes):
                self.record(events.deleted_pod(now - self.t0, r.pod.namespace, r.pod.job, r.pod.name))
        for r, p, _ in live:
            if graceful and r.preempted is None:
                p.request(signal.SIGTERM)
                self.record(events.killing(now - self.t0, involved(p), container_name(p)))
            signalled = self.t0 + r.preempted if r.preempted is not None else now
            deadline[id(p)] = signalled + self.status.grace(r) if graceful else now
        unkilled = set(deadline)
        while any(not p.reaped for _, p, _ in live) and unkilled:
            for _, p, _ in live:
                if id(p) in unkilled and time.monotonic() >= deadline[id(p)]:
                    p.request(signal.SIGKILL)
                    unkilled.discard(id(p))
            yield Wait(0.02, self.relay.fileno())
            self.relay.pump()
            for r, p, pid in live:
                if not p.reaped and (found := os.waitpid(pid, os.WNOHANG))[0]:
                    self._ended(r, p, found[1])
        for r, p, pid in live:
            if not p.reaped:  # its container was SIGKILLed: its shim ends once the pod's namespace is empty
                self._ended(r, p, os.waitpid(pid, 0)[1])
        for r in runs:
            if r.pid is None and r.phase == Phase.PENDING:
                r.reason = self.controllers.never_created(r, gates.get(id(r)))
                if r.reason == "never started" and r.others and not r.initialized:
                    r.reason += f": {ENDED_WITH_GROUP} in its init containers"
            for p in r.processes:
                for fd in list(p.fds):
                    self.relay.close(p, fd)

    def _exited(self, p: Process, status: int) -> None:
        """A reaped container: what it wrote last, and how it ended (the signal, if any, and exit code) from its shim's
        wait status, which is its container's."""
        p.reaped = True
        p.pids_peak = p.group.pids_peak() if p.group is not None else None
        self.relay.drain(p)
        for fd in [fd for fd, stream in p.fds.items() if stream == "exit"]:
            self.relay.close(p, fd)
        if p.control is not None:
            self.controls.discard(p.control)
            os.close(p.control)
            p.control = None
        exit_status(p, status)

    def _ended(self, r: PodRun, p: Process, status: int) -> None:
        """A container the group's end stopped (not a failure of its own)."""
        self._exited(p, status)
        self.status.ended(r, p)
