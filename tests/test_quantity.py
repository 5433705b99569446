"""One quantity grammar (`jaxinfra.quantity`, apimachinery's ParseQuantity) for the spec, the plan, admission and
the simulator: the cases where the three copies it replaced disagreed, and the API server's edge cases."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from jaxinfra import CPU, Cluster, JaxJob, NodePool, SpecError
from jaxinfra.quantity import parse, scale

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
