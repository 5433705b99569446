"""The rules that span objects (references, counts, backends, derived names), checked on the validated tree.

Pydantic validates each object alone; these need the whole cluster (a job and its pool, jobs side by
side), so `Cluster` runs them after validation and reports every problem at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from jaxinfra import backends, gpudirect
from jaxinfra.backends import JobNames
from jaxinfra.errors import Problem
from jaxinfra.names import CHECKPOINT_ENV, MAX_NAME, checkpoint_claim, provisioning_check, queue_name
from jaxinfra.spec.checkpoints import PVC
from jaxinfra.upstream import PRIORITY_LABEL, QUEUE_LABEL, SYSTEM_NAMESPACES

if TYPE_CHECKING:
    from jaxinfra.spec.jobs import JaxJob, NodePool, Shadow


class Tree(Protocol):
    """What the rules read of a validated `Cluster` (spec/cluster.py, which runs them on itself: the root imports the
    rules, never the reverse)."""

    @property
    def name(self) -> str: ...
    @property
    def node_pools(self) -> Sequence[NodePool]: ...
    @property
    def jobs(self) -> Sequence[JaxJob]: ...
    @property
    def pod_security(self) -> str | None: ...
    @property
    def kueue(self) -> bool: ...
    @property
    def shadow(self) -> Shadow | None: ...


def cross_object_problems(cluster: Tree) -> list[Problem]:
    """Rules that span objects (references, counts, backends, derived names); all reported."""
    out: list[Problem] = []
    pools = {p.name: p for p in cluster.node_pools}
    if not cluster.node_pools:
        out.append(
            Problem(
                "node_pools",
                [],
                "a cluster needs at least one node pool",
                "add NodePool(name, TPU(...) | GPU(...) | CPU(...))",
            )
        )
    seen_pools: set[str] = set()
    for i, p in enumerate(cluster.node_pools):
        if p.name in seen_pools:
            out.append(
                Problem(f"node_pools[{i}].name", p.name, "duplicate node pool name", "give each pool its own name")
            )
        seen_pools.add(p.name)
        if p.flex_start:
            out.extend(_flex_start_problems(f"node_pools[{i}]", cluster, p))
    seen_jobs: set[tuple[str, str]] = set()
    claims: dict[tuple[str, str], str] = {}  # rendered checkpoint claims: (namespace, name) -> the job that renders it
    for i, job in enumerate(cluster.jobs):
        at = f"jobs[{i}]"
        if (job.namespace, job.name) in seen_jobs:
            out.append(
                Problem(
                    f"{at}.name", job.name, f"duplicate job name in namespace {job.namespace}", "rename one of the jobs"
                )
            )
        seen_jobs.add((job.namespace, job.name))
        out.extend(_checkpoint_problems(at, job, claims))
        pool = pools.get(job.node_pool)
        if pool is None:
            import difflib

            close = difflib.get_close_matches(job.node_pool, list(pools), n=3) or sorted(pools)
            out.append(
                Problem(
                    f"{at}.node_pool", job.node_pool, "no node pool has this name", f"use one of {', '.join(close)}"
                )
            )
            continue
        out.extend(_job_problems(at, job, pool))
        out.extend(_backend_problems(at, job, pool))
        if cluster.kueue:
            out.extend(_kueue_job_problems(at, job, pool))
        elif job.queue_priority is not None:
            out.append(
                Problem(
                    f"{at}.queue_priority",
                    job.queue_priority,
                    "a priority in Kueue's queues, and the cluster has no Kueue",
                    "set Cluster(kueue=True), or remove queue_priority (priority_class orders the pods themselves)",
                )
            )
        if job.topology is not None:
            out.extend(_topology_problems(at, cluster, job, pool))
        elif job.topology_required:
            out.append(
                Problem(
                    f"{at}.topology_required",
                    True,
                    "a required placement needs its level",
                    "set topology='block', 'subblock' or 'host', or remove topology_required",
                )
            )
        out.extend(_name_problems(at, job, pool))
        out.extend(_pod_security_problems(at, cluster, job, pool))
        if cluster.shadow is not None:
            out.extend(_shadow_problems(at, job, pool))
    if cluster.kueue:
        for i, pool in enumerate(cluster.node_pools):
            name, what = queue_name(cluster.name, pool.name), "ResourceFlavor and ClusterQueue"
            if pool.flex_start:  # the longest of a flex-start pool's Kueue names
                name, what = provisioning_check(cluster.name, pool.name), "AdmissionCheck and ProvisioningRequestConfig"
            if len(name) > MAX_NAME:
                out.append(
                    Problem(
                        f"node_pools[{i}].name",
                        pool.name,
                        f"Kueue {what} {name!r} is {len(name)} characters, over {MAX_NAME}",
                        f"shorten the cluster or pool name by at least {len(name) - MAX_NAME} characters",
                    )
                )
    return out


def _flex_start_problems(at: str, cluster: Tree, pool: NodePool) -> list[Problem]:
    """What flex-start with queued provisioning needs beyond the pool: GKE obtains such a pool's nodes only for a
    ProvisioningRequest (GKE docs, how-to/provisioningrequest), which Kueue's admission check creates, and DWS
    provisions GPUs and TPUs only."""
    out = []
    if pool.accelerator.row.kind == "cpu":
        out.append(
            Problem(
                f"{at}.flex_start",
                True,
                f"flex-start with queued provisioning obtains GPU and TPU nodes; pool {pool.name} is CPU",
                "remove flex_start (on-demand or spot=True), or give the pool a GPU(...) or TPU(...)",
            )
        )
    if not cluster.kueue:
        out.append(
            Problem(
                f"{at}.flex_start",
                True,
                f"pool {pool.name} gets nodes only for a ProvisioningRequest, which Kueue's admission check creates; "
                "without Kueue its jobs would pend forever",
                "set Cluster(kueue=True), or remove flex_start",
            )
        )
    return out


def _topology_problems(at: str, cluster: Tree, job: JaxJob, pool: NodePool) -> list[Problem]:
    """Topology-Aware Scheduling is Kueue's, over GKE's block labels of GPU VMs; a TPU slice is one placement already
    (its own node pool, a compact placement)."""
    out = []
    if not cluster.kueue:
        out.append(
            Problem(
                f"{at}.topology",
                job.topology,
                "Topology-Aware Scheduling is Kueue's, and the cluster has no Kueue",
                "set Cluster(kueue=True), or remove topology",
            )
        )
    if pool.accelerator.row.kind != "gpu":
        out.append(
            Problem(
                f"{at}.topology",
                job.topology,
                f"GKE's block topology labels are on GPU VMs; pool {pool.name} is {pool.accelerator.row.kind} "
                "(a TPU slice is one placement already: its own node pool)",
                "remove topology",
            )
        )
    return out


def _job_problems(at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
    row = pool.accelerator.row
    out = []
    if row.kind == "tpu":
        if job.nodes is not None:
            out.append(
                Problem(
                    f"{at}.nodes",
                    job.nodes,
                    f"a TPU job's hosts come from the topology ({row.topology}: {row.hosts})",
                    "remove `nodes`; use `slices` for more TPU slices",
                )
            )
        if job.num_slices > 1 and not row.multi_host:
            out.append(
                Problem(
                    f"{at}.slices",
                    job.slices,
                    f"{row.family} {row.topology} is single-host, multi-slice needs a multi-host topology",
                    "use slices=1 or a multi-host topology",
                )
            )
    elif job.slices is not None:
        out.append(
            Problem(
                f"{at}.slices",
                job.slices,
                f"slices are for TPU pools; {pool.name} is {row.kind}",
                "use `nodes` instead",
            )
        )
    for section in ("requests", "limits"):
        if row.resource and row.resource in getattr(job.resources, section):
            out.append(
                Problem(
                    f"{at}.resources.{section}.{row.resource}",
                    getattr(job.resources, section)[row.resource],
                    "set from the node pool's accelerator",
                    "remove it; change the node pool instead",
                )
            )
    return out


def _backend_problems(at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
    """What the job's backend cannot express (`Backend.problems`), and a runtime where its backend runs on none."""
    out = backends.get(job.backend).problems(at, job, pool)
    if job.runtime is not None and not backends.get(job.backend).runtimes:
        which = " or ".join(f"backend={b.name!r}" for b in backends.BACKENDS.values() if b.runtimes)
        out.append(
            Problem(
                f"{at}.runtime",
                job.runtime,
                f"a training runtime is for {which} only",
                f"remove runtime, or use {which}",
            )
        )
    return out


def _checkpoint_problems(at: str, job: JaxJob, claims: dict[tuple[str, str], str]) -> list[Problem]:
    """Checkpoint storage that could not be mounted as declared, or whose path the user's env would contradict."""
    storage = job.checkpoints
    if storage is None:
        return []
    out = []
    if CHECKPOINT_ENV in job.env:
        out.append(
            Problem(
                f"{at}.env.{CHECKPOINT_ENV}",
                job.env[CHECKPOINT_ENV],
                "set by jaxinfra to the mount path of the job's checkpoints",
                "remove it (or remove checkpoints)",
            )
        )
    if job.upstream_runtime:
        out.append(
            Problem(
                f"{at}.checkpoints",
                storage.kind,
                f"ClusterTrainingRuntime {job.runtime!r} is not jaxinfra's: "
                "it writes no pod template to mount the storage in",
                "remove runtime (jaxinfra's TrainingRuntime mounts it), or remove checkpoints",
            )
        )
    if isinstance(storage, PVC) and storage.rendered:
        name = storage.name or checkpoint_claim(job.name)
        if (job.namespace, name) in claims:
            out.append(
                Problem(
                    f"{at}.checkpoints.name",
                    name,
                    f"job {claims[job.namespace, name]} already renders PersistentVolumeClaim {job.namespace}/{name}",
                    f"share it as an existing claim, PVC({name!r}), or give this one another name",
                )
            )
        claims.setdefault((job.namespace, name), job.name)
    return out


def _kueue_job_problems(at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
    out = []
    if PRIORITY_LABEL in job.labels:
        out.append(
            Problem(
                f"{at}.labels.{PRIORITY_LABEL}",
                job.labels[PRIORITY_LABEL],
                "set by jaxinfra from queue_priority",
                "remove it; set queue_priority=N instead (jaxinfra renders its WorkloadPriorityClass)",
            )
        )
    if QUEUE_LABEL in job.labels:
        out.append(
            Problem(
                f"{at}.labels.{QUEUE_LABEL}",
                job.labels[QUEUE_LABEL],
                "set by jaxinfra when the cluster has kueue=True",
                "remove it (the job goes to its node pool's LocalQueue)",
            )
        )
    if pool.accelerator.row.kind == "cpu" and "cpu" not in {**job.resources.requests, **job.resources.limits}:
        out.append(
            Problem(
                f"{at}.resources",
                {},
                "Kueue counts a CPU pool's quota in requested CPU, and this job requests none",
                "request CPU, e.g. resources={'requests': {'cpu': '2'}}",
            )
        )
    return out


def _pod_security_problems(at: str, cluster: Tree, job: JaxJob, pool: NodePool) -> list[Problem]:
    """A job whose pods the Pod Security level of its (jaxinfra-created) namespace would reject."""
    level = cluster.pod_security
    if level in (None, "privileged") or job.namespace in SYSTEM_NAMESPACES:
        return []
    out = []
    stack = getattr(pool.accelerator, "gpudirect", None)
    if cluster.shadow is None and (stack := gpudirect.for_job(stack, job.nodes or 1)) is not None:
        out.append(
            Problem(
                f"{at}.node_pool",
                job.node_pool,
                f"pool {pool.name} runs {stack.protocol}, whose pods mount host paths"
                + (
                    f" and run the {stack.daemon.name} as root with {', '.join(stack.daemon.capabilities)}"
                    if stack.daemon
                    else ""
                )
                + f": namespace {job.namespace} is created with Pod Security enforce={level}, which rejects them",
                f"set Cluster(pod_security='privileged') to allow it there, or GPU(..., network='standard') on pool "
                f"{pool.name} (plain pod networking: one NIC)",
            )
        )
    for what, field in (("hostNetwork", "host_network"), ("privileged", "privileged")):
        if getattr(job, field):
            out.append(
                Problem(
                    f"{at}.{field}",
                    True,
                    f"namespace {job.namespace} is created with Pod Security enforce={level}, which rejects {what} "
                    "pods",
                    f"set Cluster(pod_security='privileged') to allow it there, or remove {field}",
                )
            )
    if job.upstream_runtime and level == "restricted":
        out.append(
            Problem(
                f"{at}.runtime",
                job.runtime,
                f"ClusterTrainingRuntime {job.runtime!r} is not jaxinfra's: its pods are not known to meet the "
                f"restricted Pod Security level enforced on namespace {job.namespace}",
                "remove runtime (jaxinfra's TrainingRuntime meets restricted), or set Cluster(pod_security='baseline')",
            )
        )
    return out


def _shadow_problems(at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
    """What a CPU shadow cannot express: a multi-slice rank is computed by a shell before the command."""
    if pool.accelerator.row.kind == "tpu" and job.num_slices > 1 and job.command is None:
        return [
            Problem(
                f"{at}.command",
                None,
                "the CPU shadow of a multi-slice job computes JAX_PROCESS_ID (TPU_WORKER_ID + MEGASCALE_SLICE_ID x "
                "hosts, which JAX derives itself only on a TPU VM) in a shell before the command, so it needs the "
                "command",
                "set command to the image's entrypoint, e.g. command=['python', '-m', 'train']",
            )
        ]
    return []


def _name_problems(at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
    """The job name is one root cause: report its longest derived name that is too long."""
    row = pool.accelerator.row
    names = JobNames.of(job.name, backends.get(job.backend), row.kind, job.slices, job.nodes, row.hosts)
    what, value = max(names.derived().items(), key=lambda item: len(item[1]))
    if len(value) <= MAX_NAME:
        return []
    return [
        Problem(
            f"{at}.name",
            job.name,
            f"derived {what} {value!r} is {len(value)} characters, over {MAX_NAME}",
            f"shorten the name by at least {len(value) - MAX_NAME} characters",
        )
    ]
