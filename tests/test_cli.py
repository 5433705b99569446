"""The CLI as users run it: a subprocess, exit codes, files written (or not), no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.paths import ROOT, STACKS
from tests.support.stacks import PAIR_IDS, PAIRS

pytestmark = pytest.mark.simulator

GOOD = """
from jaxinfra import TPU, GPU, CPU, Cluster, JaxJob, NodePool
cluster = Cluster(name="x", node_pools=[{pools}], jobs=[{jobs}])
"""


def run(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jaxinfra", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=120,
    )


def stack_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "stack.py"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize(("path", "backend"), PAIRS, ids=PAIR_IDS)
def test_synth_is_valid_and_byte_identical_across_hash_seeds(path: Path, backend: str, tmp_path: Path) -> None:
    outs = []
    for seed in ("0", "12345"):
        out = tmp_path / seed
        r = run("synth", str(path), "-o", str(out), "--backend", backend, env={"PYTHONHASHSEED": seed})
        assert r.returncode == 0, r.stderr
        outs.append(sorted(out.glob("*.yaml")))
    assert [p.name for p in outs[0]] == [p.name for p in outs[1]] and len(outs[0]) == 1
    assert outs[0][0].read_bytes() == outs[1][0].read_bytes()
    r = run("validate", str(outs[0][0]))
    assert r.returncode == 0, r.stderr


BAD = {
    "unknown accelerator": (
        'NodePool("p", TPU("v9x", "2x2"))',
        'JaxJob("t", image="i", node_pool="p")',
        "node_pools[0].accelerator.generation",
    ),
    "topology": (
        'NodePool("p", TPU("v5e", "3x3"))',
        'JaxJob("t", image="i", node_pool="p")',
        "node_pools[0].accelerator.topology",
    ),
    "multi-slice single-host": (
        'NodePool("p", TPU("v5e", "2x2"))',
        'JaxJob("t", image="i", node_pool="p", slices=2)',
        "jobs[0].slices",
    ),
    "hostname too long": (
        'NodePool("p", TPU("v5p", "2x2x4"))',
        f'JaxJob("{"a" * 56}", image="i", node_pool="p")',
        "jobs[0].name",
    ),
    "port": (
        'NodePool("p", CPU())',
        'JaxJob("t", image="i", node_pool="p", coordinator_port=0)',
        "jobs[0].coordinator_port",
    ),
    "zero count": ('NodePool("p", CPU())', 'JaxJob("t", image="i", node_pool="p", nodes=0)', "jobs[0].nodes"),
    "negative count": (
        'NodePool("p", TPU("v5p-16"))',
        'JaxJob("t", image="i", node_pool="p", slices=-2)',
        "jobs[0].slices",
    ),
    "too many GPUs": (
        'NodePool("p", GPU("h100-80gb", 9))',
        'JaxJob("t", image="i", node_pool="p")',
        "node_pools[0].accelerator.count",
    ),
    "unknown backend": (
        'NodePool("p", CPU())',
        'JaxJob("t", image="i", node_pool="p", backend="mpi")',
        "jobs[0].backend",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_exits_2_with_one_line_per_problem(case: str, tmp_path: Path) -> None:
    pools, jobs, where = BAD[case]
    path = stack_file(tmp_path, GOOD.format(pools=pools, jobs=jobs))
    out = tmp_path / "out"
    r = run("synth", str(path), "-o", str(out))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in r.stderr
    assert lines[0].startswith(f"error: {path}: {where} = ") and "fix: " in lines[0]
    assert lines[1].startswith("jaxinfra: 1 problem") and "nothing written" in lines[1]
    assert not out.exists()


def test_all_problems_at_once_and_nothing_written(tmp_path: Path) -> None:
    bad = stack_file(
        tmp_path,
        GOOD.format(
            pools='NodePool("p", TPU("v5e", "3x3")), NodePool("q", GPU("l4", 3))',
            jobs='JaxJob("t", image="i", node_pool="p", coordinator_port=99999, backend="x")',
        ),
    )
    good = ROOT / "stacks" / "cpu_dev.py"
    out = tmp_path / "out"
    r = run("synth", str(good), str(bad), "-o", str(out))
    assert r.returncode == 2 and r.stderr.count("error: ") == 4
    assert not out.exists()


def test_syntax_error_in_stack(tmp_path: Path) -> None:
    r = run(
        "synth",
        str(stack_file(tmp_path, "from jaxinfra import Cluster\ncluster = Cluster(name='x'\n")),
        "-o",
        str(tmp_path / "o"),
    )
    assert r.returncode == 2 and "syntax error" in r.stderr and "stack.py:2" in r.stderr and "Traceback" not in r.stderr


def test_stack_that_raises_and_missing_file(tmp_path: Path) -> None:
    r = run("synth", str(stack_file(tmp_path, "x = 1 / 0\n")), str(tmp_path / "missing.py"), "--stdout")
    assert (
        r.returncode == 2
        and "ZeroDivisionError" in r.stderr
        and "missing.py" in r.stderr
        and "Traceback" not in r.stderr
    )


def test_backend_override_errors(tmp_path: Path) -> None:
    r = run("synth", "stacks/tpu_v5p_2x2x4_x2.py", "--backend", "job", "--stdout")
    assert r.returncode == 2 and "jobs[0].backend = 'job'" in r.stderr and r.stdout == ""
    r = run("synth", "stacks/cpu_dev.py", "--backend", "slurm", "--stdout")
    assert r.returncode == 2 and "--backend = 'slurm'" in r.stderr


def test_stdout_and_folder_arguments_skip_helpers() -> None:
    r = run("synth", "stacks", "--stdout")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("kind: JobSet") == len(STACKS)  # one JobSet per stack


def test_catalog_json_rows() -> None:
    r = run("catalog", "--json")
    rows = json.loads(r.stdout)
    assert {"name", "kind", "topology", "chips", "hosts", "chips_per_host", "machine_type", "gke_accelerator"} <= set(
        rows[0]
    )
    assert {r["kind"] for r in rows} == {"tpu", "gpu", "cpu"}
    v5p16 = [r for r in rows if "v5p-16" in r["aliases"]]
    assert [(r["topology"], r["hosts"], r["chips_per_host"]) for r in v5p16] == [("2x2x2", 2, 4)]
    assert run("catalog", "no-such-thing").returncode == 1


def test_explain_shows_contract_per_rank() -> None:
    r = run("explain", "stacks/cpu_dev.py", "--all-ranks", env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "train-node-0-0.train:8482" in r.stdout and "JAX_PROCESS_ID=1" in r.stdout and "train-node-0-1" in r.stdout


def test_validate_reports_every_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {clusterIPs: 1, typo: 2}\n")
    r = run("validate", str(bad))
    assert r.returncode == 2 and r.stderr.count("error: ") >= 2 and "Traceback" not in r.stderr


def test_cold_start_imports_no_jax_cdk8s_or_pulumi() -> None:
    code = (
        "import sys; from jaxinfra.entry import main\n"
        "try: main(['synth', 'stacks/tpu_v5p_2x2x4_x2.py', '--stdout'])\n"
        "except SystemExit: pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'jax', 'cdk8s', 'jsii', 'pulumi', 'rich', "
        "'jsonschema'})\n"
        "print(heavy, file=sys.stderr)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.stderr.strip().splitlines()[-1] == "[]"
