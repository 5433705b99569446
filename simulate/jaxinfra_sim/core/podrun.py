"""What the runner saw of each pod and container in one attempt: typed state, read by the engine, the report and
the trace. The runner (`pod_workers`) writes it; nothing here starts or stops a process."""

from __future__ import annotations

import os
import signal
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jaxinfra_sim.core import events, model
from jaxinfra_sim.core.events import Event
from jaxinfra_sim.core.security import Security

if TYPE_CHECKING:  # types only: the controllers read these records (`controllers.running`), the kubelet writes them
    from jaxinfra_sim.controllers.job_failure import JobFailure
    from jaxinfra_sim.node.cgroups import PodGroup
    from jaxinfra_sim.runtime import sandbox


class Phase(StrEnum):
    """A pod's phase as the runner tracks it: Kubernetes' PodPhase (Pending, Running, Succeeded, Failed), with the
    probe's `initializing` (its JAX process is joining the group) between Pending and Running, and `deleted` (its
    controller deleted it while it ran: the workload had completed)."""

    PENDING = "pending"
    INITIALIZING = "initializing"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DELETED = "deleted"


ENDS = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.DELETED})
"""The phases a pod does not leave."""

#: Why a pod that did not fail itself was stopped: the group ended at another pod's failure.
ENDED_WITH_GROUP = "ended with its group"

STDERR_TAIL = 20
"""How many of a container's last stderr lines the report keeps: what a failure says of itself."""


@dataclass(kw_only=True, eq=False)
class Process:
    """One container's process in one attempt, as the runner saw it: its shim, its pipes, how it ended."""

    pid: int | None = None  # its shim's
    control: int | None = None  # the write end of its shim's control pipe
    reaped: bool = False
    exit_code: int | None = None
    signal: str | None = None
    reason: str | None = None  # why it ended (a pod's: why the pod did)
    fds: dict[int, str] = field(default_factory=dict)  # fd -> "status" | "stdout" | "stderr" | "exit" (shim's pidfd)
    buffers: dict[int, bytes] = field(default_factory=dict)
    stderr_tail: deque[str] = field(
        default_factory=lambda: deque(maxlen=STDERR_TAIL)
    )  # its last non-empty stderr lines
    cwd: Path | None = None  # the folder its container ran in
    name: str = ""  # its container's id for the OCI runtime (--run-command)
    killed: bool = False  # the simulator asked its shim for a SIGKILL (--kill, a grace period's end)
    group: PodGroup | None = None  # its cgroup, where its limits are enforced
    unapplied: list[str] = field(default_factory=list)  # what of its securityContext this machine could not give it
    security: Security | None = None  # its identity as started (its image's User applied), else its pod's
    handshake: sandbox.Handshake | None = None  # as root: the pipes over which it asks for its id maps, until answered
    env: Mapping[str, str] = field(default_factory=dict)  # its container's env, which an exec probe's command gets
    probed: dict[str, dict[str, Any]] = field(default_factory=dict)  # each of its probes' results (`prober`)
    probe_failed: str | None = None  # why the kubelet stopped it: a liveness or startup probe's failure
    running: bool = False  # its sandbox is made and its program started (it said so): probes may enter it
    pids_peak: int | None = None  # the most tasks its group held at once (read once it has exited)
    logged: int = 0  # bytes it wrote to stdout and stderr: its logs, which count toward its ephemeral storage
    oom_group: bool = False  # its memory limit's OOM killer ended a process of it: the whole container was killed

    @property
    def last_stderr(self) -> str | None:
        return self.stderr_tail[-1] if self.stderr_tail else None

    @property
    def live(self) -> bool:
        return self.pid is not None and not self.reaped

    def request(self, signum: int) -> None:
        """Ask its shim to send `signum` to its container: one byte, the signal's number, on its control pipe (the
        shim's side is `runtime.shim`); nothing once its shim is reaped or its pod is gone."""
        if self.control is not None:
            self.killed = self.killed or signum == signal.SIGKILL
            try:
                os.write(self.control, bytes([signum]))
            except BrokenPipeError:
                pass


@dataclass(kw_only=True, eq=False)
class ContainerRun(Process):
    """One of a pod's other containers (init, sidecar, another main) in one attempt."""

    container: model.Container
    pod: model.Pod  # the pod as this container sees it (`model.Pod.as_container`)
    slot: int  # its place among the pod's other containers, from 1: its sandbox's and cgroup's name
    owner: PodRun = field(repr=False)
    restarts: int = 0  # a sidecar the kubelet started again after it exited
    started: float | None = None  # seconds since the attempt began
    ended: float | None = None
    stopping: float | None = None  # when the kubelet sent it the stop signal (seconds since the attempt began)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.container.name,
            "role": self.container.role,
            "pid": self.pid,
            "started": None if self.started is None else round(self.started, 3),
            "ended": None if self.ended is None else round(self.ended, 3),
            "exit_code": self.exit_code,
            "signal": self.signal,
            "reason": self.reason,
            "restarts": self.restarts,
            "probes": self.probed,
            "stderr_tail": list(self.stderr_tail),
        }


@dataclass(eq=False)
class PodRun(Process):
    """One pod in one attempt, as the runner saw it; its own process is its JAX container's."""

    pod: model.Pod
    phase: Phase = Phase.PENDING  # pending -> initializing -> running -> succeeded | failed (| deleted)
    timings: dict[str, float] = field(default_factory=dict)  # phase -> seconds since the attempt began
    result: dict[str, Any] | None = None
    preempted: float | None = None  # when it got SIGTERM for --preempt (seconds since the attempt began)
    deaf: str | None = None  # its PID 1's command, if that had no SIGTERM handler when the SIGTERM came
    deleted: bool = False  # still running when its workload completed: its controller deleted it
    deadline_exceeded: bool = False  # its Job passed activeDeadlineSeconds: the Job controller deleted it
    pss_peak: int | None = None  # the most memory its processes were seen to hold (proportional set size), bytes
    begun: bool = False  # its start time came: the kubelet is starting its containers
    initialized: bool = False  # its init containers are through (each completed, each sidecar started)
    others: list[ContainerRun] = field(default_factory=list)  # its other containers' processes, as they started
    exited: float | None = None  # when its last main container exited (its sidecars are stopped then)
    generation: int = 0  # pods its Job created at its place before it, this attempt (`running.replace_failed`)
    index_failed: bool = False  # past its Job's backoffLimitPerIndex: its index failed for good, the others run on
    created: float | None = None  # when its controller created it (monotonic): its probes tick from then
    ready_at: float | None = None  # when it first became Ready (seconds since the attempt began)
    evicted: str | None = None  # why the kubelet's eviction manager evicted it (`eviction`): it fails, Evicted

    @property
    def rank(self) -> int | None:
        """Its (first) JAX process's rank; None for a pod that is not a JAX process."""
        return self.pod.rank

    @property
    def done(self) -> bool:
        return self.phase in ENDS

    @property
    def processes(self) -> list[PodRun | ContainerRun]:
        """Its JAX container's process and every other it started."""
        return [self, *self.others]

    def latest(self, role: str) -> list[ContainerRun]:
        """The latest process of each of its containers in `role` that has started, in the pod's order."""
        latest = {c.slot: c for c in self.others if c.container.role == role}
        return [latest[k] for k in sorted(latest)]

    @property
    def terminated(self) -> list[tuple[str, int]]:
        """(container, exit code) of each of its containers that exited non-zero: main containers (the JAX one first),
        then init containers, as the Job controller's podFailurePolicy reads the pod's status (pod_failure_policy.go
        matchOnExitCodes: ContainerStatuses, then InitContainerStatuses)."""
        mains = [(self.pod.container, self.exit_code)]
        mains += [(c.container.name, c.exit_code) for c in self.others if c.container.role == "main"]
        inits = [(c.container.name, c.exit_code) for c in self.others if c.container.role != "main"]
        return [(name, code) for name, code in mains + inits if code]

    def as_dict(self) -> dict[str, Any]:
        checks = (self.result or {}).get("checks", {})
        return {
            "name": self.pod.name,
            "hostname": self.pod.hostname,
            "rank": self.rank,
            "pid": self.pid,
            "ip": self.pod.ip,
            "phase": self.phase,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "reason": self.reason,
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
            "checks": checks,
            "checks_passed": bool(checks) and all(c["ok"] for c in checks.values()),
            "probe_timings": (self.result or {}).get("timings", {}),
            "program": (self.result or {}).get("program"),
            "processes": (self.result or {}).get("processes"),  # where the pod holds several JAX processes
            "stderr_tail": list(self.stderr_tail),
            "security": {**(self.security or self.pod.security).as_dict(), "not_applied": self.unapplied},
            "limits": {
                "memory": self.pod.memory_limit,
                "cpu_millis": self.pod.cpu_millis,
                "enforced": self.group is not None and self.group.enforced,
                "pids": self.group.pids_max if self.group is not None else None,  # the simulator's own, every pod's
                "pids_peak": self.pids_peak,
            },
            "memory_peak": self.group.peak_bytes() if self.group is not None else None,
            "memory_pss_peak": self.pss_peak,
            "containers": [c.as_dict() for c in self.others],
            "probes": self.probed,
            "ready": None if self.ready_at is None else round(self.ready_at, 3),
        }

    def cells(self) -> dict[str, str]:
        """Its row of the final table (the terminal's and the HTML report's): every value as text."""
        d = self.as_dict()
        t = d["timings"]
        checks = d["checks"]
        init = t["running"] - t["initializing"] if "running" in t and "initializing" in t else None
        total = max(t.values()) - t.get("started", 0.0) if t else None
        return {
            "pod": self.pod.hostname,
            "rank": "" if self.rank is None else str(self.rank),
            "ip": self.pod.ip,
            "phase": self.phase,
            "exit": d["signal"] or ("" if d["exit_code"] is None else str(d["exit_code"])),
            "init": "" if init is None else f"{init:.2f}",
            "total": "" if total is None else f"{total:.2f}",
            "checks": f"{sum(c['ok'] for c in checks.values())}/{len(checks)}" if checks else "",
        }


Logs = dict[int, list[tuple[str, str]]]
"""Each pod run's output, (stream, line) in order, by id() of its PodRun (kept for the HTML report)."""


@dataclass
class Attempt:
    index: int
    pods: list[PodRun]
    ok: bool = False
    reason: str | None = None
    seconds: float = 0.0
    began: float | None = None  # when it began, seconds since the simulation began (workloads run side by side)
    backoff: float = 0.0  # simulated seconds the kubelet waited before it (CrashLoopBackOff); not waited here
    memory_peak: int = 0  # the most of this machine's memory the simulation was seen to take, bytes (MemAvailable)
    machine: str | None = None  # the machine's own verdict (out of memory, processes, descriptors): not the job's
    unfinished: bool = False  # --timeout came with pods still running: on a cluster they would run on
    stopped: str | None = None  # why the simulation stopped it (another workload's machine verdict), if it did
    restart: model.Restart | None = None  # how its pods started again (the engine's decision), if they did
    replaced: list[PodRun] = field(default_factory=list)  # failed pods its Jobs replaced while the others ran on
    job_failure: tuple[str, JobFailure] | None = None  # (replicatedJob, condition) of the Job that failed, if one did
    events: list[Event] = field(default_factory=list)  # what the controllers and the kubelet recorded, in order

    @property
    def first_failure(self) -> PodRun:
        return first_failure(self.pods)


def first_failure(runs: list[PodRun]) -> PodRun:
    """Of `runs`, the pod that failed by itself (the others were ended with it; a preempted one first, since the
    others' exits follow from it), else the first failed one."""
    failed = [r for r in runs if r.phase == Phase.FAILED] or runs
    own = [r for r in failed if r.reason != ENDED_WITH_GROUP] or failed
    return next((r for r in own if r.preempted is not None), own[0])


def involved(p: PodRun | ContainerRun) -> str:
    """The pod a container's events are about."""
    return events.pod(p.pod.namespace, (p.owner if isinstance(p, ContainerRun) else p).pod.name)


def container_name(p: PodRun | ContainerRun) -> str:
    """The name of a container, for its events."""
    return p.container.name if isinstance(p, ContainerRun) else p.pod.container


Listener = Callable[
    [str, Any], None
]  # (event, payload): "phase" PodRun, "log" (PodRun, stream, line), "attempt" Attempt
