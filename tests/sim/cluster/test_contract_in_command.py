"""An Indexed Job whose shell script computes the JAX contract (issue #57, item 1): the probe cannot know what a
script computes, so it gives no verdict (`undetermined`, exit 4); `--run-command` runs the script and its run is the
verdict, as on a cluster.

The manifest (tests/manifests/indexed_job_contract_in_script.yaml) is in the style of NVIDIA/JAX-Toolbox's
.github/eks-workflow-files/job.yml, not copied: an Indexed Job with a headless Service whose `sh -c` script passes the
coordinator (`${JOB_NAME}-0.${SERVICE_NAME}:3389`), the process count and the rank (`$JOB_COMPLETION_INDEX`) to the
program as flags; the program hands them to `jax.distributed.initialize` (jax-ml/jax v0.10.2
jax/_src/distributed.py, which refuses a `process_id` outside `0..num_processes-1` with a ValueError).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jaxinfra.errors import UNDETERMINED
from jaxinfra_sim.jax.processes import COMPUTED_BY_COMMAND
from tests.support.cli import simulate_cli
from tests.support.paths import MANIFESTS

pytestmark = pytest.mark.simulator

RIGHT = (MANIFESTS / "indexed_job_contract_in_script.yaml").read_text()
WRONG = RIGHT.replace("--process-id=$JOB_COMPLETION_INDEX", "--process-id=$((JOB_COMPLETION_INDEX + 1))")  # 1, 2 of 2


def run(tmp_path: Path, text: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    (tmp_path / "job.yaml").write_text(text)
    return simulate_cli(str(tmp_path / "job.yaml"), "--timeout", "120", *extra, tmp=tmp_path)


def test_the_probe_says_it_cannot_know_exit_4(tmp_path: Path) -> None:
    """JAX-Toolbox's CI runs such a Job green; the probe neither passes it nor claims the cluster's failure: the
    verdict is `undetermined`, its own exit status, in the JSON, the trace and the HTML report; no pod is run."""
    html, trace = tmp_path / "report.html", tmp_path / "trace.json"
    rc, report, out = run(tmp_path, RIGHT, "--html", str(html), "--trace", str(trace))
    [w] = report["workloads"]
    assert (rc, report["ok"], report["undetermined"]) == (UNDETERMINED, False, True), out
    assert (w["verdict"], w["problems"], w["attempts"]) == ("undetermined", [], []), out
    assert w["reason"].startswith(COMPUTED_BY_COMMAND) and "JAX_COORDINATOR_ADDRESS and JAX_PROCESS_ID" in w["reason"]
    assert "simulation undetermined: " in out and "fails" not in w["reason"]
    assert "jaxinfra simulation undetermined: 1 workload" in html.read_text()
    marks = [e["name"] for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "i"]
    assert any(m.startswith("Job/default/nccl-test: undetermined") for m in marks), marks


def test_run_command_runs_the_script_that_computes_it_right(tmp_path: Path) -> None:
    """Ranks 0 and 1 of 2, the coordinator rank 0's name: on a cluster both processes join and the Job completes."""
    rc, report, out = run(tmp_path, RIGHT, "--run-command")
    [w] = report["workloads"]
    assert (rc, w["verdict"]) == (0, "succeeded"), out
    assert [p["exit_code"] for p in w["attempts"][0]["pods"]] == [0, 0], out


def test_run_command_fails_the_script_that_computes_a_wrong_rank(tmp_path: Path) -> None:
    """Ranks 1 and 2 of 2: on a cluster the second process's initialize raises ValueError (process_id must be below
    num_processes), its pod fails, and the Job fails (backoffLimit 0)."""
    rc, report, out = run(tmp_path, WRONG, "--run-command")
    [w] = report["workloads"]
    assert (rc, w["verdict"]) == (1, "failed"), out
    assert "BackoffLimitExceeded" in w["reason"], out
    said = [line for p in w["attempts"][0]["pods"] for line in p["stderr_tail"]]
    assert any("process_id < num_processes" in line for line in said), said
