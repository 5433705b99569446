"""Kueue's topology (TAS) annotation checks on a Job's or JobSet's pod templates, part of its job webhooks'
validateCreate while the TopologyAwareScheduling feature gate is on (Beta, on by default).

Source: kubernetes-sigs/kueue ff69552e79ad21652c36caa97038382e55625cf7 (the commit `kueue/scheduler.py` reads):
pkg/controller/jobframework/tas_validation.go ValidateTASPodSetRequest (at most one of the required, preferred and
unconstrained topology annotations; each level a qualified label name; podset-group-name not a number, not beside a
slice annotation, only with a required or preferred one; unconstrained a boolean; slice size a number of at least 1;
the slice topology and slice size only together) and ValidateSliceSizeAnnotationUpperBound (the slice size at most
the podset's count); pkg/controller/jobs/job/job_webhook.go and jobs/jobset/jobset_webhook.go validateTopologyRequest
(a Job's template is `spec.template.metadata`, its count min(parallelism, completions); a JobSet's replicatedJob i,
`spec.replicatedJobs[i].template.spec.template.metadata`, its count replicas x that of its Job);
apis/kueue/v1beta2/constants.go (the annotation keys).

Knowingly not emulated: the multi-level slice constraints annotation (TASMultiLayerTopology), a JobSet's podset
groups across replicatedJobs (ValidatePodSetGroupingTopology), a TrainJob's (its pod sets come from its runtime), and
the elastic-job topology rule.
"""

from __future__ import annotations

from collections.abc import Mapping

from jaxinfra.admission.decoded import as_list, as_map, dig, is_int
from jaxinfra.admission.store import Finding, Path
from jaxinfra.admission.validation import qualified_name
from jaxinfra.admission.validation.messages import forbidden, invalid_value, omitted_value, required_value
from jaxinfra.upstream import TOPOLOGY_PREFERRED, TOPOLOGY_REQUIRED

_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
_SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
_GROUP = "kueue.x-k8s.io/podset-group-name"
_BOOLS = {"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"}  # Go's ParseBool


def _int32(value: str) -> int | None:
    """strconv.ParseInt(value, 10, 32), None where it fails."""
    body = value[1:] if value[:1] in "+-" else value
    if not body.isdigit() or not body.isascii():
        return None
    number = int(value)
    return number if -(2**31) <= number < 2**31 else None


def _count(spec: Mapping) -> int:
    """A Job's pods at once: its parallelism (1 unset), or its completions where fewer (kueue job.go podsCount)."""
    parallelism = spec.get("parallelism", 1)
    count = parallelism if is_int(parallelism) else 1
    completions = spec.get("completions")
    return min(count, completions) if is_int(completions) else count


def _podset(at: Path, annotations: Mapping, count: int, job: bool) -> list[Finding]:
    """ValidateTASPodSetRequest, then ValidateSliceSizeAnnotationUpperBound, on one pod template's annotations (for a
    Job, `job`, the bound only once the request itself is valid, as job_webhook.go returns early)."""
    out: list[Finding] = []
    where: Path = (*at, "annotations")
    fix = "keep one topology request per pod template, as Kueue's TAS documents"
    required, preferred = annotations.get(TOPOLOGY_REQUIRED), annotations.get(TOPOLOGY_PREFERRED)
    unconstrained = annotations.get(_UNCONSTRAINED)
    slice_required, slice_size = annotations.get(_SLICE_REQUIRED), annotations.get(_SLICE_SIZE)
    group = annotations.get(_GROUP)
    if sum(v is not None for v in (required, preferred, unconstrained)) > 1:
        keys = ", ".join(f'"{k}"' for k in (TOPOLOGY_REQUIRED, TOPOLOGY_PREFERRED, _UNCONSTRAINED))
        out.append(omitted_value(where, f"must not contain more than one topology annotation: [{keys}]", fix))
    for key, value in (
        (TOPOLOGY_REQUIRED, required),
        (TOPOLOGY_PREFERRED, preferred),
        (_SLICE_REQUIRED, slice_required),
    ):
        if isinstance(value, str):
            for error in qualified_name(value):
                out.append(invalid_value((*where, key), value, error, "name a node label, the topology level"))
    if isinstance(group, str):
        if group.isdigit() and group.isascii() and int(group) < 2**64:
            out.append(invalid_value((*where, _GROUP), group, "must not be a number", "name the group with a word"))
        if slice_size is not None:
            out.append(forbidden((*where, _GROUP), f"may not be set when '{_SLICE_SIZE}' is specified", fix))
        if slice_required is not None:
            out.append(forbidden((*where, _GROUP), f"may not be set when '{_SLICE_REQUIRED}' is specified", fix))
        if required is None and preferred is None:
            out.append(
                forbidden(
                    (*where, _GROUP),
                    f"may not be set when neither '{TOPOLOGY_PREFERRED}' nor '{TOPOLOGY_REQUIRED}' is specified",
                    "add a required or preferred topology beside the group",
                )
            )
    if isinstance(unconstrained, str) and unconstrained not in _BOOLS:
        out.append(invalid_value((*where, _UNCONSTRAINED), unconstrained, "must be a boolean value", 'use "true"'))
    size = _int32(slice_size) if isinstance(slice_size, str) else None
    if isinstance(slice_size, str):
        if size is None:
            out.append(invalid_value((*where, _SLICE_SIZE), slice_size, "must be a numeric value", "use a pod count"))
        elif size < 1:
            out.append(
                invalid_value((*where, _SLICE_SIZE), slice_size, "must be greater than or equal to 1", "use 1 or more")
            )
    if slice_required is not None and slice_size is None:
        out.append(
            required_value(
                (*where, _SLICE_SIZE),
                "set the pods per slice",
                f"must be set when '{_SLICE_REQUIRED}' is specified",
            )
        )
    if slice_required is None and slice_size is not None:
        out.append(
            forbidden(
                (*where, _SLICE_SIZE),
                f"may not be set when '{_SLICE_REQUIRED}' is not specified",
                "add the slice level",
            )
        )
    if out and job:
        return out
    if size is not None and size > count:
        out.append(
            invalid_value(
                (*where, _SLICE_SIZE),
                slice_size,
                f"must not be greater than pod set count {count}",
                f"use at most {count} pods per slice",
            )
        )
    return out


def tas_validate(obj: Mapping, kind: str) -> list[Finding]:
    """The topology checks of a Job (`kind` "Job") or a JobSet's replicatedJobs."""
    spec = as_map(obj.get("spec"))
    if kind == "Job":
        template = dig(spec, "template", "metadata")
        return _podset(("spec", "template", "metadata"), as_map(template.get("annotations")), _count(spec), True)
    out: list[Finding] = []
    for i, rjob in enumerate(as_list(spec.get("replicatedJobs"))):
        job_spec = dig(rjob, "template", "spec")
        replicas = as_map(rjob).get("replicas", 1)
        count = (replicas if is_int(replicas) else 1) * _count(job_spec)
        annotations = as_map(dig(job_spec, "template", "metadata").get("annotations"))
        out += _podset(
            ("spec", "replicatedJobs", i, "template", "spec", "template", "metadata"), annotations, count, False
        )
    return out
