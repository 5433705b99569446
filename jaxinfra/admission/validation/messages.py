"""The API server's field-error message grammar, and the findings it builds.

Emulated from staging/src/k8s.io/apimachinery/pkg/util/validation/field/errors.go @014a908cc415 (kubernetes/kubernetes;
the commit is the stored version read): `Invalid value: "x": ...`, `Required value`, `Duplicate value`, `Not found`,
`Unsupported value: ...: supported values: ...`, `Forbidden`, `Too long: must have at most N bytes`, `Too many`;
and ErrorList.ToAggregate, which prints each (path, message) once (`distinct`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jaxinfra.admission.decoded import as_int, as_map
from jaxinfra.admission.goformat import go_quote
from jaxinfra.admission.store import Finding, Path


class Raw(str):
    """A value the API server prints without quotes (a Quantity, a Go struct)."""


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Raw) or isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):  # %#v sorts map keys
        pairs = sorted((str(k), v) for k, v in value.items())
        return "map[string]string{" + ", ".join(f"{go_quote(k)}:{go_quote(v)}" for k, v in pairs) + "}"
    return json.dumps(value, sort_keys=True, default=str)  # Go prints its struct here; JSON reads the same


def invalid_value(at: Path, value: Any, detail: str, fix: str) -> Finding:
    return Finding(at, value, f"Invalid value: {_show(value)}: {detail}", fix)


def omitted_value(at: Path, detail: str, fix: str) -> Finding:
    return Finding(at, None, f"Invalid value: {detail}", fix)


def required_value(at: Path, fix: str, detail: str = "", value: Any = None) -> Finding:
    return Finding(at, value, "Required value" + (f": {detail}" if detail else ""), fix)


def duplicate_value(at: Path, value: Any, fix: str) -> Finding:
    return Finding(at, value, f"Duplicate value: {_show(value)}", fix)


def not_found(at: Path, value: Any, fix: str) -> Finding:
    return Finding(at, value, f"Not found: {_show(value)}", fix)


def not_supported(at: Path, value: Any, supported: Sequence[str], fix: str) -> Finding:
    listed = ", ".join(go_quote(s) for s in supported)
    return Finding(at, value, f"Unsupported value: {_show(value)}: supported values: {listed}", fix)


def forbidden(at: Path, detail: str, fix: str, value: Any = None) -> Finding:
    return Finding(at, value, f"Forbidden: {detail}", fix)


def too_long(at: Path, limit: int, fix: str, value: Any = None) -> Finding:
    return Finding(at, value, f"Too long: must have at most {limit} bytes", fix)


def too_many(at: Path, actual: int, limit: int, fix: str) -> Finding:
    return Finding(at, actual, f"Too many: {actual}: must have at most {limit} items", fix)


def go_list(values: Sequence[str]) -> str:
    """Go's %q of a []string: ["a" "b"]."""
    return "[" + " ".join(map(go_quote, values)) + "]"


def invalid_each(at: Path, value: Any, messages: Iterable[str], fix: str) -> list[Finding]:
    return [invalid_value(at, value, m, fix) for m in messages]


def string_map(value: Any) -> dict[str, str]:
    return {k: v for k, v in as_map(value).items() if isinstance(k, str) and isinstance(v, str)}


def nonnegative(at: Path, value: Any, fix: str) -> list[Finding]:
    n = as_int(value)
    return [invalid_value(at, n, "must be greater than or equal to 0", fix)] if n is not None and n < 0 else []


def distinct(findings: list[Finding]) -> list[Finding]:
    """ErrorList.ToAggregate: one of each (path, message) the API server would print twice."""
    seen: set[tuple[Path, str, bool]] = set()
    out = []
    for f in findings:
        if (f.at, f.message, f.warning) not in seen:
            seen.add((f.at, f.message, f.warning))
            out.append(f)
    return out
