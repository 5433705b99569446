"""One quantity grammar (`jaxinfra.quantity`, apimachinery's ParseQuantity) for the spec, the plan, admission and
the simulator: the cases where the three copies it replaced disagreed, and the API server's edge cases."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from jaxinfra import CPU, Cluster, JaxJob, NodePool, SpecError
from jaxinfra.quantity import canonical, parse, scale

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Fraction(1, 10)),
        ("256Mi", 256 * 2**20),
        ("1k", 1000),
        ("1E", 10**18),
        ("1e3", 1000),
        ("1E-2", Fraction(1, 100)),
        ("1e+3", 1000),
        ("0.5", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("5.", 5),
        ("-1", -1),
        ("1.5Gi", 3 * 2**29),
        ("7n", Fraction(7, 10**9)),
        ("3u", Fraction(3, 10**6)),
        (2, 2),
        (0.25, Fraction(1, 4)),
    ],
)
def test_what_the_api_server_parses(text: object, value: Fraction) -> None:
    assert parse(text) == value


@pytest.mark.parametrize(
    "text", ["1K", "1e", "1Ki3", "1 ", " 1", "", "--1", "1..2", "1KiB", "one", True, None, [1], "1e9999999"]
)
def test_what_it_refuses(text: object) -> None:
    assert parse(text) is None


def test_scale_keeps_the_suffix_and_adds_in_base_units() -> None:
    assert scale("100m", 3) == (Decimal("0.3"), "300m")
    assert scale("1.5Gi", 2) == (Decimal(3 * 2**30), "3Gi")
    assert scale(2, 4) == (Decimal(8), 8)
    with pytest.raises(ValueError):
        scale("1K", 2)


def test_the_spec_refuses_what_the_api_server_refuses() -> None:
    """'1K' passed the spec's old pattern, then crashed the plan's parser."""
    with pytest.raises(SpecError) as err:
        Cluster(
            name="c",
            node_pools=[NodePool("cpu", CPU(2))],
            jobs=[JaxJob("t", image="i", node_pool="cpu", resources={"requests": {"memory": "1K"}})],
        )
    assert "memory: '1K' is not a Kubernetes quantity" in str(err.value)


@pytest.mark.parametrize(
    ("given", "served"),
    [
        (1, "1"),  # a JSON number is served as a string
        (0.5, "500m"),
        ("900m", "900m"),
        (1000, "1k"),
        ("1500", "1500"),
        ("1.5", "1500m"),
        ("1.5Gi", "1536Mi"),  # binary, whole and at least 1024: the largest power of 1024 that divides it
        ("0.5Gi", "512Mi"),
        ("1Ki", "1Ki"),
        ("512Ki", "512Ki"),
        ("1.5Ki", "1536"),  # whole, yet 1536 = 1.5 * 1024: written in decimal
        ("0.1Ki", "102400m"),  # not whole: decimal
        (1073741824, "1073741824"),  # a plain number stays decimal: 2**30 has no factor of 1000
        ("10G", "10G"),
        ("1e3", "1e3"),  # the exponent form keeps its form
        ("12e6", "12e6"),
        ("1E-2", "10e-3"),
        ("0Gi", "0"),
        ("0.0000000001", "1n"),  # rounded up to nano
        ("1Z", None),
        (True, None),
    ],
)
def test_canonical_is_what_the_api_server_serves(given: object, served: str | None) -> None:
    """apimachinery's Quantity.MarshalJSON (CanonicalizeBytes): a built-in object's quantities come back as these."""
    assert canonical(given) == served
