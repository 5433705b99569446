"""The static problems of an emulated cluster (`jaxinfra_sim.core.model.Cluster`), for precise assertions."""

from __future__ import annotations

from typing import Any


def problems_of(c: Any) -> list[Any]:
    """Every static problem of an emulated cluster."""
    return [*c.problems, *(p for w in c.workloads for p in w.problems)]


def one_problem(c: Any, *needles: str) -> Any:
    """The single problem whose text mentions every needle (a precise, not an incidental, match)."""
    found = [p for p in problems_of(c) if all(n in str(p) for n in needles)]
    assert len(found) == 1, f"{needles} in {[str(p) for p in problems_of(c)]}"
    return found[0]
