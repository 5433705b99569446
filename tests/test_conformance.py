"""The controllers' conformance suite: cases taken as facts from upstream's own integration tests, each a manifest in
the style of upstream's examples (busybox shell lines standing in for the pod statuses those tests set), run through
`jaxinfra simulate --run-command` as a user runs it, with the status, reason, restarts and start order a cluster
gives. Each case names its source: repository @ commit, file, test and case.

What the upstream tests set by hand (a pod's phase, an exit code, a DisruptionTarget condition) comes here from the
program: its exit code, a `--preempt` (the kubelet's DisruptionTarget), and a claim `state` where a pod leaves a
marker for the pod that replaces it ("fails once, then succeeds")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jaxinfra.yamlio import dump
from tests.support.cli import simulate_cli
from tests.support.jobsets import indexed_job, jobset, rjob

pytestmark = pytest.mark.simulator

K8S_JOB = "kubernetes/kubernetes @ 003e8629 test/integration/job/job_test.go"
K8S_DOCS = "kubernetes/website content/en/docs/concepts/workloads/controllers/job.md"
JOBSET = "kubernetes-sigs/jobset @ 08dfbdfd test/integration/controller/jobset_controller_test.go"
CLAIM = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "state"}, "spec": {}}
ONCE = "m=/state/failed-$JOB_COMPLETION_INDEX; if [ ! -e $m ]; then touch $m; exit {code}; fi"
"""Fails with `code` the first time its index runs, succeeds after (the marker outlives the pod in the claim)."""


@dataclass(frozen=True)
class Case:
    source: str  # upstream file, test and case
    manifest: Callable[[], dict[str, Any]]
    verdict: str  # succeeded | failed | not finished
    reason: tuple[str, ...] = ()  # in the workload's reason: the condition's reason, the rule
    restarts: int | None = None  # JobSet restarts and recreated pods
    failed_pods: int | None = None  # the Job's status.failed: its failed pods, over all attempts
    phases: dict[str, str] = field(default_factory=dict)  # hostname -> phase, in the last attempt
    order: tuple[tuple[str, str], ...] = ()  # (a, b): replicatedJob a's first pod started before b's
    args: tuple[str, ...] = ()
    timeout: str = "60"


def job(script: str, pods: int = 1, indexed: bool = True, **spec: Any) -> dict[str, Any]:
    """A Job `work` of `pods` pods running `sh -c SCRIPT`, container `main`, the claim `state` at /state."""
    pod = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "busybox:1.36",
                "command": ["sh", "-c", script],
                "volumeMounts": [{"name": "state", "mountPath": "/state"}],
            }
        ],
        "volumes": [{"name": "state", "persistentVolumeClaim": {"claimName": "state"}}],
    }
    manifest = indexed_job("work", pod, pods, **spec)
    if not indexed:
        manifest["spec"].pop("completionMode")
    return manifest


POLICY = {  # TestJobPodFailurePolicy's Job: Ignore on DisruptionTarget, Count on 10, FailJob on 5, 6 and 7
    "rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {"action": "Count", "onExitCodes": {"operator": "In", "values": [10]}},
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [5, 6, 7]}},
    ]
}
SLOW = "trap 'exit 0' TERM; sleep 1.5 & wait"
"""A pod that runs a while (and stops at once when deleted)."""
LONG = "trap 'exit 0' TERM; sleep 30 & wait"
"""A pod that runs until it is deleted."""


def _leader_workers(*, leader: str, workers: str, **spec: Any) -> dict[str, Any]:
    return jobset("lw", rjob("leader", leader), rjob("workers", workers, replicas=2), **spec)


def _workers_fail(**spec: Any) -> dict[str, Any]:
    """A leader and workers JobSet whose workers' Jobs fail at once (backoffLimit 0) while the leader runs."""
    return _leader_workers(leader=SLOW, workers="exit 1", **spec)


def _three(a: str, b: str, c: str, b_on: list[dict[str, str]], c_on: list[dict[str, str]]) -> dict[str, Any]:
    return jobset(
        "dep",
        rjob("a", a),
        {**rjob("b", b), "dependsOn": b_on} if b_on else rjob("b", b),
        {**rjob("c", c), "dependsOn": c_on},
    )


CASES = {
    # --- the Job controller -------------------------------------------------------------------------------------
    "job-failjob-on-exit-code": Case(
        f"{K8S_JOB} TestJobPodFailurePolicy: pod status matching the configured FailJob rule on exit codes; job "
        "terminated",
        lambda: job("exit 5", indexed=False, podFailurePolicy=POLICY),
        "failed",
        ("PodFailurePolicy", "failed with exit code 5 matching FailJob rule at index 2"),
        restarts=0,
    ),
    "job-count-on-exit-code": Case(
        f"{K8S_JOB} TestJobPodFailurePolicy: pod status matching the configured Count rule on exit codes; pod failure "
        "counted",
        lambda: job(ONCE.format(code=10), podFailurePolicy=POLICY, backoffLimit=1),
        "succeeded",
        restarts=1,
    ),
    "job-ignore-disruption": Case(
        f"{K8S_JOB} TestJobPodFailurePolicy: pod status matching the configured Ignore rule on pod conditions; pod "
        "failure not counted",
        lambda: job(
            f"test -e /state/preempted || {{ touch /state/preempted; {SLOW}; }}",
            podFailurePolicy=POLICY,
            backoffLimit=0,
        ),
        "succeeded",
        restarts=1,
        args=("--preempt", "work-0@0.3"),
    ),
    "job-no-rule-counts": Case(
        f"{K8S_JOB} TestJobPodFailurePolicy: pod status non-matching any configured rule; pod failure counted",
        lambda: job(ONCE.format(code=1), podFailurePolicy=POLICY),
        "succeeded",
        restarts=1,
    ),
    "job-backoff-limit-per-index": Case(
        f"{K8S_JOB} TestBackoffLimitPerIndex: job index fails due to exceeding backoff limit per index",
        lambda: job('test "$JOB_COMPLETION_INDEX" = 1', pods=2, backoffLimitPerIndex=2),
        "failed",
        ("FailedIndexes", "backoffLimitPerIndex (2) exceeded"),
        restarts=2,
        phases={"work-0": "failed", "work-1": "succeeded"},
    ),
    "job-global-backoff-limit-first": Case(
        f"{K8S_JOB} TestBackoffLimitPerIndex: job index fails due to exceeding the global backoff limit first",
        lambda: job(ONCE.format(code=1) + f"; {SLOW}", pods=3, backoffLimitPerIndex=1, backoffLimit=2),
        "failed",
        ("BackoffLimitExceeded", "backoffLimit (2) exceeded: 3 pod failures"),
    ),
    "job-failed-index-others-continue": Case(
        f"{K8S_JOB} TestBackoffLimitPerIndex: job continues execution after a failed index, the job is marked Failed "
        "due to the failed index",
        lambda: job('test "$JOB_COMPLETION_INDEX" = 1 && sleep 0.5', pods=2, backoffLimitPerIndex=0),
        "failed",
        ("FailedIndexes",),
        restarts=0,
        phases={"work-0": "failed", "work-1": "succeeded"},
    ),
    "job-backoff-limit-per-index-docs-example": Case(
        f"{K8S_DOCS} Backoff limit per index: odd indexes fail; each fails twice (its first failure and one retry), "
        "the even ones succeed; status failed 10, succeeded 5, failedIndexes 1,3,5,7,9, condition FailedIndexes",
        lambda: job(
            "exit $((JOB_COMPLETION_INDEX % 2))", pods=10, parallelism=3, backoffLimitPerIndex=1, maxFailedIndexes=5
        ),
        "failed",
        ("FailedIndexes", "Job has failed indexes", "backoffLimitPerIndex (1) exceeded", "(failedIndexes 1,3,5,7,9)"),
        restarts=5,
        failed_pods=10,
        phases={f"work-{i}": "failed" if i % 2 else "succeeded" for i in range(10)},
    ),
    "job-backoff-limit-per-index-each-retry-succeeds": Case(
        f"{K8S_DOCS} Backoff limit per index, its passing twin: odd indexes fail once, their one retry succeeds",
        lambda: job(
            "test $((JOB_COMPLETION_INDEX % 2)) = 0 || { " + ONCE.format(code=1) + "; }",
            pods=10,
            parallelism=3,
            backoffLimitPerIndex=1,
        ),
        "succeeded",
        restarts=5,
        failed_pods=5,
        phases={f"work-{i}": "succeeded" for i in range(10)},
    ),
    "job-max-failed-indexes": Case(
        f"{K8S_JOB} TestBackoffLimitPerIndex: job execution terminated early due to exceeding max failed indexes",
        lambda: job(
            f'test "$JOB_COMPLETION_INDEX" = 2 || exit 1; {SLOW}; sleep 30',
            pods=3,
            backoffLimitPerIndex=0,
            maxFailedIndexes=1,
        ),
        "failed",
        ("maxFailedIndexes (1) exceeded: 2 failed indexes",),
        phases={"work-0": "failed", "work-1": "failed", "work-2": "failed"},
    ),
    "job-fail-index-action": Case(
        f"{K8S_JOB} TestBackoffLimitPerIndex: pod failure matching pod failure policy rule with FailIndex action",
        lambda: job(
            f'test "$JOB_COMPLETION_INDEX" = 1 || exit 13; {SLOW}',
            pods=2,
            backoffLimitPerIndex=1,
            podFailurePolicy={
                "rules": [
                    {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [13]}},
                    {"action": "FailIndex", "onPodConditions": [{"type": "DisruptionTarget"}]},
                ]
            },
        ),
        "failed",
        ("FailedIndexes",),
        restarts=0,
        args=("--preempt", "work-1@0.3"),
    ),
    # --- the JobSet controller ----------------------------------------------------------------------------------
    "jobset-success-any": Case(
        f"{JOBSET} success policy 'any' with replicated job specified",
        lambda: _leader_workers(
            leader=LONG,
            workers=f'test "$HOSTNAME" = lw-workers-1-0 || {{ {LONG}; }}',
            successPolicy={"operator": "Any", "targetReplicatedJobs": ["workers"]},
        ),
        "succeeded",
        phases={"lw-leader-0-0": "deleted", "lw-workers-0-0": "deleted", "lw-workers-1-0": "succeeded"},
    ),
    "jobset-no-failure-policy": Case(
        f"{JOBSET} [failure policy] jobset with no failure policy should fail if any jobs fail",
        lambda: _workers_fail(),
        "failed",
        ("maxRestarts (0) exhausted",),
        restarts=0,
    ),
    "jobset-fail-jobset": Case(
        f"{JOBSET} [failure policy] jobset fails immediately with FailJobSet failure policy action.",
        lambda: _workers_fail(failurePolicy={"maxRestarts": 2, "rules": [{"action": "FailJobSet"}]}),
        "failed",
        ("FailJobSet", "BackoffLimitExceeded"),
        restarts=0,
    ),
    "jobset-reason-not-matched": Case(
        f"{JOBSET} [failure policy] jobset does not fail immediately with FailJobSet failure policy action as the "
        "failure reason is not matched.",
        lambda: _workers_fail(
            failurePolicy={
                "maxRestarts": 1,
                "rules": [{"action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}],
            },
        ),
        "failed",
        ("failurePolicy.maxRestarts (1) exhausted",),
        restarts=1,
    ),
    "jobset-target-not-contained": Case(
        f"{JOBSET} [failure policy] job fails and the parent replicated job is not contained in TargetReplicatedJobs.",
        lambda: _workers_fail(
            failurePolicy={"maxRestarts": 1, "rules": [{"action": "FailJobSet", "targetReplicatedJobs": ["leader"]}]},
        ),
        "failed",
        ("failurePolicy.maxRestarts (1) exhausted",),
        restarts=1,
    ),
    "jobset-rules-in-order": Case(
        f"{JOBSET} [failure policy] failure policy rules order verification test 1",
        lambda: _workers_fail(
            failurePolicy={
                "maxRestarts": 1,
                "rules": [
                    {"name": "first", "action": "FailJobSet", "onJobFailureReasons": ["BackoffLimitExceeded"]},
                    {"name": "second", "action": "RestartJobSet", "onJobFailureReasons": ["BackoffLimitExceeded"]},
                ],
            },
        ),
        "failed",
        ("failurePolicy rule first: FailJobSet",),
        restarts=0,
    ),
    "jobset-succeeds-after-one-failure": Case(
        f"{JOBSET} job succeeds after one failure",
        lambda: jobset(
            "once",
            _with_state(rjob("workers", "test -e /state/failed || { touch /state/failed; exit 1; }", pods=2)),
            failurePolicy={"maxRestarts": 1},
        ),
        "succeeded",
        restarts=1,
    ),
    "jobset-created-suspended": Case(
        f"{JOBSET} jobset created in suspended state",
        lambda: _leader_workers(leader="true", workers="true", suspend=True),
        "not finished",
        ("spec.suspend is true",),
    ),
    "jobset-in-order-not-ready": Case(
        f"{JOBSET} startupPolicy InOrder; replicated-job-a not ready then replicated-job-b should not run",
        lambda: jobset(
            "ordered",
            _with_init(rjob("a", "true"), "sleep 30"),
            rjob("b", "true"),
            startupPolicy={"startupPolicyOrder": "InOrder"},
        ),
        "not finished",
        ("not created yet, waiting for startupPolicy InOrder: after a is Ready",),
        phases={"ordered-b-0-0": "pending"},
        timeout="2",
    ),
    "jobset-depends-on-complete-then-ready": Case(
        f"{JOBSET} DependsOn: rjob-b depends on complete status of rjob-a, and rjob-c depends on ready status of "
        "rjob-b",
        lambda: _three(
            "sleep 0.3", "sleep 1.5", "true", [{"name": "a", "status": "Complete"}], [{"name": "b", "status": "Ready"}]
        ),
        "succeeded",
        order=(("a", "b"), ("b", "c")),
    ),
    "jobset-depends-on-two-complete": Case(
        f"{JOBSET} DependsOn: rjob-c depends on complete status of rjob-a and rjob-b",
        lambda: _three(
            "sleep 0.3",
            "sleep 0.6",
            "true",
            [],
            [{"name": "a", "status": "Complete"}, {"name": "b", "status": "Complete"}],
        ),
        "succeeded",
        order=(("a", "c"), ("b", "c")),
    ),
    "jobset-coordinator": Case(
        f"{JOBSET} jobset with coordinator set should have annotation and label set on all jobs",
        lambda: jobset(
            "coord",
            _coordinated(rjob("leader", _IS_COORDINATOR)),
            _coordinated(rjob("workers", _IS_COORDINATOR, replicas=2)),
            coordinator={"replicatedJob": "leader", "jobIndex": 0, "podIndex": 0},
        ),
        "succeeded",
    ),
    "jobset-volume-claim-policies": Case(
        f"{JOBSET} jobset with VolumeClaimPolicies should create two PVC with Delete and Retain policies",
        lambda: jobset(
            "claims",
            _mounting(rjob("node", "echo x > /a/f && echo y > /b/f"), ("pvc-a", "/a"), ("pvc-b", "/b")),
            volumeClaimPolicies=[
                {
                    "templates": [{"metadata": {"name": "pvc-a"}, "spec": {}}],
                    "retentionPolicy": {"whenDeleted": "Delete"},
                },
                {
                    "templates": [{"metadata": {"name": "pvc-b"}, "spec": {}}],
                    "retentionPolicy": {"whenDeleted": "Retain"},
                },
            ],
        ),
        "succeeded",
    ),
}


def _pod(rjob_: dict[str, Any]) -> dict[str, Any]:
    return rjob_["template"]["spec"]["template"]["spec"]


def _with_init(rjob_: dict[str, Any], script: str) -> dict[str, Any]:
    """The replicatedJob with its pods first running an init container `sh -c SCRIPT` (not Ready until it ends)."""
    _pod(rjob_)["initContainers"] = [{"name": "setup", "image": "busybox:1.36", "command": ["sh", "-c", script]}]
    return rjob_


def _mounting(rjob_: dict[str, Any], *mounts: tuple[str, str]) -> dict[str, Any]:
    """The replicatedJob with its container mounting each (volume, path)."""
    [container] = _pod(rjob_)["containers"]
    container["volumeMounts"] = [{"name": name, "mountPath": path} for name, path in mounts]
    return rjob_


_IS_COORDINATOR = 'test "$COORDINATOR" = coord-leader-0-0.coord && test "$COORDINATOR_LABEL" = "$COORDINATOR"'


def _coordinated(rjob_: dict[str, Any]) -> dict[str, Any]:
    """The replicatedJob with the coordinator's endpoint in its env, from its pod's annotation and label."""
    [container] = _pod(rjob_)["containers"]
    key = "jobset.sigs.k8s.io/coordinator"
    container["env"] = [
        {"name": "COORDINATOR", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{key}']"}}},
        {"name": "COORDINATOR_LABEL", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{key}']"}}},
    ]
    return rjob_


def _with_state(rjob_: dict[str, Any]) -> dict[str, Any]:
    """The replicatedJob with the claim `state` at /state."""
    _pod(rjob_)["volumes"] = [{"name": "state", "persistentVolumeClaim": {"claimName": "state"}}]
    return _mounting(rjob_, ("state", "/state"))


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_simulator_gives_the_verdict_upstream_tests_expect(tmp_path: Path, case: Case) -> None:
    (tmp_path / "case.yaml").write_text(dump([CLAIM, case.manifest()]))
    rc, report, out = simulate_cli(
        str(tmp_path / "case.yaml"), "--run-command", "--timeout", case.timeout, *case.args, tmp=tmp_path
    )
    assert report.get("workloads"), out
    [workload] = report["workloads"]
    assert (rc, workload["verdict"]) == (0 if case.verdict == "succeeded" else 1, case.verdict), case.source + out
    for words in case.reason:
        assert words in (workload["reason"] or ""), case.source + out
    if case.restarts is not None:
        assert workload["restarts"] == case.restarts, case.source + out
    if case.failed_pods is not None:
        pods = [p for a in workload["attempts"] for p in [*a["pods"], *a.get("replaced", ())]]
        assert sum(p["phase"] == "failed" for p in pods) == case.failed_pods, case.source + out
    last = workload["attempts"][-1]["pods"] if workload["attempts"] else []
    phases = {p["hostname"]: p["phase"] for p in last}
    assert {k: phases.get(k) for k in case.phases} == case.phases, case.source + out
    started = {}
    for p in last:  # the first pod of each replicatedJob (`<jobset>-<rjob>-<job>-<index>`)
        started.setdefault(p["hostname"].split("-")[1], p["timings"].get("started"))
    for a, b in case.order:
        assert started[a] is not None and started[b] is not None and started[a] < started[b], case.source + out
