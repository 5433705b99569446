"""The cluster DNS while workloads run side by side (`dns.LiveRecords`, `model.EmulatedCluster.records_of`): a Service's
names resolve to the pods alive now, and a pod's hosts file, written before its server's pod existed, is rewritten in
place (the same file, which its container sees through its bind mount) once it does; an ended attempt's files are left
alone. A headless Service and two Indexed Jobs in the style of the Kubernetes docs' "Job with Pod-to-Pod
Communication", written here."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.network import dns

pytestmark = pytest.mark.unit

CLUSTER = """\
apiVersion: v1
kind: Service
metadata: {name: srv}
spec: {clusterIP: None, selector: {app: server}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: server}
spec:
  completionMode: Indexed
  completions: 1
  template:
    metadata: {labels: {app: server}}
    spec:
      subdomain: srv
      restartPolicy: Never
      containers: [{name: main, image: python:3.11-slim, command: [python3, -c, pass]}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: client}
spec:
  completionMode: Indexed
  completions: 1
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: python:3.11-slim, command: [python3, -c, pass]}]
"""


def test_a_clients_hosts_file_gains_its_servers_name_once_the_server_runs(tmp_path: Path) -> None:
    cluster = emulate(list(yaml.safe_load_all(CLUSTER)), check_all=False)
    server, client = (w.pods[0] for w in cluster.workloads)
    assert cluster.records_of is not None
    records = dns.LiveRecords()
    records.update(cluster.records_of([client]))  # the client's pod alone is alive: srv selects nobody
    assert dict(records) == {}
    hosts = tmp_path / "hosts"
    hosts.write_text(dns.hosts_file(client, records))
    records.track(client, hosts)
    inode = hosts.stat().st_ino
    assert "server-0.srv" not in hosts.read_text()
    records.update(cluster.records_of([client, server]))  # the server's attempt begins
    text = hosts.read_text()
    assert f"{server.ip}\tserver-0.srv.default.svc.cluster.local\n" in text and f"{server.ip}\tsrv\n" in text
    assert hosts.stat().st_ino == inode and text == dns.hosts_file(client, records)  # in place, whole
    records.update(cluster.records_of([client]))  # the server's attempt ended: its names are gone
    assert "server-0.srv" not in hosts.read_text() and hosts.read_text() == dns.hosts_file(client, {})


def test_an_ended_attempts_hosts_files_are_left_alone(tmp_path: Path) -> None:
    cluster = emulate(list(yaml.safe_load_all(CLUSTER)), check_all=False)
    server, client = (w.pods[0] for w in cluster.workloads)
    assert cluster.records_of is not None
    records = dns.LiveRecords()
    ended = tmp_path / "client.0" / "pod-0" / "hosts"
    ended.parent.mkdir(parents=True)
    ended.write_text("as it was\n")
    records.track(client, ended)
    records.forget(tmp_path / "client.0")
    records.update(cluster.records_of([client, server]))
    assert ended.read_text() == "as it was\n"
