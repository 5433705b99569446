"""`jaxinfra explain`: what each job becomes — pods, hosts, devices, coordinator, env per rank.

The env of thousands of ranks follows a few patterns: each variable is a constant or a template
over the rank, its slice and its host within the slice (`train-slice-<slice>-<host>`). Ranks
whose env fits one set of templates are printed once, as a range, so a 6,144-host job's
explanation fits a screen; `--rank N` and `--all-ranks` print ranks one by one. Nothing is
abbreviated: without a terminal (a CI log, 80 columns) long values fold, never end in "…".
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from rich.console import Console
from rich.table import Column, Table

from jaxinfra import shadow
from jaxinfra.names import provisioning_check, workload_priority_class
from jaxinfra.plan import ClusterPlan, JobPlan, pod_total_requests, pool_gpudirect
from jaxinfra.quantity import scale
from jaxinfra.topology import Layout
from jaxinfra.upstream import GKE_TOPOLOGY_LEVELS

#: The pseudo-variable for the pod's hostname, shown first in every env block.
HOSTNAME = "pod hostname"
#: What a template may say about a rank: the rank itself, its slice, its host within the slice.
PLACEHOLDERS = ("rank", "slice", "host")
#: A value with more ways to read its numbers than this is taken as a literal.
MAX_READINGS = 256


@dataclass(frozen=True)
class Var:
    """A placeholder in a template: `<slice>`."""

    name: str

    def __str__(self) -> str:
        return f"<{self.name}>"


Template = tuple["str | Var", ...]


def _where(jp: JobPlan, rank: int) -> dict[str, int]:
    slice_index, host = divmod(rank, jp.hosts_per_slice)
    return {"rank": rank, "slice": slice_index, "host": host}


def _fill(template: Template, where: dict[str, int]) -> str:
    return "".join(str(where[p.name]) if isinstance(p, Var) else p for p in template)


def _readings(value: str, where: dict[str, int]) -> list[Template]:
    """Every template that gives `value` at this rank: each number literal or a placeholder equal to it."""
    pieces = re.split(r"(\d+)", value)
    options: list[list[str | Var]] = [
        [piece] if i % 2 == 0 else [piece, *(Var(k) for k in PLACEHOLDERS if str(where[k]) == piece)]
        for i, piece in enumerate(pieces)
    ]
    if math.prod(map(len, options)) > MAX_READINGS:
        return [(value,)]
    return [tuple(p for p in combo if p != "") for combo in itertools.product(*options)]


def _simplest(templates: list[Template]) -> Template:
    """The reading with the fewest placeholders (a constant is a literal), rank before slice before host."""

    def order(t: Template) -> tuple[int, list[int]]:
        used = [PLACEHOLDERS.index(p.name) for p in t if isinstance(p, Var)]
        return len(used), used

    return min(templates, key=order)


def _env(jp: JobPlan, rank: int) -> dict[str, tuple[str, str]]:
    """Rank `rank`'s hostname and contract env: name -> (value, who sets it)."""
    return {HOSTNAME: (jp.hostname(rank), ""), **jp.env_sources(rank)}


@dataclass(frozen=True)
class EnvRange:
    """Ranks `first`..`last`, whose env every one of `env`'s templates gives: name -> (template, who sets it)."""

    first: int
    last: int
    env: dict[str, tuple[Template, str]]

    @property
    def placeholders(self) -> set[str]:
        return {p.name for t, _ in self.env.values() for p in t if isinstance(p, Var)}


def env_ranges(jp: JobPlan, first: int = 0, last: int | None = None) -> Iterator[EnvRange]:
    """The ranks `first`..`last` as maximal runs that follow one pattern each, in rank order."""
    last = jp.processes - 1 if last is None else last
    rank = first
    while rank <= last:
        env = _env(jp, rank)
        if rank == last:  # one rank: its values as they are
            yield EnvRange(rank, rank, {n: ((v,), by) for n, (v, by) in env.items()})
            return
        where = _where(jp, rank)
        readings = {n: _readings(v, where) for n, (v, _) in env.items()}
        end = rank
        while end < last:
            nxt, where = _env(jp, end + 1), _where(jp, end + 1)
            if [(n, by) for n, (_, by) in nxt.items()] != [(n, by) for n, (_, by) in env.items()]:
                break
            kept = {n: [t for t in ts if _fill(t, where) == nxt[n][0]] for n, ts in readings.items()}
            if not all(kept.values()):
                break
            readings, end = kept, end + 1
        yield EnvRange(rank, end, {n: (_simplest(readings[n]), by) for n, (_, by) in env.items()})
        rank = end + 1


def span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}–{last}"


def env_lines(jp: JobPlan, r: EnvRange) -> list[str]:
    """One env block: the ranks, what the placeholders mean, then the variables grouped by who sets them."""
    used = r.placeholders
    if r.first == r.last:
        head = f"rank {r.first}"
    else:
        legend = [
            f"<{k}> = rank {'÷' if k == 'slice' else 'mod'} {jp.hosts_per_slice}"
            for k in ("slice", "host")
            if k in used
        ]
        head = f"ranks {span(r.first, r.last)} ({r.last - r.first + 1} pods)" + (
            f": {', '.join(legend)}" if legend else ""
        )
    lines = [head]
    by_setter: dict[str, list[str]] = {}
    for name, (template, by) in r.env.items():
        value = "".join(map(str, template))
        if name == HOSTNAME:
            lines.append(f"  {name}: {value}")
        else:
            by_setter.setdefault(by, []).append(f"    {name}={value}")
    for by, rows in by_setter.items():
        lines += [f"  set by {by}:", *rows]
    return lines


def shown_ranks(jp: JobPlan, ranks: Collection[int], all_ranks: bool) -> Iterator[EnvRange]:
    """What `explain` prints of a job's env: patterns by default, else the ranks asked for, one by one."""
    if all_ranks:
        chosen: Collection[int] = range(jp.processes)
    elif ranks:
        chosen = sorted({r for r in ranks if 0 <= r < jp.processes})
    else:
        yield from env_ranges(jp)
        return
    for rank in chosen:
        yield from env_ranges(jp, rank, rank)


def facts(jp: JobPlan) -> list[tuple[str, str]]:
    """The derived numbers of one job, as label/value pairs."""
    a = jp.accel
    if jp.multi_slice:
        rank_rule = (
            f"TPU_WORKER_ID + MEGASCALE_SLICE_ID x {jp.hosts_per_slice} (derived by jax.distributed.initialize())"
        )
    else:
        rank_rule = jp.backend.rank_rule
    return [
        ("backend", jp.backend.name),
        ("node pool", f"{jp.pool.name}: {a.name} ({a.machine_type or 'any machine'})"),
        ("slices x hosts", f"{jp.slices} x {jp.hosts_per_slice}"),
        ("processes (pods)", str(jp.processes)),
        ("devices", f"{jp.devices_per_process} per process, {jp.devices} in all"),
        ("coordinator", jp.coordinator_address),
        ("rank", rank_rule),
        ("restarts", f"{jp.job.max_restarts} whole-group restarts"),
        *([("GPU network", text)] if (text := gpu_network(jp)) else []),
        *([("checkpoints", jp.checkpoint_storage)] if jp.checkpoint_storage else []),
        *(
            [("runtime", f"{'TrainingRuntime' if jp.renders_runtime else 'ClusterTrainingRuntime'} {jp.runtime}")]
            if jp.backend.runtimes
            else []
        ),
        *([("capacity", text)] if (text := capacity(jp)) else []),
        *([("queue", queue(jp))] if jp.queue else []),
        *([("topology", text)] if (text := topology_request(jp)) else []),
        *security(jp),
        *([("customized", text)] if (text := customizations(jp)) else []),
        *shadow.facts(jp),  # a CPU shadow: what it stands in for, proves and cannot prove
    ]


def capacity(jp: JobPlan) -> str | None:
    """How the job's nodes are obtained and what would hold it at design time (docs/capacity.md); None for a shadow,
    whose CPU nodes exist."""
    if jp.shadow is not None:
        return None
    nodes = f"{jp.processes} node{'s' if jp.processes != 1 else ''}"
    pool = jp.pool
    if pool.capacity == "flex-start":
        check = provisioning_check(jp.cluster, pool.name)
        return (
            f"flex-start (DWS queued provisioning): the pool has no node until GKE provisions all {nodes} at once for "
            f"Kueue's ProvisioningRequest; the workload waits, suspended, until AdmissionCheck {check} is Ready "
            f"(rehearse: jaxinfra simulate --provision {check}@SECONDS, or @never)"
        )
    if pool.capacity == "spot":
        return f"Spot VMs ({nodes}): GKE may reclaim any of them at any time (rehearse: jaxinfra simulate --preempt)"
    if pool.capacity == "reservation":
        return f"reservation {pool.reservation}: it must hold all {nodes} (a TPU slice: the whole slice)"
    return f"on-demand VMs ({nodes})"


def quota_wait(cp: ClusterPlan, jp: JobPlan) -> str | None:
    """Why the job may wait in its queue at design time: the ClusterQueue of its pool is sized for the pool's largest
    job (`plan.PoolQueue.quota`), so jobs that together need more are admitted one after another. None otherwise."""
    q = next((q for q in cp.queues if jp in q.jobs), None)
    if q is None or len(q.jobs) < 2:
        return None
    demand: dict[str, Decimal] = {}
    for other in q.jobs:
        for name, value in pod_total_requests(other).items():
            demand[name] = demand.get(name, Decimal(0)) + scale(value, other.processes)[0]
    quota = {name: scale(value, 1)[0] for name, value in q.quota.items()}
    short = sorted(name for name, need in demand.items() if need > quota.get(name, Decimal(0)))
    if not short:
        return None
    others = ", ".join(o.name for o in q.jobs if o is not jp)
    return (
        f"ClusterQueue {q.cluster_queue} holds its pool's largest job; with {others} its jobs need more "
        f"{', '.join(short)} than that, so Kueue admits them one after another, each waiting, suspended, for the "
        "quota the others free"
    )


def topology_request(jp: JobPlan) -> str | None:
    """The job's Kueue Topology-Aware Scheduling request, and what it needs of the nodes; None without one (or in a
    shadow, which drops it)."""
    level = jp.job.topology
    if level is None or jp.queue is None or jp.shadow is not None:
        return None
    how = (
        f"required: Kueue admits it only once one {level} can hold them all"
        if jp.job.topology_required
        else f"preferred: Kueue places them in as few {level}s as it can"
    )
    return f"every pod within one GKE {level} ({how}), by the nodes' {GKE_TOPOLOGY_LEVELS[level]} label"


def queue(jp: JobPlan) -> str:
    """The job's Kueue LocalQueue, and its priority there when it sets one."""
    priority = jp.job.queue_priority
    return f"Kueue LocalQueue {jp.namespace}/{jp.queue}" + (
        f", priority {priority} (WorkloadPriorityClass {workload_priority_class(jp.cluster, priority)})"
        if priority is not None
        else ""
    )


def gpu_network(jp: JobPlan) -> str | None:
    """Which network a GPU job's processes talk over (`jaxinfra.gpudirect`); None for TPU and CPU jobs."""
    if jp.kind != "gpu":
        return None
    stack = pool_gpudirect(jp.pool)
    if jp.shadow is not None:
        return "pod networking (a CPU shadow drops " + (f"{stack.protocol})" if stack else "nothing here)")
    if stack is None:
        why = (
            "GPU(network='standard')"
            if getattr(jp.pool.accelerator, "network", None) == "standard"
            else "no GPUDirect stack on GKE"
        )
        return f"pod networking, one NIC ({jp.accel.machine_type}: {why})"
    if jp.gpudirect is None:
        return f"pod networking: one node, its GPUs over NVLink (the pool has {stack.protocol})"
    daemon = f", the {stack.daemon.name} sidecar" if stack.daemon else ""
    return f"{stack.summary}; pods get the interfaces annotation{daemon}, the NCCL plugin's host libraries"


def layout(jp: JobPlan) -> Layout:
    """What the topology picture shows of a planned job (`jaxinfra explain --svg`), its names the backend's."""
    b = jp.backend
    return Layout(
        title=f"{jp.namespace}/{jp.name} ({b.title})",
        pool=f"node pool {jp.pool.name}: {jp.accel.name}"
        + (f" ({jp.accel.machine_type})" if jp.accel.machine_type else ""),
        slices=jp.slices,
        hosts_per_slice=jp.hosts_per_slice,
        devices_per_host=jp.devices_per_process,
        device_kind=jp.kind,
        hostname=jp.hostname,
        group=lambda i: b.group(jp.names, i),
        coordinator=jp.coordinator_address,
        service=b.dns_service(jp.names),
        queue=f"Kueue LocalQueue {jp.namespace}/{jp.queue}" if jp.queue else None,
    )


def customizations(jp: JobPlan) -> str:
    """What the job adds to the pods and objects jaxinfra renders (`JaxJob.priority_class` ... `object_patches`), in
    words, so a reviewer sees that they differ from jaxinfra's own; empty for a job without any."""
    j = jp.job
    parts = []
    if j.priority_class:
        parts.append(f"priority class {j.priority_class}")
    if j.tolerations:
        keys = ", ".join(t.key or "any key" for t in j.tolerations)
        parts.append(f"{len(j.tolerations)} toleration{'s' if len(j.tolerations) != 1 else ''} ({keys})")
    if j.node_selector:
        dropped = " (dropped by the CPU shadow)" if jp.shadow is not None else ""
        parts.append("node selector " + ", ".join(f"{k}={v}" for k, v in j.node_selector.items()) + dropped)
    if j.sidecars:
        parts.append(f"sidecar{'s' if len(j.sidecars) != 1 else ''} " + ", ".join(s.name for s in j.sidecars))
    if j.pod_patches:
        at = {"": "(the whole template)"}  # the empty pointer, which would print as nothing
        ops = ", ".join(
            f"{op['op']} {op['from']} -> {at.get(op['path'], op['path'])}"
            if "from" in op
            else f"{op['op']} {at.get(op['path'], op['path'])}"
            for op in j.pod_patches
        )
        parts.append(f"{len(j.pod_patches)} pod patch{'es' if len(j.pod_patches) != 1 else ''} ({ops})")
    for kind, kind_ops in j.object_patches.items():
        parts.append(f"{len(kind_ops)} {kind} patch{'es' if len(kind_ops) != 1 else ''}")
    return "; ".join(parts)


def security(jp: JobPlan) -> list[tuple[str, str]]:
    """Pod Security (restricted, or each exception and why), API access, network policy, env references."""
    j = jp.job
    if not jp.renders_pod:
        pod_security = (
            f"set by ClusterTrainingRuntime {jp.runtime} (jaxinfra renders no pod template, so it cannot "
            f"guarantee restricted)"
        )
    elif exceptions := jp.pod_security_exceptions():
        pod_security = "exceptions to restricted: " + "; ".join(f"{what} ({why})" for what, why in exceptions)
    else:
        pod_security = (
            f"restricted: non-root (uid {j.run_as_user}, gid {j.run_as_group}), no privilege escalation, "
            f"all capabilities dropped, RuntimeDefault seccomp"
        )
    if jp.renders_pod and j.pod_patches:  # an escape hatch may change any of it; admission checks the patched pods
        pod_security += " (as jaxinfra renders the pods, before the job's pod patches)"
    if not jp.renders_pod:
        api = "as the ClusterTrainingRuntime's pods have it; no Role"
    elif j.kubernetes_api:
        api = (
            f"Role {jp.name}: get/list/watch on pods, services and batch jobs in {jp.namespace} (JAX's Kubernetes "
            f"auto-detection); ServiceAccount token mounted"
        )
    else:
        api = "none: no Role, no ServiceAccount token mounted"
    if not j.network_policy:
        net = "none (network_policy=False): any pod may connect"
    else:
        selector = ", ".join(f"{k}={v}" for k, v in jp.pod_labels.items())
        net = f"ingress only from the job's own pods ({selector}), any port; egress unrestricted"
        if j.host_network:
            net += "; not enforced on host-network pods"
    out = [("pod security", pod_security), ("Kubernetes API", api), ("network policy", net)]
    if refs := jp.env_references():
        out.append(("env references", "; ".join(f"{name} {src}" for name, src in refs.items())))
    return out


def render_explanation(
    console: Console, path: Path, cp: ClusterPlan, ranks: Collection[int] = (), all_ranks: bool = False
) -> None:
    """Print every job of a cluster: its facts, then its env (patterns, or the ranks asked for)."""
    n = len(cp.jobs)
    console.print(
        f"[bold]{path}[/bold]: cluster [bold]{cp.name}[/bold], {n} job{'s' if n != 1 else ''}", highlight=False
    )
    for jp in cp.jobs:
        summary = Table.grid(Column(no_wrap=True), Column(overflow="fold"), padding=(0, 2))
        for k, v in [*facts(jp), *([("quota", text)] if (text := quota_wait(cp, jp)) else [])]:
            summary.add_row(k, v)
        console.print(f"\n[bold]job {jp.namespace}/{jp.name}[/bold]", highlight=False)
        console.print(summary, highlight=False)
        console.print("[bold]env each rank receives, and who sets it[/bold]", highlight=False)
        lines = [line for r in shown_ranks(jp, ranks, all_ranks) for line in env_lines(jp, r)]
        console.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
