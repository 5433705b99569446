"""The Job controller (kubernetes pkg/controller/job: job_controller.go manageJob, indexed_job_utils.go)
and the Job API's strategy (pkg/apis/batch/validation: the selector labels the API server puts on
the pod template): an Indexed Job's pods, their names, hostnames, index labels and annotations,
and the JOB_COMPLETION_INDEX env it appends."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jaxinfra.admission import naming
from jaxinfra.errors import Problem
from jaxinfra.upstream import (
    COMPLETION_INDEX,
    INDEX_FAILURE_COUNT,
    JOB_COMPLETION_INDEX,
    JOB_NAME_LABEL,
    JOB_NAME_LEGACY_LABEL,
    JOB_UID_LABEL,
    JOB_UID_LEGACY_LABEL,
    MIN_PARALLELISM_ANNOTATION,
)
from jaxinfra_sim.controllers.base import SUPPORTED, ChildJob, Draft, Identity, counts, reference, restart_policy
from jaxinfra_sim.core import model
from jaxinfra_sim.core.inputs import Objects, fake_uid, meta, namespace_of, oid, strings, to_int


def indexed_job(obj: Mapping[str, Any], objects: Objects) -> Draft | Problem:
    """A batch/v1 Job. Only an Indexed Job gives its pods a completion index and a stable hostname, which a JAX group
    needs; a NonIndexed one (the Job API's default) runs its pods too, as interchangeable completions."""
    spec, name, ns = obj.get("spec") or {}, meta(obj).get("name", ""), namespace_of(obj)
    mode = spec.get("completionMode", "NonIndexed")
    indexed = mode == "Indexed"
    template = spec.get("template") or {}
    completions, parallelism, jax_problems = counts(spec, f"{oid(obj)} spec", indexed)
    if not indexed:
        jax_problems.insert(
            0,
            Problem(
                oid(obj),
                f"completionMode: {mode}",
                "a NonIndexed Job gives its pods no completion index and no stable hostname, so JAX processes "
                f"cannot find rank 0 or know their rank; supported: {SUPPORTED}",
                "set spec.completionMode: Indexed with completions = parallelism = number of processes",
            ),
        )
    uid = meta(obj).get("uid") or fake_uid("Job", ns, name)
    job = ChildJob(
        name,
        uid,
        0,
        completions,
        parallelism,
        strings(meta(template).get("labels")),
        strings(meta(template).get("annotations")),
        template.get("spec") or {},
        (template.get("spec") or {}).get("subdomain"),
        spec.get("backoffLimitPerIndex") is not None,
        indexed=indexed,
    )
    return Draft(
        "Job",
        ns,
        name,
        [job],
        restart_policy(spec),
        owner=reference(obj, uid),
        success=success_policy(spec, completions) if indexed else (),
        jax_problems=jax_problems,
        min_parallelism=_min_parallelism(obj),
    )


def _min_parallelism(obj: Mapping[str, Any]) -> int | None:
    """Kueue's partial admission (kueue pkg/controller/jobs/job `minPodsCount`): the annotation as an integer, else
    None; Kueue's Job webhook refuses a value that is not one or not below the pods that run at once."""
    raw = strings(meta(obj).get("annotations")).get(MIN_PARALLELISM_ANNOTATION, "")
    return int(raw) if raw.strip().lstrip("-").isdigit() else None


def success_policy(spec: Mapping[str, Any], completions: int) -> tuple[model.Success, ...]:
    """An Indexed Job's successPolicy (pkg/controller/job/success_policy.go matchSuccessPolicy): the Job completes
    (reason SuccessPolicy) once any rule is met — every index of its `succeededIndexes` succeeded, or
    `succeededCount` of them (of all indexes where it names none); its pods still running are then deleted."""
    out: list[model.Success] = []
    for i, rule in enumerate((spec.get("successPolicy") or {}).get("rules") or []):
        indexes = _index_set(str(rule.get("succeededIndexes") or ""), completions) or list(range(completions))
        needed = to_int(rule.get("succeededCount"), 0) or len(indexes)
        words = " and ".join(
            f"{k} {rule[k]}" for k in ("succeededIndexes", "succeededCount") if rule.get(k) is not None
        )
        out.append(model.Success(tuple((k,) for k in indexes), needed, f"successPolicy rule {i} ({words})"))
    return tuple(out)


def _index_set(text: str, completions: int) -> list[int]:
    """`0,2-4`, as the Job API writes an index set (the API server has validated it), within [0, completions)."""
    out: list[int] = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        out += range(int(low), min(int(high or low), completions - 1) + 1)
    return out


def generate_name(job: str, index: int) -> str:
    """An Indexed Job pod's generateName: `<job>-<index>-` (the Job controller's podGenerateNameWithIndex), its job
    name trimmed so that the API server's 5 random characters still fit."""
    tail = f"-{index}-"
    prefix = f"{job}{tail}"
    if len(prefix) > naming.GENERATED_NAME_MAX:
        prefix = prefix[: naming.GENERATED_NAME_MAX - len(tail)] + tail
    return prefix


def pod_name(job: str, index: int, seed: str) -> str:
    """An Indexed Job pod's name: its `generate_name` plus the API server's 5 random characters, here
    drawn from `seed`: reproducible, yet new for a recreated pod. Not the hostname, which a
    script that uses metadata.name as an address finds out on a cluster, and here."""
    return generate_name(job, index) + naming.suffix(seed)


def controller_env(container: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The Job controller appends JOB_COMPLETION_INDEX (a fieldRef to the index label) to every container of an
    Indexed Job unless it is already declared. Appended last, so earlier `$(JOB_COMPLETION_INDEX)` references in env
    do NOT expand (kubelet order); command/args do see it."""
    if any(e.get("name") == JOB_COMPLETION_INDEX for e in container.get("env") or []):
        return []
    return [
        {
            "name": JOB_COMPLETION_INDEX,
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{COMPLETION_INDEX}']"}},
        }
    ]


def selector_labels(job: ChildJob) -> dict[str, str]:
    """The labels the Job API's strategy adds to an Indexed Job's pod template (its generated selector's and the
    name)."""
    return {
        JOB_UID_LABEL: job.uid,
        JOB_UID_LEGACY_LABEL: job.uid,
        JOB_NAME_LABEL: job.name,
        JOB_NAME_LEGACY_LABEL: job.name,
    }


def identity(job: ChildJob, index: int, recreated: int) -> Identity:
    """The index-th pod of an Indexed Job: the Job API strategy's selector labels; the Job controller's index label
    and annotation, hostname `<job>-<index>` (always, for Indexed Jobs) and pod name `<job>-<index>-<random>`
    (new after each of `recreated` recreations), and the JOB_COMPLETION_INDEX it appends. A NonIndexed Job's pod has
    none of these: a generated name, which is its hostname."""
    if not job.indexed:  # generateName `<job>-` (job_controller.go manageJob); the kubelet's hostname is the name
        name = naming.generate(f"{job.name}-", f"{job.uid}/{index}/{recreated}")
        labels = {**job.pod_labels, **selector_labels(job)}
        return Identity(name, name, labels, dict(job.pod_annotations), [], f"{job.name}-")
    labels = {**job.pod_labels, **selector_labels(job), COMPLETION_INDEX: str(index)}
    annotations = {**job.pod_annotations, COMPLETION_INDEX: str(index)}
    if job.backoff_limit_per_index:
        annotations[INDEX_FAILURE_COUNT] = "0"
    return Identity(
        pod_name(job.name, index, f"{job.uid}/{index}/{recreated}"),
        f"{job.name}-{index}",
        labels,
        annotations,
        controller_env(job.container),
        generate_name(job.name, index),
    )
