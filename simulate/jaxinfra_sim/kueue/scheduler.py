"""Kueue: whether, and once what, it admits a workload labelled `kueue.x-k8s.io/queue-name` (created suspended, it
runs only once Kueue admits it). Facts from kubernetes-sigs/kueue v0.19.2 (8eab6877, the release `jaxinfra.releases`
pins): pkg/cache/scheduler/clusterqueue.go (`inactiveReason`: a ClusterQueue is inactive while a ResourceFlavor,
AdmissionCheck or a TAS flavor's Topology it names is missing), pkg/cache/scheduler/resource_node.go (a cohort's
quota: `available`, `potentialAvailable`, `localQuota`, `accumulateFromChild`), pkg/scheduler/flavorassigner/
flavorassigner.go (`fitsResourceQuota`: a request past the maximum capacity is ExceedsMaxQuota, in its message) and
tas_flavorassigner.go (`checkPodSetAndFlavorMatchForTAS`), pkg/controller/admissionchecks/provisioning; and the
kueue.sigs.k8s.io docs (Cluster Queue, Local Queue, Resource Flavor, Cohort, "Run a JobSet").

Cohorts (`cohorts.py`): a ClusterQueue in a cohort (`spec.cohortName`, v1beta1 `spec.cohort`) may use, besides its
nominal quota, what its cohort's other members do not keep for themselves: each member lends its nominal quota up to its
`lendingLimit` (all of it without one), a Cohort object adds its own quota and, through `parentName`, what its parent
lends it; the queue borrows at most its `borrowingLimit` (unlimited without one). The simulator runs workloads one
after another, so no other workload uses any quota: what a workload may take is `potentialAvailable`, the most Kueue
would ever give it (kueue resource_node.go), and past it the workload stays pending for ever (ExceedsMaxQuota).

Not emulated: preemption, fair sharing, other workloads' usage, a podset per flavor (all of a workload's pods take one
flavor of each resource group, where Kueue may give each podset its own), TAS's placement into topology domains (the
simulator's nodes carry no topology labels), and what another controller's admission check decides (taken as Ready,
with a note).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from jaxinfra.podresources import exact_pod_requests
from jaxinfra.upstream import (
    KUEUE_API_GROUP,
    NAMESPACE_NAME_LABEL,
    PRIORITY_LABEL,
    PROVISIONING_REQUEST_CONTROLLER,
    QUEUE_LABEL,
)
from jaxinfra_sim.apiserver.selectors import label_selector, matches
from jaxinfra_sim.core.inputs import Objects, meta, quantity, strings
from jaxinfra_sim.core.model import Admission, Hold, QueueingStrategy, Quota
from jaxinfra_sim.kueue.cohorts import Cohorts, Node, cohort_of


def pod_requests(pod_spec: Mapping) -> dict[str, Fraction]:
    """A pod's effective requests as Kueue counts them (kubernetes-sigs/kueue reads them through kubernetes
    pkg/api/v1/resource/helpers.go PodRequests): native sidecars (restartable init containers) add to the
    containers' sum, a regular init container counts with the sidecars started before it, the larger wins, overhead
    adds (`jaxinfra.podresources`); a container's limit stands in for a request it does not make."""
    return exact_pod_requests(pod_spec, quantity)


def _fits_flavor(flavor: Mapping, pod_spec: Mapping) -> str | None:
    """Why a ResourceFlavor cannot hold these pods (its node labels against their nodeSelector, its taints against
    their tolerations), or None."""
    labels = strings((flavor.get("spec") or {}).get("nodeLabels"))
    for key, value in strings(pod_spec.get("nodeSelector")).items():
        if key in labels and labels[key] != value:
            return f"nodeSelector {key}={value} but flavor {meta(flavor).get('name')} has {labels[key]}"
    tolerations = pod_spec.get("tolerations") or []
    for taint in (flavor.get("spec") or {}).get("nodeTaints") or []:
        if taint.get("effect") == "PreferNoSchedule":
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return (
                f"flavor {meta(flavor).get('name')} has taint "
                f"{taint.get('key')}={taint.get('value', '')}:{taint.get('effect')} the pods do not tolerate"
            )
    return None


def _topology_of(flavor: Mapping) -> str | None:
    topology = (flavor.get("spec") or {}).get("topologyName")
    return str(topology) if topology else None


def _fits_topology(flavor: Mapping, requests: Mapping[str, str], objects: Objects, tas_only: bool) -> str | None:
    """Why a ResourceFlavor cannot take these pods for Topology-Aware Scheduling (kueue tas_flavorassigner.go
    checkPodSetAndFlavorMatchForTAS): with a podset topology request, a flavor naming no Topology or one without the
    level; without one, a TAS flavor in a ClusterQueue that has other flavors too (in a ClusterQueue of TAS flavors
    only, TAS is implied and any flavor matches). A flavor whose Topology is missing has made its ClusterQueue
    inactive before (TopologyNotFound)."""
    name = meta(flavor).get("name")
    topology = _topology_of(flavor)
    if not requests:
        return f'Flavor "{name}" supports only TopologyAwareScheduling' if topology and not tas_only else None
    if not topology:
        return f'Flavor "{name}" does not support TopologyAwareScheduling'
    found = objects.kueue.get(("Topology", "", topology)) or {}
    levels = {str(level.get("nodeLabel")) for level in (found.get("spec") or {}).get("levels") or []}
    if missing := sorted(set(requests.values()) - levels):
        return f'Flavor "{name}" does not contain the requested level ({", ".join(missing)})'
    return None


def _tolerates(toleration: Mapping, taint: Mapping) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.get("key")
    return toleration.get("key") == taint.get("key") and str(toleration.get("value", "")) == str(taint.get("value", ""))


def _show(value: Fraction, resource: str) -> str:
    """A quantity as people write it: memory in Gi or Mi where it divides; one past 1e21, only its magnitude (the API
    server stores `cpu: 1e5000` as written; Python's str() refuses an int of 4,300 digits, float() one past 1e308)."""
    if abs(value) >= 10**21:
        return f"{'-' if value < 0 else ''}about 1e{math.floor(math.log10(int(abs(value))))}"
    for unit, size in (("Gi", 2**30), ("Mi", 2**20)):
        if resource in ("memory", "ephemeral-storage") and value and value % size == 0:
            return f"{int(value / size)}{unit}"
    return str(int(value)) if value.denominator == 1 else f"{float(value):g}"


#: Go's DecimalSI suffixes by power of ten (apimachinery resource/suffix.go).
_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def kueue_amount(value: Fraction, resource: str) -> str:
    """A quantity as Kueue's messages print it (kueue v0.19.2 pkg/resources/resource_formatter.go
    ResourceQuantityString: cpu in millis, DecimalSI; memory, ephemeral-storage and hugepages canonical BinarySI;
    others DecimalSI), in apimachinery's canonical form: `1500m`, `2`, `48`, `1k`, `16Gi`. A value Kueue could not
    hold as an int64 of its unit is shown as `_show` shows it."""
    milli = resource == "cpu"
    units = value * 1000 if milli else value
    if units.denominator != 1 or abs(units) >= 2**63:
        return _show(value, resource)
    whole = int(units)
    if not whole:
        return "0"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for power, suffix in reversed(list(enumerate(("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")))):
            if power and whole % 1024**power == 0:
                return f"{whole // 1024**power}{suffix}"
    exponent = -3 if milli else 0
    while whole and whole % 10 == 0:
        whole, exponent = whole // 10, exponent + 1
    base = exponent - exponent % 3
    return f"{whole * 10 ** (exponent - base)}{_DECIMAL_SUFFIXES.get(base, f'e{base}')}"


def admission_checks(cluster_queue_spec: Mapping[str, Any]) -> list[str]:
    """The AdmissionChecks a ClusterQueue's workloads must pass: `admissionChecks`, or the names of
    `admissionChecksStrategy.admissionChecks` (kueue apis ClusterQueueSpec: one or the other)."""
    names = [str(c) for c in cluster_queue_spec.get("admissionChecks") or []]
    strategy = cluster_queue_spec.get("admissionChecksStrategy") or {}
    names += [str(c.get("name")) for c in strategy.get("admissionChecks") or [] if isinstance(c, Mapping)]
    return names


# --- admission ------------------------------------------------------------------------------------------------------


def _queue(namespace: str, queue: str, labels: Mapping[str, str], objects: Objects) -> tuple[str, Admission | None]:
    """The ClusterQueue a workload's LocalQueue points to, or why Kueue holds the workload before any quota counts:
    a missing LocalQueue, WorkloadPriorityClass or ClusterQueue, an inactive ClusterQueue (in kueue clusterqueue.go
    `inactiveReason`'s order: ResourceFlavor, AdmissionCheck, an inactive check, a TAS flavor's Topology), or a
    namespaceSelector that leaves the namespace out."""
    local = objects.kueue.get(("LocalQueue", namespace, queue))
    if local is None:
        return "", Admission(
            False,
            f"LocalQueue {namespace}/{queue} does not exist",
            f"add the LocalQueue {namespace}/{queue} (and its ClusterQueue) to the manifests, or name an existing one",
            held=Hold.QUEUE,
        )
    priority = labels.get(PRIORITY_LABEL)
    if priority is not None and ("WorkloadPriorityClass", "", priority) not in objects.kueue:
        return "", Admission(  # kueue pkg/controller/jobframework: the Workload is not created, the job stays suspended
            False,
            f"WorkloadPriorityClass {priority} (its {PRIORITY_LABEL} label) does not exist, so Kueue creates no "
            "Workload for it",
            f"add the WorkloadPriorityClass {priority} to the manifests, or remove the label",
            held=Hold.PRIORITY,
        )
    cq_name = str((local.get("spec") or {}).get("clusterQueue", ""))
    cq = objects.kueue.get(("ClusterQueue", "", cq_name))
    if cq is None:
        return cq_name, Admission(
            False,
            f"ClusterQueue {cq_name} (of LocalQueue {namespace}/{queue}) does not exist",
            f"add the ClusterQueue {cq_name} to the manifests",
            held=Hold.QUEUE,
        )
    spec = cq.get("spec") or {}
    if inactive := _inactive(cq_name, spec, objects):
        return cq_name, inactive
    ns_labels = {**objects.namespace_labels.get(namespace, {}), NAMESPACE_NAME_LABEL: namespace}
    if not matches(label_selector(spec.get("namespaceSelector")), ns_labels):
        return cq_name, Admission(
            False,
            f"ClusterQueue {cq_name}'s namespaceSelector does not admit namespace {namespace}",
            f"widen ClusterQueue {cq_name}'s namespaceSelector to namespace {namespace} ({{}} admits every namespace)",
            held=Hold.QUEUE,
        )
    return cq_name, None


def _inactive(cq_name: str, spec: Mapping[str, Any], objects: Objects) -> Admission | None:
    """Why Kueue keeps a ClusterQueue inactive (kueue v0.19.2 pkg/cache/scheduler/clusterqueue.go inactiveReason):
    every reason, in its order (stopped; a missing ResourceFlavor, AdmissionCheck; an inactive AdmissionCheck; a TAS
    flavor's missing Topology), the first one named, their messages joined as its condition's message; an inactive
    check also says why its controller made it so (`_inactive_check`). None: active."""
    flavors = list(
        dict.fromkeys(str(f.get("name")) for g in spec.get("resourceGroups") or [] for f in g.get("flavors") or [])
    )
    checks = admission_checks(spec)
    reasons: list[tuple[str, str, str]] = []  # (reason, message, fix)
    if spec.get("stopPolicy") not in (None, "None"):
        reasons.append(("Stopped", "is stopped", f"set ClusterQueue {cq_name}'s stopPolicy to None"))
    if missing := [f for f in flavors if ("ResourceFlavor", "", f) not in objects.kueue]:
        reasons.append(
            (
                "FlavorNotFound",
                f"references missing ResourceFlavor(s): {','.join(missing)}",
                f"add the ResourceFlavor {', '.join(missing)} to the manifests",
            )
        )
    if absent := [c for c in checks if ("AdmissionCheck", "", c) not in objects.kueue]:
        reasons.append(
            (
                "AdmissionCheckNotFound",
                f"references missing AdmissionCheck(s): {','.join(absent)}",
                f"add the AdmissionCheck {', '.join(absent)} to the manifests, or take it out of ClusterQueue "
                f"{cq_name}",
            )
        )
    if inactive := [found for c in checks if c not in absent and (found := _inactive_check(c, objects))]:
        reasons.append(
            (
                "AdmissionCheckInactive",
                f"references inactive AdmissionCheck(s): {','.join(c for c, _, _ in inactive)} ("
                + "; ".join(f"{c}: {why}" for c, why, _ in inactive)
                + ")",
                "; ".join(fix for _, _, fix in inactive),
            )
        )
    untopologized = [
        (f, t)
        for f in flavors
        if f not in missing
        and (t := _topology_of(objects.kueue[("ResourceFlavor", "", f)]))
        and ("Topology", "", t) not in objects.kueue
    ]
    if untopologized:
        reasons.append(
            (
                "TopologyNotFound",
                ", ".join(f'there is no Topology "{t}" for TAS flavor "{f}"' for f, t in untopologized),
                "add the Topology "
                + ", ".join(sorted({t for _, t in untopologized}))
                + " to the manifests, or take topologyName out of ResourceFlavor "
                + ", ".join(f for f, _ in untopologized),
            )
        )
    if not reasons:
        return None
    return Admission(
        False,
        f"ClusterQueue {cq_name} is inactive ({reasons[0][0]}): Can't admit new workloads: "
        + ", ".join(message for _, message, _ in reasons)
        + ".",
        "; ".join(fix for _, _, fix in reasons),
        held=Hold.INACTIVE,
    )


@dataclass(frozen=True)
class PodSet:
    """A pod set of a Kueue Workload: its pods' spec and how many of them run at once, which is what quota is counted
    for (kueue pkg/controller/jobs/job `podsCount` and jobset `PodsCountPerReplica`: a Job's parallelism, or its
    completions where fewer), and the fewest Kueue may admit (`MinCount`: a batch Job's
    `kueue.x-k8s.io/job-min-parallelism`, PartialAdmission, on by default since v0.5)."""

    count: int
    pod_spec: Mapping[str, Any]
    min_count: int | None = None


def admit(
    namespace: str,
    labels: Mapping[str, str],
    podsets: Sequence[PodSet],
    objects: Objects,
    topology: Mapping[str, str] | None = None,
) -> Admission | None:
    """Whether Kueue admits a workload (`podsets`), as its scheduler decides: its LocalQueue exists and points to an
    existing, active ClusterQueue that admits the namespace (`_queue`); then the flavors (`_assign`) for every pod at
    once, else, where a pod set may shrink (`PodSet.min_count`), for the most pods that fit: Kueue's partial admission
    searches the counts between the full and the minimum ones by bisection (pkg/scheduler/flavorassigner/
    podset_reducer.go `PodSetReducer.Search`: each pod set shrunk by its share of the total delta) and admits the
    largest that fits, the Job's parallelism set to it (pkg/controller/jobs/job `RunWithPodSetsInfo`). None: not a Kueue
    workload. The ProvisioningRequest checks of an admitted workload are returned for the engine to play
    (`provisioned`); another controller's check is taken as Ready, with a note."""
    queue = labels.get(QUEUE_LABEL)
    if queue is None:
        return None
    if not objects.kueue:
        return Admission(
            True,
            f"Kueue admission not checked: the inputs hold no LocalQueue {namespace}/{queue} "
            "or ClusterQueue (on a cluster the workload stays suspended until Kueue admits it)",
        )
    cq_name, held = _queue(namespace, queue, labels, objects)
    if held is not None:
        return held
    priority, wanted = _priority(labels.get(PRIORITY_LABEL), objects), topology or {}
    full = [p.count for p in podsets]
    whole = _assign(cq_name, namespace, queue, podsets, full, objects, wanted, priority)
    deltas = [p.count - min(p.count, p.min_count) if p.min_count is not None else 0 for p in podsets]
    total = sum(deltas)
    if whole.admitted or not total:  # any full assignment that is not a Fit, whichever flavor said no (kueue
        return whole  # pkg/scheduler/scheduler.go getInitialAssignments: the reducer runs unless the mode is Fit)
    tried: dict[int, Admission] = {}

    def fits(step: int) -> bool:  # `step` of `total`: each pod set shrunk by its share of it
        counts = [c - d * step // total for c, d in zip(full, deltas, strict=True)]
        assigned = _assign(cq_name, namespace, queue, podsets, counts, objects, wanted, priority)
        tried[step] = replace(assigned, counts=tuple(counts))
        return tried[step].admitted

    low, high = 0, total + 1  # Go's sort.Search over 0..total: the smallest step that fits, the most pods
    while low < high:
        mid = (low + high) // 2
        if fits(mid):
            high = mid
        else:
            low = mid + 1
    if low > total:
        return whole
    found = tried[low]
    return replace(
        found,
        note=f"{found.note}; partially admitted: {sum(found.counts or ())} of {sum(full)} pods at once "
        "(kueue.x-k8s.io/job-min-parallelism), the Job's parallelism set to it",
    )


def _assign(
    cq_name: str,
    namespace: str,
    queue: str,
    podsets: Sequence[PodSet],
    counts: Sequence[int],
    objects: Objects,
    topology: Mapping[str, str],
    priority: int,
) -> Admission:
    """Kueue's flavor assignment for `counts` pods of each pod set: every resource the pods request is covered by a
    resource group; and in each group one flavor (the first that fits, in order) has room for all of them within the
    most its ClusterQueue may take (its nominal quota and what it may borrow in its cohort: `Cohorts.most`), suits the
    pods' nodeSelector and tolerations, and matches their podset topology request (`topology`) or its absence."""
    spec = objects.kueue[("ClusterQueue", "", cq_name)].get("spec") or {}
    need: dict[str, Fraction] = {}
    for count, podset in zip(counts, podsets, strict=True):
        for k, v in pod_requests(podset.pod_spec).items():
            if v:
                need[k] = need.get(k, Fraction(0)) + v * count
    pods = sum(counts)
    groups = spec.get("resourceGroups") or []
    uncovered = sorted(set(need) - {str(r) for g in groups for r in g.get("coveredResources") or []})
    if uncovered:
        return Admission(
            False,
            f"resource {', '.join(uncovered)} unavailable in ClusterQueue {cq_name}",
            f"cover {', '.join(uncovered)} in one of ClusterQueue {cq_name}'s resourceGroups",
            held=Hold.QUOTA,
        )
    cohorts = Cohorts(objects)
    node = (Node.CLUSTER_QUEUE, cq_name)
    cohort = cohort_of(spec)
    tas_only = all(
        _topology_of(objects.kueue[("ResourceFlavor", "", str(f.get("name")))])
        for g in groups
        for f in g.get("flavors") or []
    )
    chosen = []
    usage: list[tuple[str, str, Fraction]] = []  # what it takes of each flavor's quota, and the most it may take
    most_of: list[tuple[str, str, Fraction]] = []
    for group in groups:
        wanted = {r: need[r] for r in map(str, group.get("coveredResources") or []) if r in need}
        if not wanted:
            continue
        why_not: list[tuple[Hold, str]] = []
        for entry in group.get("flavors") or []:
            name = str(entry.get("name"))
            flavor = objects.kueue[("ResourceFlavor", "", name)]
            most = {r: cohorts.most(node, (name, r)) for r in wanted}
            short = [
                f"insufficient quota for {r} in flavor {name}, previously considered podsets requests (0) + current "
                f"podset request ({kueue_amount(v, r)}) > maximum capacity ({kueue_amount(most[r], r)})"
                for r, v in wanted.items()
                if v > most[r]
            ]
            unsuited = next(filter(None, (_fits_flavor(flavor, p.pod_spec) for p in podsets)), None)
            if unsuited is None and (mismatch := _fits_topology(flavor, topology, objects, tas_only)):
                why_not.append((Hold.TOPOLOGY, mismatch))
                continue
            if not short and unsuited is None:
                usage += [(name, r, v) for r, v in sorted(wanted.items())]
                most_of += [(name, r, most[r]) for r in sorted(wanted)]
                chosen.append(
                    f"{name}: " + ", ".join(_took(cohorts, node, cohort, name, r, v) for r, v in wanted.items())
                )
                break
            why_not.append((Hold.FLAVOR, unsuited) if unsuited else (Hold.QUOTA, "; ".join(short)))
        else:
            return _unplaced(cq_name, cohort, pods, why_not, topology)
    strict = spec.get("queueingStrategy") == QueueingStrategy.STRICT_FIFO
    strategy = QueueingStrategy.STRICT_FIFO if strict else QueueingStrategy.BEST_EFFORT_FIFO
    quota = Quota(cq_name, strategy, priority, tuple(usage), tuple(most_of))
    return _admitted(cq_name, namespace, queue, chosen, admission_checks(spec), objects, quota)


def _took(cohorts: Cohorts, node: tuple[Node, str], cohort: str | None, flavor: str, r: str, v: Fraction) -> str:
    nominal = cohorts.quota(node, (flavor, r)).nominal
    borrowed = f", borrowing {_show(v - nominal, r)} in cohort {cohort}" if v > nominal and cohort else ""
    return f"{r} {_show(v, r)} of {_show(nominal, r)}{borrowed}"


def _unplaced(
    cq_name: str, cohort: str | None, pods: int, why_not: list[tuple[Hold, str]], topology: Mapping[str, str]
) -> Admission:
    """Kueue's verdict where no flavor of a resource group takes the workload: the reasons flavor by flavor, in
    Kueue's words where it has them (ExceedsMaxQuota: pending, never admitted), and the fix for the first."""
    held = why_not[0][0] if why_not else Hold.QUOTA
    said = "; ".join(why for _, why in why_not) or "no flavor"
    if held is Hold.TOPOLOGY:
        fix = (
            f"name a Topology with level {', '.join(sorted(set(topology.values())))} as the topologyName of a flavor "
            f"of ClusterQueue {cq_name} (jaxinfra renders both for JaxJob(topology=...)), or remove the pods' podset "
            "topology request"
            if topology
            else f"give ClusterQueue {cq_name} a flavor without topologyName for pods with no topology request, or "
            "add a podset topology request"
        )
    elif held is Hold.FLAVOR:
        fix = f"make the pods' nodeSelector and tolerations fit a flavor of ClusterQueue {cq_name}"
    elif cohort:
        fix = (
            f"raise ClusterQueue {cq_name}'s nominalQuota or its borrowingLimit, or what the rest of cohort {cohort} "
            f"lends (their nominalQuota or lendingLimit), so that all {pods} pods fit at once"
        )
    else:
        fix = (
            f"raise the nominalQuota of ClusterQueue {cq_name} (or lower the workload's requests) so that all "
            f"{pods} pods fit at once, or put it in a cohort with quota to lend (spec.cohortName)"
        )
    where = f" (nominal quota and what cohort {cohort} lends, all {pods} pods at once)" if cohort else ""
    return Admission(
        False,
        f"ClusterQueue {cq_name}: {said}" + (where if held is Hold.QUOTA else f" (all {pods} pods at once)"),
        fix,
        held=held,
    )


def _admitted(
    cq_name: str, namespace: str, queue: str, chosen: list[str], checks: list[str], objects: Objects, quota: Quota
) -> Admission:
    provisioning = tuple(c for c in checks if _controller(c, objects) == PROVISIONING_REQUEST_CONTROLLER)
    others = [c for c in checks if c not in provisioning]
    waits = (
        f"; its AdmissionCheck(s) {', '.join(others)} are not played here: on a cluster the workload waits until each "
        "is Ready, then runs as here"
        if others
        else ""
    )
    how = f"ClusterQueue {cq_name} via LocalQueue {namespace}/{queue}" + (f" ({'; '.join(chosen)})" if chosen else "")
    return Admission(
        True,
        (
            f"Kueue reserves its quota in {how} and admits it once its ProvisioningRequest AdmissionCheck(s) "
            f"{', '.join(provisioning)} are Ready"
            if provisioning
            else f"admitted by Kueue to {how}"
        )
        + waits,
        provisioning=provisioning,
        held=Hold.CHECK if provisioning else None,
        quota=quota,
    )


def _priority(name: str | None, objects: Objects) -> int:
    """A workload's priority in its ClusterQueue: its WorkloadPriorityClass's value (kueue pkg/util/priority), else
    0."""
    value = (objects.kueue.get(("WorkloadPriorityClass", "", name)) or {}).get("value") if name else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _controller(check: str, objects: Objects) -> str:
    return str((objects.kueue[("AdmissionCheck", "", check)].get("spec") or {}).get("controllerName", ""))


def _inactive_check(check: str, objects: Objects) -> tuple[str, str, str] | None:
    """A ProvisioningRequest AdmissionCheck that Kueue's controller marks inactive, and why: its parameters must name
    an existing ProvisioningRequestConfig (kueue pkg/controller/admissionchecks/provisioning/
    admissioncheck_reconciler.go: Active False, BadParametersRef, the lookup's error); a ClusterQueue naming it admits
    nothing (AdmissionCheckInactive). Other controllers' checks are taken as active. The check, why, and the fix."""
    if _controller(check, objects) != PROVISIONING_REQUEST_CONTROLLER:
        return None
    params = (objects.kueue[("AdmissionCheck", "", check)].get("spec") or {}).get("parameters") or {}
    name = str(params.get("name", ""))
    if params.get("kind") != "ProvisioningRequestConfig" or params.get("apiGroup") != KUEUE_API_GROUP or not name:
        return (
            check,
            "BadParametersRef: bad parameters reference",
            f"set AdmissionCheck {check}'s parameters to {{apiGroup: {KUEUE_API_GROUP}, kind: "
            "ProvisioningRequestConfig, name: ...}",
        )
    if ("ProvisioningRequestConfig", "", name) not in objects.kueue:
        return (
            check,
            f'BadParametersRef: provisioningrequestconfigs.kueue.x-k8s.io "{name}" not found',
            f"add the ProvisioningRequestConfig {name} to the manifests, or name an existing one in AdmissionCheck "
            f"{check}'s parameters",
        )
    return None


@dataclass(frozen=True)
class Provisioned:
    """What Kueue's ProvisioningRequest checks did to a workload before it was admitted (`provisioned`): ready after
    `seconds` (the longest; simulated, not waited), or never (`pending`: the check that never became Ready)."""

    seconds: float
    note: str
    pending: str | None = None


def provisioned(workload: str, checks: Sequence[str], rehearsed: Mapping[str, float | None]) -> Provisioned | None:
    """Kueue's ProvisioningRequest admission checks, played: each check's ProvisioningRequest is provisioned after the
    delay `--provision CHECK@SECONDS` rehearses, never with `--provision CHECK@never`, or at once without the flag
    (a note says so). Kueue reserves the workload's quota, creates one ProvisioningRequest per check and admits the
    workload only once every check is Ready (kueue pkg/controller/admissionchecks/provisioning/controller.go; GKE
    docs, how-to/provisioningrequest): until then it stays suspended and no pod exists. None: no check holds it."""
    if not checks:
        return None
    never = [c for c in checks if c in rehearsed and rehearsed[c] is None]
    if never:
        return Provisioned(
            0.0,
            f"held by Kueue: AdmissionCheck {never[0]} stays Pending (--provision {never[0]}@never: its "
            "ProvisioningRequest is never provisioned), so the workload keeps its quota reserved and stays suspended; "
            "on a cluster it would wait for the capacity",
            pending=never[0],
        )
    delays = {c: rehearsed.get(c) or 0.0 for c in checks}
    longest = max(delays.values())
    said = [f"{c} after {delays[c]:g} s (--provision)" for c in checks if c in rehearsed]
    said += [
        f"{c} at once, as no --provision names it (rehearse a wait with --provision {c}@SECONDS, capacity that never "
        f"arrives with --provision {c}@never)"
        for c in checks
        if c not in rehearsed
    ]
    return Provisioned(
        longest,
        f"{workload} held by Kueue {longest:g} s (simulated, not waited), its quota reserved, until its "
        f"ProvisioningRequest AdmissionCheck(s) were Ready: {'; '.join(said)}",
    )
