"""A container's resources, as the API server's validation step checks them: resource names (native, hugepages,
extended), quantities, requests against limits, what may be overcommitted.

Emulated from pkg/apis/core/validation/validation.go @000f26050b9b (kubernetes/kubernetes; the commit is the stored
version read): validateResourceRequirements, validateContainerResourceName,
ValidateResourceQuantityValue; pkg/apis/core/helper/helpers.go (IsNativeResource, IsExtendedResourceName,
IsOvercommitAllowed). Quantities print as written, not in Go's canonical form.
"""

from fractions import Fraction
from typing import Any

from jaxinfra import quantity
from jaxinfra.admission.decoded import as_map
from jaxinfra.admission.store import Finding, Path
from jaxinfra.admission.validation.messages import (
    Raw,
    forbidden,
    invalid_each,
    invalid_value,
    required_value,
)
from jaxinfra.admission.validation.names import (
    qualified_name,
)

_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_STANDARD_RESOURCES = frozenset(_CONTAINER_RESOURCES) | {
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
}


def _hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def _native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _extended(name: str) -> bool:
    return not _native(name) and not name.startswith("requests.") and not qualified_name("requests." + name)


def _resource_name(name: str, at: Path) -> list[Finding]:
    """validateContainerResourceName."""
    out = invalid_each(at, name, qualified_name(name), "use cpu, memory, ephemeral-storage or a vendor/resource name")
    if out:
        return out
    if "/" not in name:
        if name not in _STANDARD_RESOURCES and not _hugepages(name):
            out.append(
                invalid_value(
                    at,
                    name,
                    "must be a standard resource type or fully qualified",
                    "use cpu, memory, ephemeral-storage or a vendor/resource name such as nvidia.com/gpu",
                )
            )
        if name not in _CONTAINER_RESOURCES and not _hugepages(name):
            out.append(
                invalid_value(
                    at,
                    name,
                    "must be a standard resource for containers",
                    "use cpu, memory, ephemeral-storage or hugepages-<size>",
                )
            )
    elif not _native(name) and not _extended(name):
        out.append(
            invalid_value(
                at,
                name,
                "doesn't follow extended resource name standard",
                "use a vendor domain and a name: example.com/device",
            )
        )
    return out


def _milli_value(amount: Fraction) -> int:
    """Quantity.MilliValue() of a non-negative quantity: rounded up, saturated at int64 (apimachinery
    pkg/api/resource/math.go @ 13ab804c6d76), so ValidateResourceQuantityValue's `MilliValue() % 1000 != 0` refuses
    an extended resource of 2^63 / 1000 or more as "must be an integer" (`google.com/tpu: 1e5000`)."""
    return min(-(-amount.numerator * 1000 // amount.denominator), 2**63 - 1)


def resources(resources: Any, at: Path) -> list[Finding]:
    """validateResourceRequirements: names, quantities (non-negative; extended resources whole), requests <=
    limits, and requests == limits (limits required) for what cannot be overcommitted."""
    res = as_map(resources)
    out: list[Finding] = []
    parsed: dict[str, dict[str, Fraction]] = {"limits": {}, "requests": {}}
    cpu_or_memory = hugepages = False
    for part in ("limits", "requests"):
        for name, value in as_map(res.get(part)).items():
            name = str(name)
            where = at + (part, name)
            out += _resource_name(name, where)
            amount = quantity.parse(value)
            if amount is None:
                out.append(
                    invalid_value(
                        where,
                        value,
                        quantity.MESSAGE,
                        "write a quantity such as 500m, 2 or 16Gi (kilo is a lowercase k)",
                    )
                )
                continue
            parsed[part][name] = amount
            if amount < 0:
                out.append(
                    invalid_value(where, str(value), "must be greater than or equal to 0", "use a non-negative amount")
                )
            elif _extended(name) and _milli_value(amount) % 1000:
                out.append(invalid_value(where, Raw(value), "must be an integer", f"request whole {name} devices"))
            cpu_or_memory |= name in ("cpu", "memory")
            hugepages |= _hugepages(name)
            if part != "requests":
                continue
            overcommit = _native(name) and not _hugepages(name)
            limit = parsed["limits"].get(name)
            written = as_map(res.get("limits")).get(name)
            if limit is not None:
                if amount != limit and not overcommit:
                    out.append(
                        invalid_value(
                            at + ("requests",),
                            str(value),
                            f"must be equal to {name} limit of {written}",
                            f"set the {name} request equal to its limit (or drop the request)",
                        )
                    )
                elif amount > limit:
                    out.append(
                        invalid_value(
                            at + ("requests",),
                            str(value),
                            f"must be less than or equal to {name} limit of {written}",
                            f"lower the {name} request or raise its limit",
                        )
                    )
            elif not overcommit and name not in as_map(res.get("limits")):
                out.append(
                    required_value(
                        at + ("limits",),
                        f"set limits.{name} equal to the request (or set only the limit: the request defaults to it)",
                        "Limit must be set for non overcommitable resources",
                    )
                )
    if hugepages and not cpu_or_memory:
        out.append(forbidden(at, "HugePages require cpu or memory", "request cpu or memory too"))
    return out
