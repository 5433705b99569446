"""The pod-resource arithmetic LimitRanger and ResourceQuota share: quantities (exact value, format) added and shown
back as resource.Quantity does, a ResourceList parsed, a pod's containers with their requests/limits, and a pod's
summed requests/limits (PodRequests / PodLimits).

Emulated from (facts, not code):
- kubernetes/apimachinery pkg/api/resource/quantity.go facts for showing a quantity back (CanonicalizeBytes): the
  format follows the suffix written, binary below 1024 or fractional shows as decimal, precision is nano rounded up.
- kubernetes/kubernetes pkg/api/v1/resource PodRequests / PodLimits (`aggregate`, through `jaxinfra.podresources`,
  which Kueue's count in the simulator shares).

Knowingly not emulated: pod-level resources defaulting (pod-level requests/limits are honoured as written).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any

from jaxinfra.admission.decoded import as_list, as_map
from jaxinfra.admission.store import Path
from jaxinfra.podresources import pod_resources
from jaxinfra.quantity import parse, suffix_of

# --- quantities: (exact value, format), added and shown back as resource.Quantity does -----------------------------

Amount = tuple[Fraction, str]
_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
ZERO: Amount = (Fraction(0), "DecimalSI")


def parse_amount(value: Any) -> Amount | None:
    """A quantity as written, with the format its suffix implies; None for one the schema step reports."""
    amount = parse(value)
    if amount is None:
        return None
    suffix = suffix_of(value)
    fmt = "BinarySI" if suffix in _BINARY[1:] else "DecimalExponent" if suffix[:1] in ("e", "E") else "DecimalSI"
    return amount, fmt


def _digits(number: int) -> str:
    """An integer's decimal text; past Python's 4300-digit str limit (a quantity like 1e999999), a short
    mantissa-and-exponent form so that showing an absurd value never raises."""
    if number.bit_length() < 14000:
        return str(number)
    exponent = int(abs(number).bit_length() * 0.30103) - 30
    return f"{number // 10**exponent if number > 0 else -(-number // 10**exponent)}e{exponent}"


def show_amount(q: Amount) -> str:
    """What the API server prints for a quantity (its canonical form: `8`, `500m`, `1536Mi`, `2k`)."""
    amount, fmt = q
    if amount == 0:
        return "0"
    if fmt == "BinarySI" and abs(amount) >= 1024 and amount.denominator == 1:
        number, power = int(amount), 0
        while number % 1024 == 0 and power < len(_BINARY) - 1:
            number, power = number // 1024, power + 1
        return f"{_digits(number)}{_BINARY[power]}"
    nanos = amount * 10**9
    number = math.ceil(nanos) if nanos > 0 else math.floor(nanos)
    exponent = -9
    while number % 1000 == 0 and exponent < 18:
        number, exponent = number // 1000, exponent + 3
    if fmt == "DecimalExponent":
        return f"{_digits(number)}e{exponent}" if exponent else _digits(number)
    return f"{_digits(number)}{_DECIMAL[exponent]}"


def add_amounts(a: Amount, b: Amount) -> Amount:
    """Quantity.Add: the sum keeps the first operand's format unless that operand is zero."""
    return a[0] + b[0], (b[1] if a[0] == 0 else a[1])


def resource_amounts(value: Any) -> dict[str, Amount]:
    """A ResourceList (requests or limits) parsed; entries of an odd type are skipped (the schema step reports)."""
    if not isinstance(value, Mapping):
        return {}
    out = {}
    for name, raw in value.items():
        if isinstance(name, str) and (q := parse_amount(raw)) is not None:
            out[name] = q
    return out


# --- the pod's containers -----------------------------------------------------------------------------------------

CONTAINER_KINDS = (("containers", "container"), ("initContainers", "init container"))


def pod_containers(pod: Mapping) -> Iterator[tuple[Path, Mapping]]:
    """Every container and init container, with its path, in field order."""
    spec = as_map(pod.get("spec"))
    for field, _ in CONTAINER_KINDS:
        for i, c in enumerate(as_list(spec.get(field))):
            if isinstance(c, Mapping):
                yield ("spec", field, i), c


def container_resources(c: Mapping) -> tuple[dict[str, Amount], dict[str, Amount]]:
    res = as_map(c.get("resources"))
    return resource_amounts(res.get("requests")), resource_amounts(res.get("limits"))


def aggregate(pod: Mapping, which: int, overhead: bool = True) -> dict[str, Amount]:
    """PodRequests (which=0) / PodLimits (which=1) from pkg/api/v1/resource (`jaxinfra.podresources`): containers
    and sidecars add up, a plain init container counts alone (with the sidecars started before it), the larger wins;
    pod-level values replace cpu/memory/hugepages; overhead (quota's sum, not LimitRanger's) adds to every request and
    to limits present."""
    spec = as_map(pod.get("spec"))
    return pod_resources(
        spec,
        lambda c: container_resources(c)[which],
        add_amounts,
        lambda q: q[0],
        pod_level=resource_amounts(as_map(spec.get("resources")).get(("requests", "limits")[which])),
        overhead=resource_amounts(spec.get("overhead")) if overhead else None,
        limits=which == 1,
    )
