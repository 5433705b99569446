"""The controllers' conformance suite, as data: each case is a file pair under `tests/conformance/<controller>/`
(kwok's testdata style), taken as facts from upstream's own integration tests and docs: `<case>.yaml`, the
manifests as `kubectl apply` sends them, in the style of upstream's examples (busybox shell lines standing in for
the pod statuses those tests set), and `<case>.expected.yaml`, the status a cluster gives: the verdict, words of
the reason, restarts, failed pods, phases, start order, and the upstream source (repository @ commit, file, test
and case). Each runs through `jaxinfra simulate --run-command` as a user runs it. A new upstream case is two files.

What the upstream tests set by hand (a pod's phase, an exit code, a DisruptionTarget condition) comes here from the
program: its exit code, a `--preempt` (the kubelet's DisruptionTarget, given as `args`), and a claim `state` where a
pod leaves a marker for the pod that replaces it ("fails once, then succeeds"). Where the pods are JAX processes (a
JAXJob, a TrainJob on a JAX runtime) a case runs the built-in probe (`probe: true`), a failing pod a `--fail`; what
Kueue decides (admission, its pending message, a ProvisioningRequest check's `--provision`) is the workload's verdict,
problems and notes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli import simulate_cli
from tests.support.paths import ROOT

pytestmark = pytest.mark.simulator

CASES = ROOT / "tests" / "conformance"
FIELDS = {
    "source",
    "verdict",
    "reason",
    "notes",
    "restarts",
    "failedPods",
    "phases",
    "startedBefore",
    "args",
    "timeout",
    "probe",
}
VERDICTS = {"succeeded", "failed", "not finished", "never admitted", "not emulated"}
NEVER_ADMITTED = "would stay suspended: "  # the simulator's problem for a workload Kueue never admits


def cases() -> list[Any]:
    found = sorted(CASES.glob("*/*.expected.yaml"))
    assert len(found) >= 24, f"the conformance cases are missing from {CASES}"
    return [pytest.param(path, id=f"{path.parent.name}/{path.name.removesuffix('.expected.yaml')}") for path in found]


def expected_of(path: Path) -> dict[str, Any]:
    """The case's expected status, checked for what the test can read: a misspelt field must not pass unread."""
    expected = yaml.safe_load(path.read_text())
    assert set(expected) <= FIELDS and {"source", "verdict"} <= set(expected), (path, sorted(set(expected) ^ FIELDS))
    assert expected["verdict"] in VERDICTS, (path, expected["verdict"])
    return expected


@pytest.mark.parametrize("expected_file", cases())
def test_the_simulator_gives_the_verdict_upstream_tests_expect(tmp_path: Path, expected_file: Path) -> None:
    case = expected_of(expected_file)
    manifests = expected_file.with_name(expected_file.name.replace(".expected.yaml", ".yaml"))
    source = case["source"]
    command = () if case.get("probe") else ("--run-command",)  # the built-in probe where the pods are JAX processes
    rc, report, out = simulate_cli(
        str(manifests), *command, "--timeout", str(case.get("timeout", 60)), *case.get("args", ()), tmp=tmp_path
    )
    assert report.get("workloads"), out
    [workload] = report["workloads"]
    said = " | ".join([workload["reason"] or "", *(p["message"] for p in workload["problems"])])
    verdict = case["verdict"]
    status = {"succeeded": 0, "not emulated": 2}.get(verdict, 1)
    if verdict in ("never admitted", "not emulated"):  # refused before any pod, a problem saying why
        assert not workload["attempts"], source + out
        assert verdict == "not emulated" or NEVER_ADMITTED in said, source + out  # Kueue's pending message
        verdict = "failed"
    assert (rc, workload["verdict"]) == (status, verdict), source + out
    for words in case.get("reason", ()):
        assert words in said, source + out
    notes = [*workload["notes"], (workload["held"] or {}).get("note", "")]
    for words in case.get("notes", ()):  # Kueue's admission (flavor, quota taken, borrowing), a hold's note
        assert any(words in note for note in notes), source + out
    if "restarts" in case:
        assert workload["restarts"] == case["restarts"], source + out
    if "failedPods" in case:  # the Job's status.failed: its failed pods, over all attempts
        pods = [p for a in workload["attempts"] for p in [*a["pods"], *a.get("replaced", ())]]
        assert sum(p["phase"] == "failed" for p in pods) == case["failedPods"], source + out
    last = workload["attempts"][-1]["pods"] if workload["attempts"] else []
    phases = {p["hostname"]: p["phase"] for p in last}
    wanted = case.get("phases", {})
    assert {k: phases.get(k) for k in wanted} == wanted, source + out
    started: dict[str, Any] = {}
    for p in last:  # the first pod of each replicatedJob (`<jobset>-<rjob>-<job>-<index>`)
        started.setdefault(p["hostname"].split("-")[1], p["timings"].get("started"))
    for a, b in case.get("startedBefore", ()):  # replicatedJob a's first pod started before b's
        assert started[a] is not None and started[b] is not None and started[a] < started[b], source + out


def test_every_case_has_its_manifests_and_a_readable_expectation() -> None:
    for param in cases():
        [path] = param.values
        expected_of(path)
        assert path.with_name(path.name.replace(".expected.yaml", ".yaml")).is_file(), path
