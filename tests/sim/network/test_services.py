"""A Service by name, as the Kubernetes docs' "Connecting Applications with Services" uses one: a ClusterIP Service
(the default type) gets a virtual IP from the API server, cluster DNS answers its name with that address, and
kube-proxy sends each connection to one of its ready endpoints (`kubeproxy`). Each case runs the pods' own commands
with this machine's python3, as root and as an unprivileged user, and leaves this machine's interfaces and nftables
ruleset as they were."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import machine_network, simulate_as

pytestmark = pytest.mark.simulator

SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {role: server}
  ports:
  - {name: http, port: 80, targetPort: TARGET}
"""

SERVER = """\
import socket, time
server = socket.create_server(("0.0.0.0", 8080))
server.settimeout(0.5)
served, last = 0, time.monotonic()
while not served or time.monotonic() - last < 3:
    try:
        conn, _ = server.accept()
    except TimeoutError:
        continue
    with conn:  # the kubelet's tcpSocket probe connects and closes: only a client says hi
        conn.sendall(socket.gethostname().encode())
        conn.settimeout(1)
        try:
            said = conn.recv(2)
        except OSError:
            said = b""
    if said == b"hi":
        served, last = served + 1, time.monotonic()
"""

CLIENT = """\
import socket, sys, time
seen, tries = {}, 0
start = time.monotonic()
while (sum(seen.values()) < COUNT or len(seen) < SERVERS) and time.monotonic() - start < 30:
    try:
        with socket.create_connection(("web", 80), timeout=2) as c:
            name = c.recv(64).decode()
            c.sendall(b"hi")
    except OSError as e:
        print("client: not yet:", e, flush=True)
        time.sleep(0.2)
        continue
    seen[name] = seen.get(name, 0) + 1
print("client: served by", sorted(seen.items()), flush=True)
sys.exit(0 if len(seen) == SERVERS else 5)
"""

REFUSED = """\
import socket, sys, time
start = time.monotonic()
try:
    socket.create_connection(("web", 80), timeout=5).close()
except ConnectionRefusedError:
    sys.exit(7 if time.monotonic() - start < 3 else 8)  # a drop would wait out the 5 s
except OSError as e:
    print("client:", e, flush=True)
    sys.exit(9)
"""

READY_ON_8080 = {"tcpSocket": {"port": 8080}, "periodSeconds": 1}
NEVER_READY = {"exec": {"command": ["python3", "-c", "raise SystemExit(1)"]}, "periodSeconds": 1}


def job(name: str, pods: int, labels: dict[str, str], program: str, **extra: object) -> dict:
    """A replicated Job of `pods` pods running `program`; `extra`: more fields of its container."""
    container = {"name": name, "image": "python:3.11-slim", "command": ["python3", "-c", program], **extra}
    return {
        "name": name,
        "template": {
            "spec": {
                "parallelism": pods,
                "completions": pods,
                "backoffLimit": 0,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"restartPolicy": "Never", "containers": [container]},
                },
            }
        },
    }


def service(named: bool = False, cluster_ip: str | None = None, publish: bool = False) -> dict:
    """The Service `web`: port 80 to the servers' 8080, by number or by the container port's name."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"role": "server"},
            "ports": [{"name": "http", "port": 80, "targetPort": "http-alt" if named else 8080}],
            **({"clusterIP": cluster_ip} if cluster_ip else {}),
            **({"publishNotReadyAddresses": True} if publish else {}),
        },
    }


def manifests(
    servers: int,
    client: str,
    probe: dict,
    named: bool = False,
    cluster_ip: str | None = None,
    publish: bool = False,
    server: str = SERVER,
) -> str:
    """`service` and a JobSet of `servers` servers behind it (readiness `probe`) and one client running `client`."""
    from jaxinfra.yamlio import dump

    ports = {"ports": [{"containerPort": 8080, "name": "http-alt"}]} if named else {}
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "svc"},
        "spec": {
            "replicatedJobs": [
                job("server", servers, {"role": "server"}, server, readinessProbe=probe, **ports),
                job("client", 1, {"role": "client"}, client),
            ]
        },
    }
    return dump([service(named, cluster_ip, publish), jobset])


def client(count: int, servers: int) -> str:
    return CLIENT.replace("COUNT", str(count)).replace("SERVERS", str(servers))


def pods_of(report: dict) -> dict[str, int | None]:
    return {p["hostname"]: p["exit_code"] for p in report["workloads"][0]["attempts"][0]["pods"]}


AS = pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])


@AS
@pytest.mark.parametrize("named", [False, True], ids=["target-number", "target-name"])
def test_a_client_reaches_a_server_by_its_service_name_on_the_services_port(
    home: Path, as_root: bool, named: bool
) -> None:
    """`web:80` resolves to the Service's cluster IP and reaches the server's port 8080, named by number or by the
    container port's name; the server is an endpoint once its readiness probe passes."""
    before = machine_network()
    text = manifests(1, client(1, 1), READY_ON_8080, named)
    rc, out, report = simulate_as(home, text, "--run-command", "--timeout", "60", as_root=as_root)
    assert rc == 0, out
    assert pods_of(report) == {"svc-server-0-0": 0, "svc-client-0-0": 0}, out
    assert machine_network() == before


@AS
def test_a_service_without_ready_endpoints_refuses_at_once_and_the_job_fails(home: Path, as_root: bool) -> None:
    """The server's readiness probe never passes, so the Service has no endpoints: kube-proxy rejects the connection
    (ICMP port unreachable, read as "connection refused" at once, not a 5 s timeout) and the client's Job, then
    the JobSet, fails, as on a cluster."""
    before = machine_network()
    text = manifests(1, REFUSED, NEVER_READY)
    rc, out, report = simulate_as(home, text, "--run-command", "--timeout", "60", as_root=as_root)
    assert rc == 1, out
    assert pods_of(report)["svc-client-0-0"] == 7, out
    assert machine_network() == before


@AS
def test_connections_to_a_service_are_balanced_over_its_ready_endpoints(home: Path, as_root: bool) -> None:
    """Connections to a Service of 2 servers reach both. The client may start while only one is ready (an endpoint
    only once its readiness probe passes, as on a cluster: CI once saw 30 connections in 0.4 s all reach the first),
    so it goes on past 30 until it has seen both or 30 s have passed; once both are ready each connection picks one at
    random, so a kube-proxy that kept to one endpoint fails it."""
    text = manifests(2, client(30, 2), READY_ON_8080)
    rc, out, report = simulate_as(home, text, "--run-command", "--timeout", "60", as_root=as_root)
    assert rc == 0, out
    assert pods_of(report)["svc-client-0-0"] == 0, out


HAIRPIN = """\
import socket, sys, threading, time
server = socket.create_server(("0.0.0.0", 8080))
def serve():
    while True:
        conn, (ip, _) = server.accept()
        with conn:
            conn.sendall(ip.encode())
threading.Thread(target=serve, daemon=True).start()
for _ in range(100):
    try:
        with socket.create_connection(("web", 80), timeout=2) as c:
            print("hairpin: served, seen from", c.recv(64).decode(), flush=True)
        sys.exit(0)
    except OSError as e:
        print("hairpin: not yet:", e, flush=True)
        time.sleep(0.2)
sys.exit(3)
"""


@AS
def test_a_pod_reaches_itself_through_its_own_service(home: Path, as_root: bool) -> None:
    """Hairpin: the Service's only endpoint is the client itself. kube-proxy masquerades the connection to the node's
    address, so the reply goes back through the node and is un-DNATed (without it the reply would bypass the node and
    the connection never completes)."""
    from jaxinfra.yamlio import dump

    pod_job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "hairpin"},
        "spec": job("hairpin", 1, {"role": "server"}, HAIRPIN)["template"]["spec"],
    }
    rc, out, report = simulate_as(home, dump([service(), pod_job]), "--run-command", "--timeout", "30", as_root=as_root)
    assert rc == 0, out
    assert list(pods_of(report).values()) == [0], out


@pytest.mark.parametrize("cluster_ip", ["10.96.0.10", "10.0.0.5"])
def test_a_cluster_ip_the_range_does_not_hold_is_refused_by_validate_and_simulate(home: Path, cluster_ip: str) -> None:
    """A Service's spec.clusterIP is honoured inside the service CIDR (10.96.0.0/12) and refused outside it, with the
    API server's message naming the field, by `jaxinfra validate` and `jaxinfra simulate` alike (exit 2)."""
    import subprocess
    import sys

    from tests.support.paths import ROOT

    text = manifests(1, client(1, 1), READY_ON_8080, cluster_ip=cluster_ip)
    manifest = home / "services.yaml"
    manifest.write_text(text)
    validated = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "validate", str(manifest)], capture_output=True, text=True, cwd=ROOT
    )
    manifest.unlink()
    rc, out, _ = simulate_as(home, text, "--run-command", "--timeout", "30")
    if cluster_ip == "10.96.0.10":
        assert (validated.returncode, rc) == (0, 0), validated.stdout + validated.stderr + out
    else:
        assert (validated.returncode, rc) == (2, 2), validated.stdout + validated.stderr + out
        for said in (validated.stdout + validated.stderr, out):
            assert "Service/web spec.clusterIPs" in said and "is not in the valid range" in said, said


@AS
def test_publish_not_ready_addresses_makes_a_not_ready_server_an_endpoint(home: Path, as_root: bool) -> None:
    """With publishNotReadyAddresses the server is an endpoint though its readiness probe never passes: the client
    is served (without it, refused: the test above)."""
    text = manifests(1, client(1, 1), NEVER_READY, publish=True)
    rc, out, report = simulate_as(home, text, "--run-command", "--timeout", "60", as_root=as_root)
    assert rc == 0, out
    assert pods_of(report) == {"svc-server-0-0": 0, "svc-client-0-0": 0}, out


THROUGH_POLICY = """\
import socket, sys, time
start = time.monotonic()
while time.monotonic() - start < 20:
    try:
        with socket.create_connection(("web", 80), timeout=2) as c:
            c.recv(64)
            c.sendall(b"hi")
        sys.exit(0)
    except ConnectionRefusedError:  # no ready endpoint yet: kube-proxy refuses
        time.sleep(0.2)
    except TimeoutError:  # dropped by the server's NetworkPolicy
        sys.exit(6)
sys.exit(5)
"""


@AS
@pytest.mark.parametrize("admitted", ["client", "nobody"])
def test_network_policy_sees_the_endpoint_behind_the_cluster_ip(home: Path, as_root: bool, admitted: str) -> None:
    """kube-proxy DNATs before NetworkPolicy's forward chain, so a policy on the server judges the connection by the
    server pod it reaches, as on a cluster: admitting `role: client` lets the client in through the Service, admitting
    nobody drops it (a timeout, not a refusal)."""
    from jaxinfra.yamlio import dump

    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "server-ingress"},
        "spec": {
            "podSelector": {"matchLabels": {"role": "server"}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": admitted}}}], "ports": [{"port": 8080}]}],
        },
    }
    text = dump([policy]) + "---\n" + manifests(1, THROUGH_POLICY, READY_ON_8080)
    rc, out, report = simulate_as(home, text, "--run-command", "--timeout", "60", as_root=as_root)
    pods = pods_of(report)
    if admitted == "client":
        assert rc == 0 and pods == {"svc-server-0-0": 0, "svc-client-0-0": 0}, out
    else:
        assert rc == 1 and pods["svc-client-0-0"] == 6, out


GOES_UNREADY = """\
import os, socket, time
open("/tmp/ready", "w").close()
server = socket.create_server(("0.0.0.0", 8080))
server.settimeout(0.5)
until = None
while until is None or time.monotonic() < until:  # listens throughout: a refusal is kube-proxy's, not this pod's
    try:
        conn, _ = server.accept()
    except TimeoutError:
        continue
    with conn:
        conn.sendall(b"served")
        conn.settimeout(1)
        try:
            said = conn.recv(8)
        except OSError:
            said = b""
    if said == b"unready" and until is None:
        os.remove("/tmp/ready")
        until = time.monotonic() + 10
"""

UNREADY_CLIENT = """\
import socket, sys, time
def ask(message):
    with socket.create_connection(("web", 80), timeout=2) as c:
        c.recv(8)
        c.sendall(message)
while True:  # until the server is an endpoint
    try:
        ask(b"unready")
        break
    except ConnectionRefusedError:
        time.sleep(0.2)
start = time.monotonic()
while time.monotonic() - start < 8:  # its readiness probe fails: kube-proxy takes it out
    try:
        ask(b"hi")
    except ConnectionRefusedError:
        print("client: refused", round(time.monotonic() - start, 1), "s after the server went unready", flush=True)
        sys.exit(0)
    time.sleep(0.2)
sys.exit(4)
"""


@AS
def test_a_server_whose_readiness_fails_leaves_its_service(home: Path, as_root: bool) -> None:
    """Readiness decides the endpoints while pods run: once the server's readiness probe fails (it still listens),
    kube-proxy's next sync takes it out and the client's connections are refused."""
    probe = {
        "exec": {"command": ["python3", "-c", "import os, sys; sys.exit(not os.path.exists('/tmp/ready'))"]},
        "periodSeconds": 1,
        "failureThreshold": 1,
    }
    text = manifests(1, UNREADY_CLIENT, probe, server=GOES_UNREADY)
    rc, out, report = simulate_as(home, text, "--run-command", "--timeout", "60", as_root=as_root)
    assert rc == 0, out
    assert pods_of(report) == {"svc-server-0-0": 0, "svc-client-0-0": 0}, out


def batch_job(spec: dict) -> dict:
    """One of `job`'s replicated Jobs as a Job of its own (a workload of its own)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": spec["name"]},
        "spec": spec["template"]["spec"],
    }


@AS
def test_a_job_reaches_another_jobs_pods_through_their_service(home: Path, as_root: bool) -> None:
    """The server and its client are two Jobs, applied together, as the Kubernetes docs' "Connecting Applications with
    Services" applies a Deployment and then runs a client beside it: both run at once, and the client reaches the
    server's pod by the Service's name through kube-proxy, whose endpoints are whichever workload's pods the Service
    selects."""
    from jaxinfra.yamlio import dump

    before = machine_network()
    server = batch_job(job("server", 1, {"role": "server"}, SERVER, readinessProbe=READY_ON_8080))
    caller = batch_job(job("client", 1, {"role": "client"}, client(1, 1)))
    rc, out, report = simulate_as(
        home, dump([service(), server, caller]), "--run-command", "--timeout", "60", as_root=as_root
    )
    assert rc == 0, out
    assert [(w["name"], w["verdict"]) for w in report["workloads"]] == [
        ("server", "succeeded"),
        ("client", "succeeded"),
    ], out
    assert machine_network() == before
