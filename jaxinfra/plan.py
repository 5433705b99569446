"""Resolve a validated spec into every derived name and number: the only place they live.

Render, explain, the adapters and the checks below all read these values; none recomputes
them. A plan is cheap: nothing here is per host, so a 6,144-host job costs what a 2-host
one does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
from typing import TYPE_CHECKING

from jaxinfra import catalog
from jaxinfra.errors import Problem

if TYPE_CHECKING:
    from jaxinfra.spec import Cluster, JaxJob, NodePool

#: The contract's env names (DESIGN §3). User env may reference them but not set them.
COORDINATOR_ADDRESS = "JAX_COORDINATOR_ADDRESS"
NUM_PROCESSES = "JAX_NUM_PROCESSES"
PROCESS_ID = "JAX_PROCESS_ID"
INIT_TIMEOUT = "JAX_INITIALIZATION_TIMEOUT"
NUM_CPU_DEVICES = "JAX_NUM_CPU_DEVICES"
MEGASCALE_COORDINATOR = "MEGASCALE_COORDINATOR_ADDRESS"
MEGASCALE_NUM_SLICES = "MEGASCALE_NUM_SLICES"
MEGASCALE_SLICE_ID = "MEGASCALE_SLICE_ID"
CONTRACT_ENV = frozenset({COORDINATOR_ADDRESS, NUM_PROCESSES, PROCESS_ID, INIT_TIMEOUT, NUM_CPU_DEVICES,
                          MEGASCALE_COORDINATOR, MEGASCALE_NUM_SLICES, MEGASCALE_SLICE_ID,
                          "TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES"})

CONTAINER = "jax"
PORT_NAME = "coordinator"
MAX_NAME = 63

#: Training Operator v1 (kubeflow/training-operator pkg/apis/kubeflow.org/v1/jax_types.go,
#: pkg/controller.v1/jax/envvar.go): it reads the coordinator port from the container named
#: `jax`, port named `jaxjob-port` (6666 only when absent), and injects these env vars itself.
JAXJOB_CONTAINER = "jax"
JAXJOB_PORT_NAME = "jaxjob-port"
JAXJOB_REPLICA = "Worker"
OPERATOR_ENV = ("COORDINATOR_ADDRESS", "COORDINATOR_PORT", "NUM_PROCESSES", "PROCESS_ID", "PYTHONUNBUFFERED")
#: Trainer v2 (kubeflow/trainer pkg/constants/constants.go, plugins/jax/jax.go): the trainer
#: replicatedJob and container are both `node`, found by the ancestor label; the JAX plugin
#: fixes the coordinator port at 29500 and injects JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES
#: and JAX_PROCESS_ID.
TRAINER_NODE = "node"
TRAINER_PORT = 29500
TRAINER_ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_ANCESTOR = "trainer"
TRAINER_ENV = (COORDINATOR_ADDRESS, NUM_PROCESSES, PROCESS_ID)
#: Kueue reads the LocalQueue of every integration (JobSet, Job, JAXJob, TrainJob) from this
#: label on the workload's own metadata (kueue pkg/controller/jobframework QueueNameForObject).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_API = "kueue.x-k8s.io/v1beta2"  # the storage version of the bundled CRDs; v1beta1 is deprecated

#: Who puts each env var in front of a rank (`explain`).
BY_JAXINFRA = "jaxinfra"
BY_DOWNWARD_API = "Kubernetes (downward API)"
BY_JOB_CONTROLLER = "Job controller"
BY_OPERATOR = "Training Operator"
BY_TRAINER = "Trainer JAX plugin"
BY_GKE_TPU = "GKE (TPU platform)"

#: Labels jaxinfra owns on every object; user labels may not override them.
MANAGED_BY = "app.kubernetes.io/managed-by"
APP_NAME = "app.kubernetes.io/name"
PART_OF = "app.kubernetes.io/part-of"
OWN_LABELS = frozenset({MANAGED_BY, APP_NAME, PART_OF})

#: Upstream label and annotation keys the controllers set (DESIGN §3).
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JAXJOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOBSET_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"

#: Pod Security admission (kubernetes.io/docs/concepts/security/pod-security-admission).
POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"
#: What JAX's Kubernetes auto-detection reads (DESIGN §5.10): exactly these, no wildcards.
API_RULES: tuple[dict[str, list[str]], ...] = (
    {"apiGroups": [""], "resources": ["pods", "services"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
)


#: Namespaces every cluster has: jaxinfra never renders (or labels) them.
BUILTIN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


@dataclass(frozen=True)
class JobPlan:
    """Every derived value of one job."""

    cluster: str
    job: JaxJob
    pool: NodePool
    accel: catalog.Accelerator
    queue: str | None = None  # the Kueue LocalQueue, when the cluster has Kueue on

    @property
    def name(self) -> str:
        """The workload's name (JobSet, Job, JAXJob, TrainJob); also the Service, subdomain, ServiceAccount."""
        return self.job.name

    @property
    def namespace(self) -> str:
        return self.job.namespace

    @property
    def backend(self) -> str:
        return self.job.backend

    @property
    def kind(self) -> str:
        return self.accel.kind

    @property
    def slices(self) -> int:
        """Groups of hosts: TPU slices, else 1 (GPU/CPU nodes form one group)."""
        return self.job.num_slices if self.kind == "tpu" else 1

    @property
    def hosts_per_slice(self) -> int:
        return self.accel.hosts if self.kind == "tpu" else self.job.num_nodes

    @property
    def processes(self) -> int:
        return self.slices * self.hosts_per_slice

    @property
    def devices_per_process(self) -> int:
        return self.pool.accelerator.devices if self.kind == "cpu" else self.accel.chips_per_host

    @property
    def devices(self) -> int:
        return self.processes * self.devices_per_process

    @property
    def multi_slice(self) -> bool:
        return self.slices > 1

    @property
    def replicated_job(self) -> str | None:
        """JobSet's replicated job: one per slice for TPU, one group of nodes otherwise (Trainer: `node`)."""
        if self.backend == "trainjob":
            return TRAINER_NODE
        return ("slice" if self.kind == "tpu" else "node") if self.backend == "jobset" else None

    @property
    def service(self) -> str:
        """The headless Service / subdomain (JobSet's default subdomain is the JobSet's name)."""
        return self.name

    @property
    def own_service(self) -> bool:
        """Whether jaxinfra renders the headless Service: not where the operator or JobSet of
        the Trainer owns the DNS (the Training Operator makes one Service per replica)."""
        return self.backend in ("jobset", "job")

    @property
    def port(self) -> int:
        """The coordinator port; Trainer's JAX plugin fixes it at 29500."""
        return TRAINER_PORT if self.backend == "trainjob" else self.job.coordinator_port

    @property
    def container(self) -> str:
        """The training container's name; Trainer v2 finds it by the name `node`."""
        return TRAINER_NODE if self.backend == "trainjob" else CONTAINER

    @property
    def port_name(self) -> str:
        return JAXJOB_PORT_NAME if self.backend == "jaxjob" else PORT_NAME

    @property
    def runtime(self) -> str:
        """TrainJob's runtime: the user's ClusterTrainingRuntime, or the TrainingRuntime jaxinfra renders (`<job>`)."""
        return self.job.runtime or self.name

    @property
    def renders_runtime(self) -> bool:
        return self.backend == "trainjob" and self.job.runtime is None

    def child_job(self, slice_index: int) -> str:
        """The batch Job that holds a slice's pods (JAXJob: none, the operator makes bare pods)."""
        return f"{self.name}-{self.replicated_job}-{slice_index}" if self.replicated_job else self.name

    def hostname(self, rank: int) -> str:
        """Pod hostname of global rank `rank`, as the controller names it."""
        if self.backend == "jaxjob":  # pod and per-replica Service `<job>-worker-<i>`
            return f"{self.name}-{JAXJOB_REPLICA.lower()}-{rank}"
        slice_index, host = divmod(rank, self.hosts_per_slice)
        return f"{self.child_job(slice_index)}-{host}"

    @property
    def coordinator_host(self) -> str:
        """Rank 0's DNS name inside the namespace: `<hostname>.<subdomain>` (JAXJob: its Service)."""
        if self.backend == "jaxjob":
            return self.hostname(0)
        return f"{self.hostname(0)}.{self.service}"

    @property
    def coordinator_address(self) -> str:
        return f"{self.coordinator_host}:{self.port}"

    @cached_property
    def labels(self) -> dict[str, str]:
        """Labels on every object and pod of the job."""
        return {**self.job.labels, APP_NAME: self.name, MANAGED_BY: "jaxinfra", PART_OF: self.cluster}

    @property
    def pod_labels(self) -> dict[str, str]:
        """Labels every pod of the job carries, and only its pods (what its NetworkPolicy selects).

        jaxinfra's own labels from the pod template, which every backend copies onto its pods;
        a referenced ClusterTrainingRuntime is not jaxinfra's, so there the JobSet name label.
        """
        if self.backend == "trainjob" and not self.renders_runtime:
            return {JOBSET_NAME_LABEL: self.name}
        return {APP_NAME: self.name, PART_OF: self.cluster}

    @property
    def renders_pod(self) -> bool:
        """Whether jaxinfra writes the pod template (not with a referenced ClusterTrainingRuntime)."""
        return not (self.backend == "trainjob" and not self.renders_runtime)

    def pod_security_exceptions(self) -> list[tuple[str, str]]:
        """Where the pods depart from Pod Security `restricted`: (what, why). Empty: restricted."""
        out = []
        if self.job.host_network:
            out.append(("hostNetwork", "host_network=True: the pods use the node's network (GKE's multi-slice TPU examples "
                        "do, for DCN throughput); dnsPolicy ClusterFirstWithHostNet keeps cluster DNS; the "
                        "NetworkPolicy does not apply to host-network pods"))
        if self.job.privileged:
            out.append(("privileged", "privileged=True: the container has full access to the node's devices, as some "
                        "platforms require for TPU access; privilege escalation and capabilities are then not restricted"))
        return out

    @property
    def pod_security_level(self) -> str:
        """The strictest Pod Security level the pods meet (hostNetwork and privileged fail baseline too)."""
        return "privileged" if self.pod_security_exceptions() else "restricted"

    def env_references(self) -> dict[str, str]:
        """The user env read from Secrets and ConfigMaps: name -> 'from Secret name/key'."""
        out = {}
        for name, value in self.job.env.items():
            if not isinstance(value, str):
                what = "Secret" if value.kind == "secret" else "ConfigMap"
                out[name] = f"from {what} {value.name}/{value.key}" + (" (optional)" if value.optional else "")
        return out

    @property
    def selector(self) -> dict[str, str]:
        """The label the controller puts on every pod of the job (what a headless Service selects)."""
        if self.backend == "jaxjob":
            return {JAXJOB_NAME_LABEL: self.name}
        return {JOBSET_NAME_LABEL: self.name} if self.backend in ("jobset", "trainjob") else {JOB_NAME_LABEL: self.name}

    def derived_names(self) -> dict[str, str]:
        """The longest value of every name derived from the job's name that must fit a DNS label (63)."""
        last = self.processes - 1
        if self.backend == "jaxjob":  # pod name = per-replica Service name, a DNS-1035 label
            return {"pod and Service name": self.hostname(last)}
        names = {"pod hostname": self.hostname(last), "Job name label": self.child_job(self.slices - 1)}
        if self.backend in ("jobset", "trainjob"):  # JobSet's webhook also fits the pod name with a 5-character suffix
            names["pod name"] = f"{self.hostname(last)}-xxxxx"
        return names

    def env_sources(self, rank: int) -> dict[str, tuple[str, str]]:
        """Every env var of the contract that rank `rank` receives: name -> (value, who sets it).

        The one place that knows, per backend, which variables jaxinfra writes into the
        manifest and which the controllers, the operator or the platform inject (DESIGN §3).
        """
        slice_index, host = divmod(rank, self.hosts_per_slice)
        env: dict[str, tuple[str, str]] = {}
        if self.backend == "jaxjob":
            env |= {"COORDINATOR_ADDRESS": (self.coordinator_host, BY_OPERATOR),
                    "COORDINATOR_PORT": (str(self.port), BY_OPERATOR),
                    "NUM_PROCESSES": (str(self.processes), BY_OPERATOR),
                    "PROCESS_ID": (str(rank), BY_OPERATOR),
                    "PYTHONUNBUFFERED": ("1", BY_OPERATOR)}
        elif self.backend == "trainjob":
            env |= {COORDINATOR_ADDRESS: (self.coordinator_address, BY_TRAINER),
                    NUM_PROCESSES: (str(self.processes), BY_TRAINER),
                    PROCESS_ID: (str(host), BY_TRAINER)}
        else:
            env |= {COORDINATOR_ADDRESS: (self.coordinator_address, BY_JAXINFRA),
                    NUM_PROCESSES: (str(self.processes), BY_JAXINFRA)}
            if self.multi_slice:
                env |= {MEGASCALE_COORDINATOR: (self.coordinator_host, BY_JAXINFRA),
                        MEGASCALE_NUM_SLICES: (str(self.slices), BY_DOWNWARD_API),
                        MEGASCALE_SLICE_ID: (str(slice_index), BY_DOWNWARD_API)}
            else:
                env[PROCESS_ID] = (str(host), BY_DOWNWARD_API)
        env[INIT_TIMEOUT] = (str(self.job.init_timeout_seconds), BY_JAXINFRA)
        if self.kind == "cpu":
            env[NUM_CPU_DEVICES] = (str(self.devices_per_process), BY_JAXINFRA)
        if self.backend != "jaxjob":  # every pod of an Indexed Job (JobSet's children too)
            env["JOB_COMPLETION_INDEX"] = (str(host), BY_JOB_CONTROLLER)
        if self.kind == "tpu" and self.backend != "jaxjob" and self.hosts_per_slice > 1:
            # GKE's webhook: only Indexed Job pods of a multi-host slice (parallelism > 1)
            env["TPU_WORKER_ID"] = (str(host), BY_GKE_TPU)
        return env

    def rank_env(self, rank: int) -> dict[str, str]:
        """The env as rank `rank` sees it at run time (for `explain`); sources in `env_sources`."""
        return {name: value for name, (value, _) in self.env_sources(rank).items()}

    def manifest_env(self) -> tuple[str, ...]:
        """Names of the contract variables jaxinfra itself writes into the pod template."""
        return tuple(n for n, (_, by) in self.env_sources(0).items() if by in (BY_JAXINFRA, BY_DOWNWARD_API))


_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)([KMGTPE]i|[munkMGTPE])?$")
_SUFFIX = {"": 1, "m": Decimal("1e-3"), "u": Decimal("1e-6"), "n": Decimal("1e-9"), "k": 10**3, "M": 10**6, "G": 10**9,
           "T": 10**12, "P": 10**15, "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def scale(quantity: str | int, times: int) -> tuple[Decimal, str | int]:
    """A Kubernetes quantity times `times`: (its value in base units, for comparing; the quantity)."""
    number, suffix = _QUANTITY.match(str(quantity)).groups()  # type: ignore[union-attr]  # validated by the spec
    total = Decimal(number) * times
    text = format(total.normalize(), "f") if total != total.to_integral_value() else str(int(total))
    out: str | int = int(text) if not suffix and text.lstrip("-").isdigit() else f"{text}{suffix or ''}"
    return total * Decimal(_SUFFIX[suffix or ""]), out


def pod_requests(jp: JobPlan) -> dict[str, str | int]:
    """What one pod requests (a limit stands in for a missing request, as Kubernetes and Kueue do)."""
    requests: dict[str, str | int] = {**jp.job.resources.limits, **jp.job.resources.requests}
    if jp.accel.resource:
        requests[jp.accel.resource] = jp.accel.chips_per_host
    return requests


@dataclass(frozen=True)
class PoolQueue:
    """Kueue for one node pool: a ResourceFlavor, a ClusterQueue and a LocalQueue per namespace.

    Quota = the pool's capacity for these jobs: per resource the largest demand of one job on
    the pool (pods x per-pod request: TPU chips = slices x hosts x chips per host, GPUs = nodes x
    GPUs per node), so the largest job fits and jobs beyond the capacity wait in the queue.
    Every resource a job requests is covered: Kueue does not admit a workload that requests a
    resource its ClusterQueue does not cover.
    """

    cluster: str
    pool: NodePool
    jobs: tuple[JobPlan, ...]

    @property
    def flavor(self) -> str:
        return f"{self.cluster}-{self.pool.name}"

    @property
    def cluster_queue(self) -> str:
        return f"{self.cluster}-{self.pool.name}"

    @property
    def local_queue(self) -> str:
        return self.pool.name

    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(sorted({j.namespace for j in self.jobs}))

    @property
    def resource(self) -> str:
        """The pool's own resource: its accelerator's, or cpu for CPU pools."""
        return self.pool.accelerator.row.resource or "cpu"

    @property
    def quota(self) -> dict[str, str | int]:
        """nominalQuota per covered resource, the pool's own resource first, then by name."""
        best: dict[str, tuple[Decimal, str | int]] = {}
        for jp in self.jobs:
            for name, q in pod_requests(jp).items():
                value = scale(q, jp.processes)
                if name not in best or value[0] > best[name][0]:
                    best[name] = value
        names = [self.resource, *sorted(set(best) - {self.resource})]
        return {n: best[n][1] if n in best else 0 for n in names}


@dataclass(frozen=True)
class ClusterPlan:
    name: str
    jobs: tuple[JobPlan, ...]
    queues: tuple[PoolQueue, ...] = ()  # Kueue, per node pool that jobs use; empty unless `Cluster.kueue`
    pod_security: str | None = None  # the enforce level of the namespaces jaxinfra creates

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Namespaces to create: every one a job uses, except the built-in ones."""
        return tuple(sorted({j.namespace for j in self.jobs} - BUILTIN_NAMESPACES))


def plan(cluster: Cluster) -> ClusterPlan:
    """The plan of a validated cluster."""
    pools = {p.name: p for p in cluster.node_pools}
    jobs = tuple(JobPlan(cluster.name, job, pools[job.node_pool], pools[job.node_pool].accelerator.row,
                         queue=pools[job.node_pool].name if cluster.kueue else None) for job in cluster.jobs)
    queues = tuple(PoolQueue(cluster.name, pool, tuple(j for j in jobs if j.pool.name == pool.name))
                   for pool in cluster.node_pools if cluster.kueue and any(j.pool.name == pool.name for j in jobs))
    return ClusterPlan(cluster.name, jobs, queues, cluster.pod_security)


def check(cluster: Cluster) -> list[Problem]:
    """Rules that span objects (references, counts, backends, derived names); all reported."""
    out: list[Problem] = []
    pools = {p.name: p for p in cluster.node_pools}
    if not cluster.node_pools:
        out.append(Problem("node_pools", [], "a cluster needs at least one node pool", "add NodePool(name, TPU(...) | GPU(...) | CPU(...))"))
    seen_pools: set[str] = set()
    for i, pool in enumerate(cluster.node_pools):
        if pool.name in seen_pools:
            out.append(Problem(f"node_pools[{i}].name", pool.name, "duplicate node pool name", "give each pool its own name"))
        seen_pools.add(pool.name)
    seen_jobs: set[tuple[str, str]] = set()
    for i, job in enumerate(cluster.jobs):
        at = f"jobs[{i}]"
        if (job.namespace, job.name) in seen_jobs:
            out.append(Problem(f"{at}.name", job.name, f"duplicate job name in namespace {job.namespace}", "rename one of the jobs"))
        seen_jobs.add((job.namespace, job.name))
        pool = pools.get(job.node_pool)
        if pool is None:
            import difflib

            close = difflib.get_close_matches(job.node_pool, list(pools), n=3) or sorted(pools)
            out.append(Problem(f"{at}.node_pool", job.node_pool, "no node pool has this name", f"use one of {', '.join(close)}"))
            continue
        out.extend(_job_problems(at, job, pool))
        out.extend(_backend_problems(at, job, pool))
        if cluster.kueue:
            out.extend(_kueue_job_problems(at, job, pool))
        out.extend(_name_problems(at, JobPlan(cluster.name, job, pool, pool.accelerator.row)))
        out.extend(_pod_security_problems(at, cluster, JobPlan(cluster.name, job, pool, pool.accelerator.row)))
    if cluster.kueue:
        for i, pool in enumerate(cluster.node_pools):
            name = f"{cluster.name}-{pool.name}"
            if len(name) > MAX_NAME:
                out.append(Problem(f"node_pools[{i}].name", pool.name,
                                   f"Kueue ResourceFlavor and ClusterQueue {name!r} is {len(name)} characters, over {MAX_NAME}",
                                   f"shorten the cluster or pool name by at least {len(name) - MAX_NAME} characters"))
    return out


def _job_problems(at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
    row = pool.accelerator.row
    out = []
    if row.kind == "tpu":
        if job.nodes is not None:
            out.append(Problem(f"{at}.nodes", job.nodes, f"a TPU job's hosts come from the topology ({row.topology}: {row.hosts})",
                               "remove `nodes`; use `slices` for more TPU slices"))
        if job.num_slices > 1 and not row.multi_host:
            out.append(Problem(f"{at}.slices", job.slices, f"{row.family} {row.topology} is single-host, multi-slice needs a multi-host topology",
                               "use slices=1 or a multi-host topology"))
        if job.num_slices > 1 and job.backend == "job":
            out.append(Problem(f"{at}.backend", job.backend, "an Indexed Job cannot express multi-slice (MEGASCALE_SLICE_ID needs one Job per slice)",
                               "use backend='jobset'"))
    elif job.slices is not None:
        out.append(Problem(f"{at}.slices", job.slices, f"slices are for TPU pools; {pool.name} is {row.kind}", "use `nodes` instead"))
    for section in ("requests", "limits"):
        if row.resource and row.resource in getattr(job.resources, section):
            out.append(Problem(f"{at}.resources.{section}.{row.resource}", getattr(job.resources, section)[row.resource],
                               "set from the node pool's accelerator", "remove it; change the node pool instead"))
    return out


def _backend_problems(at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
    """What the Kubeflow operators cannot express (upstream facts in the constants above)."""
    row = pool.accelerator.row
    out = []
    if job.backend == "jaxjob" and row.kind == "tpu" and job.num_slices > 1:
        out.append(Problem(f"{at}.backend", job.backend,
                           "the Training Operator creates plain pods: no JobSet labels for MEGASCALE_SLICE_ID, so multi-slice cannot be expressed",
                           "use backend='jobset'"))
    elif job.backend == "jaxjob" and row.kind == "tpu" and row.multi_host:
        out.append(Problem(f"{at}.backend", job.backend,
                           f"the Training Operator creates plain pods, and GKE injects TPU_WORKER_ID / TPU_WORKER_HOSTNAMES only into "
                           f"Indexed Job pods: the hosts of a multi-host slice ({row.family} {row.topology}) could not form the slice",
                           "use backend='jobset' (or 'trainjob', or a single-host topology)"))
    if job.backend == "trainjob" and row.kind == "tpu" and job.num_slices > 1:
        out.append(Problem(f"{at}.backend", job.backend,
                           "Trainer v2 runs one replica of its `node` replicatedJob (kubeflow/trainer#2318): no per-slice Job index "
                           "for MEGASCALE_SLICE_ID, so multi-slice cannot be expressed",
                           "use backend='jobset'"))
    if job.backend == "jaxjob":
        for name in sorted(set(job.env) & set(OPERATOR_ENV)):
            out.append(Problem(f"{at}.env.{name}", job.env[name], "set by the Training Operator for backend='jaxjob'", "remove it"))
    if job.backend == "trainjob" and "coordinator_port" in job.model_fields_set and job.coordinator_port != TRAINER_PORT:
        out.append(Problem(f"{at}.coordinator_port", job.coordinator_port,
                           f"Trainer's JAX plugin fixes the coordinator port at {TRAINER_PORT}", "remove coordinator_port"))
    if job.runtime is not None and job.backend != "trainjob":
        out.append(Problem(f"{at}.runtime", job.runtime, "a training runtime is for backend='trainjob' only",
                           "remove runtime, or use backend='trainjob'"))
    elif job.runtime is not None:
        lacks = [what for what, needed in (("node selectors and tolerations for TPU", row.kind == "tpu"),
                                           ("GPU node selectors, tolerations and /dev/shm", row.kind == "gpu"),
                                           ("Spot node selectors and tolerations", pool.spot)) if needed]
        if lacks:
            out.append(Problem(f"{at}.runtime", job.runtime,
                               f"ClusterTrainingRuntime {job.runtime!r} is not jaxinfra's and lacks {', '.join(lacks)} of pool {pool.name}",
                               "remove runtime: jaxinfra then renders a TrainingRuntime with the pool's placement"))
    return out


def _kueue_job_problems(at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
    out = []
    if QUEUE_LABEL in job.labels:
        out.append(Problem(f"{at}.labels.{QUEUE_LABEL}", job.labels[QUEUE_LABEL], "set by jaxinfra when the cluster has kueue=True",
                           "remove it (the job goes to its node pool's LocalQueue)"))
    if pool.accelerator.row.kind == "cpu" and "cpu" not in {**job.resources.requests, **job.resources.limits}:
        out.append(Problem(f"{at}.resources", {}, "Kueue counts a CPU pool's quota in requested CPU, and this job requests none",
                           "request CPU, e.g. resources={'requests': {'cpu': '2'}}"))
    return out


def _pod_security_problems(at: str, cluster: Cluster, jp: JobPlan) -> list[Problem]:
    """A job whose pods the Pod Security level of its (jaxinfra-created) namespace would reject."""
    level = cluster.pod_security
    if level in (None, "privileged") or jp.namespace in BUILTIN_NAMESPACES:
        return []
    out = []
    for what, field in (("hostNetwork", "host_network"), ("privileged", "privileged")):
        if getattr(jp.job, field):
            out.append(Problem(f"{at}.{field}", True,
                               f"namespace {jp.namespace} is created with Pod Security enforce={level}, which rejects {what} pods",
                               f"set Cluster(pod_security='privileged') to allow it there, or remove {field}"))
    if not jp.renders_pod and level == "restricted":
        out.append(Problem(f"{at}.runtime", jp.job.runtime,
                           f"ClusterTrainingRuntime {jp.job.runtime!r} is not jaxinfra's: its pods are not known to meet the "
                           f"restricted Pod Security level enforced on namespace {jp.namespace}",
                           "remove runtime (jaxinfra's TrainingRuntime meets restricted), or set Cluster(pod_security='baseline')"))
    return out


def _name_problems(at: str, jp: JobPlan) -> list[Problem]:
    """The job name is one root cause: report its longest derived name that is too long."""
    what, value = max(jp.derived_names().items(), key=lambda item: len(item[1]))
    if len(value) <= MAX_NAME:
        return []
    return [Problem(f"{at}.name", jp.name, f"derived {what} {value!r} is {len(value)} characters, over {MAX_NAME}",
                    f"shorten the name by at least {len(value) - MAX_NAME} characters")]
