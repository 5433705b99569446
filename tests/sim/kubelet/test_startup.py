"""When a JobSet's controller creates each replicatedJob's Jobs, and the claims it creates for them
(kubernetes-sigs/jobset @ 08dfbdfd pkg/controllers/jobset_controller.go, depends_on.go, startup_policy.go,
volume_claim_policy.go): `dependsOn` a replicatedJob Complete or Ready, `startupPolicy: InOrder`,
`volumeClaimPolicies`. JobSets in the style of JobSet's depends-on, startup-policy and volume-claim-policy examples
(an initializer, a launcher, workers), run with --run-command; the order shows in the pods' start times."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.jobsets import jobset, only_workload, rjob, run

pytestmark = pytest.mark.simulator


def depends(rjob_: dict[str, Any], name: str, status: str) -> dict[str, Any]:
    return {**rjob_, "dependsOn": [{"name": name, "status": status}]}


def timings(workload: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each pod's phase times in the last attempt, by its replicatedJob (the first pod of each)."""
    out: dict[str, dict[str, float]] = {}
    for pod in workload["attempts"][-1]["pods"]:
        out.setdefault(pod["name"].split("-")[1], pod["timings"])
    return out


def test_when_the_initializer_fails_the_jobs_that_depend_on_it_are_never_created(tmp_path: Path) -> None:
    manifest = jobset(
        "dep", rjob("initializer", "exit 3"), depends(rjob("launcher", "true", pods=2), "initializer", "Complete")
    )
    workload = only_workload(tmp_path, manifest)
    assert workload["verdict"] == "failed" and "exit code 3" in workload["reason"]
    launchers = [p for p in workload["attempts"][0]["pods"] if "-launcher-" in p["name"]]
    assert [(p["pid"], p["reason"]) for p in launchers] == [
        (None, "never created: its JobSet's dependsOn initializer: Complete was not reached")
    ] * 2


def test_in_order_startup_creates_the_workers_once_the_driver_is_ready(tmp_path: Path) -> None:
    manifest = jobset(
        "ordered",
        rjob("driver", "sleep 1.5"),
        rjob("workers", "true", pods=2),
        startupPolicy={"startupPolicyOrder": "InOrder"},
    )
    workload = only_workload(tmp_path, manifest)
    assert workload["verdict"] == "succeeded"
    t = timings(workload)
    assert t["driver"]["started"] <= t["workers"]["started"] < t["driver"]["succeeded"]


def test_a_dependency_that_never_completes_leaves_the_jobset_not_finished(tmp_path: Path) -> None:
    manifest = jobset(
        "dep", rjob("initializer", "sleep 60"), depends(rjob("launcher", "true"), "initializer", "Complete")
    )
    workload = only_workload(tmp_path, manifest, timeout="2")
    assert workload["verdict"] == "not finished"
    assert "dep-launcher-0-0 (not created yet, waiting for dependsOn initializer: Complete)" in workload["reason"]


def claim_policies(*templates: str, retain: bool = False) -> list[dict[str, Any]]:
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    policy: dict[str, Any] = {"templates": [{"metadata": {"name": t}, "spec": spec} for t in templates]}
    if retain:
        policy["retentionPolicy"] = {"whenDeleted": "Retain"}
    return [policy]


def mounting(rjob_: dict[str, Any], *mounts: tuple[str, str]) -> dict[str, Any]:
    """The replicatedJob with its container mounting each (volume, path)."""
    [container] = rjob_["template"]["spec"]["template"]["spec"]["containers"]
    container["volumeMounts"] = [{"name": name, "mountPath": path} for name, path in mounts]
    return rjob_


def test_claims_from_volume_claim_policies_are_created_and_shared_by_the_jobs_that_mount_them(tmp_path: Path) -> None:
    """JobSet's volume-claim-policy example: an initializer writes into one claim, the nodes read it once it is
    Complete and each write into another, retained claim (`--volume outputs-train=DIR` keeps it here)."""
    prepare = mounting(rjob("prepare", "echo w0 > /data/weights.txt"), ("weights", "/data"))
    nodes = mounting(
        rjob("node", 'cat /data/weights.txt && echo "$JOB_COMPLETION_INDEX" > /out/node-$JOB_COMPLETION_INDEX', pods=2),
        ("weights", "/data"),
        ("outputs", "/out"),
    )
    manifest = jobset(
        "train",
        prepare,
        depends(nodes, "prepare", "Complete"),
        volumeClaimPolicies=[*claim_policies("weights"), *claim_policies("outputs", retain=True)],
    )
    kept = tmp_path / "outputs"
    workload = only_workload(tmp_path, manifest, "--volume", f"outputs-train={kept}")
    assert workload["verdict"] == "succeeded"
    assert sorted(p.name for p in kept.iterdir()) == ["node-0", "node-1"]


def test_a_claim_template_no_container_mounts_is_refused(tmp_path: Path) -> None:
    manifest = jobset("train", rjob("prepare", "true"), volumeClaimPolicies=claim_policies("weights"))
    rc, report, out = run(tmp_path, manifest)
    assert rc == 2 and "don't have a matching volumeMount: weights from VolumeClaimPolicies" in out, out
