"""Only a manifest's own env (jaxinfra's contract, for its CPU pools) sets JAX's host device count in a CPU pod under
`--run-command` (simulate/jaxinfra_sim/kubelet/container.py `process_env`): a stranger's program keeps its own choice
(Kubeflow's spmd-mnist example forces `cpu_count()` devices through `XLA_FLAGS`). A TPU or GPU pod's chips are still
stood in for by as many CPU devices, unless its program sets its own count."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.support.cli import simulate_cli

pytestmark = pytest.mark.simulator

SEEN = (
    "import os, sys, jax; "
    "print('DEVICES', jax.device_count(), os.environ.get('JAX_NUM_CPU_DEVICES', 'unset'), file=sys.stderr)"
)


def stranger(flags: str | None, gpus: int = 0) -> dict[str, object]:
    """A one-pod Job that is nobody's contract: its own program, its own XLA_FLAGS, `gpus` GPUs."""
    env = [{"name": "XLA_FLAGS", "value": flags}] if flags else []
    container: dict[str, object] = {"name": "main", "image": "python:3.11", "command": ["python", "-c", SEEN]}
    container["env"] = env
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "stranger"},
        "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }


def seen(report: dict[str, object]) -> list[str]:
    """Each pod's DEVICES line, as its program printed it on stderr."""
    pods = [p for w in report["workloads"] for p in w["attempts"][0]["pods"]]  # type: ignore[index, union-attr]
    return [line for p in pods for line in p["stderr_tail"] if line.startswith("DEVICES")]


FLAGS = "--xla_force_host_platform_device_count=3"


@pytest.mark.parametrize(
    ("flags", "gpus", "expected"),
    [(FLAGS, 0, "3 unset"), (None, 0, "1 unset"), (None, 2, "2 2"), (FLAGS, 2, "3 unset")],
    ids=["cpu-own-flags", "cpu-default", "gpu-stood-in", "gpu-own-flags"],
)
def test_a_strangers_program_keeps_its_own_host_device_count(
    tmp_path: Path, flags: str | None, gpus: int, expected: str
) -> None:
    """A CPU pod gets no JAX_NUM_CPU_DEVICES: its XLA_FLAGS decide (3 devices), else JAX's default (1); a GPU pod's 2
    chips are 2 CPU devices, unless its XLA_FLAGS set a count (3)."""
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(stranger(flags, gpus)))
    rc, report, out = simulate_cli(str(path), "--run-command", "--timeout", "90", tmp=tmp_path)
    assert rc == 0, out
    assert seen(report) == [f"DEVICES {expected}"], out


def test_jaxinfras_own_pods_still_get_their_devices(tmp_path: Path) -> None:
    """A jaxinfra stack's GPU pods (8 chips each, no JAX_NUM_CPU_DEVICES in their contract) see 8 CPU devices each; a
    CPU pool's pods see the count their manifest carries."""
    program = "import os, sys; print('DEVICES', os.environ.get('JAX_NUM_CPU_DEVICES', 'unset'), file=sys.stderr)"
    path = tmp_path / "stack.py"
    path.write_text(
        textwrap.dedent(f"""
        from jaxinfra import CPU, GPU, Cluster, JaxJob, NodePool

        cluster = Cluster(
            name="own",
            node_pools=[NodePool("gpu", GPU("h100-80gb", 8)), NodePool("cpu", CPU(devices=3))],
            jobs=[
                JaxJob("g", image="img", command=["python", "-c", {program!r}], node_pool="gpu", nodes=1),
                JaxJob("c", image="img", command=["python", "-c", {program!r}], node_pool="cpu", nodes=1),
            ],
        )
        """)
    )
    rc, report, out = simulate_cli(str(path), "--run-command", "--timeout", "90", tmp=tmp_path)
    assert rc == 0, out
    assert sorted(seen(report)) == ["DEVICES 3", "DEVICES 8"], out
