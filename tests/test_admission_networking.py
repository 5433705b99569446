"""The API server's validation of a NetworkPolicy (jaxinfra.admission.validation.networking): policies written in the
style of the Kubernetes docs' "Network Policies" examples are stored; each rule of pkg/apis/networking/validation
refuses its bad value with the message a real cluster prints after the field path; `jaxinfra validate` and
`jaxinfra simulate` refuse such a manifest with exit 2."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxinfra.admission import defaults
from jaxinfra.admission import validation as v
from jaxinfra.admission.store import Finding
from jaxinfra.errors import Refused
from jaxinfra.validate import validate_objects
from tests.support.cli import simulate_cli
from tests.support.paths import ROOT

pytestmark = pytest.mark.unit

# In the style of the docs' "test-network-policy": ingress from an IP block with a hole, a namespace and a pod role
# on one TCP port; egress to an IP block on another.
DATABASE = """
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: database-access
  namespace: shop
spec:
  podSelector:
    matchLabels: {role: database}
  policyTypes: [Ingress, Egress]
  ingress:
  - from:
    - ipBlock:
        cidr: 172.20.0.0/16
        except: [172.20.9.0/24]
    - namespaceSelector:
        matchLabels: {team: checkout}
    - podSelector:
        matchLabels: {role: api}
    ports:
    - protocol: TCP
      port: 5432
  egress:
  - to:
    - ipBlock: {cidr: 10.20.0.0/24}
    ports:
    - protocol: TCP
      port: 8125
"""

# The docs' other shapes: deny all ingress, allow all egress, a port range (endPort), a named port on UDP, a
# namespace and pod selector in one peer, a selector by expression.
OTHERS: list[dict[str, Any]] = [
    {"podSelector": {}, "policyTypes": ["Ingress"]},
    {"podSelector": {}, "egress": [{}], "policyTypes": ["Egress"]},
    {
        "podSelector": {"matchLabels": {"role": "collector"}},
        "policyTypes": ["Egress"],
        "egress": [{"to": [{"ipBlock": {"cidr": "10.1.0.0/24"}}], "ports": [{"port": 30000, "endPort": 30100}]}],
    },
    {
        "podSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["cache", "queue"]}]},
        "ingress": [
            {
                "from": [
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ops"}}, "podSelector": {}}
                ],
                "ports": [{"protocol": "UDP", "port": "dns"}, {"port": "metrics"}, {"protocol": "SCTP"}],
            }
        ],
    },
]


def policy(spec: dict[str, Any] | None = None, /, **edits: Any) -> dict[str, Any]:
    """DATABASE, its spec replaced by `spec` where given, defaulted as the API server defaults it; `edits`: dotted
    paths into the spec set to a value."""
    obj = yaml.safe_load(DATABASE)
    if spec is not None:
        obj["spec"] = copy.deepcopy(spec)
    for dotted, value in edits.items():
        node: Any = obj["spec"]
        *parents, last = dotted.split(".")
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[int(last) if isinstance(node, list) else last] = value
    defaults.apply(obj)
    return obj


def refusals(obj: dict[str, Any]) -> dict[tuple, str]:
    found: list[Finding] = [f for f in v.validate(obj) if not f.warning]
    assert all(f.fix for f in found)
    return {f.at: f.message for f in found}


IN0 = ("spec", "ingress", 0)
PORT0 = IN0 + ("ports", 0)
PEER0 = IN0 + ("from", 0)


@pytest.mark.parametrize("spec", [None, *OTHERS], ids=["database", "deny-ingress", "allow-egress", "range", "named"])
def test_policies_in_the_docs_style_are_stored(spec: dict[str, Any] | None) -> None:
    assert refusals(policy(spec)) == {}
    assert validate_objects([policy(spec)]) == []


def test_defaulting_fills_tcp_and_the_policy_types_validation_then_reads() -> None:
    """pkg/apis/networking/v1/defaults.go: a port without protocol is TCP; policyTypes absent are Ingress, and Egress
    where egress holds a rule. A protocol given as "" is not unset (a pointer to ""): refused."""
    obj = policy(OTHERS[3], **{"policyTypes": None})
    assert obj["spec"]["policyTypes"] == ["Ingress"]
    assert obj["spec"]["ingress"][0]["ports"][1] == {"port": "metrics", "protocol": "TCP"}
    assert policy(OTHERS[1], **{"policyTypes": []})["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert refusals(policy(**{"ingress.0.ports.0.protocol": ""})) == {
        PORT0 + ("protocol",): 'Unsupported value: "": supported values: "TCP", "UDP", "SCTP"'
    }


@pytest.mark.parametrize(
    ("port", "at", "message"),
    [
        (
            {"protocol": "ICMP", "port": 1},
            "protocol",
            'Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP"',
        ),
        ({"port": 70000}, "port", "Invalid value: 70000: must be between 1 and 65535, inclusive"),
        ({"port": 0}, "port", "Invalid value: 0: must be between 1 and 65535, inclusive"),
        ({"port": "80"}, "port", 'Invalid value: "80": must contain at least one letter (a-z)'),
        ({"port": "metrics-exporter"}, "port", 'Invalid value: "metrics-exporter": must be no more than 15 characters'),
        ({"port": "a--b"}, "port", 'Invalid value: "a--b": must not contain consecutive hyphens'),
        (
            {"port": "http", "endPort": 90},
            "endPort",
            "Invalid value: 90: may not be specified when `port` is non-numeric",
        ),
        ({"endPort": 90}, "endPort", "Invalid value: 90: may not be specified when `port` is not specified"),
        ({"port": 90, "endPort": 80}, "endPort", "Invalid value: 80: must be greater than or equal to `port`"),
        ({"port": 90, "endPort": 70000}, "endPort", "Invalid value: 70000: must be between 1 and 65535, inclusive"),
    ],
)
def test_a_port_the_api_server_refuses(port: dict[str, Any], at: str, message: str) -> None:
    """ValidateNetworkPolicyPort. 70000 is a number (an IntOrString holding an int), refused as a port number, never
    read as a name; "80" is a string, a name, and a name needs a letter."""
    found = refusals(policy(**{"ingress.0.ports.0": port}))
    assert found == {PORT0 + (at,): message}


def test_an_upper_case_port_name_gets_each_of_the_api_servers_messages() -> None:
    found = [f.message for f in v.validate(policy(**{"egress.0.ports.0": {"port": "HTTP-"}}))]
    assert found == [
        'Invalid value: "HTTP-": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)',
        'Invalid value: "HTTP-": must contain at least one letter (a-z)',
        'Invalid value: "HTTP-": must not begin or end with a hyphen',
    ]


@pytest.mark.parametrize(
    ("peer", "at", "message"),
    [
        ({}, (), "Required value: must specify a peer"),
        (None, (), "Required value: must specify a peer"),  # Go's zero struct
        ({"podSelector": None}, (), "Required value: must specify a peer"),
        (
            {"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}},
            (),
            "Forbidden: may not specify both ipBlock and another peer",
        ),
        ({"ipBlock": {}}, ("ipBlock", "cidr"), "Required value"),
        (
            {"ipBlock": {"cidr": "10.0.0.0/33"}},
            ("ipBlock", "cidr"),
            'Invalid value: "10.0.0.0/33": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)',
        ),
        (
            {"ipBlock": {"cidr": "10.0.0.256/8"}},
            ("ipBlock", "cidr"),
            'Invalid value: "10.0.0.256/8": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)',
        ),
        (
            {"ipBlock": {"cidr": "fe80::1%eth0/64"}},
            ("ipBlock", "cidr"),
            'Invalid value: "fe80::1%eth0/64": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)',
        ),
        (
            {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["192.168.0.0/24"]}},
            ("ipBlock", "except", 0),
            'Invalid value: "192.168.0.0/24": must be a strict subset of `cidr`',
        ),
        (
            {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.0.0.0/8"]}},
            ("ipBlock", "except", 0),
            'Invalid value: "10.0.0.0/8": must be a strict subset of `cidr`',
        ),
        (
            {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["2001:db8::/64"]}},
            ("ipBlock", "except", 0),
            'Invalid value: "2001:db8::/64": must be a strict subset of `cidr`',
        ),
        (
            {"podSelector": {"matchExpressions": [{"key": "role", "operator": "Equals", "values": ["api"]}]}},
            ("podSelector", "matchExpressions", 0, "operator"),
            'Invalid value: "Equals": not a valid selector operator',
        ),
        (
            {"namespaceSelector": {"matchLabels": {"team": "check out"}}},
            ("namespaceSelector", "matchLabels"),
            'Invalid value: "check out": a valid label must be an empty string or consist of alphanumeric '
            "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
            "'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
    ],
)
def test_a_peer_the_api_server_refuses(peer: dict[str, Any] | None, at: tuple, message: str) -> None:
    """ValidateNetworkPolicyPeer and ValidateIPBlock: one kind of peer at least, ipBlock alone; a CIDR Go's parser
    reads (no zone); each except strictly inside cidr; label selectors as everywhere."""
    assert refusals(policy(**{"ingress.0.from.0": peer})) == {PEER0 + at: message}


def test_cidrs_the_api_server_still_reads_loosely_are_stored() -> None:
    """StrictIPCIDRValidation is alpha and off: host bits set, an octet's leading zeros (read as decimal), an
    IPv4-mapped except inside an IPv4 cidr (Go's IPNet.Contains reads it as IPv4) are all stored."""
    for block in (
        {"cidr": "10.0.0.1/8", "except": ["10.1.2.3/16"]},
        {"cidr": "010.0.0.0/08", "except": ["10.001.0.0/16"]},
        {"cidr": "10.0.0.0/8", "except": ["::ffff:10.1.0.0/112"]},
        {"cidr": "2001:db8::/32", "except": ["2001:db8:1::/48"]},
    ):
        assert refusals(policy(**{"ingress.0.from.0": {"ipBlock": block}})) == {}, block


def test_policy_types_are_ingress_and_egress_at_most_once_each() -> None:
    assert refusals(policy(**{"policyTypes": ["Ingress", "egress"]})) == {
        ("spec", "policyTypes", 1): 'Unsupported value: "egress": supported values: "Ingress", "Egress"'
    }
    assert refusals(policy(**{"policyTypes": ["Ingress", "Egress", "Ingress"]})) == {
        ("spec", "policyTypes"): 'Invalid value: []networking.PolicyType{"Ingress", "Egress", "Ingress"}: may not '
        "specify more than two policyTypes"
    }


def test_every_problem_at_once_in_the_api_servers_order() -> None:
    """The policy's podSelector, then each ingress rule's ports and peers, each egress rule's, then policyTypes; the
    name is a DNS-1123 subdomain (ValidateNetworkPolicyName)."""
    obj = policy(
        **{
            "podSelector": {"matchLabels": {"role": "-db"}},
            "ingress.0.ports.0.port": 0,
            "ingress.0.from.0": {},
            "egress.0.ports.0.port": "DB",
            "policyTypes": ["Both"],
        }
    )
    obj["metadata"]["name"] = "Database"
    assert [f.at for f in v.validate(obj)] == [
        ("metadata", "name"),
        ("spec", "podSelector", "matchLabels"),
        PORT0 + ("port",),
        PEER0,
        ("spec", "egress", 0, "ports", 0, "port"),
        ("spec", "egress", 0, "ports", 0, "port"),
        ("spec", "policyTypes", 0),
    ]
    problems = validate_objects([obj], "policy.yaml")
    assert len(problems) == 7 and all(isinstance(p, Refused) and "NetworkPolicy/Database" in p.where for p in problems)


@pytest.mark.simulator  # it starts the command line twice
def test_validate_and_simulate_refuse_a_port_of_70000_with_exit_2(tmp_path: Path) -> None:
    """Both commands refuse the policy before anything starts, each with the field, the value and the message."""
    path = tmp_path / "in" / "policy.yaml"
    path.parent.mkdir()
    path.write_text(DATABASE.replace("port: 5432", "port: 70000"))
    done = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "validate", str(path)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert "Traceback" not in done.stdout + done.stderr and done.returncode == 2, done.stderr
    [error] = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert "spec.ingress[0].ports[0].port = 70000: Invalid value: 70000: must be between 1 and 65535" in error
    status, report, out = simulate_cli(str(path), "--run-command", tmp=tmp_path)
    assert status == 2 and report["ok"] is False and report["workloads"] == [], out
    assert [line for line in out.splitlines() if line.startswith("error: ")] == [error]
