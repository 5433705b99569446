"""A JobSet whose server is no JAX process, run under the built-in probe (issue #57, item 3): the probe runs in the
JAX workers, a stand-in that stays up in the server, and the JobSet completes as its controller decides.

The manifest (tests/manifests/jobset_server_beside_jax_workers.yaml) is in the style of JobSet's docs leader/worker
example and NVIDIA/JAX-Toolbox's jax-vllm-offloading workflow (a vLLM rollout server beside JAX workers), not copied:
two CPU workers with the Kubernetes docs' Indexed Job env contract, one server. On a cluster the server serves until
the JobSet is done: its `successPolicy` (All of [workers]) completes it once both workers have, and the JobSet
controller then deletes the server's Job
(kubernetes-sigs/jobset @ 08dfbdfd pkg/controllers/jobset_controller.go `executeSuccessPolicy`, a finished JobSet's
active Jobs deleted); without one, the webhook's default (All of every replicatedJob) waits for the server forever.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli import simulate_cli
from tests.support.paths import MANIFESTS

pytestmark = pytest.mark.simulator

RL = (MANIFESTS / "jobset_server_beside_jax_workers.yaml").read_text()


def run(tmp_path: Path, text: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    (tmp_path / "rl.yaml").write_text(text)
    return simulate_cli(str(tmp_path / "rl.yaml"), *extra, tmp=tmp_path)


def test_the_workers_form_the_group_and_the_server_is_deleted_once_they_are_done(tmp_path: Path) -> None:
    """The cluster's verdict: Completed, the workers succeeded, the server deleted. Each worker's probe finds the
    group of 2 with its own rank; the server runs no probe and meets no contract."""
    rc, report, out = run(tmp_path, RL, "--timeout", "120")
    [w] = report["workloads"]
    assert (rc, w["verdict"], w["problems"], w["other_pods"]) == (0, "succeeded", [], ["rl-rollout-0-0"]), out
    server, *workers = w["attempts"][0]["pods"]
    assert server["phase"] == "deleted" and "completed (successPolicy All of workers)" in server["reason"], out
    assert server["checks"] == {} and server["exit_code"] == 0  # the stand-in ran no probe, and stopped at SIGTERM
    assert [p["phase"] for p in workers] == ["succeeded", "succeeded"]
    assert [p["rank"] for p in (server, *workers)] == [None, 0, 1]  # the JAX ranks: the server holds none
    ranks = [p["checks"]["rank"] for p in workers]
    assert [r["ok"] for r in ranks] == [True, True], out
    assert [r["detail"].split(", ")[:2] for r in ranks] == [
        ["process_index=0", "process_count=2"],
        ["process_index=1", "process_count=2"],
    ]


def test_without_a_success_policy_the_server_keeps_the_jobset_running(tmp_path: Path) -> None:
    """The webhook's default successPolicy is All of every replicatedJob: a server never completes, so on a cluster
    the JobSet keeps running after the workers are done; here it is not finished at --timeout."""
    spec = yaml.safe_load(RL)
    del spec["spec"]["successPolicy"]
    rc, report, out = run(tmp_path, yaml.safe_dump(spec), "--timeout", "15")
    [w] = report["workloads"]
    assert (rc, w["verdict"]) == (1, "not finished"), out
    assert "--timeout reached with pods still running: rl-rollout-0-0" in w["reason"], out
    assert [p["phase"] for p in w["attempts"][0]["pods"][1:]] == ["succeeded", "succeeded"], out


def test_a_coordinator_on_the_server_fails_before_anything_runs(tmp_path: Path) -> None:
    """The workers name the server's pod as their coordinator: on a cluster nothing listens there for JAX and they
    fail at their init timeout. Rank 0 is the workers' first pod, which the problem names."""
    rc, report, out = run(tmp_path, RL.replace("rl-workers-0-0.rl:1234", "rl-rollout-0-0.rl:1234"))
    [w] = report["workloads"]
    assert (rc, w["verdict"], w["attempts"]) == (1, "failed", []), out
    [problem] = w["problems"]
    assert "not to rank 0 (pod rl-workers-0-0)" in problem["message"], out
