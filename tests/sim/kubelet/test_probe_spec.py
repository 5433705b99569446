"""What the kubelet tells the probe of a pod (`container._probe_spec`): one process per pod as before, or each of a
pod's several JAX processes (`Pod.processes`) with its rank the pod's times their number plus its index, and
the coordinator a launcher names where the env names none.
"""

from __future__ import annotations

import pytest

from jaxinfra_sim.core import model
from jaxinfra_sim.core.options import Options
from jaxinfra_sim.jax.k8s_detection import K8S_COORDINATOR_PORT
from jaxinfra_sim.kubelet.container import _probe_spec

pytestmark = pytest.mark.unit


def workload(env: dict[str, str], devices: int = 8, local: tuple[int, ...] = ()) -> model.Workload:
    """An Indexed Job of 2 GPU pods, `env` each (plus its JAX_PROCESS_ID where `env` has a JAX_NUM_PROCESSES), each
    holding processes of `local` devices where given (as `processes.ranked` sets them)."""
    several = model.Processes(local, ("train",) * len(local), model.Launch.PARALLEL_LAUNCH) if local else None
    pods = tuple(
        model.Pod(
            "Job/ml/llm", "ml", f"llm-{i}", f"llm-{i}", "llm", f"10.244.0.{2 + i}", 0, i, i, {}, {}, "train",
            "trainer:1", ("bash", "-c", "parallel-launch LOCAL_RANK 8 python3 t.py"), (),
            {**env, **({"JAX_PROCESS_ID": str(i)} if "JAX_NUM_PROCESSES" in env else {})}, None, devices, "gpu",
            processes=several, rank=i * len(local) if local else None,
        )
        for i in range(2)
    )  # fmt: skip
    return model.Workload("Job", "ml", "llm", pods, 1, 2, devices, model.RestartPolicy("job"))


def test_one_process_per_pod_is_what_the_probe_was_told_before() -> None:
    w = workload({"JAX_COORDINATOR_ADDRESS": "llm-0.llm:1234", "JAX_NUM_PROCESSES": "2"})
    spec = _probe_spec(w.pods[1], w, w.pods[1].env, Options())
    assert (spec.expected_rank, spec.num_processes, spec.devices_per_process, spec.hosts_per_group) == (1, 2, 8, 2)
    assert (spec.local_devices, spec.local_processes, spec.chips_per_host) == ((), 1, 8)


def test_eight_processes_per_pod_are_ranked_per_pod_and_join_the_launchers_coordinator() -> None:
    """JAX-Toolbox's MaxText Job: 8 processes per 8-GPU pod, NODE_RANK = completion index * 8 + local rank, the
    coordinator its script computes (not in the env): rank 0's pod."""
    w = workload({}, local=(1,) * 8)
    spec = _probe_spec(w.pods[1], w, w.pods[1].env, Options())
    assert (spec.expected_rank, spec.first_rank, spec.num_processes) == (8, 8, 16)
    assert (spec.devices_per_process, spec.local_processes, spec.chips_per_host) == (1, 8, 8)
    assert (spec.groups, spec.hosts_per_group, spec.rank_from) == (1, 2, "")  # no detection: the launcher says
    assert spec.coordinator == f"10.244.0.2:{K8S_COORDINATOR_PORT}"
    named = workload({"JAX_COORDINATOR_ADDRESS": "llm-0.llm:3389", "JAX_NUM_PROCESSES": "4"}, local=(4, 4))
    spec = _probe_spec(named.pods[1], named, named.pods[1].env, Options())
    assert (spec.coordinator, spec.expected_rank, spec.num_processes) == ("10.244.0.2:3389", 2, 4)
