"""A CPU shadow of any job: the job's full process count on a real cluster's CPU nodes, before the accelerator bill.

The simulator runs a job on one machine; what only a real cluster shows at scale (cluster DNS for
thousands of pods, the coordinator's fan-in, the controllers creating every pod, Kueue admitting the
workload, the NetworkPolicy) needs the real cluster, and a shadow needs only CPUs there. A shadow keeps
the job's processes, names, Services, restart rules and queues; each process gets as many JAX CPU
devices as it would have chips, small CPU and memory requests (`spec.Shadow`), no accelerator resource,
selector or toleration, and the env GKE's TPU webhook would inject written out (per slice). What
changes in the manifests is decided in the plan (`JobPlan.runs_on`, `shadow`, `shell_rank`).

`shadow(cluster)` is the one entry point: `jaxinfra synth --shadow cpu` calls it, and so can an adapter
(the cdk8s chart takes the cluster it returns as it is).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jaxinfra.names import PROCESS_ID, SHADOW_OF
from jaxinfra.plan import ClusterPlan, JobPlan, pod_total_requests
from jaxinfra.quantity import scale, total
from jaxinfra.spec import Cluster, raw

#: What a shadow shows on a real cluster that one machine cannot.
PROVES = (
    "the manifests apply and the controllers create every pod, with its real name, hostname and labels, "
    "at the job's full process count",
    "cluster DNS resolves every hostname before readiness, and every process reaches the coordinator within "
    "the init timeout (its fan-in at full scale)",
    "the script initializes unchanged from the env contract (coordinator, process count, rank, devices per "
    "process) and collectives span every process",
    "the restart rules (a killed pod restarts the group), Kueue admitting the whole workload, and the "
    "NetworkPolicy between the pods",
)
#: What it cannot: everything that needs the accelerator itself.
CANNOT = (
    "ICI/DCN/NVLink bandwidth and latency: collectives run over TCP (gloo) between CPU pods",
    "device memory: nothing is placed in HBM, so whether the program fits, and how long a step takes, stays unknown",
    "libtpu/CUDA: the accelerator runtime, XLA's TPU/GPU compiler, the MEGASCALE DCN transport and JAX's own "
    "TPU detection (GKE's TPU webhook is not exercised: the shadow writes its env out)",
    "placement: accelerator node pools, TPU topology, one slice per node pool, accelerator quota, Spot "
    "preemption and hostNetwork",
    "capacity: a flex-start pool's ProvisioningRequest AdmissionCheck is left out (the shadow's CPU nodes exist), so "
    "how long DWS takes to provision the accelerators is not shown (`jaxinfra simulate --provision` rehearses it)",
)


def shadow(cluster: Cluster, cpu: str | None = None, memory: str | None = None) -> Cluster:
    """`cluster` as a CPU shadow, revalidated; `cpu` / `memory` override the requests per process (defaults and
    their reasons: `spec.Shadow`; a shadow the stack declares keeps its values unless overridden)."""
    given = {key: value for key, value in (("cpu", cpu), ("memory", memory)) if value is not None}
    return cluster.with_changes(shadow={**(raw(cluster.shadow) if cluster.shadow else {}), **given})


def facts(jp: JobPlan) -> list[tuple[str, str]]:
    """`explain`'s lines for a shadow job (none otherwise): what it stands in for, where its rank comes from,
    what it proves and what it cannot."""
    if jp.shadow_of is None:
        return []
    out = [("shadow", jp.shadow_of)]
    if jp.shell_rank:
        out.append(
            (
                "shadow rank",
                f"{PROCESS_ID} = TPU_WORKER_ID + MEGASCALE_SLICE_ID x {jp.hosts_per_slice}, computed by "
                f"/bin/sh before the command (on a TPU VM, jax.distributed.initialize() derives it)",
            )
        )
    return out + [("shadow proves", "; ".join(PROVES)), ("shadow cannot prove", "; ".join(CANNOT))]


def notes(manifests: Iterable[Mapping[str, Any]]) -> list[str]:
    """For a simulation report: per shadow workload among `manifests` (known by its annotation, so YAML from
    `jaxinfra synth --shadow cpu` or `cdk8s synth` works too), what it stands in for, proves and cannot prove."""
    out = []
    for m in manifests:
        meta = m.get("metadata") or {}
        if of := (meta.get("annotations") or {}).get(SHADOW_OF):
            out.append(
                f"{m.get('kind')} {meta.get('namespace', 'default')}/{meta.get('name')} is a CPU shadow of {of}. "
                f"On a cluster it proves: {'; '.join(PROVES)}. It cannot prove: {'; '.join(CANNOT)}."
            )
    return out


def requests(cp: ClusterPlan) -> dict[str, str]:
    """What all of a shadow's pods request together, per resource (cpu, memory): the least a CPU node pool
    for it must hold, all jobs at once (Kueue, if on, admits them by the same numbers)."""
    parts: dict[str, list[str | int]] = {}
    for jp in cp.jobs:
        for name, quantity in pod_total_requests(jp).items():
            parts.setdefault(name, []).append(scale(quantity, jp.processes)[1])
    return {name: str(total(quantities)) for name, quantities in parts.items()}  # units may differ: base units
