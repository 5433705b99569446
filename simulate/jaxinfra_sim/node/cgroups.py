"""Limits are limits: a pod's `resources.limits` enforced by the kernel, as on a node.

On a node the kubelet asks the container runtime for a cgroup per container, and runc writes the
limits into it (libcontainer/cgroups/fs/memory.go: memory.limit_in_bytes, then
memory.memsw.limit_in_bytes; fs2/memory.go: memory.max, memory.swap.max; the CPU limit becomes a
CFS quota, kubelet's MilliCPUToQuota: quota = millicores x period / 1000 over a 100 ms period, at
least 1 ms). A container that allocates past its memory limit is killed by the kernel's OOM killer
(SIGKILL: exit 137); containerd's shim watches the group (v1: an eventfd on memory.oom_control; v2:
the oom_kill count in memory.events), publishes a TaskOOM event, and the CRI reports the
container's termination reason as `OOMKilled`. The simulator forks one process per pod, so each
pod with a limit gets a group of its own here, and the same kernel does the same thing to it.

Layout (the hierarchies are `cgroupfs.py`'s): <this process's group>/jaxinfra-<pid>-<name>/<pod>, per controller
hierarchy. A pod with a limit gets a group; one without gets a memory group with no limit where asked (`watch`: as
every container has a cgroup on a node), for its OOM kills alone. The pod process moves itself in right after the
fork (`PodGroup.enter`); what its parent had already touched stays charged to the parent (moving a task does not
move its charges), as a container starts with nothing charged.

Whose OOM kill: the kernel counts each process its OOM killer ends, whichever OOM (the machine's
memory exhausted, or a memory cgroup's limit reached), machine-wide (/proc/vmstat oom_kill) and in
the victim's own memory group (v1: memory.oom_control oom_kill; v2: memory.events oom_kill, "the
number of processes belonging to this cgroup killed by any kind of OOM killer", kernel 4.13 on:
mm/oom_kill.c __oom_kill_process), even when the process was a child its container's process
survives (a shell). Its own limit reached is told apart by the group's own count of that (v2:
memory.events oom, "the cgroup's memory usage was reached the limit"; v1: memory.failcnt and
memory.memsw.failcnt, the times a charge failed at this group's own limits, not an ancestor's, or,
where the kernel keeps those at 0 as this 6.18 one does, its peak, memory.max_usage_in_bytes,
within `LIMIT_SLACK_BYTES` of its limit): an OOM kill in a pod's group without one is the
machine's (or an ancestor group's limit: the machine the simulation was given), `machine_oom_killed`. On v1 a
group's count is its own alone (mm/memcontrol.c memcg_memory_event stops at the group outside the default hierarchy),
so a pod's count sums its group and the groups under it (the OCI runtime's group for its container, made under the
pod's); on v2 memory.events counts the whole subtree already.

The process limit (the kubelet's `--pod-max-pids`, podPidsLimit: kubernetes pkg/kubelet/cm/
pod_container_manager_linux.go EnsureExists sets ResourceConfig.PidsLimit on the pod's group, cgroup_manager_linux.go
writes it as the pids controller's pids.max, v1 and v2 alike): a cluster's default is none (-1), but this machine
must not be forked empty by one pod, so every pod's group gets `capacity.POD_PIDS_LIMIT` (each container's group
here, a pod's group on a node). A fork or a new thread past it fails with EAGAIN in that pod only
(kernel/cgroup/pids.c pids_can_fork). Where no pids controller can be used (unprivileged, nothing delegated),
`capacity.nproc_limit` gives the value for the container's RLIMIT_NPROC instead, and the report's notes say the
cgroup does not enforce it.
"""

from __future__ import annotations

import atexit
import errno
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from jaxinfra_sim.core.errors import InvalidArgument
from jaxinfra_sim.core.paths import safe_name
from jaxinfra_sim.node import cgroupfs

CFS_PERIOD_US = 100_000
"""The CFS period the kubelet uses (its default cpuCFSQuotaPeriod, 100 ms)."""
MIN_QUOTA_US = 1_000
"""kubelet's MinQuotaPeriod: a quota below 1 ms is raised to it (the kernel refuses less)."""
LIMIT_SLACK_BYTES = 1 << 20
"""v1: a pod whose peak came this close to its memory limit reached it (the kernel charges in batches of 64 pages;
kernels that keep memory.failcnt at 0 leave only the peak, memory.max_usage_in_bytes, to tell)."""


# --- sessions and pods ---------------------------------------------------------------------------


@dataclass
class PodGroup:
    """One pod's group (one per hierarchy its limits need). Made by `Session.pod`, entered by the pod itself."""

    pod_id: str
    version: int
    memory_bytes: int | None  # the limit enforced (None: none)
    cpu_millis: int | None
    paths: tuple[Path, ...]  # the group in each hierarchy
    _procs: tuple[bytes, ...] = ()  # their cgroup.procs, ready for `enter`
    _memory: Path | None = None  # the group holding the memory controller
    _oom_base: int = 0
    _limit_base: int = 0  # its own limit's count (v2: memory.events oom; v1: memory.failcnt) when made
    closed: bool = False
    pids_max: int | None = None  # its process limit (pids.max), where the pids controller enforces one
    _pids: Path | None = None  # the group holding the pids controller

    def enter(self) -> None:
        """Move the calling process (and every thread of it) into the pod's groups: call it in the forked pod
        process, before it allocates and before it makes namespaces (with this process's privileges).

        A few writes and nothing else: it runs in a fork of a big JAX process. "0" is the writer itself, in
        both versions (it needs no pid, so it is the same in any pid namespace); cgroup.procs rather than v1's
        tasks moves all threads, the same thing for a single-threaded fork. Raises OSError: the pod should
        then end with the message, rather than run unlimited."""
        for path in self._procs:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def adopt(self, pid: int) -> None:
        """Move process `pid` (a container's first process, made by the OCI runtime in a group of its own beneath
        this one, not started yet) into the pod's groups, where v1 counts its OOM kills (v1 does not add a child
        group's to its parent's memory.oom_control)."""
        for path in self._procs:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, str(pid).encode())
            finally:
                os.close(fd)

    def _oom_kills(self) -> bool:
        """Whether the kernel's OOM killer ended a process of this pod, any of them, for whatever OOM: its
        group's oom_kill count rose, as containerd reads it (v1: memory.oom_control, kernel 4.13 on; v2:
        memory.events)."""
        if self._memory is None:
            return False
        if self.version == 2:  # the whole subtree's already
            count = cgroupfs.keyed(self._memory / "memory.events", "oom_kill")
            return count is not None and count > self._oom_base
        counts = [
            cgroupfs.keyed(Path(folder) / "memory.oom_control", "oom_kill") for folder, _, _ in os.walk(self._memory)
        ]
        return sum(c for c in counts if c is not None) > self._oom_base

    def _own_limit_reached(self) -> bool:
        """Whether the pod reached its own memory limit (v2: memory.events oom; v1: `cgroupfs.failures`, which only this
        group's limits raise, not an ancestor's, else its peak within `LIMIT_SLACK_BYTES` of its limit); where
        neither can be read, a pod with a limit did."""
        if self.memory_bytes is None or self._memory is None:
            return False
        if self.version == 2:
            count = cgroupfs.keyed(self._memory / "memory.events", "oom")
            return count is None or count > self._limit_base
        count, peak = cgroupfs.failures(self._memory), self.peak_bytes()
        if count is not None and count > self._limit_base:
            return True
        return peak is None or peak > self.memory_bytes - LIMIT_SLACK_BYTES

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer killed a process of this pod for its own memory limit (the cluster's
        OOMKilled; read once the pod has ended)."""
        return self._oom_kills() and self._own_limit_reached()

    def machine_oom_killed(self) -> bool:
        """Whether the kernel's OOM killer killed a process of this pod (any: a shell's child too) while the pod
        was within its own limit, or had none: this machine's memory ran out (or its given group's), not the pod's.
        Readable while the pod runs."""
        return self._oom_kills() and not self._own_limit_reached()

    @property
    def enforced(self) -> bool:
        """Whether it enforces a limit (a watched group without one enforces none)."""
        return self.memory_bytes is not None or self.cpu_millis is not None

    def peak_bytes(self) -> int | None:
        """The most memory the pod had charged at once (v1: memory.max_usage_in_bytes; v2: memory.peak, kernel
        5.19 on), or None where unknown."""
        if self._memory is None:
            return None
        try:
            return int(
                cgroupfs.read(self._memory / ("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"))
            )
        except (OSError, ValueError):
            return None

    def pids_peak(self) -> int | None:
        """The most tasks (processes and threads) the pod held at once (pids.peak, kernel 6.1 on), or None."""
        if self._pids is None:
            return None
        try:
            return int(cgroupfs.read(self._pids / "pids.peak"))
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        """Remove the pod's groups, killing what is left in them (idempotent). Read `oom_killed` first."""
        if not self.closed:
            self.closed = all([cgroupfs.remove_tree(p) for p in self.paths])


@dataclass
class Session:
    """One simulation's groups: a parent per hierarchy, and a child per pod that has a limit. Use it as a
    context manager (or call `close`): every group it made goes, whatever ended the simulation."""

    controllers: cgroupfs.Controllers  # what this session enforces (a failure to make its group turns one off)
    groups: dict[Path, Path]  # this process's group -> the session's group under it
    pods: list[PodGroup] = field(default_factory=list)
    creator: int = field(default_factory=os.getpid)
    closed: bool = False

    @classmethod
    def create(cls, name: str, controllers: cgroupfs.Controllers | None = None) -> Session:
        """A session's groups, `jaxinfra-<pid>-<name>` under this process's group in each usable hierarchy
        (after sweeping stale ones). Never raises for want of cgroups: `controllers` then says what is off."""
        controllers = controllers if controllers is not None else cgroupfs.probe()
        cgroupfs.sweep(controllers)
        found = {"memory": controllers.memory, "cpu": controllers.cpu, "pids": controllers.pids}
        reasons = {"memory": controllers.memory_reason, "cpu": controllers.cpu_reason, "pids": controllers.pids_reason}
        groups: dict[Path, Path] = {}
        for parent in dict.fromkeys(c.group for c in found.values() if c is not None):
            users = [c for c in found.values() if c is not None and c.group == parent]
            group = parent / f"{cgroupfs.PREFIX}{os.getpid()}-{safe_name(name)}"
            try:
                group = _fresh(group)
                if users[0].version == 2:
                    cgroupfs.write(group / "cgroup.subtree_control", " ".join(f"+{c.name}" for c in users))
                groups[parent] = group
            except OSError as e:
                cgroupfs.remove_tree(group)
                for c in users:
                    found[c.name], reasons[c.name] = (
                        None,
                        f"cgroup v{c.version} {c.name} at {group}: {cgroupfs.why_not(e, os.geteuid())}",
                    )
        session = cls(
            cgroupfs.Controllers(
                found["memory"], found["cpu"], reasons["memory"], reasons["cpu"], found["pids"], reasons["pids"]
            ),
            groups,
        )
        atexit.register(session.close)
        return session

    def pod(
        self,
        pod_id: str,
        memory_bytes: int | None,
        cpu_millis: int | None,
        watch: bool = False,
        pids_max: int | None = None,
    ) -> PodGroup | None:
        """A group for one pod with its limits (bytes; millicores; tasks), or None when it has none this session
        enforces; with `watch`, a memory group without a memory limit too (to see its OOM kills). Each call makes
        a fresh group (a restarted pod gets a new one, as a new container does). Raises OSError where the kernel
        refuses: a limit that cannot be set is not silently dropped."""
        for value in (memory_bytes, cpu_millis, pids_max):
            if value is not None and value <= 0:
                raise InvalidArgument(f"a limit must be positive, not {value}")
        memory = self.controllers.memory if memory_bytes is not None or watch else None
        cpu = self.controllers.cpu if cpu_millis is not None else None
        pids = self.controllers.pids if pids_max is not None else None
        wanted = [c for c in (memory, cpu, pids) if c is not None]
        if not wanted or self.closed:
            return None
        paths: list[Path] = []
        pod = PodGroup(pod_id, wanted[0].version, memory_bytes if memory else None, cpu_millis if cpu else None, ())
        pod.pids_max = pids_max if pids else None
        values = {"memory": memory_bytes, "cpu": cpu_millis, "pids": pids_max}
        try:
            for parent in dict.fromkeys(c.group for c in wanted):
                path = _fresh(self.groups[parent] / safe_name(pod_id))
                paths.append(path)
                for c in wanted:
                    if c.group == parent:
                        value = values[c.name]
                        if value is not None:  # (a watched group without a memory limit: none to write)
                            _limit(path, c, value)
                        if c.name == "memory":
                            pod._memory = path
                        elif c.name == "pids":
                            pod._pids = path
        except OSError:
            for path in paths:
                cgroupfs.remove_tree(path)
            raise
        pod.paths = tuple(paths)
        pod._procs = tuple(os.fsencode(p / "cgroup.procs") for p in paths)
        if pod._memory is not None:
            pod._oom_base = (
                cgroupfs.keyed(
                    pod._memory / ("memory.oom_control" if pod.version == 1 else "memory.events"), "oom_kill"
                )
                or 0
            )
            pod._limit_base = (
                cgroupfs.failures(pod._memory)
                if pod.version == 1
                else cgroupfs.keyed(pod._memory / "memory.events", "oom")
            ) or 0
        self.pods.append(pod)
        return pod

    def close(self) -> None:
        """Remove every group this session made: pods' first, then its own; processes left in them are killed.
        Idempotent; a no-op in any process but the creator (a forked pod inherits the object and the atexit hook)."""
        if self.closed or os.getpid() != self.creator:
            return
        for pod in self.pods:
            pod.close()
        left = [g for g in self.groups.values() if not cgroupfs.remove_tree(g)]
        self.closed = not left and all(p.closed for p in self.pods)
        if self.closed:
            atexit.unregister(self.close)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fresh(path: Path) -> Path:
    """Make the group `path`, or `path-2`, `path-3`, ... where that name is taken."""
    for n in range(1, 1000):
        candidate = path if n == 1 else path.with_name(f"{path.name}-{n}")
        try:
            cgroupfs.mkdir(candidate)
            return candidate
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free group name", str(path))


def _limit(group: Path, c: cgroupfs.Controller, value: int) -> None:
    """Write one limit as runc does for a container (see the module's docstring)."""
    if c.name == "memory" and c.version == 1:
        cgroupfs.write(group / "memory.limit_in_bytes", str(value))
        if (group / "memory.memsw.limit_in_bytes").exists():  # memory+swap: swapping must not stand in for the OOM kill
            cgroupfs.write(group / "memory.memsw.limit_in_bytes", str(value))
        elif (group / "memory.swappiness").exists():  # no swap accounting: keep the group out of swap
            cgroupfs.write(group / "memory.swappiness", "0")
    elif c.name == "pids":  # the kubelet's podPidsLimit, v1 and v2 alike (runc fs/pids.go, fs2/pids.go)
        cgroupfs.write(group / "pids.max", str(value))
    elif c.name == "memory":
        cgroupfs.write(group / "memory.max", str(value))
        if (group / "memory.swap.max").exists():
            cgroupfs.write(group / "memory.swap.max", "0")
        if (group / "memory.oom.group").exists():  # the kubelet's default on v2 since 1.28: the container dies whole
            cgroupfs.write(group / "memory.oom.group", "1")
    else:
        quota = max(MIN_QUOTA_US, value * CFS_PERIOD_US // 1000)
        if c.version == 1:
            cgroupfs.write(group / "cpu.cfs_period_us", str(CFS_PERIOD_US))
            cgroupfs.write(group / "cpu.cfs_quota_us", str(quota))
        else:
            cgroupfs.write(group / "cpu.max", f"{quota} {CFS_PERIOD_US}")


def container_limits(container: Mapping) -> tuple[int | None, int | None]:
    """(memory bytes, cpu millicores) of a container's `resources.limits`, rounded up as the kubelet's
    Quantity.Value() and MilliValue() do, and as they do saturated at 2**63 - 1 (an int64; the API server stores
    `memory: 1e5000` as written; kubernetes staging/src/k8s.io/apimachinery/pkg/api/resource/math.go @ 13ab804c6d76,
    scaledValue and positiveScaleInt64: "Value saturates for a quantity outside int64"); None where there is none (a
    request is not a limit), it does not parse, or it is not positive."""
    from jaxinfra_sim.core.inputs import (
        quantity,
    )  # the project's one Quantity parser; imported here to keep this module light

    limits = (container.get("resources") or {}).get("limits") or {}
    out: list[int | None] = []
    for key, scale in (("memory", 1), ("cpu", 1000)):
        q = quantity(limits[key]) if key in limits else None
        out.append(min(-(-q.numerator * scale // q.denominator), MAX_INT64) if q is not None and q > 0 else None)
    return out[0], out[1]


MAX_INT64 = 2**63 - 1
"""The most a limit can be as the kubelet reads it (bytes, millicores)."""
