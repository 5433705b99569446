"""jaxinfra's own GPUDirect jobs simulate: a 2-node job on each of A3 High, A3 Mega, A3 Ultra and A4, under the probe
and under --run-command (the daemon sidecar stood in, the host volumes empty private folders). What the simulation
cannot prove — the NICs, the bandwidth, the NCCL plugin — needs the hardware (docs/gpu.md)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.support.cli import simulate_cli

pytestmark = pytest.mark.simulator

MACHINES = {"a3-high": "h100-80gb", "a3-mega": "h100-mega-80gb", "a3-ultra": "h200-141gb", "a4": "b200"}

#: The training container's program: the group forms from jaxinfra's contract (docs/env-contract.md), an all-reduce
#: over its 16 devices; the pod sees what its GPUDirect stack mounts where xpk's does (the NCCL plugin's host folder:
#: an empty one here, which the installer fills on a node).
PROGRAM = """
import os, jax, jax.numpy as jnp
from jax.experimental import multihost_utils
jax.distributed.initialize(
    num_processes=int(os.environ["JAX_NUM_PROCESSES"]), process_id=int(os.environ["JAX_PROCESS_ID"]),
    initialization_timeout=int(os.environ["JAX_INITIALIZATION_TIMEOUT"]), cluster_detection_method="deactivate",
)
assert os.path.isdir("/usr/local/nvidia") and os.environ["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
total = multihost_utils.process_allgather(jnp.ones(jax.local_device_count())).sum()
assert jax.process_count() == 2 and total == 16, total
jax.distributed.shutdown()
"""


def stack(tmp: Path, gpu: str) -> Path:
    path = tmp / f"gpus_{gpu.replace('-', '_')}.py"
    path.write_text(
        textwrap.dedent(f"""
        from jaxinfra import GPU, Cluster, JaxJob, NodePool

        cluster = Cluster(
            name="gpus",
            node_pools=[NodePool("gpu", GPU({gpu!r}, 8))],
            jobs=[JaxJob("train", image="img", command=["python", "-c", {PROGRAM!r}], node_pool="gpu", nodes=2,
                         init_timeout_seconds=30)],
        )
        """)
    )
    return path


@pytest.mark.parametrize("mode", ["probe", "run-command"])
@pytest.mark.parametrize("machine", list(MACHINES))
def test_each_gpudirect_job_simulates(machine: str, mode: str, tmp_path: Path) -> None:
    args = ["--run-command"] if mode == "run-command" else []
    rc, report, out = simulate_cli(str(stack(tmp_path, MACHINES[machine])), *args, "--timeout", "90", tmp=tmp_path)
    assert rc == 0, out
    [workload] = report["workloads"]
    assert workload["verdict"] == "succeeded", out
    [attempt] = workload["attempts"]
    assert [p["exit_code"] for p in attempt["pods"]] == [0, 0]
    daemons = [c for p in attempt["pods"] for c in p["containers"] if c["role"] == "sidecar"]
    if mode == "run-command" and machine in ("a3-high", "a3-mega"):  # the daemon ran beside the program, stood in
        assert len(daemons) == 2 and all(c["started"] is not None for c in daemons), daemons
    else:  # RDMA has no daemon; the probe runs the JAX container alone
        assert daemons == []
