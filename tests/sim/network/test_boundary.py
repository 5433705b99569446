"""The boundary at the network (simulate/jaxinfra_sim/network/netns_boundary.py): no pod, host-network pod or probe of
the kubelet's reaches an address of the machine through the egress tool, while the internet stays reachable.

Canary listeners (TCP and UDP) wait on every address of the machine, on its loopback and, as root, on the metadata
servers' link-local address (added to the machine's `lo` for the test); the pods try each. On a GKE cluster a pod
reaches the internet (egress is allowed by default) and its node is the node's business: here the simulated node is
the simulation's namespace, never this machine. The manifests are Indexed Jobs in the style of the Kubernetes docs'
examples; an httpGet readiness probe with `host:` in the style of the docs' "Configure Liveness, Readiness and
Startup Probes" page.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jaxinfra_sim.network import netns_boundary
from tests.sim.runtime.test_sandbox import MODES, job, pods, seen, simulate

pytestmark = pytest.mark.simulator

METADATA = "169.254.169.254"


# --- which addresses are the machine's ----------------------------------------------------------------------------


ROUTES: list[dict[str, Any]] = [
    {"dst": "default", "gateway": "192.0.2.1", "dev": "eth0"},
    {"dst": "192.0.2.0/24", "dev": "eth0", "scope": "link"},  # the LAN of the default route: a VPC on a cloud
    {"dst": "172.17.0.0/16", "dev": "docker0", "scope": "link"},  # Docker's bridge: only the machine reaches it
    {"dst": "10.8.0.0/16", "gateway": "10.9.0.1", "dev": "tun0"},  # a VPN's network
    {"type": "local", "dst": "192.0.2.2", "dev": "eth0", "table": "local"},
    {"type": "local", "dst": "172.17.0.1", "dev": "docker0", "table": "local"},
    {"type": "broadcast", "dst": "192.0.2.255", "dev": "eth0", "table": "local"},
    {"type": "local", "dst": "10.244.3.1", "dev": "cni0", "table": "local"},  # inside the pods' own CIDR
    {"dst": "10.0.0.0/8", "dev": "wg0"},  # wider than the pods' CIDR
    {"type": "unreachable", "dst": "198.51.100.0/24"},
    {"dst": "fd00::/64", "dev": "eth0"},
    {"type": "local", "dst": "fd00::2", "dev": "eth0", "table": "local"},
    {"dst": "default", "gateway": "fd00::1", "dev": "eth0"},
    {"type": "multicast", "dst": "ff00::/8", "dev": "eth0", "table": "local"},
]


@pytest.mark.unit
def test_the_machines_addresses_are_its_own_its_private_networks_and_the_special_ranges() -> None:
    v4, v6 = netns_boundary.machine_addresses(ROUTES)

    def held(addr: str) -> bool:
        ip = ipaddress.ip_address(addr)
        return any(ip in net for net in (v4 if ip.version == 4 else v6))

    for own in ("192.0.2.2", "192.0.2.255", "172.17.0.1", "172.17.5.9", "10.8.1.1", "10.1.2.3", "fd00::2"):
        assert held(own), own
    for special in ("127.0.0.53", METADATA, "0.0.0.0", "10.0.2.2", "10.0.2.3", "::1", "fe80::1", "fd00:ec2::254"):
        assert held(special), special
    # the default route's LAN and the internet stay reachable, as a GKE pod reaches its VPC; the pods' own CIDR is
    # the simulation's (a pod's address, the gateway), whatever the machine routes through its own interfaces
    for open_ in ("192.0.2.1", "192.0.2.77", "8.8.8.8", "198.51.100.1", "10.244.0.1", "10.244.3.1", "fd00::1"):
        assert not held(open_), open_
    assert netns_boundary.machine_addresses(ROUTES) == (v4, v6)  # deterministic, merged
    assert all(a.network_address < b.network_address for a, b in zip(v4, v4[1:]))  # type: ignore[operator]


@pytest.mark.unit
def test_the_rules_reject_both_ways_out_and_let_the_namespace_reach_itself() -> None:
    text = netns_boundary.ruleset(*netns_boundary.machine_addresses(ROUTES))
    assert text.startswith(f"table inet {netns_boundary.TABLE}\ndelete table inet {netns_boundary.TABLE}\n")
    forward = text[text.index("chain forward") : text.index("chain output")]
    output = text[text.index("chain output") :]
    for chain in (forward, output):
        assert "ip daddr @machine4 reject with icmpx admin-prohibited" in chain
        assert "ip6 daddr @machine6 reject with icmpx admin-prohibited" in chain
    assert 'oifname "lo" accept' in output and "lo" not in forward
    assert "172.17.0.0/16" in text and "10.244.0.0/16" not in text


# --- what pods reach ------------------------------------------------------------------------------------------------


@dataclass
class Canaries:
    """TCP and UDP listeners on addresses of the machine; what reached them."""

    targets: list[tuple[str, int]] = field(default_factory=list)  # (address, port): TCP and UDP on the same port
    reached: list[str] = field(default_factory=list)
    sockets: list[socket.socket] = field(default_factory=list)

    def listen(self, address: str, scope: int = 0) -> None:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        where: tuple[Any, ...] = (address, 0, 0, scope) if family == socket.AF_INET6 else (address, 0)
        tcp = socket.socket(family, socket.SOCK_STREAM)
        tcp.bind(where)
        port = tcp.getsockname()[1]
        tcp.listen(16)
        udp = socket.socket(family, socket.SOCK_DGRAM)
        udp.bind((address, port, 0, scope) if family == socket.AF_INET6 else (address, port))
        self.sockets += [tcp, udp]
        self.targets.append((address, port))
        threading.Thread(target=self._watch, args=(tcp, udp, f"{address} port {port}"), daemon=True).start()

    def _watch(self, tcp: socket.socket, udp: socket.socket, name: str) -> None:
        import select

        while True:
            try:
                ready, _, _ = select.select([tcp, udp], [], [])
                if tcp in ready:
                    tcp.accept()[0].close()
                    self.reached.append(f"TCP {name}")
                if udp in ready:
                    udp.recv(64)
                    self.reached.append(f"UDP {name}")
            except (OSError, ValueError):
                return

    def close(self) -> None:
        for s in self.sockets:
            s.close()


def _machine_addresses() -> list[tuple[str, int]]:
    """(address, interface index) of every address on the machine's interfaces (`ip -json addr`)."""
    links = json.loads(subprocess.run(["ip", "-json", "addr"], capture_output=True, check=True).stdout)
    return [
        (a["local"], link["ifindex"] if a["local"].startswith("fe80:") else 0)
        for link in links
        for a in link.get("addr_info", [])
        if a.get("family") in ("inet", "inet6")
    ]


@pytest.fixture
def canaries() -> Iterator[Canaries]:
    """Listeners on every address of the machine and, as root, on the metadata address added to its `lo`."""
    added = False
    if os.getuid() == 0:
        added = subprocess.run(["ip", "addr", "add", f"{METADATA}/32", "dev", "lo"], check=False).returncode == 0
    found = Canaries()
    try:
        for address, scope in [*_machine_addresses(), *([(METADATA, 0)] if added else [])]:
            found.listen(address, scope)
        yield found
    finally:
        found.close()
        if added:
            subprocess.run(["ip", "addr", "del", f"{METADATA}/32", "dev", "lo"], check=False)


#: Tries each of TARGETS ("address port" pairs, comma-separated): a TCP connection and a UDP datagram; prints
#: TCP_<n>=<errno or ok> on stderr. (No `$`: Kubernetes expands `$(VAR)` in a command.)
TRY = """python3 -c '
import os, socket, sys
for n, t in enumerate(os.environ["TARGETS"].split(",")):
    host, port = t.split()
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    where = (host, int(port), 0, 2) if host.startswith("fe80:") else (host, int(port))
    s = socket.socket(fam); s.settimeout(3)
    print("TCP_%d=%s" % (n, s.connect_ex(where) or "ok"), file=sys.stderr)
    u = socket.socket(fam, socket.SOCK_DGRAM)
    try: u.sendto(b"canary", where)
    except OSError: pass
'"""


def _internet() -> tuple[str, int] | None:
    """An address of the internet this machine reaches (PyPI's, over HTTPS), or None: the pass case needs one."""
    try:
        with socket.create_connection(("pypi.org", 443), timeout=3) as s:
            return s.getpeername()[:2]
    except OSError:
        return None


@MODES
def test_no_pod_host_network_pod_or_probe_reaches_the_machine(home: Path, canaries: Canaries, as_root: bool) -> None:
    """A pod and a host-network pod try every canary (TCP and UDP); a readiness probe with `host:` asks one: none
    reaches it, each connection fails at once ("no route to host"), the probe fails and its pod is never Ready. The
    internet is reached from the same pod (the verdict of a GKE cluster, whose pods have egress)."""
    internet = _internet()
    targets = [*canaries.targets, *([internet] if internet else [])]
    env = {"TARGETS": ",".join(f"{a} {p}" for a, p in targets)}
    pod = job("pod", TRY, env=env)
    host = job("host", TRY, env=env)
    host["spec"]["template"]["spec"]["hostNetwork"] = True
    address, port = next(t for t in canaries.targets if t[0] != "127.0.0.1" and ":" not in t[0])
    probed = job(
        "probed",
        "sleep 4",
        readinessProbe={"httpGet": {"host": address, "port": port, "path": "/"}, "periodSeconds": 1},
    )
    rc, report, out = simulate(home, [pod, host, probed], as_root=as_root)
    assert rc == 0, out
    got = pods(report)
    for name in ("pod-0", "host-0"):
        said = seen(got[name])
        for n, (a, p) in enumerate(canaries.targets):
            assert said[f"TCP_{n}"] != "ok", (name, a, p, said)
        if internet:
            assert said[f"TCP_{len(canaries.targets)}"] == "ok", (name, internet, said)
    readiness = got["probed-0"]["probes"]["readiness"]
    assert readiness["result"] == "failure" and got["probed-0"]["ready"] is None, readiness
    assert "no route to host" in readiness["last_failure"], readiness
    assert canaries.reached == [], canaries.reached


#: Answers every GET with a 500 whose body carries a marker and an escape sequence (the pod's own server).
SERVE_500 = """python3 -c '
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"MARKER-of-the-body \\x1b]52;c;cGF5bG9hZA==\\x07" * 1000
        self.send_response(500); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("", 8080), H).serve_forever()
' & sleep 5"""


#: Prints a green "passed" in escape sequences, then 20,000 bytes, and fails.
LOUD = "printf '\\033[32mpassed\\033[0m'; head -c 20000 /dev/zero | tr '\\0' x; false"


def test_a_probes_answer_is_recorded_as_the_kubelet_records_it(home: Path) -> None:
    """An httpGet probe's failure is its status alone (the kubelet keeps no body), and an exec probe's output is kept
    up to the kubelet's 10 KiB with its control characters escaped: what a pod answers cannot steer the report."""
    served = job("served", SERVE_500, readinessProbe={"httpGet": {"port": 8080, "path": "/"}, "periodSeconds": 1})
    loud = job(
        "loud",
        "sleep 4",
        readinessProbe={
            "exec": {"command": ["sh", "-c", LOUD]},
            "periodSeconds": 1,
        },
    )
    rc, report, out = simulate(home, [served, loud])
    got = pods(report)
    assert rc == 0, out
    assert got["served-0"]["probes"]["readiness"]["last_failure"] == "HTTP probe failed with statuscode: 500"
    said = got["loud-0"]["probes"]["readiness"]["last_failure"]
    assert said.startswith("\\x1b[32mpassed\\x1b[0mxxx") and "\x1b" not in said, said[:80]
    assert len(said) <= 10 * 1024 + 3 * 2, len(said)  # two escaped ESC bytes of four characters each
