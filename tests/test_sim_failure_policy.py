"""JobSet failurePolicy rules as its controller applies them (kubernetes-sigs/jobset pkg/controllers/failure_policy.go),
on the failed child Job's reason (kubernetes pkg/controller/job: PodFailurePolicy where a FailJob rule matched, else
BackoffLimitExceeded). Manifests in the style of JobSet's fail-fast docs example and of xpk's JobSets (a FailJob rule
for exit codes outside its restart list, then FailJobSet on PodFailurePolicy), run with --run-command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jaxinfra.yamlio import dump
from tests.support.cli import simulate_cli

pytestmark = pytest.mark.simulator

XPK_RESTART_CODES = [42]  # the exit codes an xpk workload restarts on; any other fails the Job at once


def rjob(name: str, command: str, pod_rules: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    job: dict[str, Any] = {
        "parallelism": 1,
        "completions": 1,
        "backoffLimit": 0,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", command]}],
            }
        },
    }
    if pod_rules is not None:
        job["podFailurePolicy"] = {"rules": pod_rules}
    return {"name": name, "replicas": 1, "template": {"spec": job}}


def run(tmp_path: Path, failure_policy: dict[str, Any], *rjobs: dict[str, Any]) -> dict[str, Any]:
    spec = {"failurePolicy": failure_policy, "replicatedJobs": list(rjobs)}
    manifest = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "fp"}, "spec": spec}
    (tmp_path / "jobset.yaml").write_text(dump([manifest]))
    rc, report, out = simulate_cli(str(tmp_path / "jobset.yaml"), "--run-command", "--timeout", "60", tmp=tmp_path)
    [workload] = report["workloads"]
    assert rc == (0 if workload["verdict"] == "succeeded" else 1), out
    return workload


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
    workload = run(tmp_path, XPK, rjob("slice", "exit 2", XPK_POD_RULES))
    assert (workload["verdict"], workload["restarts"]) == ("failed", 0)
    assert "FailJobSet on the failed Job's PodFailurePolicy" in workload["reason"]
    assert "failed with exit code 2 matching FailJob rule at index 0" in workload["reason"]


def test_an_xpk_workload_restarts_on_its_restart_codes(tmp_path: Path) -> None:
    workload = run(tmp_path, XPK, rjob("slice", "exit 42", XPK_POD_RULES))
    assert (workload["verdict"], workload["restarts"]) == ("failed", 3)
    assert "failurePolicy.maxRestarts (3) exhausted" in workload["reason"]


def test_restarts_that_ignore_max_restarts_end_as_a_loop_without_limit(tmp_path: Path) -> None:
    policy = {"maxRestarts": 0, "rules": [{"action": "RestartJobSetAndIgnoreMaxRestarts"}]}
    workload = run(tmp_path, policy, rjob("slice", "exit 1"))
    assert workload["verdict"] == "failed" and workload["restarts"] >= 2
    assert "crash loop" in workload["reason"] and "recreate it forever" in workload["reason"]
    assert "maxRestarts" not in workload["reason"]
