"""Who the OOM killer ends first (`jaxinfra_sim.kubelet.qos`): the kubelet's QoS classes and OOM score adjustments, from
kubernetes v1.33 pkg/apis/core/v1/helper/qos/qos.go and pkg/kubelet/qos/policy.go. The scores a simulation's
processes get: tests/sim/kubelet/test_qos_enforced.py."""

from __future__ import annotations

from typing import Any

import pytest

from jaxinfra_sim.kubelet import qos

pytestmark = pytest.mark.unit

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
