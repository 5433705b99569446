"""`jaxinfra explain FILE.yaml...` (issue #42, "why would this pend"): per workload of hand-written manifests, what
would hold it and the fix, decided by the simulator's own emulation before any pod starts
(`jaxinfra_sim.cluster.pending`: the controllers, the API server's front door, Kueue), so it says what `jaxinfra
simulate` would. The inputs are xpk's cluster objects and JobSet (tests/manifests/xpk_cluster_*.yaml,
jobset_*_xpk_style.yaml), edited the ways clusters go wrong."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxinfra.admission import Request
from jaxinfra_sim.cluster import sources
from jaxinfra_sim.cluster.pending import Pending, lines, pending
from jaxinfra_sim.core.model import Hold
from tests.support.paths import MANIFESTS, ROOT

pytestmark = pytest.mark.simulator

GPU_CLUSTER = MANIFESTS / "xpk_cluster_gpu_a3high.yaml"
TPU_CLUSTER = MANIFESTS / "xpk_cluster_tpu.yaml"
A3_HIGH = MANIFESTS / "jobset_gpu_a3high_xpk_style.yaml"
TPU_JOBSET = MANIFESTS / "jobset_tpu_multislice_platform_env.yaml"


def _docs(*paths: Path) -> list[dict[str, Any]]:
    return [d for p in paths for d in yaml.safe_load_all(p.read_text()) if d]


def _one(docs: list[dict[str, Any]]) -> Pending:
    source = sources.admitted("test.yaml", [Request("test.yaml", i, d) for i, d in enumerate(docs)])
    assert source.problems == (), source.problems
    [found] = pending(source)
    return found


def _jobset(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [js] = [d for d in docs if d["kind"] == "JobSet"]
    return js


def test_xpks_gpu_jobset_on_its_flex_cluster_waits_only_for_capacity() -> None:
    found = _one(_docs(A3_HIGH, GPU_CLUSTER))
    assert found.workload == "JobSet/default/a3high" and not found.holds, found
    assert found.queued is not None and found.queued.held is Hold.CHECK and found.queued.provisioning == ("dws-prov",)
    said = list(lines(found))
    assert any("rehearse the wait with `jaxinfra simulate --provision dws-prov@SECONDS`" in line for line in said)
    assert said[-1] == "  nothing here holds it beyond its provisioning wait", said


@pytest.mark.parametrize(
    ("edit", "held", "message", "fix"),
    [
        ("no-local-queue", Hold.QUEUE, "LocalQueue default/multislice-queue does not exist", "add the LocalQueue"),
        (
            "no-topology",
            Hold.INACTIVE,
            'is inactive (TopologyNotFound): Can\'t admit new workloads: there is no Topology "gke-default"',
            "add the Topology gke-default",
        ),
        (
            "priority",
            Hold.PRIORITY,
            "WorkloadPriorityClass urgent (its kueue.x-k8s.io/priority-class label) does not exist",
            "add the WorkloadPriorityClass urgent",
        ),
        (
            "three-nodes",
            Hold.QUOTA,
            "current podset request (24) > maximum capacity (16)",
            "raise the nominalQuota of ClusterQueue cluster-queue",
        ),
        (
            "required-block",
            Hold.TOPOLOGY,
            'Flavor "1xh100-80gb-8" does not contain the requested level (cloud.google.com/gke-nodepool)',
            "name a Topology with level cloud.google.com/gke-nodepool",
        ),
    ],
)
def test_what_holds_xpks_gpu_jobset_and_the_fix(edit: str, held: Hold, message: str, fix: str) -> None:
    docs = _docs(A3_HIGH, GPU_CLUSTER)
    template = _jobset(docs)["spec"]["replicatedJobs"][0]["template"]["spec"]
    if edit == "no-local-queue":
        docs = [d for d in docs if d["kind"] != "LocalQueue"]
    elif edit == "no-topology":
        docs = [d for d in docs if d["kind"] != "Topology"]
    elif edit == "priority":
        _jobset(docs)["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "urgent"
    elif edit == "three-nodes":
        template["parallelism"] = template["completions"] = 3
    elif edit == "required-block":
        annotations = template["template"]["metadata"]["annotations"]
        annotations["kueue.x-k8s.io/podset-required-topology"] = "cloud.google.com/gke-nodepool"
    found = _one(docs)
    assert found.holds and found.queued is not None and found.queued.held is held, found.queued
    said = "\n".join(lines(found))
    assert f"held by Kueue ({held}): " in said and message in said, said
    assert f"  fix: {fix}" in said, said


def test_a_workload_without_a_queue_is_not_held_by_kueue_but_its_pods_refusals_are_said() -> None:
    found = _one(_docs(TPU_JOBSET))
    assert found.queued is None and not found.holds, found
    assert list(lines(found)) == [
        "  JAX group: 8 processes in 8 pods, one per pod",
        "  not queued to Kueue (no kueue.x-k8s.io/queue-name label): its pods are created at once",
        "  nothing here holds it",
    ]
    docs = _docs(A3_HIGH)
    docs = [d for d in docs if d["kind"] != "ServiceAccount"]  # its pods name xpk-sa
    found = _one(docs)
    assert found.holds and found.queued is not None and found.queued.admitted, found
    said = "\n".join(lines(found))
    assert "would also stop it: JobSet/default/a3high serviceAccountName = xpk-sa" in said, said
    assert "add a ServiceAccount 'xpk-sa' in namespace 'default'" in said, said


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")} | {"TERM": "dumb"}
    return subprocess.run(
        [sys.executable, "-m", "jaxinfra", "explain", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=180,
    )


def test_explain_on_manifests_from_the_command_line(tmp_path: Path) -> None:
    r = _cli(str(A3_HIGH), str(GPU_CLUSTER))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert f"JobSet/default/a3high ({A3_HIGH})" in r.stdout, r.stdout
    assert (  # the JobSet's file brings its own ClusterQueue: the cluster's, applied later, decides
        f"note: ClusterQueue/cluster-queue defined in {A3_HIGH} and {GPU_CLUSTER}: the later apply wins" in r.stdout
    ), r.stdout
    assert "waits for capacity: until GKE provisions it (AdmissionCheck dws-prov)" in r.stdout, r.stdout
    docs = [d for d in _docs(A3_HIGH, GPU_CLUSTER) if d["kind"] != "AdmissionCheck"]
    held = tmp_path / "held.yaml"
    held.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    r = _cli(str(held))
    assert r.returncode == 0, r.stderr  # a held workload is an answer, not an error
    assert "held by Kueue (inactive): ClusterQueue cluster-queue is inactive (AdmissionCheckNotFound)" in r.stdout
    assert "fix: add the AdmissionCheck dws-prov to the manifests" in r.stdout, r.stdout
    [topology] = [d for d in docs if d["kind"] == "Topology"]
    topology["spec"]["levels"] = "block"  # what the API server refuses is an input problem
    held.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    r = _cli(str(held))
    assert r.returncode == 2 and "spec.levels" in r.stderr, r.stderr


def test_explain_on_hostile_manifests_writes_nothing_and_touches_no_host_path(tmp_path: Path) -> None:
    """Manifest strings never become host paths: hostPath volumes at the machine's own folders, a subPath that climbs,
    are read and judged, never opened; explain writes nothing (its TMPDIR and HOME stay empty)."""
    docs = _docs(A3_HIGH, GPU_CLUSTER)
    spec = _jobset(docs)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    spec["volumes"] += [{"name": "root", "hostPath": {"path": "/"}}, {"name": "etc", "hostPath": {"path": "/etc"}}]
    spec["containers"][0]["volumeMounts"] += [
        {"name": "root", "mountPath": "/host"},
        {"name": "etc", "mountPath": "/host-etc", "subPath": "shadow"},
    ]
    path = tmp_path / "hostile.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    scratch, home = tmp_path / "tmp", tmp_path / "home"
    scratch.mkdir()
    home.mkdir()
    before = {p: p.stat().st_mtime_ns for p in (Path("/etc"), Path("/etc/shadow")) if p.exists()}
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "explain", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env | {"TERM": "dumb", "TMPDIR": str(scratch), "HOME": str(home)},
        timeout=180,
    )
    assert r.returncode == 0 and "JobSet/default/a3high" in r.stdout, r.stdout + r.stderr
    assert list(scratch.iterdir()) == [] and list(home.iterdir()) == []
    assert {p: p.stat().st_mtime_ns for p in before} == before


def test_explain_says_a_workload_borrows_in_its_cohort_or_exceeds_what_it_may_take() -> None:
    from tests.sim.kueue.test_cohorts import docs, team

    found = _one(docs(team("team-a-cq", "team-ab", "4"), team("team-b-cq", "team-ab", "4")))
    assert not found.holds and "(default-flavor: cpu 6 of 4, borrowing 2 in cohort team-ab)" in "\n".join(lines(found))
    found = _one(docs(team("team-a-cq", "team-ab", "4"), team("team-b-cq", "team-ab", "4", lendingLimit="1")))
    said = "\n".join(lines(found))
    assert found.queued is not None and found.queued.held is Hold.QUOTA, found.queued
    assert "current podset request (6) > maximum capacity (5)" in said, said
    assert "fix: raise ClusterQueue team-a-cq's nominalQuota or its borrowingLimit" in said, said
