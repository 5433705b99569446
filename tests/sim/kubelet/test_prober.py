"""The kubelet's probes (prober.py, kubernetes @ 00421113 pkg/kubelet/prober/worker.go): liveness kills and restarts
as the pod's restartPolicy says, readiness decides the pod's Ready condition (which JobSet's dependsOn waits for), a
startup probe holds the others back and a sidecar's holds the next container. Manifests in the style of the Kubernetes
docs' "Configure Liveness, Readiness and Startup Probes" (busybox shell lines; exec `cat /tmp/healthy`, httpGet,
tcpSocket), run with --run-command, periods of 1 s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import jobsets

pytestmark = pytest.mark.simulator


def probe(kind: str, handler: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {f"{kind}Probe": {**handler, "periodSeconds": 1, **more}}


CAT_HEALTHY = {"exec": {"command": ["cat", "/tmp/healthy"]}, "initialDelaySeconds": 1}
"""The docs' liveness command, after a delay (the docs' is 5 s) that lets the container create the file first."""


def job(script: str, *, pods: int = 1, restart: str = "Never", **container: Any) -> dict[str, Any]:
    """An Indexed Job whose one container runs `sh -c SCRIPT` (an emptyDir at /state outlives its restarts in place),
    failing at its first failed pod (backoffLimit 0) unless its container restarts in place."""
    pod = {
        "restartPolicy": restart,
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": "app",
                "image": "busybox:1.36",
                "command": ["sh", "-c", script],
                "volumeMounts": [{"name": "state", "mountPath": "/state"}],
                **container,
            }
        ],
        "volumes": [{"name": "state", "emptyDir": {}}],
    }
    return jobsets.indexed_job("app", pod, pods, backoffLimit=0 if restart == "Never" else 2)


# --- liveness -------------------------------------------------------------------------------------------------------


def test_a_container_that_stays_healthy_passes_its_liveness_probe_and_completes(tmp_path: Path) -> None:
    live = probe("liveness", CAT_HEALTHY, failureThreshold=1)
    workload = jobsets.only_workload(tmp_path, job("touch /tmp/healthy; sleep 3.5", **live))
    assert workload["verdict"] == "succeeded"
    [pod] = workload["attempts"][0]["pods"]
    status = pod["probes"]["liveness"]
    assert (status["result"], status["failures"]) == ("success", 0) and status["probes"] >= 2


def test_a_failed_liveness_probe_kills_the_container_and_fails_the_job(tmp_path: Path) -> None:
    """The docs' example: healthy at first, then /tmp/healthy is removed; after failureThreshold failures in a row
    the kubelet stops the container (sh as PID 1 ignores SIGTERM: SIGKILL after the grace period) and, under
    restartPolicy Never, the pod fails: backoffLimit 0 fails the Job."""
    live = probe("liveness", CAT_HEALTHY, failureThreshold=2)
    workload = jobsets.only_workload(tmp_path, job("touch /tmp/healthy; sleep 1.5; rm /tmp/healthy; sleep 30", **live))
    assert workload["verdict"] == "failed"
    [pod] = workload["attempts"][0]["pods"]
    assert pod["signal"] == "SIGKILL"
    assert pod["reason"] == (
        "its liveness probe failed 2 time(s) in a row (exec ['cat', '/tmp/healthy']: cat: /tmp/healthy: No such file "
        "or directory), so the kubelet stopped it: killed by SIGKILL"
    )
    assert "BackoffLimitExceeded" in workload["reason"]
    assert 2 <= pod["timings"]["failed"] - pod["timings"]["started"] < 6


def test_under_on_failure_a_container_its_liveness_probe_stopped_restarts_and_recovers(tmp_path: Path) -> None:
    """restartPolicy OnFailure: the kubelet restarts the container in place (within backoffLimit). Its second run
    finds the emptyDir's mark and stays healthy, so the Job completes after one restart, as on a cluster."""
    live = probe("liveness", CAT_HEALTHY, failureThreshold=1)
    script = "touch /tmp/healthy; if [ ! -e /state/ran ]; then touch /state/ran; rm /tmp/healthy; sleep 30; fi; sleep 2"
    workload = jobsets.only_workload(tmp_path, job(script, restart="OnFailure", **live))
    assert (workload["verdict"], workload["restarts"]) == ("succeeded", 1)
    first = workload["attempts"][0]["pods"][0]
    assert first["reason"].startswith("its liveness probe failed 1 time(s) in a row")


def test_an_exec_probe_runs_inside_the_container_not_on_the_machine(tmp_path: Path) -> None:
    """The probe's command writes into the container's own /tmp, which the container then reads; the machine's /tmp
    never gets the file. Hostile input: a probe's command is the container's, confined as it is."""
    canary = Path("/tmp/jaxinfra-probe-canary")
    canary.unlink(missing_ok=True)
    live = probe("liveness", {"exec": {"command": ["sh", "-c", f"echo probed > {canary}"]}})
    workload = jobsets.only_workload(tmp_path, job(f"until [ -e {canary} ]; do sleep 0.1; done", **live))
    assert workload["verdict"] == "succeeded"
    assert not canary.exists()


# --- readiness and startup ------------------------------------------------------------------------------------------


SERVE = "mkdir -p /tmp/www; cd /tmp/www; python3 -m http.server 8080 --bind 0.0.0.0"


def server_jobset(ready_after: str, *, client_gate: str = "Ready") -> dict[str, Any]:
    """A JobSet whose `server` serves /tmp/www on port 8080, /ready appearing after `ready_after` (a shell line), with
    an httpGet readinessProbe on it; its `client`, which dependsOn the server being Ready, fetches /ready."""
    server = jobsets.rjob("server", f"({ready_after}; touch /tmp/www/ready) & {SERVE}")
    container = server["template"]["spec"]["template"]["spec"]["containers"][0]
    container["ports"] = [{"name": "http", "containerPort": 8080}]
    container.update(probe("readiness", {"httpGet": {"path": "/ready", "port": "http"}}))
    fetch = "python3 -c \"import urllib.request; urllib.request.urlopen('http://probes-server-0-0.probes:8080/ready')\""
    client = jobsets.rjob("client", fetch, dependsOn=[{"name": "server", "status": client_gate}])
    client["dependsOn"] = client["template"]["spec"].pop("dependsOn")
    return jobsets.jobset(
        "probes",
        server,
        client,
        successPolicy={"operator": "All", "targetReplicatedJobs": ["client"]},
    )


def test_depends_on_ready_waits_for_the_servers_readiness_probe(tmp_path: Path) -> None:
    workload = jobsets.only_workload(tmp_path, server_jobset("sleep 1.5"), timeout="30")
    assert workload["verdict"] == "succeeded"
    server, client = workload["attempts"][0]["pods"]
    assert server["ready"] is not None and server["ready"] >= 1.5
    assert server["probes"]["readiness"]["result"] == "success"
    assert client["timings"]["started"] >= server["ready"]  # created only once the server was Ready
    assert client["exit_code"] == 0


def test_a_server_whose_readiness_probe_never_passes_holds_its_dependents_back(tmp_path: Path) -> None:
    """Never Ready: the client is never created, and the run is not finished at the timeout (on a cluster it would
    wait on)."""
    workload = jobsets.only_workload(tmp_path, server_jobset("sleep 3600"), timeout="4")
    assert workload["verdict"] == "not finished"
    server, client = workload["attempts"][0]["pods"]
    assert server["ready"] is None and server["probes"]["readiness"]["result"] == "failure"
    assert server["probes"]["readiness"]["last_failure"].startswith("HTTP probe failed with statuscode: 404")
    assert client["pid"] is None and client["reason"].startswith("never created")


ACCEPT = "import socket; s = socket.create_server(('0.0.0.0', 9000))\nwhile True: s.accept()[0].close()"
LISTEN_LATE = f'sleep 2; exec python3 -c "{ACCEPT}"'


def listener(startup: dict[str, Any]) -> dict[str, Any]:
    """A container that listens on port 9000 after 2 s, for `startup`'s failureThreshold, then exits once its
    liveness probe has passed a few times (a file the probe's command leaves behind)."""
    tcp = {"tcpSocket": {"port": 9000}}
    return {
        **probe("startup", tcp, **startup),
        **probe("liveness", {"exec": {"command": ["sh", "-c", "echo >> /tmp/alive"]}}, failureThreshold=1),
    }


def test_a_startup_probe_that_passes_in_time_lets_the_liveness_probe_take_over(tmp_path: Path) -> None:
    script = f'({LISTEN_LATE}) & until [ "$(wc -l < /tmp/alive 2>/dev/null)" -ge 2 ]; do sleep 0.2; done'
    workload = jobsets.only_workload(tmp_path, job(script, **listener({"failureThreshold": 5})), timeout="30")
    assert workload["verdict"] == "succeeded"
    [pod] = workload["attempts"][0]["pods"]
    startup, liveness = pod["probes"]["startup"], pod["probes"]["liveness"]
    assert startup["result"] == "success" and startup["failures"] >= 1  # refused while it did not listen yet
    assert startup["last_failure"].startswith("dial tcp 10.244.") and "connection refused" in startup["last_failure"]
    assert liveness["failures"] == 0 and liveness["probes"] >= 2


def test_a_startup_probe_that_fails_first_kills_the_container_before_liveness_ever_runs(tmp_path: Path) -> None:
    script = f"({LISTEN_LATE}) & sleep 30"
    workload = jobsets.only_workload(tmp_path, job(script, **listener({"failureThreshold": 1})), timeout="30")
    assert workload["verdict"] == "failed"
    [pod] = workload["attempts"][0]["pods"]
    assert pod["reason"].startswith("its startup probe failed 1 time(s) in a row (tcp-socket [pod IP]:9000: dial tcp")
    assert "probes" not in pod["probes"]["liveness"]  # never probed: the container never started


GREET = "import socket; s = socket.create_server(('0.0.0.0', 9000))\nwhile True: s.accept()[0].sendall(b'hello')"
HELLO = "import socket; assert socket.create_connection(('127.0.0.1', 9000)).recv(5) == b'hello'"


def test_a_sidecars_startup_probe_holds_the_main_container_until_it_passes(tmp_path: Path) -> None:
    """A native sidecar that listens only after 1 s, with a startupProbe on its port: the kubelet starts the main
    container only once that probe passes, so the main container's first connection succeeds."""
    sidecar = {
        "name": "proxy",
        "image": "busybox:1.36",
        "restartPolicy": "Always",
        "command": ["sh", "-c", f'sleep 1; exec python3 -c "{GREET}"'],
        **probe("startup", {"tcpSocket": {"port": 9000}}, failureThreshold=10),
    }
    manifest = job(f'python3 -c "{HELLO}"')
    manifest["spec"]["template"]["spec"]["initContainers"] = [sidecar]
    workload = jobsets.only_workload(tmp_path, manifest, timeout="30")
    assert workload["verdict"] == "succeeded"
    [pod] = workload["attempts"][0]["pods"]
    [proxy] = pod["containers"]
    assert proxy["probes"]["startup"]["result"] == "success"
    assert pod["timings"]["started"] >= proxy["started"] + 1
