"""The simulator as most people run it: a normal user, not root (uid 65534 when the suite runs as
root; see tests/support/unprivileged.py), and on machines where it cannot isolate pods at all."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jaxinfra_sim.runtime import sandbox
from jaxinfra_sim.runtime.sandbox import Attempt, diagnose
from tests.support import unprivileged
from tests.support.paths import MANIFESTS, ROOT

pytestmark = pytest.mark.simulator


def leftover_processes(marker: str) -> list[str]:
    """Processes whose environment still names the run's scratch folder (each simulated pod's does)."""
    out = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "environ").read_bytes():
                out.append(entry.name)
        except OSError:
            pass
    return out


def write_input(home: Path, name: str, text: str) -> str:
    """A manifest in the unprivileged user's folder (readable by it), its path as an argument."""
    (home / name).write_text(text, encoding="utf-8")
    return str(home / name)


def simulate(
    home: Path, *args: str, deny_unshare: bool = False, as_root: bool = False
) -> tuple[int, dict[str, Any], str]:
    """`jaxinfra simulate ARGS` as the unprivileged user: status, JSON report, stderr; nothing may be left behind
    in its HOME and TMPDIR (`home`) but the report and the inputs put there."""
    report = home / "report.json"
    r = unprivileged.run(
        [sys.executable, "-m", "jaxinfra", "simulate", *args, "--no-logs", "--json", str(report)],
        home,
        as_root=as_root,
        deny_unshare=deny_unshare,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    data = json.loads(report.read_text()) if report.exists() else {}
    inputs = {Path(a).name for a in args if Path(a).parent == home}
    assert sorted(p.name for p in home.iterdir() if p.name not in inputs) == (["report.json"] if data else []), (
        "left in TMPDIR"
    )
    assert leftover_processes(str(home)) == []
    return r.returncode, data, r.stderr


def test_the_harness_drops_root() -> None:
    r = unprivileged.run(["id", "-u"], Path("/tmp"), capture_output=True, text=True, check=True)
    assert int(r.stdout) != 0


def test_default_stack_passes(home: Path) -> None:
    rc, report, err = simulate(home, str(ROOT / "stacks" / "cpu_dev.py"))
    assert rc == 0 and report["ok"], err
    [workload] = report["workloads"]
    assert [p["checks_passed"] for p in workload["attempts"][0]["pods"]] == [True, True]


def test_run_command_pods_see_their_own_hostname_hosts_file_and_ip(home: Path) -> None:
    rc, report, err = simulate(home, str(MANIFESTS / "indexed_job_pod_identity.yaml"), "--run-command")
    assert rc == 0, err
    pods = report["workloads"][0]["attempts"][0]["pods"]
    assert [(p["hostname"], p["exit_code"]) for p in pods] == [("identity-0", 0), ("identity-1", 0)]


def test_pods_ping_each_other_by_hostname(home: Path) -> None:
    """ICMP echo sockets are open in the pods' network of a user namespace too (its one group is the user's)."""
    rc, report, err = simulate(home, str(MANIFESTS / "indexed_job_pod_to_pod.yaml"), "--run-command")
    assert rc == 0, err
    pods = report["workloads"][0]["attempts"][0]["pods"]
    assert [p["exit_code"] for p in pods] == [0, 0, 0]


def test_an_exec_probe_runs_inside_its_container(home: Path) -> None:
    """The probe's command enters the container's namespaces from an unprivileged simulator too: it writes into the
    container's /tmp, which the container waits for; the machine's /tmp never gets the file."""
    canary = Path("/tmp/jaxinfra-probe-canary-unprivileged")
    canary.unlink(missing_ok=True)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "probed"},
        "spec": {
            "completionMode": "Indexed",
            "completions": 1,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "app",
                            "image": "busybox:1.36",
                            "command": ["sh", "-c", f"until [ -e {canary} ]; do sleep 0.1; done"],
                            "livenessProbe": {
                                "exec": {"command": ["sh", "-c", f"echo probed > {canary}"]},
                                "periodSeconds": 1,
                            },
                        }
                    ],
                }
            },
        },
    }
    rc, report, err = simulate(home, write_input(home, "job.yaml", json.dumps(job)), "--run-command")
    assert rc == 0, err
    [pod] = report["workloads"][0]["attempts"][0]["pods"]
    assert pod["probes"]["liveness"]["result"] == "success"
    assert not canary.exists()


def test_a_killed_pod_restarts_the_group(home: Path) -> None:
    rc, report, err = simulate(home, "stacks/tpu_v5e_2x4.py", "--kill", "1@0.1")  # maxRestarts: 3
    assert rc == 0, err
    [workload] = report["workloads"]
    assert (workload["verdict"], workload["restarts"]) == ("succeeded", 1)
    first = workload["attempts"][0]["pods"]
    assert first[1]["signal"] == "SIGKILL" and first[1]["reason"] == "killed by SIGKILL"


def test_a_broken_manifest_gets_its_verdict(home: Path) -> None:
    """The Service selects no pod, so no pod's name resolves: the script finds out at run time, as on a cluster."""
    text = (
        (MANIFESTS / "indexed_job_pod_identity.yaml")
        .read_text()
        .replace("job-name: identity", "job-name: someone-else")
    )
    rc, report, err = simulate(home, write_input(home, "broken.yaml", text), "--run-command")
    assert rc == 1, err
    [workload] = report["workloads"]
    assert workload["verdict"] == "failed" and "exit code 1" in workload["reason"]
    assert [p["exit_code"] for p in workload["attempts"][0]["pods"] if p["exit_code"] is not None] != []


@pytest.mark.parametrize("as_root", [False, True], ids=["unprivileged", "root"])
def test_no_namespaces_one_line_with_cause_and_fix(home: Path, as_root: bool) -> None:
    rc, report, err = simulate(home, str(ROOT / "stacks" / "cpu_dev.py"), deny_unshare=True, as_root=as_root)
    assert rc == sandbox.UNAVAILABLE and report == {}
    [line] = err.strip().splitlines()
    assert line.startswith("jaxinfra: cannot simulate here: a seccomp filter forbids new namespaces")
    assert "fix: run it where unshare(2) is allowed" in line


def test_static_problems_are_reported_without_namespaces(home: Path) -> None:
    """A job that would not start anyway is judged where namespaces are missing too: nothing needs to run."""
    text = (MANIFESTS / "indexed_job_pod_identity.yaml").read_text().replace("subdomain: workers", "subdomain: nobody")
    text = text.replace(
        "        env:\n",
        "        env:\n        - name: JAX_COORDINATOR_ADDRESS\n          value: identity-0.workers:4321\n",
    )
    rc, report, err = simulate(home, write_input(home, "nosub.yaml", text), "--run-command", deny_unshare=True)
    assert rc == 1 and "cannot simulate here" not in err
    [workload] = report["workloads"]
    assert workload["reason"] == "1 problems; not started"
    assert "host 'identity-0.workers' does not resolve" in workload["problems"][0]["message"]


# --- why namespaces are missing: each cause names its own fix -----------------------------------

EPERM, ENOSPC = errno.EPERM, errno.ENOSPC
DENIED_UNSHARE = [Attempt("privileged", "unshare(privileged)", EPERM), Attempt("user", "unshare(user)", EPERM)]


@pytest.mark.parametrize(
    ("platform", "uid", "attempts", "sysctls", "seccomp", "cause", "fix"),
    [
        ("darwin", 501, [], {}, 0, "this is darwin, not Linux", "run jaxinfra simulate in a Linux VM"),
        (
            "linux",
            1000,
            [Attempt("privileged", "unshare(privileged)", EPERM), Attempt("user", "unshare(user)", ENOSPC)],
            {"user.max_user_namespaces": "0"},
            0,
            "user.max_user_namespaces = 0",
            "sudo sysctl -w user.max_user_namespaces=15000, or run it as root",
        ),
        (
            "linux",
            1000,
            DENIED_UNSHARE,
            {"kernel.unprivileged_userns_clone": "0"},
            0,
            "kernel.unprivileged_userns_clone = 0",
            "sudo sysctl -w kernel.unprivileged_userns_clone=1",
        ),
        (
            "linux",
            1000,
            [Attempt("privileged", "unshare(privileged)", EPERM), Attempt("user", "make / private", EPERM)],
            {"kernel.apparmor_restrict_unprivileged_userns": "1", "user.max_user_namespaces": "63000"},
            0,
            "AppArmor restricts unprivileged user namespaces",
            "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
        ),
        (
            "linux",
            0,
            DENIED_UNSHARE,
            {},
            2,
            "a seccomp filter forbids new namespaces",
            "--cap-add SYS_ADMIN --security-opt apparmor=unconfined",
        ),
        (
            "linux",
            0,
            [
                Attempt("privileged", "unshare(privileged)", EPERM),
                Attempt("user", "bind /etc/hosts at /tmp/x/root/etc/hosts", EPERM),
            ],
            {},
            0,
            "a security module",
            "--security-opt apparmor=unconfined",
        ),
        (
            "linux",
            1000,
            [Attempt("privileged", "unshare(privileged)", EPERM), Attempt("user", "sethostname", errno.EINVAL)],
            {},
            0,
            "sethostname: Invalid argument",
            "`unshare -U -m --map-root-user true` must succeed), or run it as root (sudo)",
        ),
    ],
)
def test_diagnose(
    platform: str, uid: int, attempts: list[Attempt], sysctls: dict[str, str], seccomp: int, cause: str, fix: str
) -> None:
    got_cause, got_fix = diagnose(platform, uid, attempts, sysctls, seccomp)
    assert cause in got_cause and fix in got_fix


def test_root_needs_no_sudo_in_the_fix() -> None:
    _, fix = diagnose("linux", 0, [Attempt("user", "unshare(user)", ENOSPC)], {"user.max_user_namespaces": "0"}, 0)
    assert fix == "sudo sysctl -w user.max_user_namespaces=15000"


def test_preflight_finds_a_way_in_here() -> None:
    """This machine (CI's too) isolates pods: as root the privileged way, else the user-namespace way."""
    assert sandbox.preflight() == ("privileged" if os.geteuid() == 0 else "user")
    check = subprocess.run(
        [sys.executable, "-c", "from jaxinfra_sim.runtime import sandbox; print(sandbox.preflight())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert check.stdout.strip() in sandbox.STRATEGIES
