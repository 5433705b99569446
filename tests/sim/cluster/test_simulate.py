"""`jaxinfra simulate` end to end: real JAX processes from real manifests, faults, verdicts, no leftovers."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jaxinfra_sim.core.options import Options
from tests.support import unprivileged
from tests.support.cli import simulate_cli as simulate
from tests.support.paths import MANIFESTS, NO_RESTART, ROOT
from tests.support.polling import wait_until
from tests.support.stacks import PAIR_IDS, PAIRS, rendered

pytestmark = pytest.mark.simulator


def verdicts(report: dict[str, Any]) -> list[tuple[str, str, list[tuple[str, int, str]]]]:
    return [
        (w["id"], w["verdict"], [(p["hostname"], p["rank"], p["phase"]) for p in w["attempts"][-1]["pods"]])
        for w in report["workloads"]
    ]


def only(report: dict[str, Any]) -> dict[str, Any]:
    [workload] = report["workloads"]
    return workload


def test_default_stack_passes_every_check(tmp_path: Path) -> None:
    """`jaxinfra simulate` with no argument at the checkout's root, a training-infrastructure project: the default
    stack its pyproject.toml names ([tool.jaxinfra.simulate] stacks), not every stack of stacks/."""
    rc, report, _ = simulate(tmp=tmp_path, cwd=ROOT)
    assert rc == 0 and report["ok"]
    assert [w["source"] for w in report["workloads"]] == ["stacks/cpu_dev.py"]
    w = only(report)
    assert (w["verdict"], w["restarts"], w["pods"]) == ("succeeded", 0, 2)
    for pod in w["attempts"][0]["pods"]:
        assert pod["exit_code"] == 0 and pod["checks_passed"]
        assert set(pod["checks"]) == {"rank", "mesh", "psum", "all_gather", "ppermute", "all_to_all", "train_step"}
        assert {"started", "initializing", "running", "succeeded"} <= set(pod["timings"])
    # one compile for the group: rank 0 compiled the program, the other pod ran that executable
    assert [p["program"] for p in w["attempts"][0]["pods"]] == [
        "compiled, shared with the group",
        "loaded from process 0",
    ]


@pytest.mark.parametrize(("path", "backend"), PAIRS, ids=PAIR_IDS)
def test_every_stack_and_backend_from_memory_and_from_yaml(path: Path, backend: str, tmp_path: Path) -> None:
    """Every pair from its synthesized YAML; from memory (the stack file itself) too on the CPU stack, once per
    backend: that path renders in-process, the same code for every stack, so the other stacks would run it again."""
    out = tmp_path / "out"
    synth = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "synth", str(path), "--backend", backend, "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert synth.returncode == 0, synth.stderr
    rc_yaml, from_yaml, err = simulate(*map(str, sorted(out.glob("*.yaml"))), tmp=tmp_path)
    assert rc_yaml == 0, err
    assert all(p["checks_passed"] for p in only(from_yaml)["attempts"][-1]["pods"])
    if path.stem == "cpu_dev":
        rc_mem, mem, err = simulate(str(path), "--backend", backend, tmp=tmp_path)
        assert rc_mem == 0, err
        assert verdicts(mem) == verdicts(from_yaml)


def _with_env(node: Any, name: str, value: str) -> None:
    """Set an env var on every container (and TrainJob trainer) in a manifest, replacing one of that name."""
    if isinstance(node, dict):
        if "image" in node and "command" in node:
            node["env"] = [e for e in node.get("env") or [] if e.get("name") != name] + [{"name": name, "value": value}]
        for child in node.values():
            _with_env(child, name, value)
    elif isinstance(node, list):
        for child in node:
            _with_env(child, name, value)


#: Every backend (on the CPU stack) and every stack (on JobSet): what the program meets differs by backend in its env
#: contract and by stack in its devices and mesh, and every (stack, backend) pair's contract is checked by the probe
#: above; the full product (14 runs of real training) cost the suite a minute more for nothing those two cover.
PROGRAM_PAIRS = [(p, b) for p, b in PAIRS if p.stem == "cpu_dev" or b == "jobset"]


@pytest.mark.parametrize(("path", "backend"), PROGRAM_PAIRS, ids=[f"{p.stem}.{b}" for p, b in PROGRAM_PAIRS])
def test_every_stack_and_backend_runs_the_example_training_program(path: Path, backend: str, tmp_path: Path) -> None:
    """The stacks' own command, `python -m train` (jaxinfra/templates/train, which the example project's
    [tool.jaxinfra.simulate.images] puts in the stacks' images: run from there, as its user would), on every backend
    and every stack (PROGRAM_PAIRS); TPU and GPU stacks on the simulator's CPU stand-in. Five steps."""
    from jaxinfra.yamlio import dump

    objs = rendered(path, backend)
    _with_env(objs, "TRAIN_STEPS", "5")
    manifest = tmp_path / f"{path.stem}.{backend}.yaml"
    manifest.write_text(dump(objs))
    rc, report, err = simulate(str(manifest), "--run-command", tmp=tmp_path, timeout=300, cwd=ROOT)
    assert rc == 0, err
    assert only(report)["verdict"] == "succeeded"


def test_handwritten_multislice_jobset_with_bare_initialize(tmp_path: Path) -> None:
    rc, report, err = simulate(str(MANIFESTS / "jobset_multislice_bare_init.yaml"), "--run-command", tmp=tmp_path)
    assert rc == 0, err
    w = only(report)
    assert [p["hostname"] for p in w["attempts"][0]["pods"]] == [
        f"multislice-slice-{j}-{p}" for j in range(2) for p in range(2)
    ]


def test_handwritten_indexed_job_with_its_own_service(tmp_path: Path) -> None:
    rc, report, err = simulate(str(MANIFESTS / "indexed_job_own_service.yaml"), "--run-command", tmp=tmp_path)
    assert rc == 0, err
    assert [p["hostname"] for p in only(report)["attempts"][0]["pods"]] == [
        "jax-indexed-0",
        "jax-indexed-1",
        "jax-indexed-2",
    ]


def _synthesized(backend: str) -> list[dict[str, Any]]:
    return rendered(ROOT / "stacks" / "cpu_dev.py", backend)


def _container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return _pod_spec(objs)["containers"][0]


def _index(objs: list[dict[str, Any]], kind: str) -> int:
    return next(i for i, o in enumerate(objs) if o["kind"] == kind)


def _pod_spec(objs: list[dict[str, Any]]) -> dict[str, Any]:
    w = objs[-1]
    job = w["spec"]["replicatedJobs"][0]["template"] if w["kind"] == "JobSet" else w
    return job["spec"]["template"]["spec"]


def _set_env(objs: list[dict[str, Any]], name: str, value: str | None) -> None:
    env = _container(objs)["env"]
    env[:] = [e for e in env if e["name"] != name] + ([{"name": name, "value": value}] if value is not None else [])


BROKEN = {
    # name: (backend, how to break it, phrase the reason must contain)
    "Service missing": ("job", lambda o: o.pop(_index(o, "Service")), "no Service named 'train'"),
    "Service not selecting the pods": (
        "job",
        lambda o: o[_index(o, "Service")]["spec"]["selector"].update({"batch.kubernetes.io/job-name": "x"}),
        "does not select",
    ),
    "subdomain unset": ("job", lambda o: _pod_spec(o).pop("subdomain"), "subdomain"),
    # a declared containerPort is informational; what must agree is where rank 0 binds and where the others connect
    "wrong coordinator port": (
        "jobset",
        lambda o: _set_env(o, "JAX_COORDINATOR_BIND_ADDRESS", "[::]:9999"),
        "rank 0 binds the coordinator on port 9999",
    ),
    "process count is not the pod count": (
        "jobset",
        lambda o: _set_env(o, "JAX_NUM_PROCESSES", "3"),
        "the workload has 2 pods",
    ),
    "rank env missing": ("jobset", lambda o: _set_env(o, "JAX_PROCESS_ID", None), "rank env missing"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_manifests_are_caught_with_a_precise_reason(case: str) -> None:
    from jaxinfra_sim.cluster.control_plane import emulate

    backend, breaks, phrase = BROKEN[case]
    objs = _synthesized(backend)
    assert emulate(objs).workloads[0].problems == ()
    breaks(objs)
    problems = emulate(objs).workloads[0].problems
    assert problems and any(phrase in f"{p.message} {p.fix}" for p in problems), problems
    assert all(p.fix for p in problems)


def test_broken_manifest_fails_the_simulation_before_anything_runs(tmp_path: Path) -> None:
    from jaxinfra.yamlio import dump

    objs = _synthesized("job")
    objs[_index(objs, "Service")]["spec"]["selector"] = {"batch.kubernetes.io/job-name": "other"}
    broken = tmp_path / "broken.yaml"
    broken.write_text(dump(objs))
    rc, report, _ = simulate(str(broken), tmp=tmp_path)
    w = only(report)
    assert rc == 1 and w["verdict"] == "failed" and w["attempts"] == []
    assert any("does not select" in p["message"] for p in w["problems"])


FAULTS = {
    # name: (extra args, verdict, phrase in the failing attempt's reason)
    "crash": (["--fail", "1"], "failed", "exit code 1"),
    "sigkill": (["--kill", "train-node-0-1@0.1"], "failed", "SIGKILL"),
    "hang": (["--hang", "1", "--init-timeout", "2"], "failed", "no progress"),
    "late start past the init timeout": (
        ["--delay", "1=4", "--init-timeout", "2"],
        "failed",
        "not started yet: train-node-0-1",
    ),
    "late start within the init timeout": (["--delay", "1=1", "--init-timeout", "6"], "succeeded", ""),
    "missing coordinator": (["--delay", "0=4", "--init-timeout", "2"], "failed", "not started yet: train-node-0-0"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_faults_give_the_expected_verdict_fast(fault: str, tmp_path: Path) -> None:
    args, verdict, phrase = FAULTS[fault]
    rc, report, _ = simulate(NO_RESTART, *args, tmp=tmp_path)
    w = only(report)
    assert w["verdict"] == verdict and rc == (0 if verdict == "succeeded" else 1)
    first = w["attempts"][0]
    assert phrase in (first["reason"] or "")
    if fault in ("crash", "sigkill"):  # from the crash to the verdict: the group's end, not JAX's heartbeat timeout
        crashed = next(p for p in first["pods"] if p["reason"] != "ended with its group" and p["phase"] == "failed")
        assert first["seconds"] - crashed["timings"]["failed"] < Options.heartbeat_timeout / 2
    if fault == "hang":  # the stuck pod's row counts the time it hung (it showed 0.04 s, its last report, before)
        stuck = next(p for p in first["pods"] if (p["reason"] or "").startswith("no progress"))
        assert stuck["timings"]["failed"] - stuck["timings"]["started"] > 2


def test_jobset_restarts_the_whole_group_and_recovers(tmp_path: Path) -> None:
    rc, report, _ = simulate("stacks/tpu_v5e_2x4.py", "--kill", "1@0.1", tmp=tmp_path)  # maxRestarts: 3
    w = only(report)
    assert rc == 0 and (w["verdict"], w["restarts"]) == ("succeeded", 1)
    assert [a["ok"] for a in w["attempts"]] == [False, True]
    ips = [[p["ip"] for p in a["pods"]] for a in w["attempts"]]
    assert set(ips[0]).isdisjoint(ips[1])  # recreated pods get new addresses


def test_restarted_pods_see_the_jobset_restart_attempt(tmp_path: Path) -> None:
    """The JobSet controller stamps status.restarts on every recreated pod; a script that reads it
    through the downward API (to resume from a checkpoint, say) sees 0, then 1."""
    from jaxinfra.yamlio import dump

    objs = _synthesized("jobset")
    objs[-1]["spec"]["failurePolicy"]["maxRestarts"] = 1
    container = _container(objs)
    container["env"].append(
        {
            "name": "ATTEMPT",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/restart-attempt']"}},
        }
    )
    container["command"], container["args"] = ["sh", "-c", 'echo "attempt $ATTEMPT"; test "$ATTEMPT" = 1'], []
    manifest = tmp_path / "resume.yaml"
    manifest.write_text(dump(objs))
    rc, report, err = simulate(str(manifest), "--run-command", tmp=tmp_path)
    w = only(report)
    assert rc == 0 and (w["verdict"], w["restarts"]) == ("succeeded", 1), err
    first, second = (
        [p["exit_code"] for p in a["pods"] if p["reason"] != "ended with its group"] for a in w["attempts"]
    )
    assert first and set(first) == {1} and second == [0, 0]


def test_indexed_job_budget_counts_every_pod_of_the_group(tmp_path: Path) -> None:
    # max_restarts 0: backoffLimit 0, the first failure fails the Job.
    rc, report, _ = simulate(NO_RESTART, "--backend", "job", "--fail", "0", tmp=tmp_path)
    w = only(report)
    assert rc == 1 and w["restarts"] == 0 and "backoffLimit (0) exceeded" in w["reason"]


def _marked(marker: str) -> dict[int, int]:
    """Every live process whose environment names `marker` (the run's TMPDIR: the command, its prefork child and every
    pod's process, forks of it), by pid, with its session."""
    found = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if marker.encode() not in (entry / "environ").read_bytes():
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            found[int(entry.name)] = int(fields[3])
    return found


def _pod_processes(sid: int, marker: str) -> int:
    """The processes of the pods: each pod's shim and its container, in a session of their own (no terminal of the
    caller's), unlike the command's own (its session, `sid`) and the pod network's holder's, whose workers come and
    go as each pod's network is made (counted, they ended the wait before the pods had started)."""
    marked = _marked(marker)
    holders = set()
    for pid, session in marked.items():
        with contextlib.suppress(OSError):
            if b"netns_holder" in Path(f"/proc/{pid}/cmdline").read_bytes():
                holders.add(session)
    return sum(session != sid and session not in holders for session in marked.values())


@pytest.mark.parametrize(
    ("signum", "whole_group", "status"),
    [(signal.SIGTERM, False, 143), (signal.SIGINT, True, 130)],
    ids=["SIGTERM to the command", "Ctrl-C"],
)
def test_a_stopped_simulation_leaves_no_pod_behind(signum: int, whole_group: bool, status: int, tmp_path: Path) -> None:
    """`timeout`, a CI cancel or Ctrl-C mid-run: the pods die with the command and its temp dir goes."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jaxinfra",
            "simulate",
            "stacks/cpu_dev.py",
            "--hang",
            "1",
            "--init-timeout",
            "60",
            "--no-logs",
        ],
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    try:
        # Pods start in seconds; on a loaded machine (the suite beside other work) one took over 60.
        deadline = time.monotonic() + 180
        while _pod_processes(proc.pid, str(scratch)) < 4 and time.monotonic() < deadline:  # 2 pods: shim, container
            time.sleep(0.05)
        assert _pod_processes(proc.pid, str(scratch)) >= 4, f"the pods never started: {_marked(str(scratch))}"
        (os.killpg if whole_group else os.kill)(proc.pid, signum)
        assert proc.wait(timeout=20) == status
        assert "Traceback" not in proc.stderr.read().decode()
        assert _marked(str(scratch)) == {} and list(scratch.iterdir()) == []
    finally:  # whatever the outcome, nothing of this test outlives it
        for pid in _marked(str(scratch)):
            os.kill(pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.parametrize("as_root", [True, False], ids=["as root", "unprivileged"])
def test_the_simulations_folder_removed_while_it_runs_is_the_machines_verdict(as_root: bool) -> None:
    """A temp cleaner (systemd-tmpfiles, a CI runner's clean-up) removes the simulation's folder while its pods run:
    the machine's verdict, exit 3, one line naming the folder, never a traceback or the job's failure."""
    home = unprivileged.scratch_home()  # HOME and TMPDIR
    argv, env, save = unprivileged.command(
        [sys.executable, "-m", "jaxinfra", "simulate", "stacks/cpu_dev.py", "--delay", "1=30", "--no-logs"],
        home,
        as_root=as_root,
    )
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        folder = wait_until(lambda: next(home.glob("jaxinfra-sim-*/0-*/pod-0"), None), timeout=120).parent.parent
        subprocess.run(["rm", "-rf", str(folder)], check=False)  # what a cleaner does: whatever it can
        out, err = proc.communicate(timeout=60)
        left = list(home.iterdir())
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(home, ignore_errors=True)
        if save is not None:
            shutil.rmtree(save, ignore_errors=True)
    assert proc.returncode == 3, out + err
    assert "Traceback" not in out + err
    assert err.splitlines()[-1] == (
        f"jaxinfra: the simulation's folder {folder} was removed while it ran (by something else on this machine: a "
        "temp cleaner such as systemd-tmpfiles or tmpreaper, a CI runner's clean-up), and its pods' files with it; "
        "fix: leave it until jaxinfra simulate ends, or set TMPDIR to a folder no cleaner touches"
    )
    assert left == []


def test_bad_fault_syntax_is_an_input_error(tmp_path: Path) -> None:
    rc, _, err = simulate(NO_RESTART, "--kill", "train-0", "--delay", "x=y", tmp=tmp_path)
    assert rc == 2 and err.count("error: ") == 2


def _script(manifest: str, kind: str) -> list[str]:
    """The command + args of the operator-style script in a hand-written manifest."""
    from jaxinfra.yamlio import load

    obj = next(o for o in load((MANIFESTS / manifest).read_text()) if o["kind"] == kind)
    body = (
        obj["spec"]["trainer"]
        if kind == "TrainJob"
        else obj["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    )
    return [*body["command"], *body.get("args", [])]


OPERATOR_SCRIPTS = {
    "jaxjob": ("jaxjob_cpu_v1_script.yaml", "JAXJob"),
    "trainjob": ("trainjob_upstream_runtime.yaml", "TrainJob"),
}


@pytest.mark.parametrize(
    ("stack", "backend"), [("cpu_dev", "jaxjob"), ("cpu_dev", "trainjob"), ("gpu_h100_2x8", "jaxjob")]
)  # 8 devices per host on the v1 operator, the GPU users' one; the TrainJob's on GPU adds nothing the probe lacks
def test_operator_scripts_run_unchanged_on_synthesized_output(stack: str, backend: str, tmp_path: Path) -> None:
    """A script written for the v1 operator (COORDINATOR_*, NUM_PROCESSES, PROCESS_ID) runs on the
    JAXJob jaxinfra renders; one written for v2 (JAX_*) on the TrainJob: the stack's own container
    command is swapped for the script, nothing else changes. In an image without the `kubernetes`
    package; in one with it, JAX's Kubernetes detection needs the token jaxinfra does not mount, as on
    a cluster (docs/env-contract.md: pass cluster_detection_method="deactivate")."""
    from jaxinfra.yamlio import dump

    command = _script(*OPERATOR_SCRIPTS[backend])
    objs = rendered(ROOT / "stacks" / f"{stack}.py", backend)
    workload = objs[-1]
    if backend == "trainjob":
        workload["spec"]["trainer"].update(command=command[:2], args=command[2:])
    else:
        workload["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(
            command=command[:2], args=command[2:]
        )
    path = tmp_path / f"{stack}.{backend}.yaml"
    path.write_text(dump(objs))
    rc, report, err = simulate(str(path), "--run-command", "--no-k8s-client", tmp=tmp_path)
    assert rc == 0, err
    assert only(report)["verdict"] == "succeeded"
    rc, report, err = simulate(str(path), "--run-command", tmp=tmp_path)
    # The pod that failed by itself says why; the others were ended with it, perhaps before they wrote a line (under
    # load rank 0 may still be importing JAX when rank 1's exception ends the group).
    pods = only(report)["attempts"][0]["pods"]
    own = [p for p in pods if p["phase"] == "failed" and p["reason"] != "ended with its group"]
    assert rc == 1 and own, pods
    assert all(p["stderr_tail"][-1].endswith("ConfigException: Service token file does not exist.") for p in own), own
