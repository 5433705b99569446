"""Kinds the simulator does not serve (issue #39): an object that would run pods on a cluster but that no emulated
controller runs (a LeaderWorkerSet, a Deployment, a bare Pod) is an input problem, exit 2, one line per object naming
its file, kind, apiVersion and name, with a fix; objects that run no pods (a ConfigMap) stay stored. A TrainJob whose
runtime is not JAX gets the verdict a cluster gives before its runtime matters (Kueue never admitting it) or, where it
would be admitted, the same clear refusal. `jaxinfra validate` still accepts them all: the API server stores them.
Another operator's kind whose CRD is bundled (issue #57: the Training Operator's, the MPI Operator's MPIJob, LWS's,
KubeRay's) is named with its operator and the release whose CRD validate checked it against.

The manifests are written in the style of upstream examples (kubernetes-sigs/lws docs/examples/sample, the Kubernetes
docs' Deployment, jobset examples/simple, kubeflow/trainer manifests/base/runtimes/torch_distributed.yaml, Kueue's
single ClusterQueue setup, kubeflow/mpi-operator examples/v2beta1/pi, kubeflow/trainer @v1.9.4 examples/pytorch);
none is copied.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jaxinfra.schemas import operators
from jaxinfra_sim import controllers
from tests.support.cli import simulate_cli
from tests.support.paths import ROOT
from tests.test_other_operators import MPI_JOB_V1, MPI_JOB_V2BETA1, PYTORCH_JOB

pytestmark = pytest.mark.simulator

FIX = (
    "fix: the simulator runs JobSet, Indexed Job, JAXJob and TrainJob; simulate the workload as one of those, or leave "
    "it out of the simulation's inputs"
)

LEADER_WORKER_SET = """\
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: inference
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 4
    restartPolicy: RecreateGroupOnPodRestart
    workerTemplate:
      spec:
        containers:
        - name: server
          image: python:3.12-slim
          command: ["python3", "-m", "http.server", "8080"]
          ports:
          - containerPort: 8080
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: metrics
  namespace: research
  labels:
    app: metrics
spec:
  replicas: 3
  selector:
    matchLabels:
      app: metrics
  template:
    metadata:
      labels:
        app: metrics
    spec:
      containers:
      - name: exporter
        image: python:3.12-slim
        command: ["python3", "-m", "http.server", "9100"]
        ports:
        - containerPort: 9100
"""

BARE_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: debug
  namespace: research
spec:
  containers:
  - name: shell
    image: busybox:1.36
    command: ["sleep", "3600"]
"""

JOBSET = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: run-settings
data:
  STEPS: "3"
---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: pair
spec:
  replicatedJobs:
  - name: workers
    replicas: 1
    template:
      spec:
        parallelism: 2
        completions: 2
        backoffLimit: 0
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: jax
              image: python:3.12-slim
              env:
              - name: JAX_COORDINATOR_ADDRESS
                value: pair-workers-0-0.pair:8476
              - name: JAX_NUM_PROCESSES
                value: "2"
              - name: JAX_PROCESS_ID
                valueFrom:
                  fieldRef:
                    fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']
              - name: STEPS
                valueFrom:
                  configMapKeyRef:
                    name: run-settings
                    key: STEPS
"""

TORCH_TRAINJOB = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: torch-ddp
  labels:
    trainer.kubeflow.org/framework: torch
spec:
  mlPolicy:
    numNodes: 1
    torch: {}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata:
            labels:
              trainer.kubeflow.org/trainjob-ancestor-step: trainer
          spec:
            template:
              spec:
                containers:
                - name: node
                  image: pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime
                  command: ["torchrun", "/workspace/train.py"]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: default-flavor
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: cluster-queue
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: 9
      - name: memory
        nominalQuota: 36Gi
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: resnet
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  runtimeRef:
    name: torch-ddp
  trainer:
    numNodes: 2
    resourcesPerNode:
      requests:
        cpu: "1"
        memory: 2Gi
"""
QUEUE_LABEL = "  labels:\n    kueue.x-k8s.io/queue-name: user-queue\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def errors(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("error: ")]


def validate(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jaxinfra", "validate", *map(str, paths)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_a_leader_worker_set_is_refused_naming_it(tmp_path: Path) -> None:
    lws = write(tmp_path, "lws.yaml", LEADER_WORKER_SET)
    rc, report, out = simulate_cli(str(lws), tmp=tmp_path)
    assert rc == 2, out
    [line] = errors(out)
    assert line.startswith(f"error: {lws}#0 LeaderWorkerSet/default/inference = ")
    assert "'LeaderWorkerSet (leaderworkerset.x-k8s.io/v1)'" in line and line.endswith(FIX), line
    assert "no workload to simulate" not in out and "stored, not simulated" not in out
    assert out.rstrip().endswith(
        "jaxinfra: 1 object the simulator does not run (a kind or runtime it does not emulate); nothing started"
    )
    assert report["workloads"] == [] and not report["ok"]
    assert f"served by {operators.LWS}" in line, line
    assert validate(lws).returncode == 0  # the API server stores it (its CRD installed): validate is unaffected


DISAGGREGATED_SET = """\
apiVersion: disaggregatedset.x-k8s.io/v1
kind: DisaggregatedSet
metadata:
  name: serving
spec:
  roles:
  - name: prefill
    spec:
      replicas: 2
      leaderWorkerTemplate:
        size: 2
        workerTemplate:
          spec:
            containers:
            - name: engine
              image: python:3.12-slim
              command: ["python3", "-m", "http.server", "8000"]
  - name: decode
    spec:
      replicas: 1
      leaderWorkerTemplate:
        size: 1
        workerTemplate:
          spec:
            containers:
            - name: engine
              image: python:3.12-slim
              command: ["python3", "-m", "http.server", "8000"]
"""


def test_a_disaggregated_set_is_refused_naming_it_as_a_leader_worker_set_is(tmp_path: Path) -> None:
    """The LWS repository's DisaggregatedSet (kubernetes-sigs/lws @060ab4da
    config/samples/disaggregatedset_v1_3role.yaml is one) runs each role as a LeaderWorkerSet: it was stored and
    noted, and the verdict was "no workload ran" (exit 1), a failure no cluster gives; it is refused naming its kind,
    as the LeaderWorkerSet is."""
    path = write(tmp_path, "disaggregated.yaml", DISAGGREGATED_SET)
    rc, report, out = simulate_cli(str(path), tmp=tmp_path)
    assert rc == 2, out
    [line] = errors(out)
    assert line.startswith(f"error: {path}#0 DisaggregatedSet/default/serving = ")
    assert "'DisaggregatedSet (disaggregatedset.x-k8s.io/v1)'" in line and line.endswith(FIX), line
    assert f"served by {operators.LWS}" in line, line
    assert "no workload to simulate" not in out and "stored, not simulated" not in out
    assert report["workloads"] == [] and not report["ok"]


@pytest.mark.parametrize(
    ("text", "value", "operator"),
    [
        (MPI_JOB_V2BETA1, "MPIJob (kubeflow.org/v2beta1)", str(operators.MPI_OPERATOR)),
        (PYTORCH_JOB, "PyTorchJob (kubeflow.org/v1)", str(operators.TRAINING_OPERATOR)),
        (MPI_JOB_V1, "MPIJob (kubeflow.org/v1)", str(operators.TRAINING_OPERATOR)),
    ],
    ids=["mpijob-v2beta1", "pytorchjob", "mpijob-v1"],
)
def test_another_operator_s_kind_is_valid_and_refused_naming_its_operator_and_release(
    tmp_path: Path, text: str, value: str, operator: str
) -> None:
    """Issue #57: an MPIJob (the MPI Operator's v2beta1 in the style of its examples/v2beta1/pi, or the Training
    Operator's v1) and a PyTorchJob (kubeflow/trainer @v1.9.4 examples/pytorch/simple.yaml's style) were "no matches for
    kind" to validate and simulate alike, where a cluster with the operator runs them. Now validate stores each
    (checked against its operator's CRD), and simulate refuses it, exit 2, naming the kind, the version, the operator
    and the release whose CRD it was checked against: no verdict here would be the cluster's."""
    path = write(tmp_path, "job.yaml", text)
    assert validate(path).returncode == 0
    rc, report, out = simulate_cli(str(path), tmp=tmp_path)
    assert rc == 2, out
    [line] = errors(out)
    assert f"= {value!r}: served by {operator}" in line and ", not emulated: " in line, line
    assert "no matches for kind" not in out and line.endswith(FIX), line
    assert "jaxinfra: 1 object the simulator does not run" in out
    assert report["workloads"] == [] and not report["ok"]


def test_an_invalid_mpijob_is_refused_by_the_api_server_before_any_operator_matters(tmp_path: Path) -> None:
    """An MPIJob the MPI Operator's CRD refuses (`mpiImplementation` outside its enum) is refused as a cluster's API
    server refuses it, by validate and simulate alike: the field, not the operator."""
    path = write(
        tmp_path,
        "job.yaml",
        MPI_JOB_V2BETA1.replace("mpiImplementation: OpenMPI", "mpiImplementation: MPICH2"),
    )
    r = validate(path)
    assert r.returncode == 2 and "spec.mpiImplementation = 'MPICH2'" in r.stdout + r.stderr, r.stdout + r.stderr
    rc, report, out = simulate_cli(str(path), tmp=tmp_path)
    assert rc == 2, out
    [line] = errors(out)
    assert "spec.mpiImplementation = 'MPICH2'" in line and "served by" not in out, out


def test_every_unserved_object_at_once_and_the_served_workload_beside_them_not_started(tmp_path: Path) -> None:
    """A Deployment and a bare Pod beside a JobSet: each named, in its file, and nothing started, not even the JobSet
    (the Deployment's pods could be what it needs, and a pass would vouch for pods that never ran)."""
    deployment = write(tmp_path, "deployment.yaml", DEPLOYMENT + "---\n" + BARE_POD)
    jobset = write(tmp_path, "jobset.yaml", JOBSET)
    rc, report, out = simulate_cli(str(jobset), str(deployment), tmp=tmp_path)
    assert rc == 2, out
    assert [line.split(" = ")[0] for line in errors(out)] == [
        f"error: {deployment}#0 Deployment/research/metrics",
        f"error: {deployment}#1 Pod/research/debug",
    ]
    assert "'Deployment (apps/v1)'" in errors(out)[0] and "'Pod (v1)'" in errors(out)[1]
    assert all(line.endswith(FIX) for line in errors(out))
    assert "jaxinfra: 2 objects the simulator does not run" in out
    [workload] = report["workloads"]
    assert workload["id"] == "JobSet/default/pair" and workload["attempts"] == []
    assert validate(jobset, deployment).returncode == 0


def test_a_jobset_beside_a_configmap_is_still_simulated(tmp_path: Path) -> None:
    """A ConfigMap runs no pods: stored (and read by the JobSet's env), the JobSet simulated as before."""
    rc, report, out = simulate_cli(str(write(tmp_path, "jobset.yaml", JOBSET)), tmp=tmp_path)
    assert rc == 0, out
    [workload] = report["workloads"]
    assert (workload["id"], workload["verdict"], workload["pods"]) == ("JobSet/default/pair", "succeeded", 2)
    assert not any("not simulated" in note for note in report["notes"])


def test_a_torch_trainjob_whose_local_queue_is_missing_is_never_admitted(tmp_path: Path) -> None:
    """Kueue suspends the TrainJob and never admits it (no LocalQueue user-queue): no pod, and its runtime never
    matters. The verdict a JobSet labelled for a missing LocalQueue gets."""
    trainjob = write(tmp_path, "trainjob.yaml", TORCH_TRAINJOB)
    rc, report, out = simulate_cli(str(trainjob), tmp=tmp_path)
    assert rc == 1, out
    [line] = errors(out)
    assert line.startswith(
        "error: TrainJob/default/resnet metadata.labels[kueue.x-k8s.io/queue-name] = 'user-queue': would stay "
        "suspended: LocalQueue default/user-queue does not exist"
    ), line
    assert "JAX runtime" not in out
    [workload] = report["workloads"]
    assert (workload["verdict"], workload["pods"], workload["attempts"]) == ("failed", 0, [])
    assert validate(trainjob).returncode == 0


def test_a_torch_trainjob_without_a_queue_is_refused_naming_its_runtime(tmp_path: Path) -> None:
    trainjob = write(tmp_path, "trainjob.yaml", TORCH_TRAINJOB.replace(QUEUE_LABEL, ""))
    rc, report, out = simulate_cli(str(trainjob), tmp=tmp_path)
    assert rc == 2, out
    [line] = errors(out)
    assert line.startswith("error: TrainJob/default/resnet spec.runtimeRef = ")
    assert "ClusterTrainingRuntime torch-ddp (mlPolicy.torch)" in line and "mlPolicy.torch is not a JAX runtime" in line
    assert "fix: reference a runtime with mlPolicy.jax" in line
    assert "jaxinfra: 1 object the simulator does not run" in out
    [workload] = report["workloads"]
    assert (workload["verdict"], workload["pods"], workload["attempts"]) == ("failed", 0, [])


BUILTIN_RUNTIME_TRAINJOB = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: ddp-smoke
spec:
  runtimeRef:
    apiGroup: trainer.kubeflow.org
    kind: ClusterTrainingRuntime
    name: torch-distributed
  trainer:
    numNodes: 2
    command: ["torchrun", "--nnodes=2", "/workspace/smoke.py"]
"""


def test_a_trainjob_on_a_builtin_torch_runtime_is_stored_and_refused_naming_its_runtime(tmp_path: Path) -> None:
    """In the style of Trainer's examples/yaml/01-multi-node.yaml: a TrainJob naming the built-in torch-distributed,
    not in the inputs. A cluster with the Trainer's runtimes installed (its installation guide applies them all
    together, jax-distributed among them) stores it; it was refused as not found by validate and simulate alike.
    Now stored, and the simulation refuses it naming its runtime's policy, as for a torch runtime in the inputs."""
    path = write(tmp_path, "ddp.yaml", BUILTIN_RUNTIME_TRAINJOB)
    assert validate(path).returncode == 0
    rc, report, out = simulate_cli(str(path), tmp=tmp_path)
    assert rc == 2, out
    [line] = errors(out)
    assert line.startswith("error: TrainJob/default/ddp-smoke spec.runtimeRef = ")
    assert "ClusterTrainingRuntime torch-distributed (mlPolicy.torch)" in line, line
    assert "mlPolicy.torch is not a JAX runtime" in line and "not found" not in out


def test_a_trainjob_on_a_runtime_the_builtin_set_lacks_is_refused_by_the_api_server(tmp_path: Path) -> None:
    """torch-distributed-with-cache is in Trainer's manifests/base/runtimes/data-cache, an overlay of its own that the
    runtimes' kustomization does not list: without it in the inputs, the Trainer's webhook refuses the TrainJob."""
    path = write(
        tmp_path, "ddp.yaml", BUILTIN_RUNTIME_TRAINJOB.replace("torch-distributed", "torch-distributed-with-cache")
    )
    r = validate(path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert '"torch-distributed-with-cache" not found' in r.stdout + r.stderr


def test_a_torch_trainjob_its_queue_admits_is_refused_too(tmp_path: Path) -> None:
    local_queue = (
        "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata:\n  name: user-queue\n"
        "spec:\n  clusterQueue: cluster-queue\n"
    )
    rc, report, out = simulate_cli(str(write(tmp_path, "trainjob.yaml", TORCH_TRAINJOB + local_queue)), tmp=tmp_path)
    assert rc == 2, out
    assert "mlPolicy.torch is not a JAX runtime" in errors(out)[0]
    [workload] = report["workloads"]
    assert any("admitted by Kueue to ClusterQueue cluster-queue" in note for note in workload["notes"])


@pytest.mark.parametrize(
    ("api_version", "kind", "unserved"),
    [
        ("apps/v1", "StatefulSet", True),
        ("apps/v1", "DaemonSet", True),
        ("apps/v1", "ReplicaSet", True),
        ("batch/v1", "CronJob", True),
        ("v1", "Pod", True),
        ("ray.io/v1", "RayJob", True),
        ("ray.io/v1", "RayCronJob", True),  # its RayJobs run the pods (KubeRay v1.7.0, behind a feature gate)
        ("kubeflow.org/v1", "PyTorchJob", True),
        ("kubeflow.org/v2beta1", "MPIJob", True),
        ("disaggregatedset.x-k8s.io/v1", "DisaggregatedSet", True),  # its roles are LeaderWorkerSets
        ("disaggregatedset.x-k8s.io/v1", "DisaggregatedSetRoleScaler", False),  # a scale target: no pods
        ("batch/v1", "Job", False),  # served: a NonIndexed Job runs too (its own problem under the probe)
        ("kubeflow.org/v1", "JAXJob", False),
        ("v1", "ConfigMap", False),
        ("example.com/v1", "Widget", False),  # a custom resource that is no workload: stored, noted
    ],
)
def test_which_kinds_are_input_problems(api_version: str, kind: str, unserved: bool) -> None:
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}
    problem = controllers.unserved_kind(obj)
    assert (problem is not None) == unserved
    if problem is not None:
        assert problem.path == f"{kind}/default/x" and problem.value == f"{kind} ({api_version})"
    stored_only = kind in ("Widget", "DisaggregatedSetRoleScaler")
    assert controllers.not_simulated([obj]) == ([f"{kind}/default/x"] if stored_only else [])
