"""The collectives probe, run as real JAX process groups on loopback (no runner involved).

Each case starts its workers as fresh interpreters, the way a naive launch would, with the
env contract set by hand; every process must finish (or fail) on its own within the timeout:
a hang here is a probe that breaks the shutdown barrier.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
import tracemalloc
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

pytest.importorskip("jax")

from jaxinfra_sim.jax.collectives import GROUP_LIMIT, collective_cases, group_sizes  # noqa: E402
from jaxinfra_sim.jax.probe import CHECKS, ProbeSpec, init_kwargs  # noqa: E402
from tests.support.paths import ROOT  # noqa: E402

pytestmark = pytest.mark.simulator

GROUP_TIMEOUT_S = 60
JAX_TIMEOUTS = ["--init-timeout", "20", "--heartbeat-timeout", "5", "--shutdown-timeout", "10"]
CONTRACT_PREFIXES = ("JAX_", "COORDINATOR_", "NUM_PROCESSES", "PROCESS_ID", "TPU_", "MEGASCALE_")

# Runs run_probe in-process with a recording `report`, as the runner does after forking.
RUN_PROBE = """
import json, sys
from jaxinfra_sim.jax.probe import ProbeSpec, configure, run_probe
configure(1)
phases = []
result = run_probe(ProbeSpec(expected_rank=int(sys.argv[1]), num_processes=2, devices_per_process=1,
                             groups=1, hosts_per_group=2, init_timeout=20, heartbeat_timeout=5,
                             shutdown_timeout=10),
                   lambda phase, data: phases.append([phase, data]))
print(json.dumps({"phases": phases, "result": result}))
"""


@dataclass
class Worker:
    """One finished process of a group: exit code, its last stdout line as JSON, stderr."""

    rank: int
    returncode: int
    stdout: str
    stderr: str

    @property
    def result(self) -> dict:
        lines = self.stdout.strip().splitlines()
        assert lines, f"rank {self.rank} printed nothing (rc {self.returncode}):\n{self.stderr[-2000:]}"
        return json.loads(lines[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env() -> dict[str, str]:
    """This environment without any variable the probe could take for a contract."""
    return {k: v for k, v in os.environ.items() if not k.startswith(CONTRACT_PREFIXES)}


def jax_contract(port: int, n: int) -> Callable[[int], dict[str, str]]:
    """Trainer v2 style: JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID."""
    return lambda rank: {
        "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}",
        "JAX_NUM_PROCESSES": str(n),
        "JAX_PROCESS_ID": str(rank),
    }


def run_group(commands: list[list[str]], envs: list[Mapping[str, str]]) -> list[Worker]:
    """Start every process at once and wait for all; a group past the deadline is killed and fails."""
    procs = [
        subprocess.Popen(
            cmd, cwd=ROOT, env={**clean_env(), **env}, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for cmd, env in zip(commands, envs)
    ]
    deadline = time.monotonic() + GROUP_TIMEOUT_S
    workers = []
    try:
        for rank, proc in enumerate(procs):
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            workers.append(Worker(rank, proc.returncode, out, err))
    except subprocess.TimeoutExpired:
        pytest.fail(f"process group still running after {GROUP_TIMEOUT_S} s: the shutdown hangs")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return workers


def probe_group(
    n: int, devices: int, groups: int, hosts: int, expected: Callable[[int], int] = lambda rank: rank
) -> list[Worker]:
    """n fresh `python -m jaxinfra_sim.jax.probe` interpreters joined by the JAX_* contract."""
    env = jax_contract(free_port(), n)
    commands = [
        [
            sys.executable,
            "-m",
            "jaxinfra_sim.jax.probe",
            "--expected-rank",
            str(expected(rank)),
            "--num-processes",
            str(n),
            "--devices",
            str(devices),
            "--groups",
            str(groups),
            "--hosts",
            str(hosts),
            *JAX_TIMEOUTS,
        ]
        for rank in range(n)
    ]
    return run_group(commands, [env(rank) for rank in range(n)])


def assert_all_ok(workers: list[Worker], devices: int) -> None:
    n = len(workers)
    for w in workers:
        result = w.result
        assert w.returncode == 0, (result, w.stderr[-2000:])
        assert len(w.stdout.strip().splitlines()) == 1, "stdout must carry only the result line"
        assert set(result["checks"]) == set(CHECKS)
        assert all(c["ok"] for c in result["checks"].values()), result["checks"]
        assert result["ok"] is True
        assert (result["rank"], result["process_count"]) == (w.rank, n)
        assert (result["local_devices"], result["global_devices"]) == (devices, n * devices)
        assert {"init_s", "checks_s"} <= set(result["timings"])
        steps = result["timings"]["steps"]  # every step, with its wall and this process's CPU
        assert set(steps) == {"connect", "devices", "arrays", "program", "collectives", "verify", "shutdown"}
        assert all(s["wall"] >= 0 and s["cpu"] >= 0 for s in steps.values()), steps
        assert steps["program"]["cpu"] > 0  # compiling or loading the program is work on this process's CPU


def test_two_processes_two_devices_pass_every_check() -> None:
    workers = probe_group(n=2, devices=2, groups=1, hosts=2)
    assert_all_ok(workers, devices=2)
    assert "process 1 is slice 0 host 1" in workers[1].result["checks"]["mesh"]["detail"]
    # One compile per group: process 0's executable is what process 1 ran.
    assert [w.result["program"] for w in workers] == ["compiled, shared with the group", "loaded from process 0"]


def test_collectives_nest_over_groups_of_at_most_eight_devices() -> None:
    assert [group_sizes(n) for n in (1, 2, 8, 12, 256)] == [(1,), (2,), (8,), (2, 6), (4, 8, 8)]
    assert group_sizes(11) == (11,) and group_sizes(22) == (11, 2)  # a prime past the limit stays one group
    for n in range(1, 300):
        sizes = group_sizes(n)
        assert math.prod(sizes) == n
        assert all(k <= GROUP_LIMIT or all(k % d for d in range(2, GROUP_LIMIT + 1)) for k in sizes), (n, sizes)


def _mesh_of(n: int) -> Any:
    """What `collective_cases` reads of a group mesh of n devices, without a backend."""
    sizes = group_sizes(n)
    return types.SimpleNamespace(size=n, axis_names=[f"group{i}" for i in range(len(sizes))], devices=np.empty(sizes))


@pytest.mark.parametrize("n", [1, 2, 12, 64])
def test_each_collectives_input_and_result_is_its_closed_form_over_every_device(n: int) -> None:
    """Device d holds d + 1 (for all_to_all, block d: d * n + q for each destination q): psum gives every device the
    sum, all_gather every value in device order, the ring each device its predecessor's, all_to_all block [d, q] <-
    [q, d]; read whole and in the slices a process asks for."""
    values, blocks = np.arange(1, n + 1), np.arange(n * n).reshape(n, n)
    want = {
        "psum": (values, np.full(n, values.sum())),
        "all_gather": (values, np.tile(values, n)),
        "ppermute": (values, np.roll(values, 1)),
        "all_to_all": (blocks.ravel(), blocks.T.ravel()),
    }
    cases = collective_cases(_mesh_of(n))
    assert list(cases) == list(want)
    for name, (given, _, expected) in cases.items():
        for got, full in ((given, want[name][0]), (expected, want[name][1])):
            assert got.shape == full.shape, name
            for part in (slice(None), slice(n // 2, n), slice(1, full.size, 3)):
                assert np.array_equal(got[(part,)], full[part]), (name, part)
                assert got[(part,)].dtype == np.int32


def test_a_process_makes_only_its_own_shards_of_the_n_squared_arrays() -> None:
    """At 1,024 devices all_gather's and all_to_all's global arrays are 1 M elements each (12 MiB for the three a
    process would otherwise hold): reading a device's shard of every case makes only that shard."""
    n = 1024
    tracemalloc.start()
    try:
        cases = collective_cases(_mesh_of(n))
        for given, _, expected in cases.values():
            block = given.size // n
            given[(slice(5 * block, 6 * block),)], expected[(slice(5 * block, 6 * block),)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, peak


def test_three_processes_of_four_devices_pass_every_check_over_nested_groups() -> None:
    """12 devices: two levels (2 x 6), so every collective, the ring shift and the training step's psums cross
    processes level by level, and each result is still verified against the flat closed form."""
    workers = probe_group(n=3, devices=4, groups=1, hosts=3)
    assert_all_ok(workers, devices=4)
    assert "over 12 devices (nested groups 2x6)" in workers[2].result["checks"]["ppermute"]["detail"]


def test_a_process_whose_program_differs_compiles_its_own() -> None:
    """Process 1 disagrees on the fingerprint (as a pod with another mesh or JAX would): it must
    not run process 0's executable, yet the group still passes when the programs agree."""
    port = free_port()
    script = RUN_PROBE.replace(
        "configure(1)",
        "configure(1)\nimport jaxinfra_sim.jax.probe as p\n"
        "if sys.argv[1] == '1': p._fingerprint = lambda mesh, args: b'other'",
    )
    workers = run_group(
        [[sys.executable, "-c", script, str(rank)] for rank in range(2)],
        [jax_contract(port, 2)(rank) for rank in range(2)],
    )
    assert [w.result["result"]["program"] for w in workers] == [
        "compiled, shared with the group",
        "compiled (differs from process 0's)",
    ]
    assert all(w.returncode == 0 and w.result["result"]["ok"] for w in workers), [w.stderr[-2000:] for w in workers]


def test_four_single_device_processes_on_a_multislice_mesh() -> None:
    workers = probe_group(n=4, devices=1, groups=2, hosts=2)
    assert_all_ok(workers, devices=1)
    # TPU rank rule: rank = host + slice * hosts_per_slice.
    assert "process 2 is slice 1 host 0" in workers[2].result["checks"]["mesh"]["detail"]


def test_wrong_expected_rank_fails_only_that_check_and_shuts_down() -> None:
    workers = probe_group(n=2, devices=1, groups=1, hosts=2, expected=lambda rank: 0)
    good, bad = workers
    assert good.returncode == 0 and good.result["ok"] is True
    assert bad.returncode == 1 and bad.result["ok"] is False
    checks = bad.result["checks"]
    assert checks["rank"] == {"ok": False, "detail": "process_index=1 (expected 0)"}
    assert all(checks[name]["ok"] for name in CHECKS if name != "rank"), checks


def test_mesh_that_does_not_fit_the_group_fails_every_process_cleanly() -> None:
    workers = probe_group(n=2, devices=1, groups=1, hosts=3)
    for w in workers:
        checks = w.result["checks"]
        assert w.returncode == 1
        assert checks["rank"]["ok"] and not checks["mesh"]["ok"]
        assert "needs 3 devices, the group has 2" in checks["mesh"]["detail"]
        assert all(checks[name]["detail"] == "skipped: no mesh" for name in CHECKS[2:])


def test_run_probe_with_kubeflow_v1_env_reports_its_phases() -> None:
    port = free_port()
    envs = [
        {
            "COORDINATOR_ADDRESS": "127.0.0.1",
            "COORDINATOR_PORT": str(port),
            "NUM_PROCESSES": "2",
            "PROCESS_ID": str(rank),
        }
        for rank in range(2)
    ]
    commands = [[sys.executable, "-c", RUN_PROBE, str(rank)] for rank in range(2)]
    for w in run_group(commands, envs):
        assert w.returncode == 0, w.stderr[-2000:]
        out = w.result
        assert out["result"]["ok"] is True and out["result"]["rank"] == w.rank
        assert [phase for phase, _ in out["phases"]] == ["initializing", "running"]
        assert out["phases"][1][1] == {"process_index": w.rank, "process_count": 2}


# --- init arguments from the env contract (no processes) ---------------------------------

SPEC = ProbeSpec(
    expected_rank=None,
    num_processes=4,
    devices_per_process=1,
    groups=1,
    hosts_per_group=4,
    init_timeout=30,
    heartbeat_timeout=7,
    shutdown_timeout=9,
)
TIMEOUTS = {"heartbeat_timeout_seconds": 7, "shutdown_timeout_seconds": 9}


@pytest.mark.parametrize(("env_timeout", "used"), [(None, 30), ("12", 12), ("300", 30)])
def test_trainer_v2_contract_with_capped_init_timeout(env_timeout: str | None, used: int) -> None:
    env = {"JAX_COORDINATOR_ADDRESS": "a-node-0-0.a:29500", "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "3"}
    if env_timeout is not None:
        env["JAX_INITIALIZATION_TIMEOUT"] = env_timeout
    assert init_kwargs(SPEC, env) == {
        "coordinator_address": "a-node-0-0.a:29500",
        "num_processes": 4,
        "process_id": 3,
        "initialization_timeout": used,
        **TIMEOUTS,
        "cluster_detection_method": "deactivate",
    }  # everything is given: no detector runs


def test_training_operator_v1_contract_joins_address_and_port() -> None:
    env = {"COORDINATOR_ADDRESS": "j-worker-0", "COORDINATOR_PORT": "6666", "NUM_PROCESSES": "4", "PROCESS_ID": "2"}
    assert init_kwargs(SPEC, env) == {
        "coordinator_address": "j-worker-0:6666",
        "num_processes": 4,
        "process_id": 2,
        "initialization_timeout": 30,
        **TIMEOUTS,
        "cluster_detection_method": "deactivate",
    }


def test_tpu_pods_leave_everything_but_timeouts_to_cluster_detection() -> None:
    env = {"TPU_WORKER_ID": "1", "TPU_WORKER_HOSTNAMES": "h0,h1"}
    assert init_kwargs(SPEC, env) == {"initialization_timeout": 30, **TIMEOUTS}


@pytest.mark.parametrize(
    "env",
    [
        {"JAX_COORDINATOR_ADDRESS": "c:1", "JAX_PROCESS_ID": "0"},
        {"JAX_COORDINATOR_ADDRESS": "c:1", "JAX_NUM_PROCESSES": "two", "JAX_PROCESS_ID": "0"},
        {"COORDINATOR_ADDRESS": "c", "NUM_PROCESSES": "2", "PROCESS_ID": "0"},
    ],
)
def test_a_broken_contract_is_an_error_not_a_guess(env: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        init_kwargs(SPEC, env)


def test_the_benchmarks_floor_runs_the_probe_as_forked_processes_of_n_devices_and_counts_who_passed() -> None:
    """benchmarks/floor.py (JAX's own floor beside the scale curve) forks the probe from one warm parent; its figures
    are only worth printing if every process passed."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "floor.py"), "3", "2"],
        capture_output=True,
        text=True,
        timeout=GROUP_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["processes"], result["devices"], result["passed"]) == (3, 2, 3), result
    assert result["wall"] > 0 and result["cpu"] >= result["user"] > 0 and result["system"] >= 0
