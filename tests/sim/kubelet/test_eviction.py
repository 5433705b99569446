"""The kubelet's local storage eviction (simulate/jaxinfra_sim/kubelet/eviction.py): an emptyDir past its sizeLimit, a
pod past its containers' ephemeral-storage limits (their writable layers, logs and emptyDirs), a container past its own
limit: the pod is stopped and fails with reason Evicted and the kubelet's message, and its Job counts it as a failed
pod. End to end with --run-command, as root and as uid 65534; the rules themselves on their own."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from jaxinfra.yamlio import dump
from jaxinfra_sim.core import model, trees
from jaxinfra_sim.kubelet import eviction
from tests.support.cli import simulate_as

pytestmark = pytest.mark.simulator

MODES = pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
SCRATCH = {"volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}}]}
MOUNT = {"volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}


def write(path: str, size: int) -> str:
    """A shell command that writes `size` bytes to `path`."""
    return f"head -c {size} /dev/zero > {path}"


def container(name: str, script: str, limit: str | None = None, **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": "busybox:1.28", "command": ["sh", "-c", script], **more}
    if limit is not None:
        out["resources"] = {"limits": {"ephemeral-storage": limit}}
    return out


def job(name: str, *containers: dict[str, Any], backoff: int = 0, **pod: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed",
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": backoff,
            "template": {"spec": {"restartPolicy": "Never", "containers": list(containers), **pod}},
        },
    }


def pods(report: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """Every pod of the Job `name` its attempts ran, in order (those its Job replaced first)."""
    [w] = [w for w in report["workloads"] if w["name"] == name]
    return [p for a in w["attempts"] for p in [*a.get("replaced", ()), *a["pods"]]]


@MODES
def test_an_emptydir_past_its_size_limit_evicts_the_pod(home: Path, as_root: bool) -> None:
    """4 MiB in an emptyDir of sizeLimit 1Mi: Evicted, with the kubelet's message, within about a second and its
    1 s grace period; 100 KB in the same volume runs to completion."""
    over = job("over", container("w", f"{write('/scratch/blob', 4 << 20)}; sleep 30", **MOUNT), **SCRATCH)
    under = job("under", container("w", f"{write('/scratch/blob', 100_000)}; sleep 1", **MOUNT), **SCRATCH)
    rc, out, report = simulate_as(home, dump([over, under]), "--run-command", "--timeout", "60", as_root=as_root)
    assert rc == 1, out
    [evicted] = pods(report, "over")
    assert evicted["phase"] == "failed", evicted
    assert evicted["reason"] == 'Evicted: Usage of EmptyDir volume "scratch" exceeds the limit "1Mi".', evicted
    assert evicted["timings"]["failed"] < 10  # not after its sleep of 30 s
    assert [p["phase"] for p in pods(report, "under")] == ["succeeded"]


def test_writable_layers_and_logs_count_toward_ephemeral_storage(home: Path) -> None:
    """A container's writes to its own root (its /tmp) and its logs count toward its ephemeral-storage limit: the
    pod's total first (the sum of its containers' limits), then each container's own."""
    layer = job("layer", container("w", f"{write('/tmp/blob', 4 << 20)}; sleep 30", "2Mi"))
    logs = job("logs", container("w", "head -c 3000000 /dev/zero | tr '\\000' x | fold -w 100; sleep 30", "2M"))
    one = job(  # a over its own 1Mi, the pod within its 11Mi
        "one",
        container("a", f"{write('/tmp/blob', 3 << 19)}; sleep 30", "1Mi"),
        container("b", "sleep 30", "10Mi"),
    )
    rc, out, report = simulate_as(home, dump([layer, logs, one]), "--run-command", "--timeout", "60")
    assert rc == 1, out
    total = "Evicted: Pod ephemeral local storage usage exceeds the total limit of containers"
    assert [p["reason"] for p in pods(report, "layer")] == [f"{total} 2Mi."]
    assert [p["reason"] for p in pods(report, "logs")] == [f"{total} 2M."]
    assert [p["reason"] for p in pods(report, "one")] == [
        'Evicted: Container a exceeded its local ephemeral storage limit "1Mi".'
    ]


@MODES
def test_writing_the_writable_layer_is_disk_not_the_containers_memory(home: Path, as_root: bool) -> None:
    """A container with a 64Mi memory limit writes 160 MiB into its own root (its /tmp, and a file of the machine's
    folder it sees copy-on-write): on a node that is the writable layer on disk (the page cache it dirties is
    reclaimed, not an OOM kill), and so here: it succeeds, and the bytes are on this machine's disk, in the
    container's folder, never in a tmpfs."""
    script = f"{write('/tmp/blob', 96 << 20)} && {write('/usr/blob', 64 << 20)} && sync && sleep 2"
    one = container("w", script, resources={"limits": {"memory": "64Mi"}})
    rc, out, report = simulate_as(home, dump([job("big", one)]), "--run-command", "--timeout", "60", as_root=as_root)
    assert rc == 0, out
    assert [p["phase"] for p in pods(report, "big")] == ["succeeded"], out


def test_an_evicted_pod_is_a_failed_pod_to_its_job(home: Path) -> None:
    """backoffLimit 1: the Job replaces the evicted pod once; evicted again, the Job fails (no DisruptionTarget
    condition comes with a local storage eviction, so nothing exempts it)."""
    again = job("again", container("w", f"{write('/scratch/blob', 4 << 20)}; sleep 30", **MOUNT), backoff=1, **SCRATCH)
    rc, out, report = simulate_as(home, dump([again]), "--run-command", "--timeout", "60")
    assert rc == 1, out
    assert [p["reason"].split(":")[0] for p in pods(report, "again")] == ["Evicted", "Evicted"], out


def test_a_memory_emptydirs_size_limit_is_a_note(home: Path) -> None:
    memory = {"volumes": [{"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}]}
    rc, out, report = simulate_as(home, dump([job("mem", container("w", "true", **MOUNT), **memory)]), "--run-command")
    assert rc == 0, out
    assert any(n.startswith("an emptyDir of medium Memory is a folder") for n in report["notes"]), report["notes"]


# --- the rules ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1Mi", "1Mi"),
        ("1024Ki", "1Mi"),
        ("1.5Gi", "1536Mi"),
        ("500M", "500M"),
        ("1500000", "1500k"),
        ("1000", "1k"),
        ("2048", "2048"),
        ("1e6", "1M"),
    ],
)
def test_limits_are_written_as_quantity_string_writes_them(text: str, expected: str) -> None:
    limit = eviction.parse(text)
    assert limit is not None and str(limit) == expected


def test_the_pods_limit_adds_up_as_pod_limits_does() -> None:
    """Mains and sidecars add up; an init container counts with the sidecars before it, where that is more."""
    q = eviction.parse
    assert eviction.pod_limit([("a", q("1Gi"), "main"), ("b", None, "main")]) == q("1Gi")
    assert eviction.pod_limit([("a", None, "main")]) is None
    assert eviction.pod_limit([("s", q("1Gi"), "sidecar"), ("i", q("3Gi"), "init"), ("m", q("1Gi"), "main")]) == q(
        "4Gi"
    )
    assert eviction.pod_limit([("i", q("1Gi"), "init"), ("m", q("2Gi"), "main")]) == q("2Gi")


def test_the_first_rule_that_holds_names_the_eviction() -> None:
    pod = model.Pod(
        workload="Job/default/j",
        namespace="default",
        name="j-0",
        hostname="j-0",
        subdomain=None,
        ip="127.0.0.2",
        job_index=0,
        completion_index=0,
        global_index=0,
        labels={},
        annotations={},
        container="main",
        image="i",
        command=("sh",),
        args=(),
        env={},
        working_dir=None,
        devices=1,
        accelerator="cpu",
        mounts=(
            model.Mount("cache", "/cache", kind="emptyDir", size_limit="1Mi"),
            model.Mount("shm", "/dev/shm", kind="emptyDir", size_limit="1Mi", medium="Memory"),
        ),
        ephemeral_limit="4Mi",
    )
    found = eviction.limits(pod)
    assert found.any and str(found.pod) == "4Mi"
    assert eviction.verdict(found, {"cache": 1 << 20, "shm": 8 << 20}, {"main": 0}, 1 << 20) is None  # at, not over
    assert eviction.verdict(found, {"cache": (1 << 20) + 1}, {"main": 0}, 0) == (
        'Usage of EmptyDir volume "cache" exceeds the limit "1Mi".'
    )
    assert eviction.verdict(found, {"cache": 1 << 20}, {"main": (3 << 20) + 1}, 1 << 20) == (
        "Pod ephemeral local storage usage exceeds the total limit of containers 4Mi."
    )


def test_usage_is_what_the_file_system_allocated_on_its_own_file_system(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 100_000)
    os.link(tmp_path / "a", tmp_path / "hard")  # counted once
    (tmp_path / "link").symlink_to("/usr")  # not followed
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"y" * 50_000)
    used = trees.usage(tmp_path)
    blocks = sum(os.lstat(p).st_blocks * 512 for p in (tmp_path, tmp_path / "a", tmp_path / "link", tmp_path / "sub"))
    assert used == blocks + os.stat(tmp_path / "sub" / "b").st_blocks * 512
    assert trees.usage(tmp_path / "missing") == 0
