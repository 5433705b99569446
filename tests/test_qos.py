"""Who the OOM killer ends first (`jaxinfra_sim.qos`): the kubelet's QoS classes and OOM score adjustments, from
kubernetes v1.33 pkg/apis/core/v1/helper/qos/qos.go and pkg/kubelet/qos/policy.go, and the scores the simulator's
processes and its containers get, as root and as uid 65534."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from jaxinfra.yamlio import dump
from jaxinfra_sim import qos
from tests.support.cli import simulate_as
from tests.test_sim_sandbox import job  # an Indexed Job of one busybox pod running `sh -c script`

GIB = 2**30
NODE = 16 * GIB


def container(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, **extra: Any) -> dict:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v is not None}
    return {"name": "c", "image": "busybox", **({"resources": resources} if resources else {}), **extra}


@pytest.mark.parametrize(
    ("containers", "inits", "want"),
    [
        ([container()], [], "BestEffort"),
        ([container({"memory": "0", "cpu": "0"})], [], "BestEffort"),  # a quantity of zero counts as none
        ([container(limits={"cpu": "1", "memory": "1Gi"})], [], "Guaranteed"),  # requests default to limits
        ([container({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"})], [], "Guaranteed"),
        ([container({"cpu": "500m", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"})], [], "Burstable"),
        ([container(limits={"memory": "1Gi"})], [], "Burstable"),  # no cpu limit
        ([container({"memory": "1Gi"})], [], "Burstable"),
        ([container(limits={"cpu": "1", "memory": "1Gi"})], [container()], "Burstable"),  # an init without limits
        ([{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}], [], "BestEffort"),  # cpu and memory only
    ],
)
def test_the_pods_qos_class_is_the_api_servers(containers: list[dict], inits: list[dict], want: str) -> None:
    assert qos.pod_qos({"containers": containers, "initContainers": inits}) == want


def test_guaranteed_and_node_critical_pods_score_minus_997_best_effort_1000() -> None:
    guaranteed = container(limits={"cpu": "1", "memory": "1Gi"})
    assert qos.oom_score_adj({"containers": [guaranteed]}, guaranteed, NODE) == -997
    plain = container()
    assert qos.oom_score_adj({"containers": [plain]}, plain, NODE) == 1000
    critical = {"containers": [plain], "priorityClassName": "system-node-critical"}
    assert qos.oom_score_adj(critical, plain, NODE) == -997


@pytest.mark.parametrize(
    ("request_", "want"),
    [
        ("1Gi", 1000 - 62),  # 1000 x 1/16 = 62.5, rounded down as Go's integer division does
        ("8Gi", 500),
        ("16Gi", 3),  # a Burstable pod never scores below 3 (a Guaranteed one using the whole node)
        ("32Gi", 3),
        ("1Mi", 999),  # nor 1000: it outlives a BestEffort pod
    ],
)
def test_a_burstable_containers_score_falls_with_its_memory_request(request_: str, want: int) -> None:
    c = container({"memory": request_})
    assert qos.oom_score_adj({"containers": [c]}, c, NODE) == want


def test_a_sidecar_scores_no_higher_than_the_pods_smallest_regular_container() -> None:
    sidecar = container({"memory": "1Mi"}, restartPolicy="Always")
    main = container({"memory": "8Gi"})
    spec = {"containers": [main], "initContainers": [sidecar]}
    assert qos.oom_score_adj(spec, sidecar, NODE) == 500
    plain_init = container({"memory": "1Mi"})  # an init container that runs to completion keeps its own
    assert qos.oom_score_adj({"containers": [main], "initContainers": [plain_init]}, plain_init, NODE) == 999


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
