"""A workload still going at --timeout is not finished, not failed: on a cluster its controller would let it run
(a JobSet restarts only when a child Job fails, jobset pkg/controllers/jobset_controller.go; a Job fails only past
its limits, kubernetes pkg/controller/job/job_controller.go), so neither "maxRestarts exhausted" nor a backoffLimit
is the verdict. Manifests in the style of JobSet's and the Kubernetes docs' examples, run with --run-command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.jobsets import jobset, rjob, run

pytestmark = pytest.mark.simulator


def slow(command: str, max_restarts: int) -> dict[str, Any]:
    """Two workers running `command`, restarted up to `max_restarts` times."""
    return jobset("slow", rjob("workers", command, pods=2), failurePolicy={"maxRestarts": max_restarts})


def test_a_jobset_still_running_at_the_timeout_is_not_finished(tmp_path: Path) -> None:
    rc, report, out = run(tmp_path, slow("sleep 30", max_restarts=0), timeout="2")
    [workload] = report["workloads"]
    assert (rc, workload["verdict"], workload["restarts"]) == (1, "not finished", 0), out
    assert "on a cluster it would keep running" in workload["reason"]
    assert "maxRestarts" not in workload["reason"]
    assert "simulation failed: " in out.splitlines()[-1]


def test_a_jobset_restarting_at_the_timeout_is_not_finished(tmp_path: Path) -> None:
    """Its pods fail at once and it has restarts to spare: wherever --timeout falls (in an attempt or between two),
    the JobSet would go on restarting."""
    rc, report, out = run(tmp_path, slow("exit 3", max_restarts=1000), timeout="3")
    [workload] = report["workloads"]
    assert (rc, workload["verdict"]) == (1, "not finished"), out
    assert workload["restarts"] >= 1 and "on a cluster it would keep running" in workload["reason"]


def test_a_jobset_that_fails_within_the_timeout_is_still_failed(tmp_path: Path) -> None:
    rc, report, out = run(tmp_path, slow("exit 3", max_restarts=0), timeout="60")
    [workload] = report["workloads"]
    assert (rc, workload["verdict"]) == (1, "failed"), out
    assert "failurePolicy.maxRestarts (0) exhausted" in workload["reason"]


def test_a_suspended_jobset_is_not_finished_and_starts_no_pod(tmp_path: Path) -> None:
    """spec.suspend: true outside Kueue: on a cluster the JobSet waits, creating no Job, until something resumes it."""
    manifest = slow("true", max_restarts=0)
    manifest["spec"]["suspend"] = True
    rc, report, out = run(tmp_path, manifest)
    [workload] = report["workloads"]
    assert (rc, workload["verdict"], workload["attempts"]) == (1, "not finished", []), out
    assert workload["reason"].startswith("spec.suspend is true: suspended") and "would wait" in workload["reason"]
    manifest["spec"]["suspend"] = False
    rc, report, out = run(tmp_path, manifest)
    assert (rc, report["workloads"][0]["verdict"]) == (0, "succeeded"), out
