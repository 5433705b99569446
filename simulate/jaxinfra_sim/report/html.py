"""The simulation as one self-contained HTML page: verdict, topology, timeline, pods, logs.

No script and nothing fetched: a Content-Security-Policy of `default-src 'none'` (inline styles
only) makes the browser refuse any request the page could make, so it opens the same from a CI
artifact, an e-mail or a laptop offline. The pictures are inline SVG: the topology from
`jaxinfra.topology` (each host coloured by how its pod ended), the timeline from `trace.timeline`
(the same data as `--trace`). Logs are folded per pod with <details>.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from jaxinfra.topology import Layout, svg
from jaxinfra.upstream import JOB_NAME_LABEL
from jaxinfra_sim.core.options import Faults
from jaxinfra_sim.core.podrun import Attempt, Logs
from jaxinfra_sim.core.results import Report, WorkloadResult
from jaxinfra_sim.report.trace import Lane, timeline

PHASE_COLOUR = {
    "created": "#c8c8c8",
    "started": "#9fb3c8",
    "initializing": "#f2c14e",
    "running": "#4a90d9",
    "succeeded": "#2e8b57",
    "failed": "#c0392b",
    "pending": "#c8c8c8",
}
STEP_COLOUR = "#1d4f8f"
MARK_COLOUR = {"fault": "#c0392b", "exit": "#222222", "attempt": "#555555", "verdict": "#555555"}
#: Timeline geometry (px): label column, plot width, row height.
LABEL_W, PLOT_W, ROW_H = 230, 820, 18
#: The most log lines kept per pod in the page (the last ones: they say why it ended).
LOG_LINES = 400

STYLE = """
body{font-family:sans-serif;margin:24px;color:#222;max-width:1400px}
header{padding:12px 16px;border-radius:6px;margin-bottom:16px}
header.ok{background:#dcf3dc;border:1px solid #2e8b57} header.failed{background:#f9d4d4;border:1px solid #c0392b}
header.undetermined{background:#efe3f5;border:1px solid #7d3c98}
h1{margin:0 0 4px 0;font-size:22px} h2{font-size:18px;margin:24px 0 8px} h3{font-size:15px;margin:16px 0 6px}
table{border-collapse:collapse;font-size:13px} \
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0} td.num{text-align:right} .mono{font-family:monospace}
.succeeded{color:#1e6b41;font-weight:bold} .failed{color:#a02a1e;font-weight:bold}
.not-finished{color:#8a6d00;font-weight:bold} .undetermined{color:#7d3c98;font-weight:bold}
pre{background:#f7f7f7;padding:6px;max-height:320px;overflow:auto;font-size:12px;margin:4px 0}
pre .err{color:#a02a1e} .reason{font-family:monospace;white-space:pre-wrap}
.picture{overflow-x:auto} details summary{cursor:pointer}
"""


def _layout(result: WorkloadResult) -> Layout:
    """The topology picture's input, from the simulated pods (the report reads manifests, not a spec)."""
    w = result.workload
    pods = w.pods
    last = {r.pod.global_index: r.phase for r in result.attempts[-1].pods} if result.attempts else {}
    slices, hosts = (w.groups, w.hosts_per_group) if w.groups * w.hosts_per_group == len(pods) else (1, len(pods))
    first = pods[0]
    env = first.env
    coordinator = env.get("JAX_COORDINATOR_ADDRESS") or (
        f"{env['COORDINATOR_ADDRESS']}:{env.get('COORDINATOR_PORT', '')}" if "COORDINATOR_ADDRESS" in env else "not set"
    )
    return Layout(
        title=f"{w.namespace}/{w.name} ({w.kind})",
        pool=f"{first.accelerator.upper()} pods, {first.devices} devices each, image {first.image}",
        slices=slices,
        hosts_per_slice=hosts,
        devices_per_host=first.devices,
        device_kind=first.accelerator,
        hostname=lambda r: pods[r].hostname,
        group=lambda i: f"Job {pods[i * hosts].labels.get(JOB_NAME_LABEL, w.name)}",
        coordinator=coordinator,
        service=f"{first.subdomain} (the pods' subdomain)" if first.subdomain else None,
        phase=last.get,
    )


def _tick(span: float) -> float:
    """A round axis step giving 4 to 10 ticks."""
    for step in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600):
        if span / step <= 10:
            return step
    return span / 10


def _timeline_svg(lanes: Sequence[Lane]) -> str:
    """The attempts of one workload: a row per pod, its phases as bars, steps inside, faults and exits as marks."""
    start, end = lanes[0].start, max(lane.end for lane in lanes)
    scale = PLOT_W / max(end - start, 1e-6)

    def x(t: float) -> int:
        return LABEL_W + round((t - start) * scale)

    rows = sum(1 + len(lane.tracks) for lane in lanes)
    height = (rows + 2) * ROW_H
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{LABEL_W + PLOT_W + 48}" height="{height}" '
        f'role="img" aria-label="timeline">',
        f'<rect width="{LABEL_W + PLOT_W + 48}" height="{height}" fill="#ffffff"/>',
    ]
    step = _tick(end - start)
    ticks = int((end - start) / step) + 1
    for i in range(ticks):
        tx = x(start + i * step)
        out.append(f'<line x1="{tx}" y1="{ROW_H}" x2="{tx}" y2="{height - ROW_H}" stroke="#e4e4e4"/>')
        out.append(
            f'<text x="{tx}" y="{ROW_H - 5}" font-size="10" font-family="sans-serif" fill="#555">{i * step:g} s</text>'
        )
    y = ROW_H
    for lane in lanes:
        verdict = "ok" if lane.ok else "failed"
        out.append(
            f'<text x="4" y="{y + 13}" font-size="12" font-weight="bold" font-family="sans-serif">'
            f"attempt {lane.attempt}: {verdict}</text>"
        )
        for m in lane.marks:
            if m.kind not in MARK_COLOUR:  # events: in the trace and the JSON report, not on this page's timeline
                continue
            out.append(
                f'<line x1="{x(m.at)}" y1="{y}" x2="{x(m.at)}" y2="{y + ROW_H * (1 + len(lane.tracks))}" '
                f'stroke="{MARK_COLOUR[m.kind]}" stroke-dasharray="3 2"><title>{escape(m.name)}</title></line>'
            )
        y += ROW_H
        for track in lane.tracks:
            out.append(
                f'<g class="track"><text x="4" y="{y + 13}" font-size="11" font-family="monospace">'
                f"{track.rank} {escape(track.hostname)}</text>"
            )
            for s in track.spans:
                top, h = (y + 3, ROW_H - 6) if s.depth == 0 else (y + ROW_H // 2, ROW_H // 2 - 3)
                colour = PHASE_COLOUR.get(s.name, "#999999") if s.depth == 0 else STEP_COLOUR
                out.append(
                    f'<rect x="{x(s.start)}" y="{top}" width="{max(x(s.end) - x(s.start), 1)}" height="{h}" '
                    f'fill="{colour}"><title>{escape(s.name)}: {s.end - s.start:.3f} s</title></rect>'
                )
            for m in track.marks:
                if m.kind not in MARK_COLOUR:
                    continue
                mx = x(m.at)
                out.append(
                    f'<path d="M{mx - 4} {y + 1} L{mx + 4} {y + 1} L{mx} {y + 8} Z" fill="{MARK_COLOUR[m.kind]}">'
                    f"<title>{escape(m.name)}</title></path>"
                )
            out.append("</g>")
            y += ROW_H
    legend = " ".join(
        f'<tspan fill="{c}">■</tspan> {p}'
        for p, c in PHASE_COLOUR.items()
        if p in ("created", "started", "initializing", "running")
    )
    out.append(
        f'<text x="4" y="{height - 4}" font-size="11" font-family="sans-serif">{legend} '
        f'<tspan fill="{STEP_COLOUR}">■</tspan> probe steps  ▼ exit, fault (red)</text>'
    )
    out.append("</svg>")
    return "\n".join(out)


def _pods_table(attempt: Attempt, logs: Logs, final: bool) -> str:
    head = "".join(
        f"<th>{h}</th>" for h in ("pod", "rank", "ip", "phase", "exit", "reason", "init s", "total s", "checks", "log")
    )
    rows = []
    for run in attempt.pods:
        c = run.cells()
        failed = [name for name, check in (run.result or {}).get("checks", {}).items() if not check["ok"]]
        lines = logs.get(id(run), [])
        shown = lines[-LOG_LINES:]
        text = "\n".join(
            f'<span class="err">{escape(line)}</span>' if stream == "stderr" else escape(line) for stream, line in shown
        )
        more = f" (the last {len(shown)})" if len(lines) > len(shown) else ""
        log = f"<details><summary>{len(lines)} lines{more}</summary><pre>{text}</pre></details>" if lines else "none"
        rows.append(
            f'<tr class="pod" data-rank="{run.pod.global_index}">'
            f'<td class="mono" title="{escape(run.pod.name)}">{escape(run.pod.hostname)}</td>'
            f'<td class="num">{c["rank"]}</td><td class="mono">{escape(c["ip"])}</td>'
            f'<td class="{escape(run.phase)}">{escape(run.phase)}</td><td class="mono">{escape(c["exit"])}</td>'
            f'<td class="reason">{escape(run.reason or "")}</td>'
            f'<td class="num">{c["init"]}</td><td class="num">{c["total"]}</td>'
            f"<td>{escape(c['checks'])}{escape(' failed: ' + ', '.join(failed)) if failed else ''}</td>"
            f"<td>{log}</td></tr>"
        )
    cls = "pods final" if final else "pods"
    return (
        f'<table class="{cls}" data-attempt="{attempt.index}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _workload(result: WorkloadResult, lanes: Sequence[Lane], logs: Logs, index: int) -> str:
    w = result.workload
    parts = [
        f'<section class="workload" id="workload-{index}">',
        f"<h2>{escape(result.source)}: {escape(w.id)}: "
        f'<span class="{escape(result.verdict.replace(" ", "-"))}">{escape(result.verdict)}</span>'
        f" ({result.restarts} restart{'s' if result.restarts != 1 else ''})</h2>",
    ]
    if result.reason:
        parts.append(f'<p class="reason">{escape(result.reason)}</p>')
    if result.waited_note is not None:  # room on this machine, or Kueue's quota
        parts.append(f'<p class="reason">{escape(result.waited_note)}</p>')
    if result.held is not None and result.held.pending is None:  # what Kueue's provisioning checks held it for
        parts.append(f'<p class="reason">held: {escape(result.held.note)}</p>')
    if w.problems:
        parts.append("<ul>" + "".join(f'<li class="reason">{escape(str(p))}</li>' for p in w.problems) + "</ul>")
    if w.pods:
        parts += [
            "<h3>Topology</h3>",
            f'<div class="picture">{svg([_layout(result)], f"topology of {w.id}").strip()}</div>',
        ]
    if lanes:
        parts += ["<h3>Timeline</h3>", f'<div class="picture">{_timeline_svg(lanes)}</div>']
    if result.attempts:
        *earlier, last = result.attempts
        parts += [f"<h3>Pods, attempt {last.index}</h3>", _pods_table(last, logs, final=True)]
        for attempt in reversed(earlier):
            verdict = "ok" if attempt.ok else f"failed: {attempt.reason}"
            parts.append(
                f"<details><summary>attempt {attempt.index}: {escape(verdict)}</summary>"
                f"{_pods_table(attempt, logs, final=False)}</details>"
            )
    parts.append("</section>")
    return "\n".join(parts)


def html_report(report: Report, faults: Faults, logs: Logs) -> str:
    """The page for a finished simulation; `logs`: each pod run's output lines (stream, line), by id(PodRun)."""
    tl = timeline(report, faults)
    outcome = "passed" if report.ok else "undetermined" if report.undetermined else "failed"
    n = len(report.results)
    title = f"jaxinfra simulation {outcome}: {n} workload{'s' if n != 1 else ''}"
    body = [
        f'<header class="{"ok" if report.ok else outcome}"><h1>{escape(title)}</h1>',
        f"<p>{n} workload{'s' if n != 1 else ''} in {report.seconds:.2f} s: "
        + ", ".join(f"{escape(r.workload.id)} {escape(r.verdict)}" for r in report.results)
        + "</p></header>",
    ]
    if report.problems:
        body.append(
            "<h2>Problems</h2><ul>"
            + "".join(f'<li class="reason">{escape(str(p))}</li>' for p in report.problems)
            + "</ul>"
        )
    body += [
        _workload(r, [lane for lane in tl.lanes if lane.workload == r.workload.id], logs, i)
        for i, r in enumerate(report.results)
    ]
    body.append(
        "<footer><p>Written by <code>jaxinfra simulate --html</code>. The same timeline, for Perfetto or "
        "chrome://tracing: <code>jaxinfra simulate --trace FILE.json</code>.</p></footer>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
        f"<title>{escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
