"""Several JAX processes per pod (issue #57, item 2): a pod whose command starts one process per GPU holds that many
processes of the group, whose size, ranks and devices follow; the probe runs that many in each pod, `explain` says so.

The manifest (tests/manifests/indexed_job_processes_per_gpu.yaml) is in the style of NVIDIA/JAX-Toolbox's GPU scripts
(.github/container/test-maxtext.sh @ bcbbfa5: one process per GPU, rank = pod index x GPUs per pod + local index), not
copied: 2 pods of 2 GPUs, 4 processes, the coordinator and the count in the env, each rank computed in a shell loop.
On a cluster its 4 processes join one group of 4 and the Job completes; with JAX_NUM_PROCESSES "2" (the pods counted,
not the processes) the processes of ranks 2 and 3 get JAX's ValueError (process_id must be below num_processes,
jax-ml/jax v0.10.2 jax/_src/distributed.py) and the Job fails (backoffLimit 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxinfra.admission import Request
from jaxinfra_sim.cluster import sources
from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.cluster.pending import lines, pending
from jaxinfra_sim.core.model import Launch
from tests.support.cli import simulate_cli
from tests.support.paths import MANIFESTS

pytestmark = pytest.mark.simulator

RIGHT = (MANIFESTS / "indexed_job_processes_per_gpu.yaml").read_text()
PODS_COUNTED = RIGHT.replace('value: "4"', 'value: "2"')


def run(tmp_path: Path, text: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    (tmp_path / "job.yaml").write_text(text)
    return simulate_cli(str(tmp_path / "job.yaml"), "--timeout", "120", *extra, tmp=tmp_path)


@pytest.mark.unit
def test_the_group_counts_each_pods_processes() -> None:
    """Each pod holds 2 processes of 1 device, ranks 0-1 and 2-3: the group is 4 processes, 2 per host of 2 chips."""
    [w] = emulate(list(yaml.safe_load_all(RIGHT))).workloads
    assert w.problems == (), w.problems
    assert (w.process_count, w.chips_per_host) == (4, 2)
    assert [(p.rank, p.process_devices) for p in w.pods] == [(0, (1, 1)), (2, (1, 1))]
    assert w.pods[0].processes is not None and w.pods[0].processes.source is Launch.SHELL_LOOP
    assert any("its launcher (a shell loop) tells each process its part of the contract" in n for n in w.notes)
    source = sources.admitted("job.yaml", [Request("job.yaml", i, d) for i, d in enumerate(yaml.safe_load_all(RIGHT))])
    said = list(lines(pending(source)[0]))
    assert said[0].startswith(
        "  JAX group: 4 processes in 2 pods, each pod 2 JAX processes (1 device each) in jax: a shell loop"
    ), said


@pytest.mark.unit
def test_a_count_of_pods_where_the_pods_hold_processes_is_refused() -> None:
    [w] = emulate(list(yaml.safe_load_all(PODS_COUNTED))).workloads
    [problem] = w.problems
    assert problem.message == "the process count is 2 but the workload has 4 JAX processes (2 pods) (and 1 more pod)"
    assert problem.fix == "set JAX_NUM_PROCESSES to 4"


def test_the_probe_runs_each_pods_processes(tmp_path: Path) -> None:
    """The probe forks 2 processes in each pod, ranks 0..3, each passing every check; the pods succeed."""
    rc, report, out = run(tmp_path, RIGHT)
    [w] = report["workloads"]
    assert (rc, w["verdict"]) == (0, "succeeded"), out
    pods = w["attempts"][0]["pods"]
    assert [p["rank"] for p in pods] == [0, 2]
    assert [[(q["rank"], q["ok"]) for q in p["processes"]] for p in pods] == [
        [(0, True), (1, True)],
        [(2, True), (3, True)],
    ]


def test_a_count_of_pods_fails_before_anything_runs(tmp_path: Path) -> None:
    """JAX_NUM_PROCESSES 2 for 4 processes: refused before anything runs, under the probe and under --run-command
    (what the env sets is checked in both), as the cluster fails it."""
    for extra in ((), ("--run-command",)):
        rc, report, out = run(tmp_path, PODS_COUNTED, *extra)
        [w] = report["workloads"]
        assert (rc, w["verdict"], w["attempts"]) == (1, "failed", []), out
        assert "4 JAX processes (2 pods)" in w["problems"][0]["message"], out


def test_the_commands_own_processes_join_as_on_a_cluster(tmp_path: Path) -> None:
    """Under --run-command the loop starts the 4 processes itself: each sees the group's 4 devices (1 per process, a
    GPU's share), and the Job completes."""
    loud = RIGHT.replace("          ' &", "          ' >&2 &")  # the report keeps each pod's stderr tail
    rc, report, out = run(tmp_path, loud, "--run-command")
    [w] = report["workloads"]
    assert (rc, w["verdict"]) == (0, "succeeded"), out
    said = [line for p in w["attempts"][0]["pods"] for line in p["stderr_tail"]]
    assert sorted(said) == [f"process {rank} of 4 sees 4 devices" for rank in range(4)], said


TWO_CONTAINERS = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: tpu7x-run
spec:
  replicatedJobs:
  - name: slice
    replicas: 1
    template:
      spec:
        completions: 2
        parallelism: 2
        completionMode: Indexed
        backoffLimit: 0
        template:
          spec:
            restartPolicy: Never
            nodeSelector:
              cloud.google.com/gke-tpu-accelerator: tpu-v5-lite-podslice
              cloud.google.com/gke-tpu-topology: 2x4
            containers:
            - name: jax-tpu-1
              image: ghcr.io/example/jax:tpu
              command: [python3, train.py]
              resources:
                limits:
                  google.com/tpu: 2
            - name: jax-tpu-2
              image: ghcr.io/example/jax:tpu
              command: [python3, train.py]
              resources:
                limits:
                  google.com/tpu: 2
"""


@pytest.mark.unit
def test_two_tpu_containers_each_hold_half_the_hosts_chips() -> None:
    """xpk renders two main containers per pod on a TPU VM whose chips it divides among them (AI-Hypercomputer/xpk
    @ 367c838 src/xpk/core/docker_container.py `get_main_container`, docker_resources.py): each is a JAX process, so 2
    hosts of 4 chips are 4 processes of 2 devices, the group's 8 devices, not 2 processes of 2 (4 devices)."""
    [w] = emulate(list(yaml.safe_load_all(TWO_CONTAINERS))).workloads
    assert w.problems == (), w.problems
    assert (w.process_count, w.chips_per_host) == (4, 4)
    assert [(p.rank, p.process_devices) for p in w.pods] == [(0, (2, 2)), (2, (2, 2))]
    assert w.pods[0].processes is not None and w.pods[0].processes.containers == ("jax-tpu-1", "jax-tpu-2")


def test_the_probe_runs_a_process_for_each_tpu_container(tmp_path: Path) -> None:
    """The probe runs both containers' processes of each pod: 4 processes, each with its 2 devices, seeing the job's 8
    (where the first container alone would make 2 processes seeing 4)."""
    rc, report, out = run(tmp_path, TWO_CONTAINERS)
    [w] = report["workloads"]
    assert (rc, w["verdict"]) == (0, "succeeded"), out
    processes = [q for p in w["attempts"][0]["pods"] for q in p["processes"]]
    assert [q["rank"] for q in processes] == [0, 1, 2, 3], processes
    assert {(q["local_devices"], q["global_devices"]) for q in processes} == {(2, 8)}, processes
