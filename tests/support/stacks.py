"""The example's stacks as the tests read them: loaded, paired with each compatible backend, rendered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jaxinfra import manifests, stack
from jaxinfra.errors import SpecError
from jaxinfra.spec import BACKENDS, Cluster
from tests.support.paths import STACKS


def load_stack(path: Path, backend: str | None = None) -> Cluster:
    cluster = stack.load(path)
    return cluster.with_backend(backend) if backend else cluster


def stack_backends() -> list[tuple[Path, str]]:
    """Every (stack, backend) pair that is compatible: what synth and CI must cover."""
    pairs = []
    for path in STACKS:
        for backend in BACKENDS:
            try:
                load_stack(path, backend)
            except SpecError:
                continue
            pairs.append((path, backend))
    return pairs


PAIRS = stack_backends()
PAIR_IDS = [f"{p.stem}.{b}" for p, b in PAIRS]


def rendered(path: Path, backend: str) -> list[dict[str, Any]]:
    return manifests(load_stack(path, backend))
