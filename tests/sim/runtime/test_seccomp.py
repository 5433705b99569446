"""Every container's seccomp filter (simulate/jaxinfra_sim/runtime/seccomp.py): `RuntimeDefault` is containerd's
default profile as moby publishes it, converted as moby's setupSeccomp does; and no container, whatever it asks for,
makes an AF_VSOCK socket, which no network namespace holds (this kernel's vsock reaches the hypervisor).

Unit tests of the conversion (a capability of the bounding set including or excluding a group, minKernel, the arch)
and of the boundary in every filter, read as libseccomp would (`verdict`); then containers under runc, as root and as
uid 65534, each running `PROBE` (python3 and ctypes, the machine's own) and reporting each call's outcome as
KEY=errno-name lines; the vsock test holds a listener on the machine meanwhile and watches it (`Watch`).
"""

from __future__ import annotations

import errno
import hashlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from jaxinfra_sim.core.security import CAPABILITIES, DEFAULT_CAPS
from jaxinfra_sim.runtime import seccomp
from tests.sim.runtime.test_sandbox import MODES, job, pods, seen, simulate

pytestmark = pytest.mark.simulator

PUBLISHED_SHA256 = "536529b665dd0972c37bfb569f5d4ac8a53592e7b00752bc39ff063ca9864c74"
"""moby/profiles @ 836ae4d3 (seccomp/v0.2.3) `seccomp/default.json`: `git show 836ae4d3:seccomp/default.json |
sha256sum`."""
AMD64 = seccomp.Host("amd64", "SCMP_ARCH_X86_64", (6, 18))
ARM64 = seccomp.Host("arm64", "SCMP_ARCH_AARCH64", (6, 18))
S390X = seccomp.Host("s390x", "SCMP_ARCH_S390X", (6, 18))
OLD = seccomp.Host("amd64", "SCMP_ARCH_X86_64", (4, 7))
ALL_CAPS = tuple(CAPABILITIES)
ADDR_NO_RANDOMIZE = 0x0040000
VMADDR_CID_ANY = VMADDR_PORT_ANY = 0xFFFFFFFF
VMADDR_CID_LOCAL = 1
ALLOWED = "allowed"
UNCONFINED_KINDS = [(None, False), ("Unconfined", False), ("Localhost", False), ("RuntimeDefault", True)]
"""(seccompProfile type, privileged): every way a container runs without containerd's profile."""


def verdict(seccomp_filter: Mapping[str, Any], name: str, first: int = 0) -> str | int:
    """What a filter answers to `name` whose first argument is `first`: `ALLOWED` or an errno. A rule matches when
    every condition on the first argument holds (runc @ v1.1.5 matchCall); a refusing rule wins over one that
    allows."""
    found: list[str | int] = []
    for rule in seccomp_filter["syscalls"]:
        conditions = [arg for arg in rule.get("args") or () if arg["index"] == 0]
        if name in rule["names"] and all(seccomp.admits(arg, first) for arg in conditions):
            refuses = rule["action"] == seccomp.ERRNO
            found.append(rule.get("errnoRet", seccomp.RUNC_ERRNO) if refuses else ALLOWED)
    if found:
        return min(found, key=lambda outcome: outcome == ALLOWED)
    if seccomp_filter["defaultAction"] == seccomp.ERRNO:
        return int(seccomp_filter.get("defaultErrnoRet", seccomp.RUNC_ERRNO))
    return ALLOWED


def runtime_default(caps: tuple[str, ...] = DEFAULT_CAPS, host: seccomp.Host = AMD64) -> dict[str, Any]:
    return seccomp.profile("RuntimeDefault", False, caps, host)


# --- the profile and its conversion (unit) ----------------------------------------------------------------------


@pytest.mark.unit
def test_the_profile_is_mobys_as_published() -> None:
    """The data file is the release's, byte for byte: a hand edit (or a reformat) fails here."""
    path = Path(seccomp.__file__).with_name(seccomp.PUBLISHED)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == seccomp.SHA256 == PUBLISHED_SHA256
    profile = seccomp.published()
    assert (profile["defaultAction"], profile["defaultErrnoRet"]) == ("SCMP_ACT_ERRNO", errno.EPERM)


@pytest.mark.unit
def test_runtime_default_refuses_what_containerds_profile_refuses() -> None:
    """With containerd's default capabilities: the allowlist's calls run; io_uring, the keyring, namespaces, mounts,
    personas other than the five listed and AF_ALG/AF_VSOCK sockets fail with EPERM; clone3 answers ENOSYS."""
    rd = runtime_default()
    assert (rd["defaultAction"], rd["defaultErrnoRet"]) == ("SCMP_ACT_ERRNO", errno.EPERM)
    for name in ("read", "openat", "execve", "futex", "arch_prctl", "chroot"):
        assert verdict(rd, name) == ALLOWED, name
    for name in ("io_uring_setup", "io_uring_enter", "keyctl", "add_key", "kexec_load", "unshare", "mount", "bpf"):
        assert verdict(rd, name) == errno.EPERM, name
    assert verdict(rd, "personality", 0) == ALLOWED and verdict(rd, "personality", 0xFFFFFFFF) == ALLOWED
    assert verdict(rd, "personality", ADDR_NO_RANDOMIZE) == errno.EPERM
    assert verdict(rd, "socket", socket.AF_INET) == ALLOWED and verdict(rd, "socket", socket.AF_UNIX) == ALLOWED
    assert verdict(rd, "socket", 38) == errno.EPERM and verdict(rd, "socket", seccomp.AF_VSOCK) == errno.EPERM
    assert verdict(rd, "clone3") == errno.ENOSYS
    assert verdict(rd, "clone", 0x10000000) == errno.EPERM and verdict(rd, "clone", 0x11) == ALLOWED  # NEWUSER; SIGCHLD


@pytest.mark.unit
def test_a_capability_in_the_bounding_set_includes_its_calls() -> None:
    """`includes.caps` against the bounding set: CAP_SYS_ADMIN brings mount and unshare and takes clone3's ENOSYS
    and clone's flag check away (`excludes.caps`); CAP_DAC_READ_SEARCH brings open_by_handle_at, and only it."""
    admin = runtime_default((*DEFAULT_CAPS, "SYS_ADMIN"))
    assert [verdict(admin, n) for n in ("mount", "unshare", "setns", "clone3")] == [ALLOWED] * 4
    assert verdict(admin, "clone", 0x10000000) == ALLOWED
    assert verdict(runtime_default(), "open_by_handle_at") == errno.EPERM
    assert verdict(runtime_default((*DEFAULT_CAPS, "DAC_READ_SEARCH")), "open_by_handle_at") == ALLOWED
    assert verdict(runtime_default((*DEFAULT_CAPS, "DAC_READ_SEARCH")), "mount") == errno.EPERM
    dropped = runtime_default(tuple(c for c in DEFAULT_CAPS if c != "SYS_CHROOT"))
    assert verdict(dropped, "chroot") == errno.EPERM


@pytest.mark.unit
def test_min_kernel_is_this_kernels_version() -> None:
    """ptrace and process_vm_* come with Linux 4.8 (`includes.minKernel`), else with CAP_SYS_PTRACE only."""
    assert verdict(runtime_default(), "ptrace") == ALLOWED
    assert verdict(runtime_default(host=OLD), "ptrace") == errno.EPERM
    assert verdict(runtime_default((*DEFAULT_CAPS, "SYS_PTRACE"), OLD), "ptrace") == ALLOWED
    assert seccomp.kernel_version("6.18.44-fc-v1300") == (6, 18) and seccomp.kernel_version("3.12-1-amd64") == (3, 12)
    with pytest.raises(ValueError, match="expected <kernel>.<major>"):
        seccomp.kernel_version("unknown")


@pytest.mark.unit
def test_the_arch_picks_architectures_and_groups() -> None:
    """archMap's entry for this machine's arch with its sub-architectures; `includes.arches` groups for it alone; on
    s390x clone's flags are its second argument (`includes`/`excludes` arches)."""
    amd64, arm64, s390x = runtime_default(), runtime_default(host=ARM64), runtime_default(host=S390X)
    assert amd64["architectures"] == ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"]
    assert arm64["architectures"] == ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"]
    assert verdict(amd64, "arch_prctl") == ALLOWED and verdict(arm64, "arch_prctl") == errno.EPERM
    assert verdict(arm64, "arm_fadvise64_64") == ALLOWED and verdict(amd64, "arm_fadvise64_64") == errno.EPERM
    clone = [rule for rule in s390x["syscalls"] if rule["names"] == ["clone"]]
    assert [arg["index"] for rule in clone for arg in rule["args"]] == [1], clone
    unknown = seccomp.profile("RuntimeDefault", False, DEFAULT_CAPS, seccomp.Host("sparc64", None, (6, 18)))
    assert unknown["architectures"] == [] and verdict(unknown, "arch_prctl") == errno.EPERM


@pytest.mark.unit
@pytest.mark.parametrize(("kind", "privileged"), UNCONFINED_KINDS, ids=["none", "Unconfined", "Localhost", "priv"])
def test_without_the_profile_only_the_boundary_refuses(kind: str | None, privileged: bool) -> None:
    """No profile, Unconfined, Localhost (its file is not here) and privileged run unconfined as containerd runs them,
    but for AF_VSOCK (socket, socketpair) and socketcall(2)'s socket making, the family of which it cannot see."""
    f = seccomp.profile(kind, privileged, ALL_CAPS if privileged else DEFAULT_CAPS, AMD64)
    assert f["defaultAction"] == seccomp.ALLOW and f["architectures"] == runtime_default()["architectures"]
    for name in ("io_uring_setup", "keyctl", "mount", "unshare", "personality"):
        assert verdict(f, name, ADDR_NO_RANDOMIZE) == ALLOWED, name
    assert verdict(f, "socket", socket.AF_INET) == ALLOWED and verdict(f, "socketpair", socket.AF_UNIX) == ALLOWED
    assert verdict(f, "socket", seccomp.AF_VSOCK) == verdict(f, "socketpair", seccomp.AF_VSOCK) == errno.EPERM
    assert verdict(f, "socketcall", seccomp.SYS_SOCKET) == verdict(f, "socketcall", seccomp.SYS_SOCKETPAIR) == 1
    assert verdict(f, "socketcall", 2) == ALLOWED  # SYS_BIND


@pytest.mark.unit
@pytest.mark.parametrize("host", [AMD64, ARM64, S390X, OLD], ids=["amd64", "arm64", "s390x", "linux-4.7"])
@pytest.mark.parametrize("caps", [DEFAULT_CAPS, ALL_CAPS, ()], ids=["default-caps", "all-caps", "no-caps"])
def test_no_filter_lets_a_vsock_socket_through(host: seccomp.Host, caps: tuple[str, ...]) -> None:
    """Whatever the profile, capabilities and machine: socket(2) and socketpair(2) of AF_VSOCK fail with EPERM, and
    socketcall(2) cannot make a socket (under RuntimeDefault it answers ENOSYS whole, moby/profiles 7158007a)."""
    for kind in ("RuntimeDefault", None, "Unconfined", "Localhost"):
        for privileged in (False, True):
            f = seccomp.profile(kind, privileged, caps, host)
            assert verdict(f, "socket", seccomp.AF_VSOCK) == errno.EPERM, (kind, privileged)
            assert verdict(f, "socketpair", seccomp.AF_VSOCK) == errno.EPERM, (kind, privileged)
            assert verdict(f, "socketcall", seccomp.SYS_SOCKET) != ALLOWED, (kind, privileged)
            assert verdict(f, "socket", socket.AF_INET6) == ALLOWED, (kind, privileged)
    assert verdict(runtime_default(caps, host), "socketcall", 2) == errno.ENOSYS


@pytest.mark.unit
def test_a_rule_that_would_let_vsock_through_is_narrowed_or_refused() -> None:
    """An unconditional allow of socket(2) becomes ranges on either side of AF_VSOCK; a conditional one that admits
    it is an error (a newer profile copied in without looking), never a hole."""
    wide = {"defaultAction": seccomp.ERRNO, "syscalls": [{"names": ["socket", "read"], "action": seccomp.ALLOW}]}
    guarded = seccomp.guard(wide)
    assert verdict(guarded, "socket", seccomp.AF_VSOCK) == errno.EPERM and verdict(guarded, "read") == ALLOWED
    assert verdict(guarded, "socket", seccomp.AF_VSOCK - 1) == verdict(guarded, "socket", seccomp.AF_VSOCK + 1)
    assert verdict(guarded, "socket", seccomp.AF_VSOCK + 1) == ALLOWED
    ge = {"names": ["socket"], "action": seccomp.ALLOW, "args": [{"index": 0, "value": 2, "op": "SCMP_CMP_GE"}]}
    with pytest.raises(ValueError, match=r"lets socket\(40\) through"):
        seccomp.guard({"defaultAction": seccomp.ERRNO, "syscalls": [ge]})


# --- containers under runc ---------------------------------------------------------------------------------------

PROBE = r"""
import ctypes, errno, os, socket, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
held = []
def report(key, call):
    try:
        out = call()
        held.append(out)
        value = "ok" if not isinstance(out, int) or out >= 0 else errno.errorcode[-out]
    except OSError as e:
        value = errno.errorcode.get(e.errno, str(e.errno))
    print(key + "=" + value, file=sys.stderr, flush=True)
def syscall(number, *args):
    r = libc.syscall(ctypes.c_long(number), *[ctypes.c_ulong(a) for a in args])
    return r if r >= 0 else -ctypes.get_errno()
def persona():
    r = libc.personality(ctypes.c_ulong(0x0040000))
    return r if r >= 0 else -ctypes.get_errno()
def vsock():
    return socket.socket(40, socket.SOCK_STREAM)
def bound():
    s = vsock(); s.bind((0xFFFFFFFF, int(os.environ["OWN_PORT"]))); s.listen(); return s
def connected():
    s = vsock(); s.settimeout(1); s.connect((1, int(os.environ["PORT"]))); return s
def i386(number, *args):
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    page = libc.mmap(None, 4096, 7, 0x62, -1, 0)
    ctypes.memmove(page + 2048, struct.pack("<3I", 40, 1, 0), 12)
    a, b, c = [page + 2048 if x is None else x for x in args]
    code = b"\x53\xb8" + struct.pack("<I", number) + b"\xbb" + struct.pack("<I", a) + b"\xb9" + struct.pack("<I", b)
    code += b"\xba" + struct.pack("<I", c) + b"\xcd\x80\x5b\xc3"
    ctypes.memmove(page, code, len(code))
    return ctypes.CFUNCTYPE(ctypes.c_int)(page)()
report("IO_URING", lambda: syscall(int(os.environ["IO_URING_SETUP"]), 1, 0))
report("PERSONA", persona)
report("INET", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
report("UNIX_PAIR", lambda: socket.socketpair())
report("VSOCK", vsock)
report("VSOCK_PAIR", lambda: socket.socketpair(40, socket.SOCK_STREAM))
report("VSOCK_BIND", bound)
report("VSOCK_CONNECT", connected)
if os.environ.get("I386") == "1":
    report("I386_SOCKETCALL", lambda: i386(102, 1, None, 0))
    report("I386_SOCKET", lambda: i386(359, 40, 1, 0))
print("SH=" + ("ok" if os.system("sh -c true") == 0 else "failed"), file=sys.stderr, flush=True)
time.sleep(float(os.environ.get("HOLD", "0")))
"""
"""Each call a container tries, and its outcome on stderr: `ok` or the errno's name. The 32-bit x86 calls (`int
$0x80` from this 64-bit process, IA32 emulation) only where the machine takes them (`I386`)."""
IO_URING_SETUP = 425
"""Its number in the generic table, x86_64's and aarch64's alike."""


def has_vsock() -> bool:
    try:
        socket.socket(seccomp.AF_VSOCK, socket.SOCK_STREAM).close()
    except OSError:
        return False
    return True


def i386_makes_vsock() -> bool:
    """Whether this machine, unconfined, makes an AF_VSOCK socket through 32-bit socketcall(2) (in a child: where
    IA32 emulation is off, `int $0x80` kills the caller)."""
    code = PROBE.split('report("IO_URING"')[0] + "print(i386(102, 1, None, 0))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False)
    return done.returncode == 0 and done.stdout.strip().isdigit()


def prober(
    name: str, env: dict[str, str], pod_sc: dict[str, Any] | None = None, sc: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A Job whose container runs `PROBE` with `env` besides (`$(...)` is not in it: Kubernetes would expand it)."""
    script = "exec python3 -c 'import os; exec(os.environ[\"PROBE\"])'"
    return job(name, script, pod_sc=pod_sc, sc=sc, env={"PROBE": PROBE, "IO_URING_SETUP": str(IO_URING_SETUP), **env})


@MODES
def test_runtime_default_refuses_in_a_container(home: Path, as_root: bool) -> None:
    """Under RuntimeDefault io_uring_setup, personality(ADDR_NO_RANDOMIZE) and socket(AF_VSOCK) fail with EPERM
    while python, sh, an AF_INET socket and a socketpair work; its twin without a profile may do the first two (as
    on a cluster) but not the third (the machine's boundary)."""
    confined = {"seccompProfile": {"type": "RuntimeDefault"}}
    ports = {"PORT": "1024", "OWN_PORT": "1025"}
    rc, report, out = simulate(
        home, [prober("confined", ports, pod_sc=confined), prober("open", ports)], as_root=as_root
    )
    got = {name: seen(pod) for name, pod in pods(report).items()}
    assert rc == 0, out
    calls = ("IO_URING", "PERSONA", "VSOCK", "INET", "UNIX_PAIR", "SH")
    assert [got["confined-0"][k] for k in calls] == ["EPERM", "EPERM", "EPERM", "ok", "ok", "ok"], got
    assert [got["open-0"][k] for k in calls[1:]] == ["ok", "EPERM", "ok", "ok", "ok"], got
    disabled = Path("/proc/sys/kernel/io_uring_disabled")  # Linux 6.6 on: 1 or 2 refuse it with EPERM themselves
    if not disabled.exists() or disabled.read_text().strip() == "0":
        assert got["open-0"]["IO_URING"] in ("EFAULT", "ENOSYS"), got  # NULL params; a kernel without io_uring


class Watch(threading.Thread):
    """A vsock listener of the machine's (port `port`), and the port a pod will try to take (`own_port`), watched
    while a simulation runs: whatever connects is counted, and so is every moment the pod's port is taken."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.listener = socket.socket(seccomp.AF_VSOCK, socket.SOCK_STREAM)
        self.listener.bind((VMADDR_CID_ANY, VMADDR_PORT_ANY))
        self.listener.listen()
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        with socket.socket(seccomp.AF_VSOCK, socket.SOCK_STREAM) as spare:
            spare.bind((VMADDR_CID_ANY, VMADDR_PORT_ANY))
            self.own_port = spare.getsockname()[1]
        self.accepted: list[Any] = []
        self.taken = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                conn, peer = self.listener.accept()
                self.accepted.append(peer)
                conn.close()
            except BlockingIOError:
                pass
            with socket.socket(seccomp.AF_VSOCK, socket.SOCK_STREAM) as probe:
                try:
                    probe.bind((VMADDR_CID_ANY, self.own_port))
                except OSError as err:
                    self.taken += err.errno == errno.EADDRINUSE
            time.sleep(0.05)

    def stop(self) -> None:
        self.done.set()
        self.join()
        self.listener.close()


@MODES
def test_no_container_reaches_vsock(home: Path, as_root: bool) -> None:
    """While the machine listens on a vsock port: containers with no profile, Unconfined, Localhost, RuntimeDefault
    and privileged each try to make an AF_VSOCK socket (directly, in a pair, through 32-bit socketcall and socket),
    to connect to the machine's port (VMADDR_CID_LOCAL) and to bind and listen on a port of their own, holding
    whatever they got for a second: every try fails, nothing connects, the port is never taken. The same calls on
    the machine itself do make sockets (the canary's baseline)."""
    if not has_vsock():
        pytest.skip("this machine has no AF_VSOCK (no vsock transport): nothing to keep pods from")
    i386 = i386_makes_vsock()
    kinds = {
        "none": ({}, None),
        "unconfined": ({"seccompProfile": {"type": "Unconfined"}}, None),
        "localhost": ({"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/audit.json"}}, None),
        "confined": ({"seccompProfile": {"type": "RuntimeDefault"}}, None),
        "priv": ({}, {"privileged": True}),
    }
    watch = Watch()
    env = {"PORT": str(watch.port), "OWN_PORT": str(watch.own_port), "I386": "1" if i386 else "0", "HOLD": "1"}
    watch.start()
    try:
        jobs = [prober(name, env, pod_sc or None, sc) for name, (pod_sc, sc) in kinds.items()]
        rc, report, out = simulate(home, jobs, as_root=as_root)
    finally:
        watch.stop()
    got = {name: seen(pod) for name, pod in pods(report).items()}
    assert rc == 0, out
    assert watch.accepted == [] and watch.taken == 0, (watch.accepted, watch.taken, got)  # the machine's verdict
    tries = ["VSOCK", "VSOCK_PAIR", "VSOCK_BIND", "VSOCK_CONNECT"] + (
        ["I386_SOCKETCALL", "I386_SOCKET"] if i386 else []
    )
    for name in kinds:
        outcome = {k: got[f"{name}-0"][k] for k in tries}
        assert all(value in ("EPERM", "ENOSYS") for value in outcome.values()), (name, outcome)
        assert got[f"{name}-0"]["INET"] == "ok", got
