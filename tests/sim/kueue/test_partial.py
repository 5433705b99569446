"""How many pods Kueue counts and admits for a batch Job (kubernetes-sigs/kueue v0.19.2): a Job's pod set is as many
pods as run at once, its parallelism or its completions where fewer (pkg/controller/jobs/job `podsCount`); with
`kueue.x-k8s.io/job-min-parallelism` Kueue may admit fewer (PartialAdmission, beta and on since v0.5): the most that
fit, found by bisection (pkg/scheduler/flavorassigner/podset_reducer.go), and the Job's parallelism set to it
(`RunWithPodSetsInfo`), so its completions run in waves. The manifests follow Kueue's docs' "Run a Job" and its
partial-admission sample job, written here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxinfra_sim.cluster.control_plane import emulate
from tests.sim.cluster.test_fidelity import kueue_queue
from tests.support.cli import simulate_cli
from tests.support.paths import ROOT

pytestmark = pytest.mark.simulator

QUEUES = kueue_queue(cpu="5", memory="9Gi")  # Kueue's single-cluster sample set-up, 5 cpu


def job(parallelism: int, completions: int, min_parallelism: int | None = None) -> str:
    """A Job of short pods, 1 cpu each, in the style of Kueue's sample jobs."""
    annotation = (
        f"\n  annotations: {{kueue.x-k8s.io/job-min-parallelism: '{min_parallelism}'}}" if min_parallelism else ""
    )
    return f"""---
apiVersion: batch/v1
kind: Job
metadata:
  name: waves
  namespace: default
  labels: {{kueue.x-k8s.io/queue-name: user-queue}}{annotation}
spec:
  parallelism: {parallelism}
  completions: {completions}
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: work
        image: python:3.11
        command: [python3, -c, "import time; time.sleep(0.3)"]
        resources: {{requests: {{cpu: 1, memory: 100Mi}}}}
"""


def queued(text: str) -> Any:
    [w] = emulate(list(yaml.safe_load_all(text)), check_all=False).workloads
    return w


def most_at_once(report: dict[str, Any]) -> int:
    """The most pods that ran at the same time, from each pod's start and end in the report."""
    spans = [
        (p["timings"]["started"], p["timings"]["succeeded"]) for p in report["workloads"][0]["attempts"][0]["pods"]
    ]
    return max(sum(start <= t < end for start, end in spans) for t, _ in spans)


def test_a_job_is_counted_as_the_pods_that_run_at_once() -> None:
    """12 completions, 3 at a time, on a 5-cpu queue: Kueue counts 3 pods and admits it."""
    w = queued(QUEUES + job(3, 12))
    assert w.problems == () and "cpu 3 of 5" in w.notes[0], (w.problems, w.notes)
    assert w.waves == ((tuple(range(12)), 3),)


def test_without_min_parallelism_a_job_larger_than_the_quota_stays_pending() -> None:
    [problem] = [p for p in queued(QUEUES + job(12, 12)).problems if "suspended" in p.message]
    assert "insufficient quota for cpu in flavor default-flavor" in problem.message
    assert "maximum capacity (5)" in problem.message


def test_with_min_parallelism_the_most_pods_that_fit_are_admitted_and_run_in_waves(tmp_path: Path) -> None:
    w = queued(QUEUES + job(12, 12, min_parallelism=4))
    assert w.queued is not None and w.queued.counts == (5,)
    assert "partially admitted: 5 of 12 pods at once" in w.notes[0], w.notes
    assert w.waves == ((tuple(range(12)), 5),)
    path = tmp_path / "waves.yaml"
    path.write_text(QUEUES + job(12, 12, min_parallelism=4))
    rc, report, out = simulate_cli(str(path), "--run-command", tmp=tmp_path)
    assert rc == 0 and report["workloads"][0]["verdict"] == "succeeded", out
    assert len(report["workloads"][0]["attempts"][0]["pods"]) == 12
    assert most_at_once(report) <= 5


def test_a_minimum_above_what_fits_stays_pending() -> None:
    w = queued(QUEUES + job(12, 12, min_parallelism=6))
    assert w.queued is not None and not w.queued.admitted and w.queued.counts is None
    assert any("maximum capacity (5)" in p.message for p in w.problems)


def test_the_search_admits_the_largest_count_that_fits() -> None:
    """Bisection over 0..delta as Go's sort.Search runs it: every minimum from 1 to 5 gives 5 of 9 pods."""
    objects_text = QUEUES + job(9, 9, min_parallelism=1)
    for minimum in range(1, 6):
        w = queued(objects_text.replace("job-min-parallelism: '1'", f"job-min-parallelism: '{minimum}'"))
        assert w.queued is not None and w.queued.counts == (5,), minimum


def test_partial_admission_is_searched_whichever_flavor_said_no_to_the_whole() -> None:
    """Kueue runs the pod-set reducer whenever the full assignment is not a Fit (pkg/scheduler/scheduler.go
    `getInitialAssignments`), here a first flavor the pods do not tolerate and a second one short of quota: kueue's
    job_controller_test "Should schedule jobs with partial admission" (5 pods of 2 cpu, min 1: parallelism 2)."""
    text = (ROOT / "tests/conformance/kueue/kueue-partial-admission.yaml").read_text()
    w = queued(text)
    assert w.queued is not None and w.queued.admitted and w.queued.counts == (2,), w.problems
    assert "on-demand: cpu 4 of 5" in w.notes[0], w.notes
