"""Kubeflow backends (JAXJob v1, TrainJob v2) and Kueue queues, per upstream conventions (docs/design.md, "The env
contracts")."""

from __future__ import annotations

from typing import Any

import pytest

from jaxinfra import CPU, GPU, TPU, Cluster, JaxJob, NodePool, SpecError, manifests
from jaxinfra.plan import plan
from jaxinfra.validate import validate_objects

pytestmark = pytest.mark.unit

OPERATOR_ENV = {"COORDINATOR_ADDRESS", "COORDINATOR_PORT", "NUM_PROCESSES", "PROCESS_ID", "PYTHONUNBUFFERED"}
TRAINER_ENV = {"JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"}


def cluster_of(accelerator: Any, backend: str, *, kueue: bool = False, spot: bool = False, **job: Any) -> Cluster:
    return Cluster(
        name="c",
        node_pools=[NodePool("pool", accelerator, spot=spot)],
        kueue=kueue,
        jobs=[JaxJob("train", image="img", node_pool="pool", backend=backend, **job)],
    )


def by_kind(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["kind"]: m for m in objs}


def env_names(container: dict[str, Any]) -> list[str]:
    return [e["name"] for e in container.get("env", [])]


def problems(**kw: Any) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as err:
        cluster_of(**kw)
    return [(p.path, p.message) for p in err.value.problems]


# --- JAXJob -----------------------------------------------------------------------------------


def test_jaxjob_follows_the_training_operator() -> None:
    objs = manifests(
        cluster_of(
            CPU(devices=2),
            "jaxjob",
            nodes=3,
            coordinator_port=1234,
            resources={"requests": {"cpu": "1"}},
            env={"RANK": "$(PROCESS_ID)"},
        )
    )
    assert [m["kind"] for m in objs] == [
        "ServiceAccount",
        "NetworkPolicy",
        "JAXJob",
    ]  # the operator makes a Service per replica
    job = objs[-1]
    assert job["apiVersion"] == "kubeflow.org/v1" and job["metadata"]["name"] == "train"
    worker = job["spec"]["jaxReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 3 and worker["restartPolicy"] == "Never"
    pod = worker["template"]["spec"]
    [c] = pod["containers"]
    assert c["name"] == "jax" and c["ports"] == [{"name": "jaxjob-port", "containerPort": 1234, "protocol": "TCP"}]
    names = env_names(c)
    assert not OPERATOR_ENV & set(names) and not TRAINER_ENV & set(names)  # the operator's are the contract
    assert names == ["JAX_INITIALIZATION_TIMEOUT", "JAX_NUM_CPU_DEVICES", "RANK"]
    assert pod["serviceAccountName"] == "train" and pod["restartPolicy"] == "Never"
    assert job["spec"]["runPolicy"] == {"cleanPodPolicy": "Running"}


def test_jaxjob_restarts_map_to_on_failure_and_backoff_limit() -> None:
    job = manifests(cluster_of(GPU("h100-80gb", 8), "jaxjob", nodes=4, max_restarts=2))[-1]
    worker = job["spec"]["jaxReplicaSpecs"]["Worker"]
    assert worker["restartPolicy"] == worker["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert job["spec"]["runPolicy"]["backoffLimit"] == 2 * 4  # container restarts summed over pods


def test_jaxjob_explain_names_the_operator() -> None:
    jp = plan(cluster_of(CPU(), "jaxjob", nodes=2)).jobs[0]
    env = jp.env_sources(1)
    assert env["COORDINATOR_ADDRESS"] == ("train-worker-0", "Training Operator")
    assert env["PROCESS_ID"] == ("1", "Training Operator") and env["COORDINATOR_PORT"] == ("8482", "Training Operator")
    assert env["JAX_INITIALIZATION_TIMEOUT"][1] == "jaxinfra"
    assert jp.hostname(1) == "train-worker-1"


# --- TrainJob ---------------------------------------------------------------------------------


def test_trainjob_with_rendered_runtime_carries_tpu_placement() -> None:
    objs = manifests(
        cluster_of(
            TPU("v5e", "4x4"), "trainjob", command=["python", "t.py"], max_restarts=3, env={"RANK": "$(JAX_PROCESS_ID)"}
        )
    )
    assert [m["kind"] for m in objs] == ["ServiceAccount", "NetworkPolicy", "TrainingRuntime", "TrainJob"]
    o = by_kind(objs)
    rt, tj = o["TrainingRuntime"], o["TrainJob"]
    assert rt["spec"]["mlPolicy"] == {"numNodes": 4, "jax": {}}
    js = rt["spec"]["template"]["spec"]
    assert js["failurePolicy"] == {"maxRestarts": 3}
    [rj] = js["replicatedJobs"]
    assert rj["name"] == "node" and rj["replicas"] == 1
    assert rj["template"]["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    pod = rj["template"]["spec"]["template"]["spec"]
    [c] = pod["containers"]
    assert c["name"] == "node" and "env" not in c and "ports" not in c and "command" not in c
    assert pod["nodeSelector"]["cloud.google.com/gke-tpu-topology"] == "4x4"
    assert {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert c["resources"]["limits"]["google.com/tpu"] == "4" and pod["serviceAccountName"] == "train"
    assert tj["spec"]["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": "train"}
    trainer = tj["spec"]["trainer"]
    assert trainer["numNodes"] == 4 and trainer["image"] == "img" and trainer["command"] == ["python", "t.py"]
    assert trainer["resourcesPerNode"]["requests"]["google.com/tpu"] == "4"
    assert [e["name"] for e in trainer["env"]] == ["JAX_INITIALIZATION_TIMEOUT", "RANK"]  # plugin's JAX_* not ours


def test_trainjob_on_upstream_runtime_renders_none() -> None:
    objs = manifests(cluster_of(CPU(devices=4), "trainjob", runtime="jax-distributed", nodes=2))
    assert [m["kind"] for m in objs] == ["ServiceAccount", "NetworkPolicy", "TrainJob"]
    tj = objs[-1]
    assert tj["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
        "name": "jax-distributed",
    }
    assert {"name": "JAX_NUM_CPU_DEVICES", "value": "4"} in tj["spec"]["trainer"]["env"]


def test_trainjob_explain_and_port_follow_the_plugin() -> None:
    jp = plan(cluster_of(GPU("h100-80gb", 8), "trainjob", nodes=2)).jobs[0]
    assert jp.coordinator_address == "train-node-0-0.train:29500"
    env = jp.env_sources(1)
    assert env["JAX_COORDINATOR_ADDRESS"] == ("train-node-0-0.train:29500", "Trainer JAX plugin")
    assert env["JAX_PROCESS_ID"] == ("1", "Trainer JAX plugin") and env["JOB_COMPLETION_INDEX"] == (
        "1",
        "Job controller",
    )


# --- incompatible combinations ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "path", "words"),
    [
        (dict(accelerator=TPU("v5p", "2x2x4"), backend="jaxjob", slices=2), "jobs[0].backend", "MEGASCALE_SLICE_ID"),
        (dict(accelerator=TPU("v5p", "2x2x4"), backend="jaxjob"), "jobs[0].backend", "TPU_WORKER_ID"),
        (dict(accelerator=TPU("v5p", "2x2x4"), backend="trainjob", slices=2), "jobs[0].backend", "MEGASCALE_SLICE_ID"),
        (
            dict(accelerator=TPU("v5e", "2x4"), backend="trainjob", runtime="jax-distributed"),
            "jobs[0].runtime",
            "lacks",
        ),
        (
            dict(accelerator=GPU("h100-80gb", 8), backend="trainjob", runtime="jax-distributed"),
            "jobs[0].runtime",
            "/dev/shm",
        ),
        (dict(accelerator=CPU(), backend="trainjob", runtime="jax-distributed", spot=True), "jobs[0].runtime", "Spot"),
        (
            dict(accelerator=CPU(), backend="jobset", runtime="jax-distributed"),
            "jobs[0].runtime",
            "for backend='trainjob' only",
        ),
        (dict(accelerator=CPU(), backend="trainjob", coordinator_port=1234), "jobs[0].coordinator_port", "29500"),
        (
            dict(accelerator=CPU(), backend="jaxjob", env={"PROCESS_ID": "0"}),
            "jobs[0].env.PROCESS_ID",
            "Training Operator",
        ),
    ],
)
def test_incompatible_combinations_are_rejected(kw: dict[str, Any], path: str, words: str) -> None:
    [(where, message)] = problems(**kw)
    assert where == path and words in message


def test_single_host_tpu_on_jaxjob_is_fine() -> None:
    job = manifests(cluster_of(TPU("v5e", "2x2"), "jaxjob"))[-1]
    assert job["spec"]["jaxReplicaSpecs"]["Worker"]["replicas"] == 1


def test_kubeflow_names_start_with_a_letter() -> None:
    for backend in ("jaxjob", "trainjob"):
        with pytest.raises(SpecError) as err:
            Cluster(
                name="c",
                node_pools=[NodePool("p", CPU())],
                jobs=[JaxJob("1x", image="i", node_pool="p", backend=backend)],
            )
        assert [p.path for p in err.value.problems] == ["jobs[0].name"]


# --- Kueue ------------------------------------------------------------------------------------


def two_pools_with_kueue() -> Cluster:
    return Cluster(
        name="c",
        kueue=True,
        node_pools=[
            NodePool("v5p", TPU("v5p", "2x2x4")),
            NodePool("h100", GPU("h100-80gb", 8, network="standard"), spot=True),
        ],
        jobs=[
            JaxJob("big", namespace="ml", image="i", node_pool="v5p", slices=2),
            JaxJob("small", namespace="ml", image="i", node_pool="v5p"),
            JaxJob("other", namespace="team", image="i", node_pool="v5p", backend="trainjob"),
            JaxJob(
                "gpu",
                namespace="ml",
                image="i",
                node_pool="h100",
                nodes=3,
                backend="jaxjob",
                resources={"requests": {"memory": "64Gi"}},
            ),
        ],
    )


def test_kueue_objects_flavors_quota_and_local_queues() -> None:
    objs = manifests(two_pools_with_kueue())
    kinds = [m["kind"] for m in objs]
    assert kinds[:7] == [
        "Namespace",
        "Namespace",
        "ResourceFlavor",
        "ResourceFlavor",
        "ClusterQueue",
        "ClusterQueue",
        "LocalQueue",
    ]
    flavors = {m["metadata"]["name"]: m for m in objs if m["kind"] == "ResourceFlavor"}
    assert flavors["c-v5p"]["spec"] == {
        "nodeLabels": {
            "cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
            "cloud.google.com/gke-tpu-topology": "2x2x4",
        },
        "nodeTaints": [{"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}],
    }
    assert flavors["c-h100"]["spec"]["nodeLabels"]["cloud.google.com/gke-spot"] == "true"
    assert {"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NoSchedule"} in flavors["c-h100"]["spec"][
        "nodeTaints"
    ]
    cqs = {m["metadata"]["name"]: m["spec"] for m in objs if m["kind"] == "ClusterQueue"}
    tpu = cqs["c-v5p"]["resourceGroups"][0]
    assert tpu["coveredResources"] == ["google.com/tpu"]
    assert tpu["flavors"] == [{"name": "c-v5p", "resources": [{"name": "google.com/tpu", "nominalQuota": 2 * 4 * 4}]}]
    assert cqs["c-v5p"]["namespaceSelector"]["matchExpressions"][0]["values"] == ["ml", "team"]
    gpu = cqs["c-h100"]["resourceGroups"][0]
    assert gpu["coveredResources"] == ["nvidia.com/gpu", "memory"]  # every requested resource is covered
    assert [r["nominalQuota"] for r in gpu["flavors"][0]["resources"]] == [3 * 8, "192Gi"]
    lqs = sorted(
        (m["metadata"]["namespace"], m["metadata"]["name"], m["spec"]["clusterQueue"])
        for m in objs
        if m["kind"] == "LocalQueue"
    )
    assert lqs == [("ml", "h100", "c-h100"), ("ml", "v5p", "c-v5p"), ("team", "v5p", "c-v5p")]
    workloads = {m["metadata"]["name"]: m for m in objs if m["kind"] in ("JobSet", "JAXJob", "TrainJob")}
    assert {n: w["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] for n, w in workloads.items()} == {
        "big": "v5p",
        "small": "v5p",
        "other": "v5p",
        "gpu": "h100",
    }
    for m in objs:  # only the workloads carry it
        if m["kind"] not in ("JobSet", "JAXJob", "TrainJob"):
            assert "kueue.x-k8s.io/queue-name" not in m["metadata"].get("labels", {})


def test_kueue_is_opt_in_and_label_on_every_backend() -> None:
    for backend in ("jobset", "job", "jaxjob", "trainjob"):
        off = manifests(cluster_of(CPU(), backend, resources={"requests": {"cpu": "2"}}, nodes=2))
        on = manifests(cluster_of(CPU(), backend, kueue=True, resources={"requests": {"cpu": "2"}}, nodes=2))
        assert not any(m["apiVersion"].startswith("kueue") for m in off)
        assert on[-1]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "pool"
        cq = next(m for m in on if m["kind"] == "ClusterQueue")
        assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [{"name": "cpu", "nominalQuota": 4}]


def test_kueue_rules() -> None:
    assert problems(accelerator=CPU(), backend="jobset", kueue=True) == [
        ("jobs[0].resources", "Kueue counts a CPU pool's quota in requested CPU, and this job requests none")
    ]
    [(path, _)] = problems(
        accelerator=TPU("v5e-8"), backend="jobset", kueue=True, labels={"kueue.x-k8s.io/queue-name": "q"}
    )
    assert path == "jobs[0].labels.kueue.x-k8s.io/queue-name"


# --- strict validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cluster",
    [
        pytest.param(two_pools_with_kueue, id="kueue-two-pools"),
        pytest.param(lambda: cluster_of(CPU(), "trainjob", runtime="jax-distributed"), id="trainjob-upstream-runtime"),
        pytest.param(
            lambda: cluster_of(GPU("h100-80gb", 8), "trainjob", nodes=2, max_restarts=1, kueue=True),
            id="trainjob-gpu-kueue",
        ),
        pytest.param(
            lambda: cluster_of(GPU("a100-40gb", 2), "jaxjob", nodes=2, max_restarts=1, kueue=True, spot=True),
            id="jaxjob-gpu-kueue",
        ),
        pytest.param(
            lambda: cluster_of(CPU(), "job", kueue=True, resources={"limits": {"cpu": "500m"}}, nodes=3),
            id="job-cpu-kueue",
        ),
    ],
)
def test_strictly_schema_valid(cluster: Any) -> None:
    assert validate_objects(manifests(cluster()), source="kubeflow") == []
