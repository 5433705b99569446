"""How the trace lays out a pod's probe steps inside its phases (`trace._track`): the probe times its steps on its
own clock, the runner sees each phase begin a little later, so the steps never fit exactly; each step reported is
shown, in order, inside the phase it belongs to."""

from __future__ import annotations

import pytest

from jaxinfra_sim.core.options import Faults
from jaxinfra_sim.core.podrun import Attempt, PodRun
from jaxinfra_sim.report import trace
from tests.sim.cluster.test_restarts import pod

pytestmark = pytest.mark.unit


def steps_of(run: PodRun) -> list[tuple[str, float, float]]:
    track = trace._track(run, Attempt(0, [run], seconds=3.0), Faults(), 0.0)
    return [(s.name, s.start, s.end) for s in track.spans if s.depth == 1]


@pytest.mark.parametrize("checks", [0.5, 1.5])  # inside the running phase (1.0 s), and overrunning it
def test_every_reported_step_is_shown_inside_its_phase(checks: float) -> None:
    run = PodRun(pod(0), phase="succeeded", exit_code=0)
    run.timings = {"started": 0.1, "initializing": 0.2, "running": 1.0, "succeeded": 2.0}
    run.result = {"timings": {"connect_s": 0.2, "init_s": 0.5, "checks_s": checks, "shutdown_s": 0.2}}
    running = [s for s in steps_of(run) if s[1] >= 1.0]
    assert [name for name, _, _ in running] == ["compile, collectives, training step", "shutdown barrier"]
    assert all(1.0 <= start < end <= 2.0 for _, start, end in running), running
    assert running[0][2] <= running[1][1]  # in order, never overlapping
