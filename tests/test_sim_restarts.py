"""The workload controllers' failure rules, as the simulator applies them after a failed attempt."""

from __future__ import annotations

from typing import Any

import pytest

from jaxinfra.simulate import model
from jaxinfra.simulate.engine import restart_decision
from jaxinfra.simulate.runner import ENDED_WITH_GROUP, Attempt, PodRun

pytestmark = pytest.mark.unit


def pod(index: int) -> model.Pod:
    return model.Pod(
        workload="Job/default/j",
        namespace="default",
        name=f"j-{index}",
        hostname=f"j-{index}",
        subdomain="j",
        ip=f"127.9.0.{index + 2}",
        job_index=0,
        completion_index=index,
        global_index=index,
        labels={},
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


def failed_attempt(n: int, first: int = 0, exit_code: int | None = 1, signal: str | None = None) -> Attempt:
    runs = []
    for i in range(n):
        r = PodRun(pod(i), phase="failed")
        if i == first:
            r.exit_code, r.signal, r.reason = exit_code, signal, "exit code 1" if exit_code else "killed by SIGKILL"
        else:
            r.signal, r.reason = "SIGKILL", ENDED_WITH_GROUP
        runs.append(r)
    return Attempt(len(runs), runs)


def decide(policy: model.RestartPolicy, attempts: list[Attempt], failures: dict[int, int] | None = None) -> Any:
    return restart_decision(policy, attempts, {} if failures is None else failures)


def test_jobset_restarts_the_group_until_max_restarts() -> None:
    policy = model.RestartPolicy("jobset", max_restarts=2)
    assert decide(policy, [failed_attempt(4)]) is None
    assert decide(policy, [failed_attempt(4)] * 2) is None
    assert "maxRestarts (2) exhausted" in decide(policy, [failed_attempt(4)] * 3)


def test_job_counts_a_failure_per_pod_of_the_group() -> None:
    policy = model.RestartPolicy("job", backoff_limit=4)  # max_restarts 2 x 2 pods, as jaxinfra renders it
    failures: dict[int, int] = {}
    assert decide(policy, [failed_attempt(2)], failures) is None and failures == {0: 1, 1: 1}
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
    failures: dict[int, int] = {}
    # the first pod's failure is ignored, the others' (which crash once the coordinator notices) count
    assert "backoffLimit (0) exceeded" in decide(ignore_not_zero, [failed_attempt(2, first=1)], failures)
    assert failures == {0: 1}


def test_backoff_limit_per_index() -> None:
    policy = model.RestartPolicy("job", backoff_limit=None, backoff_limit_per_index=1)
    failures: dict[int, int] = {}
    assert decide(policy, [failed_attempt(2)], failures) is None
    assert "backoffLimitPerIndex (1) exceeded" in decide(policy, [failed_attempt(2)] * 2, failures)
