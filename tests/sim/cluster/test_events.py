"""The events a cluster records while a workload runs (`kubectl get events`): the Job controller's pod creations
and verdicts, the kubelet's container starts, failed probes and stops, the JobSet controller's completion; each
with upstream's reason, type and message (simulate/jaxinfra_sim/core/events.py cites them), in the JSON report and the
trace. Manifests in the style of the Kubernetes docs' Job and liveness-probe examples (busybox shell lines)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jaxinfra.yamlio import dump
from tests.support.cli import simulate_cli
from tests.support.jobsets import indexed_job, jobset, rjob

pytestmark = pytest.mark.simulator


def _events(report: dict[str, Any], attempt: int = -1) -> list[tuple[str, str, str, str]]:
    [workload] = report["workloads"]
    return [(e["type"], e["reason"], e["object"], e["message"]) for e in workload["attempts"][attempt]["events"]]


def _pod(script: str, **spec: Any) -> dict[str, Any]:
    return {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", script], **spec}],
    }


def test_a_job_that_completes_records_its_pods_creation_their_starts_and_its_completion(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(dump([indexed_job("count", _pod("echo $JOB_COMPLETION_INDEX"), 2)]))
    rc, report, out = simulate_cli(str(tmp_path / "job.yaml"), "--run-command", tmp=tmp_path)
    assert rc == 0, out
    seen = _events(report)
    pods = [p["name"] for p in report["workloads"][0]["attempts"][-1]["pods"]]
    for name in pods:
        assert ("Normal", "SuccessfulCreate", "Job/default/count", f"Created pod: {name}") in seen
        assert ("Normal", "Created", f"Pod/default/{name}", "Created container: main") in seen
        assert ("Normal", "Started", f"Pod/default/{name}", "Started container main") in seen
    assert seen[-1] == ("Normal", "Completed", "Job/default/count", "Job completed")
    assert not [e for e in seen if e[0] == "Warning"], seen
    creations = [i for i, e in enumerate(seen) if e[1] == "SuccessfulCreate"]
    starts = [i for i, e in enumerate(seen) if e[1] == "Started"]
    assert max(creations) < min(starts) or creations[0] < starts[0], seen  # a pod is created before it starts


def test_a_job_past_its_backoff_limit_records_the_failed_condition_as_a_warning(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(dump([indexed_job("broken", _pod("exit 3"), 1, backoffLimit=0)]))
    rc, report, out = simulate_cli(str(tmp_path / "job.yaml"), "--run-command", tmp=tmp_path)
    assert rc == 1, out
    failed = [e for e in _events(report) if e[2] == "Job/default/broken" and e[0] == "Warning"]
    assert failed == [
        ("Warning", "BackoffLimitExceeded", "Job/default/broken", "Job has reached the specified backoff limit")
    ], _events(report)
    assert not [e for e in _events(report) if e[1] == "Completed"]


def test_a_failing_liveness_probe_records_unhealthy_then_killing_and_a_stopped_container_is_not_probed(
    tmp_path: Path,
) -> None:
    """Index 1's liveness probe fails (restartPolicy Never: the container is stopped, not restarted, and the
    kubelet's message says only that); index 0 exits at once, and a probe that finds its container gone is the
    kubelet's probe error, never an Unhealthy event or a kill."""
    probe = {"exec": {"command": ["sh", "-c", "test $JOB_COMPLETION_INDEX = 0"]}, "periodSeconds": 1}
    job = indexed_job(
        "probed", _pod("test $JOB_COMPLETION_INDEX = 0 || sleep 30", livenessProbe=probe), 2, backoffLimit=0
    )
    (tmp_path / "job.yaml").write_text(dump([job]))
    rc, report, out = simulate_cli(str(tmp_path / "job.yaml"), "--run-command", "--grace-cap", "1", tmp=tmp_path)
    pods = {p["hostname"]: p["name"] for p in report["workloads"][0]["attempts"][-1]["pods"]}
    seen = _events(report)
    one = f"Pod/default/{pods['probed-1']}"
    unhealthy = [e for e in seen if e[1] == "Unhealthy"]
    assert unhealthy and {e[2] for e in unhealthy} == {one}, seen
    assert unhealthy[0][3].startswith("Liveness probe failed: "), seen
    killing = [e for e in seen if e[1] == "Killing"]
    assert killing == [("Normal", "Killing", one, "Container main failed liveness probe")], seen
    assert seen.index(unhealthy[-1]) < seen.index(killing[0]), seen
    assert rc == 1, out  # the stopped sleep ends by the grace period's SIGKILL: the pod fails, the Job with it


def test_a_liveness_probe_whose_command_the_container_lacks_errors_and_never_kills(tmp_path: Path) -> None:
    """An exec probe naming a program not in the container: runc cannot start it, ExecSync's error, which the
    kubelet's prober makes probe.Unknown and throws away (kubernetes/kubernetes#106682): no Unhealthy failure, no
    kill, the container runs to its end and the Job completes. Its twin whose command exits 1 is killed."""
    missing = {"exec": {"command": ["no-such-probe"]}, "periodSeconds": 1, "failureThreshold": 1}
    failing = {"exec": {"command": ["sh", "-c", "exit 1"]}, "periodSeconds": 1, "failureThreshold": 1}
    for probe, completes in ((missing, True), (failing, False)):
        job = indexed_job("probed", _pod("sleep 3", livenessProbe=probe), 1, backoffLimit=0)
        (tmp_path / "job.yaml").write_text(dump([job]))
        rc, report, out = simulate_cli(str(tmp_path / "job.yaml"), "--run-command", "--grace-cap", "1", tmp=tmp_path)
        killing = [e for e in _events(report) if e[1] == "Killing"]
        [pod] = report["workloads"][0]["attempts"][-1]["pods"]
        if completes:
            assert (rc, killing) == (0, []), out
            assert "no-such-probe" in pod["probes"]["liveness"]["error"], pod["probes"]
        else:
            assert rc == 1 and killing, out


def test_a_jobset_that_completes_records_each_jobs_completion_and_its_own(tmp_path: Path) -> None:
    (tmp_path / "js.yaml").write_text(dump([jobset("pair", rjob("workers", "true", replicas=2))]))
    rc, report, out = simulate_cli(str(tmp_path / "js.yaml"), "--run-command", tmp=tmp_path)
    assert rc == 0, out
    seen = _events(report)
    completed = [e[2] for e in seen if e[1] == "Completed"]
    assert sorted(completed) == ["Job/default/pair-workers-0", "Job/default/pair-workers-1"], seen
    assert seen[-1] == ("Normal", "AllJobsCompleted", "JobSet/default/pair", "jobset completed successfully")


def test_a_jobset_records_what_its_failure_policy_made_of_a_failed_job(tmp_path: Path) -> None:
    """No failurePolicy: the first failed Job fails the JobSet (FailedJobs); maxRestarts 1: a restart, then, the
    restarts used up, ReachedMaxRestarts; each message names the first failed Job (jobset failure_policy.go)."""
    (tmp_path / "plain.yaml").write_text(dump([jobset("plain", rjob("workers", "exit 1"))]))
    rc, report, out = simulate_cli(str(tmp_path / "plain.yaml"), "--run-command", tmp=tmp_path)
    assert rc == 1, out
    failed = [e for e in _events(report) if e[2] == "JobSet/default/plain"]
    assert failed == [
        (
            "Warning",
            "FailedJobs",
            "JobSet/default/plain",
            "jobset failed due to one or more job failures (first failed job: plain-workers-0)",
        )
    ], _events(report)
    (tmp_path / "retry.yaml").write_text(
        dump([jobset("retry", rjob("workers", "exit 1"), failurePolicy={"maxRestarts": 1})])
    )
    rc, report, out = simulate_cli(str(tmp_path / "retry.yaml"), "--run-command", tmp=tmp_path)
    assert rc == 1, out
    first, second = ([e[1:] for e in _events(report, i) if e[2] == "JobSet/default/retry"] for i in range(2))
    assert first == [
        (
            "RestartJobSetFailurePolicyAction",
            "JobSet/default/retry",
            "applying RestartJobSet failure policy action (first failed job: retry-workers-0)",
        )
    ], first
    assert [e[0] for e in second] == ["ReachedMaxRestarts"], second


def test_the_trace_shows_each_pods_events_on_its_own_track(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(dump([indexed_job("count", _pod("true"), 1)]))
    trace = tmp_path / "trace.json"
    rc, report, out = simulate_cli(str(tmp_path / "job.yaml"), "--run-command", "--trace", str(trace), tmp=tmp_path)
    assert rc == 0, out
    names = [e["name"] for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "event"]
    assert "Started: Started container main" in names and "Completed: Job completed" in names, names
