"""ClusterIP Services without running anything: the API server's allocator (`jaxinfra.admission.clusterip`), what
cluster DNS answers for a Service with a cluster IP, what the API server serves, and kube-proxy's ruleset text and
sync rate (`jaxinfra_sim.network.kubeproxy`). The simulations that use them are tests/sim/network/test_services.py."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from jaxinfra.admission import Request, admit
from jaxinfra.admission.clusterip import SERVICE_CIDR, choose, static_band
from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.core import model
from jaxinfra_sim.core.inputs import Service, ServicePort, service_of
from jaxinfra_sim.network import kubeproxy
from jaxinfra_sim.network.dns import ClusterDns
from tests.support.admitted import stored

pytestmark = pytest.mark.unit


def svc(name: str = "web", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}], **spec},
    }


def admitted(*docs: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    out = admit([Request("s.yaml", i, d) for i, d in enumerate(docs)])
    return [o for _, o in out.stored], [f"{p.path}: {p.message}" for p in out.problems]


# --- the allocator -------------------------------------------------------------------------------------------------


def test_a_service_gets_a_cluster_ip_of_the_range_above_the_static_band_the_same_each_time() -> None:
    [first], _ = admitted(svc())
    [again], _ = admitted(svc())
    ip = ipaddress.IPv4Address(first["spec"]["clusterIP"])
    assert first["spec"]["clusterIPs"] == [str(ip)] and again["spec"]["clusterIP"] == str(ip)
    assert ip in SERVICE_CIDR and int(ip) - int(SERVICE_CIDR.network_address) > static_band() == 256


def test_a_given_cluster_ip_in_range_is_honoured_and_one_outside_it_refused() -> None:
    [kept], problems = admitted(svc(clusterIP="10.96.0.10"))
    assert kept["spec"]["clusterIPs"] == ["10.96.0.10"] and problems == []
    for outside in ("10.0.0.5", "10.96.0.0", "10.111.255.255", "fd00::1"):
        stored_, problems = admitted(svc(clusterIP=outside))
        assert stored_ == []
        assert problems == [
            f'Service/web spec.clusterIPs: Invalid value: []string{{"{outside}"}}: failed to allocate IP {outside}: '
            f"the provided IP ({outside}) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
        ]


def test_a_cluster_ip_already_taken_is_refused() -> None:
    _, problems = admitted(svc("a", clusterIP="10.96.0.10"), svc("b", clusterIP="10.96.0.10"))
    assert problems == [
        'Service/b spec.clusterIPs: Invalid value: []string{"10.96.0.10"}: failed to allocate IP 10.96.0.10: '
        "provided IP is already allocated"
    ]
    _, problems = admitted(svc("a", clusterIP="10.96.0.1"))  # the `kubernetes` Service's
    assert problems and problems[0].endswith("provided IP is already allocated")


def test_an_address_that_is_not_an_ip_is_refused_and_headless_and_external_name_get_none() -> None:
    _, problems = admitted(svc(clusterIP="ten"))
    assert problems == [
        'Service/web spec.clusterIPs[0]: Invalid value: "ten": must be a valid IP address, (e.g. 10.9.8.7 or '
        "2001:db8::ffff)"
    ]
    (headless, external), problems = admitted(
        svc("h", clusterIP="None"), {**svc("e"), "spec": {"type": "ExternalName", "externalName": "example.com"}}
    )
    assert problems == [] and headless["spec"]["clusterIP"] == "None" and "clusterIP" not in external["spec"]


def test_the_allocator_skips_taken_addresses_and_falls_back_to_the_static_band() -> None:
    first = choose("default", "web", set())
    assert first is not None and choose("default", "web", {first}) != first


# --- DNS and the API server -------------------------------------------------------------------------------------


def pod(ip: str, labels: dict[str, str], **fields: Any) -> model.Pod:
    return model.Pod(
        workload="Job/default/x",
        namespace="default",
        name=f"p-{ip}",
        hostname=f"p-{ip.replace('.', '-')}",
        subdomain=None,
        ip=ip,
        job_index=0,
        completion_index=0,
        global_index=0,
        labels=labels,
        annotations={},
        container="c",
        image="python:3.11-slim",
        command=(),
        args=(),
        env={},
        working_dir=None,
        devices=1,
        accelerator="cpu",
        **fields,
    )


def test_dns_answers_a_cluster_ip_service_with_its_virtual_ip_and_a_headless_one_with_a_pod() -> None:
    [with_ip, headless] = [service_of(o) for o in admitted(svc(clusterIP="10.96.0.20"), svc("h", clusterIP="None"))[0]]
    dns = ClusterDns([with_ip, headless], [pod("10.244.0.2", {"app": "web"})])
    assert dns.resolve("web", "default") == ("10.96.0.20", with_ip)
    assert dns.hosts["web.default.svc.cluster.local"] == "10.96.0.20"
    assert dns.resolve("h", "default") == ("10.244.0.2", headless)
    assert dns.resolve("web", "other") is None  # the short name is the pod's own namespace's


def test_the_api_server_serves_the_allocated_cluster_ip() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "completionMode": "Indexed",
            "completions": 1,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "python:3.11"}]}},
        },
    }
    cluster = emulate(stored([svc(clusterIP="10.96.0.30"), job]), api_objects=True)
    [served] = [o for o in cluster.objects if o.get("kind") == "Service" and o["metadata"]["name"] == "web"]
    assert served["spec"]["clusterIP"] == "10.96.0.30" and served["spec"]["clusterIPs"] == ["10.96.0.30"]


# --- kube-proxy's rules -----------------------------------------------------------------------------------------


WEB = Service(
    "default",
    "web",
    {"app": "web"},
    False,
    False,
    ((80, 8080),),
    "s.yaml",
    cluster_ip="10.96.0.40",
    port_specs=(ServicePort("http", 80, 8080), ServicePort("dns", 53, "dns", "UDP")),
)


def endpoints(*ready: bool) -> list[kubeproxy.Endpoint]:
    return [
        kubeproxy.Endpoint(pod(f"10.244.0.{i + 2}", {"app": "web"}, named_ports={"dns": 5353}), r)
        for i, r in enumerate(ready)
    ]


def test_each_ready_endpoint_is_a_random_pick_with_hairpin_masquerade() -> None:
    text = kubeproxy.ruleset([WEB], endpoints(True, True, False))
    assert "numgen random mod 2 vmap { 0 : goto endpoint-0-0-0, 1 : goto endpoint-0-0-1 }" in text
    assert "    ip saddr 10.244.0.2 jump mark-for-masquerade\n    meta l4proto tcp dnat to 10.244.0.2:8080\n" in text
    assert "meta l4proto udp dnat to 10.244.0.3:5353" in text  # targetPort by the container port's name
    assert "10.244.0.4" not in text  # not ready
    assert "10.96.0.40 . tcp . 80 : goto service-0-0" in text and "no-endpoint-services { type" in text
    assert text == kubeproxy.ruleset([WEB], endpoints(True, True, False))  # deterministic


def test_a_service_port_without_ready_endpoints_is_rejected() -> None:
    text = kubeproxy.ruleset([WEB], endpoints(False))
    assert "elements = { 10.96.0.40 . tcp . 80 : goto reject-chain, 10.96.0.40 . udp . 53 : goto reject-chain }" in text
    assert "dnat to" not in text
    published = Service(**{**WEB.__dict__, "publish_not_ready": True})
    assert "dnat to 10.244.0.2:8080" in kubeproxy.ruleset([published], endpoints(False))


def test_terminating_endpoints_serve_only_where_no_ready_one_is_left() -> None:
    [a, b] = endpoints(True, True)
    stopping = kubeproxy.Endpoint(b.pod, True, terminating=True)
    assert "10.244.0.3" not in kubeproxy.ruleset([WEB], [a, stopping])
    assert "dnat to 10.244.0.3:8080" in kubeproxy.ruleset([WEB], [stopping])  # kube-proxy's fallback
    assert "goto reject-chain" in kubeproxy.ruleset([WEB], [kubeproxy.Endpoint(b.pod, False, terminating=True)])


def test_a_named_target_the_pod_does_not_have_serves_nothing() -> None:
    named = Service(**{**WEB.__dict__, "port_specs": (ServicePort("http", 80, "http-alt"),)})
    assert "goto reject-chain" in kubeproxy.ruleset([named], endpoints(True))


def test_the_filter_chains_run_around_the_dnat_as_kube_proxys_do_and_before_network_policy() -> None:
    text = kubeproxy.ruleset([WEB], [])
    assert "type filter hook forward priority -110;" in text  # dstnat - 10: before netpol's forward at filter (0)
    assert "type nat hook prerouting priority -100;" in text and "type nat hook postrouting priority 100;" in text
    assert "type filter hook output priority -90;" in text


def test_syncs_come_at_kube_proxys_rate() -> None:
    loaded: list[str] = []
    proxy = kubeproxy.Proxy([WEB], loaded.append)
    assert proxy.sync(0.0, endpoints(False)) is None and proxy.sync(0.1, endpoints(True)) is None  # the burst
    due = proxy.sync(0.2, endpoints(True, True))
    assert due is not None and 0.2 < due <= 0.2 + kubeproxy.MIN_SYNC_S and len(loaded) == 2
    assert proxy.sync(1.3, endpoints(True, True)) is None and len(loaded) == 3
    assert proxy.sync(1.4, endpoints(True, True)) is None and len(loaded) == 3  # unchanged: nothing to load
