"""Volumes as the kubelet sets them up, on a hand-written manifest: what each pod sees at its mount paths
(the machine's own files untouched), as root and as an unprivileged user; and the volumes a kubelet cannot
set up, which leave the pod Pending: a problem before anything starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.core.inputs import load_files
from tests.support import unprivileged
from tests.support.paths import MANIFESTS, ROOT
from tests.support.problems import problems_of

pytestmark = pytest.mark.simulator

MANIFEST = MANIFESTS / "indexed_job_volumes.yaml"


def docs() -> list[dict]:
    return load_files([MANIFEST])


def pod_spec(objs: list[dict]) -> dict:
    return next(o for o in objs if o["kind"] == "Job")["spec"]["template"]["spec"]


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
def test_every_volume_is_where_the_pod_looks(as_root: bool) -> None:
    home = unprivileged.scratch_home()
    try:
        report = home / "report.json"
        r = unprivileged.run(
            [sys.executable, "-m", "jaxinfra", "simulate", str(MANIFEST), "--run-command", "--json", str(report)],
            home,
            as_root=as_root,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        [w] = json.loads(report.read_text())["workloads"]
        assert [p["exit_code"] for p in w["attempts"][0]["pods"]] == [0, 0]
        # the claim and the bucket are shared: each pod saw both pods' files
        assert r.stdout.count("[vol-0] r1") == 2 and r.stdout.count("[vol-1] r0") == 2, r.stdout
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)
    assert not Path("/checkpoints").exists() and not Path("/gcs").exists(), "the machine's root is untouched"


def test_a_claim_no_input_defines_leaves_the_pod_pending() -> None:
    objs = [o for o in docs() if o["kind"] != "PersistentVolumeClaim"]
    [problem] = problems_of(emulate(objs))
    assert (
        problem.path == "Job/default/vol pod vol-0 volume ckpt"
        and 'persistentvolumeclaim "ckpt" not found' in problem.message
    )
    assert "stays Pending" in problem.message and "--volume ckpt=DIR" in problem.fix


def test_a_config_map_no_input_defines_leaves_the_pod_pending_unless_optional() -> None:
    objs = [o for o in docs() if o["kind"] != "ConfigMap"]
    [problem] = problems_of(emulate(objs))
    assert 'configmap "cfg" not found' in problem.message
    next(v for v in pod_spec(objs)["volumes"] if v["name"] == "cfg")["configMap"]["optional"] = True
    assert problems_of(emulate(objs)) == []


def test_gcs_fuse_needs_the_pod_annotation() -> None:
    objs = docs()
    next(o for o in objs if o["kind"] == "Job")["spec"]["template"]["metadata"]["annotations"] = {}
    [problem] = problems_of(emulate(objs))
    assert "finds no sidecar" in problem.message and 'gke-gcsfuse/volumes: "true"' in problem.fix


def test_a_volume_type_the_simulator_cannot_stand_in_for_is_named() -> None:
    objs = docs()
    pod_spec(objs)["volumes"].append({"name": "share", "nfs": {"server": "nfs.example.com", "path": "/exports"}})
    [problem] = problems_of(emulate(objs))
    assert "volume type nfs is not emulated" in problem.message and "emptyDir" in problem.fix


def test_a_mount_of_no_volume_is_rejected() -> None:
    objs = docs()
    pod_spec(objs)["containers"][0]["volumeMounts"].append({"name": "nope", "mountPath": "/nope"})
    kubelet, front_door = [], []  # the pods' own front door refuses them too, as the Job's refuses the Job first
    for p in problems_of(emulate(objs)):
        (front_door if p.path.endswith(" pods") else kubelet).append(p)
    [problem] = kubelet
    assert "no volume of the pod has this name" in problem.message
    assert [p.value for p in front_door] == ["nope"], front_door


def test_mounts_as_the_kubelet_reports_them() -> None:
    [w] = emulate(docs()).workloads
    mounts = {m.volume: m for m in w.pods[0].mounts}
    assert (mounts["ckpt"].kind, mounts["ckpt"].key, mounts["ckpt"].path) == ("claim", "ckpt", "/checkpoints")
    assert (mounts["bucket"].kind, mounts["bucket"].key) == ("bucket", "my-bucket")
    assert mounts["cfg"].read_only and dict(mounts["cfg"].files) == {"settings.txt": "lr=0.1"}
    assert dict(mounts["info"].files)["labels"].splitlines()[-1] == 'team="ml"'
    assert dict(mounts["info"].files)["name"] == w.pods[0].name


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
def test_binary_data_reaches_the_pod_byte_for_byte(as_root: bool) -> None:
    """A ConfigMap's `binaryData` and a Secret's `data` are `[]byte`: the kubelet writes their decoded bytes, a NUL
    and bytes that are no UTF-8 included, as files of the volume (and a configMapKeyRef reads binaryData too)."""
    from jaxinfra.yamlio import dump
    from tests.support.cli import simulate_as

    blob = "AP8QgA=="  # 00 ff 10 80
    objects = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "binaryData": {"blob": blob}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "key"}, "data": {"raw": blob}},
    ]
    script = "od -An -tx1 /cfg/blob /key/raw | tr -d ' \\n' >&2; echo >&2"
    pod = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "busybox:1.36",
                "command": ["sh", "-c", script],
                "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}, {"name": "key", "mountPath": "/key"}],
            }
        ],
        "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}, {"name": "key", "secret": {"secretName": "key"}}],
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "bytes"},
        "spec": {"completionMode": "Indexed", "completions": 1, "backoffLimit": 0, "template": {"spec": pod}},
    }
    home = unprivileged.scratch_home()
    try:
        rc, out, report = simulate_as(home, dump([*objects, job]), "--run-command", as_root=as_root)
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)
    assert rc == 0, out
    [pod] = report["workloads"][0]["attempts"][0]["pods"]
    assert pod["stderr_tail"] == ["00ff108000ff1080"], pod
