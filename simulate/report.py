"""What a person sees while a simulation runs (live pod phases, prefixed pod logs, a final table),
and `run`: `jaxinfra simulate` from its inputs read to its verdict line and JSON report."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Column, Table

from jaxinfra.errors import CommandFailed
from jaxinfra.simulate.engine import Report, WorkloadResult, simulate
from jaxinfra.simulate.runner import Attempt, Options, PodRun

STYLE = {"pending": "dim", "started": "dim", "initializing": "yellow", "running": "cyan",
         "succeeded": "green", "failed": "red"}


class Reporter:
    """The runner's listener. Refreshed from the runner's own loop: no threads near fork()."""

    def __init__(self, console: Console, logs: bool = True):
        self.console = console
        self.logs = logs
        self.live: Live | None = None
        self.runs: list[PodRun] = []

    def __call__(self, event: str, payload: Any) -> None:
        if event == "phase":
            self._phase(payload)
        elif event == "log" and self.logs:
            run, stream, line = payload
            self.console.print(f"[{STYLE.get(run.phase, '')}]{escape(f'[{run.pod.hostname}]')}[/] {escape(line)}",
                               highlight=False, soft_wrap=True)
        elif event == "attempt":
            self._attempt(*payload)

    def _phase(self, run: PodRun) -> None:
        if run not in self.runs:
            if any(r.pod.hostname == run.pod.hostname for r in self.runs):  # a new attempt began
                self.runs = []
            self.runs.append(run)
        if self.console.is_terminal:
            if self.live is None:
                self.live = Live(self._table(), console=self.console, auto_refresh=False, transient=True)
                self.live.start()
            self.live.update(self._table(), refresh=True)
        elif run.phase in ("succeeded", "failed"):
            self.console.print(escape(f"[{run.pod.hostname}] {run.phase}" + (f": {run.reason}" if run.reason else "")),
                               highlight=False, soft_wrap=True)

    def _table(self) -> Table:
        table = Table("pod", "rank", "phase", title="simulating")
        for r in self.runs:
            table.add_row(r.pod.hostname, str(r.pod.global_index), f"[{STYLE.get(r.phase, '')}]{r.phase}[/]")
        return table

    def _attempt(self, result: WorkloadResult, attempt: Attempt) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
        self.runs = []
        verdict = "[green]ok[/]" if attempt.ok else f"[red]failed[/]: {attempt.reason}"
        self.console.print(f"{result.workload.id} attempt {attempt.index}: {verdict} in {attempt.seconds:.2f} s", highlight=False)

    def summary(self, report: Report) -> None:
        for p in report.problems:
            self.console.print(f"[red]error[/]: {p}", highlight=False)
        for result in report.results:
            for p in result.workload.problems:
                self.console.print(f"[red]error[/]: {p}", highlight=False)
            table = Table(Column("pod", no_wrap=True), "rank", Column("ip", no_wrap=True), "phase", "exit", "init s", "total s", "checks",
                          title=f"{result.source}: {result.workload.id}: {result.verdict} ({result.restarts} restarts)")
            for run in (result.attempts[-1].pods if result.attempts else []):
                d = run.as_dict()
                exit_text = d["signal"] or ("" if d["exit_code"] is None else str(d["exit_code"]))
                checks = d["checks"]
                passed = sum(c["ok"] for c in checks.values())
                t = d["timings"]
                init = t["running"] - t["initializing"] if "running" in t and "initializing" in t else None
                total = max(t.values()) - t.get("started", 0.0) if t else None
                table.add_row(run.pod.hostname, str(run.pod.global_index), run.pod.ip, f"[{STYLE[run.phase]}]{run.phase}[/]",
                              exit_text, "" if init is None else f"{init:.2f}", "" if total is None else f"{total:.2f}",
                              f"{passed}/{len(checks)}" if checks else "")
            self.console.print(table)
            if result.reason:
                self.console.print(f"  reason: {result.reason}", highlight=False)


def run(sources: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], options: Options, logs: bool, json_report: Path | None) -> None:
    """`jaxinfra simulate` once its inputs are read: simulate them with a live report, write the
    JSON report, and end with the verdict's summary line (CommandFailed when any workload failed)."""
    reporter = Reporter(Console(stderr=False), logs=logs)
    report = simulate(sources, options, reporter)
    reporter.summary(report)
    if json_report is not None:
        json_report.write_text(json.dumps(report.as_dict(), indent=2) + "\n", encoding="utf-8")
    if not report.ok:
        failed = [f"{r.source}: {r.workload.id}" for r in report.results if r.verdict != "succeeded"]
        raise CommandFailed(f"simulation failed: {', '.join(failed) or 'no workload ran'}", 1)
    print(f"jaxinfra: simulation passed: {len(report.results)} workload(s) in {report.seconds:.2f} s", file=sys.stderr)
