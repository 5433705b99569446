"""kube-proxy in nftables mode: each Service's cluster IP answered in the simulation's network namespace (the node's,
never this machine's), by one nftables table the simulator reloads whenever a Service's endpoints change.

Emulated from kubernetes/kubernetes @b0f823e6 pkg/proxy/nftables/proxier.go (and its README.md, which says which hook
does what):
- `table ip kube-proxy`; base chains `nat-prerouting` and `nat-output` (type nat, priority dstnat) jump to `services`,
  whose verdict map `service-ips` sends `<cluster IP> . <protocol> . <port>` to the Service port's chain;
- a Service port's chain picks one endpoint per new connection at random, `numgen random mod N vmap { 0 : goto
  endpoint-..., ... }`, and each endpoint's chain DNATs to the endpoint's address and target port, after marking for
  masquerade a packet that comes from that endpoint itself (hairpin: a pod reaching itself through its Service, whose
  reply must come back through the node to be un-DNATed); `nat-postrouting` (priority srcnat) masquerades what is
  marked (`masquerading`, mark 0x4000, kube-proxy's default --masquerade-bit 14), as is what comes from outside the
  pod CIDR (its local-traffic detector by cluster CIDR);
- a Service port without endpoints is in `no-endpoint-services`, checked from `filter-input`, `filter-forward` and
  `filter-output` (type filter, priority dstnat - 10) for new connections, whose verdict is `goto reject-chain`:
  a plain `reject`, ICMP port unreachable, which a TCP client reads as "connection refused" at once;
- `cluster-ips-check` (from `filter-forward` and `filter-output-post-dnat`, after DNAT): a cluster IP on a port no
  Service port has is rejected, an unallocated address of the service CIDR dropped.
A port's target is its `targetPort` by number, or by name the endpoint's container port of that name (the
EndpointSlice controller's pkg/api/v1/pod/util.go FindPort: an endpoint whose pod has no such port serves none).
Endpoints are the Service's selected pods that are not terminal, Ready and not terminating; with
`publishNotReadyAddresses` the not-ready ones too; where none is, the Ready ones that are terminating (`backends`).

The simulation's namespace has no default route unless an egress tool gives it one (a node always has one), so the
holder routes the service CIDR to its node link (`Network.route_services`): a packet for a cluster IP that is not
DNATed is forwarded there, through `filter-forward`, as a node forwards it to its default gateway.

kube-proxy syncs whenever a Service or EndpointSlice changes, at most `BURST` times at once and then once per
`MIN_SYNC_S` (its BoundedFrequencyRunner with minSyncPeriod 1 s, burstSyncs 2): `Proxy.sync` does the same. Nothing of
a manifest reaches the ruleset but addresses, port numbers and protocols, each parsed; chains are named by number.
Not emulated: sessionAffinity, NodePort, LoadBalancer and externalIPs, traffic policies (one node), IPv6.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from jaxinfra.admission.clusterip import SERVICE_CIDR, is_ipv4
from jaxinfra_sim.core import model
from jaxinfra_sim.core.inputs import Service, ServicePort, service_of
from jaxinfra_sim.network.netns import Network
from jaxinfra_sim.network.netns_setup import POD_CIDR
from jaxinfra_sim.network.netpol import PROTOCOLS

TABLE = "kube-proxy"
MASQUERADE_MARK = "0x00004000"
"""kube-proxy's --masquerade-bit 14 as its mark (fmt %#08x of 1 << 14)."""
MIN_SYNC_S = 1.0
"""kube-proxy's minSyncPeriod in nftables mode (pkg/proxy/apis/config defaults: 1 s)."""
BURST = 2
"""Syncs allowed at once before minSyncPeriod applies (proxier.go: burstSyncs)."""
DSTNAT, SRCNAT = "-100", "100"
"""nftables' dstnat and srcnat priorities as numbers: nft accepts their names only in some hooks (knftables'
DNATPriority and SNATPriority)."""
PRE_DNAT, POST_DNAT = "-110", "-90"
"""kube-proxy's filter chains: DNATPriority - 10 (before DNAT), and + 10 (`filter-output-post-dnat`)."""


@dataclass(frozen=True)
class Endpoint:
    """A pod as the EndpointSlice controller sees it: whether it is Ready (its `serving` condition) and whether it is
    being stopped (`terminating`: deleted, its containers signalled)."""

    pod: model.Pod
    ready: bool
    terminating: bool = False


def services(manifests: Iterable[Mapping]) -> tuple[Service, ...]:
    """The Services with a cluster IP among the stored objects (the API server's allocation, `clusterip`)."""
    found = (service_of(m) for m in manifests if isinstance(m, Mapping) and m.get("kind") == "Service")
    return tuple(s for s in found if s.cluster_ip is not None and is_ipv4(s.cluster_ip))


def target(port: ServicePort, pod: model.Pod) -> int | None:
    """The port `port` reaches on `pod`: its number, or the pod's container port of that name (None: it has none)."""
    if isinstance(port.target, int) and not isinstance(port.target, bool):
        return port.target if 0 < port.target < 65536 else None
    name = str(port.target)
    if name.isdigit():  # an IntOrString given as a string of digits is a name to the API; never a valid one
        return None
    for ports in (pod.named_ports, *(c.ports for c in pod.others if c.role != "init")):
        if name in ports:
            return ports[name]
    return None


def backends(svc: Service, port: ServicePort, endpoints: Sequence[Endpoint]) -> list[tuple[str, int]]:
    """(address, port) of each endpoint that serves `svc`'s `port`, in address order: those whose EndpointSlice
    condition is `ready` (Ready and not terminating, or any with publishNotReadyAddresses: kubernetes
    staging/src/k8s.io/endpointslice/utils.go podToEndpoint), else, where there is none, those `serving` and
    `terminating` (kube-proxy's fallback, pkg/proxy/topology.go CategorizeEndpoints)."""
    selected = [e for e in endpoints if is_ipv4(e.pod.ip) and svc.selects(e.pod)]
    usable = [e for e in selected if svc.publish_not_ready or (e.ready and not e.terminating)]
    out = set()
    for e in usable or [e for e in selected if e.ready and e.terminating]:
        number = target(port, e.pod)
        if number is not None:
            out.add((e.pod.ip, number))
    return sorted(out, key=lambda b: (ipaddress.IPv4Address(b[0]), b[1]))


def ruleset(svcs: Sequence[Service], endpoints: Sequence[Endpoint]) -> str:
    """The table (`nft -f` input, deterministic), replacing the previous one in the same transaction."""
    chains: list[str] = []
    service_ips: list[str] = []
    no_endpoints: list[str] = []
    cluster_ips: set[str] = set()
    for i, svc in enumerate(sorted(svcs, key=lambda s: (s.namespace, s.name))):
        assert svc.cluster_ip is not None
        vip = str(ipaddress.IPv4Address(svc.cluster_ip))
        cluster_ips.add(vip)
        for j, port in enumerate(svc.port_specs):
            proto = PROTOCOLS.get(port.protocol)
            if proto is None or not 0 < port.port < 65536:
                continue
            key = f"{vip} . {proto} . {port.port}"
            found = backends(svc, port, endpoints)
            if not found:
                no_endpoints.append(f"{key} : goto reject-chain")
                continue
            name = f"service-{i}-{j}"
            for k, (ip, number) in enumerate(found):
                chains += [
                    f"  chain endpoint-{i}-{j}-{k} {{",
                    f"    ip saddr {ip} jump mark-for-masquerade",
                    f"    meta l4proto {proto} dnat to {ip}:{number}",
                    "  }",
                ]
            picks = ", ".join(f"{k} : goto endpoint-{i}-{j}-{k}" for k in range(len(found)))
            chains += [
                f"  chain {name} {{",
                f"    ip daddr {vip} {proto} dport {port.port} ip saddr != {POD_CIDR} jump mark-for-masquerade",
                f"    numgen random mod {len(found)} vmap {{ {picks} }}",
                "  }",
            ]
            service_ips.append(f"{key} : goto {name}")
    verdicts = "type ipv4_addr . inet_proto . inet_service : verdict;"
    lines = [
        f"table ip {TABLE}",
        f"delete table ip {TABLE}",
        f"table ip {TABLE} {{",
        "  chain mark-for-masquerade {",
        f"    meta mark set meta mark | {MASQUERADE_MARK}",
        "  }",
        "  chain masquerading {",
        f"    meta mark & {MASQUERADE_MARK} == 0 return",
        f"    meta mark set meta mark ^ {MASQUERADE_MARK}",
        "    masquerade fully-random",
        "  }",
        "  chain reject-chain {",
        "    reject",
        "  }",
        *chains,
        f"  set cluster-ips {{ type ipv4_addr;{_elements(sorted(cluster_ips, key=ipaddress.IPv4Address))} }}",
        f"  map service-ips {{ {verdicts}{_elements(service_ips)} }}",
        f"  map no-endpoint-services {{ {verdicts}{_elements(no_endpoints)} }}",
        "  chain services {",
        "    ip daddr . meta l4proto . th dport vmap @service-ips",
        "  }",
        "  chain service-endpoints-check {",
        "    ip daddr . meta l4proto . th dport vmap @no-endpoint-services",
        "  }",
        "  chain cluster-ips-check {",
        "    ip daddr @cluster-ips reject",
        f"    ip daddr {SERVICE_CIDR} drop",
        "  }",
        *_base("filter-input", "filter", "input", PRE_DNAT, "ct state new jump service-endpoints-check"),
        *_base(
            "filter-forward",
            "filter",
            "forward",
            PRE_DNAT,
            "ct state new jump service-endpoints-check",
            "ct state new jump cluster-ips-check",
        ),
        *_base("filter-output", "filter", "output", PRE_DNAT, "ct state new jump service-endpoints-check"),
        *_base("filter-output-post-dnat", "filter", "output", POST_DNAT, "ct state new jump cluster-ips-check"),
        *_base("nat-prerouting", "nat", "prerouting", DSTNAT, "jump services"),
        *_base("nat-output", "nat", "output", DSTNAT, "jump services"),
        *_base("nat-postrouting", "nat", "postrouting", SRCNAT, "jump masquerading"),
        "}",
    ]
    return "\n".join(lines) + "\n"


def _base(name: str, kind: str, hook: str, priority: str, *rules: str) -> list[str]:
    return [
        f"  chain {name} {{",
        f"    type {kind} hook {hook} priority {priority}; policy accept;",
        *(f"    {r}" for r in rules),
        "  }",
    ]


def _elements(items: Sequence[str]) -> str:
    return f" elements = {{ {', '.join(items)} }};" if items else ""


class Proxy:
    """kube-proxy's sync loop for one simulation, whose workloads run side by side: `sync` loads the ruleset for the
    endpoints of every running workload, when they changed, within kube-proxy's rate (`BURST` at once, then one per
    `MIN_SYNC_S`); `load` is the network's loader."""

    def __init__(self, svcs: Sequence[Service], load: Callable[[str], None]) -> None:
        self.services = tuple(svcs)
        self._load = load
        self.loaded: str | None = None
        self.syncs = 0
        self._seen: tuple[tuple[str, str, str, bool, bool], ...] | None = None  # the endpoints the rules are for
        self._tokens = float(BURST)
        self._at: float | None = None
        self._by_workload: dict[str, tuple[Endpoint, ...]] = {}  # each running attempt's endpoints

    @classmethod
    def start(cls, network: Network | None, svcs: Sequence[Service], now: float) -> Proxy | None:
        """kube-proxy for the simulation's `network` (None: none, or no Service has a cluster IP): the service CIDR
        routed, and every cluster IP refused until its endpoints are handed to `sync`. Raises NetworkError."""
        if network is None or not svcs:
            return None
        network.route_services(str(SERVICE_CIDR))
        proxy = cls(svcs, network.load_rules)
        proxy.sync(now, ())
        return proxy

    def sync(self, now: float, endpoints: Sequence[Endpoint], workload: str = "") -> float | None:
        """`workload`'s pods as endpoints now (its attempt's; none once it ended), beside those of the workloads
        running with it: load the rules for them all if they changed and the rate allows; else when to try again
        (None: nothing waits). Raises NetworkError with nft's message."""
        self._by_workload[workload] = tuple(endpoints)
        endpoints = [e for w in sorted(self._by_workload) for e in self._by_workload[w]]
        seen = tuple((e.pod.namespace, e.pod.name, e.pod.ip, e.ready, e.terminating) for e in endpoints)
        if seen == self._seen:  # the runner asks every turn of its loop: most turns nothing changed
            return None
        text = ruleset(self.services, endpoints)
        if text == self.loaded:  # a change no Service selects
            self._seen = seen
            return None
        if self._at is not None:
            self._tokens = min(float(BURST), self._tokens + (now - self._at) / MIN_SYNC_S)
        self._at = now
        if self._tokens < 1.0:
            return now + (1.0 - self._tokens) * MIN_SYNC_S
        self._tokens -= 1.0
        self._load(text)
        self.loaded, self._seen = text, seen
        self.syncs += 1
        return None
