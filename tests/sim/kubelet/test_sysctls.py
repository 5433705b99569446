"""A pod's sysctls and the node's namespaces it asks for (simulate/jaxinfra_sim/kubelet/sysctls.py, podsandbox.py):
the kubelet admits the safe sysctls and sets them in the pod's own namespaces, rejects a pod with any other (Failed,
SysctlForbidden, as a cluster does), and shareProcessNamespace, hostPID, hostIPC, hostUsers and hostPort get the pod's
own namespaces or a note, never the machine's.

Manifests in the style of the Kubernetes docs' "Using sysctls in a Kubernetes Cluster" example (a pod setting
kernel.shm_rmid_forced and net.ipv4.ip_local_port_range, unsafe ones refused by the kubelet) and "Share Process
Namespace between Containers in a Pod" (one container's `ps` sees the other's processes), as Indexed Jobs of
busybox, run with --run-command as root and as uid 65534; each container's script prints KEY=value lines on stderr.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from jaxinfra.admission.validation.sysctls import Namespace
from jaxinfra_sim.core import model
from jaxinfra_sim.core.security import Security
from jaxinfra_sim.kubelet import podsandbox, sysctls
from jaxinfra_sim.runtime import runc
from tests.sim.runtime.test_sandbox import MODES, ROOT_ONLY, job, pods, seen, simulate

pytestmark = pytest.mark.simulator

#: What the machine's kernel says before and after each run: no pod may change it.
MACHINE = (
    "net/ipv4/ip_local_port_range",
    "net/core/somaxconn",
    "kernel/shm_rmid_forced",
    "kernel/msgmax",
    "kernel/core_pattern",
)


def machine() -> dict[str, str]:
    return {name: Path("/proc/sys", name).read_text() for name in MACHINE}


def with_pod(manifest: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The Job with pod-level `fields` set (sysctls go into its securityContext)."""
    spec = manifest["spec"]["template"]["spec"]
    if "sysctls" in fields:
        spec.setdefault("securityContext", {})["sysctls"] = [
            {"name": k, "value": v} for k, v in fields.pop("sysctls").items()
        ]
    spec.update(fields)
    return manifest


def second(manifest: dict[str, Any], script: str, **extra: Any) -> dict[str, Any]:
    """The Job with a second container, `side`, running `sh -c script`."""
    side = {"name": "side", "image": "busybox:1.28", "command": ["sh", "-c", script], **extra}
    manifest["spec"]["template"]["spec"]["containers"].append(side)
    return manifest


def side_of(pod: dict[str, Any]) -> dict[str, str]:
    """What the pod's `side` container printed."""
    [side] = [c for c in pod["containers"] if c["name"] == "side"]
    return seen(side)


# --- the kubelet's allowlist (units) -------------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(
    ("release", "version"),
    [("6.18.44-fc-v1300", (6, 18, 44)), ("4.5.0-1-amd64", (4, 5, 0)), ("v5.15", (5, 15)), ("6", None), ("", None)],
)
def test_the_kernel_version_is_read_as_parse_generic_does(release: str, version: tuple[int, ...] | None) -> None:
    assert sysctls.kernel_version(release) == version


@pytest.mark.unit
def test_the_safe_set_follows_the_nodes_kernel() -> None:
    unconditional = {name for name, since in sysctls.SAFE if not since}
    assert len(sysctls.allowlist("6.18.44")) == 12
    assert sysctls.allowlist("not a version") == unconditional  # the kubelet keeps only these
    assert "net.ipv4.ip_local_reserved_ports" not in sysctls.allowlist("3.15.0")
    assert {"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout"} - sysctls.allowlist("4.5.0") == {
        "net.ipv4.tcp_fin_timeout"  # namespaced in 4.6
    }


def pod_with(*names: str, host_network: bool = False, host_ipc: bool = False) -> model.Pod:
    ns = model.PodNamespaces(sysctls=tuple((n, "1") for n in names), host_ipc=host_ipc)
    return model.Pod(
        "Job/default/s", "default", "s-0", "s-0", None, "10.244.0.2", 0, 0, 0, {}, {}, "main", "busybox:1.28", (), (),
        {}, None, 1, "cpu", host_network=host_network, namespaces=ns,
    )  # fmt: skip


@pytest.mark.unit
@pytest.mark.parametrize(
    ("pod", "message"),
    [
        (pod_with("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range"), None),
        (pod_with("net/ipv4/ip_local_port_range"), None),  # the '/' form is the same sysctl
        (pod_with("net.core.somaxconn"), 'forbidden sysctl: "net.core.somaxconn" not allowlisted'),
        (pod_with("kernel.msgmax"), 'forbidden sysctl: "kernel.msgmax" not allowlisted'),  # namespaced, not safe
        (pod_with("kernel.core_pattern"), 'forbidden sysctl: "kernel.core_pattern" not allowlisted'),  # the node's
        (
            pod_with("kernel.shm_rmid_forced", "vm.swappiness", "net.core.somaxconn"),
            'forbidden sysctl: "vm.swappiness" not allowlisted',  # the first one refused
        ),
        (
            pod_with("net.ipv4.tcp_syncookies", host_network=True),
            'forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host Net enabled',
        ),
        (
            pod_with("kernel.shm_rmid_forced", host_ipc=True),
            'forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host IPC enabled',
        ),
    ],
)
def test_the_admit_handler(pod: model.Pod, message: str | None) -> None:
    assert sysctls.admit(pod, sysctls.allowlist("6.18.44")) == message


@pytest.mark.unit
def test_only_a_safe_network_sysctl_is_ever_written() -> None:
    """`apply` runs as the machine's root in the pod's network namespace: whatever reached it, a name that is not a
    safe network sysctl is refused before any file is opened."""
    for name in ("kernel.core_pattern", "net.core.somaxconn", "kernel.shm_rmid_forced", "net.ipv4/../../kernel"):
        with pytest.raises(OSError, match="not a safe network sysctl"):
            sysctls.apply({name: "1"})
    assert sysctls.path("net.ipv4.conf.eth0/100.rp_filter") == Path("/proc/sys/net/ipv4/conf/eth0.100/rp_filter")


@pytest.mark.unit
def test_where_a_pods_sysctls_and_shared_namespaces_go() -> None:
    """Without a pause a container makes its IPC namespace (its runtime writes the IPC sysctls); its process writes
    the network ones, only in the pod's own network namespace. With one, the runtime joins the pause's user, IPC and
    PID namespaces (unprivileged, the process first enters the user namespace the pause's shim runs in)."""
    pod = pod_with("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range")
    alone = podsandbox.namespaces(pod, None, privileged=True, own_network=True)
    assert (alone.join, alone.sysctl, alone.net) == (
        {},
        {"kernel.shm_rmid_forced": "1"},
        {"net.ipv4.ip_local_port_range": "1"},
    )
    assert podsandbox.namespaces(pod, None, True, own_network=False).net == {}
    pause = podsandbox.Pause(shim=100, control=-1, init=101)
    shared = replace(pod, namespaces=replace(pod.namespaces, share_process_namespace=True))
    as_root = podsandbox.namespaces(shared, pause, privileged=True, own_network=True)
    assert as_root.join == {k: f"/proc/101/ns/{k}" for k in ("user", "ipc", "pid")}, as_root
    assert (as_root.sysctl, as_root.user) == ({}, None)
    assert podsandbox.namespaces(shared, pause, False, True).user == "/proc/100/ns/user"
    assert "pid" not in podsandbox.namespaces(pod, pause, True, True).join  # hostIPC alone: the IPC namespace only
    assert sysctls.of([("net/ipv4/tcp_syncookies", "1")], Namespace.NET) == {"net.ipv4.tcp_syncookies": "1"}


@pytest.mark.unit
def test_the_runtime_config_joins_and_sets_what_it_is_given() -> None:
    proc = runc.process(["true"], {}, "/", Security())
    config = runc.config(
        proc, Path("/x"), "h", Security(), privileged=True, joined={"pid": "/proc/9/ns/pid"}, sysctl={"a.b": "1"}
    )
    spaces = {n["type"]: n.get("path") for n in config["linux"]["namespaces"]}
    assert (spaces["pid"], spaces["ipc"]) == ("/proc/9/ns/pid", None)
    assert config["linux"]["sysctl"] == {"a.b": "1"}
    assert "sysctl" not in runc.config(proc, Path("/x"), "h", Security(), privileged=True)["linux"]


@pytest.mark.unit
def test_each_host_field_gets_its_note() -> None:
    ns = model.PodNamespaces(host_pid=True, host_ipc=True, host_users=True, host_ports=(8080,))
    notes = podsandbox.notes(replace(pod_with(), namespaces=ns), run_command=True)
    assert [n.split(":")[0] for n in notes] == ["hostPID", "hostIPC", "hostUsers", "hostPort 8080"]
    assert all("machine" in n for n in notes), notes
    assert podsandbox.notes(replace(pod_with(), namespaces=model.PodNamespaces(host_users=False)), True) == []


# --- on the simulated node ------------------------------------------------------------------------------------------

READ = (
    "echo PORTS=$(cat /proc/sys/net/ipv4/ip_local_port_range) >&2; "
    "echo SHM=$(cat /proc/sys/kernel/shm_rmid_forced) >&2; "
    "echo IPC=$(readlink /proc/self/ns/ipc) >&2"
)


@MODES
def test_safe_sysctls_are_set_in_the_pods_namespaces_only(home: Path, as_root: bool) -> None:
    """The docs' sysctl example's safe pair: the pod reads its values back in each of its containers (the IPC one in
    each container's own IPC namespace, the network one in the pod's network namespace); the machine's stay."""
    before = machine()
    manifest = with_pod(
        second(job("sysctl-example", READ), READ),
        sysctls={"kernel.shm_rmid_forced": "1", "net.ipv4.ip_local_port_range": "40000 50000"},
    )
    rc, report, out = simulate(home, [manifest], as_root=as_root)
    pod = pods(report)["sysctl-example-0"]
    assert rc == 0, out
    for got in (seen(pod), side_of(pod)):
        assert (got["PORTS"].split(), got["SHM"]) == (["40000", "50000"], "1"), got
    assert machine() == before


@MODES
def test_unsafe_and_node_level_sysctls_reject_the_pod(home: Path, as_root: bool) -> None:
    """The kubelet refuses a pod with a sysctl beyond the safe set (net.core.somaxconn: namespaced, not safe;
    kernel.core_pattern: the node's own): Failed, SysctlForbidden, its message the kubelet's, and a Warning event; it
    starts nothing (its script would leave a file behind), and the machine's settings stay."""
    before = machine()
    ran = home / "ran"
    script = f"echo ran > {ran}; echo 1 > /proc/sys/net/core/somaxconn"
    jobs = [
        with_pod(job(f"unsafe-{i}", script), sysctls={name: value})
        for i, (name, value) in enumerate((("net.core.somaxconn", "1"), ("kernel.core_pattern", "|/tmp/x %p")))
    ]
    rc, report, out = simulate(home, jobs, as_root=as_root)
    assert rc != 0, out
    for i, name in enumerate(("net.core.somaxconn", "kernel.core_pattern")):
        pod = pods(report)[f"unsafe-{i}-0"]
        message = f'Pod was rejected: forbidden sysctl: "{name}" not allowlisted'
        assert (pod["phase"], pod["reason"], pod["pid"]) == ("failed", f"SysctlForbidden: {message}", None), pod
        [workload] = [w for w in report["workloads"] if w["name"] == f"unsafe-{i}"]
        warnings = [e for e in workload["attempts"][0]["events"] if e["reason"] == "SysctlForbidden"]
        handler = message.removeprefix(sysctls.REJECTED)
        assert warnings and (warnings[0]["type"], warnings[0]["message"]) == ("Warning", handler), warnings
    assert not ran.exists()
    assert machine() == before


@ROOT_ONLY
def test_a_network_sysctl_beside_host_network_is_refused_by_the_api_server(home: Path) -> None:
    """ValidateHostSysctl: the pod would set its node's own network setting; nothing is created."""
    manifest = with_pod(job("hostnet", "true"), hostNetwork=True, sysctls={"net.ipv4.ip_local_port_range": "1 2"})
    rc, _, out = simulate(home, [manifest])
    assert rc == 2, out
    assert "securityContext.sysctls[0].name" in out and "may not be specified when 'hostNetwork' is true" in out, out


#: The main container prints whether it sees a process of `side`'s (by a token only that one's command line has: the
#: script assembles it in a file, so no command line of its own holds it whole), PID 1's command, and how many
#: processes it sees; `side` is `SIDE`.
LOOK = (
    "sleep 1; echo {head} > /tmp/t; sed -i 's/$/{tail}/' /tmp/t; found=0; for f in /proc/[0-9]*/cmdline; do "
    "tr '\\0' ' ' < $f 2>/dev/null | grep -q -F -f /tmp/t && found=1; done; echo SIBLING=$found >&2; "
    "echo PID1=$(tr '\\0' ' ' < /proc/1/cmdline | cut -c1-200) >&2; echo PROCESSES=$(ls -d /proc/[0-9]* | wc -l) >&2; "
    + READ
)
SIDE = "sleep 4; : {token}"


def look(token: str) -> str:
    return LOOK.format(head=token[:8], tail=token[8:])


@MODES
def test_share_process_namespace_shows_the_siblings_processes(home: Path, as_root: bool) -> None:
    """The docs' nginx/shell pair as two busybox containers: with shareProcessNamespace one sees the other's processes
    and the pause as PID 1, the two share one IPC namespace (where the pause set the IPC sysctl); without it neither;
    and no process of this machine's (the test's own `sleep`) is seen either way."""
    before = machine()
    token = f"tok{secrets.token_hex(6)}"
    marker = subprocess.Popen(["sh", "-c", f"sleep 30; : {token}"])
    try:
        jobs = [
            with_pod(
                second(job(name, look(token)), SIDE.format(token=token)),
                shareProcessNamespace=share,
                sysctls={"kernel.shm_rmid_forced": "1"},
            )
            for name, share in (("shared", True), ("apart", False))
        ]
        rc, report, out = simulate(home, jobs, as_root=as_root)
    finally:
        marker.kill()
        marker.wait()
    assert rc == 0, out
    shared, apart = seen(pods(report)["shared-0"]), seen(pods(report)["apart-0"])
    assert shared["SIBLING"] == "1" and "signal" in shared["PID1"] and shared["SHM"] == "1", shared
    assert apart["SIBLING"] == "0" and "sh -c" in apart["PID1"] and apart["SHM"] == "1", apart
    assert int(shared["PROCESSES"]) < 10, shared  # the pod's few processes, none of this machine's
    assert shared["IPC"] != os.readlink("/proc/self/ns/ipc")
    assert machine() == before


@MODES
def test_host_namespaces_are_the_pods_own_and_noted(home: Path, as_root: bool) -> None:
    """hostPID, hostIPC, hostUsers: true, a hostPort: the pod runs in namespaces of its own standing for its node's
    (its containers share them), never this machine's (a SysV segment of the machine's is not in its IPC namespace,
    its processes are not in its PID namespace), and each field is named in a note."""
    made = subprocess.run(["ipcmk", "-M", "4096"], capture_output=True, text=True, check=True).stdout
    segment = made.split()[-1]
    token = f"tok{secrets.token_hex(6)}"
    script = look(token) + f"; echo SEGMENT=$(ipcs -m 2>/dev/null | grep -c -w {segment}) >&2"
    manifest = with_pod(
        second(job("host", script, ports=[{"containerPort": 8080, "hostPort": 8080}]), SIDE.format(token=token)),
        hostPID=True,
        hostIPC=True,
        hostUsers=True,
    )
    try:
        rc, report, out = simulate(home, [manifest], as_root=as_root)
    finally:
        subprocess.run(["ipcrm", "-m", segment], check=False)
    pod = pods(report)["host-0"]
    got = seen(pod)
    assert rc == 0, out
    assert got["SIBLING"] == "1" and "signal" in got["PID1"] and int(got["PROCESSES"]) < 10, got
    assert got["IPC"] != os.readlink("/proc/self/ns/ipc") and got["SEGMENT"] == "0", got
    notes = [n.split(":")[0] for n in pod["security"]["not_applied"]]
    assert {"hostPID", "hostIPC", "hostUsers", "hostPort 8080"} <= set(notes), pod["security"]


@MODES
def test_in_a_shared_pid_namespace_a_program_without_a_handler_ends_at_the_sigterm(home: Path, as_root: bool) -> None:
    """With shareProcessNamespace the pause is PID 1, so the container's program is an ordinary process: a SIGTERM it
    has no handler for ends it at once (exit 143), where in a PID namespace of its own the kernel would drop it
    (tests/sim/kubelet/test_stop.py)."""
    manifest = with_pod(job("term", "exec sleep 30"), shareProcessNamespace=True)
    rc, report, out = simulate(home, [manifest], "--preempt", "term-0@1", "--grace-cap", "5", as_root=as_root)
    pod = pods(report)["term-0"]
    assert rc == 1, out
    assert (pod["signal"], pod["exit_code"]) == ("SIGTERM", 143), pod
    assert "PID 1" not in pod["reason"] and pod["reason"].startswith("preempted: SIGTERM at "), pod["reason"]
