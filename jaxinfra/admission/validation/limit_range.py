"""A LimitRange as the API server's validation step checks it: each item's bounds in order.

Emulated from kubernetes/kubernetes pkg/apis/core/validation/validation.go ValidateLimitRange (messages carried over):
for each resource an item names, min <= defaultRequest <= default <= max and min <= default, each breach its own
error at the larger value's field; maxLimitRequestRatio at least 1, and at most max/min where both are set. It runs on
the defaulted object, so a Container item's default filled from max and defaultRequest from default
(SetDefaults_LimitRangeItem, `defaults`) are checked too.

Knowingly not emulated: the per-type rules (a Pod item's default, a PersistentVolumeClaim item's min/max needs) and
the resource name rules.
"""

from __future__ import annotations

from collections.abc import Mapping

from jaxinfra.admission.decoded import as_list, as_map
from jaxinfra.admission.plugins.resources import Amount, parse_amount, show_amount
from jaxinfra.admission.store import Finding, Path
from jaxinfra.admission.validation.messages import Raw, invalid_value

_FIX = "order the item's bounds: min <= defaultRequest <= default <= max"


def _amounts(values: object) -> dict[str, Amount]:
    out = {}
    for name, value in as_map(values).items():
        if (amount := parse_amount(value)) is not None:
            out[str(name)] = amount
    return out


def validate_limit_range(obj: Mapping) -> list[Finding]:
    out: list[Finding] = []
    for i, item in enumerate(as_list(as_map(obj.get("spec")).get("limits"))):
        item = as_map(item)
        bounds = {key: _amounts(item.get(key)) for key in ("min", "max", "default", "defaultRequest")}
        ratios = _amounts(item.get("maxLimitRequestRatio"))
        at: Path = ("spec", "limits", i)
        names = sorted(set().union(*bounds.values(), ratios))
        for name in names:
            lo, hi = bounds["min"].get(name), bounds["max"].get(name)
            default, request = bounds["default"].get(name), bounds["defaultRequest"].get(name)
            for field, small, large, text in (
                ("min", lo, hi, "min value {s} is greater than max value {l}"),
                ("defaultRequest", lo, request, "min value {s} is greater than default request value {l}"),
                ("defaultRequest", request, hi, "default request value {s} is greater than max value {l}"),
                (
                    "defaultRequest",
                    request,
                    default,
                    "default request value {s} is greater than default limit value {l}",
                ),
                ("default", lo, default, "min value {s} is greater than default value {l}"),
                ("default", default, hi, "default value {s} is greater than max value {l}"),
            ):
                if small is not None and large is not None and small[0] > large[0]:
                    shown = {"min": small, "defaultRequest": request, "default": default}[field]
                    assert shown is not None
                    message = text.format(s=show_amount(small), l=show_amount(large))
                    out.append(invalid_value((*at, field, name), Raw(show_amount(shown)), message, _FIX))
            if (ratio := ratios.get(name)) is not None:
                if ratio[0] < 1:
                    out.append(
                        invalid_value(
                            (*at, "maxLimitRequestRatio", name),
                            Raw(show_amount(ratio)),
                            f"ratio {show_amount(ratio)} is less than 1",
                            "use a ratio of at least 1",
                        )
                    )
                if lo is not None and hi is not None and lo[0] > 0 and hi[0] / lo[0] < ratio[0]:
                    out.append(
                        invalid_value(
                            (*at, "maxLimitRequestRatio", name),
                            Raw(show_amount(ratio)),
                            f"ratio {show_amount(ratio)} is greater than max/min = {float(hi[0] / lo[0]):f}",
                            "use a ratio of at most max/min",
                        )
                    )
    return out
