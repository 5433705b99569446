"""The container runtime's shim: the parent of a container's first process, outside the pod's PID
namespace, in which that process is PID 1, as containerd-shim-runc-v2 is on a node.

A node's kernel treats a PID namespace's init specially, and training jobs meet it when they are
stopped (kernel/signal.c, sig_task_ignored and SIGNAL_UNKILLABLE): a signal whose action is the
default never reaches PID 1, except SIGKILL (or SIGSTOP) from an ancestor namespace. A container
whose program installs no SIGTERM handler therefore runs on after the kubelet's SIGTERM until the
SIGKILL at the end of its grace period, and a program that restores the default handler while it
exits (CPython does, at finalization) cannot be killed by a second SIGTERM. The runtime signals
that process only (containerd's CRI stopContainer: task.Kill without WithKillAll, the stop signal
once, SIGKILL after the grace period), never a wrapper's children, and when PID 1 exits the kernel
kills every other process of the namespace (zap_pid_ns_processes). containerd's reaper reports a
process killed by signal N as exit code 128 + N: what the pod's status and podFailurePolicy's
onExitCodes see.

The pod's process unshares a PID namespace with its others (`sandbox.enter`), then calls `fork_init`:
the child is PID 1 and goes on to become the container; the parent stays as its shim. The runner
asks the shim for signals over a pipe, one byte per signal, as the kubelet asks containerd; the
shim ends the way its container ended once the namespace is empty, so its exit is the container's.
The pipe's end (the simulator gone) kills the container.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from jaxinfra_sim.core import fds
from jaxinfra_sim.core.events import Reason
from jaxinfra_sim.runtime import runc

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
START_ERROR = 128
"""The exit code a container that never started gets (containerd's and the kubelet's StartError)."""
START_ERROR_REASON = Reason.START_ERROR
"""Its terminated state's reason, the runtime's error its message (containerd, internal/cri/server/container_start.go:
errorStartReason and errorStartExitCode, set when StartContainer fails)."""


def fork_init(control: int) -> None:
    """In the pod's process, once it has its own PID namespace: fork the container's PID 1, which returns from this
    call; this process stays behind as the shim, serving `control` (the runner's signal requests), and never returns."""
    signals = set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, signals)  # no signal meant for the shim may kill it first
    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(alive_w)
        os.close(control)
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if fds.readable([alive_r], 0):  # the shim died before the line above: the container dies with it
            os._exit(128 + signal.SIGKILL)
        os.close(alive_r)
        os.setpgid(0, 0)  # its own process group: a container's kill(0, ...) never reaches the shim
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return
    os.close(alive_r)
    _serve(pid, control, keep={alive_w})


def run_container(
    rt: runc.Runtime,
    name: str,
    bundle: Path,
    control: int,
    started: Callable[[], None],
    adopt: Callable[[int], None] | None = None,
) -> NoReturn:
    """In the pod's process, its root built and its bundle written: the container made and started by the OCI
    runtime (`runc create`, `runc start`) as containerd-shim-runc-v2 does, this process its child subreaper, so
    the container's PID 1 is its child; then the shim's loop, and `runc delete` once it has exited. A container the
    runtime could not make ends 128 (StartError), runc's message on its stderr."""
    signals = set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    pid_file, log = bundle / "pid", bundle / "runc.log"
    null = os.open(os.devnull, os.O_WRONLY)

    def delete() -> None:
        runc.run(rt.argv("delete", "--force", name, log=log), null, null)

    create = rt.argv("create", "--bundle", str(bundle), "--pid-file", str(pid_file), name, log=log)
    if runc.run(create, 1, 2) != 0:
        _start_error(runc.failure(log), delete)
    pid = int(pid_file.read_text())
    if adopt is not None:  # into the pod's own groups before its program starts
        adopt(pid)
    if runc.run(rt.argv("start", name, log=log), null, null) != 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        _start_error(runc.failure(log), delete)
    started()
    _serve(pid, control, keep={null}, after=delete)


def _start_error(message: str, delete: Callable[[], None]) -> NoReturn:
    """A container the runtime could not start: its message on the container's stderr as the kubelet reports it
    (reason StartError), exit 128."""
    os.write(2, f"failed to create containerd task: OCI runtime create failed: {message}\n".encode())
    delete()
    os._exit(START_ERROR)


def _serve(pid: int, control: int, keep: set[int], after: Callable[[], object] | None = None) -> NoReturn:
    """The shim's loop: pass each requested signal to PID 1 until it exits, then end as it did (after `after`)."""
    code = 128 + signal.SIGKILL
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        child = os.pidfd_open(pid)
        kept = sorted(keep | {control, child})
        for low, high in zip([2, *kept], [*kept, os.sysconf("SC_OPEN_MAX")]):  # the pods' pipes are not the shim's
            os.closerange(low + 1, high)
        watched = [control, child]
        while child not in fds.readable(watched):
            asked = os.read(control, 64)
            if not asked:  # the simulator is gone: so is its container
                asked, watched = bytes([signal.SIGKILL]), [child]
            for signum in asked:
                os.kill(pid, signum)  # not yet reaped: never a stranger's pid
        _, status = os.waitpid(pid, 0)  # returns once every process of the namespace is gone
        if after is not None:
            after()
        if os.WIFSIGNALED(status):
            signum = os.WTERMSIG(status)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # end by the same signal, without a core of the shim
            if signum not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
            os.kill(os.getpid(), signum)
        code = os.WEXITSTATUS(status)
    finally:
        os._exit(code)


def unhandled(shim: int, signum: int) -> str | None:
    """The command name of the container's PID 1 (the shim's child) if it has no handler for `signum`, so that the
    kernel drops the signal; None if it handles it, if it is not the first process of its PID namespace (a pod's
    shared one, `kubelet.podsandbox`: the kernel delivers it), or if that cannot be read (it has already exited)."""
    try:
        [init] = Path(f"/proc/{shim}/task/{shim}/children").read_text().split()
        status = dict(
            line.split(":\t", 1) for line in Path(f"/proc/{init}/status").read_text().splitlines() if ":\t" in line
        )
        caught = int(status["SigCgt"], 16) >> (signum - 1) & 1
        if status["NSpid"].split()[-1] != "1":
            return None
        return None if caught else Path(f"/proc/{init}/comm").read_text().strip()
    except (OSError, ValueError, KeyError):
        return None
