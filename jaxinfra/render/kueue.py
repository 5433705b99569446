"""Kueue (kueue.x-k8s.io/v1beta2, the CRDs' storage version): per node pool a ResourceFlavor and a
ClusterQueue, and a LocalQueue in each namespace whose jobs use the pool. Opt-in: `Cluster(kueue=True)`.
A flex-start pool's ClusterQueue also names an AdmissionCheck of Kueue's ProvisioningRequest controller, backed by a
ProvisioningRequestConfig of GKE's queued-provisioning class: Kueue admits a workload only once GKE has provisioned
every node it needs.

The workloads name their LocalQueue with the `kueue.x-k8s.io/queue-name` label
(`render.common.workload_metadata`); quotas come from `plan.PoolQueue`.
"""

from __future__ import annotations

from jaxinfra import names as N
from jaxinfra import upstream as U
from jaxinfra.plan import PoolQueue
from jaxinfra.render.common import Manifest, pool_placement
from jaxinfra.upstream import (
    KUEUE_API,
    KUEUE_API_GROUP,
    NAMESPACE_NAME_LABEL,
    PROVISIONING_REQUEST_CONTROLLER,
    PROVISIONING_REQUEST_LABEL,
    QUEUED_PROVISIONING_CLASS,
    RESIZE_REQUEST_DETAIL,
)

#: The value GKE gives the accelerator taints of TPU and GPU nodes (`google.com/tpu=present:NoSchedule`).
_GKE_TAINT_VALUE = "present"


def _labels(cluster: str) -> dict[str, str]:
    return {N.MANAGED_BY: "jaxinfra", N.PART_OF: cluster}


def topology(cluster: str, name: str) -> Manifest:
    """GKE's node topology as Kueue's Topology-Aware Scheduling reads it: block, sub-block, host, then the node (the
    levels of the `gke-default` Topology xpk applies for the GPUs that need one, named on their flavor's topologyName:
    AI-Hypercomputer/xpk @ 2647059a src/xpk/core/kueue_manager.py `__get_topology_name_and_yaml`; and of GKE's TAS
    guide). Kueue requires kubernetes.io/hostname last where it is a level (apis/kueue/v1beta2 topology_types.go)."""
    levels = [*U.GKE_TOPOLOGY_LEVELS.values(), U.HOSTNAME_LABEL]
    return {
        "apiVersion": KUEUE_API,
        "kind": "Topology",
        "metadata": {"name": name, "labels": _labels(cluster)},
        "spec": {"levels": [{"nodeLabel": label} for label in levels]},
    }


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
    if q.topology:  # its jobs ask for a placement: Kueue reads the nodes' topology labels through this Topology
        spec["topologyName"] = q.topology
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {"name": q.flavor, "labels": _labels(q.cluster)},
        "spec": spec,
    }


def provisioning_request_config(q: PoolQueue, check: str) -> Manifest:
    """How Kueue asks GKE for a flex-start pool's nodes: a ProvisioningRequest of class queued-provisioning.gke.io for
    the pods' accelerator (the one managed resource: a workload that requests none needs no request), and, once it is
    provisioned, a node selector that pins the pods to the nodes provisioned for it (their
    autoscaling.gke.io/provisioning-request label, valued as the request's ResizeRequestName detail). As GKE's DWS
    guide (how-to/provisioningrequest, "Create the Kueue resources") and xpk (AI-Hypercomputer/xpk @ 9878d93a
    goldens/Basic_cluster_adapt.txt) render it; Kueue's fields: kubernetes-sigs/kueue apis/kueue/v1beta2
    provisioningrequestconfig_types.go."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": check, "labels": _labels(q.cluster)},
        "spec": {
            "managedResources": [q.resource],
            "podSetUpdates": {
                "nodeSelector": [
                    {"key": PROVISIONING_REQUEST_LABEL, "valueFromProvisioningClassDetail": RESIZE_REQUEST_DETAIL}
                ]
            },
            "provisioningClassName": QUEUED_PROVISIONING_CLASS,
        },
    }


def admission_check(q: PoolQueue, check: str) -> Manifest:
    """The check a flex-start pool's ClusterQueue names: Kueue's ProvisioningRequest controller with the pool's
    ProvisioningRequestConfig (of the same name) as its parameters."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "AdmissionCheck",
        "metadata": {"name": check, "labels": _labels(q.cluster)},
        "spec": {
            "controllerName": PROVISIONING_REQUEST_CONTROLLER,
            "parameters": {"apiGroup": KUEUE_API_GROUP, "kind": "ProvisioningRequestConfig", "name": check},
        },
    }


def cluster_queue(q: PoolQueue) -> Manifest:
    """The pool's capacity as quota in one flavor, open to the namespaces of its jobs only; a flex-start pool's
    workloads also wait for its AdmissionCheck (v1beta2 names checks in `admissionChecksStrategy` only)."""
    quota = q.quota
    checks = {"admissionChecksStrategy": {"admissionChecks": [{"name": q.provisioning_check}]}}
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": q.cluster_queue, "labels": _labels(q.cluster)},
        "spec": {
            **(checks if q.provisioning_check else {}),
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


def workload_priority_class(cluster: str, value: int) -> Manifest:
    """The priority of the workloads whose jobs set `queue_priority=value`, which they name with the
    kueue.x-k8s.io/priority-class label (kueue.sigs.k8s.io docs, "Workload Priority Class"; the kind's fields:
    kubernetes-sigs/kueue apis/kueue/v1beta2 workloadpriorityclass_types.go, `value` and `description`)."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": N.workload_priority_class(cluster, value), "labels": _labels(cluster)},
        "value": value,
        "description": f"Kueue priority {value} of the jobs of {cluster} with queue_priority={value} (jaxinfra)",
    }


def kueue_objects(queues: tuple[PoolQueue, ...], priorities: tuple[int, ...] = ()) -> list[Manifest]:
    """Cluster-scoped objects first (the workloads' priority classes, flavors, the flex-start pools'
    ProvisioningRequestConfigs and the AdmissionChecks that name them, then the queues that name both), then
    LocalQueues."""
    flex = [(q, check) for q in queues if (check := q.provisioning_check)]
    topologies = sorted({(q.cluster, name) for q in queues if (name := q.topology)})
    return (
        [topology(cluster, name) for cluster, name in topologies]
        + [workload_priority_class(queues[0].cluster, v) for v in priorities if queues]
        + [resource_flavor(q) for q in queues]
        + [provisioning_request_config(q, check) for q, check in flex]
        + [admission_check(q, check) for q, check in flex]
        + [cluster_queue(q) for q in queues]
        + [local_queue(q, ns) for q in queues for ns in q.namespaces]
    )
