"""Pods of several JAX processes under the probe (`probe.run_pod`, `local_processes`): each pod a fresh interpreter
(`python -m jaxinfra_sim.jax.probe --local-processes 2`) that forks its processes before any backend exists, as a
launcher starts one per GPU (NVIDIA/JAX-Toolbox @ bcbbfa5, .github/container/parallel-launch); the pods joined by
the JAX_* contract set by hand, which each process's rank and the group's size replace (rank = the pod's first rank +
its local index, as `$((JOB_COMPLETION_INDEX*K + LOCAL_RANK))` computes it).
"""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("jax")

from jaxinfra_sim.jax.local_processes import local_env, pod_result  # noqa: E402
from jaxinfra_sim.jax.probe import CHECKS  # noqa: E402
from tests.sim.jax.test_probe import JAX_TIMEOUTS, Worker, free_port, run_group  # noqa: E402

pytestmark = pytest.mark.simulator


def pods_of_two(pods: int, told: int, coordinator: bool = False) -> list[Worker]:
    """`pods` pods of 2 processes of 1 device each, every process told the group has `told` processes. The pods'
    env names the coordinator (jaxinfra's contract: JAX_NUM_PROCESSES and JAX_PROCESS_ID count pods), or, with
    `coordinator`, none: the launcher's own (`--coordinator`) is what they join."""
    address = f"127.0.0.1:{free_port()}"
    commands, envs = [], []
    for index in range(pods):
        first = str(2 * index)
        flags = ["--first-rank", first, "--expected-rank", first, "--hosts", str(pods)]
        flags += ["--coordinator", address] if coordinator else []
        commands.append(
            [sys.executable, "-m", "jaxinfra_sim.jax.probe"]
            + ["--num-processes", str(told), "--local-processes", "2", "--devices", "1", *flags, *JAX_TIMEOUTS]
        )
        contract = {"JAX_NUM_PROCESSES": str(pods), "JAX_PROCESS_ID": str(index)}
        envs.append(contract if coordinator else {**contract, "JAX_COORDINATOR_ADDRESS": address})
    return run_group(commands, envs)


def test_two_pods_of_two_processes_pass_every_check_across_and_within_pods() -> None:
    """4 processes, one group of 4 devices: the ring and the all-to-all cross from a pod's first process to its
    second (same pod) and from its second to the next pod's first; the mesh is 2 hosts of 2 chips, each host's chip
    axis spanning its pod's two processes."""
    workers = pods_of_two(pods=2, told=4)
    for pod, w in enumerate(workers):
        result = w.result
        assert w.returncode == 0 and result["ok"] is True, (result, w.stderr[-2000:])
        assert len(w.stdout.strip().splitlines()) == 1, "stdout must carry only the pod's result line"
        assert [(p["rank"], p["ok"]) for p in result["processes"]] == [(2 * pod, True), (2 * pod + 1, True)]
        counts = (result["rank"], result["process_count"], result["local_devices"], result["global_devices"])
        assert counts == (2 * pod, 4, 2, 4)
        assert set(result["checks"]) == set(CHECKS) and all(c["ok"] for c in result["checks"].values())
        for local, process in enumerate(result["processes"]):
            mesh = process["checks"]["mesh"]["detail"]
            assert mesh.startswith("mesh {'slice': 1, 'host': 2, 'chip': 2}")
            assert mesh.endswith(f"process {2 * pod + local} is slice 0 host {pod} chip {local}")
            assert process["checks"]["ppermute"]["detail"].startswith("ppermute over 4 devices")
    assert [p["program"] for w in workers for p in w.result["processes"]] == [
        "compiled, shared with the group",
        *["loaded from process 0"] * 3,
    ]


def test_one_pod_of_two_processes_joins_its_launchers_coordinator() -> None:
    """Collectives within one pod only; no env names the coordinator: process 0 binds the launcher's and the other
    joins it."""
    [w] = pods_of_two(pods=1, told=2, coordinator=True)
    assert w.returncode == 0 and w.result["ok"] is True, (w.result, w.stderr[-2000:])
    assert [p["rank"] for p in w.result["processes"]] == [0, 1]
    assert w.result["checks"]["psum"]["detail"] == (
        "rank 0: psum over 2 devices verified on 1 local shards (all 2 of the pod's processes pass)"
    )


def test_a_group_told_three_processes_where_four_run_fails_as_jax_does() -> None:
    """JAX refuses process_id 3 of num_processes 3 (jax/_src/distributed.py `State.initialize`: process_id <
    num_processes); the other three form a group of 3 devices, not the 2 hosts × 2 chips the pods hold: every pod
    fails, none hangs."""
    workers = pods_of_two(pods=2, told=3)
    for w in workers:
        assert w.returncode == 1 and w.result["ok"] is False
        assert w.result["checks"]["mesh"]["ok"] is False
    crashed = workers[1].result["processes"][1]
    assert (crashed["rank"], crashed["ok"]) == (3, False)
    assert "process_id < num_processes. Got process_id=3, num_processes=3" in crashed["error"]
    assert "jaxinfra simulate: ValueError: process_id and num_processes" in workers[1].stderr
    checks = workers[1].result["checks"]
    assert checks["rank"]["detail"] == "rank 2: device_count=3 (expected 2) (and 1 more of the pod's processes)"
    assert checks["mesh"]["detail"].startswith("rank 2: mesh {'slice': 1, 'host': 2, 'chip': 2} needs 4 devices, the")
    assert checks["psum"]["detail"] == "rank 2: skipped: no mesh (and 1 more of the pod's processes)"


# --- each process's env, one result for the pod (no processes) ---------------------------------------------------


def test_each_process_gets_its_rank_in_the_contract_its_pod_uses() -> None:
    v2 = {"JAX_COORDINATOR_ADDRESS": "llm-0.llm:1234", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "1"}
    assert local_env(v2, 3, 4, 1, "10.244.0.2:55527") == {
        **v2,
        "JAX_PROCESS_ID": "3",
        "JAX_NUM_PROCESSES": "4",
        "JAX_NUM_CPU_DEVICES": "1",
    }  # the env's coordinator stays; the launcher's is not needed
    v1 = {"COORDINATOR_ADDRESS": "j-worker-0", "COORDINATOR_PORT": "6666", "NUM_PROCESSES": "2", "PROCESS_ID": "1"}
    assert local_env(v1, 2, 4, 2, "")["PROCESS_ID"] == "2" and local_env(v1, 2, 4, 2, "")["NUM_PROCESSES"] == "4"
    computed = local_env({}, 0, 16, 1, "10.244.0.2:55527")  # the script computes it: the launcher's coordinator
    assert computed["JAX_COORDINATOR_ADDRESS"] == computed["JAX_COORDINATOR_BIND_ADDRESS"] == "10.244.0.2:55527"
    assert "JAX_COORDINATOR_BIND_ADDRESS" not in local_env({}, 1, 16, 1, "10.244.0.2:55527")  # only rank 0 binds
    with pytest.raises(ValueError, match="JAX_COORDINATOR_ADDRESS is not set"):
        local_env({}, 1, 16, 1, "")


def test_the_pods_result_is_ok_only_where_every_process_is() -> None:
    ok = {"ok": True, "detail": "fine"}
    first = {"rank": 4, "ok": True, "checks": {"rank": ok, "psum": ok}, "local_devices": 2, "program": "compiled"}
    second = {"rank": 5, "ok": False, "error": "killed by SIGKILL"}
    result = pod_result([first, second], ("rank", "psum"))
    assert (result["rank"], result["ok"], result["local_devices"], result["program"]) == (4, False, 2, "compiled")
    assert result["checks"]["psum"] == {"ok": False, "detail": "rank 5: did not run: killed by SIGKILL"}
    assert result["processes"] == [first, second]
    assert pod_result([first], ("rank",))["checks"]["rank"] == {
        "ok": True,
        "detail": "rank 4: fine (all 1 of the pod's processes pass)",
    }
