"""Kueue's job-framework admission webhooks for the integrations jaxinfra renders (batch/v1 Job, JobSet,
TrainJob): Default (`kueue_default`) and validateCreate (`kueue_validate`).

Assumed configuration: Kueue's default manifests and feature gates at the commit read, and its default
Configuration (manageJobsWithoutQueueName false, managedJobsNamespaceSelector excluding kube-system and
kueue-system, which also every Kueue webhook's namespaceSelector excludes; integrations batch/job,
jobset.x-k8s.io/jobset and trainer.kubeflow.org/trainjob among those jaxinfra knows -- kubeflow.org/jaxjob is
commented out, so a JAXJob meets no Kueue webhook).

Source: kubernetes-sigs/kueue ff69552e79ad21652c36caa97038382e55625cf7 (v0.20.0-devel): pkg/controller/jobs/job/
job_webhook.go, jobs/jobset/jobset_webhook.go, jobs/trainjob/trainjob_webhook.go (Default and validateCreate of
each), pkg/controller/jobframework/defaults.go (default LocalQueue `default`, default WorkloadPriorityClass
`default`, suspend, managedBy for MultiKueue), utils.go (WorkloadShouldBeSuspended), reconciler.go
(FindAncestorJobManagedByKueue), validation.go (ValidateJobOnCreate: queue-name as a DNS-1123 subdomain, prebuilt
workload, max-exec-time, elastic-job), pkg/controller/constants/constants.go, pkg/features/kube_features.go,
apis/config/v1beta2/defaults.go, config/components/manager/controller_manager_config.yaml (integrations),
config/components/webhook/kustomization.yaml (namespaceSelector).

The topology (TAS) annotation checks of Job and JobSet templates are `kueue_tas`'s. Knowingly not emulated: a
TrainJob's topology annotation checks, its admission-gated-by annotation check, its
refusal when an owner in an ownerReference is missing, and the Pod, Deployment and StatefulSet integrations;
update-time rules.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from jaxinfra.admission.decoded import as_list, as_map, as_str, dig, is_int
from jaxinfra.admission.goformat import go_repr
from jaxinfra.admission.store import Finding, Path, Store, meta, namespace_of
from jaxinfra.admission.validation import dns1123_subdomain
from jaxinfra.admission.webhooks.kueue_tas import tas_validate
from jaxinfra.admission.webhooks.shared import (
    JOB,
    JOBSET,
    TRAINJOB,
    annotations_of,
    child_of,
    int_or,
    invalid_text,
    labels_of,
)
from jaxinfra.upstream import (
    BATCH_API,
    JOB_CONTROLLER,
    JOBSET_API,
    JOBSET_CONTROLLER,
    KUBE_SYSTEM,
    KUEUE_SYSTEM,
    MIN_PARALLELISM_ANNOTATION,
    MULTIKUEUE,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    TRAINER_API,
    TRAINJOB_CONTROLLER,
)

_MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
_PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"  # a label, and (preferred) an annotation
_ELASTIC = "kueue.x-k8s.io/elastic-job"  # the annotation and the scheduling gate
_SYNC_COMPLETIONS = "kueue.x-k8s.io/job-completions-equal-parallelism"
_KUEUE_SYSTEM = (KUBE_SYSTEM, KUEUE_SYSTEM)

KUEUE_KINDS: dict[tuple[str, str], tuple[str, str]] = {
    JOB: (BATCH_API, JOB_CONTROLLER),
    JOBSET: (JOBSET_API, JOBSET_CONTROLLER),
    TRAINJOB: (TRAINER_API, TRAINJOB_CONTROLLER),
}
"""The default integrations jaxinfra renders: (group, kind) -> (the GVK's apiVersion, the default managedBy)."""


def kueue_selects(obj: Mapping) -> bool:
    """Every Kueue webhook's namespaceSelector leaves out kube-system and kueue-system."""
    return namespace_of(obj) not in _KUEUE_SYSTEM


def _owner_managed(obj: Mapping) -> bool:
    """IsOwnerManagedByKueueForObject: the controlling owner is of a kind Kueue integrates."""
    for ref in as_list(meta(obj).get("ownerReferences")):
        ref = as_map(ref)
        if ref.get("controller") is True:
            return (as_str(ref.get("apiVersion")).rpartition("/")[0], ref.get("kind")) in KUEUE_KINDS
    return False


def _ancestor_managed(obj: Mapping, store: Store) -> bool:
    """FindAncestorJobManagedByKueue: walking controlling owners of integrated kinds, one has a queue name."""
    seen: set[tuple[str, str]] = set()
    current = obj
    while True:
        ref = next(
            (as_map(r) for r in as_list(meta(current).get("ownerReferences")) if as_map(r).get("controller") is True),
            None,
        )
        if ref is None:
            return False
        group_kind = (as_str(ref.get("apiVersion")).rpartition("/")[0], as_str(ref.get("kind")))
        key = (group_kind[1], as_str(ref.get("name")))
        if group_kind not in KUEUE_KINDS or key in seen:
            return False
        seen.add(key)
        owner = store.get(key[0], namespace_of(obj), key[1])
        if owner is None:
            return False
        if as_str(labels_of(owner).get(QUEUE_LABEL)):
            return True
        current = owner


def _set_label(obj: dict, key: str, value: str) -> None:
    metadata = child_of(obj, "metadata")
    labels = child_of(metadata, "labels") if metadata is not None else None
    if labels is not None:
        labels[key] = value


def kueue_default(obj: dict, store: Store, group_kind: tuple[str, str]) -> None:
    """Kueue's Default() for Job, JobSet and TrainJob: default LocalQueue and WorkloadPriorityClass labels, then
    suspend (a queued workload starts suspended until admitted), and managedBy for a MultiKueue ClusterQueue."""
    namespace = namespace_of(obj)
    if (
        not as_str(labels_of(obj).get(QUEUE_LABEL))
        and store.get("LocalQueue", namespace, "default") is not None
        and not _owner_managed(obj)
    ):
        _set_label(obj, QUEUE_LABEL, "default")
    if (
        not as_str(labels_of(obj).get(PRIORITY_LABEL))
        and not _owner_managed(obj)
        and store.get("WorkloadPriorityClass", "", "default") is not None
    ):
        _set_label(obj, PRIORITY_LABEL, "default")
    spec = child_of(obj, "spec")
    if spec is None:
        return
    suspend = bool(as_str(labels_of(obj).get(QUEUE_LABEL))) and not _ancestor_managed(obj, store)
    if group_kind != TRAINJOB and suspend and spec.get("suspend") is not True:
        spec["suspend"] = True
    _default_managed_by(obj, spec, store, group_kind)
    if group_kind == JOB and annotations_of(obj).get(_ELASTIC) == "true":
        pod_spec = child_of(child_of(spec, "template"), "spec")
        gates = pod_spec.setdefault("schedulingGates", []) if pod_spec is not None else None
        if isinstance(gates, list) and not any(as_map(g).get("name") == _ELASTIC for g in gates):
            gates.append({"name": _ELASTIC})
    if group_kind == TRAINJOB:
        if suspend and spec.get("suspend") is not True:
            spec["suspend"] = True
        patches = spec.setdefault("runtimePatches", [])
        if isinstance(patches, list):
            patches.append({"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"spec": {}}}})


def _default_managed_by(obj: Mapping, spec: dict, store: Store, group_kind: tuple[str, str]) -> None:
    """ApplyDefaultForManagedBy: managedBy MultiKueue when the LocalQueue's ClusterQueue has a MultiKueue check."""
    if spec.get("managedBy") not in (None, KUEUE_KINDS[group_kind][1]):
        return
    queue = as_str(labels_of(obj).get(QUEUE_LABEL))
    local_queue = store.get("LocalQueue", namespace_of(obj), queue) if queue else None
    cluster_queue = as_str(dig(local_queue, "spec").get("clusterQueue"))
    cq_spec = dig(store.get("ClusterQueue", "", cluster_queue), "spec") if cluster_queue else {}
    checks = [
        as_map(rule).get("name") for rule in as_list(dig(cq_spec, "admissionChecksStrategy").get("admissionChecks"))
    ]
    checks += as_list(cq_spec.get("admissionChecks"))  # v1beta1's plain list of names
    for check in checks:
        if (
            isinstance(check, str)
            and dig(store.get("AdmissionCheck", "", check), "spec").get("controllerName") == MULTIKUEUE
        ):
            spec["managedBy"] = MULTIKUEUE
            return


def _atoi(text: str) -> int | None:
    """Go's strconv.Atoi (optional sign, decimal digits, 64-bit), or None where it fails."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _atoi_error(text: str) -> str:
    reason = "value out of range" if re.fullmatch(r"[+-]?[0-9]+", text) else "invalid syntax"
    return f"strconv.Atoi: parsing {go_repr(text)}: {reason}"


def kueue_validate(obj: Mapping, group_kind: tuple[str, str]) -> list[Finding]:
    """ValidateJobOnCreate (every integration), then the Job webhook's partial-admission and sync-completions rules."""
    labels, annotations = labels_of(obj), annotations_of(obj)
    out: list[Finding] = []
    names = [(("metadata", "labels", QUEUE_LABEL), labels.get(QUEUE_LABEL), "the name of a LocalQueue")]
    if as_str(annotations.get(_PREBUILT)):
        names.append((("metadata", "annotations", _PREBUILT), annotations[_PREBUILT], "a Workload's name"))
    else:
        names.append((("metadata", "labels", _PREBUILT), labels.get(_PREBUILT), "a Workload's name"))
    for at, value, what in names:
        if isinstance(value, str) and (errors := dns1123_subdomain(value)):
            out.append(Finding(at, value, invalid_text(value, ",".join(errors)), f"use {what}: a DNS-1123 subdomain"))
    max_exec = labels.get(_MAX_EXEC_LABEL)
    if isinstance(max_exec, str):
        at = ("metadata", "labels", _MAX_EXEC_LABEL)
        seconds = _atoi(max_exec)
        if seconds is None:
            out.append(
                Finding(at, max_exec, invalid_text(max_exec, _atoi_error(max_exec)), "use a whole number of seconds")
            )
        elif seconds <= 0:
            out.append(Finding(at, seconds, invalid_text(seconds, "should be greater than 0"), "use at least 1 second"))
    elastic = annotations.get(_ELASTIC) == "true"
    if elastic and group_kind != JOB:
        gvk = f"{KUEUE_KINDS[group_kind][0]}, Kind={group_kind[1]}"
        out.append(
            Finding(
                ("metadata", "annotations", _ELASTIC),
                "true",
                f"Forbidden: elastic job is not supported for {go_repr(gvk)}",
                "remove the annotation (Kueue's elastic jobs are batch Jobs)",
            )
        )
    if group_kind == JOB:
        out += _job_annotations(obj, annotations, elastic)
    if group_kind in (JOB, JOBSET):
        out += tas_validate(obj, group_kind[1])
    return out


def _job_annotations(obj: Mapping, annotations: Mapping, elastic: bool) -> list[Finding]:
    spec = as_map(obj.get("spec"))
    parallelism = int_or(spec.get("parallelism"), 1)
    completions = spec.get("completions")
    pods = min(parallelism, completions) if is_int(completions) else parallelism
    out: list[Finding] = []
    minimum = annotations.get(MIN_PARALLELISM_ANNOTATION)
    if isinstance(minimum, str):
        at: Path = ("metadata", "annotations", MIN_PARALLELISM_ANNOTATION)
        value = _atoi(minimum)
        if value is None:
            out.append(Finding(at, minimum, invalid_text(minimum, _atoi_error(minimum)), "use a whole number of pods"))
        elif value >= pods or value <= 0:
            out.append(
                Finding(
                    at,
                    value,
                    invalid_text(value, f"should be between 0 and {pods - 1}"),
                    "use fewer pods than the Job runs in parallel, at least 1",
                )
            )
        if elastic:
            out.append(
                Finding(
                    at,
                    minimum,
                    invalid_text(minimum, "partial admission and elastic job cannot be used together"),
                    "remove one of the two annotations",
                )
            )
    sync = annotations.get(_SYNC_COMPLETIONS)
    if isinstance(sync, str):
        at = ("metadata", "annotations", _SYNC_COMPLETIONS)
        enabled = {
            "1": True,
            "t": True,
            "T": True,
            "TRUE": True,
            "true": True,
            "True": True,
            "0": False,
            "f": False,
            "F": False,
            "FALSE": False,
            "false": False,
            "False": False,
        }.get(sync)
        if enabled is None:
            out.append(
                Finding(
                    at,
                    sync,
                    invalid_text(sync, f"strconv.ParseBool: parsing {go_repr(sync)}: invalid syntax"),
                    "use true or false",
                )
            )
        if enabled:
            if spec.get("completionMode") in (None, "NonIndexed"):
                out.append(
                    Finding(
                        at,
                        sync,
                        invalid_text(sync, "should not be enabled for NonIndexed jobs"),
                        "set completionMode: Indexed, or remove the annotation",
                    )
                )
            if parallelism != int_or(completions, 1):
                out.append(
                    Finding(
                        ("spec", "completions"),
                        completions,
                        invalid_text(
                            completions, f"should be equal to parallelism when {_SYNC_COMPLETIONS} annotation is true"
                        ),
                        "set completions equal to parallelism",
                    )
                )
    return out
