"""JobSet successPolicy as its controller applies it (kubernetes-sigs/jobset pkg/controllers/success_policy.go:
jobMatchesSuccessPolicy, numJobsExpectedToSucceed; jobset_controller.go Reconcile: a finished JobSet deletes its
active Jobs). Manifests in the style of JobSet's docs example (a leader that serves until the workers are done),
run with --run-command; each verdict is the one a cluster gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import jobsets
from tests.support.jobsets import rjob

pytestmark = pytest.mark.simulator

SERVES = "trap 'exit 0' TERM; while true; do sleep 0.1; done"  # a leader that serves until it is deleted


def run(
    tmp_path: Path, policy: dict[str, Any] | None, *rjobs: dict[str, Any], timeout: str = "60"
) -> tuple[int, dict[str, Any], str]:
    spec = {} if policy is None else {"successPolicy": policy}
    return jobsets.run(tmp_path, jobsets.jobset("lw", *rjobs, **spec), timeout=timeout)


def test_all_of_the_workers_completes_the_jobset_and_deletes_the_leader(tmp_path: Path) -> None:
    rc, report, out = run(
        tmp_path,
        {"operator": "All", "targetReplicatedJobs": ["workers"]},
        rjob("leader", SERVES),
        rjob("workers", "sleep 0.5", pods=2),
    )
    [workload] = report["workloads"]
    assert (rc, workload["verdict"], workload["restarts"]) == (0, "succeeded", 0), out
    leader, *workers = workload["attempts"][0]["pods"]
    assert [w["phase"] for w in workers] == ["succeeded", "succeeded"]
    assert leader["phase"] == "deleted" and leader["exit_code"] == 0  # its SIGTERM handler ran
    assert "completed (successPolicy All of workers)" in leader["reason"]


def test_without_a_success_policy_the_leader_keeps_the_jobset_running(tmp_path: Path) -> None:
    """The webhook's default is All of every replicatedJob: a leader that never ends keeps it from completing."""
    rc, report, out = run(tmp_path, None, rjob("leader", SERVES), rjob("workers", "true", pods=2), timeout="3")
    [workload] = report["workloads"]
    assert (rc, workload["verdict"]) == (1, "not finished"), out


def test_any_one_completed_job_completes_the_jobset(tmp_path: Path) -> None:
    rc, report, out = run(tmp_path, {"operator": "Any"}, rjob("fast", "true"), rjob("slow", SERVES, replicas=2))
    [workload] = report["workloads"]
    assert (rc, workload["verdict"]) == (0, "succeeded"), out
    phases = [p["phase"] for p in workload["attempts"][0]["pods"]]
    assert phases == ["succeeded", "deleted", "deleted"]


def test_a_failed_worker_still_fails_the_jobset(tmp_path: Path) -> None:
    rc, report, out = run(
        tmp_path,
        {"operator": "All", "targetReplicatedJobs": ["workers"]},
        rjob("leader", SERVES),
        rjob("workers", "exit 3", pods=2),
    )
    [workload] = report["workloads"]
    assert (rc, workload["verdict"]) == (1, "failed"), out
    assert "failurePolicy.maxRestarts (0) exhausted" in workload["reason"]
