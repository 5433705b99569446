"""The API server's errors as the client that made the request reads them (a controller's event quotes them): which
step refused an object, worded as the API server words it (kubernetes staging/src/k8s.io/apimachinery/pkg/api/errors,
at the release whose schemas are bundled)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def api_error(resource: str, kind: str, name: str, refused: Sequence[Any], webhook: str = "") -> str:
    """The API server's error for a refused create, as the creating controller's event quotes it, from the first step
    that refuses (each finding's `step`): validation's field errors as `<Kind.group> "<name>" is invalid: ...` (the
    strategy validates before validating admission runs); then an admission plugin's or Pod Security's refusal as
    `<resource> "<name>" is forbidden: ...`; then a validating webhook's denial as `admission webhook "<webhook>"
    denied the request: ...` (its configured name). Sources: kubernetes staging/src/k8s.io/apimachinery/pkg/api/
    errors/errors.go (NewInvalid, NewForbidden), staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/errors/
    statuserror.go (ToStatusErr). `refused`: `jaxinfra.admission.store.Finding`s, no warnings; `name`: the object's,
    or its generateName, which admission errors name (apiserver pkg/admission/errors.go extractResourceName)."""
    invalid = [f for f in refused if f.step not in ("admission", "webhook")]
    forbidden = [f.message for f in refused if f.step == "admission"]
    if invalid:
        return f'{kind} "{name}" is invalid: {aggregate(invalid)}'
    if forbidden:
        return f'{resource} "{name}" is forbidden: {forbidden[0]}'
    return f'admission webhook "{webhook}" denied the request: {aggregate([f for f in refused if f.step == "webhook"])}'


def aggregate(findings: Sequence[Any]) -> str:
    """ErrorList.ToAggregate's message (apimachinery pkg/util/validation/field/errors.go): each `path: message`, one
    alone, more in brackets, comma-separated."""
    from jaxinfra.admission.schema import json_path

    errors = [f"{json_path(f.at)}: {f.message}" if f.at else f.message for f in findings]
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
