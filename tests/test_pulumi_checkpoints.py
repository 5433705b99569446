"""The Pulumi program for checkpoint storage (issue 14) and the CPU shadow (issue 17), under mocks.

Checkpoints in a bucket: the bucket (or an existing one), each job's access to it as its Kubernetes
ServiceAccount's Workload Identity principal, and GKE's Cloud Storage FUSE CSI add-on, all before the job.
A claim: a typed PersistentVolumeClaim before the workload. `jaxinfra:shadow: cpu`: the shadow's objects on
one CPU pool sized for them, no accelerator pool.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from jaxinfra import manifests, stack
from jaxinfra.plan import plan
from jaxinfra.pulumi import BUCKET_ROLE, SHADOW_POOL, shadow_pods_per_node
from jaxinfra.shadow import shadow
from tests.support.paths import ROOT
from tests.support.pulumi_harness import (
    BUCKET_IAM_T,
    BUCKET_T,
    CLUSTER_T,
    EXISTING,
    GKE,
    GKE_T,
    PROJECT_NUMBER,
    WORKLOADS,
    k8s_type,
    root_config,
    run_error,
    run_program,
    write_stack,
)

pytestmark = pytest.mark.adapters

V5P = "stacks/tpu_v5p_2x2x4_x2.py"
CPU_DEV = "stacks/cpu_dev.py"


def kind(r: Any) -> str:
    return r.type.rpartition(":")[2]


def principal(namespace: str, ksa: str, project: str = "my-project") -> str:
    return (
        f"principal://iam.googleapis.com/projects/{PROJECT_NUMBER}/locations/global/workloadIdentityPools/"
        f"{project}.svc.id.goog/subject/ns/{namespace}/sa/{ksa}"
    )


# --- a bucket ---------------------------------------------------------------------------------------------


def test_the_bucket_its_grant_and_the_fuse_add_on_come_before_the_job() -> None:
    run = run_program(root_config("tpu-v5p"))  # us-east5-a, project my-project; the stack checkpoints to a bucket
    [bucket] = run.of(BUCKET_T)
    assert bucket.name == "my-project-tpu-v5p-checkpoints" and bucket.parent == (CLUSTER_T, "tpu-v5p")
    assert bucket.inputs == {
        "name": "my-project-tpu-v5p-checkpoints",
        "project": "my-project",
        "location": "US-EAST5",
        "uniformBucketLevelAccess": True,
        "hierarchicalNamespace": {"enabled": True},
    }
    assert bucket.retain_on_delete, "pulumi destroy keeps the checkpoints"
    [grant] = run.of(BUCKET_IAM_T)
    assert grant.inputs == {
        "bucket": "my-project-tpu-v5p-checkpoints",
        "role": BUCKET_ROLE,
        "member": principal("ml", "train"),
    }
    assert BUCKET_ROLE == "roles/storage.objectUser"
    assert {bucket.key, (GKE_T, "tpu-v5p")} <= grant.deps, "after its bucket and the cluster (the identity pool)"
    [gke] = run.of(GKE_T)
    assert gke.inputs["addonsConfig"] == {"gcsFuseCsiDriverConfig": {"enabled": True}}
    assert gke.inputs["workloadIdentityConfig"] == {"workloadPool": "my-project.svc.id.goog"}
    for r in run.k8s:
        if kind(r) != "Namespace":
            assert grant.key in r.deps, (r.name, "every object of the job after its access")
    [jobset] = [r for r in run.k8s if kind(r) == "JobSet"]
    volume = jobset.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["volumes"][0]
    assert volume["csi"]["volumeAttributes"]["bucketName"] == bucket.inputs["name"]
    assert run.outputs["checkpointBuckets"] == ["my-project-tpu-v5p-checkpoints"]
    assert not run.warnings, run.warnings


def test_one_bucket_many_jobs_and_existing_buckets(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        """
        from jaxinfra import GCSBucket
        cluster = Cluster(name="c", node_pools=[NodePool("cpu", CPU(devices=2))], jobs=[
            JaxJob("a", image="i", node_pool="cpu", checkpoints=GCSBucket("shared-ckpt")),
            JaxJob("b", image="i", node_pool="cpu", namespace="team", checkpoints=GCSBucket("shared-ckpt")),
            JaxJob("c", image="i", node_pool="cpu", checkpoints=GCSBucket("other-ckpt"))])
    """,
    )
    run = run_program({"jaxinfra:stack": str(path), **GKE})
    assert sorted(b.name for b in run.of(BUCKET_T)) == ["other-ckpt", "shared-ckpt"], "one bucket per name"
    grants = {g.name: g.inputs for g in run.of(BUCKET_IAM_T)}
    assert grants == {
        "shared-ckpt/default/a": {
            "bucket": "shared-ckpt",
            "role": BUCKET_ROLE,
            "member": principal("default", "a", "proj"),
        },
        "shared-ckpt/team/b": {"bucket": "shared-ckpt", "role": BUCKET_ROLE, "member": principal("team", "b", "proj")},
        "other-ckpt/default/c": {
            "bucket": "other-ckpt",
            "role": BUCKET_ROLE,
            "member": principal("default", "c", "proj"),
        },
    }
    for r in run.of(BUCKET_IAM_T):
        assert (BUCKET_T, r.inputs["bucket"]) in r.deps
    assert run.outputs["checkpointBuckets"] == ["other-ckpt", "shared-ckpt"]

    run = run_program({"jaxinfra:stack": str(path), **GKE, "jaxinfra:createBuckets": False})
    assert not run.of(BUCKET_T) and len(run.of(BUCKET_IAM_T)) == 3, "existing buckets: only the access is granted"
    assert not any(d[0] == BUCKET_T for g in run.of(BUCKET_IAM_T) for d in g.deps)


def test_without_buckets_nothing_of_storage_is_declared() -> None:
    run = run_program(root_config("gpu-h100"))  # the GPU stack declares no checkpoints
    assert not run.of(BUCKET_T) and not run.of(BUCKET_IAM_T) and "checkpointBuckets" not in run.outputs
    assert "addonsConfig" not in run.one(GKE_T, "gpu-h100").inputs
    assert not any(token == "gcp:organizations/getProject:getProject" for token, _ in run.calls)


def test_a_bucket_without_workload_identity_is_one_config_error() -> None:
    text, run = run_error({**root_config("tpu-v5p"), "jaxinfra:workloadIdentity": False})
    assert text.splitlines()[0] == "1 problem (invalid Pulumi config)"
    assert (
        "jaxinfra:workloadIdentity = False: jobs ml/train checkpoint to Cloud Storage through GKE's Cloud Storage FUSE "
        "CSI driver, which authenticates their ServiceAccounts with Workload Identity"
    ) in text
    assert not run.resources and not run.calls


def test_existing_provider_says_what_the_bucket_needs() -> None:
    run = run_program({"jaxinfra:stack": V5P, **EXISTING})
    assert not [r for r in run.resources if r.type.startswith("gcp:")] and not run.calls
    [warning] = [w for w in run.warnings if "checkpoints to gs://" in w]
    assert warning.endswith(
        f"`gcloud storage buckets add-iam-policy-binding gs://my-project-tpu-v5p-checkpoints "
        f"--role={BUCKET_ROLE} --member=principal://iam.googleapis.com/projects/PROJECT_NUMBER/locations/"
        "global/workloadIdentityPools/PROJECT_ID.svc.id.goog/subject/ns/ml/sa/train`"
    )


def test_an_existing_cluster_without_the_fuse_driver_is_told_how() -> None:
    config = {**root_config("tpu-v5p"), "jaxinfra:existingCluster": True, "jaxinfra:clusterName": "shared"}
    run = run_program(
        config,
        existing={
            "datapathProvider": "ADVANCED_DATAPATH",
            "enableShieldedNodes": True,
            "workloadIdentityConfigs": [{"workloadPool": "my-project.svc.id.goog"}],
            "addonsConfigs": [{"gcsFuseCsiDriverConfigs": [{"enabled": False}]}],
        },
    )
    assert run.warnings == [
        "GKE cluster shared has no Cloud Storage FUSE CSI driver, which the jobs' checkpoint buckets "
        "need: `gcloud container clusters update shared --location us-east5-a --project my-project "
        "--update-addons GcsFuseCsiDriver=ENABLED`"
    ]
    [grant] = run.of(BUCKET_IAM_T)
    assert not any(d[0] == GKE_T for d in grant.deps), "no cluster created to wait for"


# --- a claim ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", [GKE, EXISTING], ids=["gke", "existing"])
def test_the_claim_is_typed_not_awaited_and_before_the_workload(provider: dict[str, str]) -> None:
    run = run_program({"jaxinfra:stack": CPU_DEV, **provider})
    [claim] = [r for r in run.k8s if kind(r) == "PersistentVolumeClaim"]
    assert claim.type == "kubernetes:core/v1:PersistentVolumeClaim" and claim.name == "default/train-checkpoints"
    assert claim.inputs["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}, "it binds once the pods exist"
    assert claim.inputs["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "10Gi"}}}
    assert (claim.replace_on_changes, claim.delete_before_replace) == ([], False), "patched, never replaced (its data)"
    [workload] = [r for r in run.k8s if kind(r) in WORKLOADS]
    assert claim.key in workload.deps
    assert not run.of(BUCKET_T) and not run.of(BUCKET_IAM_T)


# --- jaxinfra:shadow ---------------------------------------------------------------------------------------


def test_the_shadow_of_a_tpu_stack_on_one_cpu_pool_sized_for_it() -> None:
    run = run_program({**root_config("tpu-v5p"), "jaxinfra:shadow": "cpu"})
    cluster = shadow(stack.load(ROOT / V5P))
    rendered = {(k8s_type(m), m["metadata"]["name"], m["metadata"].get("namespace")): m for m in manifests(cluster)}
    got = {(r.type, r.inputs["metadata"]["name"], r.inputs["metadata"].get("namespace")): r for r in run.k8s}
    assert sorted(got) == sorted(rendered), "exactly the objects of `jaxinfra synth --shadow cpu`"
    for key, r in got.items():
        m = rendered[key]
        meta = {
            **m["metadata"],
            **(
                {"annotations": {**m["metadata"].get("annotations", {}), "pulumi.com/skipAwait": "true"}}
                if key[0].rpartition(":")[2] in WORKLOADS | {"Service"}
                else {}
            ),
        }
        assert r.inputs == {**m, "metadata": meta}
    assert "google.com/tpu" not in str([r.inputs for r in run.k8s]), "no TPU resource, selector or toleration left"
    assert sorted(run.pools) == [SHADOW_POOL], "no accelerator pool"
    pool = run.pools[SHADOW_POOL]
    assert pool.inputs["nodeCount"] == 1 and pool.inputs["nodeConfig"]["machineType"] == "e2-standard-4"
    assert "guestAccelerators" not in pool.inputs["nodeConfig"] and "placementPolicy" not in pool.inputs
    assert pool.inputs["nodeConfig"]["shieldedInstanceConfig"]["enableSecureBoot"], "a CPU pool"
    for r in run.k8s:
        if kind(r) != "Namespace":
            assert pool.key in r.deps, r.name
    assert run.outputs["nodePools"] == {SHADOW_POOL: [SHADOW_POOL]}
    assert run.of(BUCKET_T), "the checkpoints stay where they were declared"
    assert run.controller("jobset").deps >= {pool.key}


def test_shadow_pods_per_node_follow_gkes_allocatable() -> None:
    """e2-standard-4 (4 vCPUs, 16 GiB): GKE keeps 60 + 10 + 2 x 5 = 80m CPU, and 1 GiB + 0.8 + 0.8 + 100 MiB; jaxinfra
    keeps 0.5 CPU and 512 MiB for GKE's DaemonSets. 3.42 CPU / 100m = 34 pods; (16384 - 2662.4 - 100 - 512) MiB / 256
    = 51 pods: 34, CPU bound. Memory bound at 1 GiB: 12.8 of them."""
    default = shadow(stack.load(ROOT / V5P)).shadow
    assert shadow_pods_per_node(default) == 34
    assert shadow_pods_per_node(default.model_copy(update={"memory": "1Gi"})) == 12
    assert shadow_pods_per_node(default.model_copy(update={"cpu": "10m", "memory": "10Mi"})) == 110, "GKE's pod limit"
    assert shadow_pods_per_node(default.model_copy(update={"cpu": "4"})) == 0


def test_a_large_shadow_gets_the_nodes_all_its_pods_need(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        """
        from jaxinfra import Shadow
        cluster = Cluster(name="big", shadow=Shadow(memory="1Gi"), node_pools=[NodePool("v5p", TPU("v5p", "4x4x8"))],
                          jobs=[JaxJob("a", image="i", command=["python", "-m", "train"], node_pool="v5p", slices=2),
                                JaxJob("b", image="i", node_pool="v5p", namespace="team")])
    """,
    )
    run = run_program({"jaxinfra:stack": str(path), **GKE, "jaxinfra:shadow": "cpu"})
    cp = plan(shadow(stack.load(path)))
    pods = sum(jp.processes for jp in cp.jobs)
    assert pods == 96
    nodes = run.pools[SHADOW_POOL].inputs["nodeCount"]
    per_node = shadow_pods_per_node(cp.shadow)
    assert nodes == math.ceil(pods / per_node) == 8, "96 pods of 1Gi, 12 to a node"


def test_bad_shadow_config_is_one_error(tmp_path: Path) -> None:
    text, run = run_error({**root_config("tpu-v5p"), "jaxinfra:shadow": "gpu"})
    assert "jaxinfra:shadow = 'gpu': not one of the choices; fix: use one of cpu" in text and not run.resources
    path = write_stack(
        tmp_path,
        """
        from jaxinfra import Shadow
        cluster = Cluster(name="fat", shadow=Shadow(cpu="8"), node_pools=[NodePool("cpu", CPU())],
                          jobs=[JaxJob("a", image="i", node_pool="cpu")])
    """,
    )
    text, run = run_error({"jaxinfra:stack": str(path), **GKE, "jaxinfra:shadow": "cpu"})
    assert (
        "jaxinfra:shadow = 'cpu': a shadow pod requests 8 CPU and 256Mi, more than one e2-standard-4 node of the "
        "shadow pool can give it"
    ) in text and not run.resources


def test_the_shadow_on_an_existing_cluster_is_its_objects_alone() -> None:
    run = run_program({"jaxinfra:stack": V5P, **EXISTING, "jaxinfra:shadow": "cpu"})
    assert not run.pools and not [r for r in run.resources if r.type.startswith("gcp:")]
    want = sorted((k8s_type(m), m["metadata"]["name"]) for m in manifests(shadow(stack.load(ROOT / V5P))))
    assert sorted((r.type, r.inputs["metadata"]["name"]) for r in run.k8s) == want
