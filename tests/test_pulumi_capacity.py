"""A node pool's capacity under `pulumi.runtime.set_mocks` (issue #42): what GKE is given for on-demand, Spot, a
reservation and flex-start with queued provisioning (GKE's DWS guide, how-to/provisioningrequest; xpk's flex-start
capacity arguments), and the Kueue objects that obtain a flex-start pool's nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.pulumi_harness import EXISTING, GKE, run_program, write_stack

pytestmark = pytest.mark.adapters

STACK = """
cluster = Cluster(name="cap", kueue=True, node_pools=[
    NodePool("demand", GPU("l4", 1)),
    NodePool("h100", GPU("h100-80gb", 8, network="standard"), flex_start=True),
    NodePool("v5p", TPU("v5p", "2x2x4"), flex_start=True),
], jobs=[
    JaxJob("a", image="i", node_pool="demand", nodes=2),
    JaxJob("b", image="i", node_pool="h100", nodes=3, queue_priority=100, topology="block"),
    JaxJob("c", image="i", node_pool="v5p", slices=2),
])
"""


def test_a_flex_start_pool_is_a_queued_provisioning_pool_autoscaled_from_zero_to_its_hosts(tmp_path: Path) -> None:
    run = run_program({"jaxinfra:stack": str(write_stack(tmp_path, STACK)), **GKE})
    pools = {name: r.inputs for name, r in run.pools.items()}
    assert sorted(pools) == ["demand", "h100", "v5p-0", "v5p-1"]
    h100 = pools["h100"]
    assert h100["queuedProvisioning"] == {"enabled": True}
    assert h100["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 3, "locationPolicy": "ANY"}
    assert (h100["initialNodeCount"], "nodeCount" in h100) == (0, False)
    assert h100["management"] == {"autoRepair": False, "autoUpgrade": True}
    assert h100["nodeConfig"]["flexStart"] is True
    assert h100["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    for name in ("v5p-0", "v5p-1"):  # each slice's pool: from 0 to the whole slice, which GKE provisions at once
        assert pools[name]["autoscaling"]["totalMaxNodeCount"] == 4
        assert pools[name]["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "2x2x4"}
    demand = pools["demand"]  # on-demand: a fixed size, no queue
    assert demand["nodeCount"] == 2
    assert not {"queuedProvisioning", "autoscaling", "management"} & set(demand)
    assert not {"flexStart", "spot", "reservationAffinity"} & set(demand["nodeConfig"])


def test_the_kueue_objects_of_a_flex_start_pool_reach_the_cluster(tmp_path: Path) -> None:
    from jaxinfra import manifests, stack

    path = write_stack(tmp_path, STACK)
    run = run_program({"jaxinfra:stack": str(path), **GKE})
    by_kind: dict[str, dict[str, dict]] = {}
    for r in run.k8s:
        by_kind.setdefault(r.inputs["kind"], {})[r.inputs["metadata"]["name"]] = r.inputs
    assert (
        sorted(by_kind["AdmissionCheck"])
        == sorted(by_kind["ProvisioningRequestConfig"])
        == [
            "cap-h100-flex-start",
            "cap-v5p-flex-start",
        ]
    )
    config = by_kind["ProvisioningRequestConfig"]["cap-v5p-flex-start"]["spec"]
    assert (config["provisioningClassName"], config["managedResources"]) == (
        "queued-provisioning.gke.io",
        ["google.com/tpu"],
    )
    queues = by_kind["ClusterQueue"]
    assert queues["cap-h100"]["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": "cap-h100-flex-start"}]
    }
    assert "admissionChecksStrategy" not in queues["cap-demand"]["spec"]
    assert list(by_kind["Topology"]) == ["cap-gke-topology"]
    assert by_kind["ResourceFlavor"]["cap-h100"]["spec"]["topologyName"] == "cap-gke-topology"
    [priority] = by_kind["WorkloadPriorityClass"].values()
    assert (priority["metadata"]["name"], priority["value"]) == ("cap-priority-100", 100)
    # as rendered, its top-level value and description too (not a spec, which pulumi_kubernetes' CustomResource takes)
    assert priority == next(m for m in manifests(stack.load(path)) if m["kind"] == "WorkloadPriorityClass")
    kueue_installed = {res.key for res in run.of_parent("kueue")}
    for r in run.k8s:  # every Kueue object after Kueue itself
        if r.inputs["apiVersion"].startswith("kueue.x-k8s.io/"):
            assert kueue_installed & r.deps, r.name


def test_an_existing_cluster_is_told_it_needs_a_queued_provisioning_pool(tmp_path: Path) -> None:
    path = str(write_stack(tmp_path, STACK))
    warned = run_program({"jaxinfra:stack": path, **EXISTING}).warnings
    flex = [w for w in warned if "is flex-start: the cluster needs a queued-provisioning node pool" in w]
    assert len(flex) == 2 and any("AdmissionCheck cap-h100-flex-start" in w for w in flex), warned
    assert not any("queued-provisioning" in w for w in run_program({"jaxinfra:stack": path, **GKE}).warnings)
