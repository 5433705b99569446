"""Other operators' kinds (issue #57, item 5): `jaxinfra validate` checks them against their operators' published CRDs
(bundled in jaxinfra/schemas, `jaxinfra.schemas.operators`), as a cluster with that operator installed does: a valid
object is stored, an invalid one refused at the field, where it was "no matches for kind" (an MPIJob, a PyTorchJob) or
stored unchecked (a LeaderWorkerSet, a RayJob).

A cluster's verdicts, by the API server's own steps for a custom resource (kubernetes/kubernetes
staging/src/k8s.io/apiextensions-apiserver): strict field validation, kubectl's default, refuses a field the
structural schema does not name (`strict decoding error: unknown field "spec.sshAuthMountPath"`); the schema's
validation refuses a wrong type (`spec.nprocPerNode: Invalid value: "integer": ... must be of type string`), a value
outside an enum (`Unsupported value: "MPICH2": supported values: ...`), a missing required field (`Required value`)
and too few items (`should have at least 2 items`); a kind no installed CRD names is `no matches for kind`.

The manifests are written in the style of the upstream examples (kubeflow/trainer @v1.9.4 examples/pytorch/simple.yaml,
examples/tensorflow/simple.yaml, examples/xgboost/smoke-dist, examples/paddlepaddle/simple-cpu.yaml;
kubeflow/mpi-operator @v0.8.0 examples/v2beta1/pi/pi.yaml; kubernetes-sigs/lws @v0.10.0 docs/examples/sample and
config/samples/disaggregatedset_v1_3role.yaml; ray-project/kuberay @v1.7.0
ray-operator/config/samples/ray-*.sample.yaml); none is copied.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from textwrap import indent
from typing import Any

import pytest
import yaml

from jaxinfra.admission import Request, admit
from jaxinfra.schemas import operators
from jaxinfra.validate import validate_objects

pytestmark = pytest.mark.unit

PYTORCH_JOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: mnist-ddp
  namespace: research
spec:
  nprocPerNode: "2"
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime
            command: ["python3", "/opt/mnist.py", "--epochs=1"]
    Worker:
      replicas: 3
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime
            command: ["python3", "/opt/mnist.py", "--epochs=1"]
"""
TF_JOB = """\
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: ps-training
spec:
  tfReplicaSpecs:
    PS:
      replicas: 1
      template:
        spec:
          containers:
          - name: tensorflow
            image: tensorflow/tensorflow:2.16.1
            command: ["python", "/opt/dist_train.py"]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: tensorflow
            image: tensorflow/tensorflow:2.16.1
            command: ["python", "/opt/dist_train.py"]
"""
MPI_JOB_V1 = """\
apiVersion: kubeflow.org/v1
kind: MPIJob
metadata:
  name: horovod-mnist
spec:
  slotsPerWorker: 1
  runPolicy:
    cleanPodPolicy: Running
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: horovod/horovod:0.28.1
            command: ["mpirun", "-np", "2", "python", "/opt/mnist.py"]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: worker
            image: horovod/horovod:0.28.1
"""
MPI_JOB_V2BETA1 = """\
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: allreduce
spec:
  slotsPerWorker: 2
  mpiImplementation: OpenMPI
  sshAuthMountPath: /home/mpiuser/.ssh
  runPolicy:
    cleanPodPolicy: Running
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: mpioperator/openmpi:0.8.0
            command: ["mpirun", "-n", "4", "/opt/allreduce"]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: worker
            image: mpioperator/openmpi:0.8.0
            command: ["/usr/sbin/sshd", "-De"]
"""
XGBOOST_JOB = """\
apiVersion: kubeflow.org/v1
kind: XGBoostJob
metadata:
  name: rabit-smoke
spec:
  xgbReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
          - name: xgboost
            image: docker.io/kubeflow/xgboost-dist-test:latest
            command: ["python", "/opt/train.py"]
    Worker:
      replicas: 2
      restartPolicy: Never
      template:
        spec:
          containers:
          - name: xgboost
            image: docker.io/kubeflow/xgboost-dist-test:latest
            command: ["python", "/opt/train.py"]
"""
PADDLE_JOB = """\
apiVersion: kubeflow.org/v1
kind: PaddleJob
metadata:
  name: fit-a-line
spec:
  elasticPolicy:
    minReplicas: 2
    maxReplicas: 4
  paddleReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: paddle
            image: paddlepaddle/paddle:2.6.1
            command: ["python", "-m", "paddle.distributed.launch", "run.py"]
"""
LEADER_WORKER_SET = """\
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: vllm
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 4
    restartPolicy: RecreateGroupOnPodRestart
    workerTemplate:
      spec:
        containers:
        - name: engine
          image: vllm/vllm-openai:v0.9.2
          command: ["python3", "-m", "vllm.entrypoints.openai.api_server", "--tensor-parallel-size", "4"]
"""
DISAGGREGATED_SET = """\
apiVersion: disaggregatedset.x-k8s.io/v1
kind: DisaggregatedSet
metadata:
  name: llm
spec:
  roles:
  - name: prefill
    spec:
      replicas: 1
      leaderWorkerTemplate:
        size: 4
        workerTemplate:
          spec:
            containers:
            - name: vllm
              image: vllm/vllm-openai:v0.9.2
              args: ["--kv-transfer-config", '{"kv_role": "kv_producer"}']
  - name: decode
    spec:
      replicas: 2
      leaderWorkerTemplate:
        size: 2
        workerTemplate:
          spec:
            containers:
            - name: vllm
              image: vllm/vllm-openai:v0.9.2
              args: ["--kv-transfer-config", '{"kv_role": "kv_consumer"}']
"""
ROLE_SCALER = """\
apiVersion: disaggregatedset.x-k8s.io/v1
kind: DisaggregatedSetRoleScaler
metadata:
  name: llm-decode
spec:
  replicas: 3
"""
RAY_CLUSTER_SPEC = """\
  rayVersion: "2.46.0"
  headGroupSpec:
    rayStartParams:
      dashboard-host: "0.0.0.0"
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.46.0
          resources:
            limits:
              cpu: "1"
              memory: 2Gi
  workerGroupSpecs:
  - groupName: cpu
    replicas: 2
    minReplicas: 1
    maxReplicas: 4
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.46.0
"""
RAY_CLUSTER = "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata:\n  name: raycluster-cpu\nspec:\n" + RAY_CLUSTER_SPEC
RAY_JOB_SPEC = """\
  entrypoint: python /home/ray/jobs/count.py
  shutdownAfterJobFinishes: true
  ttlSecondsAfterFinished: 300
  runtimeEnvYAML: |
    pip:
      - pendulum==2.1.2
    env_vars:
      COUNTER: words
  rayClusterSpec:
""" + indent(RAY_CLUSTER_SPEC, "  ")
RAY_JOB = "apiVersion: ray.io/v1\nkind: RayJob\nmetadata:\n  name: count-words\nspec:\n" + RAY_JOB_SPEC
RAY_SERVICE = """\
apiVersion: ray.io/v1
kind: RayService
metadata:
  name: fruit-stand
spec:
  serveConfigV2: |
    applications:
      - name: fruit
        import_path: fruit.app
        route_prefix: /fruit
  rayClusterConfig:
""" + indent(RAY_CLUSTER_SPEC, "  ")
RAY_CRON_JOB = """\
apiVersion: ray.io/v1
kind: RayCronJob
metadata:
  name: nightly-count
spec:
  schedule: "0 3 * * *"
  jobTemplate:
""" + indent(RAY_JOB_SPEC, "  ")


def at(obj: dict[str, Any], *path: str | int) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def setting(value: Any, *path: str | int) -> Callable[[dict[str, Any]], None]:
    def change(obj: dict[str, Any]) -> None:
        at(obj, *path[:-1])[path[-1]] = value

    return change


def removing(*path: str | int) -> Callable[[dict[str, Any]], None]:
    def change(obj: dict[str, Any]) -> None:
        del at(obj, *path[:-1])[path[-1]]

    return change


# (manifest, an author's mistake, where the cluster refuses it, what it says)
CASES = {
    # nprocPerNode is a string in v1.9 (`*string`: "auto", "cpu", "gpu" or a number): a bare 8 is refused
    "PyTorchJob": (PYTORCH_JOB, setting(8, "spec", "nprocPerNode"), "spec.nprocPerNode", "not of type 'string'"),
    "TFJob": (TF_JOB, setting("true", "spec", "enableDynamicWorker"), "spec.enableDynamicWorker", "'boolean'"),
    # a v2beta1 field under the Training Operator's v1: its CRD does not name it
    "MPIJob v1": (
        MPI_JOB_V1,
        setting("/home/mpiuser/.ssh", "spec", "sshAuthMountPath"),
        "spec.sshAuthMountPath",
        "unknown field 'sshAuthMountPath'",
    ),
    "MPIJob v2beta1": (
        MPI_JOB_V2BETA1,
        setting("MPICH2", "spec", "mpiImplementation"),
        "spec.mpiImplementation",
        "MPICH2",
    ),
    "XGBoostJob": (
        XGBOOST_JOB,
        setting("2", "spec", "xgbReplicaSpecs", "Worker", "replicas"),
        "spec.xgbReplicaSpecs.Worker.replicas",
        "not of type 'integer'",
    ),
    # PyTorchJob's rendezvous settings do not carry over to PaddleJob's elasticPolicy
    "PaddleJob": (
        PADDLE_JOB,
        setting("c10d", "spec", "elasticPolicy", "rdzvBackend"),
        "spec.elasticPolicy.rdzvBackend",
        "unknown field 'rdzvBackend'",
    ),
    "LeaderWorkerSet": (
        LEADER_WORKER_SET,
        setting("RecreateGroup", "spec", "leaderWorkerTemplate", "restartPolicy"),
        "spec.leaderWorkerTemplate.restartPolicy",
        "RecreateGroup",
    ),
    "DisaggregatedSet": (
        DISAGGREGATED_SET,
        removing("spec", "roles", 1),
        "spec.roles",
        "use at least 2 items",
    ),
    # replicas defaults to 0 when left out; below it is refused (minimum: 0)
    "DisaggregatedSetRoleScaler": (ROLE_SCALER, setting(-1, "spec", "replicas"), "spec.replicas", "minimum of 0"),
    # rayStartParams values are strings (map[string]string): the classic `num-cpus: 1`
    "RayCluster": (
        RAY_CLUSTER,
        setting(1, "spec", "headGroupSpec", "rayStartParams", "num-cpus"),
        "spec.headGroupSpec.rayStartParams.num-cpus",
        "not of type 'string'",
    ),
    # runtimeEnvYAML is a YAML document in a string: written as a mapping, it is refused
    "RayJob": (
        RAY_JOB,
        setting({"pip": ["pendulum==2.1.2"]}, "spec", "runtimeEnvYAML"),
        "spec.runtimeEnvYAML",
        "not of type 'string'",
    ),
    "RayService": (
        RAY_SERVICE,
        setting({"applications": [{"name": "fruit"}]}, "spec", "serveConfigV2"),
        "spec.serveConfigV2",
        "not of type 'string'",
    ),
    "RayCronJob": (RAY_CRON_JOB, removing("spec", "schedule"), "spec.schedule", "required"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_valid_object_is_stored(case: str) -> None:
    """A cluster with the operator installed stores each: no finding, where a kind of a known group (kubeflow.org) was
    "no matches for kind" and the others were stored unchecked."""
    obj = yaml.safe_load(CASES[case][0])
    assert validate_objects([obj]) == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_author_s_mistake_is_refused_at_its_field(case: str) -> None:
    manifest, mistake, where, said = CASES[case]
    obj = yaml.safe_load(manifest)
    mistake(obj)
    problems = validate_objects([obj])
    assert problems, case
    assert any(p.where.endswith(f" {where}") and said in str(p) for p in problems), [str(p) for p in problems]


def test_each_mpijob_version_is_checked_against_its_own_operator_s_crd() -> None:
    """v1 is the Training Operator's, v2beta1 the MPI Operator's: the same spec is valid under one and refused under
    the other, field by field (v2beta1 dropped v1's cleanPodPolicy and mainContainer from spec, v1 has no
    sshAuthMountPath or mpiImplementation)."""
    v2 = yaml.safe_load(MPI_JOB_V2BETA1)
    as_v1 = copy.deepcopy(v2) | {"apiVersion": "kubeflow.org/v1"}
    unknown = sorted(p.where.rpartition(" ")[2] for p in validate_objects([as_v1]))
    assert unknown == ["spec.mpiImplementation", "spec.sshAuthMountPath"]
    v1 = yaml.safe_load(MPI_JOB_V1)
    v1["spec"]["cleanPodPolicy"] = "Running"  # v1's own field, beside runPolicy's
    assert validate_objects([v1]) == []
    as_v2 = v1 | {"apiVersion": "kubeflow.org/v2beta1"}
    [problem] = validate_objects([as_v2])
    assert problem.where.endswith(" spec.cleanPodPolicy") and "unknown field" in problem.message
    assert (
        operators.serving("kubeflow.org/v1", "MPIJob").operator,
        operators.serving("kubeflow.org/v2beta1", "MPIJob").operator,
    ) == (
        operators.TRAINING_OPERATOR,
        operators.MPI_OPERATOR,
    )


def test_a_version_neither_operator_serves_is_no_match_naming_both() -> None:
    """kubeflow.org/v1alpha2 was the MPI Operator's before v1; no bundled CRD serves it now."""
    obj = yaml.safe_load(MPI_JOB_V2BETA1) | {"apiVersion": "kubeflow.org/v1alpha2"}
    [problem] = validate_objects([obj])
    assert "no matches for kind 'MPIJob' in version 'kubeflow.org/v1alpha2'" in problem.message
    assert problem.fix == "use apiVersion kubeflow.org/v1 or kubeflow.org/v2beta1"


def test_an_mxjob_is_no_match_as_on_a_cluster_with_training_operator_v1_9() -> None:
    """MXJob left the Training Operator in v1.9.0 (kubeflow/trainer#2150: its CRD is not in v1.9.4's
    manifests/base/crds), so the API server of a cluster with that release answers "no matches for kind"."""
    obj = yaml.safe_load(TF_JOB.replace("kind: TFJob", "kind: MXJob").replace("tfReplicaSpecs", "mxReplicaSpecs"))
    [problem] = validate_objects([obj])
    assert problem.where.endswith(" kind") and "no matches for kind 'MXJob'" in problem.message


def test_a_deprecated_ray_version_is_still_served() -> None:
    """KubeRay v1.7.0's CRDs serve ray.io/v1alpha1 beside v1 (deprecated: true), so a cluster stores it."""
    obj = yaml.safe_load(RAY_CLUSTER) | {"apiVersion": "ray.io/v1alpha1"}
    assert validate_objects([obj]) == []


def test_the_front_door_names_each_object_s_own_operator() -> None:
    """What the cluster must run: the Training Operator for a PyTorchJob (the release jaxinfra installs for JAXJobs),
    the MPI Operator for an MPIJob v2beta1 (not the Training Operator of its API group), LWS and KubeRay for theirs."""
    docs = [PYTORCH_JOB, MPI_JOB_V2BETA1, LEADER_WORKER_SET, RAY_JOB]
    result = admit([Request("jobs.yaml", i, yaml.safe_load(text)) for i, text in enumerate(docs)])
    assert result.problems == []
    [note] = [n for n in result.notes if n.startswith("the cluster must run")]
    training = operators.TRAINING_OPERATOR.release
    assert note == (
        f"the cluster must run training-operator {training}, mpi-operator {operators.MPI_OPERATOR.release}, "
        f"lws {operators.LWS.release}, kuberay {operators.KUBERAY.release} (their CRDs installed; jaxinfra assumes so)"
    )
    only_v2 = admit([Request("mpi.yaml", 0, yaml.safe_load(MPI_JOB_V2BETA1))])
    assert [n for n in only_v2.notes if "must run" in n] == [
        f"the cluster must run {operators.MPI_OPERATOR.short} (their CRDs installed; jaxinfra assumes so)"
    ]


def test_the_schemas_readme_cites_each_operator_s_release() -> None:
    """jaxinfra/schemas/README.md cites each other operator's files at the release `operators` names (a release
    bumped in one place and not the other fails here)."""
    from importlib.resources import files

    rows = [
        r for r in (files("jaxinfra.schemas") / "README.md").read_text(encoding="utf-8").splitlines() if r[:2] == "| "
    ]
    for operator in {k.operator for k in operators.KINDS}:
        cited = [r for r in rows if f" {operator.repo}" in r]
        assert any(f"(tag {operator.release}" in r for r in cited), (operator, cited)
