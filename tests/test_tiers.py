"""The tiers (docs/testing.md): every test module names exactly one, and a unit test cannot start a process."""

from __future__ import annotations

import ast
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TIERS

pytestmark = pytest.mark.unit

HERE = Path(__file__).resolve().parent
MODULES = sorted(HERE.rglob("test_*.py"))


def tier_marks(path: Path) -> list[str]:
    """The tiers a module's top-level `pytestmark = pytest.mark.X` lines name."""
    found = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["pytestmark"]:
            value = ast.unparse(node.value)
            found.append(value.removeprefix("pytest.mark.") if value.startswith("pytest.mark.") else value)
    return found


def test_the_tiers_are_the_registered_markers(pytestconfig: pytest.Config) -> None:
    registered = [line.split(":")[0] for line in pytestconfig.getini("markers")]
    assert set(TIERS) <= set(registered), registered


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(HERE)) for p in MODULES])
def test_every_module_has_exactly_one_tier(path: Path) -> None:
    assert [m for m in tier_marks(path) if m in TIERS] == tier_marks(path), "a pytestmark that is not one tier"
    assert len(tier_marks(path)) == 1, f"{path.name}: add `pytestmark = pytest.mark.<{'|'.join(TIERS)}>`"


def test_each_collected_test_has_one_tier(request: pytest.FixtureRequest) -> None:
    """The closest tier marker wins (conftest's collection hook): no test of this session carries two."""
    for item in request.session.items:
        assert len([m for m in item.iter_markers() if m.name in TIERS]) == 1, item.nodeid


@pytest.mark.parametrize(
    "start",
    [
        lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
        lambda: subprocess.Popen(["true"]),
        lambda: os.fork() or os._exit(0),  # were it to fork, the child must not run on as pytest
        lambda: os.posix_spawn("/bin/true", ["true"], {}),
        lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
        lambda: multiprocessing.get_context("fork").Process(target=print).start(),
    ],
    ids=["subprocess.run", "Popen", "fork", "posix_spawn", "multiprocessing-spawn", "multiprocessing-fork"],
)
def test_a_unit_test_cannot_start_a_process(start: object) -> None:
    with pytest.raises(RuntimeError, match="a unit test may not start a process"):
        start()  # type: ignore[operator]
