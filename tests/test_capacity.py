"""Capacity on a node pool (issue #42): on-demand by default, Spot, a named reservation or flex-start (DWS queued
provisioning); one per pool, and flex-start only where GKE and Kueue can serve it, every problem reported at once."""

from __future__ import annotations

from typing import Any

import pytest

from jaxinfra import CPU, GPU, TPU, Cluster, JaxJob, NodePool, SpecError

pytestmark = pytest.mark.unit


def _cluster(*pools: NodePool, kueue: bool = True, **job: Any) -> Cluster:
    return Cluster(
        name="c",
        node_pools=list(pools),
        jobs=[JaxJob("train", image="img", node_pool=pools[0].name, **job)],
        kueue=kueue,
    )


def _problems(*pools: NodePool, kueue: bool = True) -> dict[str, Any]:
    with pytest.raises(SpecError) as err:
        _cluster(*pools, kueue=kueue)
    assert all(p.fix and p.message for p in err.value.problems)
    return {p.path: p for p in err.value.problems}


def test_each_capacity_is_one_field_and_on_demand_is_the_default() -> None:
    cluster = _cluster(
        NodePool("a", GPU("h100-80gb", 8)),
        NodePool("b", GPU("h100-80gb", 8), spot=True),
        NodePool("c", TPU("v5p", "2x2x4"), reservation="my-v5p-res"),
        NodePool("d", TPU("v5e", "2x4"), flex_start=True),
    )
    assert [p.capacity for p in cluster.node_pools] == ["on-demand", "spot", "reservation", "flex-start"]


def test_a_pool_takes_one_capacity_and_a_reservation_a_compute_engine_name() -> None:
    found = _problems(
        NodePool("a", GPU("h100-80gb", 8), spot=True, flex_start=True),
        NodePool("b", GPU("h100-80gb", 8), reservation="res", flex_start=True),
        NodePool("c", GPU("h100-80gb", 8), reservation="My_Res"),
        NodePool("d", GPU("h100-80gb", 8), reservation="projects/p/reservations/r"),  # a project id has 6 or more
    )
    assert set(found) == {
        "node_pools[0].flex_start",
        "node_pools[1].flex_start",
        "node_pools[2].reservation",
        "node_pools[3].reservation",
    }
    assert found["node_pools[0].flex_start"].message == (
        "spot and flex_start are each a way to obtain the pool's nodes; a node pool has one"
    )
    assert "flex_start=True" in found["node_pools[1].flex_start"].fix
    assert found["node_pools[2].reservation"].value == "My_Res"


def test_flex_start_needs_an_accelerator_and_kueue_all_problems_at_once() -> None:
    with pytest.raises(SpecError) as err:
        _cluster(NodePool("cpu", CPU(4), flex_start=True), kueue=False, resources={"requests": {"cpu": "1"}})
    [accelerator, kueue] = err.value.problems
    assert (accelerator.path, kueue.path) == ("node_pools[0].flex_start",) * 2
    assert "obtains GPU and TPU nodes; pool cpu is CPU" in accelerator.message
    assert "ProvisioningRequest" in kueue.message and kueue.fix == "set Cluster(kueue=True), or remove flex_start"
    assert _cluster(NodePool("gpu", GPU("h100-80gb", 8), flex_start=True), nodes=2).pool("gpu").flex_start


def _kueue(cluster: Cluster) -> dict[tuple[str, str], dict[str, Any]]:
    from jaxinfra import manifests

    return {(m["kind"], m["metadata"]["name"]): m for m in manifests(cluster) if m["apiVersion"].startswith("kueue")}


def test_a_flex_start_pool_is_admitted_through_a_provisioning_request_check_and_its_pods_select_its_nodes() -> None:
    from jaxinfra import manifests
    from jaxinfra.validate import validate_objects

    cluster = Cluster(
        name="c",
        kueue=True,
        node_pools=[NodePool("h100", GPU("h100-80gb", 8), flex_start=True), NodePool("l4", GPU("l4", 1))],
        jobs=[JaxJob("train", image="i", node_pool="h100", nodes=2), JaxJob("serve", image="i", node_pool="l4")],
    )
    objects = _kueue(cluster)
    assert objects["AdmissionCheck", "c-h100-flex-start"]["spec"] == {
        "controllerName": "kueue.x-k8s.io/provisioning-request",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "c-h100-flex-start"},
    }
    assert objects["ProvisioningRequestConfig", "c-h100-flex-start"]["spec"] == {
        "managedResources": ["nvidia.com/gpu"],
        "podSetUpdates": {
            "nodeSelector": [
                {
                    "key": "autoscaling.gke.io/provisioning-request",
                    "valueFromProvisioningClassDetail": "ResizeRequestName",
                }
            ]
        },
        "provisioningClassName": "queued-provisioning.gke.io",
    }
    assert objects["ClusterQueue", "c-h100"]["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": "c-h100-flex-start"}]
    }
    assert "admissionChecksStrategy" not in objects["ClusterQueue", "c-l4"]["spec"], "an on-demand pool has no check"
    assert {k for k in objects if k[0] in ("AdmissionCheck", "ProvisioningRequestConfig")} == {
        ("AdmissionCheck", "c-h100-flex-start"),
        ("ProvisioningRequestConfig", "c-h100-flex-start"),
    }
    flavor = objects["ResourceFlavor", "c-h100"]["spec"]
    assert flavor["nodeLabels"]["cloud.google.com/gke-queued"] == "true"
    assert {"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NoSchedule"} in flavor["nodeTaints"]
    assert validate_objects(manifests(cluster)) == [], "valid against Kueue's CRDs, strictly"
    broken = [
        {**m, "spec": {**m["spec"], "provisioningClass": "x"}} if m["kind"] == "ProvisioningRequestConfig" else m
        for m in manifests(cluster)
    ]
    [problem] = validate_objects(broken)
    assert "provisioningClass" in problem.path + problem.message, problem


def test_a_shadow_of_a_flex_start_pool_needs_no_provisioning() -> None:
    from jaxinfra import Shadow

    cluster = _cluster(NodePool("h100", GPU("h100-80gb", 8), flex_start=True), nodes=2).with_changes(shadow=Shadow())
    objects = _kueue(cluster)
    assert not {k for k in objects if k[0] in ("AdmissionCheck", "ProvisioningRequestConfig")}
    assert "admissionChecksStrategy" not in objects["ClusterQueue", "c-h100"]["spec"]


def test_a_flex_start_pools_longest_kueue_name_is_checked() -> None:
    pool = "p" * 40
    with pytest.raises(SpecError) as err:
        Cluster(
            name="c" * 12,
            kueue=True,
            node_pools=[NodePool(pool, GPU("h100-80gb", 8), flex_start=True)],
            jobs=[JaxJob("t", image="i", node_pool=pool)],
        )
    [problem] = err.value.problems
    assert problem.message.startswith("Kueue AdmissionCheck and ProvisioningRequestConfig") and "64 characters" in (
        problem.message
    ), problem


def test_a_queue_priority_renders_one_workload_priority_class_per_value_that_the_workloads_name() -> None:
    from jaxinfra import manifests
    from jaxinfra.validate import validate_objects

    cluster = Cluster(
        name="c",
        kueue=True,
        node_pools=[NodePool("h100", GPU("h100-80gb", 8), flex_start=True)],
        jobs=[
            JaxJob("urgent", image="i", node_pool="h100", nodes=2, queue_priority=1000),
            JaxJob("also", image="i", node_pool="h100", queue_priority=1000, backend="job"),
            JaxJob("later", image="i", node_pool="h100"),
        ],
    )
    objects = manifests(cluster)
    [wpc] = [m for m in objects if m["kind"] == "WorkloadPriorityClass"]
    assert (wpc["metadata"]["name"], wpc["value"]) == ("c-priority-1000", 1000)
    labels = {m["metadata"]["name"]: m["metadata"]["labels"] for m in objects if m["kind"] in ("JobSet", "Job")}
    assert (
        labels["urgent"]["kueue.x-k8s.io/priority-class"]
        == labels["also"]["kueue.x-k8s.io/priority-class"]
        == ("c-priority-1000")
    )
    assert "kueue.x-k8s.io/priority-class" not in labels["later"]
    assert validate_objects(objects) == []


def test_a_queue_priority_needs_kueue_and_is_jaxinfras_label() -> None:
    with pytest.raises(SpecError) as err:
        _cluster(NodePool("h100", GPU("h100-80gb", 8)), kueue=False, queue_priority=5)
    [problem] = err.value.problems
    assert (problem.path, problem.value) == ("jobs[0].queue_priority", 5)
    assert problem.fix.startswith("set Cluster(kueue=True)")
    with pytest.raises(SpecError) as err:
        _cluster(NodePool("h100", GPU("h100-80gb", 8)), labels={"kueue.x-k8s.io/priority-class": "x"})
    [problem] = err.value.problems
    assert problem.path == "jobs[0].labels.kueue.x-k8s.io/priority-class" and "queue_priority=N" in problem.fix
    with pytest.raises(SpecError) as err:
        _cluster(NodePool("h100", GPU("h100-80gb", 8)), queue_priority=-1)
    assert [p.path for p in err.value.problems] == ["jobs[0].queue_priority"]


def test_explain_says_how_each_jobs_nodes_are_obtained_and_what_would_hold_it() -> None:
    from jaxinfra.explain import facts
    from jaxinfra.plan import plan

    cluster = Cluster(
        name="c",
        kueue=True,
        node_pools=[
            NodePool("flex", GPU("h100-80gb", 8), flex_start=True),
            NodePool("spot", GPU("l4", 1), spot=True),
            NodePool("res", TPU("v5e", "2x4"), reservation="my-res"),
            NodePool("cpu", CPU(4)),
        ],
        jobs=[
            JaxJob("a", image="i", node_pool="flex", nodes=2, queue_priority=9, topology="subblock"),
            JaxJob("b", image="i", node_pool="spot"),
            JaxJob("c", image="i", node_pool="res"),
            JaxJob("d", image="i", node_pool="cpu", resources={"requests": {"cpu": "1"}}),
        ],
    )
    said = {jp.name: dict(facts(jp)) for jp in plan(cluster).jobs}
    assert said["a"]["capacity"].startswith("flex-start (DWS queued provisioning): the pool has no node until GKE")
    assert "until AdmissionCheck c-flex-flex-start is Ready" in said["a"]["capacity"]
    assert said["a"]["queue"] == "Kueue LocalQueue default/flex, priority 9 (WorkloadPriorityClass c-priority-9)"
    assert said["a"]["topology"] == (
        "every pod within one GKE subblock (preferred: Kueue places them in as few subblocks as it can), by the nodes' "
        "cloud.google.com/gce-topology-subblock label"
    )
    assert "topology" not in said["b"]
    assert said["b"]["capacity"].startswith("Spot VMs (1 node): GKE may reclaim")
    assert said["c"]["capacity"] == "reservation my-res: it must hold all 2 nodes (a TPU slice: the whole slice)"
    assert (said["d"]["capacity"], said["d"]["queue"]) == ("on-demand VMs (1 node)", "Kueue LocalQueue default/cpu")


@pytest.mark.parametrize(
    "reservation",
    [
        "my-res",
        "projects/other-project/reservations/my-res",
        "my-res/reservationBlocks/b1",
        "a/reservationBlocks/b/reservationSubBlocks/s",
    ],
)
def test_a_reservation_is_a_name_a_shared_one_or_a_block(reservation: str) -> None:
    pool = _cluster(NodePool("v5p", TPU("v5p", "2x2x4"), reservation=reservation)).pool("v5p")
    assert (pool.reservation, pool.capacity) == (reservation, "reservation")


def test_explain_says_when_jobs_sharing_a_pool_wait_for_each_others_quota() -> None:
    from jaxinfra.explain import quota_wait
    from jaxinfra.plan import plan

    pool = NodePool("h100", GPU("h100-80gb", 8, network="standard"))
    two = Cluster(
        name="q",
        kueue=True,
        node_pools=[pool],
        jobs=[JaxJob("a", image="i", node_pool="h100", nodes=2), JaxJob("b", image="i", node_pool="h100")],
    )
    cp = plan(two)
    said = quota_wait(cp, cp.jobs[0])
    assert said is not None and said.startswith("ClusterQueue q-h100 holds its pool's largest job; with b its jobs")
    assert "nvidia.com/gpu" in said
    one = plan(two.with_changes(jobs=[two.jobs[0]]))
    assert quota_wait(one, one.jobs[0]) is None, "a job alone on its pool fits the quota sized for it"
    assert quota_wait(plan(two.with_changes(kueue=False)), plan(two.with_changes(kueue=False)).jobs[0]) is None


def test_a_topology_request_renders_gkes_topology_the_flavor_names_and_the_pods_podset_request() -> None:
    from jaxinfra import Shadow, manifests
    from jaxinfra.validate import validate_objects

    def cluster(**job: Any) -> Cluster:
        return Cluster(
            name="c",
            kueue=True,
            node_pools=[NodePool("h100", GPU("h100-80gb", 8, network="standard"), flex_start=True)],
            jobs=[JaxJob("t", image="i", node_pool="h100", nodes=2, **job)],
        )

    objects = manifests(cluster(topology="block"))
    [topology] = [m for m in objects if m["kind"] == "Topology"]
    assert (topology["metadata"]["name"], [level["nodeLabel"] for level in topology["spec"]["levels"]]) == (
        "c-gke-topology",
        [
            "cloud.google.com/gce-topology-block",
            "cloud.google.com/gce-topology-subblock",
            "cloud.google.com/gce-topology-host",
            "kubernetes.io/hostname",
        ],
    )
    [flavor] = [m for m in objects if m["kind"] == "ResourceFlavor"]
    assert flavor["spec"]["topologyName"] == "c-gke-topology"
    [jobset] = [m for m in objects if m["kind"] == "JobSet"]
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-preferred-topology": "cloud.google.com/gce-topology-block"
    }
    assert validate_objects(objects) == []
    required = manifests(cluster(topology="subblock", topology_required=True))
    [jobset] = [m for m in required if m["kind"] == "JobSet"]
    assert jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-required-topology": "cloud.google.com/gce-topology-subblock"
    }
    plain = manifests(cluster())  # no request: no Topology, no topologyName
    assert not [m for m in plain if m["kind"] == "Topology"]
    assert "topologyName" not in next(m for m in plain if m["kind"] == "ResourceFlavor")["spec"]
    shadowed = manifests(cluster(topology="block").with_changes(shadow=Shadow()))  # CPU nodes have no block labels
    assert not [m for m in shadowed if m["kind"] == "Topology"] and "podset-preferred" not in str(shadowed)


def test_a_topology_request_needs_kueue_and_a_gpu_pool_and_required_needs_a_level() -> None:
    with pytest.raises(SpecError) as err:
        _cluster(NodePool("v5e", TPU("v5e", "2x4")), kueue=False, topology="block")
    assert [p.message for p in err.value.problems] == [
        "Topology-Aware Scheduling is Kueue's, and the cluster has no Kueue",
        "GKE's block topology labels are on GPU VMs; pool v5e is tpu (a TPU slice is one placement already: its own "
        "node pool)",
    ]
    with pytest.raises(SpecError) as err:
        _cluster(NodePool("h100", GPU("h100-80gb", 8)), topology_required=True)
    [problem] = err.value.problems
    assert problem.path == "jobs[0].topology_required" and "topology='block'" in problem.fix
