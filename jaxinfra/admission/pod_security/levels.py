"""Pod Security's levels, versions and namespace labels (upstream's api/ package): which level and version each mode
evaluates in a namespace, and the labels that refuse a Namespace's create.

Upstream, read at kubernetes/pod-security-admission (the published copy of kubernetes/kubernetes
staging/src/k8s.io/pod-security-admission) commit 8f84a87c7f617f64a4ddc1aea24aeeb7a2e07cb8:
- api/constants.go: the levels, "latest", the six label names.
- api/helpers.go: ParseLevel (an invalid level reads as "restricted"), ParseVersion ("latest" or `v1.N`, N without a
  leading zero; anything else reads as latest), PolicyToEvaluate (no labels: the defaults, privileged:latest for the
  API server's default configuration; an invalid `enforce` is restricted, an invalid `warn` or `audit` privileged --
  fail closed for enforce, open for the others; `warn` unset follows an explicitly more restrictive `enforce`, with
  its version unless `warn-version` is set), the field errors on metadata.labels[...], LevelVersion's "level:version".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jaxinfra.admission.goformat import go_quote
from jaxinfra.admission.store import Finding

LABEL_PREFIX = "pod-security.kubernetes.io/"
ENFORCE = LABEL_PREFIX + "enforce"
ENFORCE_VERSION = LABEL_PREFIX + "enforce-version"
AUDIT = LABEL_PREFIX + "audit"
AUDIT_VERSION = LABEL_PREFIX + "audit-version"
WARN = LABEL_PREFIX + "warn"
WARN_VERSION = LABEL_PREFIX + "warn-version"

PRIVILEGED, BASELINE, RESTRICTED = "privileged", "baseline", "restricted"
_LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)
LATEST = "latest"

Version = tuple[int, int]
"""A policy version (1, minor); None stands for "latest"."""

_VERSION = re.compile(r"v1\.([0-9]|[1-9][0-9]*)")
_LEVEL_ERROR = "must be one of " + ", ".join(_LEVELS)
_VERSION_ERROR = 'must be "latest" or "v1.x"'


# --- levels -------------------------------------------------------------------------------------------------------


def parse_level(value: Any) -> tuple[str, bool]:
    """ParseLevel: the level, and whether it was valid (an invalid one reads as restricted)."""
    return (value, True) if value in _LEVELS else (RESTRICTED, False)


def parse_version(value: Any) -> tuple[Version | None, bool]:
    """ParseVersion: (1, minor) or None for latest, and whether it was valid (an invalid one reads as latest)."""
    if value == LATEST:
        return None, True
    m = _VERSION.fullmatch(value) if isinstance(value, str) else None
    return ((1, int(m.group(1))), True) if m else (None, False)


def version_text(version: Version | None) -> str:
    return LATEST if version is None else f"v{version[0]}.{version[1]}"


@dataclass(frozen=True)
class Levels:
    """The level and version each mode evaluates in one namespace (versions as "latest" or "v1.N")."""

    enforce: str = PRIVILEGED
    enforce_version: str = LATEST
    warn: str = PRIVILEGED
    warn_version: str = LATEST
    audit: str = PRIVILEGED
    audit_version: str = LATEST

    def fully_privileged(self) -> bool:
        return self.enforce == self.warn == self.audit == PRIVILEGED


def levels(namespace_labels: Mapping[str, str]) -> Levels:
    """PolicyToEvaluate over the API server's default policy (privileged:latest in every mode)."""
    labels = namespace_labels if isinstance(namespace_labels, Mapping) else {}
    mode: dict[str, str] = {}
    for level_label, version_label, fail_open in (
        (ENFORCE, ENFORCE_VERSION, False),
        (AUDIT, AUDIT_VERSION, True),
        (WARN, WARN_VERSION, True),
    ):
        level, ok = parse_level(labels[level_label]) if level_label in labels else (PRIVILEGED, True)
        mode[level_label] = PRIVILEGED if fail_open and not ok else level
        version = parse_version(labels[version_label])[0] if version_label in labels else None
        mode[version_label] = version_text(version)
    enforce_set = ENFORCE in labels and parse_level(labels[ENFORCE])[1]
    if WARN not in labels and enforce_set and _LEVELS.index(mode[ENFORCE]) > _LEVELS.index(mode[WARN]):
        mode[WARN] = mode[ENFORCE]
        if WARN_VERSION not in labels:
            mode[WARN_VERSION] = mode[ENFORCE_VERSION]
    return Levels(
        mode[ENFORCE], mode[ENFORCE_VERSION], mode[WARN], mode[WARN_VERSION], mode[AUDIT], mode[AUDIT_VERSION]
    )


def label_errors(namespace_labels: Mapping[str, Any]) -> list[Finding]:
    """What refuses a Namespace's create: each Pod Security label with a value upstream cannot parse, in upstream's
    order (enforce, enforce-version, audit, audit-version, warn, warn-version)."""
    labels = namespace_labels if isinstance(namespace_labels, Mapping) else {}
    out: list[Finding] = []
    for label, parse, detail, fix in (
        (ENFORCE, parse_level, _LEVEL_ERROR, "use privileged, baseline or restricted"),
        (ENFORCE_VERSION, parse_version, _VERSION_ERROR, 'use "latest" or a version such as "v1.30"'),
        (AUDIT, parse_level, _LEVEL_ERROR, "use privileged, baseline or restricted"),
        (AUDIT_VERSION, parse_version, _VERSION_ERROR, 'use "latest" or a version such as "v1.30"'),
        (WARN, parse_level, _LEVEL_ERROR, "use privileged, baseline or restricted"),
        (WARN_VERSION, parse_version, _VERSION_ERROR, 'use "latest" or a version such as "v1.30"'),
    ):
        value = labels.get(label)
        if isinstance(value, str) and not parse(value)[1]:
            out.append(
                Finding(("metadata", "labels", label), value, f"Invalid value: {go_quote(value)}: {detail}", fix)
            )
    return out
