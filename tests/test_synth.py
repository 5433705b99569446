"""Every stack x compatible backend: reviewed snapshots, strict schema validity, no per-host objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jaxinfra.errors import SpecError
from jaxinfra.validate import validate_objects
from jaxinfra.yamlio import dump
from tests.support.paths import STACKS
from tests.support.stacks import PAIR_IDS, PAIRS, load_stack, rendered

pytestmark = pytest.mark.unit


def test_every_stack_has_a_compatible_backend() -> None:
    assert {p for p, _ in PAIRS} == set(STACKS)
    assert {p.stem for p in STACKS} >= {"cpu_dev", "tpu_v5e_2x4", "tpu_v5p_2x2x4_x2", "gpu_h100_2x8"}


@pytest.mark.parametrize(("path", "backend"), PAIRS, ids=PAIR_IDS)
def test_snapshot(path: Path, backend: str, yaml_snapshot: Any) -> None:
    assert dump(rendered(path, backend)) == yaml_snapshot(name=f"{path.stem}.{backend}")


@pytest.mark.parametrize(("path", "backend"), PAIRS, ids=PAIR_IDS)
def test_strictly_schema_valid(path: Path, backend: str) -> None:
    assert validate_objects(rendered(path, backend), source=f"{path.stem}.{backend}") == []


def test_multi_slice_is_incompatible_with_indexed_job() -> None:
    with pytest.raises(SpecError) as err:
        load_stack(next(p for p in STACKS if p.stem == "tpu_v5p_2x2x4_x2"), "job")
    assert [p.path for p in err.value.problems] == ["jobs[0].backend"]
