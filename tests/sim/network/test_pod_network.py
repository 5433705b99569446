"""Pods reaching each other by name, as the Kubernetes docs' "Job with Pod-to-Pod Communication" does: a headless
Service that selects the Job's pods and is their subdomain makes `<job>-<index>.<service>` resolvable, and each pod
pings its peers. `ping` runs as the image's user without CAP_NET_RAW because containerd opens ICMP echo sockets to
every group of a pod's network namespace (`netns.py`). The unprivileged run is in tests/sim/runtime/test_nonroot.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.cli import machine_network, simulate_as, simulate_cli
from tests.support.jobsets import indexed_job
from tests.support.paths import MANIFESTS, ROOT
from tests.support.stacks import rendered

pytestmark = pytest.mark.simulator

POD_TO_POD = MANIFESTS / "indexed_job_pod_to_pod.yaml"


@pytest.fixture(autouse=True)
def _ping() -> None:
    """The image's `ping` is this machine's (pods run its programs): Debian's iputils-ping, which .ci/run installs."""
    assert shutil.which("ping"), "ping is not installed: apt-get install iputils-ping (.ci/run does)"


def test_every_pod_reaches_every_peer_by_its_hostname(tmp_path: Path) -> None:
    rc, report, out = simulate_cli(str(POD_TO_POD), "--run-command", "--timeout", "30", tmp=tmp_path)
    assert rc == 0, out
    [workload] = report["workloads"]
    assert workload["verdict"] == "succeeded"
    pods = workload["attempts"][0]["pods"]
    # each pod's loop ends only once every peer answered
    assert [(p["hostname"], p["exit_code"]) for p in pods] == [(f"ping-peers-{i}", 0) for i in range(3)]


def test_a_service_that_selects_other_pods_leaves_the_peers_unnamed_and_the_job_unfinished(tmp_path: Path) -> None:
    """No DNS record names a pod the Service does not select: on a cluster every pod pings on and the Job never
    completes, so the run is not finished at the timeout (not failed)."""
    manifest = tmp_path / "job.yaml"
    manifest.write_text(POD_TO_POD.read_text().replace("job-name: ping-peers", "job-name: pingpeers"))
    rc, report, out = simulate_cli(str(manifest), "--run-command", "--timeout", "4", tmp=tmp_path)
    assert rc == 1
    [workload] = report["workloads"]
    assert workload["verdict"] == "not finished", workload["verdict"]
    [attempt] = workload["attempts"]
    assert attempt["reason"] == "--timeout reached with pods still running: ping-peers-0, ping-peers-1, ping-peers-2"


SAME_PORT = MANIFESTS / "indexed_job_same_port.yaml"


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
def test_two_pods_bind_the_same_port_and_reach_each_other_by_hostname(home: Path, as_root: bool) -> None:
    """Each pod has a network namespace of its own, wired to the simulation's bridge by the CNI plugins: both bind
    0.0.0.0:9000 (in one shared namespace the second bind collided) and each hears its peer, from the peer's pod IP."""
    before = machine_network()
    rc, out, report = simulate_as(home, SAME_PORT.read_text(), "--run-command", "--timeout", "40", as_root=as_root)
    assert rc == 0, out
    pods = report["workloads"][0]["attempts"][0]["pods"]
    assert [(p["hostname"], p["exit_code"]) for p in pods] == [("same-port-0", 0), ("same-port-1", 0)]
    assert [p["ip"] for p in pods] == ["10.244.0.2", "10.244.0.3"]
    assert machine_network() == before


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
def test_two_containers_of_one_pod_share_its_network(home: Path, as_root: bool) -> None:
    """The containers of one pod share its namespace, as on a cluster: a sidecar already on the pod's port makes the
    main container's bind of it fail (EADDRINUSE), and the main container reaches the sidecar on localhost."""
    bind = "import socket, time; s = socket.create_server(('0.0.0.0', 9000)); time.sleep(30)"
    check = (
        "import socket, time\n"
        "for _ in range(100):\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', 9000), timeout=1).close(); break\n"
        "    except OSError: time.sleep(0.1)\n"
        "try:\n"
        "    socket.create_server(('0.0.0.0', 9000))\n"
        "except OSError as e:\n"
        "    raise SystemExit(7 if e.errno == 98 else 1)\n"
    )
    text = SAME_PORT.read_text().replace("completions: 2", "completions: 1").replace("parallelism: 2", "parallelism: 1")
    job = yaml.safe_load_all(text)
    service, manifest = list(job)
    spec = manifest["spec"]["template"]["spec"]
    spec["initContainers"] = [
        {"name": "holder", "image": "python:3.11-slim", "restartPolicy": "Always", "command": ["python3", "-c", bind]}
    ]
    spec["containers"][0]["command"] = ["python3", "-c", check]
    rc, out, report = simulate_as(
        home, yaml.safe_dump_all([service, manifest]), "--run-command", "--timeout", "40", as_root=as_root
    )
    [pod] = report["workloads"][0]["attempts"][0]["pods"]
    assert pod["exit_code"] == 7, out  # the port is the sidecar's: its pod's, not the main container's to take


POLICY = MANIFESTS / "jobset_network_policy.yaml"
FRIEND_IN_DEFAULT = """\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: server-allow-friends-of-this-namespace
spec:
  podSelector: {matchLabels: {role: server}}
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: default}}
      podSelector: {matchLabels: {role: friend}}
"""
STRANGER_EGRESS_TO_NOBODY = """\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: stranger-reaches-only-dns
spec:
  podSelector: {matchLabels: {role: stranger}}
  policyTypes: [Egress]
  egress:
  - to:
    - ipBlock: {cidr: 10.0.0.0/8, except: [10.244.0.0/16]}
    ports: [{protocol: UDP, port: 53}]
"""
POLICIES = {
    "ingress-pod-selector": None,  # the manifest's own
    "ingress-namespace-and-pod-selector": FRIEND_IN_DEFAULT,
    "egress": STRANGER_EGRESS_TO_NOBODY,
    "no-policy": "",
}


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
@pytest.mark.parametrize("policy", list(POLICIES))
def test_a_network_policy_admits_the_friend_and_drops_the_stranger(home: Path, as_root: bool, policy: str) -> None:
    """Each policy lets the friend reach the server's port 9000 and not the stranger: an ingress policy on the server
    admitting `role: friend` pods (by pod selector, or by namespace and pod selector together), or an egress policy
    on the stranger allowing only DNS outside the pod CIDR. The friend is served, the stranger's connections time
    out (dropped, as Calico and Dataplane V2 drop them). Without a policy the stranger gets through and ends 9,
    failing the JobSet. No run changes this machine's interfaces or nftables ruleset."""
    server_side = POLICY.read_text().split("---\n", 1)[1]
    text = POLICY.read_text() if POLICIES[policy] is None else f"{POLICIES[policy]}---\n{server_side}"
    before = machine_network()
    rc, out, report = simulate_as(home, text, "--run-command", "--timeout", "40", as_root=as_root)
    pods = {p["hostname"]: p["exit_code"] for p in report["workloads"][0]["attempts"][0]["pods"]}
    if policy != "no-policy":
        assert rc == 0, out
        assert pods == {"policy-server-0-0": 0, "policy-friend-0-0": 0, "policy-stranger-0-0": 0}
    else:
        assert rc == 1, out
        assert pods["policy-stranger-0-0"] == 9, out
    assert machine_network() == before


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
@pytest.mark.parametrize("admits", [True, False], ids=["rendered", "admits-nobody"])
def test_jaxinfras_own_network_policy_lets_the_jobs_pods_talk(home: Path, as_root: bool, admits: bool) -> None:
    """jaxinfra renders a NetworkPolicy per job admitting only the job's own pods: enforced, JAX's ranks still reach
    their coordinator and the job passes. The same policy admitting no pod keeps rank 1 from rank 0, so the job does
    not finish by the --timeout."""
    from jaxinfra.yamlio import dump

    objs = rendered(ROOT / "stacks" / "cpu_dev.py", "jobset")
    [policy] = [o for o in objs if o["kind"] == "NetworkPolicy"]
    if not admits:
        policy["spec"]["ingress"][0]["from"][0]["podSelector"] = {"matchLabels": {"role": "nobody"}}
    rc, out, report = simulate_as(home, dump(objs), "--timeout", "25", as_root=as_root)
    [workload] = report["workloads"]
    if admits:
        assert rc == 0 and workload["verdict"] == "succeeded", out
    else:
        assert rc == 1 and workload["verdict"] != "succeeded", out


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
@pytest.mark.parametrize("listen", ["127.0.0.1", "nowhere"])
def test_an_exec_probe_runs_in_its_pods_network(home: Path, as_root: bool, listen: str) -> None:
    """An exec probe's command runs in the container's namespaces, its pod's network among them (containerd's
    ExecSync): it reaches a listener on the pod's own localhost. Where nothing listens its connection is refused,
    the liveness probe fails, the kubelet stops the container and the pod fails."""
    serve = (  # where nothing listens, it would outlive the --timeout unless the kubelet stopped it
        "import socket, time\n"
        f"s = socket.create_server(('{listen}', 9000)) if '{listen}' != 'nowhere' else None\n"
        f"time.sleep({6 if listen != 'nowhere' else 60})\n"
    )
    probe = "import socket, sys; sys.exit(socket.socket().connect_ex(('127.0.0.1', 9000)))"  # 111: refused
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "probed"},
        "spec": {
            "completionMode": "Indexed",
            "completions": 1,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,  # PID 1 without a SIGTERM handler: SIGKILL after 1 s
                    "containers": [
                        {
                            "name": "app",
                            "image": "python:3.11-slim",
                            "command": ["python3", "-c", serve],
                            "livenessProbe": {
                                "exec": {"command": ["python3", "-c", probe]},
                                "initialDelaySeconds": 1,
                                "periodSeconds": 1,
                                "failureThreshold": 3,
                            },
                        }
                    ],
                }
            },
        },
    }
    rc, out, report = simulate_as(home, yaml.safe_dump(job), "--run-command", "--timeout", "30", as_root=as_root)
    [pod] = report["workloads"][0]["attempts"][0]["pods"]
    liveness = pod["probes"]["liveness"]
    if listen == "127.0.0.1":
        assert rc == 0 and liveness["result"] == "success", out  # (one refusal while Python starts may come first)
    else:
        assert rc == 1 and liveness["result"] == "failure" and "liveness probe failed" in pod["reason"], out


ENDED_PEER = """\
apiVersion: v1
kind: Service
metadata: {name: mesh}
spec:
  clusterIP: None
  selector: {job-name: ended}
---
apiVersion: batch/v1
kind: Job
metadata: {name: ended}
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  backoffLimit: 0
  template:
    spec:
      subdomain: mesh
      restartPolicy: Never
      containers:
      - name: c
        image: bash:5.2
        command:
        - bash
        - -c
        - |
          [ "$JOB_COMPLETION_INDEX" = 0 ] && exit 0
          sleep 0.5
          ping -c 1 -W 1 ended-0.mesh > /dev/null || exit 3  # just ended: its sandbox not stopped yet
          sleep 4
          ping -c 1 -W 1 ended-0.mesh > /dev/null && exit 4  # its sandbox stopped: its address is gone
          exit 0
"""


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
def test_an_ended_pods_address_answers_until_the_kubelet_stops_its_sandbox(home: Path, as_root: bool) -> None:
    """A pod that has ended still answers at its address for as long as the kubelet takes to notice and stop its
    sandbox (`podnetworks.SANDBOX_TEARDOWN_S`), then no longer: its network namespace, veth and route are gone."""
    rc, out, report = simulate_as(home, ENDED_PEER, "--run-command", "--timeout", "30", as_root=as_root)
    pods = [p["exit_code"] for p in report["workloads"][0]["attempts"][0]["pods"]]
    assert rc == 0 and pods == [0, 0], out


def _outside(name: str) -> str:
    """A Job whose pod connects to an address outside the cluster (TEST-NET-1, RFC 5737): exit 3 if the network says
    there is no route to it (ENETUNREACH, EHOSTUNREACH), else 0 (connected, refused or timed out out there)."""
    program = (
        "import errno, socket, sys\n"
        "try:\n"
        "    socket.create_connection(('192.0.2.1', 9), timeout=2)\n"
        "except OSError as e:\n"
        "    sys.exit(3 if e.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH) else 0)\n"
    )
    pod = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "python:3.11", "command": ["python3", "-c", program]}],
    }
    return yaml.safe_dump(indexed_job(name, pod, 1, backoffLimit=0))


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
def test_no_egress_leaves_pods_no_route_beyond_the_simulation(home: Path, as_root: bool) -> None:
    """GKE lets pods reach out by default, and so does the simulator where pasta or slirp4netns is installed (CI
    installs slirp4netns): a route leads out. With --no-egress none does, and the report says so."""
    rc, out, report = simulate_as(home, _outside("reach-out"), "--run-command", "--no-egress", as_root=as_root)
    assert rc == 1, out
    [pod] = report["workloads"][0]["attempts"][0]["pods"]
    assert pod["exit_code"] == 3, out
    assert any(n.startswith("egress off (--no-egress)") for n in report["notes"]), report["notes"]
    if shutil.which("slirp4netns") or shutil.which("pasta"):
        rc, out, report = simulate_as(home, _outside("reach-out"), "--run-command", as_root=as_root)
        assert rc == 0, out
        assert any(n.startswith("egress on:") for n in report["notes"]), report["notes"]
