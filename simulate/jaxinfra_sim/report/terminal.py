"""What a person sees while a simulation runs (live pod phases, prefixed pod logs, a final table),
and `run`: `jaxinfra simulate` from its inputs read to its verdict line and JSON report."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Column, Table

from jaxinfra import outputs
from jaxinfra.errors import INPUT_ERROR, MACHINE_LIMIT, UNDETERMINED, CommandFailed
from jaxinfra_sim.cluster.engine import simulate
from jaxinfra_sim.cluster.sources import Request
from jaxinfra_sim.core.podrun import Attempt, Logs, Phase, PodRun
from jaxinfra_sim.core.printable import printable
from jaxinfra_sim.core.results import Report, Verdict, WorkloadResult
from jaxinfra_sim.jax.processes import COMPUTED_BY_COMMAND

STYLE = {
    "pending": "dim",
    "started": "dim",
    "initializing": "yellow",
    "running": "cyan",
    "succeeded": "green",
    "failed": "red",
    "deleted": "dim",
    "not finished": "yellow",
    "undetermined": "magenta",
}


class Reporter:
    """The runner's listener. Refreshed from the runner's own loop: no threads near fork()."""

    def __init__(self, console: Console, logs: bool = True, keep_logs: bool = False):
        """`logs`: print each pod's output as it comes; `keep_logs`: also keep it (in `kept`) for the HTML report."""
        self.console = console
        self.logs = logs
        self.keep_logs = keep_logs
        self.kept: Logs = {}
        self.live: Live | None = None
        self.runs: list[PodRun] = []

    def __call__(self, event: str, payload: Any) -> None:
        if event == "phase":
            self._phase(payload)
        elif event == "log":
            run, stream, line = payload
            if self.keep_logs:
                self.kept.setdefault(id(run), []).append((stream, line))
            if self.logs:  # its controls are escaped already (relay.Relay._line); again here, as everything a pod said
                if self.console.is_terminal:
                    self.console.print(
                        f"[{STYLE.get(run.phase, '')}]{escape(f'[{run.pod.hostname}]')}[/] {escape(printable(line))}",
                        highlight=False,
                        soft_wrap=True,
                    )
                else:  # a log, a pipe: the same words, plainly (rich's markup and measuring cost more than the pod)
                    self.console.file.write(f"[{run.pod.hostname}] {printable(line)}\n")
        elif event == "attempt":
            self._attempt(*payload)

    def _phase(self, run: PodRun) -> None:
        if run not in self.runs:  # a pod of a new attempt, or one its Job recreated, takes its hostname's row
            rows = [i for i, r in enumerate(self.runs) if r.pod.hostname == run.pod.hostname]
            if rows:
                self.runs[rows[0]] = run
            else:
                self.runs.append(run)
        if self.console.is_terminal:
            if self.live is None:
                self.live = Live(self._table(), console=self.console, auto_refresh=False, transient=True)
                self.live.start()
            self.live.update(self._table(), refresh=True)
        elif run.phase in (Phase.SUCCEEDED, Phase.FAILED):  # plainly, as a pod's lines
            self.console.file.write(
                printable(f"[{run.pod.hostname}] {run.phase}" + (f": {run.reason}" if run.reason else "")) + "\n"
            )

    def _table(self) -> Table:
        table = Table("pod", "rank", "phase", title="simulating")
        for r in self.runs:
            table.add_row(
                r.pod.hostname, "" if r.rank is None else str(r.rank), f"[{STYLE.get(r.phase, '')}]{r.phase}[/]"
            )
        return table

    def _attempt(self, result: WorkloadResult, attempt: Attempt) -> None:
        # its rows go; those of the workloads running beside it stay
        self.runs = [r for r in self.runs if not any(r is p for p in (*attempt.pods, *attempt.replaced))]
        if self.live is not None and not self.runs:
            self.live.stop()
            self.live = None
        elif self.live is not None:
            self.live.update(self._table(), refresh=True)
        verdict = "[green]ok[/]" if attempt.ok else f"[red]failed[/]: {escape(printable(attempt.reason or ''))}"
        self.console.print(
            f"{escape(result.workload.id)} attempt {attempt.index}: {verdict} in {attempt.seconds:.2f} s",
            highlight=False,
            soft_wrap=True,
        )

    def summary(self, report: Report) -> None:
        """The file each object came from (where there were several), problems, then per workload its verdict line
        and a table of its last attempt's pods.

        Nothing is ever cut short: without a terminal (CI logs) rich lays tables out in 80
        columns, so every column folds instead of ending in "…", and the verdict is a line of its own.
        """
        if len(report.inputs) > 1 and not all(
            f.endswith(".py") for f in report.inputs
        ):  # several files: which object from which
            for file, ids in report.inputs.items():
                self.console.print(f"from {escape(file)}: {escape(', '.join(ids))}", highlight=False, soft_wrap=True)
        for p in report.problems:
            self.console.print(f"[red]error[/]: {escape(str(p))}", highlight=False, soft_wrap=True)
        for note in report.notes:
            self.console.print(f"note: {escape(note)}", highlight=False, soft_wrap=True)
        for result in report.results:
            for p in result.workload.problems:
                self.console.print(f"[red]error[/]: {escape(str(p))}", highlight=False, soft_wrap=True)
            style = STYLE.get(result.verdict, "")
            self.console.print(
                f"{escape(result.source)}: {escape(result.workload.id)}: [{style}]{result.verdict}[/] "
                f"({result.restarts} restart{'s' if result.restarts != 1 else ''})",
                highlight=False,
                soft_wrap=True,
            )
            table = Table(
                *(
                    Column(h, overflow="fold", justify="right" if h in ("rank", "init s", "total s") else "left")
                    for h in ("pod", "rank", "ip", "phase", "exit", "init s", "total s", "checks")
                ),
                box=None,
                pad_edge=False,
                header_style="bold",
            )
            for run in result.attempts[-1].pods if result.attempts else []:
                c = run.cells()
                table.add_row(
                    c["pod"],
                    c["rank"],
                    c["ip"],
                    f"[{STYLE[run.phase]}]{run.phase}[/]",
                    c["exit"],
                    c["init"],
                    c["total"],
                    c["checks"],
                )
            if table.row_count:
                self.console.print(table)
            if result.waited_note is not None:
                self.console.print(f"  {escape(result.waited_note)}", highlight=False, soft_wrap=True)
            if result.held is not None and result.held.pending is None:
                self.console.print(f"  held: {escape(result.held.note)}", highlight=False, soft_wrap=True)
            if result.reason:  # a reason may quote what a pod said (its last stderr line, a probe's output)
                self.console.print(f"  reason: {escape(printable(result.reason))}", highlight=False, soft_wrap=True)
            for note in result.workload.notes:
                self.console.print(f"  note: {escape(note)}", highlight=False, soft_wrap=True)


def run(request: Request) -> None:
    """`jaxinfra simulate` once its inputs are read: simulate them with a live report, write the
    JSON report, the trace and the HTML page asked for (also of a failed run: that is when they
    matter), and end with the verdict's summary line (CommandFailed when any workload failed; with its own status,
    `errors.UNDETERMINED`, where nothing failed but the probe could not give a workload's verdict)."""
    options, json_report, trace, html = request.options, request.json_report, request.trace, request.html
    reporter = Reporter(Console(stderr=False), logs=request.logs, keep_logs=html is not None)
    report = simulate(request.sources, options, reporter)
    report.notes.extend(request.notes)
    reporter.summary(report)
    written = []  # all or nothing, once the verdict is in: a bad path was refused before the run
    if json_report is not None:
        written.append(("--json", json_report, json.dumps(report.as_dict(), indent=2) + "\n"))
    if trace is not None:
        from jaxinfra_sim.report.trace import trace_json

        written.append(("--trace", trace, trace_json(report, options.faults)))
    if html is not None:
        from jaxinfra_sim.report.html import html_report

        written.append(("--html", html, html_report(report, options.faults, reporter.kept)))
    outputs.write(written)
    if report.refused or report.unserved:  # input problems: the API server's refusals, then what is not emulated
        said = [
            f"{n} {one if n == 1 else f'{one}s'} {what}"
            for n, one, what in (
                (len(report.refused), "problem", "the API server refuses"),
                (len(report.unserved), "object", "the simulator does not run (a kind or runtime it does not emulate)"),
            )
            if n
        ]
        raise CommandFailed(f"{'; '.join(said)}; nothing started", INPUT_ERROR)
    if report.machine is not None:
        raise CommandFailed(report.machine, MACHINE_LIMIT)
    if undetermined := report.undetermined:  # nothing failed, but the probe cannot tell: its own status
        named = ", ".join(f"{r.source}: {r.workload.id}" for r in undetermined)
        raise CommandFailed(f"simulation undetermined: {named} ({COMPUTED_BY_COMMAND})", UNDETERMINED)
    if not report.ok:
        failed = [f"{r.source}: {r.workload.id}" for r in report.results if r.verdict != Verdict.SUCCEEDED]
        raise CommandFailed(f"simulation failed: {', '.join(failed) or 'no workload ran'}", 1)
    print(f"jaxinfra: simulation passed: {len(report.results)} workload(s) in {report.seconds:.2f} s", file=sys.stderr)
