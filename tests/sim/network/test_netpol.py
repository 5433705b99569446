"""NetworkPolicy compiled into nftables (`netpol`): which pods each policy isolates, and what its rules let through,
checked on the ruleset text (the enforcement itself, packets dropped or delivered between pods, is in
tests/sim/network/test_pod_network.py), and that nft accepts every ruleset compiled here (`nft --check`, in a throw-away
network namespace: this machine's ruleset is never touched)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from jaxinfra_sim.network import netpol

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class P:
    ip: str
    labels: Mapping[str, str]
    namespace: str = "default"
    host_network: bool = False


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
    both = netpol.compile_policies([policy({"podSelector": SERVER, "egress": []})], PODS, NAMESPACES)
    assert both.isolated == {"ingress": ("10.244.0.2",), "egress": ("10.244.0.2",)}  # no policyTypes: both


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
    assert chain(compiled, "ingress") == ["ip daddr { 10.244.0.2 } meta l4proto tcp accept", "drop"]
    assert len(compiled.notes) == 4 and "named port 'metrics' is not enforced" in compiled.notes[0]
    assert all(note.startswith(f"NetworkPolicy/default/{hostile} spec.ingress[") for note in compiled.notes)


@pytest.mark.simulator  # it starts nft (.ci/run installs nftables: never skipped)
def test_nft_accepts_every_ruleset_compiled_here() -> None:
    specs = [
        {"podSelector": SERVER, "ingress": [{"from": [{"podSelector": {}}], "ports": [{"port": 1, "endPort": 5}]}]},
        {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
        {"podSelector": SERVER, "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}]}]},
    ]
    ruleset = netpol.compile_policies([policy(s, name=str(i)) for i, s in enumerate(specs)], PODS, NAMESPACES).ruleset
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
