"""Every workload of a simulation at once, as a cluster runs every applied workload: each workload's controller loop
(`attempts.run_workload`, a generator) is stepped here, in one thread (the simulator forks its pods and stays free of
threads of its own), waiting on all their pods' pipes together.

What runs together must fit together. This machine is the cluster's one node: a workload whose pods do not fit beside
those already running waits, its pods Pending for want of room as the scheduler leaves them (kubernetes
pkg/scheduler: a pod that fits no node stays Pending, Unschedulable, until one has room), and starts once enough of
the running ones have ended, in the order of the inputs (the scheduler's queue orders by priority, then creation
time), while a later one that fits beside them starts at once, as a pod that fits a node is bound. One that cannot
fit even alone is refused before anything runs (`engine.admit`, exit 3). Workloads that Kueue admits also wait for
their ClusterQueue's quota (`quotas.Quotas`).

The machine's own verdict on one workload (out of memory, processes, descriptors) stops every other: each is ended as
its attempt ends on an interrupt, nothing left behind.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass

from jaxinfra_sim.cluster.attempts import run_workload
from jaxinfra_sim.cluster.shared import Simulation
from jaxinfra_sim.core.results import Verdict, WorkloadResult
from jaxinfra_sim.core.steps import Stop, Wait
from jaxinfra_sim.kueue.quotas import Quotas
from jaxinfra_sim.node import capacity

STOPPED = "stopped when the machine's verdict on {} ended the simulation"
"""The verdict reason of a workload that another's machine limit stopped (or kept from starting)."""
IDLE_S = 0.2
"""The longest the loop waits when nothing asked for less (a workload waiting for room is looked at again then)."""


@dataclass
class _Running:
    result: WorkloadResult
    steps: Generator[Wait, None, None]
    wait: Wait
    due: float  # monotonic: when its wait is over at the latest
    need: capacity.Need


def need_of(result: WorkloadResult, run_command: bool) -> capacity.Need:
    """What a workload takes of this machine while it runs (`capacity.need`): a process per pod, or each of a pod's
    several JAX processes (`Pod.processes`) with its devices."""
    processes = [d for p in result.workload.pods for d in p.process_devices]
    return capacity.need(result.workload.id, len(processes), sum(processes), run_command)


def run(runnable: Sequence[WorkloadResult], sim: Simulation) -> str | None:
    """Run every workload of `runnable` side by side until each has its verdict; the machine's verdict, if it ended
    the simulation (the others are stopped, and say so)."""
    run_command = sim.options.run_command
    room = capacity.room()
    quotas = Quotas(runnable)
    waiting = list(enumerate(runnable))
    running: dict[int, _Running] = {}
    poller = select.poll()
    machine: str | None = None
    try:
        while waiting or running:
            now = time.monotonic()
            for serial, result in sorted(waiting, key=lambda entry: quotas.order(entry[1])):
                if now >= sim.deadline or machine is not None:
                    break
                need = need_of(result, run_command)
                blocked = quotas.blocked(result)
                if blocked is None and running and not capacity.fits([*(r.need for r in running.values()), need], room):
                    blocked = capacity.WAITING
                if blocked is not None:
                    result.waiting_for = result.waiting_for or blocked
                    continue
                waiting.remove((serial, result))
                if result.waiting_for is not None:
                    result.waited = now - sim.started
                quotas.admit(result)
                running[serial] = _Running(result, run_workload(result, sim, serial), Wait(0.0), now, need)
            for serial, entry in sorted(running.items()):
                if serial not in running or not _ready(entry, poller):  # (stopped and ended meanwhile)
                    continue
                if not _step(entry, lambda steps: steps.send(None)):
                    del running[serial]
                    held = entry.result.held
                    if held is None or held.pending is None:  # a check never Ready keeps its reserved quota
                        quotas.release(entry.result)
                    attempts = entry.result.attempts
                    if machine is None and attempts and attempts[-1].machine is not None:
                        machine = attempts[-1].machine
                        _stop(running, STOPPED.format(entry.result.workload.id))
                        _not_started(waiting, STOPPED.format(entry.result.workload.id))
            if waiting and not running and time.monotonic() >= sim.deadline:
                _not_started(waiting, None)
            _wait(list(running.values()), poller)
    except BaseException:
        for entry in running.values():  # each kills and reaps its pods at once
            entry.steps.close()
        raise
    return machine


def _step(entry: _Running, step: Callable[[Generator[Wait, None, None]], Wait]) -> bool:
    """One step of a running workload's loop (`step`: send to it, or throw into it); False once it has ended."""
    try:
        entry.wait = step(entry.steps)
    except StopIteration:
        return False
    entry.due = time.monotonic() + entry.wait.seconds
    return True


def _stop(running: dict[int, _Running], why: str) -> None:
    """Ask every running workload to stop (`pod_workers.Stop`): each ends its pods at once and says `why`; those still
    ending them are stepped on as before, until they have."""
    for serial, entry in sorted(running.items()):
        try:
            stepped = _step(entry, lambda steps: steps.throw(Stop(why)))
        except Stop:  # not begun yet: nothing of it runs
            entry.result.verdict, entry.result.reason, stepped = Verdict.NOT_FINISHED, why, False
        if not stepped:
            del running[serial]


def _ready(entry: _Running, poller: select.poll) -> bool:
    """Whether its wait is over: its time has come, or its pods' pipes have something to read."""
    if time.monotonic() >= entry.due:
        return True
    if entry.wait.fd is None:
        return False
    poller.register(entry.wait.fd, select.POLLIN)
    try:
        return bool(poller.poll(0))
    finally:
        poller.unregister(entry.wait.fd)


def _wait(entries: Sequence[_Running], poller: select.poll) -> None:
    """Until the first of the running workloads' waits is over, or something arrives on their pipes."""
    now = time.monotonic()
    timeout = min([e.due - now for e in entries] + [IDLE_S])
    if timeout <= 0:
        return
    fds = {e.wait.fd for e in entries if e.wait.fd is not None}
    for fd in fds:
        poller.register(fd, select.POLLIN)
    try:
        poller.poll(timeout * 1000)
    finally:
        for fd in fds:
            poller.unregister(fd)


def _not_started(waiting: list[tuple[int, WorkloadResult]], why: str | None) -> None:
    """The workloads still waiting for room or quota when the simulation ends: what they waited for."""
    for _, result in waiting:
        result.verdict = Verdict.NOT_FINISHED
        result.reason = why or (
            f"--timeout reached while it waited for {result.waiting_for}; on a cluster it would start once that is free"
        )
    waiting.clear()
