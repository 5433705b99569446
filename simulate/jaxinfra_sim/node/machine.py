"""This machine while an attempt's pods run: its memory sampled, its OOM killer's kills read, its refusals to fork;
and the machine's verdict, which is not the job's (`capacity` admits a job before anything starts; this watches
what happens after). The runner polls it from its loop; nothing here starts or stops a pod."""

from __future__ import annotations

import errno
import os
import signal
from typing import TYPE_CHECKING

from jaxinfra_sim.core import model
from jaxinfra_sim.core.podrun import ContainerRun, PodRun, Process
from jaxinfra_sim.node import capacity

if TYPE_CHECKING:
    from jaxinfra_sim.node.node import Root

RAN_OUT_OF = {
    errno.EAGAIN: "processes (its tasks: pid_max, threads-max, the pids cgroup)",
    errno.ENOMEM: "memory",
    errno.EMFILE: "descriptors",
    errno.ENFILE: "descriptors",
}
"""A fork or a pipe the kernel refused for want of tasks, memory or descriptors: this machine's limits, by errno."""
MEMORY_EVERY_S, PSS_EVERY_S = 0.05, 1.0
"""How often the runner reads MemAvailable, and one more pod's proportional set size: under load each read costs
the one-core runner about 1 ms and 10 ms (a pod's smaps_rollup)."""
ROOT_EVERY_S = 0.5
"""How often the runner sees that the node's folder is still there (three syscalls)."""


def oom_reason(pod: model.Pod, peak: int | None) -> str:
    """A container the kernel's OOM killer ended for its memory limit, as the kubelet reports it."""
    used = f" (peak {peak / 2**20:.0f} MiB)" if peak else ""
    device = (
        f"; on the cluster its arrays live in {pod.accelerator.upper()} memory, which this limit does not cover, but "
        "here they are host memory"
        if pod.accelerator != "cpu"
        else ""
    )
    return f"OOMKilled: exit code 137, over its memory limit of {(pod.memory_limit or 0) / 2**20:.0f} MiB{used}{device}"


class MemorySampler:
    """The simulation's memory as the runner sees it: the machine's MemAvailable (its drop since the attempt began
    is what the pods took), and each pod's proportional set size, one pod per sample in turn."""

    def __init__(self, runs: list[PodRun]):
        self.runs, self.start, self.limit = runs, capacity.available_memory(), capacity.memory()
        self.low, self.next, self.next_pss, self.turn = self.start, 0.0, 0.0, 0

    @property
    def peak(self) -> int:
        return max(self.start - self.low, 0)

    def in_use(self) -> int:
        return max(self.start - min(self.low, capacity.available_memory()), 0)

    def measure(self, r: PodRun) -> None:
        if r.pid is not None and not r.reaped and (now := capacity.pss(r.pid)) is not None:
            r.pss_peak = max(r.pss_peak or 0, now)

    def sample(self, now: float) -> None:
        if now >= self.next:
            self.next = now + MEMORY_EVERY_S
            self.low = min(self.low, capacity.available_memory())
        live = [r for r in self.runs if r.pid is not None and not r.reaped] if now >= self.next_pss else []
        if live:
            self.next_pss = now + PSS_EVERY_S
            self.turn = (self.turn + 1) % len(live)
            self.measure(live[self.turn])


class Machine:
    """One attempt's watch on this machine: `verdict` is set (once) when the machine, not the job, ended it."""

    def __init__(self, runs: list[PodRun], root: Root | None = None):
        self.runs, self.root = runs, root
        self.memory = MemorySampler(runs)
        self.oom_baseline = self.oom_seen = capacity.oom_kills()
        self.oom_next = self.root_next = 0.0
        self.verdict: str | None = None
        self.out_of_memory_seen = False  # the verdict is the kernel's OOM killer's

    def poll(self, now: float) -> None:
        """Sample memory, read the pods' groups once the machine-wide OOM kill count rose (`_oom_watch`), and see that
        the node's folder is still there (`node.Root`)."""
        self.memory.sample(now)
        self._oom_watch(now)
        if self.root is not None and now >= self.root_next and self.verdict is None:
            self.root_next = now + ROOT_EVERY_S
            self.verdict = self.root.gone()

    def refused(self, err: OSError, r: PodRun) -> bool:
        """A fork or a descriptor this machine refused while starting pod `r`, or the node's folder removed under it
        (a file of the pod's that could not be made: `node.Root`): its verdict (True), or not this machine's doing
        (False: the caller raises)."""
        if self.root is not None and (gone := self.root.gone()) is not None:
            self.verdict = gone
            return True
        if err.errno not in RAN_OUT_OF:
            return False
        started = sum(p.pid is not None for p in self.runs)
        self.verdict = (
            f"this machine ran out of {RAN_OUT_OF[err.errno]} starting pod {r.pod.hostname} ({started} of "
            f"{len(self.runs)} pods running: {os.strerror(err.errno)}); fix: simulate fewer pods here, or "
            f"{capacity.AT_SCALE}"
        )
        return True

    def how(self, p: PodRun | ContainerRun) -> str | None:
        """How a reaped container ended, where memory ended it: its own limit's OOM kill, the machine's, or a SIGKILL
        nobody here sent; None otherwise."""
        if p.group is not None and p.group.oom_killed():
            return oom_reason(p.pod, p.group.peak_bytes())
        if p.group is not None and p.group.machine_oom_killed():  # any process of it, whatever survived
            return self.out_of_memory(p)
        if p.signal == "SIGKILL" and not p.killed and capacity.oom_kills() > self.oom_baseline:
            return self.out_of_memory(p)  # no group to tell whose: its own process's SIGKILL
        if p.signal == "SIGKILL" and not p.killed:
            return (
                "killed by a SIGKILL that neither the simulator, its memory limit nor the machine's OOM killer "
                "sent (another process on this machine)"
            )
        return None

    def out_of_memory(self, p: Process) -> str:
        """The machine's verdict (once: the first OOM kill tells it), and the container's reason: the kernel's OOM
        killer ended a process of it, for this machine's memory, not its own limit."""
        if self.verdict is None:
            self.out_of_memory_seen = True
            live = sum(any(q.live for q in r.processes) for r in self.runs) + 1
            self.verdict = (
                f"this machine ran out of memory ({self.memory.in_use() / capacity.GIB:.1f} GiB in use by {live} "
                f"pods; {self.memory.limit.left / capacity.GIB:.1f} GiB was free at the start: "
                f"{self.memory.limit.source}): the kernel's OOM killer ended a pod's process; fix: fewer devices "
                f"per process or fewer processes here, or {capacity.AT_SCALE}"
            )
        which = "killed" if p.signal == "SIGKILL" and not p.killed else "a process in it was killed"
        return f"{which} by the kernel's OOM killer: this machine ran out of memory (not its own limit)"

    def _oom_watch(self, now: float) -> None:
        """The machine's OOM killer ending a process of a running pod (a shell's child: the shell lives on) is the
        machine's verdict at once. Only when the machine-wide count (/proc/vmstat oom_kill) rose are the pods'
        groups read (their memory.events or memory.oom_control oom_kill), each living container's.

        A process killed for its container's own memory limit kills the whole container, as on a node: since
        Kubernetes 1.28 the kubelet asks for memory.oom.group=1 on each container's cgroup v2 group (kubernetes v1.33.6
        pkg/kubelet/kuberuntime/kuberuntime_container_linux.go generateLinuxContainerResources: `Unified` gets
        "memory.oom.group": "1" unless the kubelet's singleProcessOOMKill is true, which pkg/kubelet/kubelet.go
        defaults to false on cgroup v2; runc writes a `unified` key as is, libcontainer/cgroups/fs2 setUnified), so the
        kernel's OOM killer ends every process of the group together (mm/oom_kill.c mem_cgroup_get_oom_group) and the
        container is OOMKilled, exit 137, whatever its PID 1 would have done next.
        cgroup v1 has no memory.oom.group (`cgroups._limit` writes it on v2): there a shell whose child the OOM
        killer ended goes on, so its container is killed here (its shim's SIGKILL) once its group's count shows it,
        and a container that exited first is recorded as the kernel would have ended it (`oom_group`)."""
        if now < self.oom_next:
            return
        self.oom_next, count = now + MEMORY_EVERY_S, capacity.oom_kills()
        if count == self.oom_seen:
            return
        self.oom_seen = count
        for r in self.runs:
            for p in r.processes:
                if p.live and p.group is not None and p.group.machine_oom_killed():
                    p.reason = self.out_of_memory(p)
                    if isinstance(p, ContainerRun) and not r.done:
                        r.reason = f"container {p.container.name}: {p.reason}"
                elif p.live and p.group is not None and not p.oom_group and p.group.oom_killed():
                    p.oom_group = True
                    p.request(signal.SIGKILL)


def oom_group(p: Process) -> None:
    """A reaped container of which its own memory limit's OOM killer ended a process: on a node the kernel ends
    the whole group at once (memory.oom.group, `Machine._oom_watch`), so it ended by SIGKILL, exit 137, even where its
    PID 1 exited first here (cgroup v1: a shell that went on to `exit 0` before the watch saw the kill)."""
    if p.signal is None and p.group is not None and p.group.oom_killed():
        p.oom_group = True
        p.signal, p.exit_code = signal.Signals.SIGKILL.name, 128 + signal.SIGKILL
