"""What every pod gets from the kubelet and the API server, in the simulator as on a cluster: the
`kubernetes` Service's env and HOSTNAME, the ServiceAccount token volume exactly when Kubernetes
mounts it, ServiceAccount admission, and an API server that JAX's own Kubernetes detection reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxinfra import CPU, Cluster, JaxJob, NodePool, manifests
from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.core.inputs import load_files
from tests.support.cli import simulate_cli
from tests.support.paths import MANIFESTS, ROOT
from tests.support.problems import problems_of
from tests.support.stacks import rendered

pytestmark = pytest.mark.simulator

INDEXED = MANIFESTS / "k8s_detection_indexed_job.yaml"
JOBSET = MANIFESTS / "k8s_detection_jobset.yaml"


def simulate(*args: str, tmp: Path, timeout: float = 120) -> tuple[int, dict[str, Any], str]:
    return simulate_cli(*args, tmp=tmp, timeout=timeout)


def write(tmp: Path, name: str, docs: list[dict]) -> str:
    path = tmp / name
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def without(path: Path, kind: str) -> list[dict]:
    return [d for d in load_files([path]) if d["kind"] != kind]


# --- JAX's own Kubernetes detection, end to end ---------------------------------------------------


@pytest.mark.parametrize("path", [INDEXED, JOBSET], ids=["indexed-job", "jobset"])
def test_a_bare_initialize_finds_its_group_through_the_api_server(path: Path, tmp_path: Path) -> None:
    rc, report, out = simulate(str(path), "--run-command", tmp=tmp_path)
    assert rc == 0, out
    [w] = report["workloads"]
    pod_ips = [p["ip"] for p in w["attempts"][0]["pods"]]
    served = [line for line in report["api_server"] if line.startswith("200 GET")]
    # each pod found itself by its IP, then its Job, as JAX's K8sCluster does
    assert {ip for ip in pod_ips if any(f"status.podIP%3D{ip}" in line for line in served)} == set(pod_ips)
    assert any("/apis/batch/v1/namespaces/default/jobs/" in line for line in served)


def test_without_the_role_binding_jax_reports_the_403(tmp_path: Path) -> None:
    rc, report, _ = simulate(
        write(tmp_path, "nobinding.yaml", without(INDEXED, "RoleBinding")), "--run-command", tmp=tmp_path
    )
    assert rc == 1
    [w] = report["workloads"]
    said = [line for p in w["attempts"][0]["pods"] for line in p["stderr_tail"]]
    assert any("Kubernetes API Error: 403 - Forbidden" in line for line in said), said  # JAX's own message
    assert any(
        line.startswith("403 GET /api/v1/namespaces/default/pods")
        and 'pods is forbidden: User "system:serviceaccount:default:jax-reader" cannot list resource "pods"' in line
        for line in report["api_server"]
    )


def test_a_service_account_no_input_defines_is_refused_at_admission(tmp_path: Path) -> None:
    rc, report, out = simulate(
        write(tmp_path, "nosa.yaml", without(INDEXED, "ServiceAccount")), "--run-command", tmp=tmp_path
    )
    assert rc == 1
    [w] = report["workloads"]
    assert w["attempts"] == [] and w["reason"] == "1 problems; not started"
    [problem] = w["problems"]
    assert (
        'serviceaccount "jax-reader" not found' in problem["message"]
        and "add a ServiceAccount 'jax-reader'" in problem["fix"]
    )
    assert report["api_server"] == []  # nothing ran, no server was started


# --- what the kubelet gives every container -------------------------------------------------------


def sandbox_check(automount: bool | None) -> list[dict]:
    docs = load_files([INDEXED])
    job = docs[-1]
    spec = job["spec"]["template"]["spec"]
    if automount is not None:
        spec["automountServiceAccountToken"] = automount
    sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount"
    expect = (
        'test -s $D/token && test -s $D/ca.crt && test "$(cat $D/namespace)" = default && ! touch $D/x 2>/dev/null'
        if automount is not False
        else "test ! -e $D"
    )
    spec["containers"][0].update(
        command=["sh", "-c"],
        args=[
            f'D={sa_dir}; {expect} && test "$HOSTNAME" = "$(hostname)" && test "$HOSTNAME" = '
            "autodetect-$JOB_COMPLETION_INDEX "
            '&& test -n "$KUBERNETES_SERVICE_HOST" && test "$KUBERNETES_SERVICE_PORT" = '
            '"$KUBERNETES_SERVICE_PORT_HTTPS"'
        ],
    )
    return docs


@pytest.mark.parametrize("automount", [None, False], ids=["default-mounts-the-token", "automount-false"])
def test_token_volume_hostname_and_service_env(automount: bool | None, tmp_path: Path) -> None:
    rc, _, out = simulate(write(tmp_path, "check.yaml", sandbox_check(automount)), "--run-command", tmp=tmp_path)
    assert rc == 0, out


def test_the_service_account_decides_when_the_pod_does_not() -> None:
    docs = load_files([INDEXED])
    docs[0]["automountServiceAccountToken"] = False  # on the ServiceAccount
    assert not any(p.token for p in emulate(docs).workloads[0].pods)
    docs[-1]["spec"]["template"]["spec"]["automountServiceAccountToken"] = True  # the pod's setting wins
    assert all(p.token for p in emulate(docs).workloads[0].pods)


# --- an image with the client, and jaxinfra's own jobs --------------------------------------------

EXPLICIT = """
import os, jax
jax.distributed.initialize("explicit-0.w:4000", num_processes=2, process_id=int(os.environ["JOB_COMPLETION_INDEX"]),
                           initialization_timeout=30)
jax.distributed.shutdown()
"""


def explicit_job() -> list[dict]:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "w"},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {"job-name": "explicit"}},
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "explicit"},
        "spec": {
            "completionMode": "Indexed",
            "completions": 2,
            "parallelism": 2,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "subdomain": "w",
                    "automountServiceAccountToken": False,
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "i", "command": ["python", "-c", EXPLICIT]}],
                }
            },
        },
    }
    return [service, job]


def test_explicit_arguments_without_a_token_crash_where_the_client_is_installed(tmp_path: Path) -> None:
    """JAX still runs cluster detection (local_device_ids is unset), and its Kubernetes detector needs the token."""
    path = write(tmp_path, "explicit.yaml", explicit_job())
    rc, report, _ = simulate(path, "--run-command", tmp=tmp_path)
    assert rc == 1
    said = [p["stderr_tail"][-1] for p in report["workloads"][0]["attempts"][0]["pods"] if p["stderr_tail"]]
    assert said and all(line.endswith("ConfigException: Service token file does not exist.") for line in said)
    rc, _, out = simulate(path, "--run-command", "--no-k8s-client", tmp=tmp_path)  # an image with plain jax
    assert rc == 0, out


@pytest.mark.parametrize("backend", ["jobset", "job"])
def test_kubernetes_api_jobs_initialize_through_jax_detection(backend: str, tmp_path: Path) -> None:
    """jaxinfra's kubernetes_api=True: its Role and token let a bare initialize() read the API."""
    script = (
        "import jax; jax.distributed.initialize(initialization_timeout=60); "
        "assert jax.process_count() == 2; jax.distributed.shutdown()"
    )
    cluster = Cluster(
        name="k",
        node_pools=[NodePool("cpu", CPU())],
        jobs=[
            JaxJob(
                "train",
                image="local/jax-k8s:latest",
                command=["python", "-c", script],
                node_pool="cpu",
                nodes=2,
                backend=backend,
                kubernetes_api=True,
                init_timeout_seconds=60,
            )
        ],
    )
    docs = manifests(cluster)
    assert problems_of(emulate(docs, check_all=False)) == []
    rc, report, out = simulate(write(tmp_path, "k.yaml", docs), "--run-command", tmp=tmp_path)
    assert rc == 0, out
    assert any("RoleBinding" in line and line.startswith("200 GET") for line in report["api_server"])


@pytest.mark.parametrize("client", ["--k8s-client", "--no-k8s-client"])
def test_jaxinfras_own_stack_passes_with_or_without_the_client(client: str, tmp_path: Path) -> None:
    assert not any(
        p.token for w in emulate(rendered(ROOT / "stacks" / "cpu_dev.py", "jobset")).workloads for p in w.pods
    )
    rc, report, out = simulate("stacks/cpu_dev.py", client, tmp=tmp_path)
    assert rc == 0, out
    assert report["api_server"] == []  # no pod mounts a token: no API server was started
