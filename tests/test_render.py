"""What the manifests must do on a cluster, asserted per backend (docs/design.md, "The env contracts" and "What the
manifests guarantee")."""

from __future__ import annotations

from typing import Any

import pytest

from jaxinfra import CPU, GPU, TPU, Cluster, JaxJob, NodePool, manifests
from jaxinfra.plan import plan

pytestmark = pytest.mark.unit


def objects(cluster: Cluster) -> dict[str, dict[str, Any]]:
    return {m["kind"]: m for m in manifests(cluster)}


def cluster_of(accelerator: Any, backend: str = "jobset", **job: Any) -> Cluster:
    return Cluster(
        name="c",
        node_pools=[NodePool("pool", accelerator)],
        jobs=[JaxJob("train", image="img", node_pool="pool", backend=backend, **job)],
    )


def pod_spec(objs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if "JobSet" in objs:
        return objs["JobSet"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return objs["Job"]["spec"]["template"]["spec"]


def env_of(objs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod_spec(objs)["containers"][0]["env"]}


def test_jobset_contract_single_slice() -> None:
    c = cluster_of(TPU("v5e", "2x4"), coordinator_port=1234)
    objs = objects(c)
    js, svc = objs["JobSet"], objs["Service"]
    rj = js["spec"]["replicatedJobs"][0]
    # hosts come from the topology, one pod per host, all-or-nothing
    assert (rj["replicas"], rj["template"]["spec"]["parallelism"], rj["template"]["spec"]["completions"]) == (1, 2, 2)
    assert rj["template"]["spec"]["backoffLimit"] == 0
    # DNS: pod `<js>-<rjob>-0-0` under subdomain == headless Service selecting the JobSet's pods
    assert js["spec"]["network"] == {
        "enableDNSHostnames": True,
        "publishNotReadyAddresses": True,
        "subdomain": svc["metadata"]["name"],
    }
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == {"jobset.sigs.k8s.io/jobset-name": js["metadata"]["name"]}
    env = env_of(objs)
    assert env["JAX_COORDINATOR_ADDRESS"] == f"train-{rj['name']}-0-0.{svc['metadata']['name']}:1234"
    assert env["JAX_NUM_PROCESSES"] == "2"
    assert env["JAX_PROCESS_ID"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }
    assert "MEGASCALE_SLICE_ID" not in env
    assert "alpha.jobset.sigs.k8s.io/exclusive-topology" not in js["metadata"].get("annotations", {})


def test_jobset_multi_slice_megascale_and_exclusive_placement() -> None:
    objs = objects(cluster_of(TPU("v5p", "2x2x4"), slices=3, max_restarts=5))
    js = objs["JobSet"]
    assert js["spec"]["replicatedJobs"][0]["replicas"] == 3
    assert js["spec"]["failurePolicy"] == {"maxRestarts": 5}
    assert (
        js["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"] == "cloud.google.com/gke-nodepool"
    )
    env = env_of(objs)
    assert env["JAX_NUM_PROCESSES"] == "12"
    assert env["MEGASCALE_COORDINATOR_ADDRESS"] == "train-slice-0-0.train"
    assert env["MEGASCALE_SLICE_ID"]["fieldRef"]["fieldPath"] == "metadata.labels['jobset.sigs.k8s.io/job-index']"
    assert (
        env["MEGASCALE_NUM_SLICES"]["fieldRef"]["fieldPath"]
        == "metadata.labels['jobset.sigs.k8s.io/replicatedjob-replicas']"
    )
    assert "JAX_PROCESS_ID" not in env  # JAX derives it from TPU_WORKER_ID and the slice id


def test_tpu_placement_and_resources_from_catalog() -> None:
    spec = pod_spec(objects(cluster_of(TPU("v5p-32"))))
    assert spec["nodeSelector"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
        "cloud.google.com/gke-tpu-topology": "2x2x4",
    }
    res = spec["containers"][0]["resources"]
    assert res["requests"]["google.com/tpu"] == res["limits"]["google.com/tpu"] == "4"
    assert {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]


def test_gpu_pod_has_memory_backed_shm_and_gpu_placement() -> None:
    objs = objects(cluster_of(GPU("h100-80gb", 8, network="standard"), nodes=4, shm_size="32Gi"))
    spec = pod_spec(objs)
    assert spec["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}}]
    assert spec["containers"][0]["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert spec["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    rj = objs["JobSet"]["spec"]["replicatedJobs"][0]
    assert (rj["replicas"], rj["template"]["spec"]["parallelism"]) == (1, 4)


def test_indexed_job_contract_and_group_failure_semantics() -> None:
    objs = objects(cluster_of(CPU(devices=2), backend="job", nodes=3, max_restarts=2))
    job, svc = objs["Job"], objs["Service"]
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 3, 3)
    assert spec["podReplacementPolicy"] == "Failed"
    assert spec["backoffLimit"] == 2 * 3  # a group restart costs one failure per pod
    assert spec["template"]["spec"]["restartPolicy"] == "Never"  # required by podFailurePolicy
    assert spec["template"]["spec"]["subdomain"] == svc["metadata"]["name"]
    assert svc["spec"]["selector"] == {"batch.kubernetes.io/job-name": job["metadata"]["name"]}
    env = env_of(objs)
    assert env["JAX_COORDINATOR_ADDRESS"] == "train-0.train:8482"
    assert env["JAX_NUM_CPU_DEVICES"] == "2"


def test_no_token_and_explicit_names() -> None:
    objs = objects(cluster_of(CPU()))
    assert objs["ServiceAccount"]["automountServiceAccountToken"] is False
    spec = pod_spec(objs)
    assert spec["automountServiceAccountToken"] is False and spec["serviceAccountName"] == "train"
    for m in objs.values():
        assert m["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "jaxinfra"


def test_user_env_follows_the_contract_so_it_can_reference_it() -> None:
    env = pod_spec(objects(cluster_of(CPU(), env={"RANK": "$(JAX_PROCESS_ID)"})))["containers"][0]["env"]
    names = [e["name"] for e in env]
    assert names.index("RANK") > names.index("JAX_PROCESS_ID")


def test_namespace_object_only_for_non_default_namespaces() -> None:
    assert "Namespace" not in objects(cluster_of(CPU()))
    assert objects(cluster_of(CPU(), namespace="ml"))["Namespace"]["metadata"]["name"] == "ml"


@pytest.mark.parametrize("slices", [1, 4])
def test_size_does_not_multiply_objects(slices: int) -> None:
    small = manifests(cluster_of(TPU("v5p", "2x2x2")))
    huge = manifests(cluster_of(TPU("v5p", "16x16x24"), slices=slices))
    assert [m["kind"] for m in small] == [m["kind"] for m in huge]


def test_explain_env_matches_manifest_env() -> None:
    """What `explain` promises per rank is what the manifest delivers (literal values)."""
    c = cluster_of(TPU("v5e", "2x4"))
    jp = plan(c).jobs[0]
    env = env_of(objects(c))
    for rank in range(jp.processes):
        for name, value in jp.rank_env(rank).items():
            if isinstance(env.get(name), str):
                assert env[name] == value
    assert jp.rank_env(1)["JAX_PROCESS_ID"] == "1" and jp.hostname(1) == "train-slice-0-1"
