"""Run a workload's pods as real processes: fork from a parent that imported jax once, watch
them from one single-threaded loop, end the whole group at the first failure, and apply the
manifest's own restart semantics.

Each pod's process is the shim of its container (`shim`: PID 1 of the pod's PID namespace, signalled
as a container runtime signals it), gets a control pipe to ask the shim for signals, a status pipe
(phase changes, the probe's result) and log pipes (prefixed by the reporter).
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
from jaxinfra.simulate import capacity, container, fds, image, model, paths, sandbox, shim
from jaxinfra.simulate.cgroups import PodGroup
from jaxinfra.simulate.container import Credentials, coordinator_port, init_timeout
from jaxinfra.simulate.node import Node
from jaxinfra.simulate.options import Faults, Options

#: Why a pod that did not fail itself was stopped: the group ended at another pod's failure.
ENDED_WITH_GROUP = "ended with its group"
#: The longest the other pods wait for a started rank 0 to listen before starting anyway.
COORDINATOR_HOLD_S = 2.0
#: How long past its init timeout a pod may still be initializing before the group is ended.
INIT_GRACE_S = 1.0


STDERR_TAIL = 20
"""How many of a container's last stderr lines the report keeps: what a failure says of itself."""


@dataclass
class PodRun:
    """One pod in one attempt, as the runner saw it."""

    pod: model.Pod
    phase: str = "pending"  # pending -> initializing -> running -> succeeded | failed
    pid: int | None = None  # its shim's
    control: int | None = None  # the write end of its shim's control pipe
    reaped: bool = False
    exit_code: int | None = None
    signal: str | None = None
    reason: str | None = None
    timings: dict[str, float] = field(default_factory=dict)  # phase -> seconds since the attempt began
    result: dict[str, Any] | None = None
    fds: dict[int, str] = field(default_factory=dict)  # fd -> "status" | "stdout" | "stderr" | "exit" (shim's pidfd)
    buffers: dict[int, bytes] = field(default_factory=dict)
    stderr_tail: deque[str] = field(
        default_factory=lambda: deque(maxlen=STDERR_TAIL)
    )  # its last non-empty stderr lines
    cwd: Path | None = None  # the folder its container ran in
    preempted: float | None = None  # when it got SIGTERM for --preempt (seconds since the attempt began)
    deaf: str | None = None  # its PID 1's command, if that had no SIGTERM handler when the SIGTERM came
    group: PodGroup | None = None  # its cgroup, where its limits are enforced
    unapplied: list[str] = field(default_factory=list)  # what of its securityContext this machine could not give it
    killed: bool = False  # the simulator asked its shim for a SIGKILL (--kill, a grace period's end)
    deleted: bool = False  # still running when its workload completed: its controller deleted it
    deadline_exceeded: bool = False  # its Job passed activeDeadlineSeconds: the Job controller deleted it
    handshake: sandbox.Handshake | None = None  # as root: the pipes over which it asks for its id maps, until answered
    pss_peak: int | None = None  # the most memory its processes were seen to hold (proportional set size), bytes

    @property
    def last_stderr(self) -> str | None:
        return self.stderr_tail[-1] if self.stderr_tail else None

    @property
    def done(self) -> bool:
        return self.phase in ("succeeded", "failed", "deleted")

    def request(self, signum: int) -> None:
        """Ask its shim to send `signum` to its container (`shim.request`); nothing once its shim is reaped."""
        if self.control is not None:
            self.killed = self.killed or signum == signal.SIGKILL
            shim.request(self.control, signum)

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
                "enforced": self.group is not None,
            },
            "memory_peak": self.group.peak_bytes() if self.group is not None else None,
            "memory_pss_peak": self.pss_peak,
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

    @property
    def first_failure(self) -> PodRun:
        return first_failure(self.pods)


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
    ):
        """`isolation`: the sandbox strategy that works here (`sandbox.preflight`); `records`: the cluster's
        DNS names (name -> ip) that every pod's /etc/hosts holds; `credentials`: for pods that mount a token;
        `job_deadlines`: when each pod's Job passes its activeDeadlineSeconds (monotonic, by the pod's global index)."""
        self.workload = workload
        self.job_deadlines = job_deadlines or {}
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
        self.listening = False
        self.controls: set[int] = set()  # every live shim's control pipe: no other pod may hold one open
        self.answers: set[int] = set()  # as root, the ends that tell pods their id maps are written: nor these

    def run(self, index: int) -> Attempt:
        # Faults are transient: injected into the first attempt, so a restart shows recovery.
        self.faults = faults = self.options.faults if index == 0 else Faults()
        self.attempt_index = index
        runs = [PodRun(p) for p in self.workload.pods]
        attempt = Attempt(index, runs)
        self.t0 = t0 = time.monotonic()
        starts = {id(r): t0 + (faults.lookup(faults.delay, r.pod) or 0.0) for r in runs}
        # Timed signals per pod: (seconds after it starts, signal); a preemption's SIGKILL follows its SIGTERM.
        timed = {
            id(r): [(t, signal.SIGKILL) for t in [faults.lookup(faults.kill, r.pod)] if t is not None]
            + [(t, signal.SIGTERM) for t in [faults.lookup(faults.preempt, r.pod)] if t is not None]
            for r in runs
        }
        coordinator = runs[0]
        self.oom_baseline, self.memory = capacity.oom_kills(), MemorySampler(runs)
        self.machine: str | None = None
        try:
            while True:
                interrupts.check()  # a Ctrl-C whose KeyboardInterrupt a callback swallowed
                now = time.monotonic()
                due = [r for r in runs if r.phase == "pending" and r.pid is None and now >= starts[id(r)]]
                if coordinator in due:
                    self._start_or_stop(coordinator, runs)
                hold = self._coordinator_warming(coordinator, now)
                for r in due:
                    if r is not coordinator and not hold and self.machine is None:
                        self._start_or_stop(r, runs)
                wake = [s for r, s in zip(runs, starts.values()) if r.pid is None and s > now]
                for r in runs:
                    if r.pid is None or r.reaped:
                        continue
                    for entry in list(timed[id(r)]):
                        after, signum = entry
                        at = t0 + r.timings["started"] + after
                        if now < at:
                            wake.append(at)
                            continue
                        timed[id(r)].remove(entry)
                        r.request(signum)
                        if signum == signal.SIGTERM:  # a node drain or a Spot reclaim: the kubelet's graceful stop
                            r.preempted, r.deaf = now - t0, shim.unhandled(r.pid, signum)
                            timed[id(r)].append((r.preempted - r.timings["started"] + self._grace(r), signal.SIGKILL))
                self._reap(runs)
                self.memory.sample(now)
                if self.machine is not None:
                    attempt.reason = attempt.machine = self.machine
                    break
                if any(r.phase == "failed" for r in runs):
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
                    attempt.reason = f"--timeout reached with pods still {', '.join(phases)}: {', '.join(waiting[:8])}"
                    break
                stuck = self._stuck(runs, now)
                if stuck is not None:
                    attempt.reason = stuck
                    break
                timeout = min([w - now for w in wake] + [0.01 if hold else 0.2])
                for key, _ in self.selector.select(max(timeout, 0.0)):
                    self._read(key.data, key.fd)
        finally:
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
        rule = self.workload.success
        if rule is None or not rule.met(succeeded):
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

    def _start_or_stop(self, r: PodRun, runs: list[PodRun]) -> None:
        """Start a pod; where this machine refuses a process or a descriptor for it, that is the simulation's end (the
        machine's verdict), not the pod's failure."""
        try:
            self._start(r)
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

    def _start(self, r: PodRun) -> None:
        # its folder by its index: nothing the manifest says (its name) is a host path
        c = container.prepare(
            r.pod,
            self.workdir / f"pod-{r.pod.global_index}",
            self.records,
            self.options,
            self.faults,
            self.sitecustomize,
            self.credentials,
            self.storage,
        )
        r.cwd = c.cwd
        r.group = self.node.cgroup(r.pod, self.attempt_index) if self.node is not None else None
        r.unapplied = sandbox.unapplied(self.isolation, r.pod.security)
        network = self.node.network if self.node else None
        joins = [j for j in (r.group.enter if r.group else None, network.join if network else None) if j]
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
                )
            try:
                os.setpgid(pid, pid)  # also here: no race with an early kill
            except OSError:
                pass
            for fd in (control_r, status_w, out_w, err_w):
                os.close(fd)
            if mine is not None:
                mine.close()
            r.pid, r.control, r.handshake = pid, control_w, theirs
            self.controls.add(control_w)
            for fd, stream in ((status_r, "status"), (out_r, "stdout"), (err_r, "stderr")):
                self._watch(r, fd, stream)
            if theirs is not None:  # answered once it asks (`_read`): the next pods fork meanwhile
                self.answers.add(theirs.done)
                self._watch(r, theirs.ask, "grant")
            self._watch(r, os.pidfd_open(pid), "exit")  # a full table raises here: `_end` closes what r.fds holds
        self._phase(r, "started", quiet=True)

    def _close_handshake(self, r: PodRun) -> None:
        if r.handshake is not None:
            if r.handshake.ask in r.fds:
                self.selector.unregister(r.handshake.ask)
                del r.fds[r.handshake.ask]
            self.answers.discard(r.handshake.done)
            r.handshake.close()
            r.handshake = None

    def _watch(self, r: PodRun, fd: int, stream: str) -> None:
        r.fds[fd] = stream
        os.set_blocking(fd, False)
        self.selector.register(fd, selectors.EVENT_READ, r)

    def _phase(self, r: PodRun, phase: str, quiet: bool = False) -> None:
        r.timings[phase] = time.monotonic() - self.t0
        if not quiet:
            r.phase = phase
            self.listener("phase", r)

    def _read(self, r: PodRun, fd: int) -> bool:
        """Consume what the pipe holds now; False once it has nothing more (drained or at EOF)."""
        stream = r.fds[fd]
        if stream == "exit":  # its shim's pidfd, readable once the shim has exited: the loop reaps it next
            return False
        if stream == "grant":  # its user namespace is made: root writes its id maps (or it died first)
            if r.pid is not None and r.handshake is not None:
                sandbox.answer(r.pid, r.handshake)
            self._close_handshake(r)
            return False
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return False
        if not data:
            self.selector.unregister(fd)
            os.close(fd)
            del r.fds[fd]
            rest = r.buffers.pop(fd, b"")
            if rest:
                self._line(r, stream, rest)
            return False
        buf = r.buffers.get(fd, b"") + data
        *lines, buf = buf.split(b"\n")
        r.buffers[fd] = buf
        for line in lines:
            self._line(r, stream, line)
        return True

    def _line(self, r: PodRun, stream: str, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace")
        if stream != "status":
            if stream == "stderr" and text.strip():
                r.stderr_tail.append(text.strip())
            self.listener("log", (r, stream, text))
            return
        msg = json.loads(text)
        phase = msg.pop("phase")
        if phase == "result":
            r.result = msg["result"]
        elif not r.done:
            self._phase(r, phase)

    def _reap(self, runs: list[PodRun]) -> None:
        for r in runs:
            if r.pid is None or r.reaped:
                continue
            pid, status = os.waitpid(r.pid, os.WNOHANG)
            if pid == 0:
                continue
            self._exited(r, status)
            if r.group is not None and r.group.oom_killed():
                r.reason = oom_reason(r.pod, r.group.peak_bytes())
            elif r.signal == "SIGKILL" and not r.killed and capacity.oom_kills() > self.oom_baseline:
                live = sum(p.pid is not None and not p.reaped for p in runs) + 1
                self.machine = (
                    f"this machine ran out of memory ({self.memory.in_use() / capacity.GIB:.1f} GiB in use by {live} "
                    f"pods; {self.memory.limit.left / capacity.GIB:.1f} GiB was free at the start: "
                    f"{self.memory.limit.source}): the kernel's OOM killer ended a pod's process; fix: fewer devices "
                    f"per process or fewer processes here, or {capacity.AT_SCALE}"
                )
                r.reason = "killed by the kernel's OOM killer: this machine ran out of memory (not its own limit)"
            elif r.signal == "SIGKILL" and not r.killed:
                r.reason = (
                    "killed by a SIGKILL that neither the simulator, its memory limit nor the machine's OOM killer "
                    "sent (another process on this machine)"
                )
            elif r.signal is not None:
                r.reason = f"killed by {r.signal}"
            elif r.exit_code != 0:
                failed = [k for k, c in ((r.result or {}).get("checks") or {}).items() if not c["ok"]]
                r.reason = f"exit code {r.exit_code}" + (f"; failed checks: {', '.join(failed)}" if failed else "")
            if (
                r.preempted is not None
            ):  # deleted by the drain, whatever its container said: the controllers see a failure
                r.reason = self._preemption(r)
            self._phase(r, "succeeded" if r.exit_code == 0 and r.preempted is None else "failed")

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

    def _drain(self, r: PodRun) -> None:
        """Read what the pod wrote before it exited (its last lines explain the failure)."""
        for fd in list(r.fds):
            while self._read(r, fd):
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
        """Stop every pod still running, reap it, close its pipes: nothing is left behind.

        After a preemption, and after the workload completed with pods still running, they are stopped as a
        controller deleting them is — the stop signal, then
        SIGKILL once their grace period is over — so a program that checkpoints on SIGTERM may finish its save, as
        on a cluster; the preempted pod keeps its own deadline (containerd sends a container the stop signal once).
        After a crash they are killed at once: a group that lost a process can save nothing together, and JAX's own
        SIGTERM handler would only hold the verdict up for the grace period."""
        for r in runs:  # a pod still waiting for its id maps is no shim yet: it ends on the handshake's EOF instead
            self._close_handshake(r)
        live = [(r, r.pid) for r in runs if r.pid is not None and not r.reaped]
        graceful = any(r.preempted is not None or r.deleted or r.deadline_exceeded for r in runs)  # deleted pods
        now = time.monotonic()
        deadline = {}
        for r, _ in live:
            if graceful and r.preempted is None:
                r.request(signal.SIGTERM)
            signalled = self.t0 + r.preempted if r.preempted is not None else now
            deadline[id(r)] = signalled + self._grace(r) if graceful else now
        unkilled = set(deadline)
        while any(not r.reaped for r, _ in live) and unkilled:
            for r, _ in live:
                if id(r) in unkilled and time.monotonic() >= deadline[id(r)]:
                    r.request(signal.SIGKILL)
                    unkilled.discard(id(r))
            for key, _ in self.selector.select(0.02):
                self._read(key.data, key.fd)
            for r, pid in live:
                if not r.reaped and (found := os.waitpid(pid, os.WNOHANG))[0]:
                    self._ended(r, found[1])
        for r, pid in live:
            if not r.reaped:  # its container was SIGKILLed: its shim ends once the pod's namespace is empty
                self._ended(r, os.waitpid(pid, 0)[1])
        for r in runs:
            if r.pid is None and r.phase == "pending":
                r.reason = "never started"
            for fd in list(r.fds):
                self.selector.unregister(fd)
                os.close(fd)
            r.fds.clear()

    def _exited(self, r: PodRun, status: int) -> None:
        """A reaped pod: what it wrote last, and how it ended (the signal, if any, and exit code) from its shim's wait
        status, which is its container's."""
        r.reaped = True
        self._drain(r)
        for fd in [fd for fd, stream in r.fds.items() if stream == "exit"]:
            self.selector.unregister(fd)
            os.close(fd)
            del r.fds[fd]
        if r.control is not None:
            self.controls.discard(r.control)
            os.close(r.control)
            r.control = None
        if os.WIFSIGNALED(status):  # reported as 128 + N, as containerd's reaper does: what onExitCodes matches
            r.signal = signal.Signals(os.WTERMSIG(status)).name
            r.exit_code = 128 + os.WTERMSIG(status)
        else:
            r.exit_code = os.WEXITSTATUS(status)

    def _ended(self, r: PodRun, status: int) -> None:
        """A pod the group's end stopped (not a failure of its own)."""
        self._exited(r, status)
        r.reason = r.reason or (self._preemption(r) if r.preempted is not None else ENDED_WITH_GROUP)
        if not r.done:
            self._phase(r, "deleted" if r.deleted else "failed")
