"""What this machine can hold, and what a simulation will take of it: capacity admission before any pod starts,
and the machine's own verdicts (out of memory, out of processes, out of descriptors) while pods run.

Every pod here is at least two processes of this machine (its shim and its container's PID 1), and a JAX process
is two dozen threads, each a task the kernel counts against pid_max, threads-max and the cgroup's pids.max; the
simulator holds six descriptors per pod. A job that cannot fit is refused with the figures before anything is
forked (exit 3), rather than forking until the machine gives out with nothing said.
"""

from __future__ import annotations

import math
import os
import resource
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from jaxinfra_sim.node import cgroupfs

MIB = 2**20
GIB = 2**30

PROBE_POD_BYTES = 18 * MIB
"""Memory a built-in probe pod adds whatever the size of its group (its shim and its JAX process, forked from the
simulator, which imported jax once: what they share with it stays shared; rank 0 takes more, about 90 MiB: it compiles
and serves the coordination service). With `GROUP_DEVICE_BYTES` and `DEVICE_BYTES`, fitted to the simulation's peak
over its pods (`benchmarks/scale.py`, this 2-core VM, 2026-12-06): 23.6 MiB a pod at 128 processes, 27.1 to 28.3 at
256, 36.4 at 512 (18.2 GiB); the model gives 24, 28 and 36."""
GROUP_DEVICE_BYTES = 32 * 1024
"""More per device of its group that each JAX process of the group holds: the program it loads names every device (its
replica groups and device assignment: the executable process 0 shares grows by about 0.5 KiB a device, and loaded,
a process's private memory by about 21 KiB a device, measured at 32 and 128 processes), and its group's global arrays
index every shard. Summed over the group, memory grows with the square of its size: 1,024 processes would take about
52 GiB."""
COMMAND_POD_BYTES = 320 * MIB
"""The least a --run-command pod takes: its container execs a fresh interpreter that imports jax by itself (about
300 MiB resident here before the program allocates anything of its own)."""
DEVICE_BYTES = 2 * MIB
"""More per CPU device a process has (its device's buffers and threads)."""
TASKS_PER_POD = 28
"""Tasks (processes and threads) a pod holds: its shim, and a JAX process's 23 to 26 threads here."""
POD_PIDS_LIMIT = 1024
"""The most tasks (processes and threads) one pod may hold: the pids.max of its group (`cgroups`), as the kubelet's
`--pod-max-pids` (podPidsLimit) sets it on a node. A cluster's default is no limit; here one pod must not fork this
machine empty (1,500 `sleep` processes from a shell loop did, before). Measured with `jaxinfra simulate
stacks/cpu_dev.py` (pids.peak of each pod's group, as the report's `limits.pids_peak` shows it): 24 tasks for rank 1,
35 for rank 0, which also serves the coordination service, on this 2-core machine; 24 and 33 on one core (`taskset -c
0`). A JAX process's thread pools grow with the cores it may run on, here about 2 tasks a core: extrapolated (not
measured), a pod on a 256-core machine holds about 550. 1024 fits that with room for a program's own data-loader
threads and helper processes, and still stops a fork loop at about 1,000."""
DESCRIPTORS_PER_POD = 6
"""The simulator's descriptors per pod: its control, status, stdout and stderr pipes, its shim's pidfd, its cgroup."""
DESCRIPTORS_BASE = 256
"""The simulator's own (the API server's, the network holder's, Python's)."""
AT_SCALE = "rehearse at full scale on a cluster's CPU nodes with its shadow (jaxinfra synth STACK --shadow cpu)"
"""The fix every verdict of this machine's ends with: where a job too large for it can run."""


PROCESSES_PER_CORE = 16
"""Processes a core can hold before their wall-clock timeouts stretch: past it, the probe's heartbeat and shutdown
timeouts grow with the processes per core (`dilated`). On a cluster each process has its own machine; here N share
this machine's cores, and a JAX process's heartbeat thread or the coordination service in process 0 can wait seconds
for a core. Measured (`benchmarks/scale.py` sizes, this 2-core VM on a slow day): 256 processes with the probe's 10 s
heartbeat lost 2 tasks' heartbeats ("DEADLINE_EXCEEDED ... CoordinationService/Heartbeat") in 2 of 4 runs and the
whole group with them; 64 never did."""


def dilated(seconds: int, processes: int, ceiling: int) -> int:
    """A wall-clock timeout for one of `processes` sharing this machine's cores: `seconds` up to PROCESSES_PER_CORE a
    core, then in proportion, never past `ceiling` (JAX's own default for it, what a cluster would use)."""
    cores = len(os.sched_getaffinity(0))
    factor = -(-processes // (cores * PROCESSES_PER_CORE))  # ceil
    return min(ceiling, seconds * max(1, factor))


@dataclass(frozen=True)
class Need:
    """What a workload of a simulation takes of the machine while it runs, at least (`fits`: those running together)."""

    workload: str
    pods: int
    memory: int  # bytes
    tasks: int
    descriptors: int
    devices: int  # CPU devices in all: memory grows with the group's size (`_most_pods`)
    run_command: bool


def _pod_bytes(run_command: bool) -> int:
    """What a pod takes whatever its group: a probe pod's, or a --run-command pod's fresh interpreter."""
    return COMMAND_POD_BYTES if run_command else PROBE_POD_BYTES


def _memory(pods: int, devices: int, run_command: bool) -> int:
    """The bytes `pods` pods of one JAX group with `devices` CPU devices in all take (`need`)."""
    return pods * (_pod_bytes(run_command) + devices * GROUP_DEVICE_BYTES) + devices * DEVICE_BYTES


def _most_pods(memory: int, devices_per_pod: float, run_command: bool) -> int:
    """The most pods (`devices_per_pod` each) whose `_memory` fits in `memory`: the positive root of the quadratic."""
    a = devices_per_pod * GROUP_DEVICE_BYTES
    b = _pod_bytes(run_command) + devices_per_pod * DEVICE_BYTES
    most = int((-b + math.sqrt(b * b + 4 * a * memory)) / (2 * a)) if a else int(memory // b)
    while most > 0 and _memory(most, math.ceil(most * devices_per_pod), run_command) > memory:
        most -= 1  # rounding
    return most


def need(workload: str, pods: int, devices: int, run_command: bool) -> Need:
    """The estimate for a workload of `pods` pods with `devices` CPU devices in all (one JAX group)."""
    return Need(
        workload,
        pods,
        _memory(pods, devices, run_command),
        pods * TASKS_PER_POD,
        DESCRIPTORS_BASE + pods * DESCRIPTORS_PER_POD,
        devices,
        run_command,
    )


@dataclass(frozen=True)
class Limit:
    """One of the machine's bounds: how much is left, and what sets it (for the message)."""

    left: int
    source: str


def _int(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max" (v2) has no digits: no bound


def _meminfo(field: str) -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _cgroup_files(v1_controller: str) -> Iterable[tuple[Path, str]]:
    """This process's cgroup folders for a controller, its own first and then each ancestor (a limit set above
    bounds it too), with the hierarchy's version: "v1" or "v2"."""
    v1, v2_path = cgroupfs.membership()
    if v1_controller in v1:
        mount, path = v1[v1_controller]
        base, kind = cgroupfs.ROOT / mount, "v1"
    elif v2_path is not None:
        base, path, kind = cgroupfs.ROOT, v2_path, "v2"
        if (cgroupfs.ROOT / "unified").is_dir() and not (cgroupfs.ROOT / "cgroup.controllers").exists():
            base = cgroupfs.ROOT / "unified"  # systemd's hybrid layout
    else:
        return
    parts = [p for p in path.split("/") if p]
    for depth in range(len(parts), -1, -1):
        yield base.joinpath(*parts[:depth]), kind


def memory() -> Limit:
    """Memory the pods may still take: MemAvailable, or less where this process's memory cgroup bounds it."""
    best = Limit(available_memory(), "MemAvailable")
    for folder, kind in _cgroup_files("memory"):
        limit = _int(folder / ("memory.limit_in_bytes" if kind == "v1" else "memory.max"))
        used = _int(folder / ("memory.usage_in_bytes" if kind == "v1" else "memory.current"))
        if limit is not None and used is not None and limit < 2**62 and limit - used < best.left:
            best = Limit(max(limit - used, 0), f"the memory cgroup's limit ({limit / GIB:.1f} GiB)")
    return best


def tasks() -> Limit:
    """Tasks the machine may still start: pid_max and threads-max less every task it runs, or the pids cgroup's
    limit less its count, whichever is lower."""
    running = _running_tasks()
    best = Limit(1 << 62, "")
    for name in ("pid_max", "threads-max"):
        value = _int(Path("/proc/sys/kernel") / name)
        if value is not None and value - running < best.left:
            best = Limit(max(value - running, 0), f"kernel.{name.replace('-', '_')} {value}")
    for folder, _ in _cgroup_files("pids"):
        limit, current = _int(folder / "pids.max"), _int(folder / "pids.current")
        if limit is not None and current is not None and limit - current < best.left:
            best = Limit(max(limit - current, 0), f"the pids cgroup's pids.max {limit}")
    if os.geteuid() != 0:
        soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
        if soft != resource.RLIM_INFINITY and soft - running < best.left:
            best = Limit(max(soft - running, 0), f"ulimit -u {soft}")
    return best


def nproc_limit(controllers: cgroupfs.Controllers | None = None) -> int | None:
    """The RLIMIT_NPROC to give a pod's container where no pids controller enforces `POD_PIDS_LIMIT` (an
    unprivileged simulator: nothing delegated), so that a fork loop still stops inside the pod (fork(2) fails with
    EAGAIN); None where the pids cgroup enforces it (`controllers`: what the session got, else `cgroupfs.probe()`).

    RLIMIT_NPROC counts the tasks of the process's real uid, and since Linux 5.14 in each user namespace on its own
    (kernel/ucount.c: the innermost namespace's count against the process's own limit): set in a container's own
    user namespace it bounds the container's tasks alone. Set without one, it would count every
    process of the caller's uid (the simulator's and the other pods' too). Root outside a user namespace is exempt."""
    found = controllers if controllers is not None else cgroupfs.probe()
    return None if found.pids is not None else POD_PIDS_LIMIT


def _running_tasks() -> int:
    try:
        return int(Path("/proc/loadavg").read_text(encoding="ascii").split()[3].split("/")[1])
    except (OSError, IndexError, ValueError):
        return 0


def raise_descriptor_limit() -> None:
    """Lift this process's soft RLIMIT_NOFILE to its hard limit, as a server does: a few hundred pods hold more
    than the usual 1024 descriptors. Pods inherit it, as containers inherit the runtime's."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (OSError, ValueError):
            pass


def descriptors() -> Limit:
    """Descriptors this process may still open: its soft RLIMIT_NOFILE less those open now."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        open_now = len(os.listdir("/proc/self/fd"))
    except OSError:
        open_now = 0
    if soft == resource.RLIM_INFINITY:
        return Limit(1 << 62, "")
    return Limit(max(soft - open_now, 0), f"ulimit -n {soft}")


def refusal(n: Need) -> str | None:
    """Why this machine cannot run the workload, with the figures and the fix; None when it fits."""
    short = []
    mem, tsk, fds = memory(), tasks(), descriptors()
    if n.memory > mem.left:
        short.append(f"{n.memory / GIB:.1f} GiB of memory ({mem.left / GIB:.1f} GiB available: {mem.source})")
    if n.tasks > tsk.left:
        short.append(f"{n.tasks:,} processes and threads (room for {tsk.left:,}: {tsk.source})")
    if n.descriptors > fds.left:
        short.append(f"{n.descriptors:,} file descriptors ({fds.left:,} free: {fds.source})")
    if not short:
        return None
    in_memory = _most_pods(mem.left, n.devices / max(n.pods, 1), n.run_command)
    fits = max(min(in_memory, tsk.left // TASKS_PER_POD, (fds.left - DESCRIPTORS_BASE) // DESCRIPTORS_PER_POD), 0)
    return (
        f"this machine cannot run {n.workload}: its {n.pods:,} pods need at least {'; '.join(short)}; "
        f"fix: simulate at most {fits:,} pods here (a smaller slice, fewer hosts), or {AT_SCALE}"
    )


WAITING = (
    "room on this machine, the cluster's one node: its pods stayed Pending beside the workloads running until enough "
    "of them had ended"
)
"""What a workload that fits this machine alone, but not beside those running, waits for."""


@dataclass(frozen=True)
class Room:
    """This machine's bounds as the simulation began, before any pod: what the workloads running together share."""

    memory: int
    tasks: int
    descriptors: int


def room() -> Room:
    return Room(memory().left, tasks().left, descriptors().left)


def fits(needs: Sequence[Need], room: Room) -> bool:
    """Whether workloads of these needs fit this machine together (the simulator's own descriptors counted once)."""
    return (
        sum(n.memory for n in needs) <= room.memory
        and sum(n.tasks for n in needs) <= room.tasks
        and sum(n.descriptors - DESCRIPTORS_BASE for n in needs) + DESCRIPTORS_BASE <= room.descriptors
    )


def oom_kills() -> int:
    """The kernel's count of processes its OOM killer ended, machine-wide (/proc/vmstat oom_kill, which counts
    those a memory cgroup's limit ended too)."""
    try:
        for line in Path("/proc/vmstat").read_text(encoding="ascii").splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def total_memory() -> int:
    """MemTotal, in bytes (0 where /proc/meminfo cannot be read)."""
    return _meminfo("MemTotal") or 0


def available_memory() -> int:
    """MemAvailable now, in bytes (0 where /proc/meminfo cannot be read)."""
    return _meminfo("MemAvailable") or 0


def pss(pid: int) -> int | None:
    """The proportional set size of a process and its children (shared pages divided among their sharers, so the
    pages a pod shares with the simulator count once over all of them), in bytes; None once it is gone."""
    total, found = 0, False
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text(encoding="ascii").splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    found = True
                    break
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text(encoding="ascii").split()]
        except (OSError, ValueError):
            continue
    return total if found else None
