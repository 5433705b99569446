"""Fixtures and hooks only (shared code is tests/support/): the hypothesis profiles, YAML snapshots in snapshots/,
the tiers (one per test, the closest marker wins) and the `unit` tier's rule that no test of it starts a process."""

from __future__ import annotations

import multiprocessing.process
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from tests.support import fresh_venv, unprivileged
from tests.support.paths import ROOT

settings.register_profile("default", max_examples=40, deadline=None)
settings.register_profile("thorough", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

#: The tiers, as registered in pyproject.toml (docs/testing.md).
TIERS = ("unit", "simulator", "browser", "adapters")


class YamlSnapshot(SingleFileSnapshotExtension):
    """One reviewable YAML file per snapshot, all under the top-level snapshots/ folder."""

    file_extension = "yaml"
    _write_mode = WriteMode.TEXT

    @classmethod
    def dirname(cls, *, test_location: Any) -> str:
        return str(ROOT / "snapshots")

    @classmethod
    def get_snapshot_name(cls, *, test_location: Any, index: Any = 0) -> str:
        return str(index)


@pytest.fixture
def yaml_snapshot(snapshot: Any) -> Any:
    return snapshot.use_extension(YamlSnapshot)


@pytest.fixture
def home() -> Iterator[Path]:
    """A fresh folder the unprivileged user owns (`unprivileged.scratch_home`), removed afterwards: a simulation's
    HOME and scratch, run as root or as that user."""
    folder = unprivileged.scratch_home()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test gets exactly one tier: its own marker (or its class's) where it has one, else its module's
    `pytestmark`. Runs before `-m` selects, so `-m unit` never picks a process-starting test of a unit module."""
    modules: dict[pytest.Module, list[pytest.Item]] = {}
    for item in items:
        module = item.getparent(pytest.Module)
        if module is not None:
            modules.setdefault(module, []).append(item)
    for module, its in modules.items():
        default = [m for m in module.own_markers if m.name in TIERS]
        module.own_markers[:] = [m for m in module.own_markers if m.name not in TIERS]
        for item in its:
            own = {m.name for node in item.listchain()[item.listchain().index(module) + 1 :] for m in node.own_markers}
            if not own & set(TIERS):
                for mark in default:
                    item.add_marker(mark.name)
    # The fast tier first, so a broken change fails in seconds; the slow tiers keep their files' order.
    items.sort(key=lambda item: next((TIERS_FIRST.index(t) for t in TIERS_FIRST if item.get_closest_marker(t)), 0))


#: The order the tiers run in.
TIERS_FIRST = ("unit", "browser", "adapters", "simulator")


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        config.stash[fresh_venv.BASE] = Path(tempfile.mkdtemp(prefix="jaxinfra-fresh-venv-"))
    else:
        config.stash[fresh_venv.BASE] = Path(workerinput["jaxinfra_fresh_venv"])


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist's controller: every worker shares the controller's folder, so the session builds one venv."""
    node.workerinput["jaxinfra_fresh_venv"] = str(node.config.stash[fresh_venv.BASE])


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start building the fresh venv the moment the session knows a selected test needs it (tests/support/
    fresh_venv.py): the build overlaps the unit tier."""
    if any("fresh_venv" in getattr(item, "fixturenames", ()) for item in session.items):
        session.config.stash[fresh_venv.KEY] = fresh_venv.start(session.config.stash[fresh_venv.BASE])


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the process that ends the session: every worker has ended
        base = session.config.stash[fresh_venv.BASE]
        fresh_venv.stop(base)
        shutil.rmtree(base, ignore_errors=True)


def _no_process(what: str) -> Any:
    def refuse(*args: object, **kwargs: object) -> Any:
        raise RuntimeError(
            f"a unit test may not start a process ({what}): mark the test (or its module) with the tier that does "
            "(docs/testing.md)"
        )

    return refuse


@pytest.fixture(autouse=True)
def _unit_starts_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """In a `unit` test, starting a child process fails at once: subprocess, fork, posix_spawn, multiprocessing."""
    if request.node.get_closest_marker("unit") is not None:
        monkeypatch.setattr(subprocess.Popen, "_execute_child", _no_process("subprocess"))
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                monkeypatch.setattr(os, name, _no_process(f"os.{name}"))
        monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", _no_process("multiprocessing"))
    yield
