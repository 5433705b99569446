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

Kueue's admission of a queued workload is `kueue/scheduler.py`'s.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from jaxinfra.admission import admit_created, plugins
from jaxinfra.admission.plugins.limitranger import limit_ranges
from jaxinfra.admission.store import Finding, Store
from jaxinfra.errors import Problem
from jaxinfra_sim.apiserver.api_errors import api_error
from jaxinfra_sim.core.events import Reason
from jaxinfra_sim.core.inputs import Objects

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


@dataclass(frozen=True)
class QuotaWaves:
    """A single Job's pods that a ResourceQuota admits only so many at once (`at_once`), the rest refused until the
    first end: a terminal pod no longer counts against a quota (kubernetes pkg/quota/v1/evaluator/core/pods.go
    QuotaV1Pod: a Succeeded or Failed pod is not charged), and the Job controller retries the refused creates
    (`event`: its FailedCreate), so pods that are not one group, each able to end without the others, all run, in
    waves."""

    at_once: int
    event: str


def pod_refusals(
    workload: str,
    namespace: str,
    jobs: Sequence[Any],
    store: Store,
    who: Callable[[Any, int], Any],
    waves: list[QuotaWaves] | None = None,
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
    starts. Where `waves` is given (the pods are not one group) and a single Job's later pods are refused by a quota
    alone, they are not a problem: the `QuotaWaves` appended to it say how many run at once."""
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
        event = f"event {Reason.FAILED_CREATE} by {by}: Error creating: {said}"
        if counted and k > 0 and waves is not None and len(jobs) == 1:
            if all(f.message.startswith("exceeded quota: ") for f in refused):
                waves.append(QuotaWaves(k, event))
                break
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
