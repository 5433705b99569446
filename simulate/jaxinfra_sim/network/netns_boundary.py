"""The pods' network's holder, its boundary: no packet of the simulation reaches an address of the machine.

The egress tool (`netns_egress`) makes every connection a pod opens beyond the simulation from the machine itself:
slirp4netns's `--disable-host-loopback` refuses only its own alias of the machine's loopback (10.0.2.2), so a pod
could otherwise reach any service of the machine on its other addresses, the networks only the machine reaches (a
Docker bridge, a VPN), and the link-local range where clouds serve instance metadata and credentials
(169.254.169.254; AWS's fd00:ec2::254 over IPv6). A GKE pod reaches the internet and its VPC; its node's services are
the node's business, and here the node is the simulation's namespace, never the machine.

So the holder reads, while still in the machine's namespaces, what the machine's routing tables hold
(`ip -json route show table all`, iproute2 as for the rest of the holder): every local, broadcast and anycast address
(all of the machine's own), and every network the machine routes through an interface that carries none of its
default routes (what only the machine reaches). With loopback, link-local, "this network", the limited broadcast,
the metadata endpoints and slirp4netns's own network (10.0.2.0/24: its aliases of the machine and of its resolver),
less the pod CIDR (never routed to the egress tool: `netns_setup._node_link_up`), those are the *machine's
addresses* (`machine_addresses`). Once the simulation's namespace is made, and before the egress tool may start, one
nftables table there (`ruleset`, loaded with `nft`, the part NetworkPolicy's rules use) rejects every packet to them:
- `forward`: a pod's packets, whatever NetworkPolicy allows (its table is another; a reject in any base chain is
  final);
- `output`: the namespace's own, i.e. host-network pods, the kubelet's probes and the simulator's own connections
  made for pods, which all run there; a packet the namespace delivers to itself (`lo`: its loopback, the gateway,
  an address pasta copied from the machine) stays inside and passes, and so does IPv6 neighbour discovery.
A rejected connection fails at once (`icmpx admin-prohibited`: "no route to host"), as an address a network plugin
does not route does. Where the table cannot be loaded the holder starts no egress tool: the simulation runs without
egress, and its note says why. The snapshot is the machine's at the simulation's start: an address it gains later
(a new Docker network) is not in it.

The standard library only, as the holder (whose program imports it; see `netns_holder`).
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence

from jaxinfra_sim.network.netns_setup import POD_CIDR

TABLE = "jaxinfra-boundary"
Net = ipaddress.IPv4Network | ipaddress.IPv6Network

ALWAYS = (
    "0.0.0.0/8",  # "this network" (RFC 791): Linux delivers 0.0.0.0 to the machine itself
    "127.0.0.0/8",  # loopback
    "169.254.0.0/16",  # link-local: the metadata servers of GCP, AWS, Azure (169.254.169.254)
    "255.255.255.255/32",  # the limited broadcast
    "10.0.2.0/24",  # slirp4netns's network: 10.0.2.2 is the machine, 10.0.2.3 its resolver (slirp4netns(1))
    "::/128",
    "::1/128",
    "::ffff:0:0/96",  # IPv4-mapped: the IPv4 rules' addresses again
    "fe80::/10",  # link-local
    "fd00:ec2::254/128",  # AWS's instance metadata service over IPv6
)
"""What is the machine's whatever its tables say (RFC 6890's special-purpose ranges that lead to it, the metadata
endpoints, the egress tools' aliases)."""
ROUTED_TYPES = ("unicast",)
OWN_TYPES = ("local", "broadcast", "anycast")


def machine_addresses(routes: Sequence[Mapping[str, object]]) -> tuple[list[Net], list[Net]]:
    """(IPv4, IPv6) networks of the machine (the module's docstring), merged, from `ip -json route show table all`'s
    entries: its own addresses (local, broadcast, anycast routes), the networks it routes through an interface none of
    its default routes use, and `ALWAYS`; less the pod CIDR."""
    default_devices = {r.get("dev") for r in routes if r.get("dst") == "default"}
    found: list[Net] = [ipaddress.ip_network(n) for n in ALWAYS]
    for r in routes:
        dst, kind = r.get("dst"), r.get("type", "unicast")
        if not isinstance(dst, str) or dst == "default":
            continue
        if kind in OWN_TYPES or kind in ROUTED_TYPES and r.get("dev") not in default_devices and r.get("dev") != "lo":
            try:
                found.append(ipaddress.ip_network(dst, strict=False))
            except ValueError:
                continue
    pods = ipaddress.IPv4Network(POD_CIDR)
    v4: list[ipaddress.IPv4Network] = []
    for net in (n for n in found if isinstance(n, ipaddress.IPv4Network)):
        if not net.overlaps(pods):
            v4.append(net)
        elif pods.subnet_of(net):  # (a network within the pods' is never the machine's here)
            v4 += net.address_exclude(pods)
    v6 = [n for n in found if isinstance(n, ipaddress.IPv6Network)]
    return list(ipaddress.collapse_addresses(v4)), list(ipaddress.collapse_addresses(v6))


def read_routes() -> list[Mapping[str, object]]:
    """This namespace's routes, every table (`ip -json route show table all`); raises OSError with ip's message."""
    done = subprocess.run(
        [shutil.which("ip") or "/usr/sbin/ip", "-json", "route", "show", "table", "all"],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise OSError(done.stderr.decode(errors="replace").strip() or "ip -json route failed")
    entries = json.loads(done.stdout or b"[]")
    return [e for e in entries if isinstance(e, dict)]


def _elements(nets: Iterable[Net]) -> str:
    listed = ", ".join(str(n) for n in nets)
    return f" elements = {{ {listed} }};" if listed else ""


def ruleset(v4: Sequence[Net], v6: Sequence[Net]) -> str:
    """The table (`nft -f` input), replacing a previous one in the same transaction."""
    lines = [
        f"table inet {TABLE}",
        f"delete table inet {TABLE}",
        f"table inet {TABLE} {{",
        f"  set machine4 {{ type ipv4_addr; flags interval;{_elements(v4)} }}",
        f"  set machine6 {{ type ipv6_addr; flags interval;{_elements(v6)} }}",
        "  chain forward {",
        "    type filter hook forward priority filter - 10; policy accept;",
        "    ip daddr @machine4 reject with icmpx admin-prohibited",
        "    ip6 daddr @machine6 reject with icmpx admin-prohibited",
        "  }",
        "  chain output {",
        "    type filter hook output priority filter - 10; policy accept;",
        '    oifname "lo" accept',
        "    icmpv6 type { nd-router-solicit, nd-neighbor-solicit, nd-neighbor-advert } accept",
        "    ip daddr @machine4 reject with icmpx admin-prohibited",
        "    ip6 daddr @machine6 reject with icmpx admin-prohibited",
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"
