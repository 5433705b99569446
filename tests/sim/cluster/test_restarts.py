"""The workload controllers' failure rules, as the simulator applies them after a failed attempt."""

from __future__ import annotations

from typing import Any

import pytest

from jaxinfra.upstream import JOBSET_RJOB
from jaxinfra_sim.cluster.attempts import restart_decision
from jaxinfra_sim.controllers import job_failure
from jaxinfra_sim.controllers.job_failure import Failures
from jaxinfra_sim.core import model
from jaxinfra_sim.core.podrun import ENDED_WITH_GROUP, Attempt, PodRun

pytestmark = pytest.mark.unit


def pod(index: int, rjob: str | None = None, job_index: int = 0) -> model.Pod:
    return model.Pod(
        workload="Job/default/j",
        namespace="default",
        name=f"j-{index}",
        hostname=f"j-{index}",
        subdomain="j",
        ip=f"127.9.0.{index + 2}",
        job_index=job_index,
        completion_index=index,
        global_index=index,
        labels={} if rjob is None else {JOBSET_RJOB: rjob},
        annotations={},
        container="c",
        image="i",
        command=("python",),
        args=(),
        env={},
        working_dir=None,
        devices=1,
        accelerator="cpu",
    )


def failed_attempt(
    n: int, first: int = 0, exit_code: int | None = 1, signal: str | None = None, rjob: str | None = None
) -> Attempt:
    runs = []
    for i in range(n):
        r = PodRun(pod(i, rjob), phase="failed")
        if i == first:
            r.exit_code, r.signal, r.reason = exit_code, signal, "exit code 1" if exit_code else "killed by SIGKILL"
        else:
            r.signal, r.reason = "SIGKILL", ENDED_WITH_GROUP
        runs.append(r)
    return Attempt(len(runs), runs)


def decide(policy: model.RestartPolicy, attempts: list[Attempt], failures: Failures | None = None) -> Any:
    return restart_decision(policy, attempts, {} if failures is None else failures)


def test_jobset_restarts_the_group_until_max_restarts() -> None:
    policy = model.RestartPolicy("jobset", max_restarts=2)
    attempts: list[Attempt] = []
    for _ in range(2):
        attempts.append(failed_attempt(4))
        assert decide(policy, attempts) is None and attempts[-1].restart == model.Restart(jobset=True, counted=True)
    attempts.append(failed_attempt(4))
    assert "maxRestarts (2) exhausted" in decide(policy, attempts)


def test_job_counts_a_failure_per_pod_of_the_group() -> None:
    policy = model.RestartPolicy("job", backoff_limit=4)  # max_restarts 2 x 2 pods, as jaxinfra renders it
    failures: Failures = {}
    assert decide(policy, [failed_attempt(2)], failures) is None and failures == {("", 0): {0: 1, 1: 1}}
    assert decide(policy, [failed_attempt(2)] * 2, failures) is None
    assert "backoffLimit (4) exceeded: 6 pod failures" in decide(policy, [failed_attempt(2)] * 3, failures)


def test_pod_failure_policy_fail_job_and_ignore() -> None:
    fail_on_42 = model.RestartPolicy(
        "job",
        backoff_limit=10,
        pod_failure_rules=({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},),
    )
    assert "FailJob" in decide(fail_on_42, [failed_attempt(2, exit_code=42)])
    assert decide(fail_on_42, [failed_attempt(2, exit_code=1)]) is None
    ignore_not_zero = model.RestartPolicy(
        "job",
        backoff_limit=0,
        pod_failure_rules=({"action": "Ignore", "onExitCodes": {"operator": "NotIn", "values": [0]}},),
    )
    failures: Failures = {}
    # the first pod's failure is ignored, the others' (which crash once the coordinator notices) count
    assert "backoffLimit (0) exceeded" in decide(ignore_not_zero, [failed_attempt(2, first=1)], failures)
    assert failures == {("", 0): {0: 1}}


def test_backoff_limit_per_index() -> None:
    policy = model.RestartPolicy("job", backoff_limit=None, backoff_limit_per_index=1)
    failures: Failures = {}
    assert decide(policy, [failed_attempt(2)], failures) is None
    assert "backoffLimitPerIndex (1) exceeded" in decide(policy, [failed_attempt(2)] * 2, failures)


def test_each_index_is_held_to_its_own_failure_count() -> None:
    """backoffLimitPerIndex compares each index's own count (its pods' job-index-failure-count annotation, kubernetes
    pkg/controller/job/indexed_job_utils.go getIndexFailureCount) with the limit, never the largest count of any
    index: with index 1 already failed for good, index 3's first failure is within the limit and its second is not."""
    policy = model.RestartPolicy("job", backoff_limit=None, backoff_limit_per_index=1)
    failures = {1: 2}
    index_3 = PodRun(pod(3), phase="failed", reason="exit code 1", exit_code=1)
    assert job_failure.job_failed(policy, [index_3], index_3, failures) is None  # within its limit: recreated
    failed = job_failure.job_failed(policy, [index_3], index_3, failures)
    assert failed is not None and failed.reason == "FailedIndexes" and failures == {1: 2, 3: 2}
    assert "(failedIndexes 3)" in failed.summary


def test_failed_indexes_are_written_as_the_job_status_writes_them() -> None:
    assert job_failure.index_intervals([9, 1, 3, 5, 7]) == "1,3,5,7,9"
    assert job_failure.index_intervals([0, 1, 4, 5, 6, 8]) == "0,1,4-6,8"
    assert job_failure.index_intervals([]) == ""


def test_a_job_restarting_in_place_fails_when_its_restarts_reach_the_backoff_limit() -> None:
    """pastBackoffLimitOnFailure: the containers' restartCounts summed reach backoffLimit (`>=`; `> 0` for 0), one
    failure sooner than pods that fail and are recreated (`failed > backoffLimit`)."""
    on_failure = model.RestartPolicy("job", backoff_limit=3, in_place=True)
    never = model.RestartPolicy("job", backoff_limit=3)
    failures: Failures = {}
    assert decide(on_failure, [failed_attempt(2)], failures) is None
    assert "backoffLimit (3) exceeded: 4 pod failures" in decide(on_failure, [failed_attempt(2)] * 2, failures)
    failures = {}
    assert decide(never, [failed_attempt(3)], failures) is None
    assert "backoffLimit (3) exceeded: 6 pod failures" in decide(never, [failed_attempt(3)] * 2, failures)
    assert "backoffLimit (0) exceeded" in decide(
        model.RestartPolicy("job", backoff_limit=0, in_place=True), [failed_attempt(1)]
    )


def test_a_jobset_child_job_within_its_backoff_limit_retries_its_pods_without_a_jobset_restart() -> None:
    """A child Job's backoffLimit (default 6) comes first: its pods start again (in place under OnFailure, the
    JobSet webhook's default) and only a Job past its limit makes the JobSet restart, with new Jobs counting anew."""
    workers = model.RestartPolicy("job", backoff_limit=6, in_place=True)
    policy = model.RestartPolicy("jobset", max_restarts=1, child_jobs=(("workers", workers),))
    attempts = [failed_attempt(2, rjob="workers")]
    failures: Failures = {}
    assert decide(policy, attempts, failures) is None and failures == {("workers", 0): {0: 1, 1: 1}}
    assert attempts[-1].restart == model.Restart(in_place=True)
    attempts += [failed_attempt(2, rjob="workers")]
    assert decide(policy, attempts, failures) is None and attempts[-1].restart == model.Restart(in_place=True)
    attempts += [failed_attempt(2, rjob="workers")]  # 6 restarts: the Job fails, the JobSet restarts (counted)
    assert decide(policy, attempts, failures) is None and failures == {}
    assert attempts[-1].restart == model.Restart(jobset=True, counted=True)
    for _ in range(3):
        attempts += [failed_attempt(2, rjob="workers")]
        why = decide(policy, attempts, failures)
    assert why == "backoffLimit (6) exceeded: 6 pod failures; failurePolicy.maxRestarts (1) exhausted"
    assert [a.restart for a in attempts[-3:-1]] == [model.Restart(in_place=True)] * 2


def test_a_jobset_rule_matches_the_reason_of_the_child_job_that_failed() -> None:
    """onJobFailureReasons sees BackoffLimitExceeded only once the child Job is past its limit."""
    rules = ({"name": "fail-on-backoff", "action": "FailJobSet", "onJobFailureReasons": ["BackoffLimitExceeded"]},)
    policy = model.RestartPolicy(
        "jobset",
        max_restarts=5,
        jobset_rules=rules,
        child_jobs=(("workers", model.RestartPolicy("job", backoff_limit=1)),),
    )
    attempts = [failed_attempt(1, rjob="workers")]
    failures: Failures = {}
    assert decide(policy, attempts, failures) is None and attempts[-1].restart == model.Restart()
    attempts += [failed_attempt(1, rjob="workers")]
    assert decide(policy, attempts, failures) == (
        "failurePolicy rule fail-on-backoff: FailJobSet on the failed Job's BackoffLimitExceeded "
        "(Job has reached the specified backoff limit)"
    )


def test_a_job_past_its_deadline_fails_whatever_its_backoff_limit() -> None:
    attempt = failed_attempt(2)
    for r in attempt.pods:
        r.deadline_exceeded = True
    policy = model.RestartPolicy("job", backoff_limit=10, active_deadline=5)
    assert decide(policy, [attempt]) == (
        "activeDeadlineSeconds (5) exceeded (the Job's Failed condition: DeadlineExceeded, "
        "'Job was active longer than specified deadline')"
    )
