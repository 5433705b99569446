"""The steps of a workload's controllers: each attempt (`pod_workers.Runner.steps`) and each workload's loop
(`attempts.run_workload`) is a generator of `Wait`s, so that one thread drives every workload of a simulation at once
(`cluster.workloads`): the simulator forks its pods, and stays free of threads of its own."""

from __future__ import annotations

import select
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import TypeVar


@dataclass(frozen=True)
class Wait:
    """What a step of a workload's controllers waits for before its next: at most `seconds`, or until the selector
    whose descriptor is `fd` (epoll's, level-triggered: what is ready stays ready for the step) has something to
    read."""

    seconds: float
    fd: int | None = None


T = TypeVar("T")


class Stop(Exception):
    """Thrown into an attempt's steps (`Runner.steps`) when the simulation stops it: another workload's machine verdict
    ended the simulation. Its pods are ended at once, its attempt says why (`Attempt.stopped`)."""


def drive(steps: Generator[Wait, None, T]) -> T:
    """Run `steps` alone to its end, waiting as it asks; its result."""
    poller = select.poll()
    try:
        wait = next(steps)
        while True:
            if wait.fd is not None:
                poller.register(wait.fd, select.POLLIN)
                poller.poll(max(wait.seconds, 0.0) * 1000)
                poller.unregister(wait.fd)
            else:
                time.sleep(max(wait.seconds, 0.0))
            wait = steps.send(None)
    except StopIteration as done:
        return done.value
