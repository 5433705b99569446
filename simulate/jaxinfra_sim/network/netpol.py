"""NetworkPolicy enforced as a network plugin enforces it: the policies of the manifests, compiled into one nftables
table for the simulation's network namespace (never this machine's), through which every pod-to-pod packet is routed.

Kubernetes' semantics (the NetworkPolicy API reference and the docs' "Network Policies" page; kubernetes/api @
v0.30.0 networking/v1/types.go):
- a pod is isolated for ingress (egress) once some policy of its namespace selects it (`spec.podSelector`) with that
  policy type; then only what some such policy's rules allow may reach it (leave it); the rest is dropped. Policies
  add up; none can deny what another allows. A pod no policy selects is not isolated.
- `policyTypes` absent: Ingress always, Egress where `spec.egress` holds a rule (the API server's default,
  `jaxinfra.admission.defaults`; what it stores has them set).
- a rule's peers (`from`/`to`) are OR'ed, its ports are OR'ed, and peers AND ports; a rule without peers matches
  every peer, without ports every port; `ingress: [{}]` allows everything, a policy type without rules nothing.
- a peer: `podSelector` (the policy's namespace), `namespaceSelector` (every pod of the namespaces whose labels
  match, `kubernetes.io/metadata.name` included), both (those pods of those namespaces), or `ipBlock` (a CIDR less
  its `except` CIDRs).
- a port: `protocol` (TCP unless given; UDP, SCTP), `port` (absent: every port), `endPort` (a range).
- a named port: "a numerical or named port on a pod ... only traffic on the specified protocol AND port will be
  matched" (kubernetes/api @ 1ff85247 networking/v1/types.go NetworkPolicyPort.Port), the pod being the packet's
  destination. Resolved as Calico resolves it: a pod's named ports are its containers' and init containers' named
  containerPorts with their protocols (projectcalico/calico @ 0f71015b libcalico-go/lib/backend/k8s/conversion/
  workload_endpoint_default.go appendEndpointPorts); a named port in a rule becomes a set of (address, protocol,
  port) members, one per destination pod that has a port of that name on the rule's protocol (felix/calc/
  rule_scanner.go @ 036c024d ruleToParsedRule, namedPortsToIPSets; felix/labelindex/named_port_index.go @ 02cd8cdf
  LookupNamedPorts). So on ingress it is each selected pod's own port of that name; on egress each peer pod's (an
  `ipBlock` peer: the pods whose addresses it holds, an address outside any pod none); a pod without such a port
  is not reached through it. Cilium resolves an egress rule's name over every pod of the cluster at once (one
  number for all its destinations, none where pods disagree: cilium/cilium pkg/policy/types
  NamedPortMultiMap.GetNamedPort); Calico's reading is the narrower, so a named port here never allows a port its
  destination does not name.
- replies of an allowed connection are allowed (connection tracking), and traffic between a pod and its node always
  is ("Network Policies": the node's, here the simulation's namespace: probes, the API server, host-network pods).

Here: one `inet` table whose forward hook sees every packet between pods (each pod's address is routed to its own
veth, as Calico routes them), with conntrack accepting replies; a set per direction of the isolated pods'
addresses; a chain per direction holding every policy's rules, each rule one nftables statement (a named port's: an
`ip daddr . th dport` set of the destination pods' pairs). Nothing of a manifest is written into the ruleset but
addresses, CIDRs, port numbers and protocols, each parsed first; what a policy asks that is not enforced becomes a
note (`Compiled.notes`), as does a named port no destination pod has.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from jaxinfra.admission.validation.networking import as_ipv4
from jaxinfra_sim.apiserver import selectors
from jaxinfra_sim.core import model
from jaxinfra_sim.network.netns_setup import POD_CIDR


class Endpoint(Protocol):
    """What a policy needs of a pod (`model.Pod` has it)."""

    @property
    def ip(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def host_network(self) -> bool: ...
    @property
    def port_names(self) -> tuple[model.NamedPort, ...]: ...


TABLE = "jaxinfra"
PROTOCOLS = {"TCP": "tcp", "UDP": "udp", "SCTP": "sctp"}
DIRECTIONS = (("ingress", "from", "daddr", "saddr"), ("egress", "to", "saddr", "daddr"))
"""(policy type, the rule's peer field, the selected pods' side of a packet, the peer's side)."""


@dataclass
class Compiled:
    """The ruleset (`nft -f` input, deterministic) and the notes on what of the policies is not enforced."""

    ruleset: str
    isolated: dict[str, tuple[str, ...]] = field(default_factory=dict)  # direction -> the isolated pods' addresses
    notes: list[str] = field(default_factory=list)
    rules: dict[str, tuple[str, ...]] = field(default_factory=dict)  # direction -> its chain's statements, in order
    pods: tuple[str, ...] = ()  # the addresses of the pods it was compiled over (host-network ones are the node's)


@dataclass(frozen=True)
class _Peer:
    """One peer of a rule: the nft match on the peer's side of a packet ("": every peer), and the pods it covers
    (whose container ports an egress rule's named port resolves to)."""

    match: str
    pods: tuple[Endpoint, ...]


@dataclass
class _Ports:
    """A rule's `ports`: nft matches of the numeric ones, one per protocol ([""]: every port), and the named ones by
    protocol (nft's name of it); both empty: the rule matches nothing."""

    numeric: list[str]
    named: dict[str, set[str]]


def _meta(obj: Mapping) -> Mapping:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _where(policy: Mapping) -> str:
    meta = _meta(policy)
    return f"NetworkPolicy/{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


def _policy_types(spec: Mapping) -> list[str]:
    """spec.policyTypes, or as the API server defaults it (`jaxinfra.admission.defaults`): Ingress, and Egress where
    `egress` holds a rule."""
    types = spec.get("policyTypes")
    if isinstance(types, list) and types:
        return [str(t).lower() for t in types if str(t) in ("Ingress", "Egress")]
    egress = spec.get("egress")
    return ["ingress", *(["egress"] if isinstance(egress, list) and egress else [])]


def _by_address(pods: Iterable[Endpoint]) -> tuple[Endpoint, ...]:
    return tuple(sorted({p.ip: p for p in pods}.values(), key=lambda p: ipaddress.IPv4Address(p.ip)))


def _selected(
    peer: Mapping, namespace: str, pods: Sequence[Endpoint], namespace_labels: Mapping[str, Mapping[str, str]]
) -> tuple[Endpoint, ...]:
    """The pods a podSelector / namespaceSelector peer names, by address (host-network pods are the node's)."""
    every: tuple[selectors.Requirement, ...] = ()
    pod_selector = selectors.label_selector(peer["podSelector"]) if "podSelector" in peer else every
    if "namespaceSelector" in peer:
        ns_selector = selectors.label_selector(peer["namespaceSelector"])
        in_ns = [p for p in pods if selectors.matches(ns_selector, namespace_labels.get(p.namespace, {}))]
    else:
        in_ns = [p for p in pods if p.namespace == namespace]
    return _by_address(p for p in in_ns if not p.host_network and selectors.matches(pod_selector, p.labels))


def _set(items: Iterable[str]) -> str:
    return "{ " + ", ".join(items) + " }"


def _addresses(pods: Iterable[Endpoint]) -> str:
    return _set(p.ip for p in pods)


def _peer(
    peer: object,
    side: str,
    namespace: str,
    pods: Sequence[Endpoint],
    namespace_labels: Mapping[str, Mapping[str, str]],
    where: str,
    notes: list[str],
) -> _Peer | None:
    """One peer (None: it matches nothing here)."""
    if not isinstance(peer, Mapping):
        notes.append(f"{where}: a peer that is not an object ({peer!r:.40}) matches nothing")
        return None
    if "ipBlock" in peer:
        block = peer["ipBlock"] if isinstance(peer["ipBlock"], Mapping) else {}
        try:
            cidr = ipaddress.ip_network(str(block.get("cidr", "")), strict=False)
            excepts = [ipaddress.ip_network(str(e), strict=False) for e in block.get("except") or []]
        except ValueError:
            notes.append(f"{where}: ipBlock {block.get('cidr')!r:.60} is not a CIDR; it matches nothing")
            return None
        if not isinstance(cidr, ipaddress.IPv4Network):
            notes.append(f"{where}: ipBlock {cidr} is IPv6; the pods have IPv4 addresses only, it matches nothing")
            return None
        # an IPv4-mapped except is the IPv4 block it maps (the API server reads it so): dropping it would widen the rule
        held = [e for e in map(as_ipv4, excepts) if isinstance(e, ipaddress.IPv4Network)]
        excepted = sorted({str(e) for e in held})
        inside = (p for p in pods if not p.host_network and _within(p.ip, cidr, held))
        match = f"ip {side} {cidr}" + (f" ip {side} != {_set(excepted)}" if excepted else "")
        return _Peer(match, _by_address(inside))
    selected = _selected(peer, namespace, pods, namespace_labels)
    return _Peer(f"ip {side} {_addresses(selected)}", selected) if selected else None


def _within(ip: str, cidr: ipaddress.IPv4Network, excepts: Sequence[ipaddress.IPv4Network]) -> bool:
    address = ipaddress.IPv4Address(ip)
    return address in cidr and not any(address in e for e in excepts)


def _ports(ports: object, where: str, notes: list[str]) -> _Ports:
    """A rule's `ports` (absent or empty: every port)."""
    if not ports:
        return _Ports([""], {})
    numbers: dict[str, list[str]] = {}
    named: dict[str, set[str]] = {}
    every: set[str] = set()
    for entry in ports if isinstance(ports, list) else []:
        entry = entry if isinstance(entry, Mapping) else {}
        proto = PROTOCOLS.get(str(entry.get("protocol") or "TCP"))
        if proto is None:
            notes.append(f"{where}: protocol {str(entry.get('protocol'))!r:.20} is not TCP, UDP or SCTP; ignored")
            continue
        port, end = entry.get("port"), entry.get("endPort")
        if port is None:
            every.add(proto)
        elif isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536:
            top = end if isinstance(end, int) and not isinstance(end, bool) and port <= end < 65536 else None
            numbers.setdefault(proto, []).append(f"{port}-{top}" if top and top != port else str(port))
        elif isinstance(port, str):
            named.setdefault(proto, set()).add(port)
        else:
            notes.append(f"{where}: port {port!r:.20} is neither 1-65535 nor a name; ignored")
    numeric = [f"meta l4proto {p}" for p in sorted(every)]
    numeric += [
        f"meta l4proto {p} th dport {_set(sorted(set(v), key=_port_key))}"
        for p, v in sorted(numbers.items())
        if p not in every
    ]
    return _Ports(numeric, {p: names for p, names in named.items() if p not in every})


def _port_key(text: str) -> int:
    return int(text.split("-")[0])


def _named(pods: Iterable[Endpoint], names: set[str], proto: str) -> str | None:
    """`ip daddr . th dport` pairs: each pod's container ports of one of `names` on `proto` (None: no pod has one)."""
    pairs = {
        (ipaddress.IPv4Address(p.ip), n.number)
        for p in pods
        for n in p.port_names
        if n.name in names and PROTOCOLS.get(n.protocol) == proto and 0 < n.number < 65536
    }
    return f"ip daddr . th dport {_set(f'{ip} . {port}' for ip, port in sorted(pairs))}" if pairs else None


def compile_policies(
    policies: Iterable[Mapping], pods: Sequence[Endpoint], namespace_labels: Mapping[str, Mapping[str, str]]
) -> Compiled:
    """The nftables ruleset that enforces `policies` (NetworkPolicy objects) among `pods` (their addresses, labels and
    named container ports; host-network pods are the node's, which no policy isolates), `namespace_labels` by
    namespace name."""
    notes: list[str] = []
    rules: dict[str, list[str]] = {"ingress": [], "egress": []}
    isolated: dict[str, set[str]] = {"ingress": set(), "egress": set()}
    everyone = _by_address(p for p in pods if not p.host_network)
    for policy in policies:
        spec = policy.get("spec") if isinstance(policy.get("spec"), Mapping) else {}
        assert isinstance(spec, Mapping)
        namespace = str(_meta(policy).get("namespace") or "default")
        where = _where(policy)
        selected = _selected({"podSelector": spec.get("podSelector") or {}}, namespace, pods, namespace_labels)
        if not selected:
            continue
        own = _addresses(selected)
        for direction, peers_field, own_side, peer_side in DIRECTIONS:
            if direction not in _policy_types(spec):
                continue
            isolated[direction].update(p.ip for p in selected)
            verdict = "accept" if direction == "ingress" else "return"
            for index, rule in enumerate(spec.get(direction) or []):
                rule = rule if isinstance(rule, Mapping) else {}
                rule_where = f"{where} spec.{direction}[{index}]"
                given = rule.get(peers_field)
                found = (
                    [_peer(p, peer_side, namespace, pods, namespace_labels, rule_where, notes) for p in given]
                    if given
                    else [_Peer("", everyone)]
                )
                peers = [p for p in found if p is not None]
                ports = _ports(rule.get("ports"), rule_where, notes)
                for peer in peers:
                    for port in ports.numeric:
                        parts = [f"ip {own_side} {own}", peer.match, port]
                        rules[direction].append(" ".join(p for p in parts if p) + f" {verdict}")
                # a named port is the destination's: on ingress each selected pod's, on egress each peer pod's;
                # every (address, port) pair is one of those pods' own ports of that name and protocol
                destinations = selected if direction == "ingress" else _by_address(q for p in peers for q in p.pods)
                heads = [p.match for p in peers] if direction == "ingress" else [f"ip {own_side} {own}"]
                for proto, names in sorted(ports.named.items()) if peers else ():
                    pairs = _named(destinations, names, proto)
                    if pairs is None:
                        shown = ", ".join(repr(n) for n in sorted(names))
                        notes.append(
                            f"{rule_where}: named port {shown:.60} ({proto.upper()}) names no container port of the "
                            "rule's destination pods: it allows nothing, as on a cluster"
                        )
                    for head in heads if pairs else ():
                        parts = [head, f"meta l4proto {proto}", pairs or ""]
                        rules[direction].append(" ".join(p for p in parts if p) + f" {verdict}")
    return Compiled(
        _ruleset(rules, isolated),
        {d: tuple(sorted(ips, key=ipaddress.IPv4Address)) for d, ips in isolated.items()},
        list(dict.fromkeys(notes)),
        {d: tuple(r) for d, r in rules.items()},
        tuple(sorted({p.ip for p in pods if not p.host_network}, key=ipaddress.IPv4Address)),
    )


def merged(clusters: Sequence[Compiled]) -> str:
    """One table for the policies of several clusters whose pods run side by side in the simulation's namespace (each
    stack is a cluster of its own, compiled over its own pods): their rules and isolated addresses together. Pods'
    addresses never collide across clusters here, so a rule of one selects none of another's pods; and no packet
    passes from one cluster's pods to another's, whatever their policies say: each cluster is a network of its own."""
    rules = {d: [r for c in clusters for r in c.rules.get(d, ())] for d in ("ingress", "egress")}
    isolated = {d: {ip for c in clusters for ip in c.isolated.get(d, ())} for d in ("ingress", "egress")}
    apart = [set(c.pods) for c in clusters if c.pods]
    return _ruleset(rules, isolated, apart if len(apart) > 1 else [])


def _ruleset(rules: Mapping[str, list[str]], isolated: Mapping[str, set[str]], apart: Sequence[set[str]] = ()) -> str:
    """The table, replacing the simulation's previous one in the same transaction (`nft -f` applies a file
    atomically): an egress-isolated pod's packet must pass `egress` (a rule there returns it), an ingress-isolated
    pod's `ingress` (a rule there accepts it); each ends in a drop. Packets leaving the pod CIDR are masqueraded to
    the simulation's own address (the CNI plugins' `ipMasq`, in nftables): the egress tool carries only that.
    `apart`: each cluster's pods, where several clusters' pods run side by side: none reaches another's."""

    def elements(ips: set[str]) -> str:
        return f" elements = {_set(sorted(ips, key=ipaddress.IPv4Address))};" if ips else ""

    lines = [
        f"table inet {TABLE}",
        f"delete table inet {TABLE}",
        f"table inet {TABLE} {{",
        f"  set ingress_isolated {{ type ipv4_addr;{elements(isolated['ingress'])} }}",
        f"  set egress_isolated {{ type ipv4_addr;{elements(isolated['egress'])} }}",
        *(f"  set cluster{i} {{ type ipv4_addr;{elements(ips)} }}" for i, ips in enumerate(apart)),
        "  chain forward {",
        "    type filter hook forward priority filter; policy accept;",
        "    ct state established,related accept",
        *(f"    ip saddr @cluster{i} ip daddr {POD_CIDR} ip daddr != @cluster{i} drop" for i in range(len(apart))),
        "    ip saddr @egress_isolated jump egress",
        "    ip daddr @ingress_isolated jump ingress",
        "  }",
        "  chain egress {",
        *(f"    {r}" for r in rules["egress"]),
        "    drop",
        "  }",
        "  chain ingress {",
        *(f"    {r}" for r in rules["ingress"]),
        "    drop",
        "  }",
        "  chain postrouting {",
        "    type nat hook postrouting priority srcnat; policy accept;",
        f"    ip saddr {POD_CIDR} ip daddr != {POD_CIDR} masquerade",
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def of_manifests(manifests: Sequence[Mapping], pods: Sequence[Endpoint]) -> Compiled:
    """`compile_policies` over the NetworkPolicy objects among `manifests`, the namespaces' labels theirs (with the
    `kubernetes.io/metadata.name` label the API server gives every namespace)."""
    from jaxinfra.admission.store import Store

    store = Store(m for m in manifests if isinstance(m, Mapping))
    labels = {ns: store.namespace_labels(ns) for ns in sorted({p.namespace for p in pods})}
    policies = [m for m in manifests if isinstance(m, Mapping) and m.get("kind") == "NetworkPolicy"]
    return compile_policies(policies, pods, labels)
