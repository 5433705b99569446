"""Will the job survive a preemption and carry on from its last checkpoint? The example training program
(jaxinfra/templates/train) on a hand-written JobSet whose pods share a PersistentVolumeClaim, preempted
mid-training, against an uninterrupted run's loss; and a claim kept across simulations. (A killed host,
on a stack jaxinfra renders: tests/test_checkpoints.py.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import MANIFESTS, ROOT, TRAIN

pytestmark = pytest.mark.simulator

MANIFEST = MANIFESTS / "jobset_checkpoint_rehearsal.yaml"
STEPS = 100
RANK0 = "rehearsal-workers-0-0"
LINE = re.compile(rf"^\[{RANK0}\] (.*)$", re.M)


@pytest.fixture(scope="module")
def reference() -> float:
    """The loss at the last step of an uninterrupted run (1 process, the same 2 devices: the same losses)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "TRAIN_", "KUBERNETES_"))}
    done = subprocess.run(
        [sys.executable, "-m", "train"],
        cwd=TRAIN,
        capture_output=True,
        text=True,
        env={**env, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": "2", "TRAIN_STEPS": str(STEPS)},
        timeout=120,
        check=True,
    )
    return float(re.search(rf"^step {STEPS} loss (\S+)$", done.stdout, re.M).group(1))


def rehearse(tmp: Path, *args: str, manifest: Path = MANIFEST) -> tuple[int, dict, list[list[str]]]:
    """`jaxinfra simulate --run-command` with faults: status, JSON report, and rank 0's log lines per attempt."""
    report = tmp / f"report-{time.monotonic_ns()}.json"
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "simulate", str(manifest), "--run-command", "--json", str(report), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=240,
    )  # the example's images table
    attempts = re.split(r"^JobSet/default/rehearsal attempt \d+: .*$", r.stdout, flags=re.M)
    return r.returncode, json.loads(report.read_text()), [LINE.findall(chunk) for chunk in attempts[:-1]]


def final_loss(lines: list[str]) -> float:
    return float(next(line.split()[-1] for line in lines if line.startswith(f"step {STEPS} loss ")))


def test_a_preempted_host_saves_where_it_was_and_the_group_resumes_exactly_there(
    tmp_path: Path, reference: float
) -> None:
    rc, report, attempts = rehearse(
        tmp_path, "--preempt", "1@12", "--grace-cap", "15", "--trace", str(tmp_path / "trace.json")
    )
    assert rc == 0, attempts
    [w] = report["workloads"]
    assert (w["verdict"], w["restarts"]) == ("succeeded", 1)
    preempted = w["attempts"][0]["pods"][1]
    assert preempted["reason"].startswith("preempted: SIGTERM at ") and "exited 143" in preempted["reason"]
    assert w["attempts"][0]["reason"].startswith("rehearsal-workers-0-1: preempted")
    within = float(re.search(r"exited 143 (\S+) s later", preempted["reason"]).group(1))
    assert within < 15, "it exits within its grace period"
    assert "(grace period 15 s, capped by --grace-cap from the pod's 30 s)" in preempted["reason"]
    [saved] = [
        int(m.group(1))
        for line in attempts[0]
        if (m := re.fullmatch(r"preempted at step (\d+): checkpoint saved", line))
    ]
    assert f"resumed from step {saved}" in attempts[1]
    assert final_loss(attempts[1]) == pytest.approx(reference, rel=1e-5)
    # the trace marks the SIGTERM on the preempted pod, in attempt 0, before the pod's exit
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    [mark] = [e for e in events if e["ph"] == "i" and e["name"].startswith("fault: preempt")]
    assert (mark["pid"], names[mark["pid"], mark["tid"]]) == (1, "rank 1 rehearsal-workers-0-1")
    [exit_mark] = [
        e for e in events if e["ph"] == "i" and e["cat"] == "exit" and (e["pid"], e["tid"]) == (1, mark["tid"])
    ]
    assert mark["args"] == {"asked_after_start_s": 12.0} and mark["ts"] < exit_mark["ts"]


def test_a_volume_outlives_the_simulation(tmp_path: Path) -> None:
    """Two simulations with the same --volume: the second starts where the first ended."""
    fast = tmp_path / "fast.yaml"
    fast.write_text(
        MANIFEST.read_text().replace('TRAIN_MIN_STEP_SECONDS, value: "0.15"', 'TRAIN_MIN_STEP_SECONDS, value: "0"')
    )
    folder = tmp_path / "kept"
    rc, _, first = rehearse(tmp_path, "--volume", f"checkpoints={folder}", manifest=fast)
    assert rc == 0 and f"finished at step {STEPS}" in " ".join(first[0])
    assert (folder / str(STEPS)).is_dir(), sorted(p.name for p in folder.iterdir())
    rc, _, second = rehearse(tmp_path, "--volume", f"checkpoints={folder}", manifest=fast)
    assert rc == 0 and f"resumed from step {STEPS}" in second[0]
