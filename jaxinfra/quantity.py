"""Kubernetes resource quantities: one grammar for the spec, the plan, admission and the simulator.

The grammar and its edge cases are apimachinery's `ParseQuantity` (kubernetes
staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go, `parseQuantityString` and suffix.go's
`interpret`): an optional sign, digits with at most one '.', then one suffix -- binary SI (Ki Mi Gi Ti Pi
Ei), decimal SI (n u m "" k M G T P E) or a decimal exponent (e/E and a signed integer: `1e3`, `1E-2`).
So `1K` is no quantity (the kilo prefix is lowercase `k`), `1E` is 10^18 and `1e` is nothing. A JSON
number is the quantity its decimal text spells; a boolean is not one.

The API server's message for a string outside the grammar is `MESSAGE`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

__all__ = ["MESSAGE", "parse", "is_quantity", "suffix_of", "scale", "canonical"]

MESSAGE = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
"""What the API server answers for a value that does not parse (quantity.go ErrFormatWrong's regular expression)."""

_NUMBER = re.compile(r"[+-]?[0-9]*(?:\.[0-9]*)?")
_SUFFIX: dict[str, Fraction] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)")
_MAX_EXPONENT = 10**6  # beyond any real quantity; keeps 10**n from becoming a denial of service


def _split(text: str) -> tuple[str, str] | None:
    """(number, suffix) as parseQuantityString splits them (a bare sign or '.' is 0 there too), or None for ''."""
    if not text:
        return None
    number = _NUMBER.match(text).group(0)  # type: ignore[union-attr]  # matches the empty string at least
    return number, text[len(number) :]


def parse(value: Any) -> Fraction | None:
    """The exact value of a quantity (a string, or an int/float as JSON gives it), or None when it is none."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        text = format(Decimal(repr(value)), "f")
    else:
        text = str(value)
    split = _split(text)
    if split is None:
        return None
    number, suffix = split
    if suffix in _SUFFIX:
        factor = _SUFFIX[suffix]
    elif (m := _EXPONENT.fullmatch(suffix)) and abs(int(m.group(1))) <= _MAX_EXPONENT:
        factor = Fraction(10) ** int(m.group(1))
    else:
        return None
    try:
        return Fraction(Decimal(number if number.strip("+-.") else "0")) * factor
    except (InvalidOperation, ValueError):
        return None


def is_quantity(value: Any) -> bool:
    return parse(value) is not None


def suffix_of(value: Any) -> str:
    """The suffix a parsable quantity is written with ('' for a plain number)."""
    split = _split(str(value))
    return split[1] if split else ""


def scale(value: str | int, times: int) -> tuple[Decimal, str | int]:
    """A quantity times `times`: (its value in base units, exact, for comparing and adding; the product written
    with the same suffix, as a plain int where it has none)."""
    split = _split(str(value)) if parse(value) is not None else None
    if split is None:
        raise ValueError(f"{value!r}: {MESSAGE}")
    number, suffix = split
    total = Decimal(number if number.strip("+-.") else "0") * times
    text = format(total.normalize(), "f") if total != total.to_integral_value() else str(int(total))
    out: str | int = int(text) if not suffix and text.lstrip("-").isdigit() else f"{text}{suffix}"
    if suffix in _SUFFIX:
        factor = Decimal(_SUFFIX[suffix].numerator) / Decimal(_SUFFIX[suffix].denominator)
    else:
        factor = Decimal(1).scaleb(int(suffix[1:]))
    return total * factor, out


def total(values: Sequence[str | int]) -> str | int:
    """The sum of quantities: a lone one as written; several in base units, written plainly (units may differ)."""
    if len(values) == 1:
        return values[0]
    base = sum((scale(v, 1)[0] for v in values), Decimal(0))
    return format(base.normalize(), "f") if base != base.to_integral_value() else int(base)


_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def canonical(value: Any) -> str | None:
    """A quantity as the API server writes it back (a JSON string, whatever was given: `1` is served as "1"), or None
    where it is none. apimachinery's `Quantity.MarshalJSON` writes `CanonicalizeBytes` (quantity.go; amount.go
    `AsCanonicalBytes`, `AsCanonicalBase1024Bytes`; suffix.go `constructBytes`): the value rounded up to nano as
    `ParseQuantity` keeps it; zero is "0"; a binary SI quantity stays binary when it is a whole number of at least
    1024 in magnitude, written with the largest power of 1024 that divides it (`1.5Gi` is "1536Mi"), else it is
    decimal; a decimal one is its digits without trailing zeros and an exponent that is a multiple of 3, written with
    its SI suffix (`1000` is "1k", `0.5` is "500m") or, for the exponent form, `e` and the exponent (`1e3`)."""
    amount = parse(value)
    if amount is None:
        return None
    suffix = suffix_of(format(Decimal(repr(value)), "f") if isinstance(value, float) else value)
    nano = amount * 10**9
    if nano.denominator != 1:  # more precise than nano: rounded up, away from zero (inf.RoundUp)
        amount = Fraction(math.ceil(abs(nano)) * (1 if nano > 0 else -1), 10**9)
    if amount == 0:
        return "0"
    if suffix in _BINARY[1:] and (-1024 < amount < 1024 or amount.denominator != 1):
        suffix = ""  # BinarySI below 1024, or not whole: written as DecimalSI
    if suffix in _BINARY[1:]:
        whole, power = int(amount), 0
        while whole % 1024 == 0 and power < len(_BINARY) - 1:
            whole //= 1024
            power += 1
        return f"{whole}{_BINARY[power]}"
    exponent, scaled = 0, amount
    while scaled.denominator != 1:
        scaled *= 10
        exponent -= 1
    digits = int(scaled)
    while digits % 10 == 0:
        digits //= 10
        exponent += 1
    if exponent % 3:
        digits *= 10 ** (exponent % 3)
        exponent -= exponent % 3
    if suffix[:1] in ("e", "E"):
        return f"{digits}e{exponent}" if exponent else str(digits)
    return f"{digits}{_DECIMAL[exponent]}" if exponent in _DECIMAL else f"{digits}e{exponent}"
