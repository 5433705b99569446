"""The Jobs the JobSet controller creates pass the API server's front door as any Job does (kubernetes-sigs/jobset
pkg/controllers/jobset_controller.go constructJob, createJobs; kubernetes pkg/apis/batch/v1/defaults.go
SetDefaults_Job, pkg/apis/batch/validation/validation.go): the JobSet webhook does not look into pod templates, so
`jaxinfra validate` accepts a JobSet whose Jobs the API server then refuses (it never runs), and a replicatedJob
that leaves completions and parallelism unset gets 1 of each. JobSets in the style of JAX's Kubernetes example and
JobSet's depends-on example, run with --run-command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jaxinfra.yamlio import dump
from tests.support.jobsets import jobset, rjob, run
from tests.support.paths import ROOT

pytestmark = pytest.mark.simulator


def validate(tmp_path: Path, manifest: dict[str, Any]) -> int:
    """`jaxinfra validate` of `manifest`: its status."""
    path = tmp_path / "validated.yaml"
    path.write_text(dump([manifest]))
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "validate", str(path)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    return r.returncode


def jax_example(image: str | None) -> dict[str, Any]:
    """A JobSet like JAX's Kubernetes example: one replicatedJob of two workers whose image the user fills in."""
    workers = rjob("workers", "true", pods=2)
    workers["template"]["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return jobset("jax", workers)


def test_a_jobset_whose_pod_template_has_no_image_is_accepted_but_its_jobs_are_refused(tmp_path: Path) -> None:
    manifest = jax_example(None)
    assert validate(tmp_path, manifest) == 0  # the JobSet webhook skips pod templates
    rc, report, out = run(tmp_path, manifest)
    [workload] = report["workloads"]
    assert rc == 1, out
    assert workload["verdict"] == "failed" and workload["pods"] == 0 and workload["attempts"] == []
    [problem] = workload["problems"]
    assert problem["path"] == "JobSet/default/jax replicatedJobs[workers]"
    assert problem["message"].endswith(
        'the JobSet never runs: Job.batch "jax-workers-0" is invalid: spec.template.spec.containers[0].image: '
        "Required value"
    )


def test_the_same_jobset_with_an_image_runs(tmp_path: Path) -> None:
    manifest = jax_example("busybox:1.36")
    assert validate(tmp_path, manifest) == 0
    rc, report, out = run(tmp_path, manifest)
    [workload] = report["workloads"]
    assert rc == 0 and workload["verdict"] == "succeeded", out
    assert sorted(p["name"].rsplit("-", 1)[0] for p in workload["attempts"][-1]["pods"]) == [
        "jax-workers-0-0",
        "jax-workers-0-1",
    ]


def test_replicated_jobs_without_completions_or_parallelism_run_one_pod_per_job(tmp_path: Path) -> None:
    initializer = rjob("initializer", "true", completions=None, parallelism=None)
    trainer = rjob("trainer", "true", replicas=2, completions=None, parallelism=None)
    manifest = jobset(
        "depends-on", initializer, {**trainer, "dependsOn": [{"name": "initializer", "status": "Complete"}]}
    )
    assert validate(tmp_path, manifest) == 0
    rc, report, out = run(tmp_path, manifest)
    [workload] = report["workloads"]
    assert rc == 0 and workload["verdict"] == "succeeded", out
    assert sorted(p["name"].rsplit("-", 1)[0] for p in workload["attempts"][-1]["pods"]) == [
        "depends-on-initializer-0-0",
        "depends-on-trainer-0-0",
        "depends-on-trainer-1-0",
    ]
