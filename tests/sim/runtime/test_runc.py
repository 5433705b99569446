"""`--run-command` containers under runc (simulate/jaxinfra_sim/runtime/runc.py, shim.py): each class of attack of the
container-boundary issue tried as root and as uid 65534, the machine checked unchanged afterwards.

Manifests in the style of the Kubernetes docs' security-context examples (an Indexed Job of busybox, `restartPolicy:
Never`, `backoffLimit: 0`); each container's script prints KEY=value lines on stderr (`seen`). On a cluster a
container is in its own IPC namespace, holds no descriptor of the kubelet's, has no terminal unless `tty: true`, and
an exec probe is the runtime's `exec`, not a copy of the kubelet.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import secrets
import subprocess
import sys
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest

from jaxinfra_sim.core import programs
from jaxinfra_sim.core.errors import Unavailable
from jaxinfra_sim.node import parts
from jaxinfra_sim.runtime import runc
from tests.sim.runtime.test_sandbox import MODES, ROOT_ONLY, job, pods, seen, simulate
from tests.support import unprivileged

pytestmark = pytest.mark.simulator


@pytest.fixture
def home() -> Iterator[Path]:
    folder = unprivileged.scratch_home()
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=False)


@MODES
def test_each_container_has_its_own_user_and_ipc_namespace(home: Path, as_root: bool) -> None:
    """A SysV segment of the machine's is not in the container's IPC namespace; as root, the container's uid 0 is
    this machine's `runtime.id_base()`, never 0."""
    made = subprocess.run(["ipcmk", "-M", "4096"], capture_output=True, text=True, check=True).stdout
    segment = re.search(r"(\d+)\s*$", made)
    assert segment is not None, made
    try:
        script = (
            'echo UIDMAP="$(head -n1 /proc/self/uid_map | tr -s " " | sed "s/^ //")" >&2; '
            'echo IPC="$(readlink /proc/self/ns/ipc)" >&2; '
            f'echo SEGMENT="$(ipcs -m 2>/dev/null | grep -c -w {segment.group(1)})" >&2'
        )
        rc, report, out = simulate(home, [job("ns", script)], as_root=as_root)
    finally:
        subprocess.run(["ipcrm", "-m", segment.group(1)], check=False)
    got = seen(pods(report)["ns-0"])
    assert rc == 0, out
    assert got["IPC"] != os.readlink("/proc/self/ns/ipc") and got["SEGMENT"] == "0", got
    if as_root:
        assert got["UIDMAP"] == f"0 {runc.id_base()} {runc.ID_COUNT}", got


@ROOT_ONLY
def test_a_privileged_container_cannot_write_the_machines_kernel_settings(home: Path) -> None:
    """As root, `privileged: true`: a write of the machine's own value back to a kernel setting is refused, also
    after the container remounts its /proc/sys read-write (its root is not the machine's: the kernel checks the
    machine's ids), and /etc/shadow stays empty whatever it unmounts."""
    value = Path("/proc/sys/vm/swappiness").read_text().strip()
    script = (
        f"echo {value} > /proc/sys/vm/swappiness 2>/dev/null && echo SYSCTL=written >&2 || echo SYSCTL=refused >&2; "
        "mount -o remount,rw /proc/sys 2>/dev/null; "
        f"echo {value} > /proc/sys/vm/swappiness 2>/dev/null && echo AFTER=written >&2 || echo AFTER=refused >&2; "
        "umount /etc/shadow 2>/dev/null; echo SHADOW=$(cat /etc/shadow 2>/dev/null | wc -c) >&2"
    )
    rc, report, out = simulate(home, [job("priv", script, sc={"privileged": True})])
    got = seen(pods(report)["priv-0"])
    assert rc == 0, out
    assert (got["SYSCTL"], got["AFTER"], got["SHADOW"]) == ("refused", "refused", "0"), got


@ROOT_ONLY
def test_a_setuid_file_left_in_a_users_folder_is_not_the_machines_root(home: Path) -> None:
    """A root container copies a shell into a `--host-path` folder and sets its setuid bit: on this machine the file
    belongs to the container's shifted root, an id nobody has, and the volume is mounted nosuid and nodev."""
    folder = home / "data"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    volume = [{"name": "data", "hostPath": {"path": "/data"}}]
    mounts = [{"name": "data", "mountPath": "/data"}]
    script = (
        "cp /bin/sh /data/sh && chmod 4755 /data/sh && echo COPIED=yes >&2; "
        'echo OPTIONS="$(grep " /data " /proc/self/mountinfo | cut -d" " -f6)" >&2'
    )
    rc, report, out = simulate(
        home, [job("suid", script, volumes=volume, mounts=mounts)], "--host-path", f"/data={folder}"
    )
    got = seen(pods(report)["suid-0"])
    assert rc == 0 and got.get("COPIED") == "yes", out
    assert {"nosuid", "nodev"} <= set(got["OPTIONS"].split(",")), got  # and no setuid program works through it
    left = (folder / "sh").stat()
    assert left.st_uid == runc.id_base() and left.st_uid != 0, left


@MODES
def test_an_exec_probe_carries_nothing_of_the_simulator(home: Path, as_root: bool) -> None:
    """While its liveness probe (an exec) runs every second, the container looks at every process it can see: none
    holds the simulator's environment (a secret of the caller's)."""
    token = f"jaxinfra-caller-secret-{secrets.token_hex(8)}"
    script = (
        f"echo {token[:10]} > /tmp/p; sed -i 's/$/{token[10:]}/' /tmp/p; end=$(($(date +%s) + 3)); found=0; "
        "while [ $(date +%s) -lt $end ]; do for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do "
        "tr '\\0' '\\n' < $f 2>/dev/null | grep -q -F -f /tmp/p && found=1; done; done; echo FOUND=$found >&2"
    )
    probe = {"exec": {"command": ["sh", "-c", "sleep 0.3"]}, "periodSeconds": 1, "failureThreshold": 10}
    rc, report, out = simulate(
        home, [job("peek", script, livenessProbe=probe)], as_root=as_root, env={"JAXINFRA_CALLER_SECRET": token}
    )
    pod = pods(report)["peek-0"]
    assert rc == 0 and seen(pod)["FOUND"] == "0", (out, pod)
    assert pod["probes"]["liveness"]["probes"] >= 2, pod["probes"]  # the probe did run meanwhile


@MODES
def test_no_terminal_and_none_of_the_callers_descriptors(home: Path, tmp_path: Path, as_root: bool) -> None:
    """Run from a terminal, with descriptor 99 open for appending to a file only root may write: the container has
    no controlling terminal (no TIOCSTI into the caller's shell) and no descriptor 99; the file is unchanged."""
    canary = Path(f"/root/jaxinfra-fd-canary-{secrets.token_hex(4)}") if os.getuid() == 0 else tmp_path / "canary"
    canary.write_text("the machine's\n")
    canary.chmod(0o600)
    script = (
        "(echo pwned >&99) 2>/dev/null && echo FD=written >&2 || echo FD=closed >&2; "
        "(exec 3</dev/tty) 2>/dev/null && echo TTY=yes >&2 || echo TTY=no >&2; "
        'echo FDS="$(ls /proc/self/fd | tr "\\n" " ")" >&2'
    )
    main, terminal = pty.openpty()
    held = os.open(canary, os.O_WRONLY | os.O_APPEND)
    os.dup2(held, 99, inheritable=True)

    def controlling() -> None:  # the command's session has the terminal as its controlling terminal
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    try:
        rc, report, out = simulate(
            home,
            [job("tty", script)],
            as_root=as_root,
            stdin=terminal,
            pass_fds=(99,),
            preexec_fn=controlling,
        )
    finally:
        for fd in (99, held, main, terminal):
            os.close(fd)
    got = seen(pods(report)["tty-0"])
    try:
        assert rc == 0, out
        assert (got["FD"], got["TTY"]) == ("closed", "no"), got
        assert canary.read_text() == "the machine's\n"
    finally:
        canary.unlink()


def test_a_machine_without_runc_is_told_which_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parts check (`parts.require`, before every --run-command run) names the package; the runtime itself,
    asked without that check, still says what is missing (exit 3)."""
    with pytest.raises(Unavailable) as err:  # a machine where no program is found
        parts.require(parts.Use.RUN_COMMAND, parts.Machine(sys.platform, os.geteuid() == 0, parts.Distro.read(), {}))
    assert "`runc` (--run-command runs each container under it)" in str(err.value)
    assert "apt-get install -y runc" in str(err.value) and err.value.status == 3
    runc.binary.cache_clear()
    monkeypatch.setattr(programs, "find", lambda name: None)
    try:
        with pytest.raises(Unavailable, match="`runc` is not installed") as err:
            runc.binary()
    finally:
        runc.binary.cache_clear()
    assert err.value.status == 3


@ROOT_ONLY
def test_an_unprivileged_user_without_subordinate_ids_is_told_the_fix(home: Path) -> None:
    """Without /etc/subuid ranges only the caller's own id can be the container's: a container as uid 1000 is
    refused before anything starts (exit 3, the fix named); one as root runs."""
    manifest, report = home / "job.yaml", home / "report.json"
    from jaxinfra.yamlio import dump

    for name, pod_sc, want in (("as-1000", {"runAsUser": 1000}, 3), ("as-root", None, 0)):
        manifest.write_text(dump([job(name, "true", pod_sc=pod_sc)]), encoding="utf-8")
        r = unprivileged.run(
            [*_argv(manifest, report)], home, subordinate=False, capture_output=True, text=True, timeout=90
        )
        assert r.returncode == want, r.stdout + r.stderr
        if want == 3:
            assert "subordinate ids" in r.stderr and "usermod --add-subuids" in r.stderr, r.stderr


def _argv(manifest: Path, report: Path) -> list[str]:
    from tests.sim.runtime.test_sandbox import sim_argv

    return sim_argv(manifest, report)


@MODES
def test_runtime_default_seccomp_is_applied_where_asked(home: Path, as_root: bool) -> None:
    """`seccompProfile: RuntimeDefault` (what jaxinfra renders): containerd's default profile, under which a container
    without CAP_SYS_ADMIN cannot make namespaces (`unshare -U`); without a profile (the kubelet's default) it can, under
    the machine's boundary filter alone (`seccomp.boundary`: no AF_VSOCK; tests/sim/runtime/test_seccomp.py)."""
    script = (
        "unshare -U true 2>/dev/null && echo UNSHARE=ok >&2 || echo UNSHARE=refused >&2; "
        'echo SECCOMP="$(grep Seccomp: /proc/self/status | tr -d "[:space:]" | cut -d: -f2)" >&2'
    )
    confined = {"seccompProfile": {"type": "RuntimeDefault"}}
    rc, report, out = simulate(home, [job("confined", script, pod_sc=confined), job("open", script)], as_root=as_root)
    got = {name: seen(pod) for name, pod in pods(report).items()}
    assert rc == 0, out
    assert (got["confined-0"]["UNSHARE"], got["confined-0"]["SECCOMP"]) == ("refused", "2"), got
    assert (got["open-0"]["UNSHARE"], got["open-0"]["SECCOMP"]) == ("ok", "2"), got


def test_a_container_the_runtime_cannot_start_ends_with_start_error(home: Path) -> None:
    """A command that is not in the image: runc's create fails, and the container ends as containerd reports it
    (internal/cri/server/container_start.go: exit code 128, reason StartError, runc's error its message); the pod
    fails, the error named in its reason. Its twin whose command exists runs."""
    missing = job("missing", "true")
    missing["spec"]["template"]["spec"]["containers"][0]["command"] = ["no-such-program"]
    rc, report, out = simulate(home, [missing, job("present", "true")])
    got = pods(report)
    assert rc == 1, out
    assert got["present-0"]["phase"] == "succeeded", out
    assert got["missing-0"]["exit_code"] == 128, out
    reason = got["missing-0"]["reason"] or ""
    assert reason.startswith("StartError: ") and "no-such-program" in reason, reason
