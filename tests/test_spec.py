"""Validation: every bad input is reported at once, each with its path, value and a fix."""

from __future__ import annotations

from typing import Any

import pytest

from jaxinfra import CPU, GPU, TPU, Cluster, ConfigMapRef, JaxJob, NodePool, SecretRef, SpecError

pytestmark = pytest.mark.unit


def problems(**cluster: Any) -> dict[str, Any]:
    with pytest.raises(SpecError) as err:
        Cluster(**{"name": "c", **cluster})
    assert all(p.fix and p.message for p in err.value.problems)
    return {p.path: p for p in err.value.problems}


def job(**kw: Any) -> Any:
    return JaxJob(**{"name": "train", "image": "img", "node_pool": "pool", **kw})


def test_local_problems_across_objects_are_reported_together() -> None:
    found = problems(
        node_pools=[
            NodePool("pool", TPU("v9", "2x2")),
            NodePool("b", TPU("v5e", "2x3")),
            NodePool("g", GPU("h100-80gb", 16)),
        ],
        jobs=[job(coordinator_port=70000, backend="slurm", nodes=0), job(name="Bad_Name", slices=-1, typo=1)],
    )
    assert set(found) == {
        "node_pools[0].accelerator.generation",
        "node_pools[1].accelerator.topology",
        "node_pools[2].accelerator.count",
        "jobs[0].coordinator_port",
        "jobs[0].backend",
        "jobs[0].nodes",
        "jobs[1].name",
        "jobs[1].slices",
        "jobs[1].typo",
    }
    assert found["node_pools[0].accelerator.generation"].value == "v9"
    assert "v5e" in found["node_pools[0].accelerator.generation"].fix
    assert "2x4" in found["node_pools[1].accelerator.topology"].fix
    assert "8" in found["node_pools[2].accelerator.count"].message
    assert found["jobs[0].coordinator_port"].value == 70000 and "65535" in found["jobs[0].coordinator_port"].fix
    assert "jobset" in found["jobs[0].backend"].fix


def test_env_reference_problems_point_at_the_reference_field() -> None:
    """Paths name the user's own keys and fields, never a tagged union's tag (env keys that look
    like tags stay)."""
    found = problems(
        node_pools=[NodePool("pool", CPU(devices=2))],
        jobs=[
            job(
                env={
                    "A": SecretRef("Bad_Name", "k"),
                    "B": ConfigMapRef("ok", ""),
                    "secret": SecretRef("s", ""),
                    "cpu": 3,
                }
            )
        ],
    )
    assert set(found) == {"jobs[0].env.A.name", "jobs[0].env.B.key", "jobs[0].env.secret.key", "jobs[0].env.cpu"}


def test_cross_object_problems_are_reported_together() -> None:
    found = problems(
        node_pools=[NodePool("pool", TPU("v5e", "2x2")), NodePool("gpu", GPU("l4", 1))],
        jobs=[
            job(slices=2),
            job(name="a", node_pool="pol"),
            job(name="b", node_pool="gpu", slices=2),
            job(name="x" * 60),
        ],
    )
    assert "single-host" in found["jobs[0].slices"].message
    assert found["jobs[1].node_pool"].fix.startswith("use one of pool")
    assert "nodes" in found["jobs[2].slices"].fix
    name = found["jobs[3].name"]
    assert "x" * 60 + "-slice-0-0" in name.message and "63" in name.message


def test_hostname_limit_counts_the_longest_index() -> None:
    # JobSet fits "<name>-slice-<j>-<p>-xxxxx" in 63: 47 + len("-slice-7-1-xxxxx") = 63 fits
    Cluster(name="c", node_pools=[NodePool("pool", TPU("v5e", "2x4"))], jobs=[job(name="x" * 47, slices=8)])
    with pytest.raises(SpecError):  # 11 slices -> "-slice-10-1-xxxxx" is 64
        Cluster(name="c", node_pools=[NodePool("pool", TPU("v5e", "2x4"))], jobs=[job(name="x" * 47, slices=11)])


def test_aliases_resolve_and_normalize() -> None:
    c = Cluster(name="c", node_pools=[NodePool("pool", TPU("v5p-16")), NodePool("g", GPU("h100", 8))], jobs=[job()])
    assert (c.node_pools[0].accelerator.generation, c.node_pools[0].accelerator.topology) == ("v5p", "2x2x2")
    assert c.node_pools[1].accelerator.type == "h100-80gb"


def test_validated_objects_can_be_reused_and_backend_overridden() -> None:
    c = Cluster(name="c", node_pools=[NodePool("pool", CPU(2))], jobs=[job(nodes=2)])
    again = Cluster(name="d", node_pools=c.node_pools, jobs=c.jobs)
    assert again.jobs == c.jobs
    assert c.with_backend("job").jobs[0].backend == "job"
    assert c.with_backend("job").jobs[0].nodes == 2


def test_gpu_tpu_mixups_are_explained() -> None:
    found = problems(node_pools=[NodePool("pool", TPU("v5e", "2x4"))], jobs=[job(nodes=3)])
    assert "slices" in found["jobs[0].nodes"].fix


def test_resource_conflicts_with_the_accelerator() -> None:
    found = problems(
        node_pools=[NodePool("pool", GPU("l4", 2))], jobs=[job(resources={"limits": {"nvidia.com/gpu": 4}})]
    )
    assert "jobs[0].resources.limits.nvidia.com/gpu" in found


def test_bad_quantity_label_and_env() -> None:
    found = problems(
        node_pools=[NodePool("pool", CPU())],
        jobs=[
            job(
                resources={"requests": {"memory": "lots"}},
                labels={"app.kubernetes.io/name": "x"},
                env={"JAX_PROCESS_ID": "3"},
                annotations={"bad key!": "v"},
            )
        ],
    )
    assert set(found) == {
        "jobs[0].resources.requests.memory",
        "jobs[0].labels.app.kubernetes.io/name",
        "jobs[0].env.JAX_PROCESS_ID",
        "jobs[0].annotations.bad key!",
    }
