"""jaxinfra/templates/train, the program every example stack runs: env contracts, determinism across process
counts, resume after a crash, checkpoint on SIGTERM. Real processes on the CPU, as pods would run it."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jaxinfra import JaxJob, stack
from tests.support.paths import STACKS, TRAIN
from tests.support.train_group import Group, committed_steps

pytestmark = pytest.mark.simulator

sys.path.insert(0, str(TRAIN))
import train  # noqa: E402  (jaxinfra/templates/train/train.py: the program under test)

STEPS = 20
EVERY = 5
RTOL = 1e-5  # 2 x 2 vs 1 x 4: the same sums, reduced in another order across processes


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[int, float]:
    """Every step's loss of an uninterrupted run: one process, 4 devices, no env contract at all."""
    with Group(tmp_path_factory.mktemp("reference"), processes=1, devices=4, env={"TRAIN_STEPS": str(STEPS)}) as g:
        assert g.wait() == [0], g.output()
        assert "1 processes x 4 cpu devices" in g.output()
        losses = g.losses()
    assert sorted(losses) == list(range(1, STEPS + 1))
    assert losses[STEPS] < losses[1] / 3, "the model learns"
    return losses


def checkpointed(directory: Path, **extra: str) -> dict[str, str]:
    """Settings of a run that checkpoints into `directory` every EVERY steps."""
    return {
        "TRAIN_STEPS": str(STEPS),
        "TRAIN_CHECKPOINT_EVERY": str(EVERY),
        "JAXINFRA_CHECKPOINT_DIR": str(directory),
        **extra,
    }


def test_two_processes_reach_the_same_losses_as_one(tmp_path: Path, reference: dict[int, float]) -> None:
    with Group(tmp_path, processes=2, devices=2, env={"TRAIN_STEPS": str(STEPS)}) as g:
        assert g.wait() == [0, 0], g.output()
        assert "2 processes x 2 cpu devices, 1 slice(s), mesh data=4 model=1" in g.output()
        assert g.losses(1) == {}, "only process 0 logs"
        losses = g.losses()
    assert losses.keys() == reference.keys()
    np.testing.assert_allclose([losses[s] for s in reference], list(reference.values()), rtol=RTOL)


def test_crash_then_preemption_then_completion(tmp_path: Path, reference: dict[int, float]) -> None:
    """One job's life: a host crashes after a checkpoint (the group restarts from it), then a node drain
    reaches one pod (both stop after the same step and save it), then the run completes: on the loss
    the uninterrupted run reached."""
    ckpt = tmp_path / "ckpt"
    paced = checkpointed(ckpt, TRAIN_MIN_STEP_SECONDS="0.1")

    with Group(tmp_path / "crashed", processes=2, devices=2, env=paced) as g:
        g.wait_for(lambda: 2 * EVERY in committed_steps(ckpt) and max(g.losses(), default=0) > 2 * EVERY)
        g.signal(signal.SIGKILL)  # a crashed host: JobSet restarts the whole group, nothing is saved on the way out
        assert g.wait() == [-9, -9]
        crashed_at = max(g.losses())
    resumable = max(committed_steps(ckpt))
    assert resumable % EVERY == 0 and 2 * EVERY <= resumable <= crashed_at < STEPS

    with Group(tmp_path / "preempted", processes=2, devices=2, env=paced) as g:
        g.wait_for(lambda: max(g.losses(), default=0) >= resumable + 2)
        g.signal(signal.SIGTERM, ranks=[1])  # rank 1 only: rank 0 learns it in the step's all-reduce
        assert g.wait(timeout=15) == [143, 143], g.output()  # saved, but not done: the controllers restart it
        out, losses = g.output(), g.losses()
    assert f"resumed from step {resumable}\n" in out
    assert min(losses) == resumable + 1
    last = max(losses)
    assert last < STEPS
    assert f"preempted at step {last}: checkpoint saved\n" in out, "the last step it finished, no other"
    assert max(committed_steps(ckpt)) == last

    with Group(tmp_path / "completed", processes=2, devices=2, env=checkpointed(ckpt)) as g:
        assert g.wait() == [0, 0], g.output()
        assert f"resumed from step {last}\n" in g.output()
        losses = g.losses()
    assert min(losses) == last + 1
    assert losses[STEPS] == pytest.approx(reference[STEPS], rel=RTOL)
    assert STEPS in committed_steps(ckpt), "the last step is saved, so a rerun starts where this one ended"


def test_model_axis_and_sigterm_without_checkpoints(tmp_path: Path, reference: dict[int, float]) -> None:
    """The hidden layer sharded over `model` (same math, other layout); SIGTERM with nowhere to save."""
    env = {"TRAIN_STEPS": "1000", "TRAIN_MIN_STEP_SECONDS": "0.05", "TRAIN_MODEL_PARALLEL": "2"}
    with Group(tmp_path, processes=1, devices=2, env=env) as g:
        g.wait_for(lambda: 3 in g.losses())
        g.signal(signal.SIGTERM)
        assert g.wait(timeout=10) == [143], g.output()
        out, losses = g.output(), g.losses()
    assert "mesh data=1 model=2" in out
    assert f"preempted at step {max(losses)}: no checkpoint (JAXINFRA_CHECKPOINT_DIR unset)\n" in out
    np.testing.assert_allclose([losses[s] for s in (1, 2, 3)], [reference[s] for s in (1, 2, 3)], rtol=RTOL)


def test_kubeflow_v1_env_initializes(tmp_path: Path, reference: dict[int, float]) -> None:
    with Group(tmp_path, processes=2, devices=2, env={"TRAIN_STEPS": "3"}, variant="kubeflow-v1") as g:
        assert g.wait() == [0, 0], g.output()
        assert "2 processes x 2 cpu devices" in g.output()
        losses = g.losses()
    np.testing.assert_allclose([losses[s] for s in (1, 2, 3)], [reference[s] for s in (1, 2, 3)], rtol=RTOL)


CFG = train.load_config({})


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        # jaxinfra's jobset / job backends, and Kubeflow Trainer v2's JAX plugin: the same names
        (
            {
                "JAX_COORDINATOR_ADDRESS": "train-slice-0-0.train:8482",
                "JAX_NUM_PROCESSES": "4",
                "JAX_PROCESS_ID": "3",
                "JAX_INITIALIZATION_TIMEOUT": "60",
            },
            {
                "coordinator_address": "train-slice-0-0.train:8482",
                "num_processes": 4,
                "process_id": 3,
                "cluster_detection_method": "deactivate",
                "initialization_timeout": 60,
            },
        ),
        # Kubeflow Training Operator v1: address without the port
        (
            {
                "COORDINATOR_ADDRESS": "train-worker-0",
                "COORDINATOR_PORT": "6666",
                "NUM_PROCESSES": "2",
                "PROCESS_ID": "1",
            },
            {
                "coordinator_address": "train-worker-0:6666",
                "num_processes": 2,
                "process_id": 1,
                "cluster_detection_method": "deactivate",
                "initialization_timeout": 300,
            },
        ),
        # GKE TPU multi-slice: no rank in the env, JAX's TPU detection derives it
        (
            {
                "JAX_COORDINATOR_ADDRESS": "train-slice-0-0.train:8482",
                "JAX_NUM_PROCESSES": "8",
                "MEGASCALE_COORDINATOR_ADDRESS": "train-slice-0-0.train",
                "MEGASCALE_NUM_SLICES": "2",
                "MEGASCALE_SLICE_ID": "1",
                "JAX_INITIALIZATION_TIMEOUT": "300",
            },
            {"initialization_timeout": 300},
        ),
    ],
)
def test_distributed_args_follow_the_env_contract(env: dict[str, str], expected: dict | None) -> None:
    args = train.distributed_args(env, CFG)
    if expected is None:
        assert args is None
    else:
        assert args == {
            **expected,
            "heartbeat_timeout_seconds": CFG.heartbeat_timeout,
            "shutdown_timeout_seconds": CFG.shutdown_timeout,
        }


def test_a_broken_contract_names_every_variable() -> None:
    with pytest.raises(train.InputError) as err:
        train.distributed_args({"JAX_PROCESS_ID": "one", "JAX_INITIALIZATION_TIMEOUT": "soon"}, CFG)
    problems = err.value.args[0]
    assert [p.split(" ")[0] for p in problems] == [
        "JAX_INITIALIZATION_TIMEOUT",
        "JAX_NUM_PROCESSES",
        "JAX_PROCESS_ID",
        "JAX_COORDINATOR_ADDRESS",
    ]
    assert all("fix:" in p for p in problems)


def test_bad_settings_exit_2_with_every_problem_and_no_traceback() -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "TRAIN_STEPS": "-1",
        "TRAIN_BATCH": "many",
        "TRAIN_HIDDEN": "9",
        "TRAIN_MODEL_PARALLEL": "2",
    }
    done = subprocess.run(
        [sys.executable, "-m", "train"], cwd=TRAIN, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "train: error: TRAIN_STEPS = '-1': must be at least 1; fix: a whole number of at least 1, or unset it "
        "(default: 100)",
        "train: error: TRAIN_BATCH = 'many': not a whole number; fix: a whole number of at least 0, or unset it "
        "(default: 0)",
        "train: error: TRAIN_HIDDEN = 9: must be a multiple of TRAIN_MODEL_PARALLEL = 2; fix: round it to a multiple",
        "train: 3 problem(s); nothing trained",
    ]


def test_data_is_a_function_of_seed_and_step() -> None:
    a, b, other = train.Data.make(0), train.Data.make(0), train.Data.make(1)
    np.testing.assert_array_equal(a.batch(7, 64)[0], b.batch(7, 64)[0])
    assert not np.array_equal(a.batch(7, 64)[0], other.batch(7, 64)[0])
    assert not np.array_equal(a.batch(7, 64)[0], a.batch(8, 64)[0])
    per_epoch = train.DATASET_SIZE // 64
    epoch = np.concatenate([a.batch(s, 64)[1] for s in range(per_epoch)])
    assert len(np.unique(epoch, axis=0)) == per_epoch * 64, "an epoch visits each example once"
    assert a.x.nbytes + a.y.nbytes < 2 * 2**20


def test_readme_lists_every_setting_with_its_default() -> None:
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", (TRAIN / "README.md").read_text(), re.M))
    assert rows == {name: str(default) if default != "" else "unset" for name, default, _ in train.SETTINGS.values()}


def test_image_runs_the_stacks_command_as_the_pods_user() -> None:
    """The Dockerfile's user is the one jaxinfra's pods run as, and its WORKDIR holds the module the
    example stacks start."""
    dockerfile = (TRAIN / "Dockerfile").read_text()
    user = JaxJob.model_fields
    assert re.search(r"^USER (\d+):(\d+)$", dockerfile, re.M).groups() == (
        str(user["run_as_user"].default),
        str(user["run_as_group"].default),
    )
    assert re.search(r"^WORKDIR /\S+\nCOPY train\.py \.$", dockerfile, re.M), "train.py in the working directory"
    commands = {tuple(job.command) for path in STACKS for job in stack.load(path).jobs}
    assert commands == {("python", "-m", "train")}
