"""JobSet failurePolicy rules as its controller applies them (kubernetes-sigs/jobset pkg/controllers/failure_policy.go),
on the failed child Job's reason (kubernetes pkg/controller/job: PodFailurePolicy where a FailJob rule matched, else
BackoffLimitExceeded). Manifests in the style of JobSet's fail-fast docs example and of xpk's JobSets (a FailJob rule
for exit codes outside its restart list, then FailJobSet on PodFailurePolicy), run with --run-command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.jobsets import jobset, only_workload, rjob

pytestmark = pytest.mark.simulator

XPK_RESTART_CODES = [42]  # the exit codes an xpk workload restarts on; any other fails the Job at once


def run(tmp_path: Path, failure_policy: dict[str, Any], *rjobs: dict[str, Any]) -> dict[str, Any]:
    return only_workload(tmp_path, jobset("fp", *rjobs, failurePolicy=failure_policy))


FAIL_FAST = {"maxRestarts": 3, "rules": [{"action": "FailJobSet", "targetReplicatedJobs": ["leader"]}]}


def test_a_failed_leader_fails_the_jobset_at_once(tmp_path: Path) -> None:
    workload = run(tmp_path, FAIL_FAST, rjob("leader", "exit 1"), rjob("workers", "sleep 1"))
    assert (workload["verdict"], workload["restarts"]) == ("failed", 0)
    assert "failurePolicyRule0: FailJobSet" in workload["reason"] and "BackoffLimitExceeded" in workload["reason"]


def test_a_failed_worker_restarts_it_up_to_max_restarts(tmp_path: Path) -> None:
    """No rule matches a worker's failure: the default action, RestartJobSet, counted towards maxRestarts."""
    workload = run(tmp_path, FAIL_FAST, rjob("leader", "sleep 1"), rjob("workers", "exit 1"))
    assert (workload["verdict"], workload["restarts"]) == ("failed", 3)
    assert "failurePolicy.maxRestarts (3) exhausted" in workload["reason"]


XPK = {"maxRestarts": 3, "rules": [{"action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}]}
XPK_POD_RULES = [{"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": XPK_RESTART_CODES}}]


def test_an_xpk_workload_whose_program_exits_outside_its_restart_codes_fails_at_once(tmp_path: Path) -> None:
    workload = run(tmp_path, XPK, rjob("slice", "exit 2", pod_rules=XPK_POD_RULES))
    assert (workload["verdict"], workload["restarts"]) == ("failed", 0)
    assert "FailJobSet on the failed Job's PodFailurePolicy" in workload["reason"]
    assert "failed with exit code 2 matching FailJob rule at index 0" in workload["reason"]


def test_an_xpk_workload_restarts_on_its_restart_codes(tmp_path: Path) -> None:
    workload = run(tmp_path, XPK, rjob("slice", "exit 42", pod_rules=XPK_POD_RULES))
    assert (workload["verdict"], workload["restarts"]) == ("failed", 3)
    assert "failurePolicy.maxRestarts (3) exhausted" in workload["reason"]


def test_restarts_that_ignore_max_restarts_end_as_a_loop_without_limit(tmp_path: Path) -> None:
    policy = {"maxRestarts": 0, "rules": [{"action": "RestartJobSetAndIgnoreMaxRestarts"}]}
    workload = run(tmp_path, policy, rjob("slice", "exit 1"))
    assert workload["verdict"] == "failed" and workload["restarts"] >= 2
    assert "crash loop" in workload["reason"] and "recreate it forever" in workload["reason"]
    assert "maxRestarts" not in workload["reason"]


def test_a_child_jobs_backoff_limit_recreates_its_pods_before_the_jobset_restarts(tmp_path: Path) -> None:
    """backoffLimit 1: the Job controller recreates the failed pod once (its peer runs on); the second failure fails
    the Job, and the JobSet restarts (new Jobs, whose count starts anew) up to maxRestarts."""
    workers = rjob("workers", 'test "$JOB_COMPLETION_INDEX" = 0 && sleep 1 || exit 1', pods=2, backoffLimit=1)
    workload = run(tmp_path, {"maxRestarts": 1}, workers)
    assert (workload["verdict"], workload["restarts"]) == ("failed", 3)
    assert [a["then"] for a in workload["attempts"]] == ["JobSet restart", None]
    for attempt in workload["attempts"]:  # index 1 recreated once, under a new name; index 0 never stopped for it
        [replaced] = attempt["replaced"]
        [peer, last] = attempt["pods"]
        assert replaced["hostname"] == last["hostname"] == "fp-workers-0-1" and replaced["name"] != last["name"]
        assert peer["reason"] == "ended with its group" and "started" in peer["timings"]
    assert "backoffLimit (1) exceeded: 2 pod failures; failurePolicy.maxRestarts (1) exhausted" in workload["reason"]


def test_the_webhooks_on_failure_default_restarts_the_container_in_place(tmp_path: Path) -> None:
    """No restartPolicy, no backoffLimit (the JobSet webhook's OnFailure, the Job API's 6): a container that fails
    once restarts in place, its emptyDir kept, and the JobSet succeeds without a restart of its own."""
    command = "if [ -e /state/failed-once ]; then exit 0; fi; touch /state/failed-once; exit 1"
    workers = rjob("workers", command, restartPolicy=None, backoffLimit=None)
    pod = workers["template"]["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "state", "emptyDir": {}}]
    pod["containers"][0]["volumeMounts"] = [{"name": "state", "mountPath": "/state"}]
    workload = run(tmp_path, {"maxRestarts": 0}, workers)
    assert (workload["verdict"], workload["restarts"]) == ("succeeded", 1)
    assert [a["then"] for a in workload["attempts"]] == ["restarted in place", None]


def test_a_child_job_past_its_active_deadline_fails_with_deadline_exceeded(tmp_path: Path) -> None:
    """activeDeadlineSeconds takes precedence over backoffLimit (the Job docs' "Job termination and cleanup"): its
    pods are deleted, the Job fails with reason DeadlineExceeded, which a JobSet rule can match."""
    policy = {"maxRestarts": 3, "rules": [{"action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]}]}
    workload = run(tmp_path, policy, rjob("workers", "sleep 30", pods=2, backoffLimit=5, activeDeadlineSeconds=1))
    assert (workload["verdict"], workload["restarts"]) == ("failed", 0)
    assert (
        "FailJobSet on the failed Job's DeadlineExceeded (Job was active longer than specified deadline)"
        in (workload["reason"])
    )
    pods = workload["attempts"][0]["pods"]
    assert [p["reason"].split(":")[0] for p in pods] == ["DeadlineExceeded"] * 2
    assert workload["attempts"][0]["seconds"] < 10


def test_a_job_that_ends_within_its_active_deadline_succeeds(tmp_path: Path) -> None:
    workload = run(tmp_path, {"maxRestarts": 0}, rjob("workers", "true", pods=2, activeDeadlineSeconds=30))
    assert workload["verdict"] == "succeeded"
