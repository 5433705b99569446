"""The workloads of one input run at the same time, as a cluster runs every applied Job: a NetworkPolicy selects pods
across Jobs (the Kubernetes docs' "Declare Network Policy" style: a server Job behind a headless Service admitting
only `role: friend` pods, a friend Job and a stranger Job each connecting to it), two Jobs that talk to each other
both finish (one after the other they would wait forever), Kueue's quota makes the second of two queued Jobs wait for
the first, and one Job's failure leaves another's verdict alone. Hand-written Indexed Jobs, run with --run-command
(the pods run this machine's python3), as root and as an unprivileged user where the pod network differs."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.sim.cluster.test_fidelity import kueue_queue
from tests.support.cli import simulate_as, simulate_cli
from tests.support.jobsets import indexed_job
from tests.support.machine import memory_machine

pytestmark = pytest.mark.simulator


def job(name: str, script: str, *, labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """An Indexed Job of one pod running `script` in python3, its pod labelled `labels` (and `extra` pod spec)."""
    pod = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "python:3.11-slim", "command": ["python3", "-c", script]}],
        **extra,
    }
    made = indexed_job(name, pod, 1, backoffLimit=0)
    made["spec"]["template"]["metadata"] = {"labels": labels or {}}
    return made


def headless(name: str, selector: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"clusterIP": "None", "selector": selector},
    }


SERVER = """\
import socket, time
server = socket.create_server(("0.0.0.0", 9000))
server.settimeout(0.5)
start, served = time.monotonic(), []
while time.monotonic() - start < 8 or "friend" not in served:
    try:
        conn, (ip, _) = server.accept()
    except TimeoutError:
        continue
    served.append(conn.recv(64).decode())
    print("served", ip, served[-1], flush=True)
"""
CLIENT = """\
import socket, sys, time
start = time.monotonic()
while time.monotonic() - start < 20:
    try:
        with socket.create_connection(("server-0.srv", 9000), timeout=3) as c:
            c.sendall(b"{who}")
        sys.exit(0)
    except TimeoutError:  # the SYN was dropped: a NetworkPolicy's drop, as Calico and Dataplane V2 drop it
        sys.exit("{who}: dropped (timed out)")
    except OSError as e:  # not resolvable or not listening yet
        print("{who}: not yet:", e, flush=True)
        time.sleep(0.2)
sys.exit("{who}: never reached the server")
"""
ALLOW_FRIENDS = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "NetworkPolicy",
    "metadata": {"name": "server-allow-friends"},
    "spec": {
        "podSelector": {"matchLabels": {"app": "server"}},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "friend"}}}], "ports": [{"port": 9000}]}],
    },
}


def three_jobs(policy: bool) -> str:
    docs = [  # the clients first: their pods start before the server's, whose name they resolve once it exists
        *([ALLOW_FRIENDS] if policy else []),
        headless("srv", {"app": "server"}),
        job("friend", CLIENT.replace("{who}", "friend"), labels={"role": "friend"}),
        job("stranger", CLIENT.replace("{who}", "stranger"), labels={"role": "stranger"}),
        job("server", SERVER, labels={"app": "server"}, subdomain="srv"),
    ]
    return yaml.safe_dump_all(docs, sort_keys=False)


def verdicts(report: dict[str, Any]) -> dict[str, str]:
    return {w["name"]: w["verdict"] for w in report["workloads"]}


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
@pytest.mark.parametrize("policy", [True, False], ids=["policy", "no-policy"])
def test_a_network_policy_across_jobs_serves_the_friend_and_drops_the_stranger(
    home: Path, as_root: bool, policy: bool
) -> None:
    """Three Jobs run at once, the clients listed first: the friend resolves the server's name (the cluster DNS holds
    every live pod) and is served; with the policy the stranger's connection times out and its Job fails on its own,
    the other two succeed; without it the stranger is served too."""
    rc, out, report = simulate_as(home, three_jobs(policy), "--run-command", "--timeout", "60", as_root=as_root)
    if policy:
        assert rc == 1, out
        assert verdicts(report) == {"server": "succeeded", "friend": "succeeded", "stranger": "failed"}, out
        [stranger] = [w for w in report["workloads"] if w["name"] == "stranger"]
        assert "stranger: dropped (timed out)" in stranger["attempts"][0]["pods"][0]["stderr_tail"][-1], stranger
    else:
        assert rc == 0, out
        assert verdicts(report) == {"server": "succeeded", "friend": "succeeded", "stranger": "succeeded"}, out
    began = [w["attempts"][0]["began"] for w in report["workloads"]]
    ended = [w["attempts"][0]["began"] + w["attempts"][0]["seconds"] for w in report["workloads"]]
    assert max(began) < min(ended), report["workloads"]  # they overlapped in time


EXCHANGE = """\
import os, socket, sys, time
me, peer = os.environ["ME"], os.environ["PEER"]
server = socket.create_server(("0.0.0.0", 9000))
for _ in range(150):
    try:
        with socket.create_connection((f"{peer}-0.{peer}", 9000), timeout=1) as c:
            c.sendall(me.encode())
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit(f"{me}: never reached {peer}")
server.settimeout(10)
try:
    conn, _ = server.accept()
except TimeoutError:
    sys.exit(f"{me}: never heard from {peer}")
heard = conn.recv(64).decode()
sys.exit(0 if heard == peer else f"{me} heard {heard!r}")
"""


def exchange(a: str, b: str, a_calls: str | None = None) -> str:
    """Jobs `a` and `b`, each calling the other (`a` calls `a_calls` instead, where given)."""
    docs: list[dict[str, Any]] = []
    for me, peer in ((a, a_calls or b), (b, a)):
        pod = job(me, EXCHANGE, labels={"side": me}, subdomain=me)
        pod["spec"]["template"]["spec"]["containers"][0]["env"] = [
            {"name": "ME", "value": me},
            {"name": "PEER", "value": peer},
        ]
        docs += [headless(me, {"side": me}), pod]
    return yaml.safe_dump_all(docs, sort_keys=False)


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
def test_two_jobs_that_talk_both_ways_both_succeed(home: Path, as_root: bool) -> None:
    """Each Job's pod serves, then sends its name to the other's and waits to hear the other's: run one after the other
    the first would wait for ever; at once, both succeed, and the trace shows them side by side. Where one names a
    peer that does not exist, both fail, each for its own reason."""
    trace = home / "trace.json"
    args = ("--run-command", "--timeout", "40")
    rc, out, report = simulate_as(home, exchange("left", "right"), *args, "--trace", str(trace), as_root=as_root)
    assert rc == 0, out
    assert verdicts(report) == {"left": "succeeded", "right": "succeeded"}, out
    # the trace: each Job's attempt a process (track) of its own, their pods' phases overlapping in time
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert sorted(names.values()) == ["Job/default/left attempt 0", "Job/default/right attempt 0"], names
    spans = {
        pid: (min(e["ts"] for e in mine), max(e["ts"] + e["dur"] for e in mine))
        for pid in names
        for mine in [[e for e in events if e["pid"] == pid and e["ph"] == "X"]]
    }
    (a_start, a_end), (b_start, b_end) = spans.values()
    assert a_start < b_end and b_start < a_end, spans
    rc, out, report = simulate_as(home, exchange("left", "right", a_calls="nowhere"), *args, as_root=as_root)
    assert rc == 1, out
    assert verdicts(report) == {"left": "failed", "right": "failed"}, out
    said = {w["name"]: w["attempts"][0]["pods"][0]["stderr_tail"][-1] for w in report["workloads"]}
    assert said == {"left": "left: never reached nowhere", "right": "right: never heard from left"}, said


def queued_jobs(cpu: str) -> str:
    """Two Jobs queued to one ClusterQueue whose nominal quota is `cpu` CPUs, each asking for 1 for 2 seconds."""
    docs = list(yaml.safe_load_all(kueue_queue(cpu=cpu)))
    for name in ("first", "second"):
        queued = job(name, "import time; time.sleep(2)")
        queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "user-queue"}
        queued["spec"]["suspend"] = True
        queued["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
        docs.append(queued)
    return yaml.safe_dump_all(docs, sort_keys=False)


@pytest.mark.parametrize("cpu", ["1", "2"])
def test_kueue_runs_the_second_job_once_the_first_gives_its_quota_back(tmp_path: Path, cpu: str) -> None:
    """With quota for one Job at a time the second waits, suspended, until the first has ended, and the report says
    what it waited for; with quota for both they run at once."""
    manifest = tmp_path / "queued.yaml"
    manifest.write_text(queued_jobs(cpu))
    rc, report, out = simulate_cli(str(manifest), "--run-command", "--timeout", "40", tmp=tmp_path)
    assert rc == 0, out
    first, second = report["workloads"]
    assert first["waited"] is None
    start, end = first["attempts"][0]["began"], first["attempts"][0]["began"] + first["attempts"][0]["seconds"]
    if cpu == "1":
        assert second["waited"]["for"].startswith("quota in ClusterQueue cluster-queue: cpu 1 of flavor"), second
        assert second["attempts"][0]["began"] >= end, (first, second)
        assert "waited" in out and "quota in ClusterQueue cluster-queue" in out, out
    else:
        assert second["waited"] is None
        assert second["attempts"][0]["began"] < end and start < second["attempts"][0]["began"] + 2, (first, second)


@pytest.mark.parametrize("ready", ["0", "never"])
def test_a_workload_whose_provisioning_never_comes_keeps_the_quota_kueue_reserved(tmp_path: Path, ready: str) -> None:
    """Both Jobs wait for a ProvisioningRequest check (GKE's DWS) of their ClusterQueue, with quota for one at a time.
    Ready at once, they run in turn. Never Ready, the first keeps the quota Kueue reserved for it, so the second
    waits for quota until --timeout: neither runs, neither has failed."""
    from tests.sim.kueue.test_checks import _checked

    manifest = tmp_path / "dws.yaml"
    manifest.write_text(yaml.safe_dump_all(_checked(list(yaml.safe_load_all(queued_jobs("1"))), with_checks=True)))
    args = ("--run-command", "--provision", f"dws-prov@{ready}", "--timeout", "6")
    rc, report, out = simulate_cli(str(manifest), *args, tmp=tmp_path)
    first, second = report["workloads"]
    if ready == "0":
        assert rc == 0 and second["waited"]["for"].startswith("quota in ClusterQueue cluster-queue"), out
        return
    assert rc == 1 and (first["verdict"], second["verdict"]) == ("not finished", "not finished"), out
    assert first["attempts"] == [] and second["attempts"] == [], out
    assert second["reason"].startswith("--timeout reached while it waited for quota in ClusterQueue cluster-queue")


def test_an_interrupt_stops_every_running_workload(tmp_path: Path) -> None:
    """Ctrl-C while two Jobs run: both are stopped, their pods reaped (simulate_cli checks no pod process is left)."""
    import signal
    import subprocess
    import sys
    import time

    manifest = tmp_path / "sleepers.yaml"
    manifest.write_text(
        yaml.safe_dump_all(
            [job("one", "import time; time.sleep(60)"), job("two", "import time; time.sleep(60)")], sort_keys=False
        )
    )
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    report = tmp_path / "report.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "jaxinfra", "simulate", str(manifest), "--run-command", "--json", str(report)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    time.sleep(6)  # both pods started
    children = _descendants(proc.pid)
    assert len(children) >= 2
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "Traceback" not in out, out
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid), (pid, out)
    assert list(scratch.iterdir()) == [], "the pods' files were left behind"


def _descendants(pid: int) -> list[int]:
    """Every process under `pid` now."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# --- this machine: what runs together must fit together -------------------------------------------------------------


@pytest.fixture
def machine() -> Iterator[Any]:
    """A memory cgroup of 3 GiB standing for this machine."""
    with memory_machine("test-concurrent-machine", 3 << 30) as group:
        yield group


def sleepers(pods: int, seconds: float) -> str:
    """Two Indexed Jobs of `pods` pods each, every pod sleeping `seconds`."""
    docs = []
    for name in ("one", "two"):
        docs.append(job(name, f"import time; time.sleep({seconds})"))
        docs[-1]["spec"]["completions"] = docs[-1]["spec"]["parallelism"] = pods
    return yaml.safe_dump_all(docs, sort_keys=False)


def test_workloads_that_fit_alone_but_not_together_take_turns(machine: Any, tmp_path: Path) -> None:
    """Two Jobs of 5 `--run-command` pods each (320 MiB apiece by the estimate: 1.6 GiB a Job) on a machine of 3 GiB:
    each fits alone, not both at once (3.1 GiB), so the second waits for room, as
    pods wait on a full node, and runs once the first has ended; neither fails."""
    manifest = tmp_path / "sleepers.yaml"
    manifest.write_text(sleepers(5, 2))
    rc, report, out = simulate_cli(
        str(manifest), "--run-command", "--timeout", "60", tmp=tmp_path, preexec=machine.enter
    )
    assert rc == 0, out
    first, second = report["workloads"]
    assert (first["verdict"], second["verdict"]) == ("succeeded", "succeeded"), out
    assert first["waited"] is None and second["waited"]["for"].startswith("room on this machine"), second
    end = first["attempts"][0]["began"] + first["attempts"][0]["seconds"]
    assert second["attempts"][0]["began"] >= end, (first, second)


HUNGRY = 'chunks = []\nwhile True: chunks.append(bytearray(b"\\x01") * (64 << 20))'


def test_the_machines_verdict_on_one_workload_stops_the_others(tmp_path: Path) -> None:
    """One Job takes this machine's memory (a 1.5 GiB cgroup) while another sleeps: the machine's verdict (exit 3)
    ends the simulation, and the sleeper is stopped at once, saying why; no pod process is left (simulate_cli)."""
    manifest = tmp_path / "hungry.yaml"
    manifest.write_text(
        yaml.safe_dump_all([job("hungry", HUNGRY), job("sleeper", "import time; time.sleep(60)")], sort_keys=False)
    )
    with memory_machine("test-concurrent-oom", 1536 << 20) as group:
        rc, report, out = simulate_cli(str(manifest), "--run-command", tmp=tmp_path, timeout=120, preexec=group.enter)
    assert rc == 3, out
    hungry, sleeper = report["workloads"]
    assert hungry["verdict"] == "failed" and report["machine"] == hungry["reason"], hungry
    assert sleeper["attempts"][0]["seconds"] < 30, sleeper  # stopped, not left to sleep out its 60 s
    if "OOM killer" in (sleeper["attempts"][0]["pods"][0]["reason"] or ""):
        # The kernel may end it too, a second BestEffort pod (`qos`), before the first one's memory is freed; never
        # the simulator, whose score is lower (before pods had their QoS score, it once was: exit -9, no report).
        assert sleeper["verdict"] in ("failed", "not finished"), sleeper
        return
    assert sleeper["verdict"] == "not finished", sleeper
    assert sleeper["reason"] == "stopped when the machine's verdict on Job/default/hungry ended the simulation"


def test_two_clusters_workloads_of_one_name_run_side_by_side(tmp_path: Path) -> None:
    """Each stack is a cluster of its own, and two stacks may both hold JobSet/default/train (their pods named alike):
    side by side, each keeps its own folders, hosts files and sockets, and both pass (they once shared one folder and
    their coordinators never answered)."""
    from tests.support.paths import ROOT

    stacks = [str(ROOT / "stacks" / "gpu_h100_2x8.py"), str(ROOT / "stacks" / "tpu_v5e_2x4.py")]
    rc, report, out = simulate_cli(*stacks, "--timeout", "120", tmp=tmp_path)
    assert rc == 0, out
    assert [(w["id"], w["verdict"]) for w in report["workloads"]] == [("JobSet/default/train", "succeeded")] * 2, out
