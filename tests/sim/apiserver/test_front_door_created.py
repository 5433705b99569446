"""What controllers create passes the API server's front door as an applied object does (issue #39): the JobSet a
Kubeflow Trainer v2 TrainJob's controller applies (the JobSet CRD's schema, JobSet's webhooks, the admission plugins;
a refusal is the Trainer's TrainJobResourcesCreationFailed event, kubeflow/trainer@8c0f5059
pkg/controller/trainjob_controller.go), and the pods the Job controller creates for an Indexed Job (Pod Security's
`enforce`, ResourceQuota; a refusal is its FailedCreate event, kubernetes pkg/controller/controller_utils.go).

Manifests are written here in the style of upstream examples, not copied: a TrainJob on Trainer's `jax-distributed`
runtime (its docs' JAX example) whose name and numNodes make JobSet's derived pod names too long, the Kubernetes
docs' Pod Security namespace label, and their ResourceQuota `pods` count."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxinfra.invocation import sources as _sources
from jaxinfra_sim.cluster import engine
from tests.sim.cluster.test_simulate import only, simulate
from tests.support.jobsets import indexed_job
from tests.support.paths import MANIFESTS
from tests.test_front_door import validate_cli

pytestmark = pytest.mark.simulator

LONG_NAME = (
    "gemma-7b-finetune-on-the-wikitext-103-dataset-v2"  # 48 characters: `<name>-node-0-<i>-abcde` fits for i < 10
)


def write(path: Path, docs: list[Any]) -> Path:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def trainjob(tmp_path: Path, nodes: int) -> Path:
    """The upstream-runtime TrainJob of the simulator's examples, renamed LONG_NAME, on `nodes` nodes."""
    docs = [d for d in yaml.safe_load_all((MANIFESTS / "trainjob_upstream_runtime.yaml").read_text()) if d]
    tj = next(d for d in docs if d["kind"] == "TrainJob")
    tj["metadata"]["name"] = LONG_NAME
    tj["spec"]["trainer"]["numNodes"] = nodes
    return write(tmp_path / "trainjob.yaml", copy.deepcopy(docs))


def test_a_trainjob_whose_jobset_the_jobset_webhook_refuses_is_stored_and_never_runs(tmp_path: Path) -> None:
    path = trainjob(tmp_path, 16)  # pod names `<name>-node-0-15-abcde`: 64 characters
    status, _ = validate_cli(path)
    assert status == 0  # the TrainJob itself is valid: the Trainer's webhook does not derive the JobSet's names
    [result] = engine._plan(_sources([path], None), check_all=False).results
    assert result.workload.pods == ()
    [problem] = result.workload.problems
    assert problem.path == f"TrainJob/default/{LONG_NAME}"
    assert problem.message == (
        "the API server refuses the JobSet the Trainer builds for this TrainJob (event "
        "TrainJobResourcesCreationFailed: "
        'TrainJob resources reconciliation failed: admission webhook "vjobset.kb.io" denied the request: '
        f'spec.replicatedJobs[0].name: Invalid value: "{LONG_NAME}-node-0": JobSet name is too long, pod names '
        "generated for this JobSet will exceed 63 characters), so the TrainJob never runs"
    )


def test_the_same_trainjob_on_fewer_nodes_runs(tmp_path: Path) -> None:
    rc, report, err = simulate(str(trainjob(tmp_path, 2)), "--run-command", tmp=tmp_path, timeout=120)
    w = only(report)
    assert rc == 0 and w["verdict"] == "succeeded", err
    assert [p["hostname"] for p in w["attempts"][0]["pods"]] == [f"{LONG_NAME}-node-0-{i}" for i in range(2)]


def namespaced(name: str, pods: int, pod: dict[str, Any] | None = None) -> dict[str, Any]:
    """An Indexed Job in namespace `ml`, busybox pods that print their index."""
    container = {"name": "worker", "image": "busybox:1.36", "command": ["sh", "-c", "echo $JOB_COMPLETION_INDEX"]}
    job = indexed_job(name, pod or {"restartPolicy": "Never", "containers": [container]}, pods)
    job["metadata"]["namespace"] = "ml"
    return job


def namespace(**labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": labels}}


RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def test_privileged_pods_in_a_restricted_namespace_are_refused_when_the_job_controller_creates_them(
    tmp_path: Path,
) -> None:
    job = namespaced("privileged", 2)
    job["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    path = write(tmp_path / "job.yaml", [namespace(**RESTRICTED), job])
    status, err = validate_cli(path)
    assert status == 0 and 'would violate PodSecurity "restricted:latest"' in err  # the Job: a warning
    rc, report, out = simulate(str(path), "--run-command", tmp=tmp_path, timeout=60)
    w = only(report)
    assert rc == 1 and w["verdict"] == "failed" and w["attempts"] == [], out
    [problem] = w["problems"]
    assert problem["message"].startswith(
        "the API server refuses to create the pods of Job privileged (event FailedCreate by the Job controller "
        '(Job ml/privileged): Error creating: pods "privileged-0-" is forbidden: violates PodSecurity '
        '"restricted:latest": privileged (container "worker" must not set securityContext.privileged=true)'
    )
    assert problem["message"].endswith("so they never exist and the workload never runs")


def test_the_same_job_restricted_as_the_level_asks_runs(tmp_path: Path) -> None:
    restricted = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    job = namespaced("restricted", 2)
    job["spec"]["template"]["spec"]["containers"][0]["securityContext"] = restricted
    path = write(tmp_path / "job.yaml", [namespace(**RESTRICTED), job])
    rc, report, out = simulate(str(path), "--run-command", tmp=tmp_path, timeout=60)
    assert rc == 0 and only(report)["verdict"] == "succeeded", out


def quota(pods: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "pod-count", "namespace": "ml"},
        "spec": {"hard": {"pods": str(pods)}},
    }


def test_a_pod_quota_the_jobs_own_pods_use_up_leaves_a_jax_group_waiting_forever(tmp_path: Path) -> None:
    """On a cluster the Job controller creates two pods, the third is refused at every retry, and the Job never
    completes: the two JAX processes wait for a third. The simulator says so before anything runs."""
    job = namespaced("three", 3)
    job["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "JAX_NUM_PROCESSES", "value": "3"}]
    path = write(tmp_path / "job.yaml", [namespace(), quota(2), job])
    assert validate_cli(path)[0] == 0  # the Job is admitted: quota counts its pods only as they are created
    rc, report, out = simulate(str(path), "--run-command", tmp=tmp_path, timeout=60)
    w = only(report)
    assert rc == 1 and w["verdict"] == "failed" and w["attempts"] == [], out
    [problem] = w["problems"]
    assert problem["message"] == (
        "the API server refuses to create the pods from three-2- on (event FailedCreate by the Job controller "
        '(Job ml/three): Error creating: pods "three-2-" is forbidden: exceeded quota: pod-count, requested: pods=1, '
        "used: pods=2, limited: pods=2): 2 of the workload's 3 pods are created and the rest never are, so the "
        "workload never completes (the controller retries the create as long as the refusal holds)"
    )


def test_a_pod_quota_the_jobs_own_pods_use_up_admits_pods_that_end_alone_in_waves(tmp_path: Path) -> None:
    """Pods that each end on their own (the Kubernetes docs' Indexed Job style: print the index) free their share of
    the quota as they end (a Succeeded pod is not charged: kubernetes pkg/quota/v1/evaluator/core/pods.go
    QuotaV1Pod), and the Job controller's retried create then succeeds: the Job completes, two pods at a time."""
    path = write(tmp_path / "job.yaml", [namespace(), quota(2), namespaced("three", 3)])
    rc, report, out = simulate(str(path), "--run-command", tmp=tmp_path, timeout=60)
    w = only(report)
    assert rc == 0 and w["verdict"] == "succeeded" and w["problems"] == [], out
    assert any(
        "a ResourceQuota admits 2 of its 3 pods at once" in n and "exceeded quota: pod-count" in n for n in w["notes"]
    )


def test_a_pod_quota_that_holds_every_pod_admits_them(tmp_path: Path) -> None:
    path = write(tmp_path / "job.yaml", [namespace(), quota(3), namespaced("three", 3)])
    rc, report, out = simulate(str(path), "--run-command", tmp=tmp_path, timeout=60)
    assert rc == 0 and only(report)["verdict"] == "succeeded", out


LIMIT_RANGE = {
    "apiVersion": "v1",
    "kind": "LimitRange",
    "metadata": {"name": "mem-limit-range"},
    "spec": {"limits": [{"type": "Container", "default": {"memory": "512Mi"}, "defaultRequest": {"memory": "256Mi"}}]},
}
"""The Kubernetes docs' default memory LimitRange (tasks/administer-cluster/manage-resources/memory-default-namespace),
in its style."""


def _memory_limits(docs: list[Any]) -> list[int | None]:
    from jaxinfra_sim.cluster.control_plane import emulate

    [workload] = emulate(docs).workloads
    return [p.memory_limit for p in workload.pods]


def test_a_limit_ranges_default_is_the_limit_the_kubelet_enforces_on_the_jobs_pods() -> None:
    """LimitRanger fills the pods' missing limits as the Job controller creates them; the kubelet enforces the stored
    pod's, not the template's (a program past 512 MiB is OOMKilled on a cluster)."""
    pod = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}]}
    job = indexed_job("limited", pod, 2)
    assert _memory_limits([LIMIT_RANGE, job]) == [512 * 2**20] * 2
    assert _memory_limits([job]) == [None, None]  # no LimitRange: no limit, as before


def test_a_containers_own_limit_is_kept_where_a_limit_range_applies() -> None:
    resources = {"limits": {"memory": "128Mi"}}
    pod = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"], "resources": resources}],
    }
    assert _memory_limits([LIMIT_RANGE, indexed_job("own", pod, 1)]) == [128 * 2**20]
