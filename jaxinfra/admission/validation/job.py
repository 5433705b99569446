"""batch/v1 Job, as the API server's validation step checks it after the registry generated its selector.

Emulated from kubernetes/kubernetes pkg/apis/batch/validation/validation.go (the stored current version:
validateGeneratedSelector, ValidateJob, ValidateJobSpec, validateJobSpec, validatePodFailurePolicy(Rule...),
validateSuccessPolicy, validatePodReplacementPolicy) and the selector the registry generates
(pkg/registry/batch/job/strategy.go); spec.managedBy by staging/src/k8s.io/apimachinery/pkg/util/validation/
validation.go @008b3652959c (IsDomainPrefixedPath).

Knowingly not emulated: successPolicy's succeededIndexes grammar.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from jaxinfra.admission.decoded import as_int, as_list, as_map, as_str, entries
from jaxinfra.admission.store import Finding, Path
from jaxinfra.admission.validation.messages import (
    Raw,
    duplicate_value,
    go_list,
    invalid_each,
    invalid_value,
    nonnegative,
    not_supported,
    omitted_value,
    required_value,
    string_map,
    too_many,
)
from jaxinfra.admission.validation.meta import selector_matches, validate_selector
from jaxinfra.admission.validation.names import (
    HTTP_PATH_FMT,
    byte_size,
    dns1123_label,
    dns1123_subdomain,
    qualified_name,
    regex_error,
)
from jaxinfra.admission.validation.pod import pod_template
from jaxinfra.upstream import JOB_NAME_LABEL, JOB_NAME_LEGACY_LABEL, JOB_UID_LABEL, JOB_UID_LEGACY_LABEL

MAX_INDEXED_PARALLELISM = 100_000
MAX_FAILED_INDEXES = 100_000
COMPLETIONS_SOFT_LIMIT = 100_000
HIGH_COMPLETIONS_LIMIT = 10_000
_JOB_NAME_LABELS = (JOB_NAME_LEGACY_LABEL, JOB_NAME_LABEL)
_JOB_UID_LABELS = (JOB_UID_LEGACY_LABEL, JOB_UID_LABEL)
_UID = "<uid>"  # the Job's uid, unknown before it is stored


def _job_selector(obj: Mapping, spec: Mapping, labels: Mapping[str, str]) -> tuple[list[Finding], list[Finding]]:
    """validateGeneratedSelector (unless manualSelector), then ValidateJobSpec's selector rules; the registry
    generates the selector and the template's job-name/controller-uid labels before validation."""
    first: list[Finding] = []
    name = as_str(as_map(obj.get("metadata")).get("name"))
    selector = given = spec.get("selector")  # `given` is validated; the generated one is matched
    manual = spec.get("manualSelector") is True
    if not manual:
        generated = {**{k: name for k in _JOB_NAME_LABELS}, **{k: _UID for k in _JOB_UID_LABELS}}
        for key, expected in generated.items():
            # the registry keeps a label the user set, and validation compares it (a uid nobody can know yet)
            if key in labels and (labels[key] != expected or expected == _UID):
                first.append(
                    invalid_value(
                        ("spec", "template", "metadata", "labels", key),
                        labels,
                        f"must be '{expected}'",
                        f"drop the {key} label: the API server sets it",
                    )
                )
        labels = {**generated, **labels}
        if isinstance(selector, Mapping) and selector and not selector_matches(selector, generated):
            first.append(
                invalid_value(
                    ("spec", "selector"),
                    selector,
                    "`selector` not auto-generated",
                    "drop spec.selector (the API server generates it), or set manualSelector: true",
                )
            )
        selector = {
            "matchLabels": {_JOB_UID_LABELS[1]: _UID, **string_map(as_map(selector).get("matchLabels"))},
            "matchExpressions": as_map(selector).get("matchExpressions") or [],
        }
    last: list[Finding] = []
    if not isinstance(selector, Mapping):
        last.append(
            required_value(("spec", "selector"), "give spec.selector with manualSelector: true, or drop manualSelector")
        )
        return first, last
    last += validate_selector(given if isinstance(given, Mapping) else {}, ("spec", "selector"))
    if not selector_matches(selector, labels):
        last.append(
            invalid_value(
                ("spec", "template", "metadata", "labels"),
                dict(labels),
                "`selector` does not match template `labels`",
                "add the selector's labels to spec.template.metadata.labels",
            )
        )
    return first, last


def _pod_failure_policy(spec: Mapping, at: Path) -> list[Finding]:
    """validatePodFailurePolicy and its rules."""
    rules = list(entries(as_map(spec.get("podFailurePolicy")).get("rules")))
    tmpl = as_map(as_map(spec.get("template")).get("spec"))
    containers = {
        as_str(c.get("name")) for part in ("containers", "initContainers") for _, c in entries(tmpl.get(part))
    }
    out: list[Finding] = []
    if len(rules) > 20:
        out.append(too_many(at + ("rules",), len(rules), 20, "merge rules: at most 20"))
    actions = ("Count", "FailIndex", "FailJob", "Ignore")
    for i, rule in rules:
        where = at + ("rules", i)
        action = as_str(rule.get("action"))
        if not action:
            out.append(required_value(where + ("action",), "set the action", f"valid values: {go_list(actions)}"))
        elif action == "FailIndex":
            if spec.get("backoffLimitPerIndex") is None:
                out.append(
                    invalid_value(
                        where + ("action",),
                        action,
                        "requires the backoffLimitPerIndex to be set",
                        "set spec.backoffLimitPerIndex (Indexed Jobs)",
                    )
                )
        elif action not in actions:
            out.append(not_supported(where + ("action",), action, actions, "use Count, FailIndex, FailJob or Ignore"))
        codes = rule.get("onExitCodes")
        if isinstance(codes, Mapping):
            out += _on_exit_codes(codes, where + ("onExitCodes",), containers)
        conditions = list(entries(rule.get("onPodConditions")))
        if len(conditions) > 20:
            out.append(too_many(where + ("onPodConditions",), len(conditions), 20, "at most 20 patterns"))
        for j, pattern in conditions:
            ptype, status = as_str(pattern.get("type")), as_str(pattern.get("status"))
            out += invalid_each(
                where + ("onPodConditions", j, "type"), ptype, qualified_name(ptype), "use a condition type"
            )
            statuses = ("False", "True", "Unknown")
            if not status:
                out.append(
                    required_value(
                        where + ("onPodConditions", j, "status"),
                        'set status: "True"',
                        f"valid values: {go_list(statuses)}",
                    )
                )
            elif status not in statuses:
                out.append(
                    not_supported(
                        where + ("onPodConditions", j, "status"), status, statuses, 'use "True", "False" or "Unknown"'
                    )
                )
        if isinstance(codes, Mapping) and conditions:
            out.append(
                omitted_value(
                    where, "specifying both OnExitCodes and OnPodConditions is not supported", "split it into two rules"
                )
            )
        if not isinstance(codes, Mapping) and not conditions:
            out.append(
                omitted_value(
                    where,
                    "specifying one of OnExitCodes and OnPodConditions is required",
                    "add onExitCodes or onPodConditions",
                )
            )
    return out


def _on_exit_codes(codes: Mapping, at: Path, containers: set[str]) -> list[Finding]:
    out: list[Finding] = []
    op = as_str(codes.get("operator"))
    if not op:
        out.append(required_value(at + ("operator",), "set operator: In", f"valid values: {go_list(('In', 'NotIn'))}"))
    elif op not in ("In", "NotIn"):
        out.append(not_supported(at + ("operator",), op, ("In", "NotIn"), "use In or NotIn"))
    container = codes.get("containerName")
    if isinstance(container, str) and container not in containers:
        out.append(
            invalid_value(
                at + ("containerName",),
                container,
                "must be one of the container or initContainer names in the pod template",
                "name a container of the template",
            )
        )
    values = [v for v in as_list(codes.get("values")) if as_int(v) is not None]
    if not values:
        out.append(invalid_value(at + ("values",), values, "at least one value is required", "list the exit codes"))
    elif len(values) > 255:
        out.append(too_many(at + ("values",), len(values), 255, "list at most 255 exit codes"))
    for j, v in enumerate(values):
        if op == "In" and v == 0:
            out.append(
                invalid_value(at + ("values", j), v, "must not be 0 for the In operator", "drop 0: it is success")
            )
        if v in values[:j]:
            out.append(duplicate_value(at + ("values", j), v, "list each exit code once"))
    if values != sorted(values):
        out.append(invalid_value(at + ("values",), values, "must be ordered", "sort the exit codes"))
    return out


def _success_policy(spec: Mapping, at: Path, indexed: bool, completions: int | None) -> list[Finding]:
    policy = spec.get("successPolicy")
    if not isinstance(policy, Mapping):
        return []
    if not indexed:
        return [invalid_value(at, Raw("{...}"), "requires indexed completion mode", "set completionMode: Indexed")]
    rules = list(entries(policy.get("rules")))
    out: list[Finding] = []
    if not rules:
        out.append(
            required_value(
                at + ("rules",),
                "add a rule",
                "at least one rules must be specified when the successPolicy is specified",
            )
        )
    if len(rules) > 20:
        out.append(too_many(at + ("rules",), len(rules), 20, "at most 20 rules"))
    for i, rule in rules:
        count = as_int(rule.get("succeededCount"))
        if count is None and rule.get("succeededIndexes") is None:
            out.append(
                required_value(
                    at + ("rules", i),
                    "set succeededCount or succeededIndexes",
                    "at least one of succeededCount or succeededIndexes must be specified",
                )
            )
        if count is not None:
            out += nonnegative(at + ("rules", i, "succeededCount"), count, "use 0 or more")
            if completions is not None and count > completions:
                out.append(
                    invalid_value(
                        at + ("rules", i, "succeededCount"),
                        count,
                        f"must be less than or equal to {completions} (the number of specified completions)",
                        "lower it",
                    )
                )
    return out


def _job_spec(spec: Mapping) -> list[Finding]:
    """validateJobSpec: counts, Indexed limits, per-index backoff, policies, the template and its restartPolicy."""
    at: Path = ("spec",)
    out: list[Finding] = []
    fixes = {
        "parallelism": "use 0 or more pods",
        "completions": "use 0 or more completions",
        "activeDeadlineSeconds": "use 0 or more seconds",
        "backoffLimit": "use 0 or more retries",
        "ttlSecondsAfterFinished": "use 0 or more seconds",
        "backoffLimitPerIndex": "use 0 or more retries",
        "maxFailedIndexes": "use 0 or more indexes",
    }
    for key, fix in fixes.items():
        out += nonnegative(at + (key,), spec.get(key), fix)
    parallelism, completions = as_int(spec.get("parallelism")), as_int(spec.get("completions"))
    per_index, max_failed = spec.get("backoffLimitPerIndex"), as_int(spec.get("maxFailedIndexes"))
    if max_failed is not None and per_index is None:
        out.append(
            required_value(
                at + ("backoffLimitPerIndex",), "set backoffLimitPerIndex too", "when maxFailedIndexes is specified"
            )
        )
    managed = spec.get("managedBy")
    if isinstance(managed, str):
        out += _domain_prefixed_path(at + ("managedBy",), managed)
        if byte_size(managed) > 63:
            out.append(
                Finding(
                    at + ("managedBy",), managed, "Too long: may not be longer than 63", "use a shorter controller name"
                )
            )
    mode = spec.get("completionMode")
    indexed = mode == "Indexed"
    if isinstance(mode, str) and mode not in ("NonIndexed", "Indexed"):
        out.append(
            not_supported(at + ("completionMode",), mode, ("NonIndexed", "Indexed"), "use NonIndexed or Indexed")
        )
    if indexed:
        if spec.get("completions") is None:
            out.append(
                required_value(
                    at + ("completions",), "set completions: the number of indexes", "when completion mode is Indexed"
                )
            )
        if parallelism is not None and parallelism > MAX_INDEXED_PARALLELISM:
            out.append(
                invalid_value(
                    at + ("parallelism",),
                    parallelism,
                    f"must be less than or equal to {MAX_INDEXED_PARALLELISM} when completion mode is Indexed",
                    "run at most 100000 pods at a time",
                )
            )
        if completions is not None and max_failed is not None and max_failed > completions:
            out.append(
                invalid_value(
                    at + ("maxFailedIndexes",),
                    max_failed,
                    "must be less than or equal to completions",
                    "lower maxFailedIndexes",
                )
            )
        if max_failed is not None and max_failed > MAX_FAILED_INDEXES:
            out.append(
                invalid_value(
                    at + ("maxFailedIndexes",),
                    max_failed,
                    f"must be less than or equal to {MAX_FAILED_INDEXES}",
                    "lower maxFailedIndexes",
                )
            )
        if completions is not None and completions > COMPLETIONS_SOFT_LIMIT and per_index is not None:
            above = (
                f"must be less than or equal to {HIGH_COMPLETIONS_LIMIT} when completions are above "
                f"{COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
            )
            if max_failed is None:
                out.append(
                    required_value(
                        at + ("maxFailedIndexes",),
                        "set maxFailedIndexes (at most 10000)",
                        f"must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}",
                    )
                )
            if parallelism is not None and parallelism > HIGH_COMPLETIONS_LIMIT:
                out.append(invalid_value(at + ("parallelism",), parallelism, above, "run at most 10000 pods at a time"))
            if max_failed is not None and max_failed > HIGH_COMPLETIONS_LIMIT:
                out.append(invalid_value(at + ("maxFailedIndexes",), max_failed, above, "lower maxFailedIndexes"))
    elif mode in (None, "NonIndexed"):
        for key, value in (("backoffLimitPerIndex", as_int(per_index)), ("maxFailedIndexes", max_failed)):
            if value is not None:
                out.append(
                    invalid_value(
                        at + (key,),
                        value,
                        "requires indexed completion mode",
                        "set completionMode: Indexed, or drop it",
                    )
                )
    if isinstance(spec.get("podFailurePolicy"), Mapping):
        out += _pod_failure_policy(spec, at + ("podFailurePolicy",))
    out += _success_policy(spec, at + ("successPolicy",), indexed, completions)
    replacement = spec.get("podReplacementPolicy")
    if isinstance(replacement, str):
        with_policy = isinstance(spec.get("podFailurePolicy"), Mapping)
        allowed = ("Failed",) if with_policy else ("Failed", "TerminatingOrFailed")
        if replacement not in allowed:
            out.append(not_supported(at + ("podReplacementPolicy",), replacement, allowed, "use Failed"))
    template = as_map(spec.get("template"))
    out += pod_template(template, at + ("template",))
    restart = as_map(template.get("spec")).get("restartPolicy", "Always")
    where = at + ("template", "spec", "restartPolicy")
    if restart in ("Always", ""):
        out.append(
            required_value(
                where,
                "set spec.template.spec.restartPolicy: Never (or OnFailure); a pod's default, "
                "Always, never lets a Job finish",
                'valid values: "OnFailure", "Never"',
                restart,
            )
        )
    elif isinstance(restart, str) and restart not in ("OnFailure", "Never"):
        out.append(not_supported(where, restart, ("OnFailure", "Never"), "use Never or OnFailure"))
    elif isinstance(spec.get("podFailurePolicy"), Mapping) and restart != "Never":
        out.append(
            invalid_value(
                where,
                restart,
                'only "Never" is supported when podFailurePolicy is specified',
                "use restartPolicy: Never with a podFailurePolicy",
            )
        )
    return out


def _domain_prefixed_path(at: Path, value: str) -> list[Finding]:
    """IsDomainPrefixedPath (spec.managedBy)."""
    if not value:
        return [required_value(at, "name the controller: example.com/name")]
    host, sep, path = value.partition("/")
    if not sep or not host or not path:
        return [
            invalid_value(
                at,
                value,
                'must be a domain-prefixed path (such as "acme.io/foo")',
                "name the controller as domain/name",
            )
        ]
    out = invalid_each(at, host, dns1123_subdomain(host), "use a DNS domain before the '/'")
    if not re.fullmatch(HTTP_PATH_FMT, path):
        out.append(invalid_value(at, path, regex_error("Invalid path", HTTP_PATH_FMT), "use URL path characters"))
    return out


def validate_job(obj: Mapping) -> list[Finding]:
    """ValidateJob (after the registry generated the selector): selector, spec, and the longest pod hostname of
    an Indexed Job."""
    spec = as_map(obj.get("spec"))
    template = as_map(spec.get("template"))
    labels = string_map(as_map(template.get("metadata")).get("labels"))
    first, last = _job_selector(obj, spec, labels)
    name = as_str(as_map(obj.get("metadata")).get("name"))
    if spec.get("manualSelector") is not True:  # the template is validated with the job-name labels added
        generated = {**labels, **{k: name for k in _JOB_NAME_LABELS if k not in labels}}
        meta = {**as_map(template.get("metadata")), "labels": generated}
        spec = {**spec, "template": {**template, "metadata": meta}}
    out = first + _job_spec(spec) + last
    completions = as_int(spec.get("completions"))
    if spec.get("completionMode") == "Indexed" and completions and completions > 0 and name:
        hostname = f"{name}-{completions - 1}"
        if dns1123_label(hostname):
            out.append(
                invalid_value(
                    ("metadata", "name"),
                    name,
                    f"will not able to create pod with invalid DNS label: {hostname}",
                    "shorten the Job name: its pods' hostnames add -<index>",
                )
            )
    return out
