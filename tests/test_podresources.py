"""A pod's effective requests (`jaxinfra.podresources`), as kubernetes pkg/api/v1/resource/helpers.go PodRequests
counts them since KEP-753 (sidecar containers), and its readers agreeing on it: the admission plugins (ResourceQuota,
LimitRanger), the simulator's Kueue, and the ClusterQueue quota the plan sizes from the spec."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from jaxinfra import CPU, Cluster, JaxJob, NodePool, Sidecar, manifests
from jaxinfra.admission.plugins.resources import aggregate, show_amount
from jaxinfra.plan import plan, pod_total_requests
from jaxinfra.podresources import exact_pod_requests
from jaxinfra.quantity import parse
from jaxinfra_sim.kueue.scheduler import pod_requests as kueue_pod_requests

pytestmark = pytest.mark.unit


def c(name: str, request: str, sidecar: bool = False, limit: str | None = None) -> dict[str, Any]:
    """A container (a native sidecar with `sidecar`) requesting `request` cpu, limited to `limit` cpu if given."""
    resources: dict[str, Any] = {"requests": {"cpu": request}}
    if limit is not None:
        resources["limits"] = {"cpu": limit}
    return {"name": name, "image": "busybox:1.36", "resources": resources} | (
        {"restartPolicy": "Always"} if sidecar else {}
    )


def cpu(spec: dict[str, Any]) -> Fraction:
    return exact_pod_requests(spec, parse).get("cpu", Fraction(0))


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({"containers": [c("a", "1"), c("b", "2")]}, 3),  # the containers add up
        ({"initContainers": [c("setup", "5")], "containers": [c("a", "1")]}, 5),  # a larger init container wins
        # a native sidecar runs beside the containers: 3 + 1, where max(init, containers) would say 3
        ({"initContainers": [c("log", "1", sidecar=True)], "containers": [c("a", "3")]}, 4),
        # a regular init container after a sidecar runs beside it: 1 + 4 = 5 > 1 + 3
        ({"initContainers": [c("log", "1", sidecar=True), c("setup", "4")], "containers": [c("a", "3")]}, 5),
        # ... but not beside one declared after it: max(4, 3 + 1)
        ({"initContainers": [c("setup", "4"), c("log", "1", sidecar=True)], "containers": [c("a", "3")]}, 4),
        ({"containers": [c("a", "500m")], "overhead": {"cpu": "250m"}}, Fraction(3, 4)),  # overhead adds
        ({"containers": [{"name": "a", "resources": {"limits": {"cpu": "2"}}}]}, 2),  # a limit defaults the request
        ({"containers": "odd", "initContainers": [None, c("log", "1", sidecar=True)]}, 1),  # odd shapes are skipped
    ],
)
def test_pod_requests_count_as_podrequests_does(spec: dict[str, Any], want: Fraction) -> None:
    assert cpu(spec) == want


SIDECAR_POD = {
    "initContainers": [c("log", "1", sidecar=True, limit="2"), c("setup", "2", limit="2")],
    "containers": [c("main", "3", limit="3")],
    "overhead": {"cpu": "100m"},
}


def test_admission_and_kueue_count_a_pod_the_same_way() -> None:
    """ResourceQuota's requests, Kueue's, and the shared count: 3 + 1 + overhead; limits: 3 + 2, overhead added
    only because a cpu limit is set."""
    pod = {"spec": SIDECAR_POD}
    assert show_amount(aggregate(pod, 0)["cpu"]) == "4100m"
    assert kueue_pod_requests(SIDECAR_POD) == {"cpu": Fraction(41, 10)}
    assert show_amount(aggregate(pod, 1)["cpu"]) == "5100m"
    assert "memory" not in aggregate({"spec": {**SIDECAR_POD, "overhead": {"memory": "1Mi"}}}, 1)
    assert show_amount(aggregate(pod, 0, overhead=False)["cpu"]) == "4"  # LimitRanger's: no overhead


@pytest.mark.parametrize("backend", ["jobset", "job", "jaxjob", "trainjob"])
def test_the_plans_quota_sizing_agrees_with_podrequests_on_a_job_with_a_sidecar(backend: str) -> None:
    """The plan sizes the ClusterQueue from the spec (`pod_total_requests`); the pod it renders, counted as Kueue
    counts it, must need the same, or the largest job would never be admitted."""
    shipper = Sidecar("log", "busybox", resources={"requests": {"cpu": "500m", "memory": "512Mi"}})
    cluster = Cluster(
        name="q",
        kueue=True,
        node_pools=[NodePool("cpu", CPU(devices=2))],
        jobs=[
            JaxJob(
                "t",
                image="i",
                node_pool="cpu",
                backend=backend,
                resources={"requests": {"cpu": "2", "memory": "4Gi"}},
                sidecars=[shipper],
            )
        ],
    )
    [jp] = plan(cluster).jobs
    from_spec = {name: parse(q) for name, q in pod_total_requests(jp).items()}
    pods = [
        o["template"]["spec"]
        for o in _walk(manifests(cluster))
        if isinstance(o.get("template"), dict) and "containers" in (o["template"].get("spec") or {})
    ]
    assert pods
    for pod in pods:
        assert exact_pod_requests(pod, parse) == from_spec


def _walk(value: Any) -> list[dict[str, Any]]:
    """Every mapping inside `value`, itself included."""
    if isinstance(value, dict):
        return [value, *(m for v in value.values() for m in _walk(v))]
    if isinstance(value, list):
        return [m for v in value for m in _walk(v)]
    return []
