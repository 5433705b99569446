"""The OOM scores a simulation's processes get (`jaxinfra_sim.kubelet.qos`), as root and as uid 65534: each container
its pod's QoS class's, the simulator the kubelet's where it may lower its own."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from jaxinfra.yamlio import dump
from jaxinfra_sim.kubelet import qos
from tests.sim.runtime.test_sandbox import job  # an Indexed Job of one busybox pod running `sh -c script`
from tests.support.cli import simulate_as

pytestmark = pytest.mark.simulator


SCORE = "echo SCORE=$(cat /proc/self/oom_score_adj) >&2"


def scores(report: dict[str, Any]) -> dict[str, str]:
    return {
        w["name"]: next(line for line in w["attempts"][0]["pods"][0]["stderr_tail"] if line.startswith("SCORE="))
        for w in report["workloads"]
    }


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
def test_each_container_gets_its_qos_classs_score_and_never_one_below_the_simulators(home: Path, as_root: bool) -> None:
    """A BestEffort container scores 1000, a Burstable one by its request, a Guaranteed one -997: as root, where the
    simulator runs at the kubelet's -999, so the OOM killer ends any pod's process before the simulator's. As uid
    65534 the simulator keeps its own score (0) and a Guaranteed container cannot go below it: 0."""
    if as_root and os.getuid() != 0:
        pytest.skip("needs root (the suite runs as root in CI)")
    manifests = [
        job("besteffort", SCORE),
        job("burstable", SCORE, resources={"requests": {"memory": "64Mi"}}),
        job("guaranteed", SCORE, resources={"limits": {"cpu": "1", "memory": "256Mi"}}),
    ]
    rc, out, report = simulate_as(home, dump(manifests), "--run-command", "--timeout", "60", as_root=as_root)
    assert rc == 0, out
    burstable = 1000 - (1000 * 64 * 2**20) // qos.node_memory()
    assert scores(report) == {
        "besteffort": "SCORE=1000",
        "burstable": f"SCORE={burstable}",
        "guaranteed": "SCORE=-997" if as_root and qos.may_lower() else "SCORE=0",
    }, out


def test_the_simulator_takes_the_kubelets_score_where_it_may() -> None:
    """`jaxinfra simulate`'s process (and every process it forks before a pod sets its own) scores -999 where it may
    lower its score (CAP_SYS_RESOURCE), and keeps its own elsewhere: the kernel refuses, and nothing fails."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        qos.protect_node_agents()
        os.write(write, Path("/proc/self/oom_score_adj").read_bytes())
        os._exit(0)
    os.close(write)
    got = os.read(read, 16)
    os.waitpid(pid, 0)
    assert got.strip() == (b"-999" if qos.may_lower() else str(qos.own()).encode())
