"""Resolve a validated spec into every derived name and number: the only place they live.

Render, explain and the adapters read these values; none recomputes them. The names a job's
pods get come from its backend (`jaxinfra.backends`, the layer below spec and plan), so that the spec
can check them before a plan exists; the plan asks the backend, never which backend it is. A plan is
cheap: nothing here is per host, so a 6,144-host job costs what a 2-host one does.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
from typing import TYPE_CHECKING, cast

from jaxinfra import backends, catalog, gpudirect
from jaxinfra.backends import Backend, EnvVar, JobNames
from jaxinfra.backends.base import host_index
from jaxinfra.names import (
    APP_NAME,
    BY_EXPANSION,
    BY_GKE_TPU,
    BY_JAXINFRA,
    BY_JOB_CONTROLLER,
    BY_SHADOW_SHELL,
    CHECKPOINT_DIR,
    CHECKPOINT_ENV,
    INIT_TIMEOUT,
    MANAGED_BY,
    MEGASCALE_SLICE_ID,
    NUM_CPU_DEVICES,
    PART_OF,
    PROCESS_ID,
    TPU_WORKER_HOSTNAMES,
    TPU_WORKER_ID,
    checkpoint_claim,
    gke_topology,
    provisioning_check,
    queue_name,
)
from jaxinfra.quantity import scale, total
from jaxinfra.upstream import JOB_COMPLETION_INDEX, SYSTEM_NAMESPACES

if TYPE_CHECKING:
    from jaxinfra.spec import CPU, Cluster, JaxJob, NodePool, Shadow

#: The CPU shadow of a multi-slice job: the rank JAX's TPU detection would derive, computed before the command
#: (`$$` is Kubernetes' escape for a literal `$`: the shell, not the kubelet, expands these).
SHADOW_RANK_SCRIPT = 'export {var}=$$(({slice} * {hosts} + {worker})); exec "$$@"'


@dataclass(frozen=True)
class JobPlan:
    """Every derived value of one job."""

    cluster: str
    job: JaxJob
    pool: NodePool
    accel: catalog.Accelerator
    queue: str | None = None  # the Kueue LocalQueue, when the cluster has Kueue on
    shadow: Shadow | None = None  # a CPU shadow: CPU pods, the platform's env written out (`jaxinfra.shadow`)

    @property
    def name(self) -> str:
        """The workload's name (JobSet, Job, JAXJob, TrainJob); also the Service, subdomain, ServiceAccount."""
        return self.job.name

    @property
    def namespace(self) -> str:
        return self.job.namespace

    @property
    def backend(self) -> Backend:
        """The job's backend (`jaxinfra.backends`): everything below that differs per workload kind asks it."""
        return backends.get(self.job.backend)

    @property
    def kind(self) -> str:
        """The accelerator's kind, which shapes the job (slices, hosts, names), shadow or not."""
        return self.accel.kind

    @property
    def runs_on(self) -> str:
        """The kind of node the pods run on: the accelerator's, or cpu for a shadow."""
        return "cpu" if self.shadow is not None else self.kind

    @cached_property
    def names(self) -> JobNames:
        """The job's shape and the names derived from it (computed in `jaxinfra.names`, which the spec checks too)."""
        return JobNames.of(self.name, self.backend, self.kind, self.job.slices, self.job.nodes, self.accel.hosts)

    @property
    def slices(self) -> int:
        """Groups of hosts: TPU slices, else 1 (GPU/CPU nodes form one group)."""
        return self.names.slices

    @property
    def hosts_per_slice(self) -> int:
        return self.names.hosts_per_slice

    @property
    def processes(self) -> int:
        return self.names.processes

    @property
    def devices_per_process(self) -> int:
        return cast("CPU", self.pool.accelerator).devices if self.kind == "cpu" else self.accel.chips_per_host

    @property
    def devices(self) -> int:
        return self.processes * self.devices_per_process

    @property
    def multi_slice(self) -> bool:
        return self.slices > 1

    @property
    def exclusive_placement(self) -> bool:
        """One slice per node pool (JobSet's exclusive-topology annotation): TPU multi-slice, never a shadow,
        whose nodes have no per-slice pools."""
        return self.multi_slice and self.shadow is None

    @property
    def tpu_platform_env(self) -> bool:
        """Whether the pods get GKE's TPU env (TPU_WORKER_ID, TPU_WORKER_HOSTNAMES): GKE's webhook sets it only in
        Indexed Job pods of a multi-host slice (parallelism > 1); a shadow writes it out itself."""
        return self.kind == "tpu" and self.backend.indexed_pods and self.hosts_per_slice > 1

    @property
    def shell_rank(self) -> bool:
        """A shadow whose rank no env value can state: across slices it is worker + slice x hosts, which only
        JAX's TPU detection (on a TPU VM) derives, so a shell computes it before the command."""
        return self.shadow is not None and self.multi_slice

    @property
    def command(self) -> tuple[str, ...] | None:
        """The container command: the job's, behind the rank's shell for `shell_rank`."""
        if not self.shell_rank or self.job.command is None:
            return self.job.command
        script = SHADOW_RANK_SCRIPT.format(
            var=PROCESS_ID, slice=MEGASCALE_SLICE_ID, hosts=self.hosts_per_slice, worker=TPU_WORKER_ID
        )
        return ("/bin/sh", "-c", script, "jaxinfra-shadow", *self.job.command)

    @property
    def host_network(self) -> bool:
        """hostNetwork as rendered: a shadow drops it (many pods share a CPU node, and its ports would collide)."""
        return self.job.host_network and self.shadow is None

    @property
    def privileged(self) -> bool:
        """A privileged container as rendered: a shadow drops it (no accelerator devices to reach)."""
        return self.job.privileged and self.shadow is None

    @property
    def gpudirect(self) -> gpudirect.Stack | None:
        """The GPUDirect stack the pods use (`gpudirect.for_job`); never a shadow's."""
        return None if self.shadow is not None else gpudirect.for_job(pool_gpudirect(self.pool), self.processes)

    @property
    def shadow_of(self) -> str | None:
        """What a shadow stands in for, in words (an annotation on its workload); None when not a shadow."""
        if self.shadow is None:
            return None
        what = "CPU" if self.kind == "cpu" else f"{self.kind.upper()} {self.accel.name}"
        slices = f" x {self.slices} slices" if self.multi_slice else ""
        return (
            f"{what} (pool {self.pool.name}){slices}: {self.processes} processes x {self.devices_per_process} "
            f"devices, on CPU nodes"
        )

    @property
    def replicated_job(self) -> str | None:
        return self.names.replicated_job

    @property
    def service(self) -> str:
        return self.names.service

    @property
    def own_service(self) -> bool:
        """Whether jaxinfra renders the headless Service: not where the operator or JobSet of
        the Trainer owns the DNS (the Training Operator makes one Service per replica)."""
        return self.backend.owns_dns

    @property
    def port(self) -> int:
        """The coordinator port: the job's, unless the backend fixes it (Trainer's JAX plugin: 29500)."""
        fixed = self.backend.fixed_port
        return self.job.coordinator_port if fixed is None else fixed

    @property
    def container(self) -> str:
        """The training container's name; Trainer v2 finds it by the name `node`."""
        return self.backend.container

    @property
    def port_name(self) -> str:
        return self.backend.port_name

    @property
    def runtime(self) -> str:
        """TrainJob's runtime: the user's ClusterTrainingRuntime, or the TrainingRuntime jaxinfra renders (`<job>`)."""
        return self.job.runtime or self.name

    @property
    def renders_runtime(self) -> bool:
        """Whether jaxinfra renders the training runtime the workload runs on (`JaxJob.runtime` None)."""
        return self.backend.runtimes and self.job.runtime is None

    def child_job(self, slice_index: int) -> str:
        return self.names.child_job(slice_index)

    def hostname(self, rank: int) -> str:
        return self.names.hostname(rank)

    @property
    def coordinator_host(self) -> str:
        return self.names.coordinator_host

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
        a referenced ClusterTrainingRuntime is not jaxinfra's, so there the controller's (`selector`).
        """
        if not self.renders_pod:
            return self.selector
        return {APP_NAME: self.name, PART_OF: self.cluster}

    @property
    def renders_pod(self) -> bool:
        """Whether jaxinfra writes the pod template (not with a referenced ClusterTrainingRuntime)."""
        return not self.job.upstream_runtime

    def pod_security_exceptions(self) -> list[tuple[str, str]]:
        """Where the pods depart from Pod Security `restricted`: (what, why). Empty: restricted."""
        out = []
        if self.host_network:
            out.append(
                (
                    "hostNetwork",
                    "host_network=True: the pods use the node's network (GKE's multi-slice TPU examples "
                    "do, for DCN throughput); dnsPolicy ClusterFirstWithHostNet keeps cluster DNS; the "
                    "NetworkPolicy does not apply to host-network pods",
                )
            )
        if (stack := self.gpudirect) is not None:
            out.append(
                (
                    "hostPath",
                    f"{stack.protocol} on pool {self.pool.name}: the pods mount the node's "
                    f"{', '.join(v.host_path for v in stack.volumes)} (the NCCL plugin the installer put there"
                    + (f", the {stack.daemon.name}'s socket and the host's /sys" if stack.daemon else "")
                    + "); GPU(network='standard') opts out",
                )
            )
            if stack.daemon is not None:
                out.append(
                    (
                        "capabilities",
                        f"the {stack.daemon.name} sidecar runs as root with {', '.join(stack.daemon.capabilities)} "
                        "(it programs the GPU NICs' flows, as GKE's and xpk's manifests run it)",
                    )
                )
        if self.privileged:
            out.append(
                (
                    "privileged",
                    "privileged=True: the container has full access to the node's devices, as some "
                    "platforms require for TPU access; privilege escalation and capabilities are then not restricted",
                )
            )
        return out

    @property
    def pod_security_level(self) -> str:
        """The strictest Pod Security level the pods meet (hostNetwork and privileged fail baseline too)."""
        return "privileged" if self.pod_security_exceptions() else "restricted"

    @property
    def checkpoint_claim(self) -> str | None:
        """The PersistentVolumeClaim the checkpoints live on (rendered or existing); None without one."""
        storage = self.job.checkpoints
        if storage is None or storage.kind != "pvc":
            return None
        return storage.name or checkpoint_claim(self.name)

    @property
    def renders_claim(self) -> bool:
        """Whether jaxinfra renders the checkpoints' claim (`PVC(size=...)`)."""
        return getattr(self.job.checkpoints, "size", None) is not None

    @property
    def checkpoint_bucket(self) -> str | None:
        """The Cloud Storage bucket the checkpoints live in; None without one."""
        storage = self.job.checkpoints
        return storage.bucket if storage is not None and storage.kind == "gcs" else None

    @property
    def checkpoint_storage(self) -> str | None:
        """Where the checkpoints live, in words (`explain`); None without storage."""
        storage = self.job.checkpoints
        if storage is None:
            return None
        if self.checkpoint_bucket is not None:
            what = (
                f"bucket gs://{self.checkpoint_bucket} through GKE's Cloud Storage FUSE CSI driver, as ServiceAccount "
                f"{self.namespace}/{self.name} (Workload Identity)"
            )
        elif self.renders_claim:
            what = (
                f"PersistentVolumeClaim {self.namespace}/{self.checkpoint_claim} ({storage.size} ReadWriteMany, "
                f"class {storage.storage_class or 'default'})"
            )
        else:
            what = f"existing PersistentVolumeClaim {self.namespace}/{self.checkpoint_claim} (ReadWriteMany)"
        return f"{what}, at {CHECKPOINT_DIR}"

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
        return {self.backend.name_label: self.name}

    def derived_names(self) -> dict[str, str]:
        return self.names.derived()

    @cached_property
    def contract(self) -> tuple[EnvVar, ...]:
        """The env contract, one row per variable: its value at each rank, who sets it and how the pod template
        writes it, in the order it writes them (a later value may use `$(EARLIER)`).

        The one place that knows which variables jaxinfra writes into the manifest and which the
        controllers, the operator or the platform inject (docs/design.md, "Who sets what"); the
        coordinator, count and rank are the backend's (`Backend.coordinator_env`). `explain` reads it
        per rank (`env_sources`), render writes it (`render.common.contract_env`).
        """
        hosts = self.hosts_per_slice
        env = [*self.backend.coordinator_env(self), EnvVar.literal(INIT_TIMEOUT, str(self.job.init_timeout_seconds))]
        if self.runs_on == "cpu":
            env.append(EnvVar.literal(NUM_CPU_DEVICES, str(self.devices_per_process)))
        if self.job.checkpoints is not None:
            env.append(EnvVar.literal(CHECKPOINT_ENV, CHECKPOINT_DIR))
        if self.backend.indexed_pods:  # every pod of an Indexed Job (JobSet's children too)
            env.append(EnvVar(JOB_COMPLETION_INDEX, host_index(hosts), BY_JOB_CONTROLLER))
        if self.tpu_platform_env and self.shadow is None:
            env.append(EnvVar(TPU_WORKER_ID, host_index(hosts), BY_GKE_TPU))
        elif self.tpu_platform_env:  # the shadow writes GKE's TPU env out, per slice
            # One value for all slices: `$(MEGASCALE_SLICE_ID)` names the pod's, and Kubernetes expands it.
            hostnames = self.names.worker_hostnames(f"$({MEGASCALE_SLICE_ID})" if self.multi_slice else 0)
            env += [
                EnvVar.completion_index(TPU_WORKER_ID, hosts),
                EnvVar(
                    TPU_WORKER_HOSTNAMES,
                    lambda rank: self.names.worker_hostnames(rank // hosts),
                    BY_EXPANSION if self.multi_slice else BY_JAXINFRA,
                    value=hostnames,
                ),
            ]
        if self.shell_rank:
            env.append(EnvVar(PROCESS_ID, str, BY_SHADOW_SHELL))  # the global rank itself
        return tuple(env)

    def env_sources(self, rank: int) -> dict[str, tuple[str, str]]:
        """Every env var of the contract that rank `rank` receives: name -> (value, who sets it)."""
        return {var.name: (var.at(rank), var.by) for var in self.contract}

    def rank_env(self, rank: int) -> dict[str, str]:
        """The env as rank `rank` sees it at run time (for `explain`); sources in `env_sources`."""
        return {var.name: var.at(rank) for var in self.contract}


def pod_requests(jp: JobPlan) -> dict[str, str | int]:
    """What one pod requests (a limit stands in for a missing request, as Kubernetes and Kueue do); a shadow's pod,
    the shadow's CPU and memory only."""
    if jp.shadow is not None:
        return {"cpu": jp.shadow.cpu, "memory": jp.shadow.memory}
    requests: dict[str, str | int] = {**jp.job.resources.limits, **jp.job.resources.requests}
    if jp.accel.resource:
        requests[jp.accel.resource] = jp.accel.chips_per_host
    return requests


def pod_total_requests(jp: JobPlan) -> dict[str, str | int]:
    """What one pod requests in all, for quotas and node sizing: its container's (`pod_requests`) plus its native
    sidecars', which run beside it for the pod's whole life (restartable init containers add to the containers' sum:
    kubernetes pkg/api/v1/resource/helpers.go `PodRequests`, KEP-753; Kueue counts pods the same way)."""
    parts: dict[str, list[str | int]] = {name: [q] for name, q in pod_requests(jp).items()}
    for sidecar in jp.job.sidecars:
        for name, q in {**sidecar.resources.limits, **sidecar.resources.requests}.items():
            parts.setdefault(name, []).append(q)
    return {name: total(qs) for name, qs in parts.items()}


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
    shadow: Shadow | None = None  # a CPU shadow's pool: CPU nodes, no accelerator labels or taints

    @property
    def flavor(self) -> str:
        return queue_name(self.cluster, self.pool.name)

    @property
    def cluster_queue(self) -> str:
        return queue_name(self.cluster, self.pool.name)

    @property
    def local_queue(self) -> str:
        return self.pool.name

    @property
    def topology(self) -> str | None:
        """The Kueue Topology the pool's ResourceFlavor names, where one of its jobs asks for a placement (`JaxJob.
        topology`); None otherwise and for a shadow, whose CPU nodes carry no block labels."""
        if self.shadow is not None or not any(jp.job.topology for jp in self.jobs):
            return None
        return gke_topology(self.cluster)

    @property
    def provisioning_check(self) -> str | None:
        """The AdmissionCheck (and its ProvisioningRequestConfig) of a flex-start pool, through which Kueue obtains its
        nodes; None for other pools and for a shadow, whose CPU pods run on nodes that exist."""
        if not self.pool.flex_start or self.shadow is not None:
            return None
        return provisioning_check(self.cluster, self.pool.name)

    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(sorted({j.namespace for j in self.jobs}))

    @property
    def resource(self) -> str:
        """The pool's own resource: its accelerator's, or cpu for CPU pools and shadows."""
        return "cpu" if self.shadow is not None else self.pool.accelerator.row.resource or "cpu"

    @property
    def quota(self) -> dict[str, str | int]:
        """nominalQuota per covered resource, the pool's own resource first, then by name."""
        best: dict[str, tuple[Decimal, str | int]] = {}
        for jp in self.jobs:
            for name, q in pod_total_requests(jp).items():
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
    shadow: Shadow | None = None  # every job as a CPU shadow (`jaxinfra.shadow`)
    pools: tuple[NodePool, ...] = ()  # every node pool, used by a job or not (their GPU networks exist once each)

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Namespaces to create: every one a job uses, except the built-in ones."""
        return tuple(sorted({j.namespace for j in self.jobs} - SYSTEM_NAMESPACES))

    @property
    def queue_priorities(self) -> tuple[int, ...]:
        """The Kueue WorkloadPriorityClasses to render: each `queue_priority` of a queued job, once, ascending."""
        values = {jp.job.queue_priority for jp in self.jobs if jp.queue}
        return tuple(sorted(v for v in values if v is not None))

    @property
    def gpudirect(self) -> tuple[gpudirect.Stack, ...]:
        """The GPUDirect stacks of the cluster's pools, each once, in `gpudirect.STACKS` order: their networks and
        installers exist once per cluster. None for a shadow, whose pods run on CPU nodes."""
        if self.shadow is not None:
            return ()
        used = {pool_gpudirect(p) for p in self.pools}
        return tuple(s for s in gpudirect.STACKS if s in used)


def plan(cluster: Cluster) -> ClusterPlan:
    """The plan of a validated cluster."""
    pools = {p.name: p for p in cluster.node_pools}
    jobs = tuple(
        JobPlan(
            cluster.name,
            job,
            pools[job.node_pool],
            pools[job.node_pool].accelerator.row,
            queue=pools[job.node_pool].name if cluster.kueue else None,
            shadow=cluster.shadow,
        )
        for job in cluster.jobs
    )
    queues = tuple(
        PoolQueue(cluster.name, pool, tuple(j for j in jobs if j.pool.name == pool.name), cluster.shadow)
        for pool in cluster.node_pools
        if cluster.kueue and any(j.pool.name == pool.name for j in jobs)
    )
    return ClusterPlan(cluster.name, jobs, queues, cluster.pod_security, cluster.shadow, cluster.node_pools)


def pool_gpudirect(pool: NodePool) -> gpudirect.Stack | None:
    """A pool's GPUDirect stack (`GPU.gpudirect`); None for TPU, CPU and plain GPU pools."""
    return getattr(pool.accelerator, "gpudirect", None)
