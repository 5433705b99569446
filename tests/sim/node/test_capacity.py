"""The machine's own limits (simulate/capacity.py, the runner's machine verdicts): a job this machine cannot hold is
refused before anything starts, and one that exhausts its memory or its processes mid-run ends with the machine's
verdict (exit 3, no restart), not a pod failure. The mid-run cases run for real inside a cgroup the suite makes
(root on this machine's cgroup v1 or a delegated v2), with the kernel doing the refusing."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from jaxinfra_sim.node import capacity, cgroupfs
from jaxinfra_sim.node.capacity import Limit
from tests.support.cli import simulate_cli
from tests.support.machine import memory_machine

pytestmark = pytest.mark.simulator

MiB = 2**20


def indexed_job(n: int, *, command: str | None = None, shell: str | None = None, backoff_limit: int = 0) -> str:
    """An Indexed Job of n pods with its headless Service, as the Kubernetes docs write one for a JAX group; its
    container runs `command` (Python) or `shell` (`sh -c`) when given, else the built-in probe stands in for it."""
    container: dict = {
        "name": "jax",
        "image": "python:3.11",
        "env": [
            {"name": "JAX_COORDINATOR_ADDRESS", "value": "big-0.workers:1234"},
            {"name": "JAX_NUM_PROCESSES", "value": str(n)},
            {
                "name": "JAX_PROCESS_ID",
                "valueFrom": {
                    "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
                },
            },
        ],
    }
    if command is not None:
        container |= {"command": ["python", "-c"], "args": [command]}
    if shell is not None:
        container |= {"command": ["sh", "-c"], "args": [shell]}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "workers"},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {"job-name": "big"}},
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "big"},
        "spec": {
            "completionMode": "Indexed",
            "completions": n,
            "parallelism": n,
            "backoffLimit": backoff_limit,
            "template": {"spec": {"subdomain": "workers", "restartPolicy": "Never", "containers": [container]}},
        },
    }
    return yaml.safe_dump_all([service, job], sort_keys=False)


# --- the estimate and the refusal ----------------------------------------------------------------


@pytest.mark.unit
def test_the_estimate_grows_with_pods_devices_and_a_fresh_interpreter() -> None:
    one = capacity.need("Job/x", 1, 1, run_command=False)
    # each process holds every device of its group: memory grows faster than the pods
    assert capacity.need("Job/x", 64, 64, False).memory > 64 * one.memory
    assert capacity.need("Job/x", 64, 64, False).tasks == 64 * one.tasks
    assert capacity.need("Job/x", 1, 4, False).memory > one.memory
    assert capacity.need("Job/x", 1, 1, run_command=True).memory > one.memory
    assert capacity.need("Job/x", 64, 64, False).descriptors > capacity.need("Job/x", 1, 1, False).descriptors


@pytest.mark.unit
def test_the_probes_timeouts_stretch_only_past_the_processes_a_core_can_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """256 processes on 2 cores lost heartbeats under the probe's 10 s: its timeouts grow with processes per core,
    never past JAX's own defaults; a job this machine holds keeps them (a broken group still fails fast)."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    per_machine = 2 * capacity.PROCESSES_PER_CORE
    assert capacity.dilated(10, 8, ceiling=100) == 10
    assert capacity.dilated(10, per_machine, ceiling=100) == 10
    assert capacity.dilated(10, per_machine + 1, ceiling=100) == 20
    assert capacity.dilated(10, 256, ceiling=100) == 10 * 256 // per_machine
    assert capacity.dilated(10, 1024, ceiling=100) == 100
    assert capacity.dilated(10, 512, ceiling=300) == 10 * 512 // per_machine


def test_a_job_that_fits_is_admitted_and_one_that_does_not_is_told_every_shortfall(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(capacity, "memory", lambda: Limit(20 * 2**30, "MemAvailable"))
    monkeypatch.setattr(capacity, "tasks", lambda: Limit(32_000, "kernel.pid_max 32768"))
    monkeypatch.setattr(capacity, "descriptors", lambda: Limit(19_000, "ulimit -n 20000"))
    assert capacity.refusal(capacity.need("Job/default/small", 256, 256, False)) is None
    why = capacity.refusal(capacity.need("Job/default/big", 4096, 4096, False))
    assert why is not None and "\n" not in why
    assert why.startswith("this machine cannot run Job/default/big: its 4,096 pods need at least ")
    assert "GiB of memory (20.0 GiB available: MemAvailable)" in why
    assert "processes and threads (room for 32,000: kernel.pid_max 32768)" in why
    assert "file descriptors (19,000 free: ulimit -n 20000)" in why
    fits = min(capacity._most_pods(20 * 2**30, 1, False), 32_000 // capacity.TASKS_PER_POD)
    assert f"fix: simulate at most {fits:,} pods here" in why and "--shadow cpu" in why


@pytest.mark.unit
def test_the_most_pods_told_fit_and_one_more_does_not() -> None:
    """Memory grows with the square of a group's size (each process holds every device of it): the pods a refusal
    says fit are the most that do, measured against the same estimate (512 processes here took 18.2 GiB, not 13)."""
    assert 17 * 2**30 < capacity.need("Job/x", 512, 512, False).memory < 19 * 2**30
    for memory, per_pod, run_command in [(22 * 2**30, 1, False), (22 * 2**30, 4, False), (8 * 2**30, 2, True)]:
        most = capacity._most_pods(memory, per_pod, run_command)
        assert capacity.need("Job/x", most, most * per_pod, run_command).memory <= memory
        assert capacity.need("Job/x", most + 1, (most + 1) * per_pod, run_command).memory > memory
    assert capacity._most_pods(22 * 2**30, 1, False) < 1024  # this machine's 22 GiB hold about 590, not 1,024


@pytest.mark.unit
def test_where_this_process_sits_in_each_hierarchy_is_read_from_its_cgroup_file() -> None:
    v1, v2 = cgroupfs.membership("12:pids:/user.slice\n4:memory:/a/b\n3:cpu,cpuacct:/\n0::/a/b\n")
    assert v1["pids"] == ("pids", "/user.slice") and v1["memory"] == ("memory", "/a/b")
    assert v1["cpuacct"] == ("cpu,cpuacct", "/") and v2 == "/a/b"
    assert cgroupfs.membership("0::/only-v2\n") == ({}, "/only-v2")


@pytest.mark.unit
def test_this_machines_limits_are_read_not_assumed() -> None:
    # MemAvailable moves between two reads (other processes allocate and free): within 256 MiB of each other
    assert 0 < capacity.memory().left <= (capacity.available_memory() or 1 << 62) + (256 << 20)
    assert 0 < capacity.tasks().left < int(Path("/proc/sys/kernel/pid_max").read_text())
    assert 0 < capacity.descriptors().left
    assert capacity.oom_kills() >= 0


def test_a_4096_process_job_is_refused_at_once_with_the_estimate_and_nothing_starts(tmp_path: Path) -> None:
    job = tmp_path / "big.yaml"
    job.write_text(indexed_job(4096))
    rc, report, out = simulate_cli(str(job), tmp=tmp_path, timeout=60)
    lines = [line for line in out.splitlines() if line.strip()]
    assert rc == 3, out
    assert len(lines) == 1 and lines[0].startswith("jaxinfra: this machine cannot run Job/default/big: its 4,096 pods")
    assert "fix: simulate at most" in lines[0]
    assert report == {}  # refused before the simulation: no pod, no report


# --- the machine giving out mid-run ----------------------------------------------------------------


@pytest.fixture
def controllers() -> cgroupfs.Controllers:
    if os.geteuid() != 0:
        pytest.skip("making cgroups needs root here (or a delegated cgroup v2 group)")
    return cgroupfs.probe()


ALLOCATE = """\
import os, time
chunks = []
if os.environ["JAX_PROCESS_ID"] == "0":
    while True:  # until this machine (here: the simulation's cgroup) has no more
        chunks.append(bytearray(b"\\x01") * (64 << 20))
time.sleep(60)
"""


def test_a_job_that_exhausts_the_machines_memory_ends_with_the_machines_verdict_not_a_restart(tmp_path: Path) -> None:
    job = tmp_path / "hungry.yaml"
    job.write_text(indexed_job(2, command=ALLOCATE, backoff_limit=4))  # restarts allowed: none may happen
    with memory_machine("test-machine-oom", 1536 * MiB) as machine:  # this "machine": the simulation and its pods
        rc, report, out = simulate_cli(str(job), "--run-command", tmp=tmp_path, timeout=120, preexec=machine.enter)
    assert rc == 3, out
    last = out.strip().splitlines()[-1]
    assert last.startswith("jaxinfra: this machine ran out of memory (") and "pods" in last, out
    (workload,) = report["workloads"]
    assert len(workload["attempts"]) == 1 and workload["verdict"] == "failed", workload
    assert report["machine"] == workload["reason"] == workload["attempts"][0]["reason"]
    pods = {p["rank"]: p for p in workload["attempts"][0]["pods"]}
    assert pods[0]["signal"] == "SIGKILL" and "the kernel's OOM killer" in pods[0]["reason"], pods[0]
    # The other pod ends with its group, or, where the kernel's OOM killer struck again before the group was stopped
    # (a busy machine: pod 0's memory not yet freed), by that killer too, as the machine's verdict says; never alone.
    assert pods[1]["reason"] == "ended with its group" or "the kernel's OOM killer" in pods[1]["reason"], pods[1]


# A shell whose child the OOM killer ends lives on: it says so, then waits (the machine's verdict stops it at once)
# or exits 137 itself, as bash reports its killed child.
HUNGRY_CHILD = 'chunks = []\nwhile True: chunks.append(bytearray(b"\\x01") * (64 << 20))'


@pytest.mark.parametrize(
    ("child", "then"),
    [("print(1)", None), (HUNGRY_CHILD, "sleep 30"), (HUNGRY_CHILD, "exit 137")],
    ids=[
        "its child exits: the job's verdict",
        "the OOM killer ends its child: the machine's, at once",
        "the OOM killer ends its child and the shell exits 137: the machine's",
    ],
)
def test_the_machines_oom_killer_ending_a_shells_child_is_the_machines_verdict_though_the_shell_survives(
    tmp_path: Path, child: str, then: str | None
) -> None:
    """The container's own process (sh) is not the one killed: its pod's memory group (one per pod, limit or not)
    counted the kill (oom_kill) without reaching a limit of its own, so this machine ran out, at once."""
    job = tmp_path / "shell.yaml"
    script = f"python -c '{child}'; echo survived >&2" + (f"; {then}" if then else "")
    job.write_text(indexed_job(1, shell=script, backoff_limit=4))  # restarts allowed: none may happen
    with memory_machine("test-machine-oom-shell", 1536 * MiB) as group:  # this "machine": the simulation, its pods
        rc, report, out = simulate_cli(str(job), "--run-command", tmp=tmp_path, timeout=120, preexec=group.enter)
    (workload,) = report["workloads"]
    (pod,) = workload["attempts"][0]["pods"]
    if then is None:
        assert "survived" in pod["stderr_tail"], pod
        assert rc == 0 and workload["verdict"] == "succeeded" and report["machine"] is None, out
        assert pod["exit_code"] == 0 and pod["reason"] is None, pod
        return
    assert rc == 3, out
    assert out.strip().splitlines()[-1].startswith("jaxinfra: this machine ran out of memory ("), out
    assert len(workload["attempts"]) == 1 and workload["verdict"] == "failed", workload
    assert report["machine"] == workload["reason"] == workload["attempts"][0]["reason"]
    assert pod["reason"].startswith("a process in it was killed by the kernel's OOM killer: this machine ran out"), pod
    assert max(pod["timings"].values()) < 25, pod  # stopped by the verdict, not at its exit


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@contextlib.contextmanager
def pids_group(limit: int) -> Iterator[Path]:
    """A pids cgroup below this process's, bounded to `limit` tasks (v1 here; a delegated v2 group elsewhere)."""
    v1, v2 = cgroupfs.membership()
    if "pids" in v1:
        mount, path = v1["pids"]
        parent = cgroupfs.ROOT / mount / path.lstrip("/")
    elif v2 is not None and "pids" in _read(cgroupfs.ROOT / v2.lstrip("/") / "cgroup.subtree_control"):
        parent = cgroupfs.ROOT / v2.lstrip("/")
    else:
        pytest.skip("no pids controller this process can make groups of")
    group = parent / f"jaxinfra-test-pids-{os.getpid()}"
    try:
        group.mkdir()
        (group / "pids.max").write_text(str(limit))
    except OSError as err:
        pytest.skip(f"cannot make a pids cgroup here: {err}")
    try:
        yield group
    finally:
        group.rmdir()


THREADS = """\
import os, threading, time
if os.environ["JAX_PROCESS_ID"] == "0":
    try:
        while True:  # until this machine (here: the simulation's pids cgroup) has no more tasks
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    except RuntimeError:
        pass
time.sleep(60)
"""


def test_a_job_that_exhausts_the_machines_processes_ends_with_the_machines_verdict(
    controllers: cgroupfs.Controllers, tmp_path: Path
) -> None:
    job = tmp_path / "threads.yaml"
    job.write_text(indexed_job(2, command=THREADS, backoff_limit=4))
    with pids_group(200) as group:  # admission counts 2 pods well inside it; pod 0 then takes every task left
        rc, report, out = simulate_cli(
            str(job),
            "--run-command",
            "--delay",
            "1=10",  # long enough for pod 0's interpreter to take every task on a loaded machine (3 s was not once)
            tmp=tmp_path,
            timeout=120,
            preexec=lambda: (group / "cgroup.procs").write_text(str(os.getpid())),
        )
    assert rc == 3, out
    last = out.strip().splitlines()[-1]
    assert last.startswith("jaxinfra: this machine ran out of processes") and "starting pod big-1" in last, out
    (workload,) = report["workloads"]
    assert len(workload["attempts"]) == 1, workload
    pods = {p["rank"]: p for p in workload["attempts"][0]["pods"]}
    assert pods[1]["reason"].startswith("not started: this machine ran out of processes"), pods[1]
