"""Programs that read a stranger's image (skopeo, umoci), run where nothing of the machine is theirs to harm: bubblewrap
(`bwrap`, Debian's `bubblewrap`, the sandbox flatpak builds on) gives each run its own user, mount, PID, IPC, UTS,
cgroup and network namespaces, a root of its own holding the machine's programs read-only (`/usr` and the folders that
lead into it) and nothing else of the machine but the folders handed to it by descriptor: what it reads, read-only,
and the one folder it writes. No network (a namespace of its own holds only `lo`), no /etc, /home, /tmp or /var of the
machine's, no process of the machine's to see. As containerd's CRI unpacks into a snapshot folder only, the output
folder is the only place a crafted archive can write: an entry aimed out of it lands in it, or nowhere.

The ids: as root, bwrap builds the sandbox as the machine's root (its binds of descriptors need it), with no
capability for its child but CAP_SYS_ADMIN, which the child spends at once entering the containers' user namespace
(container id N is the machine's `runc.id_base()` + N: `rootfs.id_namespace`) with nsenter, before anything of the
image is read: from there it holds capabilities in that namespace only (setns(2)), cannot change the sandbox's
mounts, and writes the image's owners as the containers' ids, so a setuid-root program of the image is setuid to an
id no one logs in as, and its file capabilities hold inside the containers' namespace only (user_namespaces(7),
"file capabilities" v3). Unprivileged, bwrap's own user namespace maps the caller to itself (umoci `--rootless`:
every file the caller's).

Bounded (`Limits`): the bytes and inodes the run takes on the output's filesystem (its free space and inodes read
every `POLL` seconds; a file larger than the byte bound stops at RLIMIT_FSIZE), and its wall time; past one the run
is killed and `Exceeded` names the figure.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jaxinfra_sim.core import programs
from jaxinfra_sim.runtime import rootfs, runc

POLL = 0.05
"""Seconds between two readings of the output's filesystem while a run goes on."""
SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
"""The machine's folders a confined program may read (read-only): its programs and their libraries, nothing else."""
GONE_S = 10.0
"""The longest a killed run's processes are waited for."""
STDERR_LIMIT = 64 << 10
"""The most bytes of a run's messages kept (its last ones)."""


@dataclass(frozen=True)
class Limits:
    """What one confined run may take: bytes and inodes on the output's filesystem, and wall seconds."""

    bytes: int
    entries: int
    seconds: float


class Exceeded(Exception):
    """A confined run went past one of its `Limits`: what, and the figure."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


@dataclass(frozen=True)
class Done:
    """How a confined run ended: its status and its last messages."""

    returncode: int
    stderr: str


def ids() -> int | None:
    """The machine's id of a confined run's root (root's runs: the containers' `runc.id_base()`), or None (the
    caller's own, unprivileged)."""
    return runc.id_base() if os.geteuid() == 0 else None


def own(folder: int) -> None:
    """Make the folder (a descriptor) the confined runs' root's, so that they may write it."""
    if (base := ids()) is not None:
        os.fchown(folder, base, base)


def run(
    argv: Sequence[str],
    reads: Mapping[str, int],
    writes: tuple[str, int],
    env: Mapping[str, str],
    limits: Limits,
) -> Done:
    """`argv` confined, with `reads` (path inside -> descriptor, read-only) and `writes` (path inside, descriptor of
    the one folder it may write, which `limits` bound), `env` its whole environment. `Exceeded` past a limit."""
    inside, out = writes
    base = ids()
    with _userns(base) as userns, tempfile.TemporaryFile() as stderr:
        # As root bwrap builds the sandbox as the machine's root (its descriptors' binds need it), and its child
        # enters the containers' user namespace before anything of the image is read: from there on no capability of
        # the machine's is left (setns(2)), and the sandbox's mounts are not its to change.
        enter = [programs.required("nsenter"), f"--user=/proc/self/fd/{userns}", "-S", "0", "-G", "0", "--"]
        info_r, info_w = os.pipe()  # bwrap says its child's pid there: what is waited for once the run is killed
        command = [
            programs.required("prlimit"),
            f"--fsize={limits.bytes}",
            "--",
            *_bwrap(reads, inside, out, env, privileged=userns is not None),
            "--info-fd",
            str(info_w),
            "--",
            *(enter if userns is not None else []),
            *argv,
        ]
        keep = (*reads.values(), out, info_w, *((userns,) if userns is not None else ()))
        before = os.fstatvfs(out)
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            pass_fds=keep,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            start_new_session=True,
        )
        os.close(info_w)
        try:
            _watch(proc, out, before, limits)
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                _gone(info_r)
            os.close(info_r)
        stderr.seek(max(0, stderr.seek(0, os.SEEK_END) - STDERR_LIMIT))
        return Done(proc.returncode, stderr.read().decode("utf-8", "replace"))


def _watch(proc: subprocess.Popen[bytes], out: int, before: os.statvfs_result, limits: Limits) -> None:
    deadline = time.monotonic() + limits.seconds
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=POLL)
            return
        now = os.fstatvfs(out)
        taken = (before.f_bfree - now.f_bfree) * now.f_frsize
        made = before.f_ffree - now.f_ffree
        if taken > limits.bytes:
            raise Exceeded(f"it takes more than {limits.bytes >> 20} MiB unpacked")
        if made > limits.entries:
            raise Exceeded(f"it holds more than {limits.entries} files")
        if time.monotonic() > deadline:
            raise Exceeded(f"unpacking it took more than {limits.seconds:.0f} s")


def _gone(info: int) -> None:
    """Wait until the sandbox killed with bwrap is gone: bwrap's child (its PID namespace's first process, in a
    session of its own) gets SIGKILL from the kernel once bwrap dies (`--die-with-parent`), and its namespace's
    processes with it, but after bwrap is reaped; until then the unpacker may still write its output."""
    try:
        pid = int(json.loads(os.read(info, 4096) or b"{}").get("child-pid", 0))
    except (OSError, ValueError, AttributeError):
        return
    if pid <= 0:
        return
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return  # gone already
    try:
        select.select([fd], [], [], GONE_S)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _userns(base: int | None) -> Iterator[int | None]:
    if base is None:
        yield None
        return
    fd = rootfs.id_namespace(ctypes.CDLL(None, use_errno=True), base, runc.ID_COUNT)
    try:
        yield fd
    finally:
        os.close(fd)


def _bwrap(reads: Mapping[str, int], inside: str, out: int, env: Mapping[str, str], privileged: bool) -> list[str]:
    """bwrap's command line; `privileged` (root): no user namespace of bwrap's own, and the one capability the child
    needs to enter the containers' (CAP_SYS_ADMIN, gone once it has: setns(2) leaves it only the namespace's)."""
    namespaces = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup"]
    argv = [
        programs.required("bwrap"),
        *(namespaces + ["--cap-drop", "ALL", "--cap-add", "CAP_SYS_ADMIN"] if privileged else ["--unshare-all"]),
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
    ]
    for name in SYSTEM:
        system = Path("/", name)
        if system.is_symlink():
            argv += ["--symlink", str(os.readlink(system)), str(system)]
        elif system.is_dir():
            argv += ["--ro-bind", str(system), str(system)]
    for key, value in sorted(env.items()):
        argv += ["--setenv", key, value]
    for path, fd in reads.items():
        argv += ["--ro-bind-fd", str(fd), path]
    return [*argv, "--bind-fd", str(out), inside]
