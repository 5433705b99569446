"""The store the front door admits against (jaxinfra.admission.store): indexed by kind, by kind and namespace, by key
and by a caller's index, all kept in step on add, replace and remove; and the front door's cost, linear in the
number of objects (issue #56: 10,000 documents took 8 to 10 s and 20,000 took 54 s while every lookup scanned every
object held, and every Service's cluster IP every Service).

Cost is asserted by counting, never by timing: the lines of jaxinfra/admission run (sys.settrace), which do not depend
on the machine's speed or load."""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import jaxinfra.admission
from jaxinfra.admission import Request, admit
from jaxinfra.admission.clusterip import Taken, cluster_ips
from jaxinfra.admission.store import Store

pytestmark = pytest.mark.unit

ADMISSION = str(Path(jaxinfra.admission.__file__).parent)


def lines_run(call: Callable[[], Any], under: str = ADMISSION) -> int:
    """How many lines of the files under `under` running `call` executes."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def each_call(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(under) else None

    before = sys.gettrace()
    sys.settrace(each_call)
    try:
        call()
    finally:
        sys.settrace(before)
    return count


def config_map(i: int, namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}", "namespace": namespace}}


def service(i: int, ip: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"app": "web"}, "ports": [{"port": 80}]}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"svc-{i}"},
        "spec": spec | ({"clusterIP": ip} if ip else {}),
    }


def test_lookups_by_key_kind_and_namespace_see_adds_replaces_and_removes() -> None:
    store = Store(
        [config_map(0), config_map(1, "team"), service(0), {"kind": "Namespace", "metadata": {"name": "team"}}]
    )
    assert [o["metadata"]["name"] for o in store.of_kind("ConfigMap")] == ["cm-0", "cm-1"]
    assert [o["metadata"]["name"] for o in store.of_kind("ConfigMap", "team")] == ["cm-1"]
    assert store.get("Namespace", "anything", "team") is not None  # cluster-scoped: the namespace is ignored
    replaced = {**config_map(0), "data": {"k": "v"}}
    store.add(replaced)  # an update keeps its place
    assert list(store.of_kind("ConfigMap")) == [replaced, config_map(1, "team")]
    assert store.get("ConfigMap", "default", "cm-0") is replaced
    assert store.remove("ConfigMap", "default", "cm-0") is replaced
    assert store.remove("ConfigMap", "default", "cm-0") is None
    assert store.get("ConfigMap", "default", "cm-0") is None
    assert list(store.of_kind("ConfigMap", "default")) == [] and len(list(store.of_kind("ConfigMap"))) == 1
    assert [o["kind"] for o in store] == ["ConfigMap", "Service", "Namespace"]
    store.add({"kind": "ConfigMap", "metadata": {}})  # no name: not an object the API server stores
    assert len(list(store)) == 3


def test_an_index_is_kept_in_step_with_the_objects() -> None:
    store = Store([service(0, "10.96.0.10"), service(1, "None")])
    at = ipaddress.IPv4Address("10.96.0.10")
    assert [s["metadata"]["name"] for s in store.by_index("Service", cluster_ips, at)] == ["svc-0"]
    store.add(service(0, "10.96.0.11"))  # the Service changes address: filed under the new one only
    assert store.by_index("Service", cluster_ips, at) == []
    store.add(service(2, "10.96.0.10"))
    assert [s["metadata"]["name"] for s in store.by_index("Service", cluster_ips, at)] == ["svc-2"]
    assert at in Taken(store, "default", "svc-0") and at not in Taken(store, "default", "svc-2")  # its own aside
    store.remove("Service", "default", "svc-2")
    assert at not in Taken(store, "default", "svc-0")
    assert ipaddress.IPv4Address("10.96.0.1") in Taken(store, "default", "svc-0")  # the `kubernetes` Service's


def test_a_lookup_reads_only_what_it_returns() -> None:
    store = Store([config_map(i) for i in range(2000)] + [service(0, "10.96.0.10")])
    at = ipaddress.IPv4Address("10.96.0.10")
    assert lines_run(lambda: list(store.of_kind("Service"))) < 20
    assert lines_run(lambda: list(store.of_kind("Service", "default"))) < 20
    assert lines_run(lambda: store.get("ConfigMap", "default", "cm-1999")) < 10
    assert lines_run(lambda: at in Taken(store, "default", "svc-1")) < 40


@pytest.mark.parametrize("make", [config_map, service], ids=["ConfigMaps", "Services"])
def test_admitting_twice_as_many_objects_costs_twice_as_much(make: Callable[[int], dict[str, Any]]) -> None:
    """Every lookup an object's admission makes (a CRD for its kind, quotas, limit ranges, priority classes, the
    cluster IPs taken) reads only what it finds, so the front door's cost per object does not grow with the objects
    admitted before it: 400 objects cost twice what 200 do (to within a few lines), where scanning costs 3x and more."""

    def cost(n: int) -> int:
        requests = [Request("many.yaml", i, make(i)) for i in range(n)]
        return lines_run(lambda: admit(requests))

    cost(20)  # what runs once (schemas loaded and cached) out of the way
    small, large = cost(200), cost(400)
    assert large < 2.1 * small, (small, large)
