"""How many JAX processes a pod holds, read from its containers (`launchers.processes`): commands written in the
style of the launchers' own sources (never copies), each with what a cluster runs, cited; a readable pattern, and
one whose count is not in the manifest (one process, assumed).
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from jaxinfra_sim.core import model
from jaxinfra_sim.jax.launchers import Processes, Source, processes

pytestmark = pytest.mark.unit


def pod(
    script: str | tuple[str, ...],
    accelerator: str = "gpu",
    devices: int = 8,
    env: Mapping[str, str] | None = None,
    others: tuple[model.Container, ...] = (),
) -> model.Pod:
    """A pod of a Job whose JAX container `train` runs `script` (`bash -c` around a string)."""
    command = ("bash", "-c", script) if isinstance(script, str) else script
    return model.Pod(
        "Job/ml/llm", "ml", "llm-0", "llm-0", "llm", "10.244.0.2", 0, 0, 0, {}, {}, "train", "trainer:1", command, (),
        env or {}, None, devices, accelerator, others=others,
    )  # fmt: skip


def container(name: str, role: str = "main", chips: int = 0) -> model.Container:
    return model.Container(
        name, role, "trainer:1", ("bash", "-c", "python3 train.py"), (), {}, None, (), None, None, None, chips=chips
    )


def test_jax_toolbox_parallel_launch_starts_one_process_per_gpu_with_computed_ranks() -> None:
    """JAX-Toolbox's EKS MaxText Job (.github/eks-workflow-files/maxtext-job.yaml @ bcbbfa5) starts 8 processes per
    8-GPU pod through `parallel-launch LOCAL_RANK 8`, each computing NODE_RANK from the completion index; its CI runs
    2 such pods as one group of 16 processes, green."""
    script = (
        "cat >per-process.sh <<'EOF'\n"
        "export JAX_COORDINATOR_IP=llm-0.llm JAX_COORDINATOR_PORT=3389 NNODES=16\n"
        "export NODE_RANK=$((JOB_COMPLETION_INDEX*8 + LOCAL_RANK))\n"
        "python3 -m maxtext.train model_name=tiny\n"
        "EOF\n"
        "parallel-launch LOCAL_RANK 8 bash per-process.sh\n"
    )
    found = processes(pod(script))
    assert (found.count, found.devices, found.source) == (8, (1,) * 8, Source.PARALLEL_LAUNCH)
    assert found.containers == ("train",) * 8
    ranks = "NODE_RANK=$((JOB_COMPLETION_INDEX*8 + LOCAL_RANK))"
    assert found.evidence == f"`parallel-launch LOCAL_RANK 8`; ranks `{ranks}`"


def test_a_shell_loop_over_nvidia_smis_gpus_in_the_background() -> None:
    """A loop starting one `--process_id=$((JOB_COMPLETION_INDEX*N+i))` process per GPU in the background, then
    `wait` (the GPU count as JAX-Toolbox's test-maxtext.sh reads it, `nvidia-smi -L | grep -c '^GPU'`): as many
    processes as the container's nvidia.com/gpu."""
    script = (
        "GPUS=$(nvidia-smi -L | grep -c '^GPU')\n"
        "for i in $(seq 0 $((GPUS-1))); do\n"
        "  python3 train.py --coordinator_address=llm-0.llm:1234 --num_processes=$((2*GPUS)) \\\n"
        "    --process_id=$((JOB_COMPLETION_INDEX*GPUS+i)) &\n"
        "done\n"
        "wait\n"
    )
    found = processes(pod(script, devices=4))
    assert (found.count, found.devices, found.source) == (4, (1, 1, 1, 1), Source.SHELL_LOOP)
    assert "nvidia-smi's GPU count, the container's nvidia.com/gpu: 4" in found.evidence


@pytest.mark.parametrize(
    ("argv", "count", "devices"),
    [
        (("torchrun", "--nnodes=2", "--nproc-per-node=4", "train.py"), 4, (2, 2, 2, 2)),
        (("torchrun", "--nproc_per_node", "gpu", "train.py"), 8, (1,) * 8),  # the node's GPUs
        (("python3", "-m", "torch.distributed.run", "--nproc-per-node=auto", "train.py"), 8, (1,) * 8),
        (("torchrun", "train.py"), 1, (8,)),  # torchrun's default, 1
    ],
)
def test_torchrun_style_nproc_per_node(argv: tuple[str, ...], count: int, devices: tuple[int, ...]) -> None:
    """torch/distributed/run.py (pytorch/pytorch @ 010929f) `determine_local_world_size`: an int, or `gpu`/`auto`
    for the node's accelerator count; 1 when not given."""
    found = processes(pod(argv))
    assert (found.count, found.devices, found.source) == (count, devices, Source.TORCHRUN)


@pytest.mark.parametrize(
    ("script", "source", "count"),
    [
        # MaxText reads NNODES and NODE_RANK (maxtext @ e591f30, max_utils.py initialize_jax_for_gpu); the count per
        # pod from the container's env, the starter a site's own
        (
            "export NNODES=$((2*PER_POD)) NODE_RANK=$((JOB_COMPLETION_INDEX*$PER_POD + LOCAL_RANK)); "
            "site-launch python3 -m maxtext.train",
            Source.MAXTEXT,
            2,
        ),
        # Pax's --multiprocess_gpu flags (paxml @ b397693, paxml/main.py), started by a C-style loop
        (
            "for ((i=0; i<4; i++)); do python3 -m paxml.main --multiprocess_gpu --server_addr=llm-0.llm:12345 "
            "--num_hosts=8 --host_idx=$((JOB_COMPLETION_INDEX*4+i)) & done; wait",
            Source.SHELL_LOOP,
            4,
        ),
        ("python3 -m paxml.main --multiprocess_gpu --host_idx=$((JOB_COMPLETION_INDEX*2+LOCAL))", Source.PAX, 2),
        ("python3 train.py --process-id $((JOB_COMPLETION_INDEX * 4 + SLOT))", Source.JAX_FLAGS, 4),
    ],
)
def test_ranks_computed_from_the_pods_index_give_the_processes_per_pod(script: str, source: Source, count: int) -> None:
    found = processes(pod(script, env={"PER_POD": "2"}))
    assert (found.source, found.count) == (source, count), found


def test_xpk_parallel_containers_each_hold_their_share_of_the_hosts_chips() -> None:
    """xpk renders two main containers per TPU7x pod, each `google.com/tpu: 2` of the VM's 4 chips (xpk @ 367c838,
    docker_container.py get_main_container, docker_resources.py get_main_container_resources): two JAX processes,
    so a 16-pod job is 32 processes over 64 chips, not 16 over 32."""
    found = processes(pod("python3 train.py", "tpu", 2, others=(container("train-2", chips=2),)))
    assert (found.devices, found.containers, found.source) == ((2, 2), ("train", "train-2"), Source.CONTAINERS)
    assert found.evidence == "containers train google.com/tpu: 2, train-2 google.com/tpu: 2"
    # a sidecar or a container without chips is no JAX process of the pod
    sidecars = (container("upload"), container("logs", "sidecar", chips=4))
    assert processes(pod("python3 train.py", "tpu", 4, others=sidecars)).count == 1


@pytest.mark.parametrize(
    ("script", "why"),
    [
        ("torchrun --nproc-per-node=cpu train.py", "`--nproc-per-node=cpu`"),  # this machine's CPUs, not the node's
        ("for g in $(cat /etc/gpus); do python3 t.py --gpu $g & done; wait", "`for g in $(cat /etc/gpus); do"),
        ("parallel-launch LOCAL_RANK $SLOTS python3 t.py", "`parallel-launch LOCAL_RANK $SLOTS`"),  # SLOTS unset
    ],
)
def test_a_launcher_whose_count_is_not_in_the_manifest_is_one_process_assumed(script: str, why: str) -> None:
    found = processes(pod(script))
    assert (found.count, found.source, found.assumed) == (1, Source.ASSUMED, True)
    assert found.evidence.startswith(why) and "the count is not readable from the manifest" in found.evidence


@pytest.mark.parametrize(
    "script",
    [
        ("python3", "-m", "train"),
        "(python3 train.py) & PID=$!; while kill -0 $PID; do sleep 5; done; wait $PID",  # xpk's wrapper: one
        "for f in a b; do echo $f; done && python3 train.py 2>&1 | tee log",  # a loop, nothing in the background
        # a pod's rank from its slice and host (jaxinfra's TPU shadow): pods ranked, not a pod's processes
        'export JAX_PROCESS_ID=$((MEGASCALE_SLICE_ID * 4 + TPU_WORKER_ID)); exec "$@"',
        "python3 train.py --process_id=$((JOB_COMPLETION_INDEX*2 + JOB_INDEX))",
    ],
)
def test_a_command_that_starts_one_program_is_one_process(script: str | tuple[str, ...]) -> None:
    assert processes(pod(script)) == Processes((8,), ("train",), Source.ONE)


def test_devices_split_an_accelerator_pods_chips_and_repeat_a_cpu_pods() -> None:
    """GPU processes each take their share (JAX_LOCAL_DEVICE_IDS=$LOCAL_RANK in JAX-Toolbox's Job); CPU processes
    share one env, so each sees its JAX_NUM_CPU_DEVICES."""
    loop = "for i in 0 1 2; do python3 t.py & done; wait"
    assert processes(pod(loop, devices=8)).devices == (3, 3, 2)
    assert processes(pod(loop, "cpu", 2)).devices == (2, 2, 2)
    assert processes(pod(loop, devices=2)).devices == (1, 1, 1)  # more processes than chips: one each
    line = processes(pod(loop, devices=6)).describe()
    assert line == "3 JAX processes (2 devices each) in train: a shell loop (`for i in 0 1 2; do ... & done`)"
    assert processes(pod(("python3", "t.py"))).describe() == "1 JAX process (8 devices) in train: one process"
