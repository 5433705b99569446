"""Run a workload's pods as real processes: fork from a parent that imported jax once, watch
them from one single-threaded loop, and do there what the kubelet and the controllers do while
pods run — a pod's containers in the kubelet's order, a JobSet's start order, a Job's waves and
its recreated pods — ending a JAX group at its first failure.

Each container's process is its shim (`shim`: the parent of PID 1 of the container's PID namespace,
signalled as a container runtime signals it), with a control pipe to ask the shim for signals, a
status pipe (phase changes, the probe's result) and log pipes (prefixed by the reporter).
"""

from __future__ import annotations

import errno
import json
import os
import selectors
import signal
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxinfra import interrupts
from jaxinfra_sim import capacity, container, eviction, fds, image, model, paths, prober, runtime, sandbox, shim
from jaxinfra_sim.cgroups import PodGroup
from jaxinfra_sim.container import Credentials, coordinator_port, init_timeout
from jaxinfra_sim.controllers import job_failure
from jaxinfra_sim.controllers.job_failure import Failures, JobFailure
from jaxinfra_sim.node import Node
from jaxinfra_sim.options import Faults, Options
from jaxinfra_sim.printable import printable

#: Why a pod that did not fail itself was stopped: the group ended at another pod's failure.
ENDED_WITH_GROUP = "ended with its group"
#: The longest the other pods wait for a started rank 0 to listen before starting anyway.
COORDINATOR_HOLD_S = 2.0
#: How long the kubelet waits before it starts a native sidecar that exited again (its CrashLoopBackOff begins at
#: 10 s, pkg/kubelet/kubelet.go backOffPeriod; shorter here, and not recorded: a sidecar's restarts fail nothing).
SIDECAR_RESTART_S = 1.0
#: How long past its init timeout a pod may still be initializing before the group is ended.
INIT_GRACE_S = 1.0


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
        """Ask its shim to send `signum` to its container (`shim.request`); nothing once its shim is reaped."""
        if self.control is not None:
            self.killed = self.killed or signum == signal.SIGKILL
            shim.request(self.control, signum)


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
    phase: str = "pending"  # pending -> initializing -> running -> succeeded | failed
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
    generation: int = 0  # how many pods its Job created at its place before it, in this attempt (`_replace_failed`)
    index_failed: bool = False  # past its Job's backoffLimitPerIndex: its index failed for good, the others run on
    created: float | None = None  # when its controller created it (monotonic): its probes tick from then
    ready_at: float | None = None  # when it first became Ready (seconds since the attempt began)
    evicted: str | None = None  # why the kubelet's eviction manager evicted it (`eviction`): it fails, Evicted

    @property
    def done(self) -> bool:
        return self.phase in ("succeeded", "failed", "deleted")

    @property
    def processes(self) -> list[PodRun | ContainerRun]:
        """Its JAX container's process and every other it started."""
        return [self, *self.others]

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
            "rank": self.pod.global_index,
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
            "stderr_tail": list(self.stderr_tail),
            "security": {**self.pod.security.as_dict(), "not_applied": self.unapplied},
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
            "rank": str(self.pod.global_index),
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
    backoff: float = 0.0  # simulated seconds the kubelet waited before it (CrashLoopBackOff); not waited here
    memory_peak: int = 0  # the most of this machine's memory the simulation was seen to take, bytes (MemAvailable)
    machine: str | None = None  # the machine's own verdict (out of memory, processes, descriptors): not the job's
    unfinished: bool = False  # --timeout came with pods still running: on a cluster they would run on
    restart: model.Restart | None = None  # how its pods started again (the engine's decision), if they did
    replaced: list[PodRun] = field(default_factory=list)  # failed pods its Jobs replaced while the others ran on
    job_failure: tuple[str, JobFailure] | None = None  # (replicatedJob, condition) of the Job that failed, if one did

    @property
    def first_failure(self) -> PodRun:
        return first_failure(self.pods)


JAX_ENV = frozenset({"JAX_COORDINATOR_ADDRESS", "COORDINATOR_ADDRESS", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES"})
"""Env that gives JAX processes a group: a pod with any of it is a JAX process (contract.py reads the same)."""


def _loaded_jax(shim: int) -> bool:
    """Whether a process of the container whose shim is `shim` has jaxlib mapped (it imported jax): the container's
    processes are the shim's descendants (/proc/PID/task/PID/children, their maps readable to their user namespace's
    owner). False where they cannot be read."""
    todo, seen = [shim], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            if pid != shim and "jaxlib" in Path(f"/proc/{pid}/maps").read_text():
                return True
            todo += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        except (OSError, ValueError):
            continue
    return False


def first_failure(runs: list[PodRun]) -> PodRun:
    """Of `runs`, the pod that failed by itself (the others were ended with it; a preempted one first, since the
    others' exits follow from it), else the first failed one."""
    failed = [r for r in runs if r.phase == "failed"] or runs
    own = [r for r in failed if r.reason != ENDED_WITH_GROUP] or failed
    return next((r for r in own if r.preempted is not None), own[0])


Listener = Callable[
    [str, Any], None
]  # (event, payload): "phase" PodRun, "log" (PodRun, stream, line), "attempt" Attempt


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


class Runner:
    """Runs one attempt of a workload: every pod at once, the group ended at the first failure."""

    def __init__(
        self,
        workload: model.Workload,
        options: Options,
        workdir: Path,
        listener: Listener,
        deadline: float,
        isolation: str,
        records: Mapping[str, str],
        credentials: Credentials | None = None,
        storage: Callable[[model.Mount], Path] | None = None,
        node: Node | None = None,
        job_deadlines: Mapping[int, float] | None = None,
        failures: Failures | None = None,
        respawn: Callable[[int], model.Pod] | None = None,
    ):
        """`isolation`: the sandbox strategy that works here (`sandbox.preflight`); `records`: the cluster's
        DNS names (name -> ip) that every pod's /etc/hosts holds; `credentials`: for pods that mount a token;
        `job_deadlines`: when each pod's Job passes its activeDeadlineSeconds (monotonic, by the pod's global index)."""
        self.workload = workload
        self.job_deadlines = job_deadlines or {}
        self.failures = failures if failures is not None else {}
        self.respawn = respawn
        self.jax_group: bool | None = None  # decided at the first failure (`_one_group`)
        self.isolation = isolation
        self.records = records
        self.credentials = credentials
        self.node = node
        self.storage = storage or (lambda mount: workdir / "storage" / mount.kind / paths.safe_name(mount.key))
        self.options = options
        self.workdir = workdir
        self.listener = listener
        self.deadline = deadline
        self.selector = selectors.DefaultSelector()
        self.sitecustomize = image.sitecustomize_dir(workdir / "_site") if options.run_command else None
        self.runtime = runtime.create(workdir / "runc") if options.run_command else None
        self.listening = False
        self.controls: set[int] = set()  # every live shim's control pipe: no other pod may hold one open
        self.answers: set[int] = set()  # as root, the ends that tell pods their id maps are written: nor these
        self.gates: dict[int, list[model.Gate]] = {}  # by pod position: what its creation waits for
        for gate in workload.gates:
            for i in gate.pods:
                self.gates.setdefault(i, []).append(gate)
        self.waves = {i: wave for wave in workload.waves for i in wave[0]}  # by pod position: its Job's, if any

    def run(self, index: int) -> Attempt:
        # Faults are transient: injected into the first attempt, so a restart shows recovery.
        self.faults = faults = self.options.faults if index == 0 else Faults()
        self.attempt_index = index
        runs = [PodRun(p) for p in self.workload.pods]
        attempt = Attempt(index, runs)
        self.t0 = t0 = time.monotonic()
        starts = {id(r): t0 + (faults.lookup(faults.delay, r.pod) or 0.0) for r in runs}
        # Timed signals per pod: (seconds after its JAX container starts, signal, to every container of the pod or
        # to that one); a preemption (the pod deleted) signals them all, its SIGKILL after its SIGTERM.
        timed = {
            id(r): [(t, signal.SIGKILL, False) for t in [faults.lookup(faults.kill, r.pod)] if t is not None]
            + [(t, signal.SIGTERM, True) for t in [faults.lookup(faults.preempt, r.pod)] if t is not None]
            for r in runs
        }
        self.oom_baseline, self.memory = capacity.oom_kills(), MemorySampler(runs)
        self.oom_seen, self.oom_next = self.oom_baseline, 0.0
        self.storage_next = 0.0
        self.storage_limits: dict[int, eviction.Limits] = {}  # by id() of the PodRun
        self.machine: str | None = None
        network = self.node.network if self.node is not None else None
        self.prober = prober.Prober(network.join if network is not None else None, self.runtime)
        self.stops: list[tuple[float, prober.Target]] = []  # containers a failed probe stopped: when each gets SIGKILL
        try:
            while True:
                interrupts.check()  # a Ctrl-C whose KeyboardInterrupt a callback swallowed
                now = time.monotonic()
                coordinator = runs[0]  # (a replaced pod takes its place)
                wake = [s for r, s in zip(runs, starts.values()) if not r.begun and s > now]
                for r in runs:
                    if not r.begun:
                        r.begun = now >= starts[id(r)] and self._waiting(r, runs) is None and self._slot(r, runs)
                        r.created = now if r.begun else None
                    if r.begun and (r.others or not r.initialized) and not r.done and self.machine is None:
                        self._kubelet(r, runs, now - t0, wake)
                due = [r for r in runs if r.initialized and r.pid is None and r.phase == "pending" and not r.evicted]
                if coordinator in due:
                    self._start_or_stop(coordinator, coordinator, runs)
                hold = self._coordinator_warming(coordinator, now)
                for r in due:
                    if r is not coordinator and not hold and self.machine is None:
                        self._start_or_stop(r, r, runs)
                for r in runs:
                    if r.pid is None or r.reaped:
                        continue
                    for entry in list(timed[id(r)]):
                        after, signum, whole = entry
                        at = t0 + r.timings["started"] + after
                        if now < at:
                            wake.append(at)
                            continue
                        timed[id(r)].remove(entry)
                        for p in r.processes if whole else [r]:
                            p.request(signum)
                        if signum == signal.SIGTERM:  # a node drain or a Spot reclaim: the kubelet's graceful stop
                            r.preempted, r.deaf = now - t0, shim.unhandled(r.pid, signum)
                            timed[id(r)].append(
                                (r.preempted - r.timings["started"] + self._grace(r), signal.SIGKILL, True)
                            )
                self._reap(runs)
                self._probes(runs, now, wake)
                self.memory.sample(now)
                self._oom_watch(runs, now)
                self._storage_watch(runs, now)
                if self.machine is not None:
                    attempt.reason = attempt.machine = self.machine
                    break
                if any(r.phase == "failed" for r in runs) and not self._replace_failed(runs, attempt, starts, timed):
                    break
                if self._complete(runs):
                    attempt.ok = True
                    break
                if self._past_deadline(runs, now):
                    attempt.reason = next(r.reason for r in runs if r.deadline_exceeded)
                    break
                if now >= self.deadline:  # not the job's failure: on a cluster its pods would run on
                    waiting = [r.pod.hostname for r in runs if not r.done]
                    phases = sorted({r.phase for r in runs if not r.done})
                    attempt.unfinished = True
                    gated = {g.rule for r in runs if not r.begun and (g := self._waiting(r, runs)) is not None}
                    attempt.reason = (
                        f"--timeout reached with pods still {', '.join(phases)}: {', '.join(waiting[:8])}"
                        + (f" (not created yet, waiting for {'; '.join(sorted(gated))})" if gated else "")
                    )
                    break
                stuck = self._stuck(runs, now)
                if stuck is not None:
                    attempt.reason = stuck
                    break
                timeout = min([w - now for w in wake] + [0.01 if hold else 0.2])
                for key, _ in self.selector.select(max(timeout, 0.0)):
                    self._read(key.data, key.fd)
        finally:
            self.prober.close()
            self._end(runs)
        if not attempt.ok and attempt.reason is None:  # told once every pod has ended (a preempted one may end last)
            failed = attempt.first_failure
            attempt.reason = f"{failed.pod.hostname}: {failed.reason}"
        attempt.seconds = time.monotonic() - t0
        attempt.memory_peak = self.memory.peak
        return attempt

    def _past_deadline(self, runs: list[PodRun], now: float) -> bool:
        """Whether a Job with pods still running passed its activeDeadlineSeconds: the Job controller then deletes its
        active pods (gracefully, `_end`) and fails it (job_controller.go pastActiveDeadline, DeadlineExceeded)."""
        past = [r for r in runs if not r.done and now >= self.job_deadlines.get(r.pod.global_index, float("inf"))]
        for r in past:
            r.reason, r.deadline_exceeded = (
                "DeadlineExceeded: its Job was active longer than activeDeadlineSeconds",
                True,
            )
        return bool(past)

    def _complete(self, runs: list[PodRun]) -> bool:
        """Every pod succeeded, or the workload's success rule is met: then its controller deletes the pods still
        running (jobset_controller.go Reconcile: a finished JobSet deletes its active Jobs), stopped as a deleted
        pod is, SIGTERM and its grace period (`_end`)."""
        succeeded = [r.phase == "succeeded" for r in runs]
        if all(succeeded):
            return True
        rule = next((s for s in self.workload.success if s.met(succeeded)), None)
        if rule is None:
            return False
        for r in runs:
            if not r.done:
                r.reason, r.deleted = f"deleted: {self.workload.id} completed ({rule.rule})", True
        return True

    def _coordinator_warming(self, coordinator: PodRun, now: float) -> bool:
        """Hold the other pods (at most COORDINATOR_HOLD_S) while rank 0 has started but does not
        listen yet: a JAX client that connects too early backs off for about a second. Verdicts
        do not change; a delayed or dead coordinator holds nobody."""
        if self.listening or self.options.run_command or coordinator.pid is None or coordinator.done:
            return False
        if now - self.t0 - coordinator.timings.get("started", 0.0) > COORDINATOR_HOLD_S:
            return False
        port = coordinator_port(coordinator.pod)
        if port is None:
            return False
        self.listening = (self.node or Node()).connect(coordinator.pod.ip, port)
        return not self.listening

    def _kubelet(self, r: PodRun, runs: list[PodRun], t: float, wake: list[float]) -> None:
        """What the kubelet does for a begun pod besides starting its main containers (`_start_or_stop`), `t` seconds
        into the attempt: its init containers in order, each to completion before the next, a native sidecar only to
        its start; a sidecar that exits while the pod runs is started again (kubernetes/kubernetes @ 5c68f560
        pkg/kubelet/kuberuntime/kuberuntime_container.go computeInitContainerActions); once every main container has
        exited, the sidecars are stopped, the last one first, each once the later ones have exited, SIGKILL at the end
        of the pod's grace period (kuberuntime_termination_order.go newTerminationOrdering). Under the probe only the
        JAX container runs (`_others`). An evicted pod starts nothing more (`_evict` stops what runs)."""
        if r.evicted is not None:
            self._settle(r)
            return
        if r.exited is None:
            self._restart_sidecars(r, runs, wake)
        if not r.initialized:
            r.initialized = self._init_step(r, runs)
            return
        if r.exited is None:
            return
        live = [c for c in self._latest(r, "sidecar") if c.live]
        if not live:
            self._settle(r)
            return
        if live[-1].stopping is None:
            live[-1].stopping = t
            live[-1].request(signal.SIGTERM)
        kill = r.exited + self._grace(r)
        if t >= kill:
            for c in live:
                c.request(signal.SIGKILL)
        else:
            wake.append(self.t0 + kill)

    def _restart_sidecars(self, r: PodRun, runs: list[PodRun], wake: list[float]) -> None:
        """Start again each sidecar that exited (or that a probe's failure stopped) while the pod runs."""
        for c in self._latest(r, "sidecar"):
            if c.reaped and c.ended is not None:
                due = self.t0 + c.ended + SIDECAR_RESTART_S
                if time.monotonic() < due:
                    wake.append(due)
                else:
                    self._start_or_stop(self._container(r, c.container, c.slot, c.restarts + 1), r, runs)

    def _replace_failed(
        self, runs: list[PodRun], attempt: Attempt, starts: dict[int, float], timed: dict[int, list[Any]]
    ) -> bool:
        """The Job controller, for pods that are not one JAX group: each failed pod counts against its own Job
        (controllers/job_failure.py) while the others run on; within the Job's limits it is recreated (restartPolicy
        Never: a new pod at its index, with a new name, its address, fresh emptyDirs) and True is returned; an index
        past backoffLimitPerIndex fails for good while the others run on; a Job past its limits fails
        (`attempt.job_failure`; False: the attempt ends, its other pods are deleted). A JAX group ends at its first
        failure instead (False), as its processes would once the coordinator noticed; so does a pod whose container
        restarts in place (OnFailure: the engine restarts the group in place, its back-off recorded), and a Job with
        no limit (the engine's crash-loop rule ends its loop)."""
        if self.respawn is None:
            return False
        if self.jax_group is None:
            self.jax_group = self._one_group(runs)
        if self.jax_group:
            return False
        for i, r in enumerate(runs):
            if r.phase != "failed" or r.index_failed:
                continue
            key = job_failure.job_of(r.pod)
            policy = self.workload.restart.job(key[0])
            if policy.in_place or policy.backoff_limit is None and policy.backoff_limit_per_index is None:
                return False  # the engine restarts it in place (its back-off recorded), or ends its loop
            failed = job_failure.job_failed(policy, [r], r, self.failures.setdefault(key, {}))
            if failed is not None and failed.reason == "FailedIndexes" and policy.backoff_limit_per_index is not None:
                r.index_failed = True  # for good; the Job's other indexes run on (job_controller.go: failedIndexes)
                continue
            if failed is not None:
                attempt.job_failure = (key[0], failed)
                return False
            self._end([r])  # what is left of it (its sidecars)
            new = PodRun(self.respawn(i), generation=r.generation + 1)
            attempt.replaced.append(r)
            runs[i] = new
            starts[id(new)], timed[id(new)] = time.monotonic(), []
        for key in dict.fromkeys(job_failure.job_of(r.pod) for r in runs if r.index_failed):
            policy = self.workload.restart.job(key[0])
            mine = [r for r in runs if job_failure.job_of(r.pod) == key]
            lost, limit = sum(r.index_failed for r in mine), policy.max_failed_indexes
            if (limit is not None and lost > limit) or all(r.index_failed or r.phase == "succeeded" for r in mine):
                # job_controller.go: past maxFailedIndexes at once, else once no index is left running
                gone = [r.pod.completion_index for r in mine if r.index_failed]
                attempt.job_failure = (key[0], job_failure.failed_indexes(policy, lost, gone))
                return False
        return True

    def _one_group(self, runs: list[PodRun]) -> bool:
        """Whether the workload's pods are one JAX group, whose processes all fail once one of them has: always under
        the probe; under --run-command, where the env gives JAX a coordinator (a JAX env contract, GKE's TPU env) or
        some pod's process has loaded jaxlib (a program with a bare `jax.distributed.initialize()`)."""
        if not self.options.run_command:
            return True
        if any(r.pod.accelerator == "tpu" or JAX_ENV & r.pod.env.keys() for r in runs):
            return True
        return any(_loaded_jax(p.pid) for r in runs for p in r.processes if p.live and p.pid is not None)

    def _slot(self, r: PodRun, runs: list[PodRun]) -> bool:
        """Whether its Job's parallelism lets the controller create the pod now: fewer of the Job's pods active than
        its parallelism, counting those before it first (job_controller.go manageJob: the lowest missing indexes)."""
        wave = self.waves.get(r.pod.global_index)
        if wave is None:
            return True
        positions, parallelism = wave
        before = [runs[i] for i in positions if i < r.pod.global_index]
        active = sum(p.begun and not p.done for p in (runs[i] for i in positions))
        return active < parallelism and all(p.begun for p in before)

    def _waiting(self, r: PodRun, runs: list[PodRun]) -> model.Gate | None:
        """What keeps the pod's controller from creating it yet (`model.Gate`), or None."""
        for gate in self.gates.get(r.pod.global_index, ()):
            pods = [[runs[i] for i in job] for job in gate.jobs]
            if gate.status == "Complete" and not all(p.phase == "succeeded" for job in pods for p in job):
                return gate
            if gate.status == "Ready" and not all(
                any(p.phase == "failed" for p in job) or all(p.phase == "succeeded" or self._ready(p) for p in job)
                for job in pods
            ):
                return gate
        return None

    def _ready(self, r: PodRun) -> bool:
        """The pod's Ready condition: initialized, and every main container and sidecar ready — running, started
        (its startup probe passed) and its readiness probe passing, where it has those (kubelet
        pkg/kubelet/status/generate.go GeneratePodReadyCondition, `prober`)."""
        latest: list[PodRun | ContainerRun] = [r, *(c for role in ("main", "sidecar") for c in self._latest(r, role))]
        return r.initialized and all(self.prober.ready(p) for p in latest)

    def _probes(self, runs: list[PodRun], now: float, wake: list[float]) -> None:
        """The kubelet's prober (`prober`): a container whose liveness or startup probe failed is stopped, its stop
        signal then SIGKILL after the probe's terminationGracePeriodSeconds (else the pod's), and restarted as its
        pod's restartPolicy says (kuberuntime_manager.go computePodActions); each pod's first Ready is recorded."""
        for w in self.prober.poll(now, wake):
            grace = w.probe.grace_period if w.probe.grace_period is not None else w.target.pod.grace_period
            w.target.request(signal.SIGTERM)
            self.stops.append((now + min(grace, self.options.grace_cap), w.target))
        for entry in list(self.stops):
            at, p = entry
            if p.reaped or now >= at:
                self.stops.remove(entry)
                if not p.reaped:
                    p.request(signal.SIGKILL)
            else:
                wake.append(at)
        for r in runs:
            if r.ready_at is None and r.begun and not r.done and self._ready(r):
                r.ready_at = now - self.t0

    def _others(self, r: PodRun) -> tuple[model.Container, ...]:
        """The pod's containers besides the JAX one that run here: all of them under --run-command; none under the
        probe, which stands in for the pod's program alone."""
        return r.pod.others if self.options.run_command else ()

    def _latest(self, r: PodRun, role: str) -> list[ContainerRun]:
        """The latest process of each of the pod's containers in `role` that has started, in the pod's order."""
        latest = {c.slot: c for c in r.others if c.container.role == role}
        return [latest[k] for k in sorted(latest)]

    def _container(self, r: PodRun, c: model.Container, slot: int, restarts: int = 0) -> ContainerRun:
        run = ContainerRun(container=c, pod=r.pod.as_container(c), slot=slot, owner=r, restarts=restarts)
        r.others.append(run)
        return run

    def _init_step(self, r: PodRun, runs: list[PodRun]) -> bool:
        """Start the pod's next init container once the one before is through — an init container completed, a
        sidecar started (running, its startup probe passed: kuberuntime_container.go computeInitContainerActions) —
        True once all are. One that completed in an earlier attempt of the same pod (its container restarted in
        place) does not run again: the kubelet reruns init containers only for a new pod sandbox. One that fails
        fails the pod (`_settle`)."""
        started = {c.slot: c for c in r.others}
        for slot, c in enumerate(self._others(r), 1):
            if c.role == "main":
                continue
            done = self._pod_dir(r) / f"init-{slot}.done"  # by its place, not its name: no manifest string is a path
            if c.role == "init" and done.exists():
                continue
            run = started.get(slot)
            if run is None:
                run = self._container(r, c, slot)
                self._start_or_stop(run, r, runs)
                if c.role == "init" or self.machine is not None:
                    return False
            if c.role == "sidecar" and not self.prober.started(run):
                return False
            if c.role == "init":
                if not run.reaped:
                    return False
                if run.exit_code != 0:
                    self._settle(r)
                    return False
                done.touch()
        return True

    def _pod_dir(self, r: PodRun) -> Path:
        """The pod's folder, by its index: nothing the manifest says (its name) is a host path."""
        return self.workdir / f"pod-{r.pod.global_index}" / str(r.generation)

    def _start_or_stop(self, p: PodRun | ContainerRun, r: PodRun, runs: list[PodRun]) -> None:
        """Start a container of pod `r` (its JAX container, then its other main containers with it); where this
        machine refuses a process or a descriptor for it, that is the simulation's end (the machine's verdict), not
        the pod's failure."""
        try:
            self._start(p)
        except OSError as err:
            if err.errno not in RAN_OUT_OF:
                raise
            started = sum(p.pid is not None for p in runs)
            self.machine = (
                f"this machine ran out of {RAN_OUT_OF[err.errno]} starting pod {r.pod.hostname} ({started} of "
                f"{len(runs)} pods running: {os.strerror(err.errno)}); fix: simulate fewer pods here, or "
                f"{capacity.AT_SCALE}"
            )
            r.phase, r.reason = "failed", f"not started: {self.machine}"
            self.listener("phase", r)
            return
        if p is r:
            for slot, c in enumerate(self._others(r), 1):
                if c.role == "main" and self.machine is None:
                    self._start_or_stop(self._container(r, c, slot), r, runs)

    def _start(self, p: PodRun | ContainerRun) -> None:
        own = isinstance(p, PodRun)
        r, slot = (p, 0) if isinstance(p, PodRun) else (p.owner, p.slot)
        c = container.prepare(
            p.pod,
            self._pod_dir(r),
            self.records,
            self.options,
            self.faults if own else Faults(),
            self.sitecustomize,
            self.credentials,
            self.storage,
            sandbox_name=f"sandbox-{slot}" if slot else "sandbox",
            own_command=self.options.run_command or not own,
            oci=self.runtime,
        )
        p.cwd, p.env, p.name = c.cwd, c.env, c.name
        p.group = self.node.cgroup(p.pod, self.attempt_index, slot) if self.node is not None else None
        p.unapplied = sandbox.unapplied(self.isolation, p.pod.security, c.runtime is not None)
        network = self.node.network if self.node else None
        joins = [j for j in (p.group.enter if p.group else None, network.join if network else None) if j]
        privileged = self.isolation == "privileged"  # root maps all ids: over a handshake of two more pipes
        ends = fds.pipes(6 if privileged else 4)
        control_r, control_w, status_r, status_w, out_r, out_w, err_r, err_w = ends[:8]
        mine, theirs = sandbox.Handshake.pair(*ends[8:]) if privileged else (None, None)
        with interrupts.held():
            try:
                pid = os.fork()
            except OSError:  # this machine's limit (`_start_or_stop`): nothing of this pod stays open
                fds.close(ends)
                raise
            if pid == 0:
                others = [
                    *(key.fd for key in self.selector.get_map().values()),
                    *self.controls,
                    *self.answers,
                    control_w,
                    *([theirs.ask, theirs.done] if theirs else []),
                ]
                container.become(
                    c,
                    self.isolation,
                    control_r,
                    status_w,
                    out_w,
                    err_w,
                    others,
                    self.options,
                    self.workload,
                    mine,
                    joins,
                    network.subordinate if network is not None else None,
                    p.group.adopt if p.group else None,
                    self.node.nproc if self.node is not None else None,
                )
            for fd in (control_r, status_w, out_w, err_w):
                os.close(fd)
            if mine is not None:
                mine.close()
            p.pid, p.control, p.handshake = pid, control_w, theirs
            self.controls.add(control_w)
            for fd, stream in ((status_r, "status"), (out_r, "stdout"), (err_r, "stderr")):
                self._watch(p, fd, stream)
            if theirs is not None:  # answered once it asks (`_read`): the next pods fork meanwhile
                self.answers.add(theirs.done)
                self._watch(p, theirs.ask, "grant")
            self._watch(p, os.pidfd_open(pid), "exit")  # a full table raises here: `_end` closes what p.fds holds
        if isinstance(p, PodRun):
            self._phase(p, "started", quiet=True)
        else:
            p.started = time.monotonic() - self.t0
        if self.options.run_command:
            now = time.monotonic()
            self.prober.watch(p, r.created or now, now)

    def _close_handshake(self, p: Process) -> None:
        if p.handshake is not None:
            if p.handshake.ask in p.fds:
                self.selector.unregister(p.handshake.ask)
                del p.fds[p.handshake.ask]
            self.answers.discard(p.handshake.done)
            p.handshake.close()
            p.handshake = None

    def _watch(self, p: Process, fd: int, stream: str) -> None:
        p.fds[fd] = stream
        os.set_blocking(fd, False)
        self.selector.register(fd, selectors.EVENT_READ, p)

    def _phase(self, r: PodRun, phase: str, quiet: bool = False) -> None:
        r.timings[phase] = time.monotonic() - self.t0
        if not quiet:
            r.phase = phase
            self.listener("phase", r)

    def _read(self, p: Process, fd: int) -> bool:
        """Consume what the pipe holds now; False once it has nothing more (drained or at EOF)."""
        stream = p.fds[fd]
        if stream == "exit":  # its shim's pidfd, readable once the shim has exited: the loop reaps it next
            return False
        if stream == "grant":  # its user namespace is made: root writes its id maps (or it died first)
            if p.pid is not None and p.handshake is not None:
                sandbox.answer(p.pid, p.handshake)
            self._close_handshake(p)
            return False
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return False
        if not data:
            self.selector.unregister(fd)
            os.close(fd)
            del p.fds[fd]
            rest = p.buffers.pop(fd, b"")
            if rest:
                self._line(p, stream, rest)
            return False
        p.logged += len(data) if stream in ("stdout", "stderr") else 0
        buf = p.buffers.get(fd, b"") + data
        *lines, buf = buf.split(b"\n")
        p.buffers[fd] = buf
        for line in lines:
            self._line(p, stream, line)
        return True

    def _line(self, p: Process, stream: str, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace")
        if stream != "status":
            text = printable(text)  # what the pod wrote steers no terminal, here or where its report is read
            if stream == "stderr" and text.strip():
                p.stderr_tail.append(text.strip())
            if isinstance(p, ContainerRun):  # as `kubectl logs --all-containers --prefix` tells them apart
                self.listener("log", (p.owner, stream, f"[{p.container.name}] {text}"))
            else:
                self.listener("log", (p, stream, text))
            return
        msg = json.loads(text)
        phase = msg.pop("phase")
        p.running = p.running or phase == "running"
        if not isinstance(p, PodRun):  # the probe's phases and result: the JAX container's alone
            return
        if phase == "result":
            p.result = msg["result"]
        elif not p.done:
            self._phase(p, phase)

    def _reap(self, runs: list[PodRun]) -> None:
        for r in runs:
            reaped = False
            for p in r.processes if r.others else (r,):
                if p.pid is None or p.reaped:
                    continue
                pid, status = os.waitpid(p.pid, os.WNOHANG)
                if pid == 0:
                    continue
                reaped = True
                self._exited(p, status)
                self._oom_group(p)
                p.reason = self._why(p, runs)
                if isinstance(p, ContainerRun):
                    p.ended = time.monotonic() - self.t0
                elif r.preempted is not None:  # deleted by the drain, whatever its container said
                    r.reason = self._preemption(r)
            if reaped:
                self._settle(r)

    def _why(self, p: PodRun | ContainerRun, runs: list[PodRun]) -> str | None:
        """How a reaped container ended, for its reason (None: it exited 0, unless a probe's failure stopped it)."""
        how = self._how(p, runs)
        if p.probe_failed is not None:
            return f"{p.probe_failed}, so the kubelet stopped it: {how or 'exit code 0'}"
        return how

    def _out_of_memory(self, p: Process, runs: list[PodRun]) -> str:
        """The machine's verdict (once: the first OOM kill tells it), and the container's reason: the kernel's OOM
        killer ended a process of it, for this machine's memory, not its own limit."""
        if self.machine is None:
            live = sum(any(q.live for q in r.processes) for r in runs) + 1
            self.machine = (
                f"this machine ran out of memory ({self.memory.in_use() / capacity.GIB:.1f} GiB in use by {live} "
                f"pods; {self.memory.limit.left / capacity.GIB:.1f} GiB was free at the start: "
                f"{self.memory.limit.source}): the kernel's OOM killer ended a pod's process; fix: fewer devices "
                f"per process or fewer processes here, or {capacity.AT_SCALE}"
            )
        which = "killed" if p.signal == "SIGKILL" and not p.killed else "a process in it was killed"
        return f"{which} by the kernel's OOM killer: this machine ran out of memory (not its own limit)"

    def _oom_watch(self, runs: list[PodRun], now: float) -> None:
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
        and `_reap` records a container that exited first as the kernel would have ended it (`_oom_group`)."""
        if now < self.oom_next:
            return
        self.oom_next, count = now + MEMORY_EVERY_S, capacity.oom_kills()
        if count == self.oom_seen:
            return
        self.oom_seen = count
        for r in runs:
            for p in r.processes:
                if p.live and p.group is not None and p.group.machine_oom_killed():
                    p.reason = self._out_of_memory(p, runs)
                    if isinstance(p, ContainerRun) and not r.done:
                        r.reason = f"container {p.container.name}: {p.reason}"
                elif p.live and p.group is not None and not p.oom_group and p.group.oom_killed():
                    p.oom_group = True
                    p.request(signal.SIGKILL)

    def _oom_group(self, p: Process) -> None:
        """A reaped container of which its own memory limit's OOM killer ended a process: on a node the kernel ends
        the whole group at once (memory.oom.group, `_oom_watch`), so it ended by SIGKILL, exit 137, even where its
        PID 1 exited first here (cgroup v1: a shell that went on to `exit 0` before the watch saw the kill)."""
        if p.signal is None and p.group is not None and p.group.oom_killed():
            p.oom_group = True
            p.signal, p.exit_code = signal.Signals.SIGKILL.name, 128 + signal.SIGKILL

    def _storage_watch(self, runs: list[PodRun], now: float) -> None:
        """The kubelet's local storage eviction (`eviction`), every `eviction.STORAGE_EVERY_S`: each running pod with
        an emptyDir sizeLimit or an ephemeral-storage limit is measured (its emptyDirs, each container's writable
        layer and logs) and, past a limit, evicted (`_evict`)."""
        if now < self.storage_next:
            return
        self.storage_next = now + eviction.STORAGE_EVERY_S
        for r in runs:
            if r.done or r.evicted is not None or not any(p.live for p in r.processes):
                continue
            found = self.storage_limits.get(id(r))
            if found is None:
                found = self.storage_limits[id(r)] = eviction.limits(r.pod)
            if not found.any:
                continue
            volumes = self._pod_dir(r) / "volumes"
            dirs = {v: eviction.usage(volumes / paths.safe_name(v)) for v, _, _ in found.empty_dirs}
            disk = sum(dirs[v] for v, _, on_disk in found.empty_dirs if on_disk)
            used: dict[str, int] = {}
            if found.pod is not None:  # the containers' own: their logs and their writable layers
                for p in r.processes:
                    name = p.container.name if isinstance(p, ContainerRun) else r.pod.container
                    layer = self._layer(r, p) if p.live and p.running else 0
                    used[name] = used.get(name, 0) + min(p.logged, eviction.LOG_MAX_BYTES) + layer
            why = eviction.verdict(found, dirs, used, disk)
            if why is not None:
                self._evict(r, why, now)

    def _layer(self, r: PodRun, p: Process) -> int:
        """The bytes a running container has written to its root filesystem (`eviction.writable_layer`)."""
        scratch = self._pod_dir(r) / (f"sandbox-{p.slot}" if isinstance(p, ContainerRun) else "sandbox")
        return eviction.writable_layer(p.pid or 0, scratch.resolve())

    def _evict(self, r: PodRun, why: str, now: float) -> None:
        """Evict a pod as the kubelet's eviction manager does: each running container gets its stop signal, then
        SIGKILL after `eviction.EVICTION_GRACE_S` (capped by --grace-cap), whatever the pod's own grace period; the
        pod fails with reason Evicted once they have all ended (`_settle`)."""
        r.evicted = why
        grace = min(eviction.EVICTION_GRACE_S, self.options.grace_cap)
        for p in r.processes:
            if p.live:
                p.request(signal.SIGTERM)
                self.stops.append((now + grace, p))

    def _how(self, p: PodRun | ContainerRun, runs: list[PodRun]) -> str | None:
        if p.group is not None and p.group.oom_killed():
            return oom_reason(p.pod, p.group.peak_bytes())
        if p.group is not None and p.group.machine_oom_killed():  # any process of it, whatever survived
            return self._out_of_memory(p, runs)
        if p.signal == "SIGKILL" and not p.killed and capacity.oom_kills() > self.oom_baseline:
            return self._out_of_memory(p, runs)  # no group to tell whose: its own process's SIGKILL
        if p.signal == "SIGKILL" and not p.killed:
            return (
                "killed by a SIGKILL that neither the simulator, its memory limit nor the machine's OOM killer "
                "sent (another process on this machine)"
            )
        if p.signal is not None:
            return f"killed by {p.signal}"
        if p.exit_code != 0:
            checks = ((p.result or {}).get("checks") or {}) if isinstance(p, PodRun) else {}
            failed = [k for k, c in checks.items() if not c["ok"]]
            return f"exit code {p.exit_code}" + (f"; failed checks: {', '.join(failed)}" if failed else "")
        return None

    def _settle(self, r: PodRun) -> None:
        """The pod's phase, once its containers decide it (pkg/kubelet/kubelet_pods.go getPhase): Failed as soon as
        an init container fails; else once every main container has exited and its sidecars have stopped, Succeeded
        if all the main containers exited 0, else Failed; a sidecar's own exit code never counts. Under restartPolicy
        OnFailure (or Always) the kubelet restarts a failed container in place at once: the pod counts as failed here
        already, and the engine restarts it in place (its whole group, with a JAX group's peers)."""
        if r.done:
            return
        if r.evicted is not None:  # Failed once its containers have ended, whatever their exit codes
            if not any(p.live for p in r.processes):
                r.reason = f"{eviction.REASON}: {r.evicted}"
                self._phase(r, "failed")
            return
        failed_init = next((c for c in r.others if c.container.role == "init" and c.reaped and c.exit_code), None)
        if failed_init is not None:
            r.reason = f"init container {failed_init.container.name}: {failed_init.reason}"
            self._phase(r, "failed")
            return
        mains: list[Process] = [r, *(c for c in r.others if c.container.role == "main")]
        restarts = r.pod.restart_policy != "Never"  # a container a probe stopped restarts, however it exited
        failed = next(
            (
                m
                for m in mains
                if m.reaped and (m.exit_code or m.probe_failed and restarts or m is r and r.preempted is not None)
            ),
            None,
        )
        if restarts and failed is not None and r.exited is None:
            self._failed(r, failed)
            return
        if not all(m.reaped for m in mains):
            return
        if r.exited is None:
            r.exited = time.monotonic() - self.t0
        if any(c.live for c in r.others):  # its sidecars: `_kubelet` stops them
            return
        if failed is None:
            self._phase(r, "succeeded")
        else:
            self._failed(r, failed)

    def _failed(self, r: PodRun, failed: Process) -> None:
        if isinstance(failed, ContainerRun):
            r.reason = f"container {failed.container.name}: {failed.reason}"
        self._phase(r, "failed")

    def _preemption(self, r: PodRun) -> str:
        """How a preempted pod ended, for its reason."""
        ended = time.monotonic() - self.t0 - (r.preempted or 0.0)
        how = f"exited {r.exit_code}" if r.signal is None else f"killed by {r.signal}"
        allowed = self._grace(r)
        grace = f"grace period {allowed:g} s" + (
            f", capped by --grace-cap from the pod's {r.pod.grace_period:g} s" if allowed < r.pod.grace_period else ""
        )
        deaf = (
            f"; its PID 1 ({r.deaf}) had no SIGTERM handler, so the kernel dropped the SIGTERM, as on a node; fix: "
            "handle SIGTERM in the program, started with `exec` by a wrapper shell"
            if r.deaf and r.signal == "SIGKILL"
            else ""
        )
        return f"preempted: SIGTERM at {r.preempted:.2f} s; {how} {ended:.2f} s later ({grace}){deaf}"

    def _drain(self, p: Process) -> None:
        """Read what the container wrote before it exited (its last lines explain the failure)."""
        for fd in list(p.fds):
            while self._read(p, fd):
                pass

    def _stuck(self, runs: list[PodRun], now: float) -> str | None:
        """A pod that makes no progress by its deadline ends the group (JAX would wait minutes)."""
        for r in runs:
            if r.phase == "initializing" and not self.options.run_command:
                limit = init_timeout(r.pod.env, self.options) + INIT_GRACE_S
                if now - self.t0 - r.timings.get("started", 0.0) > limit:
                    pending = [p.pod.hostname for p in runs if p.phase == "pending"]
                    why = f"; not started yet: {', '.join(pending)}" if pending else ""
                    r.phase, r.reason = (
                        "failed",
                        f"no progress: still initializing after its init timeout ({limit - INIT_GRACE_S:g} s){why}",
                    )
                    self.listener("phase", r)
                    return f"{r.pod.hostname}: {r.reason}"
        return None

    def _grace(self, r: PodRun) -> float:
        """How long a stopped pod may take: its terminationGracePeriodSeconds, capped by --grace-cap."""
        return min(r.pod.grace_period, self.options.grace_cap)

    def _end(self, runs: list[PodRun]) -> None:
        """Stop every container still running, reap it, close its pipes: nothing is left behind.

        After a preemption, and after the workload completed with pods still running, they are stopped as a
        controller deleting them is — the stop signal, then
        SIGKILL once their grace period is over — so a program that checkpoints on SIGTERM may finish its save, as
        on a cluster; the preempted pod keeps its own deadline (containerd sends a container the stop signal once).
        After a crash they are killed at once: a group that lost a process can save nothing together, and JAX's own
        SIGTERM handler would only hold the verdict up for the grace period."""
        # what the pods never created waited for, read before the others are stopped (a stopped pod opens no gate)
        gates = {id(r): self._waiting(r, runs) for r in runs if not r.begun}
        for r in runs:  # a pod still waiting for its id maps is no shim yet: it ends on the handshake's EOF instead
            for p in r.processes:
                self._close_handshake(p)
        live = [(r, p, p.pid) for r in runs for p in r.processes if p.live and p.pid is not None]
        graceful = any(r.preempted is not None or r.deleted or r.deadline_exceeded for r in runs)  # deleted pods
        now = time.monotonic()
        deadline = {}
        for r, p, _ in live:
            if graceful and r.preempted is None:
                p.request(signal.SIGTERM)
            signalled = self.t0 + r.preempted if r.preempted is not None else now
            deadline[id(p)] = signalled + self._grace(r) if graceful else now
        unkilled = set(deadline)
        while any(not p.reaped for _, p, _ in live) and unkilled:
            for _, p, _ in live:
                if id(p) in unkilled and time.monotonic() >= deadline[id(p)]:
                    p.request(signal.SIGKILL)
                    unkilled.discard(id(p))
            for key, _ in self.selector.select(0.02):
                self._read(key.data, key.fd)
            for r, p, pid in live:
                if not p.reaped and (found := os.waitpid(pid, os.WNOHANG))[0]:
                    self._ended(r, p, found[1])
        for r, p, pid in live:
            if not p.reaped:  # its container was SIGKILLed: its shim ends once the pod's namespace is empty
                self._ended(r, p, os.waitpid(pid, 0)[1])
        for r in runs:
            if r.pid is None and r.phase == "pending":
                gate = gates.get(id(r))
                wave = None if r.begun else self.waves.get(r.pod.global_index)
                r.reason = (
                    f"never created: its JobSet's {gate.rule} was not reached"
                    if gate is not None
                    else f"never created: its Job's parallelism ({wave[1]}) was taken by its other pods"
                    if wave is not None
                    else "never started"
                    + (f": {ENDED_WITH_GROUP} in its init containers" if r.others and not r.initialized else "")
                )
            for p in r.processes:
                for fd in list(p.fds):
                    self.selector.unregister(fd)
                    os.close(fd)
                p.fds.clear()

    def _exited(self, p: Process, status: int) -> None:
        """A reaped container: what it wrote last, and how it ended (the signal, if any, and exit code) from its shim's
        wait status, which is its container's."""
        p.reaped = True
        p.pids_peak = p.group.pids_peak() if p.group is not None else None
        self._drain(p)
        for fd in [fd for fd, stream in p.fds.items() if stream == "exit"]:
            self.selector.unregister(fd)
            os.close(fd)
            del p.fds[fd]
        if p.control is not None:
            self.controls.discard(p.control)
            os.close(p.control)
            p.control = None
        if os.WIFSIGNALED(status):  # reported as 128 + N, as containerd's reaper does: what onExitCodes matches
            p.signal = signal.Signals(os.WTERMSIG(status)).name
            p.exit_code = 128 + os.WTERMSIG(status)
        else:
            p.exit_code = os.WEXITSTATUS(status)

    def _ended(self, r: PodRun, p: Process, status: int) -> None:
        """A container the group's end stopped (not a failure of its own)."""
        self._exited(p, status)
        if p is not r:
            p.reason = p.reason or ENDED_WITH_GROUP
            return
        r.reason = r.reason or (self._preemption(r) if r.preempted is not None else ENDED_WITH_GROUP)
        if not r.done:
            self._phase(r, "deleted" if r.deleted else "failed")
