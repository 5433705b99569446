"""What the terminal reporter writes of each pod while it runs: on a terminal, rich's styled lines; elsewhere (a CI
log, a pipe) the same words written plainly, every control character a pod wrote escaped, never its markup read."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from jaxinfra_sim.core import model
from jaxinfra_sim.core.podrun import Phase, PodRun
from jaxinfra_sim.report.terminal import Reporter

pytestmark = pytest.mark.unit


def run(phase: Phase, reason: str | None = None) -> PodRun:
    pod = model.Pod(
        "Job/ml/t", "ml", "t-0", "t-0", "t", "10.244.0.2", 0, 0, 0, {}, {}, "jax", "i", (), (), {}, None, 1, "cpu"
    )
    return PodRun(pod, phase=phase, reason=reason)


def test_not_on_a_terminal_each_line_is_written_plainly_and_escaped() -> None:
    out = io.StringIO()
    reporter = Reporter(Console(file=out, width=40))
    assert not reporter.console.is_terminal
    reporter(
        "log",
        (run(Phase.RUNNING), "stdout", "[bold]not markup[/] \x1b]52;c;cGF5bG9hZA==\x07 and a line past the 40 columns"),
    )
    reporter("phase", run(Phase.FAILED, "exit code 1"))
    reporter("phase", run(Phase.RUNNING))  # only the ends are said off a terminal
    assert out.getvalue().splitlines() == [
        "[t-0] [bold]not markup[/] \\x1b]52;c;cGF5bG9hZA==\\x07 and a line past the 40 columns",
        "[t-0] failed: exit code 1",
    ]


def test_on_a_terminal_the_same_words_are_styled() -> None:
    out = io.StringIO()
    reporter = Reporter(Console(file=out, width=200, force_terminal=True, color_system="standard"))
    reporter("log", (run(Phase.SUCCEEDED), "stdout", "[bold]x[/]"))
    text = out.getvalue()
    assert "\x1b[" in text and "[t-0]" in text and "[bold]x[/]" in text  # styled, the pod's markup still its words
