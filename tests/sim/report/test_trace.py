"""`jaxinfra simulate --trace`: the Trace Event Format file, loaded by a real offline consumer.

The consumer is speedscope (npm package pinned in package.json, installed by `npm ci`), run in
headless Chromium exactly as its own CLI runs it: `index.html#localProfilePath=<a script that
calls speedscope.loadFileFromBase64>`. Its importer (speedscope src/import/trace-event.ts) reads
`X`/`B`/`E` events into one profile per (pid, tid), named from the `process_name` and
`thread_name` metadata, and warns on the console about every event that does not nest. We then
export speedscope's own reading of the trace (Ctrl+S: its `.speedscope.json`), validate it
against the file format schema the package ships, and check the phases from that.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.support.headless import Browser
from tests.support.paths import ROOT

pytestmark = pytest.mark.browser

SPEEDSCOPE = ROOT / "node_modules" / "speedscope" / "dist" / "release"
PHASES = ["created", "started", "initializing", "running"]
STEPS = {
    "initializing": ["connect to coordinator", "device exchange"],
    "running": ["compile, collectives, training step", "shutdown barrier"],
}

#: Two CPU pods that may restart once: a killed pod shows as attempt 0, the recovery as attempt 1.
RESTARTING = """
from jaxinfra import CPU, Cluster, JaxJob, NodePool

cluster = Cluster(name="cpu-restart", node_pools=[NodePool("cpu", CPU(devices=2))],
                  jobs=[JaxJob("train", image="python:3.11-slim", command=["python", "-m", "train"], node_pool="cpu",
                               nodes=2, max_restarts=1, init_timeout_seconds=60)])
"""
KILLED = "train-node-0-1"


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """The JSON report and the trace of a simulation whose rank 1 is killed 50 ms after it starts."""
    tmp = tmp_path_factory.mktemp("trace")
    stack = tmp / "restart.py"
    stack.write_text(RESTARTING)
    trace, report = tmp / "trace.json", tmp / "report.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "jaxinfra",
            "simulate",
            str(stack),
            "--no-logs",
            "--kill",
            f"{KILLED}@0.05",
            "--trace",
            str(trace),
            "--json",
            str(report),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=180,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(report.read_text()), trace


def speedscope_reading(trace: Path, tmp: Path) -> tuple[dict[str, Any], list[str], list[str]]:
    """Speedscope's export of the trace, its console log, and its warnings and errors."""
    loader = tmp / "load.js"  # what speedscope's CLI (bin/cli.mjs) writes, and how it opens it
    loader.write_text(
        f"speedscope.loadFileFromBase64({json.dumps(trace.name)}, "
        f"{json.dumps(base64.b64encode(trace.read_bytes()).decode())})"
    )
    with Browser() as browser:
        page = browser.page()
        page.goto(f"file://{SPEEDSCOPE / 'index.html'}#localProfilePath={loader}")
        assert page.wait_for("document.title") == f"{trace.name} - speedscope"
        browser.call("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(tmp), eventsEnabled=True)
        for kind in ("keyDown", "keyUp"):  # Ctrl+S: speedscope saves what it imported
            page.call("Input.dispatchKeyEvent", type=kind, modifiers=2, key="s", code="KeyS", windowsVirtualKeyCode=83)
        done = browser.wait_event(
            lambda e: e.get("method") == "Browser.downloadProgress" and e["params"]["state"] == "completed"
        )
        exported = json.loads(Path(done["params"]["filePath"]).read_text())
        return (
            exported,
            page.console(("log",), browser_log=False),
            page.console(("warning", "error"), browser_log=False),
        )


def test_speedscope_reads_every_pod_of_every_attempt_with_its_phases_in_order(
    killed: tuple[dict[str, Any], Path], tmp_path: Path
) -> None:
    report, trace = killed
    exported, log, problems = speedscope_reading(trace, tmp_path)
    assert "Importing as Trace Event Format profile" in log
    assert problems == []  # every complete event nested: no "Tried to end ..." or "still open"
    jsonschema.validate(exported, json.loads((SPEEDSCOPE / "file-format-schema.json").read_text()))

    workload = report["workloads"][0]
    assert [a["ok"] for a in workload["attempts"]] == [False, True]  # the kill, then the restart
    frames = [f["name"] for f in exported["shared"]["frames"]]
    profiles = {p["name"]: p for p in exported["profiles"]}
    expected = {
        f"{workload['id']} attempt {a['index']} (pid {a['index'] + 1}), rank {pod['rank']} {pod['hostname']} "
        f"(tid {pod['rank'] + 1})": (a, pod)
        for a in workload["attempts"]
        for pod in a["pods"]
    }
    assert set(profiles) == set(expected)
    for name, (attempt, pod) in expected.items():
        opened, depth, top, inside = [], 0, None, {}
        for event in profiles[name]["events"]:
            frame = frames[event["frame"]]
            if event["type"] == "O":
                if depth == 0:
                    opened.append(top := frame)
                else:
                    inside.setdefault(top, []).append(frame)
                depth += 1
            else:
                depth -= 1
        assert depth == 0
        reached = [p for p in PHASES if p in {"created": 0.0, **pod["timings"]}]
        assert opened == reached, name  # the phases the pod went through, in order
        if attempt["ok"]:
            assert opened == PHASES
            assert inside == STEPS  # the probe's steps inside the phases they belong to
        # speedscope's profile spans the pod's life: from creation to its exit
        end = max(pod["timings"].values())
        assert abs(profiles[name]["endValue"] - end * 1e6) <= 1000, name


def test_the_trace_marks_the_kill_the_exits_and_the_verdict(killed: tuple[dict[str, Any], Path]) -> None:
    report, trace = killed
    events = json.loads(trace.read_text())["traceEvents"]
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] in ("process_name", "thread_name")
    }
    instants = [
        (names.get((e["pid"], e["tid"]), names.get((e["pid"], 0), "")), e["name"], e["s"], e["ts"])
        for e in events
        if e["ph"] == "i"
    ]
    kills = [i for i in instants if i[1].startswith("fault: kill")]
    assert [(who, scope) for who, _, scope, _ in kills] == [(f"rank 1 {KILLED}", "t")]  # in attempt 0 only
    first, second = report["workloads"][0]["attempts"]
    killed_pod = next(p for p in first["pods"] if p["hostname"] == KILLED)
    assert killed_pod["reason"] == "killed by SIGKILL"
    assert kills[0][3] == pytest.approx(killed_pod["timings"]["failed"] * 1e6, abs=500)  # where the pod died
    assert kills[0][3] <= first["seconds"] * 1e6 + 500
    verdicts = [i for i in instants if i[2] == "g"]
    assert [v[1] for v in verdicts] == [f"{report['workloads'][0]['id']}: succeeded"]
    # the clock starts where attempt 0 began; attempt 1 is placed where it began (after attempt 0 ended)
    assert second["began"] >= first["began"] + first["seconds"] - 0.001
    then = second["began"] - first["began"]
    assert verdicts[0][3] == pytest.approx((then + second["seconds"]) * 1e6, abs=2_000)  # the report rounds to ms
    exits = [i for i in instants if i[1].startswith(("succeeded:", "failed:"))]
    assert len(exits) == 4 and sum(i[1] == "failed: SIGKILL" for i in exits) == 2  # the killed pod and its peer
    attempt1 = [e["ts"] for e in events if e["ph"] == "X" and e["pid"] == 2]
    assert min(attempt1) == pytest.approx(then * 1e6, abs=1_000)
