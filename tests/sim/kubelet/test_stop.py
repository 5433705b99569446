"""How a stopped container ends, as on a node: its command is PID 1 of its own PID namespace, so a SIGTERM
it does not handle is never delivered (it runs on until SIGKILL), only PID 1 is signalled (not a wrapper
shell's child), nothing it started outlives it, and a signal's death is reported as exit code 128 + N,
which is what podFailurePolicy's onExitCodes matches. Hand-written Indexed Jobs, run with --run-command."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jaxinfra.yamlio import dump
from tests.support import unprivileged
from tests.support.paths import ROOT

pytestmark = pytest.mark.simulator

GRACE = "2"


def job(command: list[str], *, pods: int = 1, backoff_limit: int = 0, rules: list[dict[str, Any]] | None = None) -> str:
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": pods,
        "parallelism": pods,
        "backoffLimit": backoff_limit,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "python:3.11-slim", "command": command}],
            }
        },
    }
    if rules is not None:
        spec["podFailurePolicy"] = {"rules": rules}
    return dump([{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "stop"}, "spec": spec}])


def simulate(folder: Path, manifest: str, *args: str, as_root: bool = True) -> tuple[int, dict[str, Any], str]:
    """`jaxinfra simulate --run-command` on `manifest` in `folder` (one the user can read): status, report, output."""
    (folder / "job.yaml").write_text(manifest)
    report = folder / "report.json"
    r = unprivileged.run(
        [
            sys.executable,
            "-m",
            "jaxinfra",
            "simulate",
            str(folder / "job.yaml"),
            "--run-command",
            "--json",
            str(report),
            "--grace-cap",
            GRACE,
            *args,
        ],
        folder,
        as_root=as_root,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    return r.returncode, json.loads(report.read_text()), r.stdout + r.stderr


def first_pod(report: dict[str, Any]) -> dict[str, Any]:
    return report["workloads"][0]["attempts"][0]["pods"][0]


@pytest.fixture
def home() -> Any:
    folder = unprivileged.scratch_home()
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=False)


SLEEPER = "import os, time; print('pid', os.getpid(), flush=True); time.sleep(30)"


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
def test_a_program_without_a_sigterm_handler_is_pid_1_and_runs_on_until_sigkill(home: Path, as_root: bool) -> None:
    rc, report, out = simulate(home, job(["python", "-c", SLEEPER]), "--preempt", "stop-0@1", as_root=as_root)
    pod = first_pod(report)
    assert rc == 1 and "[stop-0] pid 1" in out, out
    assert (pod["signal"], pod["exit_code"]) == ("SIGKILL", 137)
    after = float(pod["reason"].split("killed by SIGKILL ")[1].split(" s later")[0])
    assert float(GRACE) <= after < float(GRACE) + 1, "the SIGTERM did nothing; the grace period's SIGKILL ended it"
    assert "its PID 1 (python) had no SIGTERM handler, so the kernel dropped the SIGTERM" in pod["reason"]


def test_a_program_that_handles_sigterm_ends_in_its_grace_period_with_its_own_code(home: Path) -> None:
    handled = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(143)); time.sleep(30)"
    rc, report, _ = simulate(home, job(["python", "-c", handled]), "--preempt", "stop-0@1")
    pod = first_pod(report)
    assert rc == 1 and (pod["signal"], pod["exit_code"]) == (None, 143) and "PID 1" not in pod["reason"]
    exited = re.search(r"exited 143 ([0-9.]+) s later \(grace period 2 s", pod["reason"])
    assert pod["reason"].startswith("preempted: SIGTERM at ") and exited is not None, pod["reason"]
    assert float(exited.group(1)) < 1.0, pod["reason"]  # at its handler, well before the grace period's SIGKILL


def test_only_pid_1_gets_the_stop_signal_not_a_wrapper_shells_child(home: Path) -> None:
    """`sh -c "python train.py; ..."`: the shell is PID 1 without a handler, so the trainer never hears the SIGTERM."""
    child = (
        "import signal, time; signal.signal(signal.SIGTERM, lambda *_: print('child: SIGTERM', flush=True)); "
        "time.sleep(30)"
    )
    rc, report, out = simulate(
        home, job(["sh", "-c", f'python -c "{child}"; echo shell done']), "--preempt", "stop-0@1"
    )
    assert rc == 1
    assert (first_pod(report)["signal"], first_pod(report)["exit_code"]) == ("SIGKILL", 137)
    assert "child: SIGTERM" not in out and "shell done" not in out, out
    assert (
        "its PID 1 (sh) had no SIGTERM handler" in first_pod(report)["reason"]
        and "`exec`" in first_pod(report)["reason"]
    )


def test_nothing_a_container_started_outlives_its_pid_1(home: Path) -> None:
    """A daemon in its own session escapes any process group, never its PID namespace."""
    marker = f"{os.getpid()}.{len(str(home))}1"  # a sleep no other process on this machine runs
    rc, report, out = simulate(home, job(["sh", "-c", f"setsid sleep {marker} & sleep 0.5; echo started"]))
    assert rc == 0 and "started" in out, out
    survivors = [p for p in Path("/proc").glob("[0-9]*/cmdline") if _has(p, f"sleep\0{marker}")]
    assert survivors == []


def _has(cmdline: Path, needle: str) -> bool:
    try:
        return needle in cmdline.read_text()
    except OSError:
        return False


@pytest.mark.parametrize(
    ("values", "verdict", "restarts"),
    [([137], "failed", 0), ([42], "succeeded", 1)],
    ids=["FailJob on 137", "other codes count"],
)
def test_pod_failure_policy_matches_a_sigkill_as_exit_code_137(
    home: Path, values: list[int], verdict: str, restarts: int
) -> None:
    """--kill is a SIGKILL (an OOM kill, a crashed node's container): the Job controller sees exit code 137."""
    rules = [{"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": values}}]
    rc, report, out = simulate(home, job(["sh", "-c", "sleep 2"], backoff_limit=1, rules=rules), "--kill", "stop-0@0.5")
    [w] = report["workloads"]
    assert rc == (1 if verdict == "failed" else 0) and (w["verdict"], w["restarts"]) == (verdict, restarts), out
    attempt = w["attempts"][0]
    killed = (attempt["replaced"] or attempt["pods"])[0]  # recreated under a new name where the Job went on
    assert (killed["signal"], killed["exit_code"]) == ("SIGKILL", 137)
    assert ("podFailurePolicy: FailJob" in out) == (verdict == "failed"), out


def test_a_run_command_program_keeps_the_kernels_timer_slack(home: Path) -> None:
    """Only the probe coarsens its timers (container.PROBE_TIMER_SLACK_NS): a program's own sleeps and timeouts fire
    when they would on a node."""
    from jaxinfra_sim.kubelet.container import PROBE_TIMER_SLACK_NS

    check = f'test "$(cat /proc/self/timerslack_ns)" -lt {PROBE_TIMER_SLACK_NS}'
    rc, report, out = simulate(home, job(["sh", "-c", check]))
    assert rc == 0, out
    assert first_pod(report)["exit_code"] == 0
