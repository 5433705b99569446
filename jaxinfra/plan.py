"""Resolve a validated spec into every derived name and number: the only place they live.

Render, explain, the adapters and the checks below all read these values; none recomputes
them. A plan is cheap: nothing here is per host, so a 6,144-host job costs what a 2-host
one does.
"""

from __future__ import annotations

from dataclasses import dataclass
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

#: Labels jaxinfra owns on every object; user labels may not override them.
MANAGED_BY = "app.kubernetes.io/managed-by"
APP_NAME = "app.kubernetes.io/name"
PART_OF = "app.kubernetes.io/part-of"
OWN_LABELS = frozenset({MANAGED_BY, APP_NAME, PART_OF})

#: Upstream label and annotation keys the controllers set (DESIGN §3).
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOBSET_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"


@dataclass(frozen=True)
class JobPlan:
    """Every derived value of one job."""

    cluster: str
    job: JaxJob
    pool: NodePool
    accel: catalog.Accelerator

    @property
    def name(self) -> str:
        """The workload's name (JobSet or Job); also the Service, subdomain and ServiceAccount."""
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
        """JobSet's replicated job: one per slice for TPU, one group of nodes otherwise."""
        return ("slice" if self.kind == "tpu" else "node") if self.backend == "jobset" else None

    @property
    def service(self) -> str:
        return self.name

    @property
    def port(self) -> int:
        return self.job.coordinator_port

    def child_job(self, slice_index: int) -> str:
        """The batch Job that holds a slice's pods."""
        return f"{self.name}-{self.replicated_job}-{slice_index}" if self.replicated_job else self.name

    def hostname(self, rank: int) -> str:
        """Pod hostname of global rank `rank`, as the controller names it."""
        slice_index, host = divmod(rank, self.hosts_per_slice)
        return f"{self.child_job(slice_index)}-{host}"

    @property
    def coordinator_host(self) -> str:
        """Rank 0's DNS name inside the namespace: `<hostname>.<subdomain>`."""
        return f"{self.hostname(0)}.{self.service}"

    @property
    def coordinator_address(self) -> str:
        return f"{self.coordinator_host}:{self.port}"

    @cached_property
    def labels(self) -> dict[str, str]:
        """Labels on every object and pod of the job."""
        return {**self.job.labels, APP_NAME: self.name, MANAGED_BY: "jaxinfra", PART_OF: self.cluster}

    @property
    def selector(self) -> dict[str, str]:
        """What the headless Service selects: a label the controller puts on every pod."""
        return {JOBSET_NAME_LABEL: self.name} if self.backend == "jobset" else {JOB_NAME_LABEL: self.name}

    def derived_names(self) -> dict[str, str]:
        """The longest value of every name derived from the job's name that must fit a DNS label (63)."""
        last = self.processes - 1
        names = {"pod hostname": self.hostname(last), "Job name label": self.child_job(self.slices - 1)}
        if self.backend == "jobset":  # JobSet's webhook also fits the pod name with a 5-character suffix
            names["pod name"] = f"{self.hostname(last)}-xxxxx"
        return names

    def rank_env(self, rank: int) -> dict[str, str]:
        """The contract's env as rank `rank` sees it at run time (for `explain`)."""
        slice_index, host = divmod(rank, self.hosts_per_slice)
        env = {COORDINATOR_ADDRESS: self.coordinator_address, NUM_PROCESSES: str(self.processes)}
        if self.multi_slice:
            env |= {MEGASCALE_COORDINATOR: self.coordinator_host, MEGASCALE_NUM_SLICES: str(self.slices),
                    MEGASCALE_SLICE_ID: str(slice_index), "TPU_WORKER_ID": str(host)}
        else:
            env[PROCESS_ID] = str(host)
        env[INIT_TIMEOUT] = str(self.job.init_timeout_seconds)
        if self.kind == "cpu":
            env[NUM_CPU_DEVICES] = str(self.devices_per_process)
        return env


@dataclass(frozen=True)
class ClusterPlan:
    name: str
    jobs: tuple[JobPlan, ...]

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Namespaces to create: every one a job uses, except the built-in ones."""
        return tuple(sorted({j.namespace for j in self.jobs} - {"default", "kube-system", "kube-public"}))


def plan(cluster: Cluster) -> ClusterPlan:
    """The plan of a validated cluster."""
    pools = {p.name: p for p in cluster.node_pools}
    return ClusterPlan(cluster.name, tuple(
        JobPlan(cluster.name, job, pools[job.node_pool], pools[job.node_pool].accelerator.row) for job in cluster.jobs
    ))


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
        out.extend(_name_problems(at, JobPlan(cluster.name, job, pool, pool.accelerator.row)))
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


def _name_problems(at: str, jp: JobPlan) -> list[Problem]:
    """The job name is one root cause: report its longest derived name that is too long."""
    what, value = max(jp.derived_names().items(), key=lambda item: len(item[1]))
    if len(value) <= MAX_NAME:
        return []
    return [Problem(f"{at}.name", jp.name, f"derived {what} {value!r} is {len(value)} characters, over {MAX_NAME}",
                    f"shorten the name by at least {len(value) - MAX_NAME} characters")]
