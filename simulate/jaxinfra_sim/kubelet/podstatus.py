"""A pod's status from its containers' exits (`pod_workers` reaps them): how each container ended, from its shim's wait
status, for its reason (its exit code, its signal, the machine's verdict on it, a probe that stopped it, a drain that
preempted it), and the pod's phase once its containers decide it, as the kubelet's getPhase does; a pod that makes
no progress (`stuck`).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from jaxinfra_sim.core.options import Options
from jaxinfra_sim.core.podrun import ENDED_WITH_GROUP, ContainerRun, Phase, PodRun, Process
from jaxinfra_sim.jax.timeouts import init_timeout
from jaxinfra_sim.kubelet import eviction
from jaxinfra_sim.node.machine import Machine
from jaxinfra_sim.runtime import shim

#: How long past its init timeout a pod may still be initializing before the group is ended.
INIT_GRACE_S = 1.0


def exit_status(p: Process, status: int) -> None:
    """How a reaped container ended (the signal, if any, and exit code) from its shim's wait status, which is its
    container's."""
    if os.WIFSIGNALED(status):  # reported as 128 + N, as containerd's reaper does: what onExitCodes matches
        p.signal = signal.Signals(os.WTERMSIG(status)).name
        p.exit_code = 128 + os.WTERMSIG(status)
    else:
        p.exit_code = os.WEXITSTATUS(status)


def stuck(
    runs: list[PodRun], now: float, t0: float, options: Options, phase: Callable[[PodRun, Phase], None]
) -> str | None:
    """A pod that makes no progress by its deadline ends the group (JAX would wait minutes): the group's reason, the
    pod's phase failed through `phase` (the attempt began at `t0`, monotonic), so its row's total is the time it hung,
    not its last report's."""
    for r in runs:
        if r.phase == Phase.INITIALIZING and not options.run_command:
            limit = init_timeout(r.pod.env, options) + INIT_GRACE_S
            if now - t0 - r.timings.get("started", 0.0) > limit:
                pending = [p.pod.hostname for p in runs if p.phase == Phase.PENDING]
                why = f"; not started yet: {', '.join(pending)}" if pending else ""
                waited = f"{limit - INIT_GRACE_S:g} s"
                r.reason = f"no progress: still initializing after its init timeout ({waited}){why}"
                phase(r, Phase.FAILED)
                return f"{r.pod.hostname}: {r.reason}"
    return None


class PodStatus:
    """The status of one attempt's pods, begun at `t0` (monotonic) on `machine`; `grace_cap`: --grace-cap; `phase`:
    records a pod's new phase."""

    def __init__(self, t0: float, machine: Machine, grace_cap: float, phase: Callable[[PodRun, Phase], None]) -> None:
        self.t0 = t0
        self.machine = machine
        self.grace_cap = grace_cap
        self.phase = phase

    def grace(self, r: PodRun) -> float:
        """How long a stopped pod may take: its terminationGracePeriodSeconds, capped by --grace-cap."""
        return min(r.pod.grace_period, self.grace_cap)

    def why(self, p: PodRun | ContainerRun) -> str | None:
        """How a reaped container ended, for its reason (None: it exited 0, unless a probe's failure stopped it)."""
        how = self.how(p)
        if p.probe_failed is not None:
            return f"{p.probe_failed}, so the kubelet stopped it: {how or 'exit code 0'}"
        return how

    def how(self, p: PodRun | ContainerRun) -> str | None:
        memory = self.machine.how(p)
        if memory is not None:
            return memory
        if p.signal is not None:
            return f"killed by {p.signal}"
        if p.exit_code == shim.START_ERROR and not p.running and p.last_stderr:  # the runtime never started it
            return f"{shim.START_ERROR_REASON}: {p.last_stderr}"
        if p.exit_code != 0:
            checks = ((p.result or {}).get("checks") or {}) if isinstance(p, PodRun) else {}
            failed = [k for k, c in checks.items() if not c["ok"]]
            return f"exit code {p.exit_code}" + (f"; failed checks: {', '.join(failed)}" if failed else "")
        return None

    def settle(self, r: PodRun) -> None:
        """The pod's phase, once its containers decide it (pkg/kubelet/kubelet_pods.go getPhase): Failed as soon as
        an init container fails; else once every main container has exited and its sidecars have stopped, Succeeded
        if all the main containers exited 0, else Failed; a sidecar's own exit code never counts. Under restartPolicy
        OnFailure (or Always) the kubelet restarts a failed container in place at once: the pod counts as failed here
        already, and the engine restarts it in place (its whole group, with a JAX group's peers)."""
        if r.done:
            return
        if r.evicted is not None:  # Failed once its containers have ended, whatever their exit codes
            if not any(p.live for p in r.processes):
                r.reason = f"{eviction.REASON}: {r.evicted}"
                self.phase(r, Phase.FAILED)
            return
        failed_init = next((c for c in r.others if c.container.role == "init" and c.reaped and c.exit_code), None)
        if failed_init is not None:
            r.reason = f"init container {failed_init.container.name}: {failed_init.reason}"
            self.phase(r, Phase.FAILED)
            return
        mains: list[Process] = [r, *(c for c in r.others if c.container.role == "main")]
        restarts = r.pod.restart_policy != "Never"  # a container a probe stopped restarts, however it exited
        failed = next(
            (
                m
                for m in mains
                if m.reaped and (m.exit_code or m.probe_failed and restarts or m is r and r.preempted is not None)
            ),
            None,
        )
        if restarts and failed is not None and r.exited is None:
            self._failed(r, failed)
            return
        if not all(m.reaped for m in mains):
            return
        if r.exited is None:
            r.exited = time.monotonic() - self.t0
        if any(c.live for c in r.others):  # its sidecars: the runner's `_kubelet` stops them
            return
        if failed is None:
            self.phase(r, Phase.SUCCEEDED)
        else:
            self._failed(r, failed)

    def _failed(self, r: PodRun, failed: Process) -> None:
        if isinstance(failed, ContainerRun):
            r.reason = f"container {failed.container.name}: {failed.reason}"
        self.phase(r, Phase.FAILED)

    def preemption(self, r: PodRun) -> str:
        """How a preempted pod ended, for its reason."""
        ended = time.monotonic() - self.t0 - (r.preempted or 0.0)
        how = f"exited {r.exit_code}" if r.signal is None else f"killed by {r.signal}"
        allowed = self.grace(r)
        grace = f"grace period {allowed:g} s" + (
            f", capped by --grace-cap from the pod's {r.pod.grace_period:g} s" if allowed < r.pod.grace_period else ""
        )
        deaf = (
            f"; its PID 1 ({r.deaf}) had no SIGTERM handler, so the kernel dropped the SIGTERM, as on a node; fix: "
            "handle SIGTERM in the program, started with `exec` by a wrapper shell"
            if r.deaf and r.signal == "SIGKILL"
            else ""
        )
        return f"preempted: SIGTERM at {r.preempted:.2f} s; {how} {ended:.2f} s later ({grace}){deaf}"

    def ended(self, r: PodRun, p: Process) -> None:
        """A reaped container that the group's end stopped (not a failure of its own)."""
        if p is not r:
            p.reason = p.reason or ENDED_WITH_GROUP
            return
        r.reason = r.reason or (self.preemption(r) if r.preempted is not None else ENDED_WITH_GROUP)
        if not r.done:
            self.phase(r, Phase.DELETED if r.deleted else Phase.FAILED)
