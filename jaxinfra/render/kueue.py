"""Kueue (kueue.x-k8s.io/v1beta2, the CRDs' storage version): per node pool a ResourceFlavor and a
ClusterQueue, and a LocalQueue in each namespace whose jobs use the pool. Opt-in: `Cluster(kueue=True)`.

The workloads name their LocalQueue with the `kueue.x-k8s.io/queue-name` label
(`render.common.workload_metadata`); quotas come from `plan.PoolQueue`.
"""

from __future__ import annotations

from jaxinfra import names as N
from jaxinfra.plan import PoolQueue
from jaxinfra.render.common import Manifest, pool_placement
from jaxinfra.upstream import KUEUE_API, NAMESPACE_NAME_LABEL

#: The value GKE gives the accelerator taints of TPU and GPU nodes (`google.com/tpu=present:NoSchedule`).
_GKE_TAINT_VALUE = "present"


def _labels(cluster: str) -> dict[str, str]:
    return {N.MANAGED_BY: "jaxinfra", N.PART_OF: cluster}


def resource_flavor(q: PoolQueue) -> Manifest:
    """The pool's nodes: the labels its pods select, and the taints they tolerate (a shadow's: none, any node).

    Kueue assigns this flavor only to workloads that tolerate `nodeTaints`, and adds
    `nodeLabels` to the admitted pods' node selectors (they select them already).
    """
    selector, tolerations = pool_placement(q.pool) if q.shadow is None else ({}, [])
    taints = [{"key": t["key"], "value": t.get("value", _GKE_TAINT_VALUE), "effect": t["effect"]} for t in tolerations]
    spec: dict[str, object] = {}
    if selector:
        spec["nodeLabels"] = selector
    if taints:
        spec["nodeTaints"] = taints
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {"name": q.flavor, "labels": _labels(q.cluster)},
        "spec": spec,
    }


def cluster_queue(q: PoolQueue) -> Manifest:
    """The pool's capacity as quota in one flavor, open to the namespaces of its jobs only."""
    quota = q.quota
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": q.cluster_queue, "labels": _labels(q.cluster)},
        "spec": {
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": list(q.namespaces)},
                ]
            },
            "resourceGroups": [
                {
                    "coveredResources": list(quota),
                    "flavors": [
                        {
                            "name": q.flavor,
                            "resources": [{"name": name, "nominalQuota": value} for name, value in quota.items()],
                        }
                    ],
                }
            ],
        },
    }


def local_queue(q: PoolQueue, namespace: str) -> Manifest:
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": q.local_queue, "namespace": namespace, "labels": _labels(q.cluster)},
        "spec": {"clusterQueue": q.cluster_queue},
    }


def kueue_objects(queues: tuple[PoolQueue, ...]) -> list[Manifest]:
    """Cluster-scoped objects first (flavors, then the queues that name them), then LocalQueues."""
    return (
        [resource_flavor(q) for q in queues]
        + [cluster_queue(q) for q in queues]
        + [local_queue(q, ns) for q in queues for ns in q.namespaces]
    )
