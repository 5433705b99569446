"""Pod Security's registry (upstream's policy/registry.go and policy/checks.go): every check of `baseline.py` and
`restricted.py` in `CHECKS`, and their evaluation at a level and version (`violations`).

Upstream, read at kubernetes/pod-security-admission (the published copy of kubernetes/kubernetes
staging/src/k8s.io/pod-security-admission) commit 8f84a87c7f617f64a4ddc1aea24aeeb7a2e07cb8:
- policy/registry.go: the checks of a level at a version -- a check's newest revision whose minimum version is at most
  the version asked; "latest" and any version past the newest revision read as that newest version; restricted is
  its own checks plus the baseline checks its revisions at that version do not override; evaluation order is the
  baseline IDs sorted, then the restricted IDs sorted (bytewise). `CHECKS` is in that order.
- policy/checks.go: a result is "reason (detail)", or "reason" without detail; results are joined with ", ".
- policy/helpers.go, policy/visitor.go: `podspec.py`; policy/check_*.go: `baseline.py`, `restricted.py`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from jaxinfra.admission.decoded import as_map
from jaxinfra.admission.pod_security.baseline import BASELINE_CHECKS
from jaxinfra.admission.pod_security.levels import (
    BASELINE,
    PRIVILEGED,
    RESTRICTED,
    Version,
    parse_level,
    parse_version,
    version_text,
)
from jaxinfra.admission.pod_security.podspec import Check, CheckFn
from jaxinfra.admission.pod_security.restricted import RESTRICTED_CHECKS

CHECKS: tuple[Check, ...] = BASELINE_CHECKS + RESTRICTED_CHECKS
"""Every check, in the order upstream evaluates them (baseline IDs sorted, then restricted IDs sorted)."""

NEWEST: Version = max(r.since for c in CHECKS for r in c.revisions)
"""The newest policy version with a revision: "latest", and any later version, evaluate as this one."""


@functools.cache
def _active(level: str, version: Version | None) -> tuple[tuple[Check, CheckFn], ...]:
    """checkRegistry.EvaluatePod's list: the checks of `level` at `version`, each at its revision for that version."""
    if level == PRIVILEGED:
        return ()
    at = NEWEST if version is None or version > NEWEST else version
    current = [
        (c, revs[-1])
        for c in CHECKS
        if (c.level == BASELINE or level == RESTRICTED) and (revs := [r for r in c.revisions if r.since <= at])
    ]
    overridden = {o for _, r in current for o in r.overrides}
    return tuple((c, r.check) for c, r in current if c.id not in overridden)


def failed_checks(
    level: str, version: str, pod_meta: Mapping, pod_spec: Mapping
) -> tuple[str, str, list[tuple[Check, str]]]:
    """The parsed level, version text, and each failed check with its "reason (detail)"."""
    lvl, ver = parse_level(level)[0], parse_version(version)[0]
    pod_meta, pod_spec = as_map(pod_meta), as_map(pod_spec)
    failed = []
    for check, fn in _active(lvl, ver):
        if (result := fn(pod_meta, pod_spec)) is not None:
            reason, detail = result
            failed.append((check, f"{reason} ({detail})" if detail else reason))
    return lvl, version_text(ver), failed


def violations(level: str, version: str, pod_meta: Mapping, pod_spec: Mapping) -> list[str]:
    """The forbidden reasons of a pod (its metadata and spec) at `level`:`version`, in upstream's order, each as
    "reason (detail)". A level upstream cannot parse is evaluated as restricted, a version as latest."""
    return [text for _, text in failed_checks(level, version, pod_meta, pod_spec)[2]]
