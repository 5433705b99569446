"""Pods reaching each other by name, as the Kubernetes docs' "Job with Pod-to-Pod Communication" does: a headless
Service that selects the Job's pods and is their subdomain makes `<job>-<index>.<service>` resolvable, and each pod
pings its peers. `ping` runs as the image's user without CAP_NET_RAW because containerd opens ICMP echo sockets to
every group of a pod's network namespace (`netns.py`). The unprivileged run is in test_nonroot.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.cli import simulate_cli
from tests.support.paths import MANIFESTS

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
