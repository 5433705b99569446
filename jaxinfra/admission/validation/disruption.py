"""A PodDisruptionBudget as the API server's validation step checks its budget.

Emulated from kubernetes/kubernetes pkg/apis/policy/validation/validation.go ValidatePodDisruptionBudgetSpec and
pkg/apis/apps/validation ValidatePositiveIntOrPercent, IsNotMoreThan100Percent (messages carried over): minAvailable
and maxUnavailable are exclusive; each is a non-negative integer or a percent string of at most 100%.

Knowingly not emulated: the selector's own rules and unhealthyPodEvictionPolicy's values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from jaxinfra.admission.decoded import as_map
from jaxinfra.admission.store import Finding
from jaxinfra.admission.validation.messages import invalid_value

_PERCENT = re.compile(r"^[0-9]+%$")


def _int_or_percent(field: str, value: object) -> list[Finding]:
    at = ("spec", field)
    if isinstance(value, bool):
        return [invalid_value(at, value, "must be an integer or percentage (e.g '5%')", f"set {field}: 1 or '50%'")]
    if isinstance(value, int):
        if value < 0:
            return [invalid_value(at, value, "must be greater than or equal to 0", f"set {field} to 0 or more")]
        return []
    if isinstance(value, str):
        if not _PERCENT.match(value):
            detail = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '10%')"
            return [invalid_value(at, value, detail, f"write {field} as a whole number or a percent, e.g. '50%'")]
        if int(value[:-1]) > 100:
            return [invalid_value(at, value, "must not be greater than 100%", f"set {field} to at most '100%'")]
    return []


def validate_pod_disruption_budget(obj: Mapping) -> list[Finding]:
    spec = as_map(obj.get("spec"))
    out: list[Finding] = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        out.append(
            invalid_value(
                ("spec",),
                dict(spec),
                "minAvailable and maxUnavailable cannot be both set",
                "keep one of minAvailable and maxUnavailable",
            )
        )
    for field in ("minAvailable", "maxUnavailable"):
        if spec.get(field) is not None:
            out += _int_or_percent(field, spec[field])
    return out
