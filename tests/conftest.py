"""Shared fixtures: the example project's stacks, their rendered manifests, and YAML snapshots in snapshots/."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from jaxinfra import manifests, stack
from jaxinfra.errors import SpecError
from jaxinfra.spec import BACKENDS, Cluster

ROOT = Path(__file__).resolve().parents[1]
#: The example project: the stacks, Pulumi and cdk8s files a team's repository holds (examples/training-infra/README.md).
EXAMPLE = ROOT / "examples" / "training-infra"
STACKS = stack.discover(EXAMPLE / "stacks")
#: The training program `jaxinfra init` writes and the example's stacks run (`python -m train`): package data.
TRAIN = ROOT / "src" / "jaxinfra" / "templates" / "train"
#: The example stack without its restart: the first failure is the verdict (the fault tests' input).
NO_RESTART = "benchmarks/stacks/cpu_dev_no_restart.py"

settings.register_profile("default", max_examples=40, deadline=None)
settings.register_profile("thorough", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


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


def problems_of(c: Any) -> list[Any]:
    """Every static problem of an emulated cluster (`jaxinfra.simulate.model.Cluster`)."""
    return [*c.problems, *(p for w in c.workloads for p in w.problems)]


def one_problem(c: Any, *needles: str) -> Any:
    """The single problem whose text mentions every needle (a precise, not an incidental, match)."""
    found = [p for p in problems_of(c) if all(n in str(p) for n in needles)]
    assert len(found) == 1, f"{needles} in {[str(p) for p in problems_of(c)]}"
    return found[0]


def tree_snapshot(root: Path, folders: bool = False) -> dict[str, Any]:
    """Every path under `root`: a folder, a symlink (its target), a file (its content, mtime, mode and owner); with
    `folders`, `root` itself and each folder's mtime too (an entry made and removed again shows)."""
    out: dict[str, Any] = {str(root): ("dir", root.stat().st_mtime_ns)} if folders else {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            st = path.lstat()
            if path.is_symlink():
                out[str(path)] = ("link", os.readlink(path))
            elif path.is_dir():
                out[str(path)] = ("dir", st.st_mtime_ns) if folders else ("dir",)
            else:
                out[str(path)] = (path.read_bytes(), st.st_mtime_ns, st.st_mode, st.st_uid)
    return out


def simulate_cli(*args: str, tmp: Path, timeout: float = 150) -> tuple[int, dict[str, Any], str]:
    """`jaxinfra simulate ARGS --json R --no-logs` in its own TMPDIR under `tmp`: its status, its JSON report and its
    output, after checking it printed no traceback and left nothing in that TMPDIR (the API server's log, the pods'
    files)."""
    import json
    import subprocess
    import sys
    import time

    scratch = tmp / f"tmp-{time.monotonic_ns()}"
    scratch.mkdir()
    report = tmp / f"report-{time.monotonic_ns()}.json"
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "simulate", *args, "--json", str(report), "--no-logs"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert list(scratch.iterdir()) == [], "the API server's log or the pods' files were left behind"
    return r.returncode, json.loads(report.read_text()) if report.exists() else {}, r.stdout + r.stderr
