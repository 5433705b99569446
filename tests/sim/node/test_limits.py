"""Limits as a cluster enforces them (issue #38): a pod's process count (the kubelet's podPidsLimit, the simulator's
own `capacity.POD_PIDS_LIMIT`) and its memory limit's OOM kill of the whole container (memory.oom.group), end to end
with --run-command, as root (where the pids and memory controllers are the simulator's to use) and as uid 65534
(where nothing is delegated, and the report says so)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from jaxinfra.yamlio import dump
from jaxinfra_sim.node import capacity
from tests.sim.runtime.test_sandbox import job  # an Indexed Job of one busybox pod running `sh -c script`
from tests.support.cli import simulate_as

pytestmark = pytest.mark.simulator

#: Forks 1,500 `sleep`s from a shell loop (a fork bomb's shape), saying how many it has started.
FORKS = 'i=0; while [ $i -lt 1500 ]; do sleep 30 & i=$((i+1)); echo "$i" >&2; done; echo FORKED=$i >&2'
#: A child of the shell allocates 512 MiB: past a 64Mi limit, the kernel's OOM killer ends it.
ALLOCATE = 'python3 -c "b = bytearray(512 * 1024 * 1024)"'


def pods(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["hostname"]: p for w in report["workloads"] for p in w["attempts"][0]["pods"]}


def unenforced(report: dict[str, Any], what: str) -> list[str]:
    return [n for n in report["notes"] if n.startswith(f"{what} limits not enforced")]


@pytest.mark.skipif(os.getuid() != 0, reason="needs root (the suite runs as root in CI)")
def test_a_fork_loop_stops_at_the_pods_pids_limit(home: Path) -> None:
    """1,500 forks from one pod: its group's pids.max stops the loop near `POD_PIDS_LIMIT` with EAGAIN (the shell
    says it cannot fork), inside that pod only; the machine's process count never took the 1,500."""
    rc, out, report = simulate_as(home, dump([job("forks", FORKS)]), "--run-command", "--timeout", "60")
    if unenforced(report, "pids"):
        pytest.skip(f"this machine does not let root use the pids controller: {unenforced(report, 'pids')}")
    pod = pods(report)["forks-0"]
    assert rc == 1 and pod["phase"] == "failed" and pod["exit_code"] not in (0, None), out
    said = " ".join(pod["stderr_tail"])
    assert "FORKED=" not in said and ("Cannot fork" in said or "Resource temporarily unavailable" in said), said
    started = max(int(line) for line in pod["stderr_tail"] if line.isdigit())
    assert started < capacity.POD_PIDS_LIMIT, started  # its sleeps, besides its shell and the runtime's init
    assert pod["limits"]["pids"] == pod["limits"]["pids_peak"] == capacity.POD_PIDS_LIMIT, pod["limits"]


def test_unprivileged_a_fork_loop_stops_at_the_containers_nproc_limit(home: Path) -> None:
    """As uid 65534 with no pids controller delegated, each container's RLIMIT_NPROC, counted in its own user
    namespace, stops the same 1,500 forks near `POD_PIDS_LIMIT`; one note says which limit stood in, and why."""
    rc, out, report = simulate_as(home, dump([job("forks", FORKS)]), "--run-command", "--timeout", "60", as_root=False)
    notes = [n for n in report["notes"] if n.startswith("pids limits")]
    if not notes:
        pytest.skip("this machine delegates a pids controller to uid 65534")
    pod = pods(report)["forks-0"]
    assert rc == 1 and pod["phase"] == "failed", out
    said = " ".join(pod["stderr_tail"])
    assert "FORKED=" not in said and ("Cannot fork" in said or "Resource temporarily unavailable" in said), said
    assert max(int(line) for line in pod["stderr_tail"] if line.isdigit()) < capacity.POD_PIDS_LIMIT
    [note] = notes
    assert "RLIMIT_NPROC" in note and "pids controller" in note, note
    assert not unenforced(report, "memory") and not unenforced(report, "cpu"), report["notes"]


@pytest.mark.skipif(os.getuid() != 0, reason="needs root (the suite runs as root in CI)")
def test_an_oom_kill_in_a_container_kills_the_whole_container(home: Path) -> None:
    """A shell whose child the OOM killer ends for the container's memory limit, and which then exits 0 or goes on
    sleeping: on a cluster (cgroup v2, memory.oom.group=1 since 1.28) the whole container is killed, OOMKilled,
    exit 137; so here."""
    limits = {"resources": {"limits": {"memory": "64Mi"}}}
    jobs = [
        job("exits", f"{ALLOCATE}; echo survived >&2; exit 0", **limits),
        job("sleeps", f"{ALLOCATE}; echo survived >&2; sleep 30", **limits),
    ]
    rc, out, report = simulate_as(home, dump(jobs), "--run-command", "--timeout", "60")
    if unenforced(report, "memory"):
        pytest.skip(f"this machine does not let root enforce memory limits: {unenforced(report, 'memory')}")
    assert rc == 1, out
    for name in ("exits-0", "sleeps-0"):
        pod = pods(report)[name]
        assert pod["phase"] == "failed" and pod["exit_code"] == 137 and pod["signal"] == "SIGKILL", pod
        assert pod["reason"].startswith("OOMKilled: exit code 137"), pod["reason"]
    assert pods(report)["sleeps-0"]["timings"]["failed"] < 20  # killed at once, not after its sleep
