"""The admission webhooks that the controllers jaxinfra installs register for the kinds it renders: what each
mutating webhook changes (`mutate`) and what each validating webhook refuses (`validate`), on create.

Order (`mutate`): the API server calls mutating webhook configurations sorted by name, each once (none of these sets
reinvocationPolicy): `defaulter.trainer.kubeflow.org` (Trainer), `jobset-mutating-webhook-configuration` (JobSet),
`kueue-mutating-webhook-configuration` (Kueue). So a JobSet is defaulted by JobSet, then by Kueue; a TrainJob by
Trainer, then by Kueue. Validating webhooks see the result; when several refuse, each refusal is a finding.

Assumed configuration: each controller's default manifests and feature gates at the commit read. Kueue: its
default Configuration (manageJobsWithoutQueueName false, managedJobsNamespaceSelector excluding kube-system and
kueue-system, which also every Kueue webhook's namespaceSelector excludes; integrations batch/job,
jobset.x-k8s.io/jobset and trainer.kubeflow.org/trainjob among those jaxinfra knows -- kubeflow.org/jaxjob is
commented out, so a JAXJob meets no Kueue webhook). JobSet: InPlaceRestart and RestartJob gates off.

Sources, each read at the commit named:
- kubernetes-sigs/jobset 08dfbdfd682714a9ab929633eca8dc95315187e7: pkg/webhooks/jobset_webhook.go (Default,
  ValidateCreate, validateFailurePolicy, validateCoordinator, validateCoordinatorLabelValue,
  validateVolumeClaimPolicies, the message constants and `failurePolicyRule%v`), pkg/util/placement/placement.go
  (child Job `<jobset>-<rjob>-<index>` and Pod `<job>-<podIndex>` names), pkg/controllers/jobset_controller.go
  (CoordinatorEndpoint, GetSubdomain), pkg/controllers/volume_claim_policy.go (PVC `<template>-<jobset>`),
  pkg/features/features.go (gate defaults), api/jobset/v1alpha2/jobset_types.go (constants),
  config/components/webhook/manifests.yaml and config/default/kustomization.yaml (names; no namespaceSelector).
- kubernetes-sigs/kueue ff69552e79ad21652c36caa97038382e55625cf7 (v0.20.0-devel): pkg/controller/jobs/job/
  job_webhook.go, jobs/jobset/jobset_webhook.go, jobs/trainjob/trainjob_webhook.go (Default and validateCreate of
  each), pkg/controller/jobframework/defaults.go (default LocalQueue `default`, default WorkloadPriorityClass
  `default`, suspend, managedBy for MultiKueue), utils.go (WorkloadShouldBeSuspended), reconciler.go
  (FindAncestorJobManagedByKueue), validation.go (ValidateJobOnCreate: queue-name as a DNS-1123 subdomain, prebuilt
  workload, max-exec-time, elastic-job), pkg/controller/constants/constants.go, pkg/features/kube_features.go,
  apis/config/v1beta2/defaults.go, config/components/manager/controller_manager_config.yaml (integrations),
  config/components/webhook/kustomization.yaml (namespaceSelector).
- kubeflow/trainer 8c0f5059bd51ec3ba6d6a6a7b2e1471de7bc13b3: pkg/webhooks/trainjob_webhook.go (the runtime must be
  registered), pkg/runtime/core/trainingruntime.go and clustertrainingruntime.go (ValidateObjects: the referenced
  runtime must exist; deprecation warning), pkg/webhooks/trainingruntime_webhook.go and
  clustertrainingruntime_webhook.go (ancestor replicatedJobs), pkg/constants/constants.go,
  manifests/base/webhook/patch_validating.yaml (the runtimes' objectSelector). The runtimeRef apiGroup/kind
  defaults are the CRD schema's (`structural`), not a webhook's.
- kubernetes/kubernetes staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go (008b3652959c: the DNS
  and label-value messages) and .../validation/field/errors.go (014a908cc415: how a field error prints).

Messages are the webhooks' own; an error a webhook returns without a field path (JobSet's fmt.Errorf, printed by
the API server as `<nil>: Internal error: ...`) keeps its text and is placed at the field it concerns.

Knowingly not emulated: Trainer's runtimePatches `time` stamp (the wall clock) and its runtime plugins' custom
validation; JobSet's check that an existing PVC's spec equals its VolumeClaimPolicy template (defaulting differs
between the two) and its generateName suffix (the pipeline names the object first); Kueue's topology (TAS)
annotation checks, its admission-gated-by annotation check, its refusal when an owner in an ownerReference is
missing, and the Pod, Deployment and StatefulSet integrations; update-time rules of every webhook.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .decoded import as_list, as_map, as_str, dig, is_int
from .goformat import go_repr
from .store import INSTALLED_RUNTIMES, Finding, Path, Store, meta, namespace_of
from .validation import dns1035_label, dns1123_subdomain, label_value

__all__ = ["mutate", "validate"]

JOBSET = ("jobset.x-k8s.io", "JobSet")
JOB = ("batch", "Job")
TRAINJOB = ("trainer.kubeflow.org", "TrainJob")
TRAINING_RUNTIME = ("trainer.kubeflow.org", "TrainingRuntime")
CLUSTER_TRAINING_RUNTIME = ("trainer.kubeflow.org", "ClusterTrainingRuntime")

MAX_INT32 = 2**31 - 1


def mutate(obj: dict, store: Store) -> None:
    """Apply, in place, the mutating webhooks that match `obj` (a create), in the API server's order."""
    group_kind = _group_kind(obj)
    if group_kind == JOBSET:
        _jobset_default(obj)
    if group_kind in _KUEUE_KINDS and _kueue_selects(obj):
        _kueue_default(obj, store, group_kind)


def validate(obj: Mapping, store: Store) -> list[Finding]:
    """What the validating webhooks that match `obj` (a create) refuse or warn about."""
    group_kind = _group_kind(obj)
    findings: list[Finding] = []
    if group_kind == JOBSET:
        findings += _jobset_validate(obj, store)
    elif group_kind == TRAINJOB:
        findings += _trainjob_validate(obj, store)
    elif group_kind in (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME) and _trainer_selects(obj):
        findings += _runtime_validate(obj, group_kind)
    if group_kind in _KUEUE_KINDS and _kueue_selects(obj):
        findings += _kueue_validate(obj, group_kind)
    return findings


# --- shared: shapes and messages -------------------------------------------------------------------------------------


def _group_kind(obj: Mapping) -> tuple[str, str]:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return "", ""
    return api_version.rpartition("/")[0], kind








def _child(parent: Any, key: str) -> dict | None:
    """parent[key] as a dict to write into, made when absent or null (as a Go struct field is always there)."""
    if not isinstance(parent, dict):
        return None
    if parent.get(key) is None:
        parent[key] = {}
    value = parent[key]
    return value if isinstance(value, dict) else None




def _int(value: Any, default: int) -> int:
    return value if is_int(value) else default




def _labels(obj: Mapping) -> Mapping:
    return as_map(meta(obj).get("labels"))


def _annotations(obj: Mapping) -> Mapping:
    return as_map(meta(obj).get("annotations"))


def _invalid(value: Any, detail: str) -> str:
    """field.Invalid's text: `Invalid value: <value as Go prints it>: <detail>`."""
    return f"Invalid value: {'null' if value is None else go_repr(value)}: {detail}"


def _go_list(values: list[int]) -> str:
    return "[" + " ".join(map(str, values)) + "]"


TOO_LONG_63 = "must be no more than 63 characters"
"""IsDNS1035Label's length message, which JobSet's webhook rewords for derived names."""


# --- JobSet ----------------------------------------------------------------------------------------------------------

_COORDINATOR_KEY = "jobset.sigs.k8s.io/coordinator"
_JOB_FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes", "MaxFailedIndexesExceeded",
                        "PodFailurePolicy")
_RULE_NAME = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?"
_RENAME = "shorten the JobSet or replicatedJob name; start each with a letter"


def _jobset_default(obj: dict) -> None:
    """JobSet's Default(): success policy All, startup AnyOrder, Indexed Jobs whose pods restart OnFailure, DNS
    hostnames published before ready, failure-policy rules named by index, volume claims deleted with the JobSet."""
    spec = _child(obj, "spec")
    if spec is None:
        return
    if spec.get("successPolicy") is None:
        spec["successPolicy"] = {"operator": "All"}
    if spec.get("startupPolicy") is None:
        spec["startupPolicy"] = {"startupPolicyOrder": "AnyOrder"}
    for rjob in as_list(spec.get("replicatedJobs")):
        job_spec = _child(_child(rjob, "template"), "spec")
        if job_spec is None:
            continue
        if job_spec.get("completionMode") is None:
            job_spec["completionMode"] = "Indexed"
        pod_spec = _child(_child(job_spec, "template"), "spec")
        if pod_spec is not None and not pod_spec.get("restartPolicy"):
            pod_spec["restartPolicy"] = "OnFailure"
    network = _child(spec, "network")
    if network is not None:
        for field in ("enableDNSHostnames", "publishNotReadyAddresses"):
            if network.get(field) is None:
                network[field] = True
    for i, rule in enumerate(as_list(as_map(spec.get("failurePolicy")).get("rules"))):
        if isinstance(rule, dict) and not rule.get("name"):
            rule["name"] = f"failurePolicyRule{i}"
    for policy in as_list(spec.get("volumeClaimPolicies")):
        if isinstance(policy, dict) and policy.get("retentionPolicy") is None:
            policy["retentionPolicy"] = {"whenDeleted": "Delete"}


def _jobset_validate(obj: Mapping, store: Store) -> list[Finding]:
    """JobSet's ValidateCreate(), in its order."""
    spec = as_map(obj.get("spec"))
    name = as_str(meta(obj).get("name"))
    rjobs = [r if isinstance(r, Mapping) else {} for r in as_list(spec.get("replicatedJobs"))]
    failure_policy = as_map(spec.get("failurePolicy"))
    out: list[Finding] = []
    if failure_policy.get("restartStrategy") == "InPlaceRestart":
        out.append(Finding(("spec", "failurePolicy", "restartStrategy"), "InPlaceRestart",
                           "InPlaceRestart restart strategy cannot be set when InPlaceRestart feature gate is disabled",
                           "use Recreate or BlockingRecreate (the JobSet controller's InPlaceRestart gate is off)"))
    if rjobs and rjobs[0].get("dependsOn") is not None:
        out.append(Finding(("spec", "replicatedJobs", 0, "dependsOn"), rjobs[0]["dependsOn"],
                           "DependsOn can't be set for the first ReplicatedJob",
                           "remove dependsOn from the first replicatedJob; later ones may depend on earlier ones"))
    subdomain = as_str(as_map(spec.get("network")).get("subdomain"))
    if subdomain:
        at: Path = ("spec", "network", "subdomain")
        for message in dns1123_subdomain(subdomain):
            out.append(Finding(at, subdomain, _invalid(subdomain, message), "use a DNS-1035 label as the subdomain"))
        for message in dns1035_label(subdomain):
            message = ".spec.network.subdomain is too long, must be less than 63 characters" \
                if TOO_LONG_63 in message else message
            out.append(Finding(at, subdomain, _invalid(subdomain, message), "use a DNS-1035 label as the subdomain"))
    if isinstance(spec.get("managedBy"), str):
        out += _managed_by(spec["managedBy"])
    names: set[str] = set()
    for i, rjob in enumerate(rjobs):
        out += _replicated_job(name, rjob, i, names)
    for target in as_list(as_map(spec.get("successPolicy")).get("targetReplicatedJobs")):
        if target not in names:
            out.append(Finding(("spec", "successPolicy", "targetReplicatedJobs"), target,
                               f"invalid replicatedJob name '{target}' does not appear in .spec.ReplicatedJobs",
                               "name a replicatedJob of this JobSet"))
    if failure_policy:
        out += _failure_policy(failure_policy, rjobs, names)
    coordinator = spec.get("coordinator")
    if isinstance(coordinator, Mapping):
        out += _coordinator(name, spec, coordinator, rjobs)
    if as_list(spec.get("volumeClaimPolicies")):
        out += _volume_claim_policies(obj, name, rjobs, store)
    return out


def _managed_by(manager: str) -> list[Finding]:
    """The managedBy value: a domain-prefixed path (IsDomainPrefixedPath) of at most 63 characters."""
    at: Path = ("spec", "managedBy")
    fix = "use a controller name such as kueue.x-k8s.io/multikueue, or leave managedBy unset"
    out: list[Finding] = []
    host, slash, path = manager.partition("/")
    if not manager:
        out.append(Finding(at, manager, "Required value", fix))
    elif not slash or not host or not path:
        detail = 'must be a domain-prefixed path (such as "acme.io/foo")'
        out.append(Finding(at, manager, _invalid(manager, detail), fix))
    else:
        out += [Finding(at, host, _invalid(host, m), fix) for m in dns1123_subdomain(host)]
        if not re.fullmatch(r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+", path):
            detail = "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')"
            out.append(Finding(at, path, _invalid(path, detail), fix))
    if len(manager) > 63:
        out.append(Finding(at, manager, "Too long: may not be longer than 63", fix))
    return out


def _replicated_job(jobset: str, rjob: Mapping, i: int, names: set[str]) -> list[Finding]:
    """One replicatedJob's rules: replicas x parallelism, its group name, and the Job and Pod names JobSet derives."""
    at: Path = ("spec", "replicatedJobs", i)
    rname = as_str(rjob.get("name"))
    names.add(rname)
    replicas = _int(rjob.get("replicas"), 1)   # the CRD's default, applied before
    job_spec = dig(rjob, "template", "spec")
    out: list[Finding] = []
    if _int(job_spec.get("parallelism"), 1) * replicas > MAX_INT32:
        out.append(Finding((*at, "replicas"), replicas, f"the product of replicas and parallelism must not exceed "
                           f"{MAX_INT32} for replicatedJob '{rname}'", "lower replicas or parallelism"))
    group = as_str(rjob.get("groupName"))
    for message in dns1035_label(group):
        message = ".spec.replicatedJob[].groupName is too long, must be less than 63 characters" \
            if TOO_LONG_63 in message else message
        out.append(Finding((*at, "groupName"), group, _invalid(group, message), "use a DNS-1035 label"))
    job = f"{jobset}-{rname}-{replicas - 1}"
    for message in dns1035_label(job):
        message = "JobSet name is too long, job names generated for this JobSet will exceed 63 characters" \
            if TOO_LONG_63 in message else message
        out.append(Finding((*at, "name"), job, _invalid(job, message), _RENAME))
    completions = job_spec.get("completions")
    if job_spec.get("completionMode") == "Indexed" and is_int(completions):
        pod = f"{job}-{completions - 1}-abcde"   # the 5 random characters of the Pod's generateName
        for message in dns1035_label(pod):
            message = "JobSet name is too long, pod names generated for this JobSet will exceed 63 characters" \
                if TOO_LONG_63 in message else message
            out.append(Finding((*at, "name"), job, _invalid(job, message), _RENAME))
    for j, dependency in enumerate(as_list(rjob.get("dependsOn"))):
        other = as_str(as_map(dependency).get("name"))
        if other not in names:
            out.append(Finding((*at, "dependsOn", j, "name"), other,
                               f"replicatedJob: {rname} cannot depend on replicatedJob: {other}",
                               "depend only on a replicatedJob listed before this one"))
    return out


def _failure_policy(policy: Mapping, rjobs: list[Mapping], names: set[str]) -> list[Finding]:
    """validateFailurePolicy: RestartJob actions (gate off), then each rule's name, targets and reasons."""
    rules = [r if isinstance(r, Mapping) else {} for r in as_list(policy.get("rules"))]
    at: Path = ("spec", "failurePolicy", "rules")
    for i, rule in enumerate(rules):
        if rule.get("action") in ("RestartJob", "RestartJobAndIgnoreMaxRestarts"):
            return [Finding((*at, i, "action"), rule["action"], "RestartJob and RestartJobAndIgnoreMaxRestarts failure "
                            "policy actions are not allowed when RestartJob feature gate is disabled",
                            "use RestartJobSet, RestartJobSetAndIgnoreMaxRestarts or FailJobSet")]
    out: list[Finding] = []
    by_name: dict[str, list[int]] = {}
    for i, rule in enumerate(rules):
        name = as_str(rule.get("name"))
        if not 1 <= len(name) <= 128:
            out.append(Finding((*at, i, "name"), name, f"invalid failure policy rule name of length {len(name)}, the "
                               "rule name must be at least 1 characters long and at most 128 characters long",
                               "name the rule with 1 to 128 characters, or leave it unset to get failurePolicyRule<i>"))
        by_name.setdefault(name, []).append(i)
        if not re.fullmatch(_RULE_NAME, name):
            out.append(Finding((*at, i, "name"), name, f"invalid failure policy rule name '{name}', a failure policy "
                               "rule name must start with an alphabetic character, optionally followed by a string of "
                               "alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'",
                               "start it with a letter; use letters, digits, '_', ',' or ':'"))
        for target in as_list(rule.get("targetReplicatedJobs")):
            if target not in names:
                out.append(Finding((*at, i, "targetReplicatedJobs"), target, f"invalid replicatedJob name '{target}' "
                                   "in failure policy does not appear in .spec.ReplicatedJobs",
                                   "name a replicatedJob of this JobSet"))
        for reason in as_list(rule.get("onJobFailureReasons")):
            if reason not in _JOB_FAILURE_REASONS:
                out.append(Finding((*at, i, "onJobFailureReasons"), reason, f"invalid job failure reason '{reason}' in "
                                   "failure policy is not a recognized job failure reason",
                                   "use one of: " + ", ".join(_JOB_FAILURE_REASONS)))
    for name, indices in by_name.items():
        if len(indices) > 1:
            out.append(Finding((*at, indices[1], "name"), name, f"rule names are not unique, rules with indices "
                               f"{_go_list(indices)} all have the same name '{name}'", "give each rule its own name"))
    return out


def _coordinator(jobset: str, spec: Mapping, coordinator: Mapping, rjobs: list[Mapping]) -> list[Finding]:
    """validateCoordinator (the first problem only, as upstream) and the coordinator label value it derives."""
    at: Path = ("spec", "coordinator")
    target = as_str(coordinator.get("replicatedJob"))
    job_index, pod_index = _int(coordinator.get("jobIndex"), 0), _int(coordinator.get("podIndex"), 0)
    rjob = next((r for r in rjobs if r.get("name") == target), None)
    job_spec = dig(rjob, "template", "spec")
    completions = job_spec.get("completions")
    problem: tuple[Path, Any, str] | None = None
    if rjob is None:
        problem = (*at, "replicatedJob"), target, f"coordinator replicatedJob {target} does not exist"
    elif not 0 <= job_index < _int(rjob.get("replicas"), 1):
        problem = ((*at, "jobIndex"), job_index,
                   f"coordinator job index {job_index} is invalid for replicatedJob {target}")
    elif job_spec.get("completionMode") != "Indexed" or not is_int(completions):
        problem = (*at, "replicatedJob"), target, ("job for coordinator pod must be indexed completion mode, and "
                                                   "completions number must be set")
    elif not 0 <= pod_index < _int(completions, 0):
        problem = (*at, "podIndex"), pod_index, (f"coordinator pod index {pod_index} is invalid for replicatedJob "
                                                 f"{target} job index {job_index}")
    out = [Finding(*problem, "point the coordinator at an existing Job and Pod index")] if problem else []
    subdomain = as_str(as_map(spec.get("network")).get("subdomain")) or jobset
    value = f"{jobset}-{target}-{job_index}-{pod_index}.{subdomain}"
    errors = label_value(value)
    if errors:
        out.append(Finding(at, value, f"spec will lead to invalid label value {go_repr(value)} for coordinator label "
                           f"{go_repr(_COORDINATOR_KEY)} (long JobSet / ReplicatedJob / SubDomain name?): "
                           f"{', '.join(errors)}", "shorten the JobSet, replicatedJob or subdomain name"))
    return out


def _volume_claim_policies(obj: Mapping, jobset: str, rjobs: list[Mapping], store: Store) -> list[Finding]:
    """validateVolumeClaimPolicies: unique, valid, short enough PVC names, each mounted by some container, and an
    existing PVC of that name only with retentionPolicy Retain."""
    out: list[Finding] = []
    seen: set[str] = set()
    for i, policy in enumerate(as_list(as_map(obj.get("spec")).get("volumeClaimPolicies"))):
        at: Path = ("spec", "volumeClaimPolicies", i)
        for j, template in enumerate(as_list(as_map(policy).get("templates"))):
            name = as_str(dig(template, "metadata").get("name"))
            where: Path = (*at, "templates", j, "metadata", "name")
            if name in seen:
                out.append(Finding(where, name, _invalid(name, "names must be unique for VolumeClaimPolicies template"),
                                   "give each claim template its own name"))
            out += [Finding(where, name, _invalid(name, m), "use a DNS-1123 subdomain")
                    for m in dns1123_subdomain(name)]
            pvc = f"{name}-{jobset}"
            if len(pvc) > 63:
                out.append(Finding(where, name, _invalid(name, "VolumeClaimPolicies template name is too long"),
                                   f"shorten it: the PVC is named {pvc!r}, at most 63 characters"))
            out += _claim_mounts(rjobs, name)
            when = dig(policy, "retentionPolicy").get("whenDeleted")
            if store.get("PersistentVolumeClaim", namespace_of(obj), pvc) is not None and when != "Retain":
                out.append(Finding((*at, "retentionPolicy", "whenDeleted"), when,
                                   _invalid(when, "retentionPolicy must be retain when PVC exists"),
                                   f"set whenDeleted: Retain (PVC {pvc!r} already exists)"))
            seen.add(name)
    return out


def _claim_mounts(rjobs: list[Mapping], claim: str) -> list[Finding]:
    out: list[Finding] = []
    mounted = False
    for i, rjob in enumerate(rjobs):
        pod = dig(rjob, "template", "spec", "template", "spec")
        for k, volume in enumerate(as_list(pod.get("volumes"))):
            if as_map(volume).get("name") == claim:
                out.append(Finding(("spec", "replicatedJobs", i, "template", "spec", "template", "spec", "volumes", k,
                                    "name"), claim, _invalid(claim, "volume name conflicts with VolumeClaimPolicy "
                                                             f"template name: {claim}"),
                                   "rename the volume or the claim template (JobSet adds the claim's volume itself)"))
        containers = as_list(pod.get("initContainers")) + as_list(pod.get("containers"))
        mounted = mounted or any(as_map(m).get("name") == claim
                                 for c in containers for m in as_list(as_map(c).get("volumeMounts")))
    if not mounted:
        out.append(Finding(("spec", "replicatedJobs"), claim, "Invalid value: []v1alpha2.ReplicatedJob{...}: "
                           f"replicatedJob containers don't have a matching volumeMount: {claim} from "
                           "VolumeClaimPolicies", f"mount {claim!r} (volumeMounts) in a container of a replicatedJob"))
    return out


# --- Kueue -----------------------------------------------------------------------------------------------------------

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
_MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
_PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"          # a label, and (preferred) an annotation
_ELASTIC = "kueue.x-k8s.io/elastic-job"                      # the annotation and the scheduling gate
_MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
_SYNC_COMPLETIONS = "kueue.x-k8s.io/job-completions-equal-parallelism"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
_KUEUE_SYSTEM = ("kube-system", "kueue-system")

_KUEUE_KINDS: dict[tuple[str, str], tuple[str, str]] = {
    JOB: ("batch/v1", "kubernetes.io/job-controller"),
    JOBSET: ("jobset.x-k8s.io/v1alpha2", "jobset.sigs.k8s.io/jobset-controller"),
    TRAINJOB: ("trainer.kubeflow.org/v1alpha1", "trainer.kubeflow.org/trainjob-controller"),
}
"""The default integrations jaxinfra renders: (group, kind) -> (the GVK's apiVersion, the default managedBy)."""


def _kueue_selects(obj: Mapping) -> bool:
    """Every Kueue webhook's namespaceSelector leaves out kube-system and kueue-system."""
    return namespace_of(obj) not in _KUEUE_SYSTEM


def _owner_managed(obj: Mapping) -> bool:
    """IsOwnerManagedByKueueForObject: the controlling owner is of a kind Kueue integrates."""
    for ref in as_list(meta(obj).get("ownerReferences")):
        ref = as_map(ref)
        if ref.get("controller") is True:
            return (as_str(ref.get("apiVersion")).rpartition("/")[0], ref.get("kind")) in _KUEUE_KINDS
    return False


def _ancestor_managed(obj: Mapping, store: Store) -> bool:
    """FindAncestorJobManagedByKueue: walking controlling owners of integrated kinds, one has a queue name."""
    seen: set[tuple[str, str]] = set()
    current = obj
    while True:
        ref = next((as_map(r) for r in as_list(meta(current).get("ownerReferences")) if as_map(r).get("controller") is True),
                   None)
        if ref is None:
            return False
        group_kind = (as_str(ref.get("apiVersion")).rpartition("/")[0], as_str(ref.get("kind")))
        key = (group_kind[1], as_str(ref.get("name")))
        if group_kind not in _KUEUE_KINDS or key in seen:
            return False
        seen.add(key)
        owner = store.get(key[0], namespace_of(obj), key[1])
        if owner is None:
            return False
        if as_str(_labels(owner).get(QUEUE_LABEL)):
            return True
        current = owner


def _set_label(obj: dict, key: str, value: str) -> None:
    metadata = _child(obj, "metadata")
    labels = _child(metadata, "labels") if metadata is not None else None
    if labels is not None:
        labels[key] = value


def _kueue_default(obj: dict, store: Store, group_kind: tuple[str, str]) -> None:
    """Kueue's Default() for Job, JobSet and TrainJob: default LocalQueue and WorkloadPriorityClass labels, then
    suspend (a queued workload starts suspended until admitted), and managedBy for a MultiKueue ClusterQueue."""
    namespace = namespace_of(obj)
    if (not as_str(_labels(obj).get(QUEUE_LABEL)) and store.get("LocalQueue", namespace, "default") is not None
            and not _owner_managed(obj)):
        _set_label(obj, QUEUE_LABEL, "default")
    if (not as_str(_labels(obj).get(PRIORITY_LABEL)) and not _owner_managed(obj)
            and store.get("WorkloadPriorityClass", "", "default") is not None):
        _set_label(obj, PRIORITY_LABEL, "default")
    spec = _child(obj, "spec")
    if spec is None:
        return
    suspend = bool(as_str(_labels(obj).get(QUEUE_LABEL))) and not _ancestor_managed(obj, store)
    if group_kind != TRAINJOB and suspend and spec.get("suspend") is not True:
        spec["suspend"] = True
    _default_managed_by(obj, spec, store, group_kind)
    if group_kind == JOB and _annotations(obj).get(_ELASTIC) == "true":
        pod_spec = _child(_child(spec, "template"), "spec")
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
    if spec.get("managedBy") not in (None, _KUEUE_KINDS[group_kind][1]):
        return
    queue = as_str(_labels(obj).get(QUEUE_LABEL))
    local_queue = store.get("LocalQueue", namespace_of(obj), queue) if queue else None
    cluster_queue = as_str(dig(local_queue, "spec").get("clusterQueue"))
    cq_spec = dig(store.get("ClusterQueue", "", cluster_queue), "spec") if cluster_queue else {}
    checks = [as_map(rule).get("name") for rule in as_list(dig(cq_spec, "admissionChecksStrategy").get("admissionChecks"))]
    checks += as_list(cq_spec.get("admissionChecks"))                         # v1beta1's plain list of names
    for check in checks:
        if isinstance(check, str) and dig(store.get("AdmissionCheck", "", check), "spec").get(
                "controllerName") == MULTIKUEUE:
            spec["managedBy"] = MULTIKUEUE
            return


def _atoi(text: str) -> int | None:
    """Go's strconv.Atoi (optional sign, decimal digits, 64-bit), or None where it fails."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if -2**63 <= value < 2**63 else None


def _atoi_error(text: str) -> str:
    reason = "value out of range" if re.fullmatch(r"[+-]?[0-9]+", text) else "invalid syntax"
    return f"strconv.Atoi: parsing {go_repr(text)}: {reason}"


def _kueue_validate(obj: Mapping, group_kind: tuple[str, str]) -> list[Finding]:
    """ValidateJobOnCreate (every integration), then the Job webhook's partial-admission and sync-completions rules."""
    labels, annotations = _labels(obj), _annotations(obj)
    out: list[Finding] = []
    names = [(("metadata", "labels", QUEUE_LABEL), labels.get(QUEUE_LABEL), "the name of a LocalQueue")]
    if as_str(annotations.get(_PREBUILT)):
        names.append((("metadata", "annotations", _PREBUILT), annotations[_PREBUILT], "a Workload's name"))
    else:
        names.append((("metadata", "labels", _PREBUILT), labels.get(_PREBUILT), "a Workload's name"))
    for at, value, what in names:
        if isinstance(value, str) and (errors := dns1123_subdomain(value)):
            out.append(Finding(at, value, _invalid(value, ",".join(errors)), f"use {what}: a DNS-1123 subdomain"))
    max_exec = labels.get(_MAX_EXEC_LABEL)
    if isinstance(max_exec, str):
        at = ("metadata", "labels", _MAX_EXEC_LABEL)
        seconds = _atoi(max_exec)
        if seconds is None:
            out.append(Finding(at, max_exec, _invalid(max_exec, _atoi_error(max_exec)),
                               "use a whole number of seconds"))
        elif seconds <= 0:
            out.append(Finding(at, seconds, _invalid(seconds, "should be greater than 0"), "use at least 1 second"))
    elastic = annotations.get(_ELASTIC) == "true"
    if elastic and group_kind != JOB:
        gvk = f"{_KUEUE_KINDS[group_kind][0]}, Kind={group_kind[1]}"
        out.append(Finding(("metadata", "annotations", _ELASTIC), "true", f"Forbidden: elastic job is not supported "
                           f"for {go_repr(gvk)}", "remove the annotation (Kueue's elastic jobs are batch Jobs)"))
    if group_kind == JOB:
        out += _job_annotations(obj, annotations, elastic)
    return out


def _job_annotations(obj: Mapping, annotations: Mapping, elastic: bool) -> list[Finding]:
    spec = as_map(obj.get("spec"))
    parallelism = _int(spec.get("parallelism"), 1)
    completions = spec.get("completions")
    pods = min(parallelism, completions) if is_int(completions) else parallelism
    out: list[Finding] = []
    minimum = annotations.get(_MIN_PARALLELISM)
    if isinstance(minimum, str):
        at: Path = ("metadata", "annotations", _MIN_PARALLELISM)
        value = _atoi(minimum)
        if value is None:
            out.append(Finding(at, minimum, _invalid(minimum, _atoi_error(minimum)), "use a whole number of pods"))
        elif value >= pods or value <= 0:
            out.append(Finding(at, value, _invalid(value, f"should be between 0 and {pods - 1}"),
                               "use fewer pods than the Job runs in parallel, at least 1"))
        if elastic:
            out.append(Finding(at, minimum, _invalid(minimum, "partial admission and elastic job cannot be used "
                                                              "together"), "remove one of the two annotations"))
    sync = annotations.get(_SYNC_COMPLETIONS)
    if isinstance(sync, str):
        at = ("metadata", "annotations", _SYNC_COMPLETIONS)
        enabled = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
                   "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}.get(sync)
        if enabled is None:
            out.append(Finding(at, sync, _invalid(sync, f"strconv.ParseBool: parsing {go_repr(sync)}: invalid syntax"),
                               "use true or false"))
        if enabled:
            if spec.get("completionMode") in (None, "NonIndexed"):
                out.append(Finding(at, sync, _invalid(sync, "should not be enabled for NonIndexed jobs"),
                                   "set completionMode: Indexed, or remove the annotation"))
            if parallelism != _int(completions, 1):
                out.append(Finding(("spec", "completions"), completions, _invalid(completions, "should be equal to "
                                   f"parallelism when {_SYNC_COMPLETIONS} annotation is true"),
                                   "set completions equal to parallelism"))
    return out


# --- Kubeflow Trainer ------------------------------------------------------------------------------------------------

_RUNTIMES = {"TrainingRuntime.trainer.kubeflow.org": "TrainingRuntime",
             "ClusterTrainingRuntime.trainer.kubeflow.org": "ClusterTrainingRuntime"}
_SUPPORT_LABEL = "trainer.kubeflow.org/support"
_DEPRECATION_POLICY = "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
_ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
_ANCESTOR_CONTAINERS = {"trainer": "node", "model-initializer": "model-initializer",
                        "dataset-initializer": "dataset-initializer"}


def _trainer_selects(obj: Mapping) -> bool:
    """The runtimes' validating webhooks skip objects labelled trainer.kubeflow.org/webhook-validation: disabled."""
    return _labels(obj).get("trainer.kubeflow.org/webhook-validation") != "disabled"


def _deprecated(runtime: Mapping) -> bool:
    return _labels(runtime).get(_SUPPORT_LABEL) == "deprecated"


def _trainjob_validate(obj: Mapping, store: Store) -> list[Finding]:
    """Trainer's TrainJob validator: the runtimeRef's kind must be a registered runtime, and that runtime must exist
    (a ClusterTrainingRuntime by name, a TrainingRuntime in the TrainJob's namespace)."""
    ref = dig(obj, "spec", "runtimeRef")
    group, kind, name = as_str(ref.get("apiGroup")), as_str(ref.get("kind")), as_str(ref.get("name"))
    key = f"{kind}.{group}" if group else kind
    if key not in _RUNTIMES:
        return [Finding(("spec", "runtimeRef"), dict(ref), f"unsupported runtime: {key}",
                        "use kind ClusterTrainingRuntime or TrainingRuntime of apiGroup trainer.kubeflow.org")]
    cluster = _RUNTIMES[key] == "ClusterTrainingRuntime"
    runtime = store.get(_RUNTIMES[key], "" if cluster else namespace_of(obj), name)
    if runtime is None and not (cluster and name in INSTALLED_RUNTIMES):
        plural = "clustertrainingruntimes" if cluster else "trainingruntimes"
        shown = f'v1alpha1.RuntimeRef{{Name:{go_repr(name)}, APIGroup:{go_repr(group)}, Kind:{go_repr(kind)}}}'
        detail = (f'{plural}.trainer.kubeflow.org {go_repr(name)} not found: specified '
                  f'{"clusterTrainingRuntime" if cluster else "trainingRuntime"} must be created before the TrainJob '
                  'is created')
        where = f"apply the {_RUNTIMES[key]} {name!r} before the TrainJob" + ("" if cluster else " in its namespace")
        return [Finding(("spec", "RuntimeRef" if cluster else "runtimeRef"), dict(ref), f"Invalid value: {shown}: "
                        f"{detail}", where)]
    if cluster and runtime is not None and _deprecated(runtime):
        return [Finding(("spec", "runtimeRef", "name"), name, f'Referenced ClusterTrainingRuntime "{name}" is '
                        "deprecated and will be removed in a future release of Kubeflow Trainer. See runtime "
                        f"deprecation policy: {_DEPRECATION_POLICY}", "move to a supported runtime", warning=True)]
    return []


def _runtime_validate(obj: Mapping, group_kind: tuple[str, str]) -> list[Finding]:
    """The (Cluster)TrainingRuntime validators: a replicatedJob labelled as a TrainJob step (trainer, model- or
    dataset-initializer) has 1 replica and the container that step needs (node, or the initializer's name)."""
    out: list[Finding] = []
    if group_kind == CLUSTER_TRAINING_RUNTIME and _deprecated(obj):
        name = as_str(meta(obj).get("name"))
        out.append(Finding(("metadata", "labels", _SUPPORT_LABEL), "deprecated", f'ClusterTrainingRuntime "{name}" is '
                           "deprecated and will be removed in a future release of Kubeflow Trainer. See runtime "
                           f"deprecation policy: {_DEPRECATION_POLICY}", "move TrainJobs to a supported runtime",
                           warning=True))
    for i, rjob in enumerate(as_list(dig(obj, "spec", "template", "spec").get("replicatedJobs"))):
        at: Path = ("spec", "template", "spec", "replicatedJobs", i)
        ancestor = as_map(dig(rjob, "template", "metadata").get("labels")).get(_ANCESTOR_LABEL)
        if ancestor not in _ANCESTOR_CONTAINERS:
            continue
        replicas = as_map(rjob).get("replicas", 1)
        if replicas != 1:
            out.append(Finding((*at, "replicas"), replicas, _invalid(replicas, "always must be 1"),
                               "set replicas: 1 (scale with the Job's parallelism instead)"))
        pod = dig(rjob, "template", "spec", "template", "spec")
        wanted = _ANCESTOR_CONTAINERS[ancestor]
        if not any(as_map(c).get("name") == wanted for c in as_list(pod.get("containers"))):
            out.append(Finding((*at, "template", "spec", "template", "spec", "containers"), wanted,
                               f"Invalid value: []v1.Container{{...}}: must contain the required container for the "
                               f"ancestor: {ancestor}", f"name the step's container {wanted!r}"))
    return out
