"""Every container of a pod, as the kubelet runs them (pkg/kubelet/kuberuntime): init containers in order, each to
completion before the next; native sidecars (init containers with restartPolicy Always) started before the main
containers, kept running, stopped after them; every main container, the pod's phase from all of them. Manifests in
the style of the Kubernetes docs' Job examples (an Indexed Job whose init container writes each index's input) and of
its sidecar docs, run with --run-command as a user would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jaxinfra.yamlio import dump
from tests.support import jobsets
from tests.support.cli import simulate_cli

pytestmark = pytest.mark.simulator

SHARED = {"name": "work", "mountPath": "/work"}


def container(name: str, script: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox:1.36", "command": ["sh", "-c", script], "volumeMounts": [SHARED], **more}


def indexed_job(
    containers: list[dict[str, Any]], inits: list[dict[str, Any]] = (), pods: int = 2, **spec: Any
) -> dict[str, Any]:
    """An Indexed Job of `pods` pods sharing an emptyDir `work` between their containers; fails at its first failed
    pod (backoffLimit 0, restartPolicy Never) unless `spec` says otherwise (the pod's restartPolicy, the Job's
    fields)."""
    pod: dict[str, Any] = {
        "restartPolicy": spec.pop("restartPolicy", "Never"),
        "terminationGracePeriodSeconds": 1,
        "containers": containers,
        "volumes": [{"name": "work", "emptyDir": {}}],
    }
    if inits:
        pod["initContainers"] = list(inits)
    return jobsets.indexed_job("job", pod, pods, **{"backoffLimit": 0, **spec})


def simulate(tmp_path: Path, manifest: dict[str, Any], *extra: str, timeout: str = "30") -> dict[str, Any]:
    """The one workload's report, checked to exit as its verdict says."""
    (tmp_path / "job.yaml").write_text(dump([manifest]))
    rc, report, out = simulate_cli(str(tmp_path / "job.yaml"), *extra, "--timeout", timeout, tmp=tmp_path)
    [workload] = report["workloads"]
    assert rc == (0 if workload["verdict"] == "succeeded" else 1), out
    return workload


def run(tmp_path: Path, manifest: dict[str, Any], timeout: str = "30") -> dict[str, Any]:
    return simulate(tmp_path, manifest, "--run-command", timeout=timeout)


WRITE_INPUT = container("input", 'set -- alpha bravo; shift "$JOB_COMPLETION_INDEX"; echo "$1" > /work/data.txt')
REVERSE = container("worker", 'rev /work/data.txt && test "$(cat /work/data.txt)" = "$EXPECTED"')


def test_an_init_container_writes_each_indexs_input_before_the_worker_starts(tmp_path: Path) -> None:
    """The docs' Indexed Job with static work assignment: the Job controller gives init containers the index too."""
    worker = {
        **REVERSE,
        "command": [
            "sh",
            "-c",
            'set -- alpha bravo; shift "$JOB_COMPLETION_INDEX"; ' + REVERSE["command"][2].replace("$EXPECTED", "$1"),
        ],
    }
    workload = run(tmp_path, indexed_job([worker], [WRITE_INPUT]))
    assert workload["verdict"] == "succeeded"
    for pod in workload["attempts"][0]["pods"]:
        [init] = pod["containers"]
        assert (init["name"], init["role"], init["exit_code"]) == ("input", "init", 0)
        assert init["ended"] <= pod["timings"]["started"]  # the worker started after its init container completed


def test_a_failed_init_container_fails_the_pod_and_the_main_container_never_starts(tmp_path: Path) -> None:
    failing = container("check", "echo no input >&2; exit 3")
    workload = run(tmp_path, indexed_job([REVERSE], [failing, WRITE_INPUT]))
    assert workload["verdict"] == "failed" and "BackoffLimitExceeded" in workload["reason"]
    assert "init container check: exit code 3" in workload["reason"]
    for pod in workload["attempts"][0]["pods"]:
        assert pod["pid"] is None and "started" not in pod["timings"]
        assert [c["name"] for c in pod["containers"]] == ["check"]  # the next init container never ran either


def test_init_containers_run_once_per_pod_not_again_when_its_container_restarts_in_place(tmp_path: Path) -> None:
    """restartPolicy OnFailure: the kubelet restarts the failed container in its pod; the pod's init containers
    completed already and do not run again (they would for a new pod)."""
    count = container("count", "echo run >> /work/inits")
    flaky = container(
        "worker", "test -e /work/failed-once || { touch /work/failed-once; exit 1; }; test $(wc -l < /work/inits) -eq 1"
    )
    workload = run(tmp_path, indexed_job([flaky], [count], pods=1, restartPolicy="OnFailure", backoffLimit=2))
    assert (workload["verdict"], len(workload["attempts"])) == ("succeeded", 2)
    assert workload["attempts"][0]["then"] == "restarted in place"
    assert workload["attempts"][1]["pods"][0]["containers"] == []


SIDECAR = container(
    "proxy",
    "trap 'echo stopped >> /work/log; exit 0' TERM; echo up > /work/ready; while :; do sleep 0.05; done",
    restartPolicy="Always",
)


def test_a_native_sidecar_starts_before_the_main_container_and_stops_after_it(tmp_path: Path) -> None:
    """The sidecar docs' pattern: it runs beside the main container for the pod's life, is stopped (SIGTERM) once
    the main container has exited, and the pod succeeds on the main container's exit code alone."""
    main = container("main", "until [ -e /work/ready ]; do sleep 0.05; done; sleep 0.3; test ! -e /work/log")
    workload = run(tmp_path, indexed_job([main], [SIDECAR], pods=1))
    assert workload["verdict"] == "succeeded"
    [pod] = workload["attempts"][0]["pods"]
    [proxy] = pod["containers"]
    assert (proxy["role"], proxy["exit_code"], proxy["signal"]) == ("sidecar", 0, None)
    # started before the main container; stopped after it (its log was empty then), before the pod's phase was set
    assert proxy["started"] <= pod["timings"]["started"] <= proxy["ended"] <= pod["timings"]["succeeded"]


def test_a_sidecar_that_ignores_sigterm_is_killed_after_the_grace_period_and_the_pod_still_succeeds(
    tmp_path: Path,
) -> None:
    deaf = container("proxy", "trap '' TERM; while :; do sleep 0.05; done", restartPolicy="Always")
    workload = run(tmp_path, indexed_job([container("main", "true")], [deaf], pods=1))
    assert workload["verdict"] == "succeeded"
    [proxy] = workload["attempts"][0]["pods"][0]["containers"]
    assert proxy["signal"] == "SIGKILL"


def test_a_sidecar_that_exits_is_started_again_and_fails_nothing(tmp_path: Path) -> None:
    crashing = container("proxy", "echo run >> /work/proxy; exit 7", restartPolicy="Always")
    main = container("main", "until [ $(cat /work/proxy 2>/dev/null | wc -l) -ge 2 ]; do sleep 0.1; done")
    workload = run(tmp_path, indexed_job([main], [crashing], pods=1))
    assert workload["verdict"] == "succeeded"
    runs = workload["attempts"][0]["pods"][0]["containers"]
    assert [c["restarts"] for c in runs][:2] == [0, 1] and runs[0]["exit_code"] == 7


def test_every_main_container_runs_and_the_pod_fails_once_all_have_exited(tmp_path: Path) -> None:
    """restartPolicy Never: the pod is Failed only when its last main container has exited, if any exited non-zero;
    a podFailurePolicy rule with a containerName matches that container's exit code."""
    rules = [{"action": "FailJob", "onExitCodes": {"containerName": "uploader", "operator": "In", "values": [4]}}]
    main = container("trainer", "sleep 0.5; echo done > /work/trained")
    uploader = container("uploader", "while [ ! -e /work/trained ]; do sleep 0.05; done; exit 4")
    workload = run(tmp_path, indexed_job([main, uploader], pods=1, backoffLimit=3, podFailurePolicy={"rules": rules}))
    assert workload["verdict"] == "failed" and len(workload["attempts"]) == 1
    assert (
        "Container uploader for pod default/" in workload["reason"]
        and "exit code 4 matching FailJob rule at index 0" in workload["reason"]
    )
    [pod] = workload["attempts"][0]["pods"]
    assert pod["exit_code"] == 0 and pod["reason"] == "container uploader: exit code 4"


def test_a_second_main_container_that_never_exits_keeps_the_job_running(tmp_path: Path) -> None:
    """An old-style sidecar (a main container): the pod never completes, so neither does the Job."""
    workload = run(
        tmp_path, indexed_job([container("main", "true"), container("logs", "sleep 60")], pods=1), timeout="3"
    )
    assert workload["verdict"] == "not finished" and "on a cluster it would keep running" in workload["reason"]


def test_the_probe_runs_in_the_jax_container_alone_and_says_what_it_did_not_run(tmp_path: Path) -> None:
    manifest = indexed_job([container("jax", "exit 1")], [container("input", "exit 1")], pods=1)
    (tmp_path / "job.yaml").write_text(dump([manifest]))
    rc, report, out = simulate_cli(str(tmp_path / "job.yaml"), "--timeout", "60", tmp=tmp_path)
    assert any("not run: init container input (--run-command runs every container)" in n for n in report["notes"]), out
