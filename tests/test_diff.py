"""`jaxinfra diff`: a stack against YAML synthesized before; immutable fields flagged for delete-and-recreate."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest

from jaxinfra.diff import RECREATE, WORKLOAD_KINDS, Key, diff, read_dir
from jaxinfra.yamlio import dump
from tests.support.paths import ROOT
from tests.support.stacks import rendered

pytestmark = pytest.mark.unit

CPU_DEV = ROOT / "stacks" / "cpu_dev.py"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jaxinfra", *args], capture_output=True, text=True, cwd=ROOT, timeout=60
    )


def synthesized(tmp_path: Path, backend: str = "jobset") -> Path:
    r = cli("synth", str(CPU_DEV), "--backend", backend, "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    return tmp_path / "out"


def edit(objs: list[dict], kind: str) -> dict:
    return next(o for o in objs if o["kind"] == kind)


@pytest.mark.simulator
def test_identical_is_no_changes(tmp_path: Path) -> None:
    r = cli("diff", str(CPU_DEV), str(synthesized(tmp_path)))
    assert (r.returncode, r.stdout) == (0, "jaxinfra: no changes\n"), r.stderr


@pytest.mark.simulator
def test_image_change_is_immutable_and_needs_recreate(tmp_path: Path) -> None:
    out = synthesized(tmp_path)
    [f] = out.glob("*.yaml")
    f.write_text(f.read_text().replace("image: python:3.11-slim", "image: old:1"))
    r = cli("diff", str(CPU_DEV), str(out))
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines() == [
        f"~ JobSet default/train (jobset.x-k8s.io): changed, {RECREATE}",
        "    spec.replicatedJobs[0].template.spec.template.spec.containers[0].image: 'old:1' -> 'python:3.11-slim'  "
        "[immutable]",
        "jaxinfra: 0 added, 0 removed, 1 changed (1 to delete and recreate)",
    ]


def test_label_change_is_mutable() -> None:
    now = rendered(CPU_DEV, "jobset")
    before = copy.deepcopy(now)
    edit(before, "JobSet")["metadata"]["labels"]["team"] = "x"
    d = diff(now, before)
    [od] = d.objects
    assert (od.status, od.recreate) == ("changed", False)
    assert [(f.path, f.old, f.kind) for f in od.fields] == [("metadata.labels.team", "x", "mutable")]
    assert d.lines()[0] == "~ JobSet default/train (jobset.x-k8s.io): changed in place"


def test_added_and_removed_objects_in_apply_order() -> None:
    now = rendered(CPU_DEV, "jobset")
    before = [o for o in now if o["kind"] != "Service"] + [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "old", "namespace": "default"}}
    ]
    d = diff(now, before)
    assert [(o.status, o.key) for o in d.objects] == [
        ("added", Key("", "Service", "default", "train")),
        ("removed", Key("", "ConfigMap", "default", "old")),
    ]
    assert d.summary() == "1 added, 1 removed, 0 changed (0 to delete and recreate)"


@pytest.mark.parametrize(
    ("kind", "path", "value", "expected"),
    [
        ("Job", ("spec", "completions"), 3, "replaced"),  # Indexed, new completions == parallelism: elastic
        ("Job", ("spec", "selector"), {"matchLabels": {"a": "b"}}, "immutable"),
        ("Job", ("spec", "backoffLimit"), 7, "replaced"),  # mutable upstream, replaced by Pulumi
        ("Job", ("metadata", "annotations"), {"a": "b"}, "mutable"),
        ("Service", ("spec", "clusterIP"), "10.0.0.1", "immutable"),
    ],
)
def test_job_and_service_fields(kind: str, path: tuple[str, str], value: object, expected: str) -> None:
    now = rendered(CPU_DEV, "job")
    before = copy.deepcopy(now)
    edit(before, kind)[path[0]][path[1]] = value
    [od] = diff(now, before).objects
    assert {f.kind for f in od.fields} == {expected}


def test_job_completions_out_of_tandem_with_parallelism_is_immutable() -> None:
    before = rendered(CPU_DEV, "job")
    now = copy.deepcopy(before)
    edit(now, "Job")["spec"]["completions"] = 5
    [od] = diff(now, before).objects
    assert [(f.path, f.kind) for f in od.fields] == [("spec.completions", "immutable")]


def test_elastic_indexed_job_completions_with_parallelism_is_not_immutable() -> None:
    now = rendered(CPU_DEV, "job")
    before = copy.deepcopy(now)
    edit(before, "Job")["spec"].update(completions=5, parallelism=5)
    [od] = diff(now, before).objects
    assert {f.kind for f in od.fields} == {"replaced"}


@pytest.mark.simulator
def test_backend_change_is_a_removed_and_an_added_workload(tmp_path: Path) -> None:
    r = cli("diff", str(CPU_DEV), str(synthesized(tmp_path, "jobset")), "--backend", "job")
    assert r.returncode == 1
    assert (
        "+ Job default/train (batch): added" in r.stdout
        and "- JobSet default/train (jobset.x-k8s.io): removed" in r.stdout
    )


@pytest.mark.simulator
def test_input_problems_exit_2(tmp_path: Path) -> None:
    r = cli("diff", str(CPU_DEV), str(tmp_path / "missing"))
    assert r.returncode == 2 and "no such directory" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "a.yaml").write_text("kind: [\n")
    (tmp_path / "bad" / "b.yaml").write_text("- 1\n")
    r = cli("diff", str(CPU_DEV), str(tmp_path / "bad"))
    assert r.returncode == 2 and "2 problems (unreadable DIR)" in r.stderr, r.stderr
    r = cli("diff", str(tmp_path / "nostack.py"), str(synthesized(tmp_path)))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_read_dir_round_trips_synth(tmp_path: Path) -> None:
    objs = rendered(CPU_DEV, "trainjob")
    (tmp_path / "c.yaml").write_text(dump(objs))
    loaded, problems = read_dir(tmp_path)
    assert problems == [] and not diff(objs, loaded).changed


def test_workload_kinds_agree_with_the_pulumi_component() -> None:
    pulumi = pytest.importorskip("jaxinfra.pulumi")
    assert pulumi.WORKLOAD_KINDS == WORKLOAD_KINDS
