"""What a team adds to the pods jaxinfra renders (issue #23): typed extras, and RFC 6902 patches of the pod template.

The typed fields cover what teams ask for most (a PriorityClass, tolerations, node labels, sidecars) and are
checked like every other field; `pod_patches` is the general escape hatch. Its operations are checked for form
here, before anything renders; whether each one applies depends on the backend's pod template, so that is
checked where it is applied (`jaxinfra.render.common.customize`), after everything else jaxinfra renders.
The sidecar container lives with `Resources` in `jaxinfra.spec.jobs`, which it shares.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from jaxinfra.spec.base import LABEL_KEY_FIX, LABEL_VALUE_FIX, Spec, label_key_problem, label_value_ok, subdomain
from jaxinfra.spec.problems import problem
from jaxinfra.upstream import (
    GPU_ACCELERATOR_LABEL,
    QUEUED_LABEL,
    SPOT_LABEL,
    TPU_ACCELERATOR_LABEL,
    TPU_TOPOLOGY_LABEL,
)

_POINTER = re.compile(r"^(/([^~]|~[01])*)*$")

#: Node selector keys jaxinfra sets from the node pool, each with the way to change it.
POOL_SELECTORS: dict[str, str] = {
    TPU_ACCELERATOR_LABEL: "the pool's accelerator",
    TPU_TOPOLOGY_LABEL: "the pool's TPU topology",
    GPU_ACCELERATOR_LABEL: "the pool's accelerator",
    SPOT_LABEL: "NodePool(spot=True)",
    QUEUED_LABEL: "NodePool(flex_start=True)",
}

#: RFC 6902 operations and the members each one needs (beside `op`).
PATCH_OPS: dict[str, tuple[str, ...]] = {
    "add": ("path", "value"),
    "remove": ("path",),
    "replace": ("path", "value"),
    "move": ("from", "path"),
    "copy": ("from", "path"),
    "test": ("path", "value"),
}
_PATCH_EXAMPLE = "e.g. {'op': 'add', 'path': '/spec/terminationGracePeriodSeconds', 'value': 120}"
_POINTER_FIX = (
    "write a JSON Pointer into the pod template, starting with '/' (e.g. '/spec/containers/0/image'; "
    "'~1' stands for '/' in a key, '~0' for '~')"
)


class Toleration(Spec):
    """A toleration added to the job's pods, after the ones jaxinfra renders for the pool (TPU/GPU taints, Spot)."""

    _positional = ("key",)
    key: str = Field("", description="Taint key to tolerate; empty (with operator Exists): every taint.")
    operator: Literal["Equal", "Exists"] = Field(
        "Equal", description="Equal: the taint's value must be `value`; Exists: any value (then `value` stays empty)."
    )
    value: str = Field("", description="Taint value, for operator Equal.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute", ""] = Field(
        "", description="Taint effect to tolerate; empty: every effect."
    )
    toleration_seconds: int | None = Field(
        None, ge=0, description="NoExecute only: how long the pod stays bound after the taint appears; None: forever."
    )

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        if v and (why := label_key_problem(v)):
            raise problem(why, LABEL_KEY_FIX)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Toleration:
        """The API server's own rules (ValidateTolerations), so the pod is refused here, not at apply time."""
        if not self.key and self.operator != "Exists":
            raise problem(
                "a toleration without a key must use operator Exists", "set key, or operator='Exists'", "operator"
            )
        if self.operator == "Exists" and self.value:
            raise problem(
                "operator Exists tolerates any value, so value must be empty",
                "remove value, or use operator='Equal'",
                "value",
            )
        if self.operator == "Equal" and not label_value_ok(self.value):
            raise problem(f"toleration value {self.value!r} is not valid", LABEL_VALUE_FIX, "value")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise problem(
                "toleration_seconds applies to effect NoExecute only",
                "set effect='NoExecute', or remove it",
                "toleration_seconds",
            )
        return self


def priority_class_name(v: str | None) -> str | None:
    """A PriorityClass name is a DNS-1123 subdomain (the API server refuses the pod otherwise)."""
    return v if v is None else subdomain(v, "PriorityClass")


def node_selector_entries(v: dict[str, str]) -> dict[str, str]:
    """Valid label keys and values, none of the keys jaxinfra sets from the pool (no silent override)."""
    for key, value in v.items():
        if key in POOL_SELECTORS:
            raise problem(
                f"{key} is jaxinfra's to set: the value comes from the node pool",
                f"remove it; change {POOL_SELECTORS[key]} instead",
                key,
            )
        if why := label_key_problem(key):
            raise problem(why, LABEL_KEY_FIX, key)
        if not label_value_ok(value):
            raise problem(f"node selector value {value!r} is not valid", LABEL_VALUE_FIX, key)
    return v


def _json_problem(value: Any) -> str | None:
    """Why `value` cannot be written into a manifest as JSON, or None."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return None
    if isinstance(value, (list, tuple)):
        return next((why for item in value if (why := _json_problem(item))), None)
    if isinstance(value, dict):
        if bad := [k for k in value if not isinstance(k, str)]:
            return f"map key {bad[0]!r} is not a string"
        return next((why for item in value.values() if (why := _json_problem(item))), None)
    return f"{type(value).__name__} {value!r} is not a JSON value"


def patch_operation(op: Any) -> dict[str, Any]:
    """The form of one RFC 6902 operation: a known op, the members it needs and no others, JSON Pointers, JSON
    values. Stricter than the RFC (which ignores unknown members): a misspelt `vaule` is a problem, not a no-op."""
    if not isinstance(op, dict):
        raise problem("a JSON Patch operation is a map", f"write it as a dict, {_PATCH_EXAMPLE}")
    name = op.get("op")
    if name not in PATCH_OPS:
        raise problem(
            f"unknown op {name!r}" if "op" in op else "the operation has no 'op'",
            f"use one of {', '.join(PATCH_OPS)}, {_PATCH_EXAMPLE}",
        )
    needs = PATCH_OPS[name]
    if missing := [m for m in needs if m not in op]:
        raise problem(f"{name} needs {' and '.join(map(repr, missing))}", f"add {missing[0]!r}, {_PATCH_EXAMPLE}")
    if extra := sorted(set(op) - {"op", *needs}):
        raise problem(
            f"{name} takes no {', '.join(map(repr, extra))}", f"remove it: {name} takes op, {' and '.join(needs)}"
        )
    for member in ("path", "from"):
        if member in op and not (isinstance(op[member], str) and _POINTER.match(op[member])):
            raise problem(f"{member} {op[member]!r} is not a JSON Pointer", _POINTER_FIX)
    if "value" in op and (why := _json_problem(op["value"])):
        raise problem(f"value: {why}", "use strings, numbers, booleans, None, lists and dicts with string keys")
    return op


_KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")


def object_patch_kinds(v: dict[str, Any]) -> dict[str, Any]:
    """`object_patches` keys are Kubernetes kinds as manifests spell them; which ones a job renders is known once it
    renders (`jaxinfra.render.object_patched`)."""
    for kind in v:
        if not _KIND.match(kind):
            raise problem(f"{kind!r} is not a kind", "use a kind as the manifest spells it: JobSet, Service, ...", kind)
    return v
