"""The built-in probe where no env names the rank: JAX's own Kubernetes detection (jax-ml/jax v0.10.2,
jax/_src/clusters/k8s_cluster.py, `K8sCluster`) finds it from the pod's Indexed Job, through the simulation's API
server, exactly when a cluster's would (a token mounted, the `kubernetes` package importable, RBAC that lets the
ServiceAccount read its pod and Job); otherwise the rank-missing problem names the condition that failed (issue #39).
Each child Job of a JobSet is then a JAX group of its own."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxinfra_sim.cluster.control_plane import emulate
from tests.support.cli import simulate_cli
from tests.support.problems import one_problem, problems_of

pytestmark = pytest.mark.simulator

# A JobSet in the style of JobSet's examples: one replicated Job of two pods, whose program leaves everything to
# jax.distributed.initialize(); its ServiceAccount may read pods and Jobs, as K8sCluster does.
MANIFEST = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: jax-detector}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: read-own-pod-and-job}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: jax-detector-reads}
subjects:
- {kind: ServiceAccount, name: jax-detector}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-own-pod-and-job}
---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: autodetect}
spec:
  replicatedJobs:
  - name: hosts
    replicas: 1
    template:
      spec:
        parallelism: 2
        completions: 2
        backoffLimit: 0
        template:
          spec:
            serviceAccountName: jax-detector
            restartPolicy: Never
            containers:
            - name: trainer
              image: example.com/jax-k8s:dev
              command: [python, -m, trainer]
"""


def docs() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFEST) if d]


def pod_spec(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    jobset = manifests[-1]
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def write(tmp: Path, manifests: list[dict[str, Any]]) -> str:
    path = tmp / "autodetect.yaml"
    path.write_text(yaml.safe_dump_all(manifests))
    return str(path)


def rank_missing(manifests: list[dict[str, Any]], **kw: Any) -> Any:
    return one_problem(emulate(manifests, **kw), "rank env missing", "JAX cannot know this process's rank")


def test_a_jobset_without_rank_env_passes_with_the_rank_from_jax_kubernetes_detection(tmp_path: Path) -> None:
    rc, report, out = simulate_cli(write(tmp_path, docs()), tmp=tmp_path, timeout=240)
    assert rc == 0, out
    [w] = report["workloads"]
    pods = w["attempts"][-1]["pods"]
    assert len(pods) == 2
    for pod in pods:
        detail = pod["checks"]["rank"]["detail"]
        assert pod["checks"]["rank"]["ok"] and "rank from JAX's Kubernetes detection (K8sCluster)" in detail, detail
        assert "process_count=2" in detail and "coordinator autodetect-hosts-0-0.autodetect:55527" in detail
    # JAX found each pod by its IP, then its Job, on the simulation's API server
    assert sum(line.startswith("200 GET /apis/batch/v1/namespaces/default/jobs/") for line in report["api_server"]) == 2


def test_quantities_written_as_numbers_are_served_as_strings(tmp_path: Path) -> None:
    """JAX's own examples/k8s/example.yaml writes `limits: {cpu: 1}`: the API server serves a Pod's and a Job's
    quantities as strings, and the `kubernetes` client K8sCluster uses refuses a number there. The simulation served
    `1`, every process's pod listing failed ('Input should be a valid string'), and the JobSet failed where a cluster
    runs it; now it is served as "1" and the group forms. The JobSet, a custom resource, keeps what it was given."""
    manifests = docs()
    pod_spec(manifests)["containers"][0]["resources"] = {
        "requests": {"cpu": "900m", "memory": 1073741824},
        "limits": {"cpu": 1, "memory": "1.5Gi"},
    }
    served = emulate(manifests, api_objects=True).objects
    pods = [o for o in served if o.get("kind") == "Pod"]
    [job] = [o for o in served if o.get("kind") == "Job"]
    [jobset] = [o for o in served if o.get("kind") == "JobSet"]
    want = {"requests": {"cpu": "900m", "memory": "1073741824"}, "limits": {"cpu": "1", "memory": "1536Mi"}}
    assert len(pods) == 2 and all(p["spec"]["containers"][0]["resources"] == want for p in pods)
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"] == want
    assert pod_spec([dict(jobset)])["containers"][0]["resources"]["limits"]["cpu"] == 1
    rc, report, out = simulate_cli(write(tmp_path, manifests), tmp=tmp_path, timeout=240)
    assert rc == 0, out
    [w] = report["workloads"]
    assert all(pod["checks"]["rank"]["ok"] for pod in w["attempts"][-1]["pods"])


def test_without_the_token_the_rank_missing_problem_names_it(tmp_path: Path) -> None:
    manifests = docs()
    pod_spec(manifests)["automountServiceAccountToken"] = False
    problem = rank_missing(manifests)
    assert "JAX's Kubernetes detection (K8sCluster)" in problem.message
    assert "automountServiceAccountToken: false" in problem.message and "Service token file does not exist" in (
        problem.message
    )
    assert problem.fix.startswith("set automountServiceAccountToken: true in the pod template")
    rc, report, out = simulate_cli(write(tmp_path, manifests), tmp=tmp_path)
    assert rc == 1, out
    [w] = report["workloads"]
    assert w["attempts"] == [] and any("automountServiceAccountToken" in p["message"] for p in w["problems"])


def test_the_service_accounts_automount_is_named_when_the_pod_leaves_it() -> None:
    manifests = docs()
    manifests[0]["automountServiceAccountToken"] = False
    assert "ServiceAccount 'jax-detector' sets automountServiceAccountToken: false" in rank_missing(manifests).message


def test_an_image_without_the_kubernetes_client_cannot_detect() -> None:
    problem = rank_missing(docs(), k8s_client=False)
    assert "cannot import `kubernetes`" in problem.message and "jax[k8s]" in problem.fix


def test_a_service_account_that_may_not_read_pods_is_the_403_jax_would_get() -> None:
    manifests = [d for d in docs() if d["kind"] != "RoleBinding"]
    problem = rank_missing(manifests)
    assert "may not list pods" in problem.message and "403" in problem.message
    assert "bind ServiceAccount 'jax-detector' to a Role" in problem.fix


def test_each_child_job_is_a_group_of_its_own() -> None:
    manifests = docs()
    jobs = manifests[-1]["spec"]["replicatedJobs"][0]
    jobs["replicas"] = 2
    jobs["template"]["spec"].update(parallelism=1, completions=1)
    [w] = emulate(manifests).workloads
    assert w.problems == ()
    [note] = [n for n in w.notes if "K8sCluster" in n]
    assert "each of its 2 child Jobs is a JAX group of its own (1 process each)" in note


def test_a_coordinator_name_that_does_not_resolve_is_caught() -> None:
    manifests = docs()
    manifests[-1]["spec"]["network"] = {"enableDNSHostnames": False}
    problem = one_problem(emulate(manifests), "K8sCluster coordinator", "does not resolve")
    assert problem.fix == "set spec.network.enableDNSHostnames: true"


def test_parallelism_past_the_pods_would_leave_the_group_waiting() -> None:
    manifests = docs()
    manifests[-1]["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = 3
    problem = one_problem(emulate(manifests), "takes the process count from the Job's parallelism")
    assert problem.fix == "set parallelism: 2"


def test_under_run_command_nothing_changes() -> None:
    manifests = copy.deepcopy(docs())
    pod_spec(manifests)["automountServiceAccountToken"] = False
    assert problems_of(emulate(manifests, check_all=False)) == []
