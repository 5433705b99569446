"""NetworkPolicy compiled into nftables (`netpol`): which pods each policy isolates, and what its rules let through,
checked on the ruleset text (the enforcement itself, packets dropped or delivered between pods, is in
tests/sim/network/test_pod_network.py, a named port's at the end here), and that nft accepts every ruleset compiled
here (`nft --check`, in a throw-away network namespace: this machine's ruleset is never touched)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.core.model import NamedPort
from jaxinfra_sim.network import netpol
from tests.support.admitted import stored
from tests.support.cli import machine_network, simulate_as

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class P:
    ip: str
    labels: Mapping[str, str]
    namespace: str = "default"
    host_network: bool = False
    port_names: tuple[NamedPort, ...] = ()


PODS = [
    P("10.244.0.2", {"role": "server"}),
    P("10.244.0.3", {"role": "friend"}),
    P("10.244.0.4", {"role": "stranger"}),
    P("10.244.0.5", {"role": "friend"}, namespace="other"),
    P("10.244.0.6", {"role": "server"}, host_network=True),
]
NAMESPACES = {"default": {"kubernetes.io/metadata.name": "default"}, "other": {"team": "a"}}


def policy(spec: dict[str, Any], namespace: str = "default", name: str = "p") -> dict[str, Any]:
    return {"kind": "NetworkPolicy", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


SERVER = {"matchLabels": {"role": "server"}}
FRIEND = {"matchLabels": {"role": "friend"}}

# Two servers whose containers name their ports in the style of the Kubernetes docs' Service examples (`http`, a DNS
# port on UDP), each its own number; a friend; a stranger that names no port; the host-network server is the node's.
NAMED = [
    P(
        "10.244.0.2",
        {"role": "server"},
        port_names=(NamedPort("http", "TCP", 8080), NamedPort("dns", "UDP", 5353), NamedPort("metrics", "TCP", 9100)),
    ),
    P("10.244.0.3", {"role": "friend"}),
    P("10.244.0.4", {"role": "stranger"}),
    P("10.244.0.6", {"role": "server"}, host_network=True, port_names=(NamedPort("http", "TCP", 80),)),
    P("10.244.0.7", {"role": "server"}, port_names=(NamedPort("http", "TCP", 9090),)),
]


def chain(compiled: netpol.Compiled, name: str) -> list[str]:
    lines = compiled.ruleset.splitlines()
    start = lines.index(f"  chain {name} {{")
    return [line.strip() for line in lines[start + 1 : lines.index("  }", start)]]


def test_no_policy_isolates_nobody() -> None:
    compiled = netpol.compile_policies([], PODS, NAMESPACES)
    assert compiled.isolated == {"ingress": (), "egress": ()}
    assert chain(compiled, "ingress") == ["drop"] and compiled.notes == []


def test_a_policy_isolates_the_pods_it_selects_and_admits_its_peers_on_its_ports() -> None:
    spec = {
        "podSelector": SERVER,
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "friend"}}}], "ports": [{"port": 9000}]}],
    }
    compiled = netpol.compile_policies([policy(spec)], PODS, NAMESPACES)
    # the host-network server is the node's: no policy isolates it; the friend in `other` is not the policy's peer
    assert compiled.isolated == {"ingress": ("10.244.0.2",), "egress": ()}
    assert chain(compiled, "ingress") == [
        "ip daddr { 10.244.0.2 } ip saddr { 10.244.0.3 } meta l4proto tcp th dport { 9000 } accept",
        "drop",
    ]


def test_default_deny_and_allow_all() -> None:
    deny = netpol.compile_policies(
        [policy({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]})], PODS, NAMESPACES
    )
    assert deny.isolated["ingress"] == deny.isolated["egress"] == ("10.244.0.2", "10.244.0.3", "10.244.0.4")
    assert chain(deny, "ingress") == ["drop"] and chain(deny, "egress") == ["drop"]
    allow = netpol.compile_policies([policy({"podSelector": SERVER, "ingress": [{}]})], PODS, NAMESPACES)
    assert chain(allow, "ingress") == ["ip daddr { 10.244.0.2 } accept", "drop"]


def test_policy_types_default_from_the_rules_given() -> None:
    egress_only = policy(
        {
            "podSelector": SERVER,
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.244.0.0/16"]}}]}],
        }
    )
    compiled = netpol.compile_policies([egress_only], PODS, NAMESPACES)
    assert compiled.isolated == {"ingress": (), "egress": ("10.244.0.2",)}
    assert chain(compiled, "egress") == [
        "ip saddr { 10.244.0.2 } ip daddr 10.0.0.0/8 ip daddr != { 10.244.0.0/16 } return",
        "drop",
    ]
    # no policyTypes: Ingress, and Egress where egress holds a rule (pkg/apis/networking/v1/defaults.go)
    only_in = netpol.compile_policies([policy({"podSelector": SERVER, "egress": []})], PODS, NAMESPACES)
    assert only_in.isolated == {"ingress": ("10.244.0.2",), "egress": ()}
    both = netpol.compile_policies([policy({"podSelector": SERVER, "egress": [{}]})], PODS, NAMESPACES)
    assert both.isolated == {"ingress": ("10.244.0.2",), "egress": ("10.244.0.2",)}


def test_namespace_selectors_alone_and_with_a_pod_selector() -> None:
    by_ns = {"namespaceSelector": {"matchLabels": {"team": "a"}}}
    both = {**by_ns, "podSelector": {"matchLabels": {"role": "friend"}}}
    every_ns = {"namespaceSelector": {}, "podSelector": {"matchLabels": {"role": "friend"}}}
    for peer, sources in (
        (by_ns, "{ 10.244.0.5 }"),
        (both, "{ 10.244.0.5 }"),
        (every_ns, "{ 10.244.0.3, 10.244.0.5 }"),
    ):
        compiled = netpol.compile_policies(
            [policy({"podSelector": SERVER, "ingress": [{"from": [peer]}]})], PODS, NAMESPACES
        )
        assert chain(compiled, "ingress")[0] == f"ip daddr {{ 10.244.0.2 }} ip saddr {sources} accept"


def test_ports_protocols_and_ranges() -> None:
    ports = [{"port": 80}, {"protocol": "UDP", "port": 53}, {"port": 9000, "endPort": 9010}, {"protocol": "SCTP"}]
    compiled = netpol.compile_policies(
        [policy({"podSelector": SERVER, "ingress": [{"ports": ports}]})], PODS, NAMESPACES
    )
    assert chain(compiled, "ingress")[:-1] == [
        "ip daddr { 10.244.0.2 } meta l4proto sctp accept",
        "ip daddr { 10.244.0.2 } meta l4proto tcp th dport { 80, 9000-9010 } accept",
        "ip daddr { 10.244.0.2 } meta l4proto udp th dport { 53 } accept",
    ]


def test_what_is_not_enforced_is_a_note_and_nothing_of_a_manifest_reaches_the_ruleset() -> None:
    hostile = 'x" } ; flush ruleset ; {'
    spec = {
        "podSelector": SERVER,
        "ingress": [
            {"ports": [{"port": "metrics"}, {"protocol": hostile, "port": 1}]},
            {"from": [{"ipBlock": {"cidr": hostile}}, {"ipBlock": {"cidr": "fd00::/8"}}]},
        ],
    }
    compiled = netpol.compile_policies([policy(spec, name=hostile)], PODS, NAMESPACES)
    assert "flush" not in compiled.ruleset
    assert chain(compiled, "ingress") == ["drop"]  # the server names no port 'metrics': nothing gets through
    assert len(compiled.notes) == 4
    assert any("named port 'metrics' (TCP) names no container port" in note for note in compiled.notes)
    assert all(note.startswith(f"NetworkPolicy/default/{hostile} spec.ingress[") for note in compiled.notes)


def test_an_ipv4_mapped_except_still_excepts() -> None:
    """The API server stores `except: [::ffff:10.244.0.0/112]` inside an IPv4 cidr (Go's IPNet.Contains reads it as
    10.244.0.0/16); dropping it as IPv6 would widen the block, so it is the IPv4 block it maps."""
    block = {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["::ffff:10.244.0.0/112", "fd00::/8"]}}
    spec = {"podSelector": SERVER, "policyTypes": ["Egress"], "egress": [{"to": [block]}]}
    compiled = netpol.compile_policies([policy(spec)], PODS, NAMESPACES)
    assert (
        chain(compiled, "egress")[0]
        == "ip saddr { 10.244.0.2 } ip daddr 10.0.0.0/8 ip daddr != { 10.244.0.0/16 } return"
    )


def test_a_named_port_on_ingress_is_each_selected_pods_own_port_of_that_name_and_protocol() -> None:
    """An ingress rule's named port is the port of that name on the pod the packet goes to, one of those the policy
    selects (Calico's named-port IP set, as (address, port) pairs): 8080 on one server, 9090 on the other, never every
    TCP port. The name matches on the rule's protocol only: `dns` is a UDP port, so the rule's TCP `dns` matches
    nothing (a note); on UDP it is 5353."""
    rule = {"from": [{"podSelector": FRIEND}], "ports": [{"port": "http"}, {"port": "dns"}, {"port": 9000}]}
    compiled = netpol.compile_policies([policy({"podSelector": SERVER, "ingress": [rule]})], NAMED, NAMESPACES)
    assert chain(compiled, "ingress") == [
        "ip daddr { 10.244.0.2, 10.244.0.7 } ip saddr { 10.244.0.3 } meta l4proto tcp th dport { 9000 } accept",
        "ip saddr { 10.244.0.3 } meta l4proto tcp ip daddr . th dport { 10.244.0.2 . 8080, 10.244.0.7 . 9090 } accept",
        "drop",
    ]
    assert compiled.notes == []  # `http` names a port of some selected pod, on TCP
    udp = {"ports": [{"protocol": "UDP", "port": "dns"}]}
    compiled = netpol.compile_policies([policy({"podSelector": SERVER, "ingress": [udp]})], NAMED, NAMESPACES)
    assert chain(compiled, "ingress") == ["meta l4proto udp ip daddr . th dport { 10.244.0.2 . 5353 } accept", "drop"]
    tcp_dns = {"ports": [{"port": "dns"}]}
    compiled = netpol.compile_policies([policy({"podSelector": SERVER, "ingress": [tcp_dns]})], NAMED, NAMESPACES)
    assert chain(compiled, "ingress") == ["drop"]
    assert compiled.notes == [
        "NetworkPolicy/default/p spec.ingress[0]: named port 'dns' (TCP) names no container port of the rule's "
        "destination pods: it allows nothing, as on a cluster"
    ]


def test_a_named_port_on_egress_is_each_destination_pods_own_port() -> None:
    """An egress rule's named port is each destination pod's own port of that name: the friend may reach each
    server on its `http` port and nothing else; a peer pod without the name (the stranger) is not reached through
    it. Without peers the destinations are every pod (the host-network server is the node's: no named ports); an
    `ipBlock` peer's are the pods whose addresses it holds, less its `except`s; one holding no pod matches nothing."""

    def egress(rule: dict[str, Any]) -> list[str]:
        spec = {"podSelector": FRIEND, "policyTypes": ["Egress"], "egress": [rule]}
        return chain(netpol.compile_policies([policy(spec)], NAMED, NAMESPACES), "egress")

    both = "{ 10.244.0.2 . 8080, 10.244.0.7 . 9090 }"
    http = [{"port": "http"}]
    assert egress(
        {"to": [{"podSelector": SERVER}, {"podSelector": {"matchLabels": {"role": "stranger"}}}], "ports": http}
    ) == [
        f"ip saddr {{ 10.244.0.3 }} meta l4proto tcp ip daddr . th dport {both} return",
        "drop",
    ]
    assert egress({"ports": http}) == [
        f"ip saddr {{ 10.244.0.3 }} meta l4proto tcp ip daddr . th dport {both} return",
        "drop",
    ]
    block = {"ipBlock": {"cidr": "10.244.0.0/16", "except": ["10.244.0.7/32"]}}
    assert egress({"to": [block], "ports": http}) == [
        "ip saddr { 10.244.0.3 } meta l4proto tcp ip daddr . th dport { 10.244.0.2 . 8080 } return",
        "drop",
    ]
    assert egress({"to": [{"ipBlock": {"cidr": "192.168.0.0/16"}}], "ports": http}) == ["drop"]


def test_a_port_entry_without_a_port_makes_the_protocols_named_ports_moot() -> None:
    """`{protocol: TCP}` allows every TCP port: the rule's TCP named ports add nothing; its UDP ones still resolve."""
    ports = [{"port": "http"}, {"protocol": "TCP"}, {"protocol": "UDP", "port": "dns"}]
    compiled = netpol.compile_policies(
        [policy({"podSelector": SERVER, "ingress": [{"ports": ports}]})], NAMED, NAMESPACES
    )
    assert chain(compiled, "ingress") == [
        "ip daddr { 10.244.0.2, 10.244.0.7 } meta l4proto tcp accept",
        "meta l4proto udp ip daddr . th dport { 10.244.0.2 . 5353 } accept",
        "drop",
    ]


@pytest.mark.simulator  # it starts nft (.ci/run installs nftables: never skipped)
def test_nft_accepts_every_ruleset_compiled_here() -> None:
    specs: list[dict[str, Any]] = [
        {"podSelector": SERVER, "ingress": [{"from": [{"podSelector": {}}], "ports": [{"port": 1, "endPort": 5}]}]},
        {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
        {"podSelector": SERVER, "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}]}]},
        {"podSelector": SERVER, "ingress": [{"ports": [{"port": "http"}, {"protocol": "UDP", "port": "dns"}]}]},
        {"podSelector": FRIEND, "egress": [{"to": [{"podSelector": SERVER}], "ports": [{"port": "http"}]}]},
    ]
    compiled = netpol.compile_policies([policy(s, name=str(i)) for i, s in enumerate(specs)], NAMED, NAMESPACES)
    assert any(" . th dport { " in r for r in compiled.rules["ingress"] + compiled.rules["egress"])
    ruleset = compiled.ruleset
    # unshare -Urn: a network namespace of a user namespace of its own, as root or not; nft --check changes nothing
    done = subprocess.run(
        ["unshare", "-Urn", "nft", "--check", "-f", "-"], input=ruleset, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr + ruleset


@pytest.mark.simulator  # it starts nft
def test_policies_of_clusters_side_by_side_add_up_and_no_cluster_reaches_another() -> None:
    """Two clusters (a stack and the YAML) whose workloads run at once: each one's policies compiled over its own pods,
    then one table with both; a cluster's pods reach none of the other's (each cluster is a network of its own). With
    one cluster alive there is no such rule."""
    ours = netpol.compile_policies([policy({"podSelector": SERVER})], PODS[:3], NAMESPACES)
    theirs = netpol.compile_policies([], [P("10.244.40.2", {"role": "server"})], NAMESPACES)
    ruleset = netpol.merged([ours, theirs])
    forward = [line.strip() for line in ruleset.splitlines()]
    assert "set cluster0 { type ipv4_addr; elements = { 10.244.0.2, 10.244.0.3, 10.244.0.4 }; }" in forward
    assert "ip saddr @cluster1 ip daddr 10.244.0.0/16 ip daddr != @cluster1 drop" in forward
    assert "set ingress_isolated { type ipv4_addr; elements = { 10.244.0.2 }; }" in forward
    done = subprocess.run(
        ["unshare", "-Urn", "nft", "--check", "-f", "-"], input=ruleset, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr + ruleset
    alone = netpol.merged([ours, netpol.compile_policies([], [], NAMESPACES)])
    assert "cluster" not in alone and alone == ours.ruleset


# A server naming its port 9000 `serve` and listening on 9001 too, behind a policy in the style of the Kubernetes
# docs' "Declare Network Policy" that admits ingress on `serve` only; a client that must reach 9000 and must not
# reach 9001 (it ends 9 if a connection to 9001 got through within 4 s; the server, which stays 6 s past serving it,
# fails if it accepted one there).
NAMED_PORT_JOBSET = """\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: server-serves-its-named-port
spec:
  podSelector: {matchLabels: {role: server}}
  policyTypes: [Ingress]
  ingress:
  - ports:
    - port: serve
---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: named
spec:
  replicatedJobs:
  - name: server
    template:
      spec:
        backoffLimit: 0
        template:
          metadata: {labels: {role: server}}
          spec:
            restartPolicy: Never
            containers:
            - name: server
              image: python:3.11-slim
              ports: [{name: serve, containerPort: 9000}]
              command:
              - python3
              - -c
              - |
                import select, socket, time
                named, other = socket.create_server(("0.0.0.0", 9000)), socket.create_server(("0.0.0.0", 9001))
                served = None
                while served is None or time.monotonic() - served < 6:
                    for ready in select.select([named, other], [], [], 0.5)[0]:
                        conn, (ip, _) = ready.accept()
                        if ready is other:
                            raise SystemExit(f"9001 reached from {ip}")
                        print("served", ip, conn.recv(64).decode(), flush=True)
                        served = time.monotonic()
  - name: client
    template:
      spec:
        backoffLimit: 0
        template:
          metadata: {labels: {role: client}}
          spec:
            restartPolicy: Never
            containers:
            - name: client
              image: python:3.11-slim
              command:
              - python3
              - -c
              - |
                import socket, time
                for _ in range(100):
                    try:
                        with socket.create_connection(("named-server-0-0.named", 9000), timeout=1) as c:
                            c.sendall(b"client")
                        break
                    except OSError as e:
                        print("9000: not yet:", e, flush=True)
                        time.sleep(0.2)
                else:
                    raise SystemExit("9000 never got through")
                start = time.monotonic()
                while time.monotonic() - start < 4:
                    try:
                        with socket.create_connection(("named-server-0-0.named", 9001), timeout=1):
                            raise SystemExit(9)
                    except OSError as e:
                        print("9001: blocked:", e, flush=True)
                        time.sleep(0.2)
"""


@pytest.mark.simulator  # it runs the simulator
@pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
def test_a_named_port_admits_its_own_port_and_nothing_else(home: Path, as_root: bool) -> None:
    """End to end: the policy's named port `serve` is the server's 9000; the client is served there, and its
    connections to 9001, a port the server also listens on but the policy does not name, time out (dropped, as
    Calico drops them); a rule that read the name as every TCP port would let 9001 through. No run changes this
    machine's interfaces or nftables ruleset."""
    before = machine_network()
    rc, out, report = simulate_as(home, NAMED_PORT_JOBSET, "--run-command", "--timeout", "40", as_root=as_root)
    pods = {p["hostname"]: p["exit_code"] for p in report["workloads"][0]["attempts"][0]["pods"]}
    assert rc == 0 and pods == {"named-server-0-0": 0, "named-client-0-0": 0}, out
    assert machine_network() == before


def test_a_pods_named_ports_are_every_containers_with_their_protocols() -> None:
    """The pods the simulator starts carry every container's named ports, init containers' (a sidecar here) too,
    each with its protocol (Calico's WorkloadEndpoint ports); the policy compiled over them resolves `serve` to the
    server's 9000 alone. (Emulated in process: nothing starts.)"""
    docs = list(yaml.safe_load_all(NAMED_PORT_JOBSET))
    server = docs[1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    server["initContainers"] = [
        {
            "name": "resolver",
            "image": "python:3.11-slim",
            "restartPolicy": "Always",
            "ports": [{"name": "dns", "containerPort": 5353, "protocol": "UDP"}, {"containerPort": 9001}],
        }
    ]
    objects = stored(docs)
    pods = [p for w in emulate(objects).workloads for p in w.pods]
    [serving] = [p for p in pods if p.labels.get("role") == "server"]
    assert serving.port_names == (NamedPort("serve", "TCP", 9000), NamedPort("dns", "UDP", 5353))
    assert chain(netpol.of_manifests(objects, pods), "ingress") == [
        f"meta l4proto tcp ip daddr . th dport {{ {serving.ip} . 9000 }} accept",
        "drop",
    ]
