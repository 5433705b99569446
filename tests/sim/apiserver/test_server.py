"""The simulated Kubernetes API server (simulate/apiserver.py), through the real `kubernetes`
client and JAX's own K8sCluster code: authentication, RBAC with the API server's messages,
selectors, watch, discovery, refused writes, and a shutdown that leaves nothing behind."""

from __future__ import annotations

import json
import os
import select
import socket
import ssl
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, watch

from jaxinfra_sim.apiserver.objects import derived_endpoints
from jaxinfra_sim.apiserver.rbac import Subject
from jaxinfra_sim.apiserver.server import ApiServer, parse_request

pytestmark = pytest.mark.simulator

NS = "train"
RBAC = "rbac.authorization.k8s.io/v1"
TOKENS = {
    "reader-token": Subject(NS, "jax"),
    "stranger-token": Subject(NS, "nobody"),
    "other-token": Subject("other", "jax"),
}


def pod(i: int, ns: str = NS, ready: bool = True) -> dict:
    """A pod of Indexed Job `j` as the Job controller and kubelet make it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"j-{i}-x{i}",
            "namespace": ns,
            "uid": f"uid-pod-{i}",
            "labels": {
                "job-name": "j",
                "batch.kubernetes.io/job-name": "j",
                "batch.kubernetes.io/job-completion-index": str(i),
            },
            "annotations": {"batch.kubernetes.io/job-completion-index": str(i)},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "j",
                    "uid": "uid-job",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "hostname": f"j-{i}",
            "subdomain": "workers",
            "serviceAccountName": "jax",
            "restartPolicy": "Never",
            "nodeName": "node-0",
            "containers": [
                {"name": "jax", "image": "python:3.11", "ports": [{"name": "coord", "containerPort": 55527}]}
            ],
        },
        "status": {
            "phase": "Running",
            "podIP": f"127.0.0.{10 + i}",
            "podIPs": [{"ip": f"127.0.0.{10 + i}"}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


# The API server gives a Job's template (and so the Job, whose labels default to them) these labels
# (pkg/registry/batch/job/strategy.go); JAX reads job.metadata.labels.
JOB_LABELS = {
    "batch.kubernetes.io/controller-uid": "uid-job",
    "batch.kubernetes.io/job-name": "j",
    "controller-uid": "uid-job",
    "job-name": "j",
}
JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "j", "namespace": NS, "uid": "uid-job", "labels": JOB_LABELS},
    "spec": {
        "parallelism": 2,
        "completions": 2,
        "completionMode": "Indexed",
        "backoffLimit": 0,
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "uid-job"}},
        "template": {
            "metadata": {"labels": JOB_LABELS},
            "spec": {
                "subdomain": "workers",
                "restartPolicy": "Never",
                "containers": [{"name": "jax", "image": "python:3.11"}],
            },
        },
    },
}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "workers", "namespace": NS},
    "spec": {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": {"job-name": "j"},
        "ports": [{"name": "coord", "port": 55527, "targetPort": "coord"}],
    },
}
ROLE = {
    "apiVersion": RBAC,
    "kind": "Role",
    "metadata": {"name": "jax-k8s", "namespace": NS},
    "rules": [
        {"apiGroups": [""], "resources": ["pods", "services", "endpoints"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"], "resourceNames": ["j-1-x1"]},
    ],
}
BINDING = {
    "apiVersion": RBAC,
    "kind": "RoleBinding",
    "metadata": {"name": "jax-k8s", "namespace": NS},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "jax-k8s"},
    "subjects": [{"kind": "ServiceAccount", "name": "jax", "namespace": NS}],
}
DANGLING = {
    "apiVersion": RBAC,
    "kind": "RoleBinding",
    "metadata": {"name": "typo", "namespace": NS},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "jax-k8ss"},
    "subjects": [{"kind": "ServiceAccount", "name": "nobody"}],
}
OBJECTS = [
    JOB,
    pod(0),
    pod(1),
    pod(0, ns="other"),
    SERVICE,
    ROLE,
    BINDING,
    DANGLING,
    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "jax", "namespace": NS}},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    folder = tmp_path_factory.mktemp("apiserver")
    with ApiServer("127.0.0.1", TOKENS, folder / "apiserver.log") as api:
        api.start(OBJECTS)
        (folder / "ca.crt").write_bytes(api.ca_pem)
        yield api


def kube(server: ApiServer, token: str = "reader-token") -> client.ApiClient:
    """The real kubernetes client, configured as load_incluster_config() would configure it."""
    ca = server.log.parent / "ca.crt"
    config = client.Configuration(host=f"https://127.0.0.1:{server.port}", api_key={"authorization": f"Bearer {token}"})
    config.ssl_ca_cert = str(ca)
    return client.ApiClient(config)


def raw(server: ApiServer, path: str, token: str | None = "reader-token", method: str = "GET") -> tuple[int, dict]:
    context = ssl.create_default_context(cadata=server.ca_pem.decode())
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(
        f"https://127.0.0.1:{server.port}{path}",
        headers=headers,
        method=method,
        data=b"{}" if method in ("POST", "PUT", "PATCH") else None,
    )
    try:
        with urllib.request.urlopen(request, context=context) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def api_error(call, *args, **kwargs) -> tuple[int, dict]:
    with pytest.raises(client.ApiException) as caught:
        call(*args, **kwargs)
    return caught.value.status, json.loads(caught.value.body)


# ---- authentication and authorization ---------------------------------------------------------

UNAUTHORIZED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Unauthorized",
    "reason": "Unauthorized",
    "code": 401,
}


@pytest.mark.parametrize("token", [None, "forged-token"])
def test_no_or_unknown_token_is_401(server: ApiServer, token: str | None) -> None:
    assert raw(server, f"/api/v1/namespaces/{NS}/pods", token=token) == (401, UNAUTHORIZED)
    assert raw(server, "/version", token=token) == (401, UNAUTHORIZED)


def test_403_carries_the_api_servers_message(server: ApiServer) -> None:
    core = client.CoreV1Api(kube(server))
    assert api_error(core.list_namespaced_secret, NS)[1] == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'secrets is forbidden: User "system:serviceaccount:train:jax" cannot list resource "secrets" '
        'in API group "" in the namespace "train"',
        "reason": "Forbidden",
        "details": {"kind": "secrets"},
        "code": 403,
    }
    status, body = api_error(core.list_pod_for_all_namespaces)
    assert (status, body["message"]) == (
        403,
        'pods is forbidden: User "system:serviceaccount:train:jax" cannot list '
        'resource "pods" in API group "" at the cluster scope',
    )
    status, body = api_error(client.BatchV1Api(kube(server, "other-token")).read_namespaced_job, "j", NS)
    assert (status, body["message"], body["details"]) == (
        403,
        'jobs.batch "j" is forbidden: User "system:serviceaccount:other:jax" cannot get resource "jobs" in API group '
        '"batch" in the namespace "train"',
        {"name": "j", "group": "batch", "kind": "jobs"},
    )
    # A binding whose Role does not exist: the authorizer's resolution error is the reason.
    status, body = api_error(client.CoreV1Api(kube(server, "stranger-token")).read_namespaced_pod_log, "j-0-x0", NS)
    assert (status, body["message"]) == (
        403,
        'pods "j-0-x0" is forbidden: User "system:serviceaccount:train:nobody" cannot '
        'get resource "pods/log" in API group "" in the namespace "train": '
        'RBAC: role.rbac.authorization.k8s.io "jax-k8ss" not found',
    )
    assert (
        raw(server, "/metrics")[1]["message"]
        == 'forbidden: User "system:serviceaccount:train:jax" cannot get path "/metrics"'
    )


def test_404_is_the_not_found_status(server: ApiServer) -> None:
    assert api_error(client.BatchV1Api(kube(server)).read_namespaced_job, "x", NS) == (
        404,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'jobs.batch "x" not found',
            "reason": "NotFound",
            "details": {"name": "x", "group": "batch", "kind": "jobs"},
            "code": 404,
        },
    )
    assert (
        api_error(client.CoreV1Api(kube(server)).read_namespaced_pod, "gone", NS)[1]["message"]
        == 'pods "gone" not found'
    )
    assert raw(server, "/apis/batch/v1/namespaces/train/cronjobs")[0] == 403  # authorization comes first
    status, body = raw(server, "/api/v1/namespaces/train/pods/j-0-x0/exec")
    assert (status, body["message"]) == (403, body["message"])  # pods/exec: not granted


# ---- reading ----------------------------------------------------------------------------------


def test_list_and_get_through_the_kubernetes_client(server: ApiServer) -> None:
    core, batch = client.CoreV1Api(kube(server)), client.BatchV1Api(kube(server))
    found = core.list_namespaced_pod(NS, field_selector="status.podIP=127.0.0.11")
    assert [p.metadata.name for p in found.items] == ["j-1-x1"]
    assert found.kind == "PodList" and found.metadata.resource_version == "1"
    [owner] = found.items[0].metadata.owner_references
    assert (owner.kind, owner.name, owner.controller) == ("Job", "j", True)
    assert batch.read_namespaced_job("j", NS).spec.parallelism == 2
    assert [p.metadata.namespace for p in core.list_namespaced_pod(NS).items] == [NS, NS]  # never another namespace's
    selected = {
        "job-name=j,batch.kubernetes.io/job-completion-index!=0": ["j-1-x1"],
        "batch.kubernetes.io/job-completion-index in (0, 7)": ["j-0-x0"],
        "batch.kubernetes.io/job-completion-index notin (0)": ["j-1-x1"],
        "job-name==j": ["j-0-x0", "j-1-x1"],
        "job-name": ["j-0-x0", "j-1-x1"],
        "!job-name": [],
        "absent!=x": ["j-0-x0", "j-1-x1"],
    }
    for selector, names in selected.items():
        assert [p.metadata.name for p in core.list_namespaced_pod(NS, label_selector=selector).items] == names, selector
    fields = {
        "metadata.name=j-0-x0": ["j-0-x0"],
        "status.phase!=Running": [],
        "spec.nodeName==node-0,metadata.namespace=train": ["j-0-x0", "j-1-x1"],
        "spec.serviceAccountName=jax,spec.hostNetwork=false": ["j-0-x0", "j-1-x1"],
    }
    for selector, names in fields.items():
        assert [p.metadata.name for p in core.list_namespaced_pod(NS, field_selector=selector).items] == names, selector
    assert (
        api_error(core.list_namespaced_pod, NS, field_selector="spec.image=x")[1]["message"]
        == "field label not supported: spec.image"
    )
    assert api_error(core.list_namespaced_pod, NS, label_selector="a in b")[0] == 400
    assert (
        api_error(core.list_namespaced_pod, NS, label_selector="none=here", field_selector="spec.x=1")[0] == 400
    )  # none selected: still 400


def test_services_and_derived_endpoints(server: ApiServer) -> None:
    core = client.CoreV1Api(kube(server))
    [svc] = core.list_namespaced_service(NS).items
    assert (svc.metadata.name, svc.spec.cluster_ip, svc.spec.selector) == ("workers", "None", {"job-name": "j"})
    endpoints = core.read_namespaced_endpoints("workers", NS)
    [subset] = endpoints.subsets
    assert [(a.ip, a.hostname, a.target_ref.name) for a in subset.addresses] == [
        ("127.0.0.10", "j-0", "j-0-x0"),
        ("127.0.0.11", "j-1", "j-1-x1"),
    ]
    assert [(p.name, p.port) for p in subset.ports] == [("coord", 55527)]  # the named targetPort resolved
    assert endpoints.metadata.labels == {"service.kubernetes.io/headless": ""}


def test_endpoints_split_ready_from_not_ready() -> None:
    service = {**SERVICE, "spec": {**SERVICE["spec"], "publishNotReadyAddresses": False}}
    endpoints = derived_endpoints(service, [pod(0), pod(1, ready=False), {**pod(2), "status": {"phase": "Pending"}}])
    assert endpoints is not None
    [subset] = endpoints["subsets"]
    assert [a["ip"] for a in subset["addresses"]] == ["127.0.0.10"]
    assert [a["ip"] for a in subset["notReadyAddresses"]] == ["127.0.0.11"]  # no IP yet: not an endpoint


def test_watch_streams_the_current_objects_then_holds(server: ApiServer) -> None:
    core = client.CoreV1Api(kube(server))
    started = time.monotonic()
    events = list(watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=1, _request_timeout=60))
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "j-0-x0"), ("ADDED", "j-1-x1")]
    assert time.monotonic() - started > 0.9  # it held until its timeout (a hang ends at the client's, 60 s)
    resumed = list(watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=1, resource_version="1"))
    assert resumed == []  # from the current resourceVersion: nothing new


def test_discovery_and_version(server: ApiServer) -> None:
    api = kube(server)
    assert client.CoreApi(api).get_api_versions().versions == ["v1"]
    groups = {g.name: g.preferred_version.group_version for g in client.ApisApi(api).get_api_versions().groups}
    assert groups["batch"] == "batch/v1" and groups["jobset.x-k8s.io"] == "jobset.x-k8s.io/v1alpha2"
    assert (
        groups["trainer.kubeflow.org"] == "trainer.kubeflow.org/v1alpha1"
        and groups["kubeflow.org"] == "kubeflow.org/v1"
    )
    core = {r.name: (r.kind, r.namespaced) for r in client.CoreV1Api(api).get_api_resources().resources}
    assert (
        core["pods"] == ("Pod", True)
        and core["endpoints"] == ("Endpoints", True)
        and core["namespaces"] == ("Namespace", False)
    )
    trainer = {
        r.name: r.namespaced
        for r in client.CustomObjectsApi(api).get_api_resources("trainer.kubeflow.org", "v1alpha1").resources
    }
    assert trainer == {"clustertrainingruntimes": False, "trainingruntimes": True, "trainjobs": True}
    assert client.VersionApi(api).get_code().git_version.startswith("v1.")


def test_request_attributes_follow_the_request_info_factory() -> None:
    assert parse_request("GET", "/api/v1/namespaces/ns/pods?watch=true").attrs.verb == "watch"
    assert parse_request("GET", "/api/v1/watch/namespaces/ns/pods").attrs.verb == "watch"
    listing = parse_request("GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dp0").attrs
    assert (listing.verb, listing.name) == ("list", "p0")
    assert parse_request("DELETE", "/apis/batch/v1/namespaces/ns/jobs").attrs.verb == "deletecollection"
    ns = parse_request("GET", "/api/v1/namespaces/ns").attrs
    assert (ns.resource, ns.name, ns.namespace) == ("namespaces", "ns", "ns")
    log = parse_request("GET", "/api/v1/namespaces/ns/pods/p/log").attrs
    assert (log.resource, log.name) == ("pods/log", "p")
    assert parse_request("GET", "/apis/batch/v1").attrs.path == "/apis/batch/v1"


# ---- writes -----------------------------------------------------------------------------------


def test_writes_are_refused_and_change_nothing(server: ApiServer) -> None:
    core = client.CoreV1Api(kube(server))
    status, body = api_error(core.delete_namespaced_pod, "j-1-x1", NS)  # RBAC allows it: 405
    assert (status, body["reason"]) == (405, "MethodNotAllowed")
    assert body["message"].startswith('delete is not supported on resources of kind "pods"')
    status, body = api_error(core.delete_namespaced_pod, "j-0-x0", NS)  # RBAC does not: 403 first
    assert (status, body["reason"]) == (403, "Forbidden")
    status, _ = api_error(
        client.BatchV1Api(kube(server)).create_namespaced_job, NS, client.V1Job(metadata=client.V1ObjectMeta(name="z"))
    )
    assert status == 403
    assert [p.metadata.name for p in core.list_namespaced_pod(NS).items] == ["j-0-x0", "j-1-x1"]
    log = server.log.read_text()
    assert (
        "405 DELETE /api/v1/namespaces/train/pods/j-1-x1 system:serviceaccount:train:jax refused delete: the "
        "simulated API server is read-only" in log
    )


# ---- JAX's own Kubernetes detection ------------------------------------------------------------

JAX_FLOW = textwrap.dedent("""
    import json, sys
    import kubernetes.config.incluster_config as incluster
    # The pod's service-account volume, elsewhere than /var/run/secrets (no mount namespace here).
    incluster.SERVICE_TOKEN_FILENAME, incluster.SERVICE_CERT_FILENAME = sys.argv[1], sys.argv[2]
    from jax._src.clusters import ClusterEnv
    from jax._src.clusters.k8s_cluster import K8sCluster
    K8sCluster._namespace = classmethod(lambda cls: sys.argv[3])   # reads .../serviceaccount/namespace
    try:
        found = ClusterEnv.auto_detect_unset_distributed_params(None, None, None, None, None, None)
        print(json.dumps({"detected": found[:3]}))
    except RuntimeError as e:
        print(json.dumps({"error": str(e)}))
""")


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("reader-token", {"detected": ["j-0.workers:55527", 2, 1]}),
        ("stranger-token", "Kubernetes API Error: 403 - Forbidden"),
    ],
)
def test_jax_k8s_cluster_detection_end_to_end(server: ApiServer, tmp_path: Path, token: str, expected: object) -> None:
    """JAX's K8sCluster (jax/_src/clusters/k8s_cluster.py), unchanged, against the server: its pod
    by status.podIP (HOSTNAME resolves to the pod's IP), its Job by the job-name label."""
    (tmp_path / "token").write_text(token)
    (tmp_path / "ca.crt").write_bytes(server.ca_pem)
    env = {
        **os.environ,
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(server.port),
        "HOSTNAME": "127.0.0.11",
        "JOB_COMPLETION_INDEX": "1",
        "JAX_PLATFORMS": "cpu",
    }
    result = subprocess.run(
        [sys.executable, "-c", JAX_FLOW, str(tmp_path / "token"), str(tmp_path / "ca.crt"), NS],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    if isinstance(expected, str):
        assert answer["error"].startswith(expected) and "service account" in answer["error"]
    else:
        assert answer == expected


# ---- attempts and shutdown ---------------------------------------------------------------------


def test_publish_replaces_the_objects_and_ends_watches(tmp_path: Path) -> None:
    with ApiServer("127.0.0.1", TOKENS, tmp_path / "log") as api:
        api.start(OBJECTS)
        (tmp_path / "ca.crt").write_bytes(api.ca_pem)
        core = client.CoreV1Api(kube(api))
        seen: list[str] = []
        watcher = threading.Thread(
            target=lambda: seen.extend(
                e["object"].metadata.name
                for e in watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=30)
            )
        )
        watcher.start()
        time.sleep(0.5)
        api.publish([o for o in OBJECTS if o is not OBJECTS[2]])  # attempt 2: pod j-1 not (yet) there
        watcher.join(20)  # the watch's own timeout is 30 s: ended before it, it was the publish that ended it
        assert not watcher.is_alive()
        listed = core.list_namespaced_pod(NS)
        assert [p.metadata.name for p in listed.items] == ["j-0-x0"] and listed.metadata.resource_version == "2"
        assert seen == ["j-0-x0", "j-1-x1"]


def _children() -> set[int]:
    return {int(p) for task in Path("/proc/self/task").iterdir() for p in (task / "children").read_text().split()}


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:  # the listener closed with this connection in its backlog: the next try is refused
        return False
    return False


def test_close_leaves_no_process_port_thread_fd_or_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where trustme's key file would linger
    fds, threads, children = sorted(os.listdir("/proc/self/fd")), threading.active_count(), _children()
    held_r, held_w = os.pipe()  # the simulator's pipe, open at start
    api = ApiServer("127.0.0.1", TOKENS, tmp_path / "apiserver.log")
    api.start(OBJECTS)
    [child] = _children() - children
    assert threading.active_count() == threads  # the threads are the child's
    os.close(held_w)
    assert select.select([held_r], [], [], 5)[0] and os.read(held_r, 1) == b""  # the child holds no copy
    os.close(held_r)
    assert not _refused(api.port)
    api.close()
    api.close()  # twice is harmless
    assert _refused(api.port)
    assert _children() == children and not Path(f"/proc/{child}").exists()
    assert sorted(os.listdir("/proc/self/fd")) == fds and threading.active_count() == threads
    assert list(temp.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["apiserver.log", "tmp"]


def test_the_server_dies_with_the_simulator(tmp_path: Path) -> None:
    """A simulator killed before close(): its API server exits too (no orphan keeps the port)."""
    script = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from jaxinfra_sim.apiserver.server import ApiServer
        api = ApiServer("127.0.0.1", {{}}, Path({str(tmp_path / "log")!r}))
        api.start([])
        print(api.port, flush=True)
        os._exit(0)
    """)
    port = int(
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True).stdout
    )
    deadline = time.monotonic() + 5
    while not _refused(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _refused(port)
