"""Admission: what the API server decides about a workload's pods before any of them exists.

- The ServiceAccount admission plugin (kubernetes plugin/pkg/admission/serviceaccount/admission.go):
  a pod naming a ServiceAccount that does not exist in its namespace is refused at creation
  ("error looking up service account <ns>/<name>: serviceaccount \"<name>\" not found"), so its
  controller creates no pod; `default` exists in every namespace (the ServiceAccount controller
  makes it). The plugin also mounts the ServiceAccount token volume at
  /var/run/secrets/kubernetes.io/serviceaccount unless `automountServiceAccountToken` is false
  on the pod (which wins) or on the ServiceAccount; default true.
- The API server's front door (`jaxinfra.admission.admit_created`: the Pod schema, defaulting, validation, Pod
  Security, LimitRanger, Priority, ResourceQuota) on the pods a workload's controller creates: a refused pod never
  exists (the controller's FailedCreate event), so the group never forms or never completes (`pod_refusals`).
- Kueue: a workload labelled `kueue.x-k8s.io/queue-name` is created suspended and runs only once
  Kueue admits it (`kueue`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from jaxinfra.admission import admit_created, plugins
from jaxinfra.admission.plugins.limitranger import limit_ranges
from jaxinfra.admission.store import Finding, Store
from jaxinfra.errors import Problem
from jaxinfra.podresources import exact_pod_requests
from jaxinfra.upstream import (
    KUEUE_API_GROUP,
    NAMESPACE_NAME_LABEL,
    PRIORITY_LABEL,
    PROVISIONING_REQUEST_CONTROLLER,
    QUEUE_LABEL,
)
from jaxinfra_sim import model
from jaxinfra_sim.controllers.base import api_error
from jaxinfra_sim.inputs import Objects, meta, quantity, strings
from jaxinfra_sim.selectors import label_selector, matches

DEFAULT_SERVICE_ACCOUNT = "default"


def service_account(pod_spec: Mapping) -> str:
    """spec.serviceAccountName (or its deprecated alias serviceAccount), defaulted."""
    return pod_spec.get("serviceAccountName") or pod_spec.get("serviceAccount") or DEFAULT_SERVICE_ACCOUNT


def mounts_token(pod_spec: Mapping, namespace: str, objects: Objects) -> bool:
    """Whether the pod gets the ServiceAccount token volume: the pod's setting wins, then the ServiceAccount's."""
    if pod_spec.get("automountServiceAccountToken") is not None:
        return bool(pod_spec["automountServiceAccountToken"])
    sa = objects.service_accounts.get((namespace, service_account(pod_spec))) or {}
    return sa.get("automountServiceAccountToken") is not False


def service_account_problem(where: str, pod_spec: Mapping, namespace: str, objects: Objects) -> Problem | None:
    """The API server's refusal of a pod whose ServiceAccount does not exist."""
    name = service_account(pod_spec)
    if name == DEFAULT_SERVICE_ACCOUNT or (namespace, name) in objects.service_accounts:
        return None
    others = sorted(n for (ns, n) in objects.service_accounts if ns == namespace)
    return Problem(
        f"{where} serviceAccountName",
        name,
        f"the API server refuses to create the pods: error looking up service account {namespace}/{name}: "
        f'serviceaccount "{name}" not found'
        + (f" (ServiceAccounts in {namespace}: {', '.join(others)})" if others else ""),
        f"add a ServiceAccount '{name}' in namespace '{namespace}' to the manifests, or use one that exists",
    )


def limit_ranged(pod_spec: Mapping[str, Any], namespace: str, store: Store) -> Mapping[str, Any]:
    """The pod spec as the API server stores a pod created from it where a LimitRange applies: its containers'
    missing requests and limits filled from the namespace's LimitRanges (LimitRanger's mutation, after
    SetDefaults_Pod's requests from limits: `plugins.default_pod`, as `plugins.admit_pod` applies it), which the
    kubelet then enforces; the spec itself where the namespace has none."""
    ranges = limit_ranges(store, namespace)
    if not ranges:
        return pod_spec
    pod: dict[str, Any] = {"metadata": {"namespace": namespace}, "spec": copy.deepcopy(dict(pod_spec))}
    plugins.default_pod(pod, ranges)
    return pod["spec"]


def pod_refusals(
    workload: str, namespace: str, jobs: Sequence[Any], store: Store, who: Callable[[Any, int], Any]
) -> list[tuple[str, Problem]]:
    """Why the API server refuses pods a workload's controllers create, keyed for `model.Findings` (one line per
    reason). Each pod passes the whole front door (`jaxinfra.admission.admit_created`: the Pod schema, defaulting,
    validation, Pod Security's `enforce`, LimitRanger, Priority, ResourceQuota), as the Job controller's create
    (`who(job, index)`: the pod's `controllers.Identity`, its generateName, labels and annotations). Every pod of a
    Job differs only in its index, so one pod per Job stands for all its pods unless a ResourceQuota counts them one
    by one: then its first pod passes the whole front door and its others, which differ only in their index, share
    its verdict and are each charged to the quota (LimitRanger, Priority and ResourceQuota, one usage for the
    workload), so a 256-pod Job costs one full admission plus 255 quota charges. Warnings (Pod Security's `warn`)
    go to the controller's log, not to the user, and the Job's own were reported when it was applied: none here.

    A refusal is the creating controller's Warning event FailedCreate, "Error creating: <the API server's error>"
    (kubernetes pkg/controller/controller_utils.go FailedCreatePodReason; the Training Operator's pod control says
    the same), the error naming the pod by its generateName (apiserver pkg/admission/errors.go extractResourceName).
    The controller retries, so a workload whose first pods are refused never runs, and one whose later pods are
    (a quota used up by its own first pods) never completes: both are the workload's problem before anything
    starts."""
    counted = any(store.of_kind("ResourceQuota", namespace))
    made: list[tuple[Any, int, dict[str, Any]]] = []
    for job in jobs:
        for index in range(job.completions if counted else min(job.completions, 1)):
            identity = who(job, index)
            metadata: dict[str, Any] = {
                "namespace": namespace,
                "labels": dict(identity.labels),
                "annotations": dict(identity.annotations),
            }
            if identity.generate_name is not None:
                metadata["generateName"] = identity.generate_name
            else:
                metadata["name"] = identity.name
            spec = copy.deepcopy(dict(job.pod_spec))
            if job.operator is None and job.indexed:  # the Job controller's hostname for an Indexed Job's pod
                spec["hostname"] = identity.hostname
            made.append((job, index, {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}))
    usage = plugins.Usage()  # one for the workload's pods, in the order they are created
    admitted: list[tuple[dict[str, Any] | None, list[Finding]]] = []
    for _, index, pod in made:
        if index == 0:  # the Job's first pod through the whole front door
            verdict = admit_created([pod], store, f"{workload} pods", usage)[0]
            admitted.append(verdict)
        elif verdict[0] is None:  # its other pods differ only in their index: the same refusal
            admitted.append(verdict)
        else:  # ... or, admitted, each charged to the quota (`plugins.admit_pod`: LimitRanger, Priority, quota)
            found = [replace(f, step="admission") for f in plugins.admit_pod(pod, store, usage)]
            admitted.append((None if any(not f.warning for f in found) else pod, found))
    total = sum(job.completions for job in jobs)
    out: list[tuple[str, Problem]] = []
    for k, ((job, _, pod), (stored, findings)) in enumerate(zip(made, admitted)):
        refused = [f for f in findings if not f.warning]
        if stored is not None or not refused:
            continue
        metadata = pod["metadata"]
        said = api_error("pods", "Pod", metadata.get("generateName") or metadata.get("name", ""), refused)
        operator = job.operator is not None
        by = "the Training Operator" if operator else f"the Job controller (Job {namespace}/{job.name})"
        event = f"event FailedCreate by {by}: Error creating: {said}"
        if counted and k > 0:
            outcome = (
                f"the API server refuses to create the pods from {metadata.get('generateName') or metadata.get('name')}"
                f" on ({event}): {k} of the workload's {total} pods are created and the rest never are, so the "
                f"workload never completes (the controller retries the create as long as the refusal holds)"
            )
        else:
            outcome = (
                f"the API server refuses to create the pods of {'the workload' if operator else f'Job {job.name}'} "
                f"({event}), so they never exist and the workload never runs"
            )
        out.append(
            (
                f"pod-admission|{refused[0].message}",
                Problem(f"{workload} pods", refused[0].value, outcome, refused[0].fix),
            )
        )
    return out


# --- Kueue ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Admission:
    """Kueue's decision on one workload: admitted (with what it took), not checked, or suspended (why, and the fix)."""

    admitted: bool
    note: str
    fix: str = ""
    provisioning: tuple[str, ...] = ()  # its ProvisioningRequest checks, which the engine plays (`provisioned`)
    quota: model.Quota | None = None  # what it takes of its ClusterQueue's quota while it runs (`quotas.Quotas`)


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


def _fits_topology(flavor: Mapping, requests: Mapping[str, str], objects: Objects) -> str | None:
    """Why a ResourceFlavor cannot take pods with a podset topology request (kueue pkg/scheduler/flavorassigner/
    tas_flavorassigner.go checkPodSetAndFlavorMatchForTAS): it names no Topology, or its Topology lacks the level."""
    if not requests:
        return None
    name = meta(flavor).get("name")
    topology = (flavor.get("spec") or {}).get("topologyName")
    if not topology:
        return f'Flavor "{name}" does not support TopologyAwareScheduling'
    found = objects.kueue.get(("Topology", "", str(topology)))
    if found is None:
        return f'Flavor "{name}" names Topology {topology}, which does not exist'
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


def admission_checks(cluster_queue_spec: Mapping[str, Any]) -> list[str]:
    """The AdmissionChecks a ClusterQueue's workloads must pass: `admissionChecks`, or the names of
    `admissionChecksStrategy.admissionChecks` (kueue apis ClusterQueueSpec: one or the other)."""
    names = [str(c) for c in cluster_queue_spec.get("admissionChecks") or []]
    strategy = cluster_queue_spec.get("admissionChecksStrategy") or {}
    names += [str(c.get("name")) for c in strategy.get("admissionChecks") or [] if isinstance(c, Mapping)]
    return names


def kueue(
    namespace: str,
    labels: Mapping[str, str],
    groups_of_pods: Sequence[tuple[int, Mapping]],
    objects: Objects,
    topology: Mapping[str, str] | None = None,
) -> Admission | None:
    """Whether Kueue admits a workload (`groups_of_pods`: how many pods of which pod spec), all at once, as its
    scheduler decides:
    its LocalQueue exists and points to an existing, active ClusterQueue whose namespaceSelector admits the
    namespace; every resource the pods request is covered by a resource group; and in each group one flavor (the
    first that fits, in order) has the nominal quota for the whole workload and suits the pods' nodeSelector and
    tolerations, and where the pods carry a podset topology request (`topology`), has a Topology with its level. None:
    not a Kueue workload. Sources: kueue.sigs.k8s.io docs (Cluster Queue, Local Queue, Resource Flavor; "Run a
    JobSet"), pkg/scheduler/flavorassigner.

    Not emulated here: cohorts and borrowing, preemption, fair sharing; other workloads' usage is not counted here
    (each is checked against the whole quota: one that could never fit stays suspended), but while they run
    (`quotas.Quotas`, from the `Admission.quota` returned), TAS's placement into topology domains
    (the simulator's nodes carry no topology labels), and what an admission check's
    controller decides: a ClusterQueue referencing an AdmissionCheck that does not exist is inactive, as Kueue makes it
    (pkg/cache/clusterqueue.go: AdmissionCheckNotFound), and so is one whose ProvisioningRequest check names no
    ProvisioningRequestConfig; the ProvisioningRequest checks of an admitted workload are returned for the engine to
    play (`provisioned`); another controller's check is taken as Ready, with a note."""
    queue = labels.get(QUEUE_LABEL)
    if queue is None:
        return None
    if not objects.kueue:
        return Admission(
            True,
            f"Kueue admission not checked: the inputs hold no LocalQueue {namespace}/{queue} "
            "or ClusterQueue (on a cluster the workload stays suspended until Kueue admits it)",
        )
    local = objects.kueue.get(("LocalQueue", namespace, queue))
    if local is None:
        return Admission(
            False,
            f"LocalQueue {namespace}/{queue} does not exist",
            f"add the LocalQueue {namespace}/{queue} (and its ClusterQueue) to the manifests, or name an existing one",
        )
    priority = labels.get(PRIORITY_LABEL)
    if priority is not None and ("WorkloadPriorityClass", "", priority) not in objects.kueue:
        return Admission(  # kueue pkg/controller/jobframework: the Workload is not created, the job stays suspended
            False,
            f"WorkloadPriorityClass {priority} (its {PRIORITY_LABEL} label) does not exist, so Kueue creates no "
            "Workload for it",
            f"add the WorkloadPriorityClass {priority} to the manifests, or remove the label",
        )
    cq_name = str((local.get("spec") or {}).get("clusterQueue", ""))
    cq = objects.kueue.get(("ClusterQueue", "", cq_name))
    if cq is None:
        return Admission(
            False,
            f"ClusterQueue {cq_name} (of LocalQueue {namespace}/{queue}) does not exist",
            f"add the ClusterQueue {cq_name} to the manifests",
        )
    spec = cq.get("spec") or {}
    missing = sorted(
        {str(f.get("name")) for g in spec.get("resourceGroups") or [] for f in g.get("flavors") or []}
        - {name for kind, _, name in objects.kueue if kind == "ResourceFlavor"}
    )
    if missing:
        return Admission(
            False,
            f"ClusterQueue {cq_name} is inactive: ResourceFlavor {', '.join(missing)} does not exist",
            f"add the ResourceFlavor {', '.join(missing)} to the manifests",
        )
    checks = admission_checks(spec)
    absent = [c for c in checks if ("AdmissionCheck", "", c) not in objects.kueue]
    if absent:  # kueue pkg/cache/clusterqueue.go: inactive, AdmissionCheckNotFound
        return Admission(
            False,
            f"ClusterQueue {cq_name} is inactive (AdmissionCheckNotFound): Can't admit new workloads: references "
            f"missing AdmissionCheck(s): {','.join(absent)}.",
            f"add the AdmissionCheck {', '.join(absent)} to the manifests, or take it out of ClusterQueue {cq_name}",
        )
    if inactive := next(filter(None, (_inactive_check(c, objects) for c in checks)), None):
        check, why, fix = inactive
        return Admission(
            False,
            f"ClusterQueue {cq_name} is inactive (AdmissionCheckInactive): its AdmissionCheck {check} is not active "
            f"({why})",
            fix,
        )
    ns_labels = {**objects.namespace_labels.get(namespace, {}), NAMESPACE_NAME_LABEL: namespace}
    if not matches(label_selector(spec.get("namespaceSelector")), ns_labels):
        return Admission(
            False,
            f"ClusterQueue {cq_name}'s namespaceSelector does not admit namespace {namespace}",
            f"widen ClusterQueue {cq_name}'s namespaceSelector to namespace {namespace} ({{}} admits every namespace)",
        )
    need: dict[str, Fraction] = {}
    for count, pod_spec in groups_of_pods:
        for k, v in pod_requests(pod_spec).items():
            if v:
                need[k] = need.get(k, Fraction(0)) + v * count
    pods = sum(count for count, _ in groups_of_pods)
    groups = spec.get("resourceGroups") or []
    uncovered = sorted(set(need) - {str(r) for g in groups for r in g.get("coveredResources") or []})
    if uncovered:
        return Admission(
            False,
            f"resource {', '.join(uncovered)} unavailable in ClusterQueue {cq_name}",
            f"cover {', '.join(uncovered)} in one of ClusterQueue {cq_name}'s resourceGroups",
        )
    chosen = []
    usage: list[tuple[str, str, Fraction]] = []
    nominal: list[tuple[str, str, Fraction]] = []
    topology_misses = False  # a flavor was passed over for the pods' topology request
    for group in groups:
        wanted = {r: need[r] for r in map(str, group.get("coveredResources") or []) if r in need}
        if not wanted:
            continue
        why_not = []
        for entry in group.get("flavors") or []:
            flavor = objects.kueue[("ResourceFlavor", "", str(entry.get("name")))]
            quota = {
                str(r.get("name")): quantity(r.get("nominalQuota", 0)) or Fraction(0)
                for r in entry.get("resources") or []
            }
            short = [
                f"{r} {_show(v, r)} > {_show(quota.get(r, Fraction(0)), r)}"
                for r, v in wanted.items()
                if v > quota.get(r, Fraction(0))
            ]
            unsuited = next(filter(None, (_fits_flavor(flavor, spec) for _, spec in groups_of_pods)), None)
            if unsuited is None and (unsuited := _fits_topology(flavor, topology or {}, objects)):
                topology_misses = True
            if not short and unsuited is None:
                flavor_name = str(entry.get("name"))
                usage += [(flavor_name, r, v) for r, v in sorted(wanted.items())]
                nominal += [(flavor_name, r, quota[r]) for r in sorted(wanted)]
                chosen.append(
                    f"{entry.get('name')}: "
                    + ", ".join(f"{r} {_show(v, r)} of {_show(quota[r], r)}" for r, v in sorted(wanted.items()))
                )
                break
            why_not.append(
                unsuited
                or f"flavor {entry.get('name')}: insufficient quota for {', '.join(short)} "
                f"(nominal quota, all {pods} pods at once)"
            )
        else:
            return Admission(
                False,
                f"ClusterQueue {cq_name}: {'; '.join(why_not) or 'no flavor'}",
                f"name a Topology with level {', '.join(sorted(set((topology or {}).values())))} as the "
                f"topologyName of a flavor of ClusterQueue {cq_name} (jaxinfra renders both for JaxJob(topology=...)), "
                "or remove the pods' podset topology request"
                if topology_misses
                else f"raise the nominalQuota of ClusterQueue {cq_name} (or lower the workload's requests) so that all "
                f"{pods} pods fit at once",
            )
    provisioning = tuple(c for c in checks if _controller(c, objects) == PROVISIONING_REQUEST_CONTROLLER)
    others = [c for c in checks if c not in provisioning]
    waits = (
        f"; its AdmissionCheck(s) {', '.join(others)} are not played here: on a cluster the workload waits until each "
        "is Ready, then runs as here"
        if others
        else ""
    )
    how = f"ClusterQueue {cq_name} via LocalQueue {namespace}/{queue} ({'; '.join(chosen)})"
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
        quota=model.Quota(
            cq_name,
            model.QueueingStrategy.STRICT_FIFO
            if spec.get("queueingStrategy") == model.QueueingStrategy.STRICT_FIFO
            else model.QueueingStrategy.BEST_EFFORT_FIFO,
            _priority(priority, objects),
            tuple(usage),
            tuple(nominal),
        ),
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
