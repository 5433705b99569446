"""The JobSet controller and webhooks: one Indexed Job per replicatedJob replica, named
`<jobset>-<replicatedJob>-<index>`, the labels and annotations it stamps on Jobs and pods, the
headless Service it creates, and failurePolicy.maxRestarts.

Source: kubernetes-sigs/jobset @ 08dfbdfd (the commit of jaxinfra/schemas/README.md):
pkg/controllers/jobset_controller.go (constructJob, labelAndAnnotateObject,
createHeadlessSvcIfNecessary, GetSubdomain, globalJobIndex, jobHashKey, createJobs: a refused create is the
JobCreationFailed event of pkg/constants/constants.go), volume_claim_policy.go,
pkg/webhooks/jobset_webhook.go (Default), pkg/webhooks/pod_webhook.go (Default),
api/jobset/v1alpha2/jobset_types.go (label keys, kubebuilder defaults).

The child Jobs are created through the API server's front door (`jaxinfra.admission.admit_created`), as on a
cluster: the JobSet webhook does not look into their templates, the Job API's defaulting and validation do
(kubernetes pkg/apis/batch/v1/defaults.go SetDefaults_Job, pkg/apis/batch/validation/validation.go ValidateJob).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from jaxinfra.admission import admit_created
from jaxinfra.errors import Problem
from jaxinfra.upstream import (
    BATCH_API,
    EXCLUSIVE_TOPOLOGY,
    JOBSET_COORDINATOR,
    JOBSET_GLOBAL_REPLICAS,
    JOBSET_GROUP_INDEX,
    JOBSET_GROUP_NAME,
    JOBSET_GROUP_REPLICAS,
    JOBSET_JOB_GLOBAL_INDEX,
    JOBSET_JOB_INDEX,
    JOBSET_JOB_KEY,
    JOBSET_NAME_LABEL,
    JOBSET_NODE_SELECTOR,
    JOBSET_PRIORITY,
    JOBSET_REPLICAS,
    JOBSET_RESTART,
    JOBSET_RJOB,
    JOBSET_UID,
)
from jaxinfra_sim.apiserver.api_errors import api_error
from jaxinfra_sim.controllers.base import (
    SUPPORTED,
    ChildJob,
    Draft,
    counts,
    positions,
    reference,
    restart_policy,
)
from jaxinfra_sim.core import model
from jaxinfra_sim.core.events import Reason
from jaxinfra_sim.core.inputs import Objects, Service, fake_uid, meta, namespace_of, oid, strings, to_int


def _jobset_stamp(
    js: Mapping[str, Any],
    uid: str,
    rjob: Mapping[str, Any],
    job_index: int,
    global_index: int,
    group_index: int,
    group_replicas: int,
    global_replicas: int,
    restarts: int,
) -> dict[str, str]:
    """The keys labelAndAnnotateObject puts on child Jobs and their pods (as labels and as annotations)."""
    ns, name, rjob_name = namespace_of(js), meta(js).get("name", ""), rjob.get("name", "")
    job_name = f"{name}-{rjob_name}-{job_index}"
    stamp = {
        JOBSET_NAME_LABEL: name,
        JOBSET_UID: uid,
        JOBSET_RJOB: rjob_name,
        JOBSET_RESTART: str(restarts),
        JOBSET_REPLICAS: str(to_int(rjob.get("replicas"), 1)),
        JOBSET_GLOBAL_REPLICAS: str(global_replicas),
        JOBSET_JOB_INDEX: str(job_index),
        JOBSET_JOB_KEY: hashlib.sha1(f"{ns}/{job_name}".encode()).hexdigest(),
        JOBSET_JOB_GLOBAL_INDEX: str(global_index),
        JOBSET_GROUP_NAME: rjob.get("groupName") or "default",
        JOBSET_GROUP_REPLICAS: str(group_replicas),
        JOBSET_GROUP_INDEX: str(group_index),
    }
    coordinator = (js.get("spec") or {}).get("coordinator")
    if coordinator:
        stamp[JOBSET_COORDINATOR] = (
            f"{name}-{coordinator.get('replicatedJob')}-{to_int(coordinator.get('jobIndex'), 0)}-"
            f"{to_int(coordinator.get('podIndex'), 0)}.{_jobset_subdomain(js)}"
        )
    return stamp


def _jobset_subdomain(js: Mapping[str, Any]) -> str:
    return str(((js.get("spec") or {}).get("network") or {}).get("subdomain") or meta(js).get("name", ""))


def _jobset_exclusive(js: Mapping[str, Any], rjob: Mapping[str, Any]) -> dict[str, str]:
    """Exclusive-placement annotations copied from the JobSet or the replicatedJob template (annotations only)."""
    out: dict[str, str] = {}
    for source in (meta(js).get("annotations") or {}, meta(rjob.get("template") or {}).get("annotations") or {}):
        if EXCLUSIVE_TOPOLOGY in source:
            out[EXCLUSIVE_TOPOLOGY] = source[EXCLUSIVE_TOPOLOGY]
            if JOBSET_NODE_SELECTOR in source:
                out[JOBSET_NODE_SELECTOR] = source[JOBSET_NODE_SELECTOR]
    return out


def _priority(pod_spec: Mapping[str, Any], objects: Objects) -> str:
    """spec.priority as the Priority admission plugin resolves it (0 without a known class)."""
    if isinstance(pod_spec.get("priority"), int):
        return str(pod_spec["priority"])
    return str(objects.priority_classes.get(pod_spec.get("priorityClassName") or "", 0))


def _claim_templates(spec: Mapping[str, Any]) -> list[str]:
    """The names of the JobSet's volumeClaimPolicies templates: one PVC `<template>-<jobset>` each
    (volume_claim_policy.go createPVCsIfNecessary, GeneratePVCName)."""
    return [
        str((t.get("metadata") or {}).get("name", ""))
        for policy in spec.get("volumeClaimPolicies") or []
        for t in policy.get("templates") or []
    ]


def _with_claims(pod_spec: dict[str, Any], templates: list[str], jobset: str) -> dict[str, Any]:
    """The pod spec with a volume for each claim template one of its containers (or init containers) mounts, as the
    controller adds them to each child Job (volume_claim_policy.go addVolumes, hasVolumeMount)."""
    mounted = {
        str(m.get("name"))
        for key in ("containers", "initContainers")
        for c in pod_spec.get(key) or []
        for m in c.get("volumeMounts") or []
    }
    added = [{"name": t, "persistentVolumeClaim": {"claimName": f"{t}-{jobset}"}} for t in templates if t in mounted]
    return {**pod_spec, "volumes": [*(pod_spec.get("volumes") or []), *added]} if added else pod_spec


def _positions(jobs: list[ChildJob]) -> list[tuple[str, tuple[int, ...]]]:
    """Each child Job's replicatedJob and its pods' positions in the workload (`base.positions`)."""
    return [(job.pod_labels.get(JOBSET_RJOB, ""), pods) for job, pods in positions(jobs)]


def _gates(spec: Mapping[str, Any], rjobs: list[Mapping[str, Any]], jobs: list[ChildJob]) -> tuple[model.Gate, ...]:
    """When each replicatedJob's Jobs are created (jobset_controller.go reconcile, depends_on.go
    dependencyReachedStatus, startup_policy.go allReplicasStarted): with `dependsOn`, once every Job of each
    replicatedJob it names is Complete (succeeded) or Ready (its ready and succeeded pods reach its parallelism, or it
    failed); with `startupPolicy: InOrder`, once every Job of the replicatedJob before it is Ready, in order. The
    webhook has already refused a dependsOn that names no earlier replicatedJob."""
    by_rjob: dict[str, list[tuple[int, ...]]] = {}
    for rjob, pods in _positions(jobs):
        by_rjob.setdefault(rjob, []).append(pods)
    gates = []
    in_order = (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
    names = [str(r.get("name", "")) for r in rjobs]
    for i, r in enumerate(rjobs):
        pods = tuple(p for job in by_rjob.get(names[i], []) for p in job)
        for dep in r.get("dependsOn") or []:
            name, status = str(dep.get("name", "")), str(dep.get("status", ""))
            gates.append(model.Gate(pods, tuple(by_rjob.get(name, [])), status, f"dependsOn {name}: {status}"))
        if in_order and i:
            before = tuple(by_rjob.get(names[i - 1], []))
            gates.append(model.Gate(pods, before, "Ready", f"startupPolicy InOrder: after {names[i - 1]} is Ready"))
    return tuple(g for g in gates if g.pods)


def _success_policy(
    spec: Mapping[str, Any], rjobs: list[Mapping[str, Any]], jobs: list[ChildJob]
) -> model.Success | None:
    """successPolicy (webhook default: operator All over every replicatedJob): the JobSet completes once Any one
    child Job of the target replicatedJobs has completed, or All of them (success_policy.go:
    jobMatchesSuccessPolicy, numJobsExpectedToSucceed); None where that is every pod of every Job, the runner's
    own rule. Each child Job's pods are its positions in the workload: placed Job by Job, in `jobs` order."""
    policy = spec.get("successPolicy") or {}
    operator, targets = policy.get("operator") or "All", [str(t) for t in policy.get("targetReplicatedJobs") or []]
    names = [str(r.get("name", "")) for r in rjobs]
    if operator == "All" and (not targets or set(names) <= set(targets)):
        return None
    matched = tuple(pods for rjob, pods in _positions(jobs) if not targets or rjob in targets)
    return model.Success(
        matched,
        1 if operator == "Any" else len(matched),
        f"successPolicy {operator} of {', '.join(targets) if targets else 'every replicatedJob'}",
    )


def _create(
    js: Mapping[str, Any],
    owner: Mapping[str, str],
    rjob: Mapping[str, Any],
    pod_spec: Mapping[str, Any],
    subdomain: str | None,
    stamped: Sequence[tuple[str, Mapping[str, str], Mapping[str, str]]],
    objects: Objects,
) -> Mapping[str, Any] | Problem:
    """A replicatedJob's Jobs as constructJob builds them (`stamped`: each one's name, labels and annotations, which it
    puts on the Job and its pod template; the claims' volumes and the subdomain in the pod spec; the JobSet their
    controlling owner), created through the API server's front door against the applied objects. They differ only in
    name and index labels, so the first stands for all unless a ResourceQuota counts them one by one (as
    `admission.pod_refusals` does for pods). The first one's spec as stored (defaulted), or the controller's
    JobSet event when the API server refuses one: then none of the replicatedJob's Jobs exists, so the JobSet
    never runs."""
    ns, template = namespace_of(js), (rjob.get("template") or {}).get("spec") or {}
    pod_template = template.get("template") or {}
    counted = any(objects.store.of_kind("ResourceQuota", ns))
    jobs: list[dict[str, Any]] = [
        {
            "apiVersion": BATCH_API,
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": {**strings(meta(rjob.get("template") or {}).get("labels")), **labels},
                "annotations": {**strings(meta(rjob.get("template") or {}).get("annotations")), **annotations},
                "ownerReferences": [{**owner, "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": {
                **template,
                "template": {
                    **pod_template,
                    "metadata": {**meta(pod_template), "labels": dict(labels), "annotations": dict(annotations)},
                    "spec": {**pod_spec, **({"subdomain": subdomain} if subdomain else {})},
                },
            },
        }
        for name, labels, annotations in (stamped if counted else stamped[:1])
    ]
    created = admit_created(jobs, objects.store, "the JobSet controller")
    for job, (stored, findings) in zip(jobs, created):
        if stored is None:
            refused = [f for f in findings if not f.warning]
            name = meta(job)["name"]
            said = api_error("jobs.batch", "Job.batch", name, refused)
            return Problem(
                f"{oid(js)} replicatedJobs[{rjob.get('name')}]",
                name,
                f"the API server refuses the JobSet controller's Job (event {Reason.JOB_CREATION_FAILED}), so "
                f"replicatedJob {rjob.get('name')} has no Jobs and the JobSet never runs: {said}",
                refused[0].fix,
            )
    return created[0][0]["spec"] if created and created[0][0] is not None else {}


def jobset(obj: Mapping[str, Any], objects: Objects) -> Draft | Problem:
    """A JobSet: one Indexed Job per replicatedJob replica, named `<js>-<rjob>-<jobIndex>`."""
    spec, name, ns = obj.get("spec") or {}, meta(obj).get("name", ""), namespace_of(obj)
    network = spec.get("network") or {}
    dns = network.get("enableDNSHostnames", True) is not False  # webhook default: true
    subdomain = _jobset_subdomain(obj) if dns else None
    uid = meta(obj).get("uid") or fake_uid("JobSet", ns, name)  # once: a JobSet may stamp a million child Jobs
    rjobs = spec.get("replicatedJobs") or []
    replicas = [to_int(r.get("replicas"), 1) for r in rjobs]
    groups: Counter[str] = Counter()
    for r, n in zip(rjobs, replicas):
        groups[r.get("groupName") or "default"] += n
    jobs: list[ChildJob] = []
    problems: list[Problem] = []
    jax_problems: list[Problem] = []
    seen_groups: Counter[str] = Counter()
    claim_templates = _claim_templates(spec)
    made = 0  # the Jobs of the replicatedJobs before this one: its global job index starts there
    for r, n in zip(rjobs, replicas):
        job_spec = (r.get("template") or {}).get("spec") or {}
        mode = job_spec.get("completionMode", "Indexed")  # webhook default: Indexed
        where = f"{oid(obj)} replicatedJobs[{r.get('name')}]"
        if mode != "Indexed":
            return Problem(
                where,
                f"completionMode: {mode}",
                f"NonIndexed child Jobs have no stable hostnames or ranks; supported: {SUPPORTED}",
                "remove completionMode (JobSet defaults it to Indexed)",
            )
        pod_template = job_spec.get("template") or {}
        pod_spec = _with_claims(dict(pod_template.get("spec") or {}), claim_templates, name)
        group = r.get("groupName") or "default"
        stamped: list[tuple[str, dict[str, str], dict[str, str]]] = []
        for j in range(n):
            stamp = _jobset_stamp(
                obj, uid, r, j, made + j, seen_groups[group], groups[group], sum(replicas), objects.restarts
            )
            seen_groups[group] += 1
            labels = {**strings(meta(pod_template).get("labels")), **stamp}
            annotations = {**strings(meta(pod_template).get("annotations")), **stamp, **_jobset_exclusive(obj, r)}
            stamped.append((f"{name}-{r.get('name', '')}-{j}", labels, annotations))
        made += n
        stored = _create(obj, reference(obj, uid), r, pod_spec, subdomain, stamped, objects)
        if isinstance(stored, Problem):
            problems.append(stored)
            continue
        completions, parallelism, not_jax = counts(stored, f"{where}.template.spec")
        jax_problems += not_jax
        pod_spec = (stored.get("template") or {}).get("spec") or pod_spec
        for j, (child, labels, annotations) in enumerate(stamped):
            if JOBSET_NODE_SELECTOR not in annotations:  # pod webhook: priority label
                labels[JOBSET_PRIORITY] = _priority(pod_spec, objects)
            jobs.append(
                ChildJob(
                    child,
                    fake_uid("Job", ns, child),
                    j,
                    completions,
                    parallelism,
                    labels,
                    annotations,
                    pod_spec,
                    subdomain if dns else pod_spec.get("subdomain"),
                    job_spec.get("backoffLimitPerIndex") is not None,
                )
            )
    services = []
    if (
        subdomain is not None
    ):  # enableDNSHostnames; createHeadlessSvcIfNecessary: only when no Service of that name exists in the namespace
        services.append(
            Service(
                ns,
                subdomain,
                {JOBSET_NAME_LABEL: name},
                True,
                network.get("publishNotReadyAddresses", True) is not False,
                (),
                f"JobSet/{ns}/{name} (headless Service created by the JobSet controller)",
            )
        )
    success = _success_policy(spec, rjobs, jobs)
    failure = spec.get("failurePolicy") or {}
    restart = model.RestartPolicy(
        "jobset",
        max_restarts=to_int(failure.get("maxRestarts"), 0),
        jobset_rules=tuple(failure.get("rules") or ()),
        failure_policy="failurePolicy" in spec and spec["failurePolicy"] is not None,
        child_jobs=tuple(
            (str(r.get("name", "")), restart_policy((r.get("template") or {}).get("spec") or {})) for r in rjobs
        ),
    )
    return Draft(
        "JobSet",
        ns,
        name,
        jobs,
        restart,
        services,
        problems,
        reference(obj, uid),
        success=(success,) if success is not None else (),
        gates=_gates(spec, rjobs, jobs),
        claims=tuple((ns, f"{t}-{name}") for t in claim_templates),
        jax_problems=jax_problems,
    )
