"""The GKE node pools a stack needs, as plain data (`PoolSlice`): one per spec pool, one per slice of a
multi-slice TPU job, or a single CPU pool sized for the stack's CPU shadow.

Arithmetic over the plan, no Pulumi SDK: the checks (`checks.gke_problems`) and the resources
(`cluster.ClusterComponent`) read the same pools.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from jaxinfra.plan import ClusterPlan, plan
from jaxinfra.pulumi.config import DEFAULT_CPU_MACHINE_TYPE
from jaxinfra.quantity import scale

#: GKE's limit on node pool names.
MAX_POOL_NAME = 40
#: The node pool for the controllers and kube-system (`ClusterComponent._system_pool`), and its nodes per zone
#: (autoscaled).
SYSTEM_POOL = "system"
SYSTEM_POOL_NODES = (1, 3)
#: `jaxinfra:shadow`: the one CPU node pool the shadow runs on, and its machine: e2-standard-4, 4 vCPUs and 16 GiB
#: (Compute Engine's machine types: `memoryMb: 16384`).
SHADOW_POOL = "shadow"
SHADOW_MACHINE = (DEFAULT_CPU_MACHINE_TYPE, 4, 16 * 2**30)
#: Room left on every shadow node for the DaemonSets GKE runs on each node (logging, metrics, Workload Identity's
#: metadata server, networking), whose requests vary with GKE's version and add-ons: jaxinfra's margin, not a GKE
#: figure.
SHADOW_DAEMONS = (Decimal("0.5"), Decimal(512 * 2**20))
#: Pods per node in a GKE Standard node pool unless configured (how-to/flexible-pod-cidr).
MAX_PODS_PER_NODE = 110


@dataclass(frozen=True)
class PoolSlice:
    """One GKE node pool: a spec `NodePool`, or one slice of it for multi-slice TPU jobs."""

    pool: Any  # jaxinfra.spec.NodePool
    name: str
    node_count: int
    slice_index: int | None = None

    @property
    def row(self) -> Any:
        return self.pool.accelerator.row


def node_pools(cluster: Any, cp: ClusterPlan | None = None) -> dict[str, list[PoolSlice]]:
    """GKE node pools per spec pool: TPU, one per slice (max `slices` of its jobs), each of the
    topology's hosts; GPU/CPU, one of the max `nodes` of its jobs. Unused pools get one slice/node.
    A CPU shadow (`Cluster(shadow=...)`) gets none of these but one CPU pool sized for it (`shadow_nodes`).

    `node_count` is per zone (pulumi-gcp `container.NodePool.node_count`: "the number of nodes per
    instance group", one instance group per zone; GKE docs, concepts/regional-clusters), so these
    counts are the hosts only in one zone: the accelerator pools' (`Settings.accelerator_zone`).
    """
    cp = cp or plan(cluster)
    if cp.shadow is not None:
        from jaxinfra.spec import NodePool

        pool = NodePool.model_validate(
            {"name": SHADOW_POOL, "accelerator": {"kind": "cpu", "machine_type": SHADOW_MACHINE[0]}}
        )
        return {SHADOW_POOL: [PoolSlice(pool, SHADOW_POOL, max(shadow_nodes(cp), 1))]}
    out: dict[str, list[PoolSlice]] = {}
    for pool in cluster.node_pools:
        jobs = [jp for jp in cp.jobs if jp.pool.name == pool.name]
        row = pool.accelerator.row
        if row.kind == "tpu":
            slices = max((jp.slices for jp in jobs), default=1)
            out[pool.name] = (
                [PoolSlice(pool, pool.name, row.hosts)]
                if slices == 1
                else [PoolSlice(pool, f"{pool.name}-{i}", row.hosts, i) for i in range(slices)]
            )
        else:
            out[pool.name] = [PoolSlice(pool, pool.name, max((jp.hosts_per_slice for jp in jobs), default=1))]
    return out


def _gke_reserved(cores: int, memory: int) -> tuple[Decimal, Decimal]:
    """What GKE keeps of a node for itself (GKE docs, concepts/plan-node-sizes, "node allocatable"): CPU, 6% of the
    first core, 1% of the next, 0.5% of the next 2 and 0.25% of any above 4; memory, 25% of the first 4 GiB, 20% of
    the next 4, 10% of the next 8, 6% of the next 112 and 2% above 128, plus 100 MiB for the kubelet's eviction."""

    def tiers(amount: Decimal, steps: Sequence[tuple[Decimal, str]]) -> Decimal:
        total, left = Decimal(0), amount
        for size, share in steps:
            part = min(left, size)
            total, left = total + part * Decimal(share), left - part
        return total

    gib = Decimal(2**30)
    cpu = tiers(
        Decimal(cores), [(Decimal(1), "0.06"), (Decimal(1), "0.01"), (Decimal(2), "0.005"), (Decimal(cores), "0.0025")]
    )
    mem = (
        tiers(
            Decimal(memory),
            [(4 * gib, "0.25"), (4 * gib, "0.20"), (8 * gib, "0.10"), (112 * gib, "0.06"), (Decimal(memory), "0.02")],
        )
        + 100 * 2**20
    )
    return cpu, mem


def shadow_pods_per_node(shadow: Any) -> int:
    """How many pods of a CPU shadow (each requesting `shadow.cpu`, `shadow.memory`) one shadow node holds: its
    allocatable, less GKE's share and room for GKE's DaemonSets, at most MAX_PODS_PER_NODE."""
    _, cores, memory = SHADOW_MACHINE
    reserved_cpu, reserved_memory = _gke_reserved(cores, memory)
    free = (cores - reserved_cpu - SHADOW_DAEMONS[0], memory - reserved_memory - SHADOW_DAEMONS[1])
    each = (scale(shadow.cpu, 1)[0], scale(shadow.memory, 1)[0])  # in cores and bytes
    return min([*(int(room // request) for room, request in zip(free, each) if request > 0), MAX_PODS_PER_NODE])


def shadow_nodes(cp: ClusterPlan) -> int:
    """Nodes of the shadow pool: every pod of every job at once (what `jaxinfra.shadow.requests` adds up), packed."""
    pods = sum(jp.processes for jp in cp.jobs)
    per_node = shadow_pods_per_node(cp.shadow)
    return math.ceil(pods / per_node) if per_node else 0
