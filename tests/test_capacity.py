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
    )
    assert set(found) == {"node_pools[0].flex_start", "node_pools[1].flex_start", "node_pools[2].reservation"}
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
