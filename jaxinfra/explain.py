"""`jaxinfra explain`: what each job becomes — pods, hosts, devices, coordinator, env per rank."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from jaxinfra.plan import ClusterPlan, JobPlan


def shown_ranks(processes: int, limit: int) -> list[int | None]:
    """The first ranks and the last one, with None where ranks are elided."""
    if processes <= limit:
        return list(range(processes))
    return [*range(max(limit - 1, 1)), None, processes - 1]


def facts(jp: JobPlan) -> list[tuple[str, str]]:
    """The derived numbers of one job, as label/value pairs."""
    a = jp.accel
    if jp.multi_slice:
        rank_rule = f"TPU_WORKER_ID + MEGASCALE_SLICE_ID x {jp.hosts_per_slice} (derived by jax.distributed.initialize())"
    elif jp.backend == "jaxjob":
        rank_rule = "PROCESS_ID = the replica index (set by the Training Operator)"
    elif jp.backend == "trainjob":
        rank_rule = "JAX_PROCESS_ID = the pod's completion index (set by Trainer's JAX plugin)"
    else:
        rank_rule = "JAX_PROCESS_ID = the pod's completion index"
    return [
        ("backend", jp.backend),
        ("node pool", f"{jp.pool.name}: {a.name} ({a.machine_type or 'any machine'})"),
        ("slices x hosts", f"{jp.slices} x {jp.hosts_per_slice}"),
        ("processes (pods)", str(jp.processes)),
        ("devices", f"{jp.devices_per_process} per process, {jp.devices} in all"),
        ("coordinator", jp.coordinator_address),
        ("rank", rank_rule),
        ("restarts", f"{jp.job.max_restarts} whole-group restarts"),
        *([("runtime", f"{'TrainingRuntime' if jp.renders_runtime else 'ClusterTrainingRuntime'} {jp.runtime}")]
          if jp.backend == "trainjob" else []),
        *([("queue", f"Kueue LocalQueue {jp.namespace}/{jp.queue}")] if jp.queue else []),
        *security(jp),
    ]


def security(jp: JobPlan) -> list[tuple[str, str]]:
    """Pod Security (restricted, or each exception and why), API access, network policy, env references."""
    j = jp.job
    if not jp.renders_pod:
        pod_security = (f"set by ClusterTrainingRuntime {jp.runtime} (jaxinfra renders no pod template, so it cannot "
                        f"guarantee restricted)")
    elif exceptions := jp.pod_security_exceptions():
        pod_security = "exceptions to restricted: " + "; ".join(f"{what} ({why})" for what, why in exceptions)
    else:
        pod_security = (f"restricted: non-root (uid {j.run_as_user}, gid {j.run_as_group}), no privilege escalation, "
                        f"all capabilities dropped, RuntimeDefault seccomp")
    if not jp.renders_pod:
        api = "as the ClusterTrainingRuntime's pods have it; no Role"
    elif j.kubernetes_api:
        api = (f"Role {jp.name}: get/list/watch on pods, services and batch jobs in {jp.namespace} (JAX's Kubernetes "
               f"auto-detection); ServiceAccount token mounted")
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


def render_explanation(console: Console, path: Path, cp: ClusterPlan, limit: int) -> None:
    console.print(f"[bold]{path}[/bold]: cluster [bold]{cp.name}[/bold], {len(cp.jobs)} job(s)")
    for jp in cp.jobs:
        summary = Table(title=f"job {jp.namespace}/{jp.name}", show_header=False)
        for k, v in facts(jp):
            summary.add_row(k, v)
        console.print(summary)
        ranks = Table("rank", "pod hostname", "contract env", "set by", title="env each rank receives, and who sets it")
        for rank in shown_ranks(jp.processes, limit):
            if rank is None:
                ranks.add_row("…", "…", "…", "…")
                continue
            env = jp.env_sources(rank)
            ranks.add_row(str(rank), jp.hostname(rank), "\n".join(f"{k}={v}" for k, (v, _) in env.items()),
                          "\n".join(by for _, by in env.values()), end_section=True)
        console.print(ranks)
