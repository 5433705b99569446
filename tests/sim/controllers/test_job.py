"""The Job controller for pods that are not one JAX group (kubernetes/kubernetes @ 6ae037f1
pkg/controller/job/job_controller.go): each failed pod counts against its Job while the others run on, and is
recreated at its index under a new name within the Job's limits; waves of `parallelism`; NonIndexed Jobs; a
successPolicy (backoffLimitPerIndex and maxFailedIndexes: tests/conformance, from upstream's own cases). Jobs in
the style of the Kubernetes docs' Job examples (busybox shell lines sharing a claim), run with --run-command; a JAX
group still ends at its first failure (`controllers.running._loaded_jax`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jaxinfra.yamlio import dump
from jaxinfra_sim.controllers.running import _loaded_jax
from tests.support.cli import simulate_cli
from tests.support.jobsets import indexed_job

pytestmark = pytest.mark.simulator

CLAIM = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "state"}, "spec": {}}


def job(script: str, pods: int = 3, **spec: Any) -> dict[str, Any]:
    """An Indexed Job of `pods` pods running `sh -c SCRIPT` with the claim `state` at /state (what a pod leaves there
    outlives it); restartPolicy Never, and `spec`'s fields."""
    container = {
        "name": "main",
        "image": "busybox:1.36",
        "command": ["sh", "-c", script],
        "volumeMounts": [{"name": "state", "mountPath": "/state"}],
    }
    pod = {
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": [{"name": "state", "persistentVolumeClaim": {"claimName": "state"}}],
    }
    return indexed_job("work", pod, pods, **spec)


def simulate(tmp_path: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    (tmp_path / "job.yaml").write_text(dump([CLAIM, manifest]))
    rc, report, out = simulate_cli(str(tmp_path / "job.yaml"), "--run-command", "--timeout", "60", tmp=tmp_path)
    [workload] = report["workloads"]
    assert rc == (0 if workload["verdict"] == "succeeded" else 1), out
    return workload


def test_a_failed_pod_is_recreated_alone_and_only_it_counts(tmp_path: Path) -> None:
    """backoffLimit 1, one pod fails once: one failure, within the limit. Its peers run on untouched (ended with
    the group, they would have counted three failures)."""
    once = (
        'if [ "$JOB_COMPLETION_INDEX" = 1 ] && [ ! -e /state/failed ]; then touch /state/failed; exit 1; fi; sleep 0.5'
    )
    workload = simulate(tmp_path, job(once, backoffLimit=1))
    assert (workload["verdict"], workload["restarts"], len(workload["attempts"])) == ("succeeded", 1, 1)
    [attempt] = workload["attempts"]
    [replaced] = attempt["replaced"]
    assert (replaced["hostname"], replaced["exit_code"]) == ("work-1", 1)
    pods = {p["hostname"]: p for p in attempt["pods"]}
    assert pods["work-1"]["name"] != replaced["name"] and pods["work-1"]["ip"] == replaced["ip"]
    assert all(p["phase"] == "succeeded" for p in pods.values())


def test_past_its_backoff_limit_the_job_fails_and_its_other_pods_are_deleted(tmp_path: Path) -> None:
    workload = simulate(tmp_path, job('test "$JOB_COMPLETION_INDEX" != 1 || exit 1; sleep 30', backoffLimit=1))
    assert workload["verdict"] == "failed" and "BackoffLimitExceeded" in workload["reason"]
    assert "backoffLimit (1) exceeded: 2 pod failures" in workload["reason"]
    [attempt] = workload["attempts"]
    assert [p["hostname"] for p in attempt["replaced"]] == ["work-1"]
    assert {p["hostname"]: p["reason"] for p in attempt["pods"] if p["hostname"] != "work-1"} == {
        "work-0": "ended with its group",
        "work-2": "ended with its group",
    }


def test_a_process_that_imported_jax_is_recognised_as_a_jax_process() -> None:
    """What makes the runner end a --run-command group at its first failure: some process of the pod (any
    descendant of its shim) has jaxlib mapped."""
    child = "import jaxlib.xla_client, time; print(1, flush=True); time.sleep(30)"
    script = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])"
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    plain = subprocess.Popen(["sleep", "30"])
    try:
        assert parent.stdout is not None and parent.stdout.readline() == b"1\n"
        assert _loaded_jax(parent.pid) and not _loaded_jax(plain.pid)
    finally:
        for p in (parent, plain):
            p.kill()
            p.wait()


def test_a_job_with_parallelism_below_completions_runs_its_pods_in_waves(tmp_path: Path) -> None:
    """The docs' parallel Job (completions 5, parallelism 2): never more than 2 pods at once, the next index created
    as one completes, every index run once."""
    workload = simulate(tmp_path, job("sleep 0.3", pods=5, parallelism=2))
    assert workload["verdict"] == "succeeded"
    spans = [(p["timings"]["started"], p["timings"]["succeeded"]) for p in workload["attempts"][0]["pods"]]
    assert all(sum(s <= t < e for s, e in spans) <= 2 for t, _ in spans)  # at each start, at most 2 running
    assert spans == sorted(spans)  # the lowest index first


def test_a_non_indexed_jobs_pods_are_interchangeable_completions_without_an_index(tmp_path: Path) -> None:
    """The Job API's default mode (the docs' pod failure policy example): generated names, which are their
    hostnames, no JOB_COMPLETION_INDEX; a FailJob rule on an exit code fails the Job at once."""
    rules = [{"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}]
    script = 'test -z "$JOB_COMPLETION_INDEX" && test "$HOSTNAME" != work-0 && echo ok >> /state/ran && sleep 0.2'
    manifest = job(script, pods=4, parallelism=2, backoffLimit=6)
    manifest["spec"].pop("completionMode")
    workload = simulate(tmp_path, manifest)
    assert workload["verdict"] == "succeeded"
    names = [p["hostname"] for p in workload["attempts"][0]["pods"]]
    assert len(set(names)) == 4 and all(n.startswith("work-") and len(n) == len("work-") + 5 for n in names)
    manifest["spec"]["podFailurePolicy"] = {"rules": rules}
    manifest["spec"]["template"]["spec"]["containers"][0]["command"][2] = "sleep 0.2; exit 42"
    workload = simulate(tmp_path, manifest)
    assert workload["verdict"] == "failed" and "PodFailurePolicy" in workload["reason"]
    assert [p["reason"] for p in workload["attempts"][0]["pods"][2:]] == [
        "never created: its Job's parallelism (2) was taken by its other pods"
    ] * 2


def test_a_success_policy_completes_the_job_once_its_indexes_succeed_and_deletes_the_rest(tmp_path: Path) -> None:
    """The docs' Job success policy example: once the leader's index has succeeded, the Job is complete and its
    other pods, still running, are deleted; without the rule it would wait for them."""
    script = 'if [ "$JOB_COMPLETION_INDEX" = 1 ]; then sleep 0.2; else sleep 30; fi'
    rules = {"rules": [{"succeededIndexes": "1", "succeededCount": 1}]}
    workload = simulate(tmp_path, job(script, successPolicy=rules))
    assert workload["verdict"] == "succeeded"
    pods = {p["hostname"]: (p["phase"], p["reason"]) for p in workload["attempts"][0]["pods"]}
    deleted = "deleted: Job/default/work completed (successPolicy rule 0 (succeededIndexes 1 and succeededCount 1))"
    assert pods == {"work-0": ("deleted", deleted), "work-1": ("succeeded", None), "work-2": ("deleted", deleted)}
