"""Controller, kubelet and cluster-DNS emulation: manifests in, `model.Cluster` out.

What is simulated must be what the cluster would run, so this module reproduces upstream
behaviour exactly where JAX depends on it: which pods the JobSet and Job controllers create,
their hostnames, labels and annotations, the env the kubelet resolves (downward API, `$(VAR)`
expansion), the env GKE injects into TPU pods, and which DNS names the Services make
resolvable. The one deliberate difference: the pod name drops the Job controller's random
suffix, so runs are reproducible.

Not emulated (no effect on the JAX contract, or unknowable from manifests): Service-link env
vars (`<SVC>_SERVICE_HOST`, headless Services get none anyway), ClusterIP virtual IPs (only
headless Services resolve here), node allocatable (resourceFieldRef falls back to requests),
and the container runtime's own env (HOSTNAME, PATH from the image).

Kubeflow operators (DESIGN §3):
- Training Operator v1 JAXJob (`_jaxjob`): the operator creates the Worker pods itself (no Job),
  named `<job>-worker-<i>` with hostname = pod name, labels `training.kubeflow.org/{operator-name,
  job-name, replica-type, replica-index}` (+ `job-role: master` on index 0), and one headless
  Service per replica named like the pod and selecting it by those labels (no
  publishNotReadyAddresses). Its defaulting webhook adds port `jaxjob-port: 6666` to the `jax`
  container when absent; the operator APPENDS `PYTHONUNBUFFERED`, `COORDINATOR_PORT`,
  `COORDINATOR_ADDRESS=<job>-worker-0`, `NUM_PROCESSES`, `PROCESS_ID` to every container, after
  the user's env (so `$(PROCESS_ID)` in env stays verbatim; in command/args it expands).
  Not emulated: gang-scheduling decorations, cleanPodPolicy, activeDeadlineSeconds.
- Trainer v2 TrainJob (`_trainjob`): the TrainJob plus its (Cluster)TrainingRuntime become the
  JobSet `<trainjob>` the Trainer would create, which the JobSet emulation then runs. Only the
  runtime's `trainer` step (replicatedJob labelled `trainer.kubeflow.org/trainjob-ancestor-step:
  trainer`) is simulated; initializer steps are left out.

Upstream sources (facts only; no code copied):
- JobSet, kubernetes-sigs/jobset @ 08dfbdfd (the commit of jaxinfra/schemas/README.md):
  pkg/controllers/jobset_controller.go (constructJob, labelAndAnnotateObject,
  createHeadlessSvcIfNecessary, GetSubdomain, globalJobIndex, jobHashKey),
  pkg/webhooks/jobset_webhook.go (Default), pkg/webhooks/pod_webhook.go (Default),
  api/jobset/v1alpha2/jobset_types.go (label keys, kubebuilder defaults).
- Job: kubernetes pkg/controller/job (job_controller.go manageJob, indexed_job_utils.go),
  pkg/apis/batch/validation (the selector labels the API server puts on the pod template).
- Kubelet: pkg/kubelet/kuberuntime/kuberuntime_container.go makeEnvironmentVariables,
  third_party/forked/golang/expansion/expand.go.
- JAX: jax/_src/clusters/cloud_tpu_cluster.py, jax/_src/clusters/cluster.py (0.10.2).
- Training Operator v1, kubeflow/trainer @ ee38ae8a (the JAXJob CRD's commit; identical in
  kubeflow/training-operator release-1.9): pkg/controller.v1/jax/envvar.go (setPodEnv,
  getPortFromJAXJob), jaxjob_controller.go (controllerName, IsMasterRole), pkg/apis/kubeflow.org/v1
  (jax_types.go, jax_defaults.go, defaulting_utils.go, common_types.go label keys),
  pkg/webhooks/jax/jaxjob_webhook.go, pkg/controller.v1/common (pod.go createNewPod/ReconcilePods,
  service.go CreateNewService, job.go), pkg/core/job.go PastBackoffLimit,
  pkg/controller.v1/control/pod_control.go (pod name = template name), pkg/util/train.
- Trainer v2, kubeflow/trainer @ 8c0f5059 (the TrainJob CRD's commit): pkg/runtime/framework/plugins/
  jax/jax.go (EnforceMLPolicy), jobset/jobset.go (syncPodNetwork, syncParallelCount, Build),
  jobset/builder.go (Trainer), pkg/runtime/core/trainingruntime.go (newRuntimeInfo, runtimePatches),
  clustertrainingruntime.go, pkg/apply/apply.go (upsert = replace by name in place, else append),
  pkg/constants/constants.go, manifests/base/runtimes/jax_distributed.yaml.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
import math
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import copy
from importlib import resources


from jaxinfra import yamlio
from jaxinfra.errors import ManifestError, Problem

from . import model
from .dns import CLUSTER_DOMAIN

# --------------------------------------------------------------------------------------------
# Constants (upstream keys and defaults)
# --------------------------------------------------------------------------------------------

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
JOB_API = "batch/v1"
JAXJOB_API = "kubeflow.org/v1"
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
_SUPPORTED = ("JobSet (jobset.x-k8s.io/v1alpha2), Indexed Job (batch/v1 with completionMode: Indexed), "
              "JAXJob (kubeflow.org/v1) and TrainJob (trainer.kubeflow.org/v1alpha1)")

# Kinds that create no pods; accepted silently (Services, ConfigMaps and Secrets are read).
_PASSIVE_KINDS = frozenset({
    "Namespace", "ServiceAccount", "Service", "ConfigMap", "Secret", "Role", "RoleBinding",
    "ClusterRole", "ClusterRoleBinding", "NetworkPolicy", "PriorityClass",
    # Kueue queueing objects (jaxinfra may emit them); they gate admission, not pod shape.
    "ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "Topology",
    # Trainer v2 runtimes: read by TrainJobs.
    "TrainingRuntime", "ClusterTrainingRuntime",
})

# JobSet label/annotation keys (api/jobset/v1alpha2/jobset_types.go, pkg/constants).
JS = "jobset.sigs.k8s.io/"
JS_NAME, JS_UID, JS_RJOB, JS_RJOB_REPLICAS = JS + "jobset-name", JS + "jobset-uid", JS + "replicatedjob-name", JS + "replicatedjob-replicas"
JS_GLOBAL_REPLICAS, JS_JOB_INDEX, JS_JOB_GLOBAL_INDEX, JS_JOB_KEY = JS + "global-replicas", JS + "job-index", JS + "job-global-index", JS + "job-key"
JS_RESTART, JS_GROUP, JS_GROUP_REPLICAS, JS_GROUP_INDEX = JS + "restart-attempt", JS + "group-name", JS + "group-replicas", JS + "job-group-index"
JS_COORDINATOR, JS_PRIORITY = JS + "coordinator", JS + "priority"
JS_EXCLUSIVE, JS_NODE_SELECTOR = "alpha.jobset.sigs.k8s.io/exclusive-topology", "alpha.jobset.sigs.k8s.io/node-selector"

# Job controller / Job API keys.
JOB_NAME, JOB_NAME_LEGACY = "batch.kubernetes.io/job-name", "job-name"
JOB_UID, JOB_UID_LEGACY = "batch.kubernetes.io/controller-uid", "controller-uid"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"

# Training Operator v1 (pkg/apis/kubeflow.org/v1: common_types.go, jax_types.go; jaxjob_controller.go).
KF = "training.kubeflow.org/"
KF_OPERATOR, KF_JOB_NAME, KF_REPLICA_TYPE, KF_REPLICA_INDEX, KF_JOB_ROLE = (
    KF + "operator-name", KF + "job-name", KF + "replica-type", KF + "replica-index", KF + "job-role")
JAXJOB_CONTROLLER, JAXJOB_CONTAINER, JAXJOB_PORT_NAME, JAXJOB_DEFAULT_PORT = "jaxjob-controller", "jax", "jaxjob-port", 6666
JAXJOB_ENV = ("PYTHONUNBUFFERED", "COORDINATOR_PORT", "COORDINATOR_ADDRESS", "NUM_PROCESSES", "PROCESS_ID")

# Trainer v2 (pkg/constants/constants.go).
TRAINER_ANCESTOR, TRAINER_STEP, TRAINER_NODE, TRAINER_PORT = "trainer.kubeflow.org/trainjob-ancestor-step", "trainer", "node", 29500
UPSTREAM_RUNTIME = "jax-distributed"            # ClusterTrainingRuntime installed with the Trainer
_UNSUPPORTED_POLICIES = ("torch", "mpi", "xgboost", "flux")

JAX_DEFAULT_TPU_PORT = 8482          # jax/_src/clusters/cloud_tpu_cluster.py coordinator_port
TPU, GPU = "google.com/tpu", "nvidia.com/gpu"
_PRIORITY_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")      # kubelet IsEnvVarName
_SUBSCRIPT = re.compile(r"metadata\.(labels|annotations)\['(.+)'\]")
_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)([a-zA-Z]*)")
_SUFFIX = {"": 1, "m": Fraction(1, 1000), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
           "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


# --------------------------------------------------------------------------------------------
# Reading manifests
# --------------------------------------------------------------------------------------------

def load_files(paths: Iterable[str | Path]) -> list[dict]:
    """Every manifest of some multi-document YAML files; all unreadable files reported at once."""
    manifests, problems = yamlio.read_manifests(paths)
    if problems:
        raise ManifestError(problems)
    return manifests


def _meta(obj: Mapping) -> Mapping:
    return obj.get("metadata") or {}


def _ns(obj: Mapping) -> str:
    return _meta(obj).get("namespace") or "default"


def _oid(obj: Mapping) -> str:
    """`Kind/namespace/name`: how problems and workloads name an object."""
    return f"{obj.get('kind')}/{_ns(obj)}/{_meta(obj).get('name')}"


def _uid(*parts: str) -> str:
    """A deterministic fake UID (metadata.uid is random upstream)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "jaxinfra-sim/" + "/".join(parts)))


def _b64(value: Any) -> str:
    """A Secret's data value (base64); kept as written when it is not base64."""
    try:
        return base64.b64decode(str(value), validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return str(value)


def _str_value(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _strings(mapping: Mapping | None) -> dict[str, str]:
    """Labels/annotations/data as the API stores them: string values."""
    return {str(k): _str_value(v) for k, v in (mapping or {}).items()}


@dataclass(frozen=True)
class _Service:
    """A Service as DNS sees it; `origin` says who creates it (the manifests or a controller)."""

    namespace: str
    name: str
    selector: Mapping[str, str] | None
    headless: bool
    publish_not_ready: bool
    ports: tuple[tuple[int, Any], ...]  # (port, targetPort)
    origin: str
    operator_owned: bool = False        # created by an operator with no setting for it (Training Operator v1)

    def selects(self, pod: model.Pod) -> bool:
        return bool(self.selector) and pod.namespace == self.namespace and all(pod.labels.get(k) == v for k, v in self.selector.items())


def _service(obj: Mapping) -> _Service:
    spec = obj.get("spec") or {}
    ports = tuple((p.get("port"), p.get("targetPort", p.get("port"))) for p in spec.get("ports") or [])
    selector = spec.get("selector")
    return _Service(_ns(obj), _meta(obj).get("name", ""), _strings(selector) if selector else None,
                    spec.get("clusterIP") == "None", bool(spec.get("publishNotReadyAddresses", False)), ports, _oid(obj))


@dataclass
class _Objects:
    """The passive objects pods read: Services (DNS), ConfigMaps and Secrets (env), PriorityClasses."""

    services: dict[tuple[str, str], _Service] = field(default_factory=dict)
    config_maps: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    secrets: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    priority_classes: dict[str, int] = field(default_factory=lambda: dict(_PRIORITY_CLASSES))
    namespaces: set[str] = field(default_factory=lambda: {"default"})
    runtimes: dict[tuple[str, str, str], Mapping] = field(default_factory=dict)   # (kind, namespace or "", name)
    restarts: int = 0     # times the pods were recreated: JobSet status.restarts (stamped on Jobs and pods); new pod names

    def add(self, obj: Mapping) -> None:
        kind, key = obj.get("kind"), (_ns(obj), _meta(obj).get("name", ""))
        self.namespaces.add(_meta(obj).get("name", "") if kind == "Namespace" else key[0])
        if kind == "Service":
            self.services.setdefault(key, _service(obj))
        elif kind == "ConfigMap":
            self.config_maps[key] = _strings(obj.get("data"))
        elif kind == "Secret":
            data = {k: _b64(v) for k, v in (obj.get("data") or {}).items()}
            self.secrets[key] = data | _strings(obj.get("stringData"))
        elif kind == "PriorityClass" and isinstance(obj.get("value"), int):
            self.priority_classes[key[1]] = obj["value"]
        elif kind in ("TrainingRuntime", "ClusterTrainingRuntime") and obj.get("apiVersion") == TRAINER_API:
            self.runtimes[(kind, key[0] if kind == "TrainingRuntime" else "", key[1])] = obj

    def runtime(self, kind: str, namespace: str, name: str) -> Mapping | None:
        """A TrainJob's runtimeRef: from the manifests, else the upstream `jax-distributed` ClusterTrainingRuntime."""
        found = self.runtimes.get((kind, namespace if kind == "TrainingRuntime" else "", name))
        if found is None and kind == "ClusterTrainingRuntime" and name == UPSTREAM_RUNTIME:
            return _upstream_runtime()
        return found


@lru_cache(maxsize=1)
def _upstream_runtime() -> Mapping:
    """The upstream `jax-distributed` ClusterTrainingRuntime (package data, loaded on first use)."""
    text = resources.files(__package__).joinpath("jax_distributed_runtime.yaml").read_text(encoding="utf-8")
    [runtime] = yamlio.load(text)
    return runtime


# --------------------------------------------------------------------------------------------
# Workload kinds: each turns one manifest into the Indexed Jobs its controller creates
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _ChildJob:
    """One Indexed Job as its controller creates it: pod template metadata already stamped."""

    name: str
    uid: str
    job_index: int                 # JobSet job-index; 0 for a plain Job
    completions: int
    parallelism: int
    pod_labels: Mapping[str, str]
    pod_annotations: Mapping[str, str]
    pod_spec: Mapping[str, Any]
    subdomain: str | None
    backoff_limit_per_index: bool
    operator: _OperatorPods | None = None    # set: an operator creates these pods itself, with no Job (JAXJob)
    container_name: str | None = None        # the container that runs JAX; None: the first

    @cached_property
    def container(self) -> Mapping:
        """The container that runs JAX: the named one (JAXJob: `jax`), else the first."""
        containers = self.pod_spec.get("containers") or [{}]
        return next((c for c in containers if c.get("name") == self.container_name), containers[0])

    @cached_property
    def accelerator(self) -> tuple[str, Any]:
        """("tpu" | "gpu" | "cpu", chips per host) of the JAX container: the same for every pod of the Job."""
        return _accelerator(self.container)

    @cached_property
    def worker_hostnames(self) -> str:
        """`<hostname>.<subdomain>` of every pod of this Job in index order (built once per Job, not per pod)."""
        return ",".join(f"{self.name}-{i}.{self.subdomain}" for i in range(self.completions))


@dataclass(frozen=True)
class _OperatorPods:
    """Pods an operator creates one by one (no Job controller): `<_ChildJob.name>-<index>`, with per-index labels
    and the env it appends to every container."""

    labels: Callable[[int], Mapping[str, str]]
    env: Callable[[int], Sequence[Mapping]]


@dataclass
class _Draft:
    """What a workload kind's controller makes of one manifest, before pods exist."""

    kind: str
    namespace: str
    name: str
    jobs: list[_ChildJob]
    restart: model.RestartPolicy
    services: list[_Service] = field(default_factory=list)   # Services its controller creates if absent
    problems: list[Problem] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


def _int(value: Any, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def _counts(job_spec: Mapping, where: str) -> tuple[int, int, list[Problem]]:
    """(completions, parallelism, problems): parallelism defaults to 1 (Job API), completions to parallelism."""
    parallelism = _int(job_spec.get("parallelism"), 1)
    completions = _int(job_spec.get("completions"), parallelism)
    problems = []
    if job_spec.get("completions") is None:
        problems.append(Problem(f"{where} completions", None, "an Indexed Job needs completions: the API server rejects it without",
                                f"set completions: {parallelism} (one per JAX process)"))
    if parallelism < completions:
        problems.append(Problem(f"{where} parallelism", parallelism,
                                f"parallelism < completions ({completions}): only {parallelism} pods run at once, but JAX needs all "
                                f"{completions} processes running together, so the group never initializes",
                                f"set parallelism: {completions}"))
    return completions, parallelism, problems


def _restart(kind: str, job_spec: Mapping, max_restarts: int = 0) -> model.RestartPolicy:
    """Failure semantics; backoffLimit defaults to 6, or to unlimited (None) under backoffLimitPerIndex."""
    per_index = job_spec.get("backoffLimitPerIndex")
    default = None if per_index is not None else 6
    limit = job_spec.get("backoffLimit")
    return model.RestartPolicy(kind=kind, max_restarts=max_restarts,
                               backoff_limit=int(limit) if limit is not None else default,
                               backoff_limit_per_index=per_index,
                               pod_failure_rules=tuple((job_spec.get("podFailurePolicy") or {}).get("rules") or ()))


def _indexed_job(obj: Mapping, objects: _Objects) -> _Draft | Problem:
    """A batch/v1 Job: only Indexed Jobs give pods a completion index and a stable hostname."""
    spec, name, ns = obj.get("spec") or {}, _meta(obj).get("name", ""), _ns(obj)
    mode = spec.get("completionMode", "NonIndexed")
    if mode != "Indexed":
        return Problem(_oid(obj), f"completionMode: {mode}",
                       "a NonIndexed Job gives its pods no completion index and no stable hostname, so JAX processes cannot "
                       f"find rank 0 or know their rank; supported: {_SUPPORTED}",
                       "set spec.completionMode: Indexed with completions = parallelism = number of processes")
    template = spec.get("template") or {}
    completions, parallelism, problems = _counts(spec, f"{_oid(obj)} spec")
    uid = _meta(obj).get("uid") or _uid("Job", ns, name)
    job = _ChildJob(name, uid, 0, completions, parallelism, _strings(_meta(template).get("labels")),
                    _strings(_meta(template).get("annotations")), template.get("spec") or {},
                    (template.get("spec") or {}).get("subdomain"), spec.get("backoffLimitPerIndex") is not None)
    return _Draft("Job", ns, name, [job], _restart("job", spec), problems=problems)


def _jobset_stamp(js: Mapping, rjob: Mapping, job_index: int, global_index: int, group_index: int,
                  group_replicas: int, global_replicas: int, restarts: int) -> dict[str, str]:
    """The keys labelAndAnnotateObject puts on child Jobs and their pods (as labels and as annotations)."""
    ns, name, rjob_name = _ns(js), _meta(js).get("name", ""), rjob.get("name", "")
    job_name = f"{name}-{rjob_name}-{job_index}"
    stamp = {
        JS_NAME: name, JS_UID: _meta(js).get("uid") or _uid("JobSet", ns, name), JS_RJOB: rjob_name,
        JS_RESTART: str(restarts), JS_RJOB_REPLICAS: str(_int(rjob.get("replicas"), 1)), JS_GLOBAL_REPLICAS: str(global_replicas),
        JS_JOB_INDEX: str(job_index), JS_JOB_KEY: hashlib.sha1(f"{ns}/{job_name}".encode()).hexdigest(),
        JS_JOB_GLOBAL_INDEX: str(global_index), JS_GROUP: rjob.get("groupName") or "default",
        JS_GROUP_REPLICAS: str(group_replicas), JS_GROUP_INDEX: str(group_index),
    }
    coordinator = (js.get("spec") or {}).get("coordinator")
    if coordinator:
        stamp[JS_COORDINATOR] = (f"{name}-{coordinator.get('replicatedJob')}-{_int(coordinator.get('jobIndex'), 0)}-"
                                 f"{_int(coordinator.get('podIndex'), 0)}.{_jobset_subdomain(js)}")
    return stamp


def _jobset_subdomain(js: Mapping) -> str:
    return ((js.get("spec") or {}).get("network") or {}).get("subdomain") or _meta(js).get("name", "")


def _jobset_exclusive(js: Mapping, rjob: Mapping) -> dict[str, str]:
    """Exclusive-placement annotations copied from the JobSet or the replicatedJob template (annotations only)."""
    out: dict[str, str] = {}
    for source in (_meta(js).get("annotations") or {}, _meta(rjob.get("template") or {}).get("annotations") or {}):
        if JS_EXCLUSIVE in source:
            out[JS_EXCLUSIVE] = source[JS_EXCLUSIVE]
            if JS_NODE_SELECTOR in source:
                out[JS_NODE_SELECTOR] = source[JS_NODE_SELECTOR]
    return out


def _priority(pod_spec: Mapping, objects: _Objects) -> str:
    """spec.priority as the Priority admission plugin resolves it (0 without a known class)."""
    if isinstance(pod_spec.get("priority"), int):
        return str(pod_spec["priority"])
    return str(objects.priority_classes.get(pod_spec.get("priorityClassName") or "", 0))


def _jobset(obj: Mapping, objects: _Objects) -> _Draft | Problem:
    """A JobSet: one Indexed Job per replicatedJob replica, named `<js>-<rjob>-<jobIndex>`."""
    spec, name, ns = obj.get("spec") or {}, _meta(obj).get("name", ""), _ns(obj)
    network = spec.get("network") or {}
    dns = network.get("enableDNSHostnames", True) is not False        # webhook default: true
    subdomain = _jobset_subdomain(obj) if dns else None
    rjobs = spec.get("replicatedJobs") or []
    replicas = [_int(r.get("replicas"), 1) for r in rjobs]
    groups: Counter[str] = Counter()
    for r, n in zip(rjobs, replicas):
        groups[r.get("groupName") or "default"] += n
    jobs, problems, seen_groups = [], [], Counter[str]()
    for r, n in zip(rjobs, replicas):
        job_spec = (r.get("template") or {}).get("spec") or {}
        mode = job_spec.get("completionMode", "Indexed")                # webhook default: Indexed
        where = f"{_oid(obj)} replicatedJobs[{r.get('name')}]"
        if mode != "Indexed":
            return Problem(where, f"completionMode: {mode}", f"NonIndexed child Jobs have no stable hostnames or ranks; supported: {_SUPPORTED}",
                           "remove completionMode (JobSet defaults it to Indexed)")
        completions, parallelism, count_problems = _counts(job_spec, f"{where}.template.spec")
        problems += count_problems
        pod_template = job_spec.get("template") or {}
        pod_spec = dict(pod_template.get("spec") or {})
        group = r.get("groupName") or "default"
        for j in range(n):
            stamp = _jobset_stamp(obj, r, j, len(jobs), seen_groups[group], groups[group], sum(replicas), objects.restarts)
            seen_groups[group] += 1
            labels = {**_strings(_meta(pod_template).get("labels")), **stamp}
            annotations = {**_strings(_meta(pod_template).get("annotations")), **stamp, **_jobset_exclusive(obj, r)}
            if JS_NODE_SELECTOR not in annotations:                    # pod webhook: priority label
                labels[JS_PRIORITY] = _priority(pod_spec, objects)
            child = f"{name}-{r.get('name', '')}-{j}"
            jobs.append(_ChildJob(child, _uid("Job", ns, child), j, completions, parallelism, labels, annotations, pod_spec,
                                  subdomain if dns else pod_spec.get("subdomain"), job_spec.get("backoffLimitPerIndex") is not None))
    services = []
    if dns:   # createHeadlessSvcIfNecessary: only when no Service of that name exists in the namespace
        services.append(_Service(ns, subdomain, {JS_NAME: name}, True, network.get("publishNotReadyAddresses", True) is not False,
                                 (), f"JobSet/{ns}/{name} (headless Service created by the JobSet controller)"))
    first = ((rjobs[0].get("template") or {}).get("spec") or {}) if rjobs else {}
    restart = _restart("jobset", first, _int((spec.get("failurePolicy") or {}).get("maxRestarts"), 0))
    return _Draft("JobSet", ns, name, jobs, restart, services, problems)


def _jaxjob_restart(policy: str, backoff_limit: Any) -> model.RestartPolicy:
    """A JAXJob's failure semantics as "job"-style pod-failure counting (the engine restarts the whole group; the
    operator restarts pods one by one, but when one JAX process dies the others fail too, so each attempt's failures
    count as they would on the cluster).

    - restartPolicy Never (the JAXJob default): the first failed pod fails the JAXJob (UpdateJobStatus).
    - OnFailure / Always: the kubelet restarts the container; the JAXJob fails once the containers' restartCounts sum
      to runPolicy.backoffLimit (PastBackoffLimit: `>= limit`, or `> 0` for 0), i.e. more than limit - 1 failures;
      no backoffLimit: unlimited (the simulation's --timeout bounds it). Always is treated like OnFailure.
    - ExitCode: exit codes >= 128 (signals) are retried, others fail the JAXJob; expressed as a podFailurePolicy-style
      FailJob rule, so the engine's reason reads "podFailurePolicy: FailJob". Its backoff counting is approximated
      like OnFailure (upstream counts workqueue retries there).
    """
    if policy not in ("OnFailure", "Always", "ExitCode"):
        return model.RestartPolicy(kind="job", backoff_limit=0)
    limit = _int(backoff_limit, -1)
    rules = ({"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": list(range(128, 256))}},) if policy == "ExitCode" else ()
    return model.RestartPolicy(kind="job", backoff_limit=max(limit - 1, 0) if limit >= 0 else None, pod_failure_rules=rules)


def _jaxjob(obj: Mapping, objects: _Objects) -> _Draft | Problem:
    """A Training Operator v1 JAXJob: Worker pods `<job>-worker-<i>` created directly by the operator, one headless
    Service per replica, and the operator's env appended to every container."""
    spec, name, ns = obj.get("spec") or {}, _meta(obj).get("name", ""), _ns(obj)
    replica_specs = spec.get("jaxReplicaSpecs") or {}
    where = f"{_oid(obj)} spec.jaxReplicaSpecs"
    # Defaulting: replica type keys are camel-cased ("worker" -> "Worker"); the webhook accepts only Worker.
    others = [k for k in replica_specs if str(k).lower() != "worker"]
    if others:
        return Problem(f"{where}.{others[0]}", others, "the Training Operator's webhook accepts only the replica type Worker for a JAXJob",
                       "put every JAX process under jaxReplicaSpecs.Worker")
    worker = next((v for k, v in replica_specs.items() if str(k).lower() == "worker"), None) or {}
    pod_template = worker.get("template") or {}
    pod_spec = copy.deepcopy(dict(pod_template.get("spec") or {}))
    containers = pod_spec.get("containers") or []
    jax = next((c for c in containers if c.get("name") == JAXJOB_CONTAINER), None)
    if jax is None:
        return Problem(f"{where}.Worker.template.spec.containers", [c.get("name") for c in containers],
                       f"must have at least one container with name {JAXJOB_CONTAINER} (the Training Operator's webhook rejects the "
                       f"JAXJob; its controller reads the coordinator port from container '{JAXJOB_CONTAINER}' only)",
                       f"name the container that runs JAX '{JAXJOB_CONTAINER}'")
    # Defaulting webhook: port `jaxjob-port: 6666` on the jax container unless a port has that name.
    ports = jax.setdefault("ports", [])
    if not any(p.get("name") == JAXJOB_PORT_NAME for p in ports):
        ports.append({"name": JAXJOB_PORT_NAME, "containerPort": JAXJOB_DEFAULT_PORT})
    port = next(p.get("containerPort") for p in ports if p.get("name") == JAXJOB_PORT_NAME)
    replicas = _int(worker.get("replicas"), 1)                          # defaulting: 1
    restart_policy = worker.get("restartPolicy") or "Never"             # defaulting: Never
    pod_spec["restartPolicy"] = "Never" if restart_policy == "ExitCode" else restart_policy   # replica spec overrides the template
    coordinator = f"{name}-worker-0"
    selector = {KF_OPERATOR: JAXJOB_CONTROLLER, KF_JOB_NAME: name, KF_REPLICA_TYPE: "worker"}

    def labels(i: int) -> dict[str, str]:
        return {**selector, KF_REPLICA_INDEX: str(i), **({KF_JOB_ROLE: "master"} if i == 0 else {})}

    def env(i: int) -> list[Mapping]:
        values = ("1", str(port), coordinator, str(replicas), str(i))
        return [{"name": k, "value": v} for k, v in zip(JAXJOB_ENV, values)]

    job = _ChildJob(f"{name}-worker", _meta(obj).get("uid") or _uid("JAXJob", ns, name), 0, replicas, replicas,
                    _strings(_meta(pod_template).get("labels")), _strings(_meta(pod_template).get("annotations")), pod_spec,
                    pod_spec.get("subdomain"), False, _OperatorPods(labels, env), JAXJOB_CONTAINER)
    svc_ports = tuple((p.get("containerPort"), p.get("containerPort")) for p in ports)
    services = [_Service(ns, f"{name}-worker-{i}", {**selector, KF_REPLICA_INDEX: str(i)}, True, False, svc_ports,
                         f"JAXJob/{ns}/{name} (headless Service {name}-worker-{i} created by the Training Operator)", True)
                for i in range(replicas)]
    restart = _jaxjob_restart(restart_policy, (spec.get("runPolicy") or {}).get("backoffLimit"))
    return _Draft("JAXJob", ns, name, [job], restart, services)


def _upsert(items: list, item: Mapping, key: str = "name") -> None:
    """Trainer's apply.Upsert*: replace the entry with the same key in place, else append."""
    for i, existing in enumerate(items):
        if existing.get(key) == item.get(key):
            items[i] = item
            return
    items.append(item)


def _strategic_merge(base: Any, patch: Any) -> Any:
    """A strategic merge patch as far as runtimePatches use it: maps merge recursively (null deletes), lists of
    named objects (replicatedJobs, containers, env, volumes) merge by name, other lists are replaced."""
    if isinstance(base, Mapping) and isinstance(patch, Mapping):
        out = dict(base)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = _strategic_merge(base.get(k), v)
        return out
    if isinstance(base, list) and isinstance(patch, list) and all(isinstance(x, Mapping) and "name" in x for x in base + patch):
        out = list(base)
        for item in patch:
            i = next((i for i, x in enumerate(out) if x["name"] == item["name"]), None)
            if i is None:
                out.append(item)
            else:
                out[i] = _strategic_merge(out[i], item)
        return out
    return copy.deepcopy(patch)


def _trainjob(obj: Mapping, objects: _Objects) -> _Draft | Problem:
    """A Trainer v2 TrainJob: the JobSet `<trainjob>` the Trainer builds from its runtime, run by the JobSet emulation."""
    spec, name, ns = obj.get("spec") or {}, _meta(obj).get("name", ""), _ns(obj)
    ref = spec.get("runtimeRef") or {}
    kind, runtime_name = ref.get("kind") or "ClusterTrainingRuntime", ref.get("name", "")     # CRD default kind
    where = f"{_oid(obj)} spec.runtimeRef"
    if kind not in ("ClusterTrainingRuntime", "TrainingRuntime") or (ref.get("apiGroup") or "trainer.kubeflow.org") != "trainer.kubeflow.org":
        return Problem(where, ref, f"runtimeRef must name a ClusterTrainingRuntime or TrainingRuntime of trainer.kubeflow.org, not {kind}",
                       "set runtimeRef.kind: ClusterTrainingRuntime (or TrainingRuntime)")
    runtime = objects.runtime(kind, ns, runtime_name)
    if runtime is None:
        scope = f" in namespace '{ns}'" if kind == "TrainingRuntime" else ""
        known = sorted({n for (k, k_ns, n) in objects.runtimes if k == kind and k_ns == (ns if kind == "TrainingRuntime" else "")}
                       | ({UPSTREAM_RUNTIME} if kind == "ClusterTrainingRuntime" else set()))
        return Problem(where, runtime_name,
                       f"{kind} '{runtime_name}'{scope} is neither in the manifests nor the upstream '{UPSTREAM_RUNTIME}': the Trainer "
                       f"creates nothing for this TrainJob ({'not found ClusterTrainingRuntime specified in TrainJob' if scope == '' else 'TrainingRuntime specified in TrainJob is not found'})",
                       f"reference one of {known}, or add the {kind} to the manifests")
    rt_spec = runtime.get("spec") or {}
    ml = rt_spec.get("mlPolicy") or {}
    rt_where = f"{_oid(runtime)} spec"
    other = [p for p in _UNSUPPORTED_POLICIES if p in ml]
    if other:
        return Problem(f"{rt_where}.mlPolicy", sorted(ml), f"mlPolicy.{other[0]} is not a JAX runtime; the simulator emulates the JAX plugin "
                       "(and no ML policy)", "reference a runtime with mlPolicy.jax, e.g. the upstream 'jax-distributed'")
    template = copy.deepcopy(dict(rt_spec.get("template") or {}))
    meta = dict(template.get("metadata") or {})
    js_spec = dict(template.get("spec") or {})
    for patch in spec.get("runtimePatches") or []:            # newRuntimeInfo: labels/annotations, then the spec
        patched = ((patch or {}).get("trainingRuntimeSpec") or {}).get("template") or {}
        for part in ("labels", "annotations"):
            meta[part] = {**(meta.get(part) or {}), **((patched.get("metadata") or {}).get(part) or {})}
        if patched.get("spec"):
            order = [r.get("name") for r in js_spec.get("replicatedJobs") or []]
            js_spec = _strategic_merge(js_spec, patched["spec"])
            js_spec["replicatedJobs"] = sorted(js_spec.get("replicatedJobs") or [],
                                               key=lambda r: order.index(r.get("name")) if r.get("name") in order else len(order))
    trainer = spec.get("trainer") or {}
    trainer_jobs = [r for r in js_spec.get("replicatedJobs") or []
                    if (_meta(r.get("template") or {}).get("labels") or {}).get(TRAINER_ANCESTOR) == TRAINER_STEP]
    if not trainer_jobs:
        return Problem(f"{rt_where}.template.spec.replicatedJobs", [r.get("name") for r in js_spec.get("replicatedJobs") or []],
                       f"no replicatedJob is labelled {TRAINER_ANCESTOR}: {TRAINER_STEP}, so the Trainer applies nothing of the TrainJob",
                       f"label the training replicatedJob's template {TRAINER_ANCESTOR}: {TRAINER_STEP}")
    problems: list[Problem] = []
    count = _int(trainer.get("numNodes"), _int(ml.get("numNodes"), 1) if ml else 1)
    for rjob in trainer_jobs:
        rjob["replicas"] = 1                                   # builder.Trainer: one Job per trainer step
        job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
        job_spec["parallelism"] = job_spec["completions"] = count   # syncParallelCount
        pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
        node = next((c for c in pod_spec.get("containers") or [] if c.get("name") == TRAINER_NODE), None)
        if node is None:
            problems.append(Problem(f"{rt_where}.template.spec.replicatedJobs[{rjob.get('name')}] containers",
                                    [c.get("name") for c in pod_spec.get("containers") or []],
                                    f"no container named '{TRAINER_NODE}': the Trainer applies the TrainJob's image, command, env, "
                                    "resources and the JAX env only to that container", f"name the training container '{TRAINER_NODE}'"))
            continue
        if trainer.get("resourcesPerNode"):                    # newRuntimeInfo: merged per resource name
            res, extra = node.setdefault("resources", {}), trainer["resourcesPerNode"]
            for part in ("limits", "requests"):
                if extra.get(part):
                    res[part] = {**(res.get(part) or {}), **extra[part]}
        env = node.setdefault("env", [])
        if "jax" in ml:                                        # JAX plugin: EnforceMLPolicy
            for item in ({"name": "JAX_NUM_PROCESSES", "value": str(count)},
                         {"name": "JAX_PROCESS_ID", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}},
                         {"name": "JAX_COORDINATOR_ADDRESS", "value": f"{name}-{TRAINER_NODE}-0-0.{name}:{TRAINER_PORT}"}):
                _upsert(env, item)
            ports = node.setdefault("ports", [])
            if not any(p.get("containerPort") == TRAINER_PORT for p in ports):
                ports.append({"containerPort": TRAINER_PORT})
        for key in ("image", "command", "args"):               # builder.Trainer
            if trainer.get(key) is not None:
                node[key] = copy.deepcopy(trainer[key])
        for item in trainer.get("env") or []:
            _upsert(env, copy.deepcopy(item))
    jobset = {"apiVersion": JOBSET_API, "kind": "JobSet",
              "metadata": {"name": name, "namespace": ns, "labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {}},
              "spec": {**js_spec, "replicatedJobs": trainer_jobs}}
    made = _jobset(jobset, objects)
    if isinstance(made, Problem):
        return made
    made.kind = "TrainJob"
    made.problems[:0] = problems
    return made


# Adding a workload kind is one function here.
_WORKLOAD_KINDS: dict[tuple[str, str], Callable[[Mapping, _Objects], _Draft | Problem]] = {
    (JOBSET_API, "JobSet"): _jobset,
    (JOB_API, "Job"): _indexed_job,
    (JAXJOB_API, "JAXJob"): _jaxjob,
    (TRAINER_API, "TrainJob"): _trainjob,
}


# --------------------------------------------------------------------------------------------
# Env, as the kubelet resolves it
# --------------------------------------------------------------------------------------------

def expand(text: str, lookup: Callable[[str], str | None]) -> str:
    """Kubernetes `$(VAR)` expansion: `$$` is a literal `$`, an unknown or unterminated reference stays verbatim.

    Same scanning rules as third_party/forked/golang/expansion (Expand, tryReadVariableName).
    """
    if "$" not in text:
        return text
    out, checkpoint, i, n = [], 0, 0, len(text)
    while i < n:
        if text[i] == "$" and i + 1 < n:
            out.append(text[checkpoint:i])
            nxt = text[i + 1]
            if nxt == "(":
                close = text.find(")", i + 2)
                if close < 0:
                    out.append("$(")
                    i += 1
                else:
                    var = text[i + 2:close]
                    value = lookup(var)
                    out.append(value if value is not None else f"$({var})")
                    i = close
            else:
                out.append("$" if nxt == "$" else "$" + nxt)
                i += 1
            checkpoint = i + 1
        i += 1
    out.append(text[checkpoint:])
    return "".join(out)


def _quantity(value: Any) -> Fraction | None:
    """A resource.Quantity as an exact number, or None when it does not parse."""
    m = _QUANTITY.fullmatch(str(value).strip())
    if not m or m.group(2) not in _SUFFIX:
        return None
    return Fraction(m.group(1)) * _SUFFIX[m.group(2)]


def _limit(container: Mapping, resource: str) -> Any:
    """A container's limit for a resource, falling back to its request (extended resources need both equal)."""
    res = container.get("resources") or {}
    return (res.get("limits") or {}).get(resource, (res.get("requests") or {}).get(resource))


@dataclass
class _PodFacts:
    """What the downward API can read from one pod. Each simulated pod has its own node `sim-node-<k>`, and
    its host IP is its own loopback address (the simulator's "node" is the pod's address)."""

    name: str
    namespace: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    node: str
    service_account: str
    ip: str
    containers: Sequence[Mapping]

    def field_ref(self, path: str) -> str | None:
        """A fieldRef's value (missing label/annotation keys read as ""), or None for an unsupported path."""
        simple = {"metadata.name": self.name, "metadata.namespace": self.namespace, "metadata.uid": self.uid,
                  "spec.nodeName": self.node, "spec.serviceAccountName": self.service_account,
                  "status.podIP": self.ip, "status.podIPs": self.ip, "status.hostIP": self.ip, "status.hostIPs": self.ip}
        if path in simple:
            return simple[path]
        m = _SUBSCRIPT.fullmatch(path)
        if m:
            return (self.labels if m.group(1) == "labels" else self.annotations).get(m.group(2), "")
        return None

    def resource(self, ref: Mapping, container: Mapping) -> str:
        """A resourceFieldRef, best effort: the limit, else the request, else 0 (node allocatable is unknown here)."""
        if ref.get("containerName"):
            container = next((c for c in self.containers if c.get("name") == ref["containerName"]), container)
        kind, _, res = str(ref.get("resource", "")).partition(".")
        res_map = (container.get("resources") or {}).get(kind) or {}
        value = _quantity(res_map.get(res, _limit(container, res) or 0)) or Fraction(0)
        divisor = _quantity(ref.get("divisor", 1)) or Fraction(1)
        return str(math.ceil(value / divisor))


class _EnvResolver:
    """Resolves one container's env exactly as makeEnvironmentVariables does, recording problems."""

    def __init__(self, where: str, facts: _PodFacts, objects: _Objects, problems: list[tuple[str, Problem]]):
        self.where, self.facts, self.objects, self.problems = where, facts, objects, problems

    def _problem(self, kind: str, var: str, value: Any, message: str, fix: str) -> None:
        self.problems.append((f"env|{var}|{kind}", Problem(f"{self.where} env {var}", value, message, fix)))

    def _lookup(self, kind: str, ref: Mapping, var: str) -> str | None:
        """A configMapKeyRef/secretKeyRef value; None when absent (a problem unless optional)."""
        store = self.objects.config_maps if kind == "ConfigMap" else self.objects.secrets
        data = store.get((self.facts.namespace, ref.get("name", "")))
        key = ref.get("key", "")
        if data is not None and key in data:
            return data[key]
        if not ref.get("optional"):
            what = f"{kind} '{ref.get('name')}'" if data is None else f"key '{key}' of {kind} '{ref.get('name')}'"
            self._problem(f"{kind}-missing", var, ref.get("name"),
                          f"{what} is not in the manifests (namespace '{self.facts.namespace}'): the kubelet cannot start the container",
                          f"add the {kind} to the manifests, or mark the reference optional: true")
        return None

    def _env_from(self, container: Mapping) -> dict[str, str]:
        env: dict[str, str] = {}
        for source in container.get("envFrom") or []:
            kind, ref = ("ConfigMap", source["configMapRef"]) if source.get("configMapRef") else ("Secret", source.get("secretRef") or {})
            store = self.objects.config_maps if kind == "ConfigMap" else self.objects.secrets
            data = store.get((self.facts.namespace, ref.get("name", "")))
            if data is None:
                if not ref.get("optional"):
                    self._problem(f"{kind}-missing", "envFrom", ref.get("name"),
                                  f"{kind} '{ref.get('name')}' is not in the manifests (namespace '{self.facts.namespace}')",
                                  f"add the {kind} to the manifests, or mark the envFrom optional: true")
                continue
            for key in sorted(data):     # a Go map: order unspecified; sorted for determinism
                name = source.get("prefix", "") + key
                if _ENV_NAME.fullmatch(name):
                    env[name] = data[key]
        return env

    def _value(self, entry: Mapping, container: Mapping, env: Mapping[str, str]) -> str | None:
        """One env entry's runtime value; None means the kubelet skips it (an optional, absent reference)."""
        var, value, source = entry.get("name", ""), entry.get("value"), entry.get("valueFrom") or {}
        if value not in (None, ""):
            if not isinstance(value, str):
                self._problem("value-type", var, value, "env values must be strings: the API server rejects a YAML number or boolean",
                              f"quote it: value: \"{_str_value(value)}\"")
            return expand(_str_value(value), env.get)
        if source.get("fieldRef"):
            path = source["fieldRef"].get("fieldPath", "")
            resolved = self.facts.field_ref(path)
            if resolved is None:
                self._problem("fieldRef", var, path, "unsupported downward-API fieldPath for env",
                              "use metadata.name|namespace|uid, metadata.labels['k'], metadata.annotations['k'], spec.nodeName, "
                              "spec.serviceAccountName, status.podIP or status.hostIP")
                return ""
            return resolved
        if source.get("resourceFieldRef"):
            return self.facts.resource(source["resourceFieldRef"], container)
        if source.get("configMapKeyRef"):
            return self._lookup("ConfigMap", source["configMapKeyRef"], var)
        if source.get("secretKeyRef"):
            return self._lookup("Secret", source["secretKeyRef"], var)
        return ""

    def resolve(self, container: Mapping, platform: Mapping[str, str], appended: Sequence[Mapping]) -> dict[str, str]:
        """Platform env first, then envFrom, then env in order (each `$(VAR)` sees only what came before),
        then what the Job controller appended."""
        env = dict(platform)
        env.update(self._env_from(container))
        for entry in [*(container.get("env") or []), *appended]:
            value = self._value(entry, container, env)
            if value is not None:
                env[entry.get("name", "")] = value
        return env


def _controller_env(container: Mapping) -> list[Mapping]:
    """The Job controller appends JOB_COMPLETION_INDEX (a fieldRef to the index label) to every container of an
    Indexed Job unless it is already declared. Appended last, so earlier `$(JOB_COMPLETION_INDEX)` references in env
    do NOT expand (kubelet order); command/args do see it."""
    if any(e.get("name") == COMPLETION_INDEX_ENV for e in container.get("env") or []):
        return []
    return [{"name": COMPLETION_INDEX_ENV, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{COMPLETION_INDEX}']"}}}]


def _accelerator(container: Mapping) -> tuple[str, Any]:
    for kind, resource in (("tpu", TPU), ("gpu", GPU)):
        value = _limit(container, resource)
        if value is not None and _quantity(value):
            return kind, value
    return "cpu", None


def _tpu_platform_env(job: _ChildJob, index: int) -> dict[str, str]:
    """The env GKE's TPU webhook injects: only for a pod of an Indexed Job with a subdomain and parallelism > 1
    that requests google.com/tpu (a multi-host slice). Each child Job of a JobSet is one slice, so the hostnames
    list covers that Job only.

    Source: GKE docs "Deploy TPU workloads in GKE Standard" (TPU_WORKER_ID = index 0..pods-1; TPU_WORKER_HOSTNAMES =
    comma-separated, ordered by TPU_WORKER_ID; injected by a mutating webhook under exactly these conditions), as quoted
    in github.com/abatilo/gke-tpu-env-injector. The entry format `<hostname>.<subdomain>` (DNS names the headless
    Service makes resolvable) and TPU_SKIP_MDS_QUERY=true (JAX's GceTpuCluster then skips the metadata server) are
    this simulator's reading of that contract. Where the webhook places these entries is not documented; they are
    treated as defined before the container's own env, so `$(TPU_WORKER_ID)` expands and user values win.
    """
    if job.accelerator[0] != "tpu" or not job.subdomain or job.parallelism <= 1 or job.operator is not None:
        return {}
    return {"TPU_WORKER_ID": str(index), "TPU_WORKER_HOSTNAMES": job.worker_hostnames, "TPU_SKIP_MDS_QUERY": "true"}


def _devices(accelerator: str, count: Any, env: Mapping[str, str]) -> int:
    """Chips per host for TPU/GPU pods, else JAX_NUM_CPU_DEVICES, else 1."""
    if accelerator != "cpu":
        return max(1, int(_quantity(count) or 1))
    return max(1, _int(env.get("JAX_NUM_CPU_DEVICES"), 1))


# --------------------------------------------------------------------------------------------
# Pods
# --------------------------------------------------------------------------------------------

def _ip(ip_base: tuple[int, int], k: int) -> str:
    """The k-th pod's loopback address: 127.b0.(b1 + k // 250).(k % 250 + 2), carrying into b0, never leaving 127/8."""
    value = (127 << 24) + (ip_base[0] << 16) + ((ip_base[1] + k // 250) << 8) + k % 250 + 2
    if value >= 128 << 24:
        raise ValueError(f"ip_base {ip_base} leaves no room for {k + 1} pods inside 127.0.0.0/8")
    return str(ipaddress.IPv4Address(value))


GENERATED_NAME_MAX = 58
"""apimachinery names.MaxGeneratedNameLength: 63 less the 5 characters the API server appends to generateName."""
NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""apimachinery util/rand's alphabet for those characters (no vowels, no 0, 1, 3)."""


def _indexed_pod_name(job: str, index: int, seed: str) -> str:
    """An Indexed Job pod's name: generateName `<job>-<index>-` (the Job controller's
    podGenerateNameWithIndex, trimmed to fit) plus the API server's 5 random characters, here
    drawn from `seed`: reproducible, yet new for a recreated pod. Not the hostname, which a
    script that uses metadata.name as an address finds out on a cluster, and here."""
    tail = f"-{index}-"
    prefix = f"{job}{tail}"
    if len(prefix) > GENERATED_NAME_MAX:
        prefix = prefix[:GENERATED_NAME_MAX - len(tail)] + tail
    digest = hashlib.sha256(seed.encode()).digest()
    return prefix + "".join(NAME_SUFFIX_ALPHABET[b % len(NAME_SUFFIX_ALPHABET)] for b in digest[:5])


def _pod(draft: _Draft, job: _ChildJob, index: int, global_index: int, k: int, ip: str, objects: _Objects,
         problems: list[tuple[str, Problem]]) -> model.Pod:
    """One pod as the Job controller (or an operator creating pods itself) creates it and the kubelet starts it."""
    containers = job.pod_spec.get("containers") or [{}]
    container = job.container
    if job.operator is None:
        # Job API strategy: selector labels; Job controller: index label + annotation, hostname `<job>-<index>`
        # (always, for Indexed Jobs), pod name `<job>-<index>-<random>`.
        hostname = f"{job.name}-{index}"
        name = _indexed_pod_name(job.name, index, f"{job.uid}/{index}/{objects.restarts}")
        labels = {**job.pod_labels, JOB_UID: job.uid, JOB_UID_LEGACY: job.uid, JOB_NAME: job.name, JOB_NAME_LEGACY: job.name,
                  COMPLETION_INDEX: str(index)}
        annotations = {**job.pod_annotations, COMPLETION_INDEX: str(index)}
        if job.backoff_limit_per_index:
            annotations[INDEX_FAILURE_COUNT] = "0"
        appended = _controller_env(container)
    else:
        # An operator's own pod (Training Operator v1): named `<job>-<type>-<index>` exactly; the kubelet makes the pod
        # name its hostname unless spec.hostname is set.
        name = f"{job.name}-{index}"
        hostname = job.pod_spec.get("hostname") or name
        labels = {**job.pod_labels, **job.operator.labels(index)}
        annotations = dict(job.pod_annotations)
        appended = job.operator.env(index)
    node = f"sim-node-{k}"
    facts = _PodFacts(name, draft.namespace, _uid("Pod", draft.namespace, name), labels, annotations, node,
                      job.pod_spec.get("serviceAccountName") or job.pod_spec.get("serviceAccount") or "default", ip, containers)
    resolver = _EnvResolver(f"{draft.id} pod {hostname}", facts, objects, problems)
    env = resolver.resolve(container, _tpu_platform_env(job, index), appended)
    accelerator, count = job.accelerator
    ports = tuple(int(p["containerPort"]) for p in container.get("ports") or [] if str(p.get("containerPort", "")).isdigit())
    return model.Pod(
        workload=draft.id, namespace=draft.namespace, name=name, hostname=hostname, subdomain=job.subdomain, ip=ip,
        job_index=job.job_index, completion_index=index, global_index=global_index, labels=labels, annotations=annotations,
        container=container.get("name", ""), image=container.get("image", ""),
        command=tuple(expand(str(a), env.get) for a in container.get("command") or ()),
        args=tuple(expand(str(a), env.get) for a in container.get("args") or ()),
        env=env, working_dir=container.get("workingDir"), devices=_devices(accelerator, count, env),
        accelerator=accelerator, container_ports=ports, readiness_probe=bool(container.get("readinessProbe")),
        node=node, host_network=bool(job.pod_spec.get("hostNetwork")),
        host_aliases=tuple((str(a.get("ip", "")), tuple(str(h) for h in a.get("hostnames") or ()))
                           for a in job.pod_spec.get("hostAliases") or ()))


# --------------------------------------------------------------------------------------------
# DNS
# --------------------------------------------------------------------------------------------

def _search(name: str, namespace: str) -> list[str]:
    """The names a pod's resolver tries: its search path (ns.svc, svc, cluster domain), then the name itself."""
    if name.endswith("."):
        return [name[:-1]]
    return [f"{name}.{namespace}.svc.{CLUSTER_DOMAIN}", f"{name}.svc.{CLUSTER_DOMAIN}", f"{name}.{CLUSTER_DOMAIN}", name]


class _Dns:
    """Cluster DNS for headless Services: `<host>.<svc>.<ns>.svc.cluster.local` per selected pod whose hostname is set
    and subdomain == svc, and `<svc>.<ns>.svc.cluster.local` -> the first selected pod (kube-dns returns them all)."""

    def __init__(self, services: Iterable[_Service], pods: Sequence[model.Pod]):
        self.records: dict[str, tuple[str, _Service]] = {}
        self.hosts: dict[str, str] = {}
        self.findings = _Findings("name")
        self.by_ip = {p.ip: p for p in pods}
        self.by_host: dict[tuple[str, str], model.Pod] = {}
        for p in pods:
            self.by_host.setdefault((p.namespace, p.hostname), p)
        by_ns: dict[str, list[model.Pod]] = {}
        for p in pods:
            by_ns.setdefault(p.namespace, []).append(p)
        for svc in services:
            if not svc.headless:
                continue
            selected = [p for p in by_ns.get(svc.namespace, ()) if svc.selects(p)]
            if selected:
                self._add(f"{svc.name}.{svc.namespace}.svc.{CLUSTER_DOMAIN}", selected[0].ip, svc)
            for p in selected:
                if p.subdomain == svc.name:
                    self._add(f"{p.hostname}.{svc.name}.{svc.namespace}.svc.{CLUSTER_DOMAIN}", p.ip, svc)
        self.hosts = dict(sorted(self.hosts.items()))

    def _add(self, fqdn: str, ip: str, svc: _Service) -> None:
        if fqdn in self.records:
            first = self.records[fqdn][0]
            if first != ip:
                self.findings.add(f"dup|{svc.origin}", lambda: Problem(
                    svc.origin, fqdn, f"two pods share the DNS name {fqdn}; it resolves to the first, {first}",
                    "give the workloads distinct names so their pod hostnames differ"))
            return
        self.records[fqdn] = (ip, svc)
        short = fqdn[: -len(f".svc.{CLUSTER_DOMAIN}")]           # <host>.<svc>.<ns> or <svc>.<ns>
        rel_own_ns = short.rsplit(".", 1)[0]                     # only resolvable from inside the namespace
        for name in (fqdn, f"{short}.svc", short, rel_own_ns):
            owner = self.hosts.setdefault(name, ip)
            if owner != ip:
                self.findings.add(f"relative|{svc.origin}", lambda n=name, o=owner: Problem(
                    svc.origin, n, f"the relative name {n} means different pods in different namespaces; /etc/hosts keeps the first, {o}",
                    f"use the fully qualified name ({n}.<namespace>.svc.{CLUSTER_DOMAIN} form) or distinct Service names"))

    def resolve(self, name: str, namespace: str) -> tuple[str, _Service] | None:
        for candidate in _search(name, namespace):
            if candidate in self.records:
                return self.records[candidate]
        return None


# --------------------------------------------------------------------------------------------
# Contract checks: coordinator, ports, counts, ranks
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Address:
    var: str           # where it came from
    raw: str
    host: str
    port: int | None


def _split_hostport(raw: str) -> tuple[str, int | None]:
    if raw.startswith("["):
        host, _, rest = raw[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    host, sep, port = raw.rpartition(":")
    if not sep:
        return raw, None
    return host, int(port) if port.isdigit() and 0 < int(port) < 65536 else None


def _is_tpu_detected(pod: model.Pod) -> bool:
    """JAX's GkeTpuCluster applies: a TPU pod with TPU_PROCESS_ADDRESSES or TPU_WORKER_HOSTNAMES."""
    return pod.accelerator == "tpu" and ("TPU_PROCESS_ADDRESSES" in pod.env or "TPU_WORKER_HOSTNAMES" in pod.env)


def _worker_list(pod: model.Pod) -> str:
    return pod.env.get("TPU_PROCESS_ADDRESSES", pod.env.get("TPU_WORKER_HOSTNAMES", ""))


@lru_cache(maxsize=256)
def _hosts_in_slice(worker_list: str) -> int:
    """Entries of a worker list; cached because every pod of a slice shares the same (long) string."""
    return worker_list.count(",") + 1


def _v1_coordinator(pod: model.Pod) -> _Address | None:
    """Training Operator v1: COORDINATOR_ADDRESS (a host, no port) and COORDINATOR_PORT, which the script joins."""
    host = pod.env.get("COORDINATOR_ADDRESS")
    if not host:
        return None
    raw_port = pod.env.get("COORDINATOR_PORT", "")
    port = int(raw_port) if raw_port.isdigit() and 0 < int(raw_port) < 65536 else None
    return _Address("COORDINATOR_ADDRESS", f"{host}:{raw_port}", host, port)


def _coordinator(pod: model.Pod) -> _Address | None:
    """The address jax.distributed.initialize() would use: JAX_COORDINATOR_ADDRESS, else the Training Operator v1
    pair COORDINATOR_ADDRESS + COORDINATOR_PORT, else (TPU detector) MEGASCALE_COORDINATOR_ADDRESS or the first worker,
    port JAX_COORDINATOR_PORT or 8482 (cluster.py)."""
    raw = pod.env.get("JAX_COORDINATOR_ADDRESS")
    if raw:
        host, port = _split_hostport(raw)
        return _Address("JAX_COORDINATOR_ADDRESS", raw, host, port)
    if v1 := _v1_coordinator(pod):
        return v1
    if not _is_tpu_detected(pod):
        return None
    port = _int(pod.env.get("JAX_COORDINATOR_PORT"), JAX_DEFAULT_TPU_PORT)
    if pod.env.get("MEGASCALE_COORDINATOR_ADDRESS"):
        raw = pod.env["MEGASCALE_COORDINATOR_ADDRESS"]
        return _Address("MEGASCALE_COORDINATOR_ADDRESS", raw, raw.split(":")[0], port)
    raw = _worker_list(pod).split(",", 1)[0]
    var = "TPU_PROCESS_ADDRESSES" if "TPU_PROCESS_ADDRESSES" in pod.env else "TPU_WORKER_HOSTNAMES"
    return _Address(var, raw, raw.split(":")[0], port)


def _rank(pod: model.Pod) -> tuple[str, int | None, str] | None:
    """(source, rank or None if not an integer, raw): JAX_PROCESS_ID, else PROCESS_ID (Training Operator v1), else the
    rank JAX's TPU detector derives: TPU_WORKER_ID + MEGASCALE_SLICE_ID x hosts in the slice. None when the pod has none."""
    for var in ("JAX_PROCESS_ID", "PROCESS_ID"):
        if var in pod.env:
            raw = pod.env[var]
            return var, int(raw) if re.fullmatch(r"-?\d+", raw.strip()) else None, raw
    if _is_tpu_detected(pod) and "TPU_WORKER_ID" in pod.env:
        worker, slice_id = pod.env["TPU_WORKER_ID"], pod.env.get("MEGASCALE_SLICE_ID") or "0"
        raw = f"TPU_WORKER_ID={worker} MEGASCALE_SLICE_ID={slice_id}"
        if not (worker.isdigit() and slice_id.isdigit()):
            return "TPU_WORKER_ID", None, raw
        return "TPU_WORKER_ID", int(worker) + int(slice_id) * _hosts_in_slice(_worker_list(pod)), raw
    return None


def _count(pod: model.Pod) -> tuple[str, int | None, str] | None:
    """(source, process count, raw): JAX_NUM_PROCESSES, else NUM_PROCESSES (Training Operator v1), else hosts in the
    slice x MEGASCALE_NUM_SLICES (TPU detector)."""
    for var in ("JAX_NUM_PROCESSES", "NUM_PROCESSES"):
        if var in pod.env:
            raw = pod.env[var]
            return var, _int(raw, -1) if raw.strip().isdigit() else None, raw
    if _is_tpu_detected(pod):
        slices = pod.env.get("MEGASCALE_NUM_SLICES") or "1"
        hosts = _hosts_in_slice(_worker_list(pod))
        return "TPU_WORKER_HOSTNAMES", hosts * int(slices) if slices.isdigit() else None, f"{hosts} hosts x {slices} slices"
    return None


#: Env a controller appends after the container's own env: `$(VAR)` to them in env stays verbatim (kubelet order).
_APPENDED = {COMPLETION_INDEX_ENV: "the Job controller", **{v: "the Training Operator" for v in JAXJOB_ENV}}


def _appended_hint(raw: str) -> tuple[str, str | None]:
    """(message suffix, fix) when a value still holds `$(VAR)` of a controller-appended variable, else ("", None)."""
    found = sorted((v for v in _APPENDED if f"$({v})" in raw), key=lambda v: raw.index(f"$({v})"))
    if not found:
        return "", None
    who = _APPENDED[found[0]]
    names = ", ".join(found)
    hint = f"; $(VAR) in env expands only variables defined earlier in the list, and {names} {'is' if len(found) == 1 else 'are'} appended by {who} after yours"
    if who == "the Job controller":
        return hint, None
    return hint, f"read {names} in the program, or use $({found[0]}) in command/args (they see the whole env)"


class _Findings:
    """Repeated problems collapsed by kind: the first one, with how many other pods (or names) share it,
    so a 6,144-pod workload with one mistake reports one line, not 6,144."""

    def __init__(self, noun: str = "pod") -> None:
        self._first: dict[str, Problem] = {}
        self._count: Counter[str] = Counter()
        self._noun = noun

    def add(self, key: str, make: Callable[[], Problem]) -> None:
        if key not in self._first:
            self._first[key] = make()
        self._count[key] += 1

    def extend(self, items: Iterable[tuple[str, Problem]]) -> None:
        for key, problem in items:
            self.add(key, lambda p=problem: p)

    def problems(self) -> list[Problem]:
        out = []
        for key, p in self._first.items():
            more = self._count[key] - 1
            out.append(p if not more else Problem(p.path, p.value, f"{p.message} (and {more} more {self._noun}{'s' if more > 1 else ''})", p.fix))
        return out


class _Checker:
    """The static contract checks of one workload against the emulated DNS."""

    def __init__(self, wl_id: str, pods: Sequence[model.Pod], dns: _Dns, objects: _Objects, services: Mapping[tuple[str, str], _Service],
                 contract: bool = True):
        self.id, self.pods, self.dns, self.objects, self.services = wl_id, pods, dns, objects, services
        self.contract = contract     # False: the containers' own commands may find rank and coordinator elsewhere
        self.findings = _Findings()
        self.rank_of = [_rank(p) for p in pods]
        zero = [p for p, r in zip(pods, self.rank_of) if r and r[1] == 0]
        self.rank0 = zero[0] if len(zero) == 1 else pods[0]     # rank 0 hosts the coordinator

    def _path(self, pod: model.Pod, var: str) -> str:
        return f"{self.id} pod {pod.hostname} env {var}"

    def _fqdn(self, pod: model.Pod) -> str:
        return f"{pod.hostname}.{pod.subdomain}" if pod.subdomain else pod.hostname

    # --- coordinator --------------------------------------------------------------------
    def coordinator(self) -> None:
        for pod in self.pods:
            address = _coordinator(pod)
            if address is None:
                if len(self.pods) > 1 and self.contract:
                    self.findings.add("no-coordinator", lambda p=pod: Problem(
                        self._path(p, "JAX_COORDINATOR_ADDRESS"), None,
                        "no coordinator address: JAX_COORDINATOR_ADDRESS is unset and the pod is not a TPU pod with TPU_WORKER_HOSTNAMES",
                        f"set JAX_COORDINATOR_ADDRESS to rank 0's DNS name and port, e.g. {self._fqdn(self.rank0)}:{JAX_DEFAULT_TPU_PORT}"))
                continue
            self._address(pod, address)
            if address.var == "JAX_COORDINATOR_ADDRESS" and (v1 := _v1_coordinator(pod)):
                self._address(pod, v1)                            # both contracts set: both must hold
            if address.var == "JAX_COORDINATOR_ADDRESS" and pod.env.get("MEGASCALE_COORDINATOR_ADDRESS"):
                raw = pod.env["MEGASCALE_COORDINATOR_ADDRESS"]     # libtpu's DCN coordinator: also rank 0
                self._address(pod, _Address("MEGASCALE_COORDINATOR_ADDRESS", raw, raw.split(":")[0], None))

    def _address(self, pod: model.Pod, address: _Address) -> None:
        path = self._path(pod, address.var)
        if address.var == "JAX_COORDINATOR_ADDRESS" and address.port is None:
            hint, fix = _appended_hint(address.raw)
            self.findings.add(f"{address.var}|port-missing", lambda: Problem(
                path, address.raw, f"JAX_COORDINATOR_ADDRESS must be host:port (jax.distributed.initialize does not add a port){hint}",
                fix or f"append the coordinator port, e.g. {address.host}:{JAX_DEFAULT_TPU_PORT}"))
            return
        if address.var == "COORDINATOR_ADDRESS" and address.port is None:
            self.findings.add("COORDINATOR_PORT|not-a-port", lambda: Problem(
                self._path(pod, "COORDINATOR_PORT"), pod.env.get("COORDINATOR_PORT"), "COORDINATOR_PORT is not a port number",
                f"name the jax container's coordinator port {JAXJOB_PORT_NAME}"))
            return
        ip, svc = self._resolve(pod, address.host)
        if ip is None:
            def unresolved() -> Problem:      # diagnosed once, not once per pod
                message, fix = self._diagnose(address.host, pod)
                return Problem(path, address.raw, f"host '{address.host}' does not resolve from namespace '{pod.namespace}': {message}", fix)
            self.findings.add(f"{address.var}|unresolved|{address.host}", unresolved)
            return
        if svc is not None and not svc.publish_not_ready and not svc.operator_owned:
            self.findings.add(f"{address.var}|not-ready|{svc.name}", lambda: Problem(
                f"{svc.origin} publishNotReadyAddresses", False,
                f"'{address.host}' resolves only once rank 0 is Ready, but the other processes look it up while it starts",
                "set publishNotReadyAddresses: true on the Service"))
        elif svc is not None and not svc.publish_not_ready and self.rank0.readiness_probe:
            # The operator's Service cannot be changed; without a readinessProbe, rank 0 is Ready once its container runs.
            self.findings.add(f"{address.var}|not-ready-probe|{svc.name}", lambda: Problem(
                f"{self.id} pod {self.rank0.hostname} container {self.rank0.container} readinessProbe", True,
                f"'{address.host}' resolves only once rank 0 passes its readinessProbe ({svc.origin} does not publish "
                "not-ready addresses), but the other processes look it up while it starts",
                f"remove the readinessProbe from container '{self.rank0.container}'"))
        if ip != self.rank0.ip:
            other = self.dns.by_ip.get(ip)
            what = f"pod {other.hostname} of {other.workload}" if other else ip
            self.findings.add(f"{address.var}|not-rank0|{address.host}", lambda: Problem(
                path, address.raw, f"'{address.host}' resolves to {what}, not to rank 0 (pod {self.rank0.hostname}), which hosts the coordinator",
                f"point it at rank 0: {self._fqdn(self.rank0)}" + (f":{address.port}" if address.port else "")))
        if address.port is not None and address.var != "MEGASCALE_COORDINATOR_ADDRESS":
            self._ports(pod, address, svc)

    def _resolve(self, pod: model.Pod, host: str) -> tuple[str | None, _Service | None]:
        found = self.dns.resolve(host, pod.namespace)
        if found:
            return found
        if host == "localhost":
            return pod.ip, None
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            return None, None
        return (pod.ip if literal.is_loopback else str(literal)), None

    def _diagnose(self, host: str, pod: model.Pod) -> tuple[str, str]:
        """Why a name does not resolve: the Service, subdomain, hostname or selector to fix."""
        labels = host.rstrip(".").split(".")
        for suffix in (["svc", *CLUSTER_DOMAIN.split(".")], ["svc"]):
            if len(labels) > len(suffix) and labels[-len(suffix):] == suffix:
                labels = labels[: -len(suffix)]
                break
        rank0 = self.rank0
        if len(labels) == 2 and labels[1] in self.objects.namespaces and (pod.namespace, labels[1]) not in self.services:
            labels = [None, *labels]                       # <svc>.<ns>
        elif len(labels) == 2:
            labels = [*labels, pod.namespace]              # <host>.<svc>
        elif len(labels) == 1:
            labels = [None, labels[0], pod.namespace]      # <svc>
        if len(labels) != 3:
            return (f"expected <hostname>.<service> (optionally .<namespace>.svc.{CLUSTER_DOMAIN})",
                    f"use {self._fqdn(rank0)}")
        hostname, svc_name, ns = labels
        svc = self.services.get((ns, svc_name))
        if svc is None:
            return self._no_service(svc_name, ns)
        if not svc.headless:
            return (f"Service '{svc_name}' ({svc.origin}) is not headless, so pods get no DNS names under it",
                    f"set clusterIP: None on Service '{svc_name}'")
        target = self.dns.by_host.get((ns, hostname)) if hostname else rank0
        if target is None:
            return (f"no pod in namespace '{ns}' has hostname '{hostname}' (this workload's pods are "
                    f"{self.pods[0].hostname} … {self.pods[-1].hostname})",
                    f"use rank 0's hostname: {self._fqdn(rank0)}")
        if hostname and target.subdomain != svc_name:
            now = f"subdomain '{target.subdomain}', not '{svc_name}'" if target.subdomain else "no subdomain"
            fix = ("set spec.network.enableDNSHostnames: true (the JobSet sets subdomain on its pods)" if target.workload.startswith(("JobSet/", "TrainJob/"))
                   else f"set spec.template.spec.subdomain: {svc_name}")
            return f"pod '{hostname}' has {now}, so it gets no DNS name under Service '{svc_name}'", fix
        if not svc.selects(target):
            return self._selector_mismatch(svc, target)
        return f"Service '{svc_name}' selects no pod named '{hostname}'", f"use {self._fqdn(rank0)}"

    def _no_service(self, svc_name: str, ns: str) -> tuple[str, str]:
        rank0, jobset = self.rank0, self.id.startswith(("JobSet/", "TrainJob/"))
        others = sorted(n for (n_ns, n) in self.services if n_ns == ns)
        message = f"no Service named '{svc_name}' in namespace '{ns}'" + (f" (Services there: {', '.join(others)})" if others else "")
        if rank0.subdomain is None and jobset:
            return (f"{message}; the JobSet has spec.network.enableDNSHostnames: false, so it creates no Service and its pods "
                    "have no subdomain", "set spec.network.enableDNSHostnames: true")
        fix = f"add a headless Service '{svc_name}' (clusterIP: None, publishNotReadyAddresses: true) in namespace '{ns}' selecting the pods"
        if rank0.subdomain is None:
            return f"{message}, and the pods have no subdomain", f"{fix}, and set spec.template.spec.subdomain: {svc_name}"
        if rank0.subdomain != svc_name:
            return f"{message}; the pods' subdomain is '{rank0.subdomain}'", f"address rank 0 as {self._fqdn(rank0)}, or {fix}"
        return message, fix

    @staticmethod
    def _selector_mismatch(svc: _Service, pod: model.Pod) -> tuple[str, str]:
        key = JS_NAME if JS_NAME in pod.labels else JOB_NAME
        suggestion = f"{{{key}: {pod.labels[key]}}}"
        if not svc.selector:
            return (f"Service '{svc.name}' has no selector, so it selects no pods",
                    f"set spec.selector on Service '{svc.name}' to {suggestion}")
        diff = ", ".join(f"{k}: {v!r} vs pod's {pod.labels.get(k, '<absent>')!r}" for k, v in svc.selector.items() if pod.labels.get(k) != v)
        return (f"Service '{svc.name}' selector {dict(svc.selector)} does not select pod '{pod.hostname}' ({diff})",
                f"set the Service selector to {suggestion}")

    # --- ports --------------------------------------------------------------------------
    def _ports(self, pod: model.Pod, address: _Address, svc: _Service | None) -> None:
        port = address.port
        bind = pod.env.get("JAX_COORDINATOR_BIND_ADDRESS")
        if bind and _split_hostport(bind)[1] != port:
            self.findings.add("bind-port", lambda: Problem(
                self._path(pod, "JAX_COORDINATOR_BIND_ADDRESS"), bind,
                f"rank 0 binds the coordinator on port {_split_hostport(bind)[1]} but processes connect to {address.raw}",
                f"use the same port in both, e.g. [::]:{port}"))
        if self.rank0.container_ports and port not in self.rank0.container_ports:
            self.findings.add("container-port", lambda: Problem(
                f"{self.id} pod {self.rank0.hostname} container {self.rank0.container} ports", list(self.rank0.container_ports),
                f"the coordinator listens on port {port} ({address.var}) but rank 0's container declares only {list(self.rank0.container_ports)}",
                f"declare containerPort {port} or use one of the declared ports in {address.var}"))
        if svc is not None and svc.ports and not any(port in (p, t) for p, t in svc.ports):
            self.findings.add("service-port", lambda: Problem(
                f"{svc.origin} ports", [p for p, _ in svc.ports],
                f"Service '{svc.name}' declares ports {[p for p, _ in svc.ports]} but not the coordinator port {port} ({address.var})",
                f"add port {port} (targetPort {port}) to Service '{svc.name}' or fix the port in {address.var}"))

    # --- counts and ranks ---------------------------------------------------------------
    def counts(self) -> None:
        n = len(self.pods)
        for pod in self.pods:
            found = _count(pod)
            if found and found[1] != n:
                source, _, raw = found
                self.findings.add(f"count|{source}", lambda p=pod, s=source, r=raw: Problem(
                    self._path(p, s), r, f"the process count is {r} but the workload has {n} pods",
                    f"set {s} to {n}" if s in ("JAX_NUM_PROCESSES", "NUM_PROCESSES") else "make the slices match the pods"))

    def ranks(self) -> None:
        n = len(self.pods)
        found = list(zip(self.pods, self.rank_of))
        missing = [pod for pod, r in found if r is None]
        if missing and (n > 1 or len(missing) < n) and self.contract:
            pod = missing[0]
            several_jobs = self.pods[-1].job_index > 0
            fix = ("set JAX_PROCESS_ID from a fieldRef to metadata.annotations['batch.kubernetes.io/job-completion-index']"
                   + (" plus job-index x pods per Job (compute it in the command)" if several_jobs else ""))
            tpu = (" (GKE injects the TPU env only into pods of an Indexed Job with a subdomain and parallelism > 1)"
                   if pod.accelerator == "tpu" else "")
            self.findings.add("rank-missing", lambda: Problem(
                self._path(pod, "JAX_PROCESS_ID"), None,
                f"rank env missing: neither JAX_PROCESS_ID nor the TPU detector env (TPU_WORKER_ID + TPU_WORKER_HOSTNAMES) is set "
                f"on {len(missing)} of {n} pods, so JAX cannot know this process's rank{tpu}", fix))
        ranks: dict[int, list[model.Pod]] = {}
        for pod, r in found:
            if r is None:
                continue
            source, rank, raw = r
            if rank is None:
                hint, fix = _appended_hint(raw)
                self.findings.add(f"rank-not-int|{source}", lambda p=pod, s=source, v=raw, h=hint, f=fix: Problem(
                    self._path(p, s), v, f"the rank is not an integer after resolution{h}",
                    f or "use valueFrom.fieldRef.fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']"))
                continue
            ranks.setdefault(rank, []).append(pod)
        if not ranks:
            return
        source = next(r[0] for _, r in found if r)
        dupes = {r: ps for r, ps in ranks.items() if len(ps) > 1}
        if dupes:
            r, ps = min(dupes.items())
            self.findings.add("rank-dup", lambda: Problem(
                f"{self.id} env {source}", r,
                f"rank {r} is used by {len(ps)} pods ({ps[0].hostname}, {ps[1].hostname}{', …' if len(ps) > 2 else ''}); "
                f"{len(dupes)} ranks are duplicated in all",
                "ranks must be distinct: for a JobSet with several Jobs, add job-index x pods per Job to the completion index"))
        gaps = sorted(set(range(n)) - set(ranks))
        extra = sorted(r for r in ranks if not 0 <= r < n)
        if gaps or extra:
            self.findings.add("rank-cover", lambda: Problem(
                f"{self.id} env {source}", (gaps or extra)[:5],
                f"ranks must cover 0..{n - 1} exactly: missing {gaps[:5]}{'…' if len(gaps) > 5 else ''}, out of range {extra[:5]}",
                f"derive the rank from the completion index so that {n} pods get 0..{n - 1}"))


# --------------------------------------------------------------------------------------------
# The emulation
# --------------------------------------------------------------------------------------------

def _drafts(manifests: Sequence[Mapping], objects: _Objects) -> tuple[list[_Draft], list[Problem]]:
    """Index every passive object first (workloads read them), then let each workload kind's controller
    draft its Jobs; unsupported objects become problems, all in manifest order."""
    found: list[tuple[int, Mapping]] = []
    problems: list[tuple[int, Problem]] = []
    for i, obj in enumerate(manifests):
        if not isinstance(obj, Mapping) or not obj.get("kind"):
            problems.append((i, Problem(f"manifest {i}", type(obj).__name__ if not isinstance(obj, Mapping) else None,
                                        "not a Kubernetes object (no kind)", "each manifest needs apiVersion, kind and metadata.name")))
        elif obj["kind"] in _PASSIVE_KINDS:
            objects.add(obj)
        elif (obj.get("apiVersion", ""), obj["kind"]) in _WORKLOAD_KINDS:
            found.append((i, obj))
        else:
            api, kind = obj.get("apiVersion", ""), obj["kind"]
            problems.append((i, Problem(_oid(obj), f"{api} {kind}", f"kind {kind} ({api}) is not supported; supported workloads: {_SUPPORTED}",
                                        "express the workload as a JobSet, an Indexed Job, a JAXJob or a TrainJob")))
    drafts = []
    for i, obj in found:
        made = _WORKLOAD_KINDS[(obj.get("apiVersion", ""), obj["kind"])](obj, objects)
        if isinstance(made, Problem):
            problems.append((i, made))
        else:
            drafts.append(made)
    return drafts, [p for _, p in sorted(problems, key=lambda item: item[0])]


def _start_pods(drafts: Sequence[_Draft], objects: _Objects, ip_base: tuple[int, int]) -> list[tuple[list[model.Pod], list[tuple[str, Problem]]]]:
    """Each draft's pods in global-index order, with the env problems the kubelet would hit; the k-th pod of the
    whole call gets the k-th address, so workloads never share one."""
    out, k = [], 0
    for draft in drafts:
        pods: list[model.Pod] = []
        env_problems: list[tuple[str, Problem]] = []
        for job in draft.jobs:
            for index in range(job.completions):
                pods.append(_pod(draft, job, index, len(pods), k, _ip(ip_base, k), objects, env_problems))
                k += 1
        out.append((pods, env_problems))
    return out


def _workload(draft: _Draft, pods: list[model.Pod], env_problems: list[tuple[str, Problem]], dns: _Dns, objects: _Objects,
              services: Mapping[tuple[str, str], _Service], contract: bool) -> model.Workload:
    """The finished workload with its static contract problems."""
    checker = _Checker(draft.id, pods, dns, objects, services, contract)
    checker.findings.extend(env_problems)
    if pods:
        checker.coordinator()
        checker.counts()
        checker.ranks()
    return model.Workload(
        kind=draft.kind, namespace=draft.namespace, name=draft.name, pods=tuple(pods), groups=len(draft.jobs),
        hosts_per_group=draft.jobs[0].completions if draft.jobs else 0, chips_per_host=pods[0].devices if pods else 1,
        restart=draft.restart, problems=tuple(draft.problems + checker.findings.problems()))


def emulate(manifests: Sequence[Mapping], ip_base: tuple[int, int] = (10, 0), contract: bool = True,
            restarts: int = 0) -> model.Cluster:
    """Every workload's pods as the controllers and kubelet would start them, the DNS names the Services make
    resolvable, and every static contract problem, in manifest order (pods by global index, hosts sorted).

    `ip_base` picks the pods' loopback range (127.<b0>.<b1>.x upward) so concurrent simulations do not collide.
    `contract=False` (the containers' own commands run) does not require the coordinator and rank env;
    what is set is still checked. `restarts`: how often the workloads have restarted (the JobSet
    restart-attempt label and annotation, which pods may read through the downward API).
    """
    objects = _Objects(restarts=restarts)
    drafts, problems = _drafts(manifests, objects)
    services = dict(objects.services)
    for draft in drafts:                            # controller-created Services, only where none exists yet
        for svc in draft.services:
            services.setdefault((svc.namespace, svc.name), svc)
    started = _start_pods(drafts, objects, ip_base)
    dns = _Dns(services.values(), [p for pods, _ in started for p in pods])
    workloads = tuple(_workload(d, pods, env_problems, dns, objects, services, contract)
                      for d, (pods, env_problems) in zip(drafts, started))
    return model.Cluster(workloads=workloads, hosts=dns.hosts, problems=tuple(problems + dns.findings.problems()))
