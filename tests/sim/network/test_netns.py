"""The pods' network namespace (simulate/netns.py): private ports, the simulator's ways in, egress, and
nothing left behind. Run as root, the key tests run again as an unprivileged user (uid 65534, through
tests/support/unprivileged.py), where only user namespaces are available. Only loopback addresses are used;
no test sends anything off this machine."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jaxinfra_sim.core.errors import InvalidArgument
from jaxinfra_sim.network import netns, netns_setup, netns_workers, netpol
from jaxinfra_sim.network.netns import Network, NetworkError, PodNetwork
from jaxinfra_sim.runtime import sandbox
from tests.support import unprivileged
from tests.support.paths import ROOT

pytestmark = pytest.mark.simulator

RERUN = "JAXINFRA_NETNS_UNPRIVILEGED_RERUN"
ROOT_USER = os.geteuid() == 0
STRATEGIES = ["privileged", "user"] if ROOT_USER else ["user"]
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWPID = 0x10000000, 0x00020000, 0x04000000, 0x20000000


@pytest.fixture(params=STRATEGIES)
def network(request: pytest.FixtureRequest) -> Iterator[Network]:
    with Network.create(request.param) as net:
        assert net.strategy == request.param
        yield net


# --- helpers: forked children that join ----------------------------------------------------------


def _read_all(fd: int, timeout: float) -> bytes:
    deadline, data = time.monotonic() + timeout, b""
    while (left := deadline - time.monotonic()) > 0 and select.select([fd], [], [], left)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            return data
        data += chunk
    raise TimeoutError(f"no answer from the child within {timeout} s (got {data!r})")


def in_joined_child(net: Network, body: Callable[[], Any], timeout: float = 10.0, pod: PodNetwork | None = None) -> Any:
    """body()'s (JSON) result, run in a forked child that joined the pods' network (`pod`'s own namespace where
    given); its error re-raised here."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        out: dict[str, Any]
        try:
            os.close(r)
            net.join(pod)
            out = {"ok": body()}
        except BaseException as e:  # noqa: BLE001
            out = {"error": f"{type(e).__name__}: {e}"}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    try:
        data = _read_all(r, timeout)
    finally:
        os.close(r)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    out = json.loads(data)
    assert "error" not in out, out["error"]
    return out["ok"]


@contextlib.contextmanager
def pod_listener(net: Network, port: int, host: str = "0.0.0.0", pod: PodNetwork | None = None) -> Iterator[int]:
    """A joined child (in `pod`'s own namespace where given) listening on host:port that greets every connection with
    b"pod"; its pid."""
    ready_r, ready_w = os.pipe()
    stop_r, stop_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(ready_r)
            os.close(stop_w)
            net.join(pod)
            listener = socket.create_server((host, port))
            os.write(ready_w, b"ok")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                ready = select.select([listener, stop_r], [], [], 1.0)[0]
                if stop_r in ready:
                    break
                if listener in ready:
                    conn, _ = listener.accept()
                    with conn:
                        conn.sendall(b"pod")
        except BaseException as e:  # noqa: BLE001
            os.write(ready_w, f"{type(e).__name__}: {e}".encode())
        os._exit(0)
    os.close(ready_w)
    os.close(stop_r)
    try:
        said = os.read(ready_r, 4096) if select.select([ready_r], [], [], 10)[0] else b"(no answer)"
        assert said == b"ok", said.decode()
        yield pid
    finally:
        os.close(stop_w)
        os.close(ready_r)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def held_port() -> socket.socket:
    """A socket of the machine's bound to 0.0.0.0:<free port> but not listening: nobody else on the machine can
    listen there while it is open, so a connection to that port on the machine must be refused."""
    s = socket.socket()
    s.bind(("0.0.0.0", 0))
    return s


def machine_listens(port: int) -> bool:
    """Whether any socket of the machine's network namespace listens on TCP `port` (/proc/net/tcp, tcp6)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def machine_holds(sock: socket.socket) -> bool:
    """Whether `sock` is one of the machine's network namespace's sockets (its inode in /proc/net/*)."""
    inode = str(os.fstat(sock.fileno()).st_ino)
    tables = ("tcp", "tcp6", "udp", "udp6")
    return any(line.split()[9] == inode for t in tables for line in Path(f"/proc/net/{t}").read_text().splitlines()[1:])


def gone(pid: int) -> bool:
    """No such process, or only its zombie (reaped by whoever inherited it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def wait_gone(pid: int, within: float = 2.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.02)
    return gone(pid)


def greeting(s: socket.socket) -> bytes:
    with s:
        s.settimeout(5)
        return s.recv(16)


# --- (1) a pod's listener is the pods' only --------------------------------------------------------


def test_a_pods_listener_is_reachable_in_the_pods_network_only(network: Network) -> None:
    with held_port() as held:
        port = held.getsockname()[1]
        with pod_listener(network, port):
            with socket.socket() as probe:  # the machine's namespace: nobody listens on that port
                assert probe.connect_ex(("127.0.0.1", port)) != 0
            assert not machine_listens(port)
            if shutil.which("ss"):
                shown = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, timeout=10)
                assert shown.stdout.strip() == "", shown.stdout
            assert network.connect_check("127.0.0.1", port)
            assert network.connect_check("127.44.0.3", port)  # every 127/8 address is lo's, as a pod's is
            assert greeting(network.connect(("127.0.0.1", port))) == b"pod"
            assert not network.connect_check("127.0.0.1", port + 1 if port < 65535 else port - 1)

            def other_pod() -> str:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    return s.recv(16).decode()

            assert in_joined_child(network, other_pod) == "pod"


def machine_interfaces() -> list[str]:
    return sorted(line.split(":")[0].strip() for line in Path("/proc/net/dev").read_text().splitlines()[2:])


def test_each_pod_has_a_namespace_of_its_own_routed_from_the_simulations(network: Network) -> None:
    """Two pods bind the same port, each on its own address from the pod CIDR, and reach each other through the
    simulation's namespace, which reaches both (as a node reaches its pods) and listens on neither's port itself;
    this machine gains no interface. A pod made again at the same address (a later attempt's, while the kernel may
    still be removing the earlier one's namespace) is wired as well."""
    before = machine_interfaces()
    a, b = network.pod("10.244.0.2", "test-a"), network.pod("10.244.0.3", "test-b")
    try:
        a.fd(), b.fd()
        assert a.result["ips"][0]["address"] == "10.244.0.2/16"
        # each pod's address is routed to its own veth in the simulation's namespace, no other one of the CIDR
        assert in_joined_child(network, lambda: [netns_workers.routed(ip) for ip in ("10.244.0.2", "10.244.0.9")]) == [
            True,
            False,
        ]
        with pod_listener(network, 9000, pod=a), pod_listener(network, 9000, pod=b):
            assert network.connect_check("10.244.0.2", 9000) and network.connect_check("10.244.0.3", 9000)
            assert not network.connect_check("127.0.0.1", 9000)

            def from_b() -> list[str]:
                with socket.create_connection(("10.244.0.2", 9000), timeout=5) as s:
                    greeting, own = s.recv(16).decode(), s.getsockname()[0]
                return [greeting, own, Path("/proc/net/dev").read_text().count(":")]

            assert in_joined_child(network, from_b, pod=b) == ["pod", "10.244.0.3", 2]  # lo and eth0 only
        a.close()
        again = network.pod("10.244.0.2", "test-a-again")
        with pod_listener(network, 9000, pod=again):
            assert network.connect_check("10.244.0.2", 9000)
        again.close()
    finally:
        a.close(), b.close()
    assert machine_interfaces() == before


def _forwarding() -> dict[str, str]:
    """Each link's IPv4 `forwarding` in this process's network namespace (with `all` and `default`)."""
    conf = Path(netns_setup.FORWARDING)
    return {link.name: (link / "forwarding").read_text().strip() for link in conf.iterdir()}


def test_forwarding_is_on_before_any_pod_and_on_each_pods_veth(network: Network) -> None:
    """The holder turns IPv4 forwarding on itself, before any pod (`netns_setup.enable_forwarding`): `all`, `default`
    and each link, so each pod's veth forwards from the start. Left to the `ptp` plugin, two pods' ADDs at once each
    wrote net.ipv4.ip_forward, and the kernel's handler, racy between two writers, could leave `all` at 1 and every
    link at 0 (the plugins then read 1 and wrote nothing more): no packet passed from one pod to another, and a JAX
    group hung to its init timeout, attempt after attempt."""
    before = in_joined_child(network, _forwarding)
    assert {"all", "default", "lo", netns_setup.NODE_LINK} <= set(before) and set(before.values()) == {"1"}, before
    a, b = network.pod("10.244.0.2", "forward-a"), network.pod("10.244.0.3", "forward-b")
    try:
        a.fd(), b.fd()
        after = in_joined_child(network, _forwarding)
    finally:
        a.close()
        b.close()
    assert len([link for link in after if link.startswith("veth")]) == 2 and set(after.values()) == {"1"}, after


def test_a_pods_namespace_is_asked_for_with_an_address_and_a_plain_id(network: Network) -> None:
    with pytest.raises(ValueError):
        network.pod("10.244.0.2 extra", "x")
    with pytest.raises(InvalidArgument, match="letters, digits"):
        network.pod("10.244.0.2", "../x")


def test_policy_rules_load_and_nfts_own_error_is_reported(network: Network) -> None:
    network.load_rules(netpol.compile_policies([], [], {}).ruleset)
    with pytest.raises(NetworkError, match="nft -f"):
        network.load_rules("table inet jaxinfra { chain c { no such statement } }\n")


def test_a_pod_reaches_a_server_listening_before_the_fork(network: Network) -> None:
    """The API server's way: its listener made (in the pods' network) by the simulator, served after the fork."""
    with held_port() as held, network.socket() as listener:
        port = held.getsockname()[1]
        listener.bind(("127.0.0.1", port))
        listener.listen()
        assert not machine_listens(port)

        def client() -> str:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                return s.recv(16).decode()

        result: list[Any] = []
        t = threading.Thread(target=lambda: result.append(in_joined_child(network, client)))
        t.start()
        listener.settimeout(10)
        conn, _ = listener.accept()
        with conn:
            conn.sendall(b"api")
        t.join(15)
        assert result == ["api"]


# --- (2) the machine's ports do not take the pods' -----------------------------------------------


def test_a_machine_process_on_a_port_does_not_stop_a_pod_binding_it(network: Network) -> None:
    with socket.create_server(("0.0.0.0", 0)) as machine:
        port = machine.getsockname()[1]
        with pod_listener(network, port):
            assert greeting(network.connect(("127.0.0.1", port))) == b"pod"  # the pod's, not the machine's
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                machine.settimeout(5)
                machine.accept()[0].close()  # the machine's still its own


# --- (3) a container's root binds low ports ----------------------------------------------------


def _container(uid_inside: int) -> Callable[[], dict[str, Any]]:
    """In a joined child: a nested user namespace (with mount, UTS and PID namespaces, as a pod's sandbox
    makes them) mapping `uid_inside` to this process's uid, then bind port 80 and start PID 1."""

    def body() -> dict[str, Any]:
        libc = ctypes.CDLL(None, use_errno=True)
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWPID) != 0:
            raise OSError(ctypes.get_errno(), "nested unshare")
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid_inside} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{uid_inside} {gid} 1")
        with socket.socket() as s:
            s.bind(("0.0.0.0", 80))
            s.listen()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP) as icmp:
            icmp.settimeout(5)  # an echo request to a peer pod's address, as `ping` sends it without CAP_NET_RAW
            icmp.sendto(b"\x08\x00\x00\x00\x00\x00\x00\x01jaxinfra", ("127.189.0.3", 0))
            echoed = icmp.recv(64)[0] == 0  # type 0: an echo reply
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the container's PID 1
            os._exit(0 if os.getpid() == 1 else 1)
        _, status = os.waitpid(pid, 0)
        low_ports = Path(netns.LOW_PORTS).read_text().strip()
        return {"uid": os.getuid(), "pid1": status == 0, "low_ports": low_ports, "echoed": echoed}

    return body


@pytest.mark.parametrize("uid_inside", [0, 1000])
def test_a_container_user_binds_port_80_and_pings(network: Network, uid_inside: int) -> None:
    assert network.low_ports and network.ping
    container = in_joined_child(network, _container(uid_inside))
    assert container == {"uid": uid_inside, "pid1": True, "low_ports": "0", "echoed": True}


@pytest.mark.skipif(
    not ROOT_USER or Path(netns.LOW_PORTS).read_text().strip() == "0",
    reason="needs root, and a machine whose low ports are closed",
)
def test_without_the_network_a_container_root_cannot_bind_port_80() -> None:
    """The control for the test above: in the machine's namespace a user namespace's root holds no
    CAP_NET_BIND_SERVICE there, so it is the pods' network's setting that lets it."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 2
        try:
            body = _container(0)
            try:
                body()
                code = 0
            except PermissionError:
                code = 1
        finally:
            os._exit(code)
    os.close(r)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 1


# --- (4) nothing left behind -------------------------------------------------------------------


def test_close_ends_the_holder_and_is_idempotent() -> None:
    net = Network.create()
    holder = net.holder
    assert net.alive() and not gone(holder)
    with net:
        pass
    assert gone(holder) and not Path(f"/proc/{holder}").exists()  # reaped, not a zombie
    net.close()
    assert not net.alive()
    with pytest.raises(NetworkError):
        net.socket()
    assert net.connect_check("127.0.0.1", 80) is False


HOLDER_OF_A_KILLED_PARENT = """
import json, pathlib, sys, threading, time
from jaxinfra_sim.network.netns import Network
made, tool = [], sys.argv[2:]
which = {"pasta": tool[0]}.get if tool else (lambda name: None)
if sys.argv[1] == "thread":   # made by a thread that ends at once: PR_SET_PDEATHSIG would fire then
    t = threading.Thread(target=lambda: made.append(Network.create(which=which)))
    t.start()
    t.join()
else:
    made.append(Network.create(which=which))
assert made[0].egress == ("pasta" if tool else None), made[0].egress_note
egress = json.loads((pathlib.Path(tool[0]).parent / "record.json").read_text())["pid"] if tool else 0
print(made[0].holder, egress, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("egress", [False, True], ids=["", "egress"])
@pytest.mark.parametrize("made_by", ["main", "thread"])
def test_the_holder_dies_with_a_killed_simulator(made_by: str, egress: bool, tmp_path: Path) -> None:
    tool = [str(stand_in(tmp_path / "bin", "pasta", "configure"))] if egress else []
    parent = subprocess.Popen(
        [sys.executable, "-c", HOLDER_OF_A_KILLED_PARENT, made_by, *tool], stdout=subprocess.PIPE, cwd=ROOT, text=True
    )
    try:
        assert parent.stdout is not None
        assert select.select([parent.stdout], [], [], 30)[0], "the simulator stand-in did not start"
        holder, tool_pid = map(int, parent.stdout.readline().split())
        time.sleep(0.2)
        assert not gone(holder), "the holder must outlive the thread that made it"
        parent.kill()
        parent.wait(10)
        assert wait_gone(holder, 2.0), f"holder {holder} outlived its killed parent"
        assert not tool_pid or wait_gone(tool_pid, 2.0), "the egress tool outlived the simulator"
    finally:
        parent.kill()
        parent.wait(10)


def test_a_terminated_holder_ends_its_egress_tool(tmp_path: Path) -> None:
    fake = stand_in(tmp_path / "bin", "slirp4netns", "configure")
    with Network.create(which={"slirp4netns": str(fake)}.get) as net:
        tool = record(fake.parent)["pid"]
        os.kill(net.holder, signal.SIGTERM)
        assert wait_gone(net.holder) and wait_gone(tool)


def test_a_killed_holder_fails_requests_fast_and_joined_pods_keep_the_namespace() -> None:
    net = Network.create()
    try:
        os.kill(net.holder, signal.SIGKILL)
        assert wait_gone(net.holder)
        t = time.monotonic()
        assert net.connect_check("127.0.0.1", 80) is False
        with pytest.raises(NetworkError):
            net.socket()
        assert time.monotonic() - t < netns.REPLY_TIMEOUT_S  # neither waited for an answer that cannot come
        assert not net.alive()

        def bind() -> str:  # the descriptors still hold the namespace: a pod may still join it
            with socket.create_server(("0.0.0.0", 80)):
                return os.readlink("/proc/self/ns/net")

        assert in_joined_child(net, bind) != os.readlink("/proc/self/ns/net")
    finally:
        net.close()


# --- the simulator's side: fast, thread-safe, bounded ----------------------------------------------


def test_connect_check_is_fast_and_thread_safe(network: Network) -> None:
    with held_port() as held:
        port = held.getsockname()[1]
        with pod_listener(network, port):
            # Below the ephemeral range: a port in it may be the source port a connect picks, and TCP's simultaneous
            # open then connects the socket to itself (a check of a closed port answering True, 1 run in ~150).
            closed = 1
            times, baseline = [], []
            for _ in range(
                200
            ):  # interleaved with the same check on the machine's own loopback: a ratio, not a wall bound
                t = time.perf_counter()
                assert not network.connect_check("127.0.0.1", closed)
                times.append(time.perf_counter() - t)
                t = time.perf_counter()
                with socket.socket() as probe:
                    probe.connect_ex(("127.0.0.1", closed))
                baseline.append(time.perf_counter() - t)
            ratio = sorted(times)[len(times) // 2] / sorted(baseline)[len(baseline) // 2]
            # typically ~5x (one request to the holder, which makes the same connect); a check that waited out its
            # timeout (50 ms) would be thousands of times the baseline
            assert ratio < 500, ratio
            results: list[bool] = []

            def many() -> None:
                for _ in range(25):
                    with network.socket() as s:
                        results.append(s.family == socket.AF_INET and s.type == socket.SOCK_STREAM)
                    results.append(network.connect_check("127.0.0.1", port))

            threads = [threading.Thread(target=many) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert len(results) == 400 and all(results)


def test_sockets_of_other_kinds(network: Network) -> None:
    with network.socket(socket.AF_INET6) as s6:
        s6.bind(("::1", 0))
    with network.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.bind(("127.0.0.1", 0))
        assert not machine_holds(u)  # the pods' namespace's socket, whatever port the machine's own use
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as own:
        own.bind(("127.0.0.1", 0))
        assert machine_holds(own)  # and the check sees the machine's own
    with pytest.raises(OSError):
        network.socket(12345)  # no such family: the holder's errno, and the next request still works
    assert network.socket().family == socket.AF_INET


def test_unknown_strategy() -> None:
    with pytest.raises(ValueError, match="unknown strategy"):
        Network.create("rootful")


# --- where the kernel refuses ----------------------------------------------------------------------

REFUSED = """
from jaxinfra_sim.network import netns
from jaxinfra_sim.runtime import sandbox
try:
    netns.Network.create()
except sandbox.Unavailable as e:
    print("UNAVAILABLE", e)
else:
    print("CREATED")
"""


@pytest.mark.parametrize("as_root", [False, True], ids=["unprivileged", "root"])
def test_no_namespaces_is_unavailable_with_cause_and_fix(as_root: bool) -> None:
    home = unprivileged.scratch_home()
    try:
        r = unprivileged.run(
            [sys.executable, "-c", REFUSED],
            home,
            as_root=as_root,
            deny_unshare=True,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert r.stdout.startswith("UNAVAILABLE"), r.stdout + r.stderr
    assert "cannot simulate here: a seccomp filter forbids new namespaces" in r.stdout
    assert "fix: run it where unshare(2) is allowed" in r.stdout


def test_unavailable_is_the_sandboxs() -> None:
    err = netns._unavailable([{"strategy": "user", "step": "unshare(user)", "errno": 1}])
    assert isinstance(err, sandbox.Unavailable)


# --- egress -----------------------------------------------------------------------------------


def test_egress_command_lines() -> None:
    assert netns.egress_command("pasta", "/usr/bin/pasta", 42, True) == [
        "/usr/bin/pasta",
        "--foreground",
        "--quiet",
        "--config-net",
        "--no-map-gw",
        "-t",
        "none",
        "-u",
        "none",
        "-T",
        "none",
        "-U",
        "none",
        "--netns",
        "/proc/42/ns/net",
        "--userns",
        "/proc/42/ns/user",
    ]
    assert netns.egress_command("pasta", "pasta", 7, False)[-2:] == ["--netns", "/proc/7/ns/net"]
    assert netns.egress_command("slirp4netns", "/usr/bin/slirp4netns", 42, True) == [
        "/usr/bin/slirp4netns",
        "--configure",
        "--mtu=65520",
        "--disable-host-loopback",
        "--netns-type=path",
        "--userns-path=/proc/42/ns/user",
        "/proc/42/ns/net",
        "tap0",
    ]
    assert netns.egress_command("slirp4netns", "s", 7, False) == [
        "s",
        "--configure",
        "--mtu=65520",
        "--disable-host-loopback",
        "--netns-type=path",
        "/proc/7/ns/net",
        "tap0",
    ]
    with pytest.raises(ValueError):
        netns.egress_command("vpnkit", "vpnkit", 1, False)


def test_find_egress() -> None:
    assert netns.find_egress(lambda name: None) == (None, None, netns.NO_EGRESS)
    assert netns.NO_EGRESS == (
        "egress off: neither pasta nor slirp4netns is installed (Debian packages passt, slirp4netns)"
    )
    both = {"pasta": "/bin/pasta", "slirp4netns": "/bin/slirp4netns"}
    assert netns.find_egress(both.get)[:2] == ("pasta", "/bin/pasta")
    assert netns.find_egress({"slirp4netns": "/x/slirp4netns"}.get) == (
        "slirp4netns",
        "/x/slirp4netns",
        "egress on: slirp4netns (/x/slirp4netns)",
    )


def test_no_egress_tool_here_means_egress_off() -> None:
    if any(shutil.which(t) for t in netns.EGRESS_TOOLS):
        pytest.skip("an egress tool is installed here")
    with Network.create() as net:
        assert net.egress is None and net.egress_note == netns.NO_EGRESS
        assert in_joined_child(net, netns.has_default_route) is False
    with Network.create(egress=False) as net:
        assert net.egress is None and net.egress_note == "egress off: not asked for"


def test_has_default_route(tmp_path: Path) -> None:
    header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
    route, route6 = tmp_path / "route", tmp_path / "ipv6_route"
    unreachable = (
        "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
        "00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n"
    )
    route.write_text(header)
    route6.write_text(unreachable)  # every namespace's own IPv6 'unreachable' default: not a route out
    assert not netns.has_default_route(str(route), str(route6))
    route.write_text(header + "tap0\t00000000\t0202000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n")
    assert netns.has_default_route(str(route), str(route6))
    route.write_text(header)
    route6.write_text(
        unreachable + unreachable.replace("ffffffff", "00000400").replace("00200200       lo", "00000003     tap0")
    )
    assert netns.has_default_route(str(route), str(route6))
    assert not netns.has_default_route(str(tmp_path / "none"), str(tmp_path / "none6"))


STAND_IN = r'''#!{python} -IS
"""A stand-in for {tool}: records how it was started, then does what `behaviour` says ({behaviour})."""
import ctypes, fcntl, json, os, socket, struct, sys, time
args = sys.argv[1:]
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "record.json"), "w") as f:
    json.dump({{"argv": sys.argv, "pid": os.getpid(), "ppid": os.getppid()}}, f)
if "{behaviour}" == "fail":
    print("{tool}: cannot open /dev/net/tun: boom", file=sys.stderr)
    sys.exit(1)
if "{behaviour}" == "configure":   # what the real tool does last: a default route (here via lo; nothing is sent)
    libc = ctypes.CDLL(None, use_errno=True)
    net = next(a for a in args if a.endswith("/ns/net"))
    user = next((a.split("=", 1)[1] for a in args if a.startswith("--userns-path=")), None)
    if "--userns" in args:
        user = args[args.index("--userns") + 1]
    if user:
        assert libc.setns(os.open(user, os.O_RDONLY), 0x10000000) == 0, os.strerror(ctypes.get_errno())
    assert libc.setns(os.open(net, os.O_RDONLY), 0x40000000) == 0, os.strerror(ctypes.get_errno())
    dev = ctypes.create_string_buffer(b"lo")
    anywhere = struct.pack("HH4s8x", socket.AF_INET, 0, bytes(4))
    rtentry = struct.pack("L16s16s16sHhLPhPLLH0L", 0, anywhere, anywhere, anywhere, 0x1, 0, 0, 0, 0,
                          ctypes.addressof(dev), 0, 0, 0)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, 0x890B, rtentry)   # SIOCADDRT
time.sleep(60)
'''


def default_routes() -> list[str]:
    """The interfaces of this namespace's IPv4 default routes."""
    rows = [line.split() for line in Path("/proc/net/route").read_text().splitlines()[1:]]
    return [r[0] for r in rows if r[1] == "00000000" and r[7] == "00000000"]


def stand_in(folder: Path, tool: str, behaviour: str) -> Path:
    folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    path = folder / tool
    path.write_text(STAND_IN.format(python=sys.executable, tool=tool, behaviour=behaviour))
    path.chmod(0o755)
    return path


def record(folder: Path) -> dict[str, Any]:
    deadline = time.monotonic() + 5
    while not (folder / "record.json").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return json.loads((folder / "record.json").read_text())


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("tool", netns.EGRESS_TOOLS)
def test_an_egress_tool_is_attached_and_ends_with_the_network(strategy: str, tool: str, tmp_path: Path) -> None:
    fake = stand_in(tmp_path / "bin", tool, "configure")
    with Network.create(strategy, which={tool: str(fake)}.get) as net:
        assert (net.egress, net.egress_note) == (tool, f"egress on: {tool} ({fake})")
        started = record(fake.parent)
        assert started["argv"] == netns.egress_command(tool, str(fake), net.holder, strategy == "user")
        assert started["ppid"] == net.holder
        assert in_joined_child(net, default_routes) == ["lo"]  # the stand-in's, in the pods' network
        assert not gone(started["pid"])
    assert wait_gone(started["pid"], 2.0), "the egress tool outlived the network"


def test_an_egress_tool_that_fails_or_hangs_leaves_the_network_without(tmp_path: Path) -> None:
    fake = stand_in(tmp_path / "fail", "pasta", "fail")
    with Network.create(which={"pasta": str(fake)}.get) as net:
        assert net.egress is None
        assert net.egress_note == "egress off: pasta ended (exit status 1): pasta: cannot open /dev/net/tun: boom"
        assert in_joined_child(net, netns.has_default_route) is False
        assert not net.connect_check("127.0.0.1", 9)
    fake = stand_in(tmp_path / "hang", "slirp4netns", "hang")
    t = time.monotonic()
    with Network.create(which={"slirp4netns": str(fake)}.get, egress_timeout=0.3) as net:
        assert time.monotonic() - t < netns.EGRESS_TIMEOUT_S  # its 0.3 s, not the default nor the tool's hang
        assert net.egress is None
        assert net.egress_note == "egress off: slirp4netns did not configure the pods' network within 0.3 s"
        pid = record(fake.parent)["pid"]
        assert wait_gone(pid, 2.0)
        assert net.socket().family == socket.AF_INET


# --- the same, as an unprivileged user ---------------------------------------------------------------


@pytest.mark.skipif(not ROOT_USER or bool(os.environ.get(RERUN)), reason="runs as root, once")
def test_the_same_as_an_unprivileged_user() -> None:
    """Every test above again as uid 65534, where the network is made the `user` way (tests that need root
    skip themselves there)."""
    home = unprivileged.scratch_home()
    try:
        r = unprivileged.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", str(Path(__file__))],
            home,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=240,
            env={RERUN: "1"},
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)
    tail = (r.stdout + r.stderr)[-6000:]
    assert r.returncode == 0, tail
    assert " passed" in r.stdout and "failed" not in r.stdout, tail
