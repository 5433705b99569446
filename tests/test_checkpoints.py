"""Checkpoint storage in the spec (issue 14): a Cloud Storage bucket through GKE's FUSE CSI driver, or a
PersistentVolumeClaim, mounted at /checkpoints on every backend and named by JAXINFRA_CHECKPOINT_DIR;
strictly valid, within Pod Security `restricted`, explained; bad input one error listing every problem;
and the simulator runs the example stack's program on it, a killed host resuming from its checkpoint."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jaxinfra import CPU, PVC, TPU, Cluster, GCSBucket, JaxJob, NodePool, SpecError, manifests
from jaxinfra.explain import facts
from jaxinfra.plan import plan
from jaxinfra.spec import BACKENDS
from jaxinfra.validate import validate_objects
from tests.support.paths import ROOT, TRAIN
from tests.test_security import pod_specs, restricted_violations

pytestmark = pytest.mark.simulator

STORAGE = {
    "bucket": GCSBucket("team-ckpt"),
    "rendered claim": PVC(size="50Gi", storage_class="standard-rwx"),
    "rendered claim, named": PVC("shared-ckpt", size="5Gi"),
    "existing claim": PVC("ckpt"),
}


def cluster_of(backend: str, storage: Any, **job: Any) -> Cluster:
    return Cluster(
        name="c",
        node_pools=[NodePool("cpu", CPU(devices=2))],
        jobs=[
            JaxJob(
                "train",
                namespace="ml",
                image="img",
                command=["python", "-m", "train"],
                node_pool="cpu",
                nodes=2,
                backend=backend,
                checkpoints=storage,
                **job,
            )
        ],
    )


def pod_templates(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every pod template (metadata and spec) jaxinfra renders."""
    out = []
    for o in objects:
        spec = o.get("spec", {})
        if o["kind"] == "Job":
            out.append(spec["template"])
        elif o["kind"] == "JobSet":
            out += [rj["template"]["spec"]["template"] for rj in spec["replicatedJobs"]]
        elif o["kind"] == "JAXJob":
            out += [r["template"] for r in spec["jaxReplicaSpecs"].values()]
        elif o["kind"] == "TrainingRuntime":
            out += [rj["template"]["spec"]["template"] for rj in spec["template"]["spec"]["replicatedJobs"]]
    return out


def container_env(objects: list[dict[str, Any]]) -> dict[str, str]:
    """The env jaxinfra writes for the JAX container (a TrainJob's goes into its trainer, which Trainer merges in)."""
    [trainjob] = [o for o in objects if o["kind"] == "TrainJob"] or [None]
    env = trainjob["spec"]["trainer"]["env"] if trainjob else pod_templates(objects)[0]["spec"]["containers"][0]["env"]
    return {e["name"]: e.get("value") for e in env}


@pytest.mark.parametrize("storage", list(STORAGE))
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_mounts_the_storage_and_names_it(backend: str, storage: str) -> None:
    spec = STORAGE[storage]
    cluster = cluster_of(backend, spec)
    objects = manifests(cluster)
    assert validate_objects(objects) == [], "strictly valid: Kubernetes 1.37 and the CRD schemas"
    [template] = pod_templates(objects)
    [container] = template["spec"]["containers"]
    assert container["volumeMounts"] == [{"name": "checkpoints", "mountPath": "/checkpoints"}]
    [volume] = template["spec"]["volumes"]
    assert container_env(objects)["JAXINFRA_CHECKPOINT_DIR"] == "/checkpoints"
    annotations = template["metadata"].get("annotations", {})
    claims = [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
    if isinstance(spec, GCSBucket):
        assert volume == {
            "name": "checkpoints",
            "csi": {
                "driver": "gcsfuse.csi.storage.gke.io",
                "volumeAttributes": {
                    "bucketName": "team-ckpt",
                    "mountOptions": "uid=1000,gid=1000,rename-dir-limit=200000",
                },
            },
        }
        assert annotations == {"gke-gcsfuse/volumes": "true"}, "GKE injects the driver's sidecar only into such pods"
        assert not claims
    else:
        name = spec.name or "train-checkpoints"
        assert volume == {"name": "checkpoints", "persistentVolumeClaim": {"claimName": name}}
        assert "gke-gcsfuse/volumes" not in annotations
        if spec.size is None:
            assert not claims, "an existing claim is referenced, never rendered"
        else:
            [claim] = claims
            assert (claim["metadata"]["name"], claim["metadata"]["namespace"]) == (name, "ml")
            assert claim["spec"]["accessModes"] == ["ReadWriteMany"], "every host writes its shards at once"
            assert claim["spec"]["resources"] == {"requests": {"storage": spec.size}}
            assert claim["spec"].get("storageClassName") == spec.storage_class
            kinds = [o["kind"] for o in objects]
            assert kinds.index("PersistentVolumeClaim") < len(kinds) - 1, "before the workload that mounts it"
    for where, pod in pod_specs(objects):
        assert restricted_violations(pod) == [], where


def test_the_mount_follows_the_pods_user_and_a_host_network_pod_opts_in() -> None:
    cluster = Cluster(
        name="c",
        pod_security="privileged",
        node_pools=[NodePool("v5e", TPU("v5e", "2x4"))],
        jobs=[
            JaxJob("a", image="img", node_pool="v5e", checkpoints=GCSBucket("b-ckpt"), run_as_user=1234, fs_group=5678),
            JaxJob("b", image="img", node_pool="v5e", checkpoints=GCSBucket("b-ckpt"), host_network=True),
        ],
    )
    by_job = {o["metadata"]["name"]: pod_templates([o])[0] for o in manifests(cluster) if o["kind"] == "JobSet"}
    attributes = {name: t["spec"]["volumes"][0]["csi"]["volumeAttributes"] for name, t in by_job.items()}
    assert attributes["a"]["mountOptions"] == "uid=1234,gid=5678,rename-dir-limit=200000"
    assert "hostNetworkPodKSA" not in attributes["a"]
    assert attributes["b"]["hostNetworkPodKSA"] == "true" and by_job["b"]["spec"]["hostNetwork"] is True


def test_without_storage_nothing_is_mounted_and_the_variable_is_the_users() -> None:
    cluster = Cluster(
        name="c",
        node_pools=[NodePool("cpu", CPU(devices=2))],
        jobs=[JaxJob("t", image="img", node_pool="cpu", env={"JAXINFRA_CHECKPOINT_DIR": "gs://b/run-1"})],
    )
    objects = manifests(cluster)
    [template] = pod_templates(objects)
    assert "volumes" not in template["spec"] and "annotations" not in template["metadata"]
    assert container_env(objects)["JAXINFRA_CHECKPOINT_DIR"] == "gs://b/run-1", "orbax writes gs:// paths itself"
    assert "checkpoints" not in dict(facts(plan(cluster).jobs[0]))


def test_explain_says_where_the_checkpoints_live() -> None:
    lines = {
        name: dict(facts(plan(cluster_of("jobset", spec)).jobs[0]))["checkpoints"] for name, spec in STORAGE.items()
    }
    assert lines["bucket"] == (
        "bucket gs://team-ckpt through GKE's Cloud Storage FUSE CSI driver, as ServiceAccount "
        "ml/train (Workload Identity), at /checkpoints"
    )
    assert lines["rendered claim"] == (
        "PersistentVolumeClaim ml/train-checkpoints (50Gi ReadWriteMany, class standard-rwx), at /checkpoints"
    )
    assert lines["existing claim"] == "existing PersistentVolumeClaim ml/ckpt (ReadWriteMany), at /checkpoints"
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "explain", "stacks/cpu_dev.py"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={"TERM": "dumb", "COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stderr
    assert re.search(
        r"^checkpoints +PersistentVolumeClaim default/train-checkpoints \(10Gi ReadWriteMany, class default\), "
        r"at /checkpoints",
        r.stdout,
        re.M,
    ), r.stdout
    assert "    JAXINFRA_CHECKPOINT_DIR=/checkpoints" in r.stdout


FIELD_PROBLEMS = {  # each value checked on its own
    'GCSBucket("My_Bucket")': "jobs[0].checkpoints.bucket = 'My_Bucket': not a Cloud Storage bucket name; fix: use "
    "3-63 lower-case",
    "PVC()": "jobs[1].checkpoints = {'kind': 'pvc'}: names no claim and renders none; fix: give the name of an "
    "existing claim",
    'PVC("old", storage_class="fast")': "jobs[2].checkpoints.storage_class = 'fast': a storage class is for a claim "
    "jaxinfra "
    "renders; fix: add size=...",
    'PVC(size="lots")': "jobs[3].checkpoints.size = 'lots': not a Kubernetes quantity; fix: write it like '100Gi'",
    '"gs://x"': "jobs[4].checkpoints = 'gs://x': not checkpoint storage; fix: use GCSBucket(name) or PVC(name) / "
    "PVC(size=...)",
    'GCSBucket("google-ckpt")': "jobs[5].checkpoints.bucket = 'google-ckpt': not a Cloud Storage bucket name",
}
CROSS_PROBLEMS = {  # rules between fields and objects, checked once every value is
    'PVC("one", size="1Gi"), env={"JAXINFRA_CHECKPOINT_DIR": "/elsewhere"}': "jobs[0].env.JAXINFRA_CHECKPOINT_DIR = "
    "'/elsewhere': set by jaxinfra to the mount path of the job's checkpoints; "
    "fix: remove it",
    'PVC("two", size="1Gi"), backend="trainjob", runtime="jax-distributed"': "jobs[1].checkpoints = 'pvc': "
    "ClusterTrainingRuntime 'jax-distributed' is not jaxinfra's: it writes no pod template",
    'PVC("one", size="2Gi")': "jobs[2].checkpoints.name = 'one': job j0 already renders PersistentVolumeClaim "
    "default/one; fix: share it as an "
    "existing claim, PVC('one')",
}


@pytest.mark.parametrize("problems", [FIELD_PROBLEMS, CROSS_PROBLEMS], ids=["values", "rules"])
def test_bad_storage_is_one_error_listing_every_problem(problems: dict[str, str], tmp_path: Path) -> None:
    stack = tmp_path / "bad.py"
    jobs = "\n".join(
        f'    JaxJob("j{i}", image="i", node_pool="cpu", checkpoints={given}),' for i, given in enumerate(problems)
    )
    stack.write_text(f"""
from jaxinfra import CPU, PVC, Cluster, GCSBucket, JaxJob, NodePool

cluster = Cluster(name="bad", node_pools=[NodePool("cpu", CPU())], jobs=[
{jobs}
])
""")
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "synth", str(stack), "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 2 and not (tmp_path / "out").exists() and "Traceback" not in r.stderr
    lines = [line.removeprefix(f"error: {stack}: ") for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == len(problems), lines
    for want in problems.values():
        assert any(line.startswith(want) for line in lines), (want, lines)
    assert r.stderr.rstrip().endswith(f"jaxinfra: {len(problems)} problems (invalid spec); nothing written")


@pytest.mark.parametrize("name", ["abc", "a-b_c.d", "x" * 63, ".".join(["a" * 63] * 3)])
def test_bucket_names_gcs_accepts(name: str) -> None:
    assert cluster_of("jobset", GCSBucket(name)).jobs[0].checkpoints.bucket == name


@pytest.mark.parametrize(
    "name", ["ab", "x" * 64, "-abc", "abc-", "ABC", "goog-ckpt", "my-google-ckpt", "a..b", ".".join(["a" * 64, "b"])]
)
def test_bucket_names_gcs_refuses(name: str) -> None:
    with pytest.raises(SpecError, match=r"checkpoints\.bucket = .*not a Cloud Storage bucket name"):
        cluster_of("jobset", GCSBucket(name))


# --- the simulator runs the program on the rendered storage ---------------------------------------------


STEPS = 100  # 15 s of paced steps: a kill at 12 s lands after the first checkpoints (every 2 steps) even where a
# loaded machine takes 9 s to start the group, and before the last one where it starts in 1


def run_stack(tmp: Path, storage: str, *args: str) -> tuple[int, dict[str, Any], str]:
    """A 2 x 2 CPU job of the example program with `storage`, synthesized by jaxinfra and run with `--run-command`."""
    path = tmp / "ckpt_stack.py"
    path.write_text(f"""
from jaxinfra import CPU, PVC, Cluster, GCSBucket, JaxJob, NodePool

cluster = Cluster(name="rehearse", node_pools=[NodePool("cpu", CPU(devices=2))], jobs=[JaxJob(
    "train", image="python:3.11-slim", command=["python", "-m", "train"], node_pool="cpu", nodes=2, max_restarts=1,
    init_timeout_seconds=60, checkpoints={storage},
    env={{"TRAIN_STEPS": "{STEPS}", "TRAIN_CHECKPOINT_EVERY": "2", "TRAIN_MIN_STEP_SECONDS": "0.15",
         "TRAIN_HEARTBEAT_TIMEOUT": "10", "TRAIN_SHUTDOWN_TIMEOUT": "10"}})])
""")
    report = tmp / "report.json"
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "simulate", str(path), "--run-command", "--json", str(report), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )  # its images table: python:3.11-slim
    #                                                                                 holds the example's program
    return r.returncode, json.loads(report.read_text()), r.stdout


@pytest.mark.parametrize(
    "storage", ['GCSBucket("rehearse-ckpt")'], ids=["bucket"]
)  # a claim: tests/sim/cluster/test_rehearsal.py
def test_a_killed_host_resumes_from_the_checkpoint_on_the_rendered_storage(storage: str, tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    volume = "train-checkpoints" if storage.startswith("PVC") else "rehearse-ckpt"
    rc, report, out = run_stack(tmp_path, storage, "--kill", "1@12", "--volume", f"{volume}={kept}")
    [w] = report["workloads"]
    assert rc == 0 and (w["verdict"], w["restarts"]) == ("succeeded", 1), out
    resumed = [int(m) for m in re.findall(r"^\[train-node-0-0\] resumed from step (\d+)$", out, re.M)]
    assert len(resumed) == 1 and 0 < resumed[0] < STEPS, out
    assert (kept / str(STEPS)).is_dir(), "the last checkpoint is in the storage the manifests name"
    # and it ends where an uninterrupted run ends: one process with the same 4 devices, unpaced
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "TRAIN_", "KUBERNETES_"))}
    alone = subprocess.run(
        [sys.executable, "-m", "train"],
        cwd=TRAIN,
        capture_output=True,
        text=True,
        env={**env, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": "4", "TRAIN_STEPS": str(STEPS)},
        timeout=120,
        check=True,
    )
    last = rf"step {STEPS} loss (\S+)$"
    assert float(re.search(rf"^\[train-node-0-0\] {last}", out, re.M).group(1)) == pytest.approx(
        float(re.search(rf"^{last}", alone.stdout, re.M).group(1)), rel=1e-5
    )
