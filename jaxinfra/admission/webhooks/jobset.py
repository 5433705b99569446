"""JobSet's admission webhooks: its Default() (`jobset_default`) and ValidateCreate() (`jobset_validate`).

Assumed configuration: JobSet's default manifests and feature gates at the commit read: InPlaceRestart and
RestartJob gates off.

Sources, each read at the commit named:
- kubernetes-sigs/jobset 08dfbdfd682714a9ab929633eca8dc95315187e7: pkg/webhooks/jobset_webhook.go (Default,
  ValidateCreate, validateFailurePolicy, validateCoordinator, validateCoordinatorLabelValue,
  validateVolumeClaimPolicies, the message constants and `failurePolicyRule%v`), pkg/util/placement/placement.go
  (child Job `<jobset>-<rjob>-<index>` and Pod `<job>-<podIndex>` names), pkg/controllers/jobset_controller.go
  (CoordinatorEndpoint, GetSubdomain), pkg/controllers/volume_claim_policy.go (PVC `<template>-<jobset>`),
  pkg/features/features.go (gate defaults), api/jobset/v1alpha2/jobset_types.go (constants),
  config/components/webhook/manifests.yaml and config/default/kustomization.yaml (names; no namespaceSelector).
- kubernetes/kubernetes staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go (008b3652959c: the DNS
  and label-value messages, among them IsDNS1035Label's length message that `TOO_LONG_63` matches).

Knowingly not emulated: JobSet's check that an existing PVC's spec equals its VolumeClaimPolicy template (defaulting
differs between the two) and its generateName suffix (the pipeline names the object first); update-time rules.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jaxinfra.admission.decoded import as_list, as_map, as_str, dig, is_int
from jaxinfra.admission.goformat import go_repr
from jaxinfra.admission.store import Finding, Path, Store, meta, namespace_of
from jaxinfra.admission.validation import dns1035_label, dns1123_subdomain, label_value
from jaxinfra.admission.webhooks.shared import child_of, int_or, invalid_text
from jaxinfra.upstream import JOBSET_COORDINATOR

MAX_INT32 = 2**31 - 1


def _go_list(values: list[int]) -> str:
    return "[" + " ".join(map(str, values)) + "]"


TOO_LONG_63 = "must be no more than 63 characters"
"""IsDNS1035Label's length message, which JobSet's webhook rewords for derived names."""


_JOB_FAILURE_REASONS = (
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
    "PodFailurePolicy",
)
_RULE_NAME = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?"
_RENAME = "shorten the JobSet or replicatedJob name; start each with a letter"


def jobset_default(obj: dict) -> None:
    """JobSet's Default(): success policy All, startup AnyOrder, Indexed Jobs whose pods restart OnFailure, DNS
    hostnames published before ready, failure-policy rules named by index, volume claims deleted with the JobSet."""
    spec = child_of(obj, "spec")
    if spec is None:
        return
    if spec.get("successPolicy") is None:
        spec["successPolicy"] = {"operator": "All"}
    if spec.get("startupPolicy") is None:
        spec["startupPolicy"] = {"startupPolicyOrder": "AnyOrder"}
    for rjob in as_list(spec.get("replicatedJobs")):
        job_spec = child_of(child_of(rjob, "template"), "spec")
        if job_spec is None:
            continue
        if job_spec.get("completionMode") is None:
            job_spec["completionMode"] = "Indexed"
        pod_spec = child_of(child_of(job_spec, "template"), "spec")
        if pod_spec is not None and not pod_spec.get("restartPolicy"):
            pod_spec["restartPolicy"] = "OnFailure"
    network = child_of(spec, "network")
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


def jobset_validate(obj: Mapping, store: Store) -> list[Finding]:
    """JobSet's ValidateCreate(), in its order."""
    spec = as_map(obj.get("spec"))
    name = as_str(meta(obj).get("name"))
    rjobs = [r if isinstance(r, Mapping) else {} for r in as_list(spec.get("replicatedJobs"))]
    failure_policy = as_map(spec.get("failurePolicy"))
    out: list[Finding] = []
    if failure_policy.get("restartStrategy") == "InPlaceRestart":
        out.append(
            Finding(
                ("spec", "failurePolicy", "restartStrategy"),
                "InPlaceRestart",
                "InPlaceRestart restart strategy cannot be set when InPlaceRestart feature gate is disabled",
                "use Recreate or BlockingRecreate (the JobSet controller's InPlaceRestart gate is off)",
            )
        )
    if rjobs and rjobs[0].get("dependsOn") is not None:
        out.append(
            Finding(
                ("spec", "replicatedJobs", 0, "dependsOn"),
                rjobs[0]["dependsOn"],
                "DependsOn can't be set for the first ReplicatedJob",
                "remove dependsOn from the first replicatedJob; later ones may depend on earlier ones",
            )
        )
    subdomain = as_str(as_map(spec.get("network")).get("subdomain"))
    if subdomain:
        at: Path = ("spec", "network", "subdomain")
        for message in dns1123_subdomain(subdomain):
            out.append(
                Finding(at, subdomain, invalid_text(subdomain, message), "use a DNS-1035 label as the subdomain")
            )
        for message in dns1035_label(subdomain):
            message = (
                ".spec.network.subdomain is too long, must be less than 63 characters"
                if TOO_LONG_63 in message
                else message
            )
            out.append(
                Finding(at, subdomain, invalid_text(subdomain, message), "use a DNS-1035 label as the subdomain")
            )
    if isinstance(spec.get("managedBy"), str):
        out += _managed_by(spec["managedBy"])
    names: set[str] = set()
    for i, rjob in enumerate(rjobs):
        out += _replicated_job(name, rjob, i, names)
    for target in as_list(as_map(spec.get("successPolicy")).get("targetReplicatedJobs")):
        if target not in names:
            out.append(
                Finding(
                    ("spec", "successPolicy", "targetReplicatedJobs"),
                    target,
                    f"invalid replicatedJob name '{target}' does not appear in .spec.ReplicatedJobs",
                    "name a replicatedJob of this JobSet",
                )
            )
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
        out.append(Finding(at, manager, invalid_text(manager, detail), fix))
    else:
        out += [Finding(at, host, invalid_text(host, m), fix) for m in dns1123_subdomain(host)]
        if not re.fullmatch(r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+", path):
            detail = "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')"
            out.append(Finding(at, path, invalid_text(path, detail), fix))
    if len(manager) > 63:
        out.append(Finding(at, manager, "Too long: may not be longer than 63", fix))
    return out


def _replicated_job(jobset: str, rjob: Mapping, i: int, names: set[str]) -> list[Finding]:
    """One replicatedJob's rules: replicas x parallelism, its group name, and the Job and Pod names JobSet derives."""
    at: Path = ("spec", "replicatedJobs", i)
    rname = as_str(rjob.get("name"))
    names.add(rname)
    replicas = int_or(rjob.get("replicas"), 1)  # the CRD's default, applied before
    job_spec = dig(rjob, "template", "spec")
    out: list[Finding] = []
    if int_or(job_spec.get("parallelism"), 1) * replicas > MAX_INT32:
        out.append(
            Finding(
                (*at, "replicas"),
                replicas,
                f"the product of replicas and parallelism must not exceed {MAX_INT32} for replicatedJob '{rname}'",
                "lower replicas or parallelism",
            )
        )
    group = as_str(rjob.get("groupName"))
    for message in dns1035_label(group):
        message = (
            ".spec.replicatedJob[].groupName is too long, must be less than 63 characters"
            if TOO_LONG_63 in message
            else message
        )
        out.append(Finding((*at, "groupName"), group, invalid_text(group, message), "use a DNS-1035 label"))
    job = f"{jobset}-{rname}-{replicas - 1}"
    for message in dns1035_label(job):
        message = (
            "JobSet name is too long, job names generated for this JobSet will exceed 63 characters"
            if TOO_LONG_63 in message
            else message
        )
        out.append(Finding((*at, "name"), job, invalid_text(job, message), _RENAME))
    completions = job_spec.get("completions")
    if job_spec.get("completionMode") == "Indexed" and is_int(completions):
        pod = f"{job}-{completions - 1}-abcde"  # the 5 random characters of the Pod's generateName
        for message in dns1035_label(pod):
            message = (
                "JobSet name is too long, pod names generated for this JobSet will exceed 63 characters"
                if TOO_LONG_63 in message
                else message
            )
            out.append(Finding((*at, "name"), job, invalid_text(job, message), _RENAME))
    for j, dependency in enumerate(as_list(rjob.get("dependsOn"))):
        other = as_str(as_map(dependency).get("name"))
        if other not in names:
            out.append(
                Finding(
                    (*at, "dependsOn", j, "name"),
                    other,
                    f"replicatedJob: {rname} cannot depend on replicatedJob: {other}",
                    "depend only on a replicatedJob listed before this one",
                )
            )
    return out


def _failure_policy(policy: Mapping, rjobs: list[Mapping], names: set[str]) -> list[Finding]:
    """validateFailurePolicy: RestartJob actions (gate off), then each rule's name, targets and reasons."""
    rules = [r if isinstance(r, Mapping) else {} for r in as_list(policy.get("rules"))]
    at: Path = ("spec", "failurePolicy", "rules")
    for i, rule in enumerate(rules):
        if rule.get("action") in ("RestartJob", "RestartJobAndIgnoreMaxRestarts"):
            return [
                Finding(
                    (*at, i, "action"),
                    rule["action"],
                    "RestartJob and RestartJobAndIgnoreMaxRestarts failure "
                    "policy actions are not allowed when RestartJob feature gate is disabled",
                    "use RestartJobSet, RestartJobSetAndIgnoreMaxRestarts or FailJobSet",
                )
            ]
    out: list[Finding] = []
    by_name: dict[str, list[int]] = {}
    for i, rule in enumerate(rules):
        name = as_str(rule.get("name"))
        if not 1 <= len(name) <= 128:
            out.append(
                Finding(
                    (*at, i, "name"),
                    name,
                    f"invalid failure policy rule name of length {len(name)}, the "
                    "rule name must be at least 1 characters long and at most 128 characters long",
                    "name the rule with 1 to 128 characters, or leave it unset to get failurePolicyRule<i>",
                )
            )
        by_name.setdefault(name, []).append(i)
        if not re.fullmatch(_RULE_NAME, name):
            out.append(
                Finding(
                    (*at, i, "name"),
                    name,
                    f"invalid failure policy rule name '{name}', a failure policy "
                    "rule name must start with an alphabetic character, optionally followed by a string of "
                    "alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'",
                    "start it with a letter; use letters, digits, '_', ',' or ':'",
                )
            )
        for target in as_list(rule.get("targetReplicatedJobs")):
            if target not in names:
                out.append(
                    Finding(
                        (*at, i, "targetReplicatedJobs"),
                        target,
                        f"invalid replicatedJob name '{target}' "
                        "in failure policy does not appear in .spec.ReplicatedJobs",
                        "name a replicatedJob of this JobSet",
                    )
                )
        for reason in as_list(rule.get("onJobFailureReasons")):
            if reason not in _JOB_FAILURE_REASONS:
                out.append(
                    Finding(
                        (*at, i, "onJobFailureReasons"),
                        reason,
                        f"invalid job failure reason '{reason}' in "
                        "failure policy is not a recognized job failure reason",
                        "use one of: " + ", ".join(_JOB_FAILURE_REASONS),
                    )
                )
    for name, indices in by_name.items():
        if len(indices) > 1:
            out.append(
                Finding(
                    (*at, indices[1], "name"),
                    name,
                    f"rule names are not unique, rules with indices "
                    f"{_go_list(indices)} all have the same name '{name}'",
                    "give each rule its own name",
                )
            )
    return out


def _coordinator(jobset: str, spec: Mapping, coordinator: Mapping, rjobs: list[Mapping]) -> list[Finding]:
    """validateCoordinator (the first problem only, as upstream) and the coordinator label value it derives."""
    at: Path = ("spec", "coordinator")
    target = as_str(coordinator.get("replicatedJob"))
    job_index, pod_index = int_or(coordinator.get("jobIndex"), 0), int_or(coordinator.get("podIndex"), 0)
    rjob = next((r for r in rjobs if r.get("name") == target), None)
    job_spec = dig(rjob, "template", "spec")
    completions = job_spec.get("completions")
    problem: tuple[Path, Any, str] | None = None
    if rjob is None:
        problem = (*at, "replicatedJob"), target, f"coordinator replicatedJob {target} does not exist"
    elif not 0 <= job_index < int_or(rjob.get("replicas"), 1):
        problem = (
            (*at, "jobIndex"),
            job_index,
            f"coordinator job index {job_index} is invalid for replicatedJob {target}",
        )
    elif job_spec.get("completionMode") != "Indexed" or not is_int(completions):
        problem = (
            (*at, "replicatedJob"),
            target,
            ("job for coordinator pod must be indexed completion mode, and completions number must be set"),
        )
    elif not 0 <= pod_index < int_or(completions, 0):
        problem = (
            (*at, "podIndex"),
            pod_index,
            (f"coordinator pod index {pod_index} is invalid for replicatedJob {target} job index {job_index}"),
        )
    out = [Finding(*problem, "point the coordinator at an existing Job and Pod index")] if problem else []
    subdomain = as_str(as_map(spec.get("network")).get("subdomain")) or jobset
    value = f"{jobset}-{target}-{job_index}-{pod_index}.{subdomain}"
    errors = label_value(value)
    if errors:
        out.append(
            Finding(
                at,
                value,
                f"spec will lead to invalid label value {go_repr(value)} for coordinator label "
                f"{go_repr(JOBSET_COORDINATOR)} (long JobSet / ReplicatedJob / SubDomain name?): "
                f"{', '.join(errors)}",
                "shorten the JobSet, replicatedJob or subdomain name",
            )
        )
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
                out.append(
                    Finding(
                        where,
                        name,
                        invalid_text(name, "names must be unique for VolumeClaimPolicies template"),
                        "give each claim template its own name",
                    )
                )
            out += [
                Finding(where, name, invalid_text(name, m), "use a DNS-1123 subdomain") for m in dns1123_subdomain(name)
            ]
            pvc = f"{name}-{jobset}"
            if len(pvc) > 63:
                out.append(
                    Finding(
                        where,
                        name,
                        invalid_text(name, "VolumeClaimPolicies template name is too long"),
                        f"shorten it: the PVC is named {pvc!r}, at most 63 characters",
                    )
                )
            out += _claim_mounts(rjobs, name)
            when = dig(policy, "retentionPolicy").get("whenDeleted")
            if store.get("PersistentVolumeClaim", namespace_of(obj), pvc) is not None and when != "Retain":
                out.append(
                    Finding(
                        (*at, "retentionPolicy", "whenDeleted"),
                        when,
                        invalid_text(when, "retentionPolicy must be retain when PVC exists"),
                        f"set whenDeleted: Retain (PVC {pvc!r} already exists)",
                    )
                )
            seen.add(name)
    return out


def _claim_mounts(rjobs: list[Mapping], claim: str) -> list[Finding]:
    out: list[Finding] = []
    mounted = False
    for i, rjob in enumerate(rjobs):
        pod = dig(rjob, "template", "spec", "template", "spec")
        for k, volume in enumerate(as_list(pod.get("volumes"))):
            if as_map(volume).get("name") == claim:
                out.append(
                    Finding(
                        ("spec", "replicatedJobs", i, "template", "spec", "template", "spec", "volumes", k, "name"),
                        claim,
                        invalid_text(claim, f"volume name conflicts with VolumeClaimPolicy template name: {claim}"),
                        "rename the volume or the claim template (JobSet adds the claim's volume itself)",
                    )
                )
        containers = as_list(pod.get("initContainers")) + as_list(pod.get("containers"))
        mounted = mounted or any(
            as_map(m).get("name") == claim for c in containers for m in as_list(as_map(c).get("volumeMounts"))
        )
    if not mounted:
        out.append(
            Finding(
                ("spec", "replicatedJobs"),
                claim,
                "Invalid value: []v1alpha2.ReplicatedJob{...}: "
                f"replicatedJob containers don't have a matching volumeMount: {claim} from "
                "VolumeClaimPolicies",
                f"mount {claim!r} (volumeMounts) in a container of a replicatedJob",
            )
        )
    return out
