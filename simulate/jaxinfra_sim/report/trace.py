"""A simulation as a timeline: every pod of every attempt, its phases, the faults, the verdicts.

`timeline` reads what the simulation already produced (the runner's per-pod phase timings, the
probe's own step timings, exit statuses, and the faults that were asked for) and lays it on one
clock; `trace_events` writes it in the Trace Event Format that Perfetto (ui.perfetto.dev) and
`chrome://tracing` open, and that speedscope imports: one process per workload attempt, one
thread per pod, `X` (complete) events for phases, `i` (instant) events for faults, exits and
verdicts, `M` (metadata) events for names and order. Format: "Trace Event Format" (Google,
docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU); microsecond `ts`.

The clock: each attempt's timings count from its own start, and each attempt is placed where it began
(`Attempt.began`), the clock's zero where the first began: the workloads of one input run side by side
(`cluster.workloads`), so their attempts overlap, each in a process (track) of its own. An attempt that does not say
when it began (one made by hand) starts where the one before it ended.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from jaxinfra_sim.core import events
from jaxinfra_sim.core.options import Faults
from jaxinfra_sim.core.podrun import Attempt, PodRun
from jaxinfra_sim.core.results import Report

#: Phases as the runner records them, in the order a pod goes through them; each lasts until the next.
PHASES = ("created", "started", "initializing", "running")
ENDS = ("succeeded", "failed")
#: The probe's own step timings (probe.run_probe): (its key, the step's name), inside the phase they belong to.
STEPS = {
    "initializing": (("connect_s", "connect to coordinator"), ("init_s", "device exchange")),
    "running": (("checks_s", "compile, collectives, training step"), ("shutdown_s", "shutdown barrier")),
}
US = 1_000_000


@dataclass(frozen=True)
class Span:
    """Something that lasted: a phase (depth 0) or a step inside one (depth 1), in seconds on the run's clock."""

    name: str
    start: float
    end: float
    depth: int = 0


@dataclass(frozen=True)
class Mark:
    """Something that happened at one moment: a fault, an exit, an attempt's end, a verdict."""

    name: str
    at: float
    kind: str  # "fault" | "exit" | "attempt" | "verdict" | "event"
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Track:
    """One pod in one attempt."""

    rank: int
    hostname: str
    phase: str
    spans: tuple[Span, ...]
    marks: tuple[Mark, ...]


@dataclass(frozen=True)
class Lane:
    """One attempt of one workload: its pods and how it ended."""

    workload: str
    attempt: int
    start: float
    end: float
    ok: bool
    tracks: tuple[Track, ...]
    marks: tuple[Mark, ...]


@dataclass(frozen=True)
class Timeline:
    lanes: tuple[Lane, ...]
    marks: tuple[Mark, ...]  # the verdicts, one per workload
    end: float


def _faults(run: PodRun, faults: Faults, t: dict[str, float], end: float) -> list[Mark]:
    """The faults injected into this pod, where they took effect (the runner injects them into attempt 0 only)."""
    out = []
    if (delay := faults.lookup(faults.delay, run.pod)) is not None:
        out.append(Mark(f"fault: delay {delay:g} s", 0.0, "fault", {"delay_s": delay}))
    if faults.lookup(faults.fail, run.pod) and "started" in t:
        out.append(Mark("fault: fail (exit 1 at start)", t["started"], "fault"))
    if faults.lookup(faults.hang, run.pod) and "started" in t:
        out.append(Mark("fault: hang", t.get("initializing", t["started"]), "fault"))
    if (kill := faults.lookup(faults.kill, run.pod)) is not None and run.reason == f"killed by {run.signal}":
        # where it took effect: the pod's end (the runner delivers it on its next turn, at or after `kill`)
        out.append(Mark(f"fault: kill ({run.signal})", end, "fault", {"asked_after_start_s": kill}))
    if run.preempted is not None:  # where the drain's SIGTERM went out; the pod's exit mark shows how it ended
        out.append(
            Mark(
                "fault: preempt (SIGTERM)",
                run.preempted,
                "fault",
                {"asked_after_start_s": faults.lookup(faults.preempt, run.pod)},
            )
        )
    return out


def _event(e: events.Event, offset: float) -> Mark:
    """An event (`events`) as the trace shows it: its reason and message, where it came."""
    return Mark(f"{e.reason}: {e.message}", offset + e.at, "event", {"type": e.type, "object": e.involved})


def _track(run: PodRun, attempt: Attempt, faults: Faults, offset: float) -> Track:
    t = {"created": 0.0, **run.timings}
    end = next((t[e] for e in ENDS if e in t), attempt.seconds)
    reached = [p for p in PHASES if p in t]
    spans: list[Span] = []
    for i, phase in enumerate(reached):
        start = t[phase]
        stop = t[reached[i + 1]] if i + 1 < len(reached) else end
        if stop <= start:
            continue
        spans.append(Span(phase, offset + start, offset + stop))
        steps = (run.result or {}).get("timings", {})
        lengths = [
            (name, max(steps[key] - (steps.get("connect_s", 0.0) if key == "init_s" else 0.0), 0.0))
            for key, name in STEPS.get(phase, ())
            if key in steps
        ]
        # The probe times its steps on its own clock; the runner sees the phase begin a little after the probe did
        # (a pipe read on a busy machine), so steps that overrun the phase are shrunk to fit it, each still shown.
        fit = min(1.0, (stop - start) / total) if (total := sum(length for _, length in lengths)) > 0 else 1.0
        at = start
        for name, length in lengths:
            step_end = min(at + length * fit, stop)
            if step_end > at:
                spans.append(Span(name, offset + at, offset + step_end, depth=1))
            at = step_end
    exit_text = run.signal or ("never started" if run.pid is None else f"exit {run.exit_code}")
    marks = [
        Mark(
            f"{run.phase}: {exit_text}",
            offset + end,
            "exit",
            {"exit_code": run.exit_code, "signal": run.signal, "reason": run.reason, "ip": run.pod.ip},
        )
    ]
    marks += [
        Mark(m.name, offset + m.at, m.kind, m.args)
        for m in (_faults(run, faults, t, end) if attempt.index == 0 else [])
    ]
    involved = events.pod(run.pod.namespace, run.pod.name)
    marks += [_event(e, offset) for e in attempt.events if e.involved == involved]
    return Track(
        run.pod.global_index, run.pod.hostname, run.phase, tuple(spans), tuple(sorted(marks, key=lambda m: m.at))
    )


def timeline(report: Report, faults: Faults) -> Timeline:
    """Every attempt of every workload on one clock: where it began (workloads run side by side, each attempt a lane
    of its own), else, for an attempt that says not (one made by hand), right after the one before."""
    lanes, verdicts = [], []
    clock = end = 0.0
    origin = min((a.began for r in report.results for a in r.attempts if a.began is not None), default=0.0)
    for result in report.results:
        for attempt in result.attempts:
            clock = attempt.began - origin if attempt.began is not None else clock
            verdict = "ok" if attempt.ok else f"failed: {attempt.reason}"
            lanes.append(
                Lane(
                    result.workload.id,
                    attempt.index,
                    clock,
                    clock + attempt.seconds,
                    attempt.ok,
                    tuple(sorted((_track(r, attempt, faults, clock) for r in attempt.pods), key=lambda k: k.rank)),
                    (
                        Mark(f"attempt {attempt.index} {verdict}", clock + attempt.seconds, "attempt"),
                        *(_event(e, clock) for e in attempt.events if not e.involved.startswith("Pod/")),
                    ),
                )
            )
            clock += attempt.seconds
            end = max(end, clock)
        verdicts.append(
            Mark(
                f"{result.workload.id}: {result.verdict}" + (f" ({result.reason})" if result.reason else ""),
                clock,
                "verdict",
                {"restarts": result.restarts},
            )
        )
    return Timeline(tuple(lanes), tuple(verdicts), end)


def _us(seconds: float) -> int:
    return round(seconds * US)


def trace_events(tl: Timeline) -> dict[str, Any]:
    """The Trace Event Format's JSON object: a process per attempt, a thread per pod."""
    meta: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for pid, lane in enumerate(tl.lanes, start=1):
        meta += [
            {
                "ph": "M",
                "pid": pid,
                "tid": 0,
                "name": "process_name",
                "args": {"name": f"{lane.workload} attempt {lane.attempt}"},
            },
            {"ph": "M", "pid": pid, "tid": 0, "name": "process_sort_index", "args": {"sort_index": pid}},
            {
                "ph": "M",
                "pid": pid,
                "tid": 0,
                "name": "process_labels",
                "args": {"labels": "ok" if lane.ok else "failed"},
            },
        ]
        for m in lane.marks:
            events.append({"ph": "i", "s": "p", "pid": pid, "tid": 0, "ts": _us(m.at), "name": m.name, "cat": m.kind})
        for track in lane.tracks:
            tid = track.rank + 1
            meta += [
                {
                    "ph": "M",
                    "pid": pid,
                    "tid": tid,
                    "name": "thread_name",
                    "args": {"name": f"rank {track.rank} {track.hostname}"},
                },
                {"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": track.rank}},
            ]
            for s in track.spans:
                events.append(
                    {
                        "ph": "X",
                        "pid": pid,
                        "tid": tid,
                        "ts": _us(s.start),
                        "dur": _us(s.end) - _us(s.start),
                        "name": s.name,
                        "cat": "phase" if s.depth == 0 else "step",
                    }
                )
            for m in track.marks:
                events.append(
                    {
                        "ph": "i",
                        "s": "t",
                        "pid": pid,
                        "tid": tid,
                        "ts": _us(m.at),
                        "name": m.name,
                        "cat": m.kind,
                        **({"args": m.args} if m.args else {}),
                    }
                )
    for m in tl.marks:
        events.append(
            {"ph": "i", "s": "g", "pid": 0, "tid": 0, "ts": _us(m.at), "name": m.name, "cat": m.kind, "args": m.args}
        )
    # A parent before what it holds: by time, longer first (how viewers nest complete events).
    events.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], -e.get("dur", 0), e["ph"] != "X"))
    return {
        "traceEvents": meta + events,
        "displayTimeUnit": "ms",
        "otherData": {"producer": "jaxinfra simulate", "clock": "seconds since the simulation's first attempt began"},
    }


def trace_json(report: Report, faults: Faults) -> str:
    """The trace file's text: sorted keys, one event per line (diffable, the same bytes for the same report)."""
    doc = trace_events(timeline(report, faults))
    lines = ",\n".join(json.dumps(e, sort_keys=True) for e in doc["traceEvents"])
    rest = json.dumps({k: v for k, v in doc.items() if k != "traceEvents"}, sort_keys=True)[1:-1]
    return f'{{"traceEvents": [\n{lines}\n], {rest}}}\n'
