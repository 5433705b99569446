"""Pod Security admission as the API server's built-in PodSecurity plugin applies it: the namespace's
`pod-security.kubernetes.io/*` labels pick a level and version per mode; a Pod that violates the `enforce` level is
refused, and a Pod or a workload with a pod template that violates `warn` gets a warning (a workload is never refused:
only the pods its controller creates are). Emulated so that `jaxinfra` refuses what a real cluster refuses, in the
cluster's own words, before anything is applied.

The package follows upstream's layout (k8s.io/pod-security-admission):
- levels.py (api/): the levels, versions and the six namespace labels; `levels`, `Levels`, `label_errors`.
- checks.py (policy/): every check, the `CHECKS` table, `NEWEST`, and their evaluation: `violations`.
- this module (admission/): the plugin's decision: `admit`, `refusal`, `warning`, `pod_template`, `Exemptions`.

Upstream, read at kubernetes/pod-security-admission (the published copy of kubernetes/kubernetes
staging/src/k8s.io/pod-security-admission) commit 8f84a87c7f617f64a4ddc1aea24aeeb7a2e07cb8:
- api/helpers.go: LevelVersion's "level:version" (in the refusal and the warning).
- admission/admission.go: the kinds whose pod template is checked (DefaultPodSpecExtractor), ValidatePod (exempt
  namespace, exempt runtimeClassName, enforce refused as `violates PodSecurity "level:version": ...`; warnings only
  when not refused), ValidatePodController (only warn and audit, never refused), ValidateNamespace (invalid labels
  refuse a Namespace's create).
- admission/response.go: the refusal is apimachinery's NewForbidden for resource "pods" (kubernetes/apimachinery
  eed236ceee2c19c2753a3d93ac0631dc20750454 pkg/api/errors/errors.go: `pods "<name>" is forbidden: <text>`; the
  pipeline adds that prefix); a Namespace with bad labels is NewInvalid.
- kubernetes/kubernetes 03f370be3e5a65dc09ad49d9fd65a6ba059b46d0 plugin/pkg/admission/security/podsecurity/
  admission.go: the plugin only looks at pods, namespaces and the extractor's kinds -- custom resources (JobSet,
  TrainJob, ...) are never checked; their Jobs and Pods are, when their controllers create them.

Not emulated: audit (its verdict only goes to the audit log), usernames in exemptions (no users here), pod updates
(isSignificantPodUpdate), pod subresources, the warnings a Namespace update gets about pods already in it, the
warning on creating an exempt Namespace, and an API server older than these checks (its "latest" would be its own
version).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jaxinfra.admission.decoded import as_map
from jaxinfra.admission.goformat import go_quote
from jaxinfra.admission.pod_security.checks import CHECKS, NEWEST, failed_checks, violations
from jaxinfra.admission.pod_security.levels import (
    AUDIT,
    AUDIT_VERSION,
    BASELINE,
    ENFORCE,
    ENFORCE_VERSION,
    LABEL_PREFIX,
    LATEST,
    PRIVILEGED,
    RESTRICTED,
    WARN,
    WARN_VERSION,
    Levels,
    label_errors,
    levels,
    parse_level,
    parse_version,
    version_text,
)
from jaxinfra.admission.pod_security.podspec import Check, Revision, is_set
from jaxinfra.admission.store import Finding, Path, meta, namespace_of

__all__ = [
    "LABEL_PREFIX",
    "ENFORCE",
    "ENFORCE_VERSION",
    "AUDIT",
    "AUDIT_VERSION",
    "WARN",
    "WARN_VERSION",
    "PRIVILEGED",
    "BASELINE",
    "RESTRICTED",
    "LATEST",
    "Levels",
    "Check",
    "Revision",
    "CHECKS",
    "NEWEST",
    "Exemptions",
    "levels",
    "label_errors",
    "violations",
    "refusal",
    "warning",
    "pod_template",
    "admit",
]


def _level_version(level: str, version: str) -> str:
    return go_quote(f"{parse_level(level)[0]}:{version_text(parse_version(version)[0])}")


def refusal(level: str, version: str, reasons: list[str]) -> str:
    """The enforce refusal's text (the API server prefixes it with `pods "<name>" is forbidden: `)."""
    return f"violates PodSecurity {_level_version(level, version)}: {', '.join(reasons)}"


def warning(level: str, version: str, reasons: list[str]) -> str:
    """The warn mode's warning, for a Pod that is admitted or a workload whose pod template violates the level."""
    return f"would violate PodSecurity {_level_version(level, version)}: {', '.join(reasons)}"


# --- the plugin ------------------------------------------------------------------------------------------------------

_TEMPLATE_PATHS: dict[str, Path] = {
    "PodTemplate": ("template",),
    "ReplicationController": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}
"""DefaultPodSpecExtractor's kinds and where each keeps its pod template (custom resources are not checked)."""


def pod_template(obj: Mapping) -> tuple[Path, Mapping, Mapping] | None:
    """Where the pod spec is, and the pod's metadata and spec, for a Pod or a kind upstream extracts a template from;
    None for any other kind, or a template that is absent (a nil template is skipped upstream)."""
    kind = obj.get("kind")
    if kind == "Pod":
        return ("spec",), meta(obj), as_map(obj.get("spec"))
    if not isinstance(kind, str) or kind not in _TEMPLATE_PATHS:
        return None
    node: Any = obj
    for key in _TEMPLATE_PATHS[kind]:
        node = as_map(node).get(key)
    if not is_set(node):
        return None
    return _TEMPLATE_PATHS[kind] + ("spec",), as_map(node.get("metadata")), as_map(node.get("spec"))


@dataclass(frozen=True)
class Exemptions:
    """The AdmissionConfiguration's exemptions (none by default, as on a cluster without one)."""

    namespaces: frozenset[str] = frozenset()
    runtime_classes: frozenset[str] = frozenset()


def _fix(failed: list[tuple[Check, str]], tail: str) -> str:
    return "; ".join([c.fix for c, _ in failed] + [tail])


def admit(obj: Mapping, namespace_labels: Mapping[str, str], exemptions: Exemptions = Exemptions()) -> list[Finding]:
    """The plugin's verdict on creating `obj` in a namespace with `namespace_labels`: a Namespace with labels it
    cannot parse is refused; a Pod violating `enforce` is refused; a Pod (when admitted) or a workload with a pod
    template violating `warn` gets a warning. Every other kind passes untouched."""
    if obj.get("kind") == "Namespace":
        return label_errors(meta(obj).get("labels") or {})
    found = pod_template(obj)
    if found is None or namespace_of(obj) in exemptions.namespaces:
        return []
    at, pod_meta, pod_spec = found
    runtime_class = pod_spec.get("runtimeClassName")
    if isinstance(runtime_class, str) and runtime_class in exemptions.runtime_classes:
        return []
    policy = levels(namespace_labels)
    if obj.get("kind") == "Pod":
        lvl, ver, failed = failed_checks(policy.enforce, policy.enforce_version, pod_meta, pod_spec)
        if failed:
            return [
                Finding(
                    at,
                    f"{lvl}:{ver}",
                    refusal(lvl, ver, [t for _, t in failed]),
                    _fix(failed, f"or create the pod in a namespace whose {ENFORCE} label allows it"),
                )
            ]
    lvl, ver, failed = failed_checks(policy.warn, policy.warn_version, pod_meta, pod_spec)
    if not failed:
        return []
    return [
        Finding(
            at,
            f"{lvl}:{ver}",
            warning(lvl, ver, [t for _, t in failed]),
            _fix(failed, f"admitted: {WARN} only warns, {ENFORCE} at this level refuses the pods themselves"),
            warning=True,
        )
    ]
