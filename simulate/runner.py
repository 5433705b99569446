"""Run a workload's pods as real processes: fork from a parent that imported jax once, watch
them from one single-threaded loop, end the whole group at the first failure, and apply the
manifest's own restart semantics.

Each pod is its own process group (so a pod's command and its children die together), gets a
status pipe (phase changes, the probe's result) and log pipes (prefixed by the reporter).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import selectors
import shutil
import signal
import socket
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxinfra.simulate import dns, image, model, sandbox
from jaxinfra.simulate.platform import gke_tpu

#: Why a pod that did not fail itself was stopped: the group ended at another pod's failure.
ENDED_WITH_GROUP = "ended with its group"
#: The longest the other pods wait for a started rank 0 to listen before starting anyway.
COORDINATOR_HOLD_S = 2.0
#: How long past its init timeout a pod may still be initializing before the group is ended.
INIT_GRACE_S = 1.0


@dataclass(frozen=True)
class Faults:
    """Injected faults; a selector is a pod hostname/name or a global rank."""

    kill: Mapping[str, float] = field(default_factory=dict)   # SIGKILL this long after the pod starts
    fail: frozenset[str] = frozenset()                         # the container exits 1 at start
    hang: frozenset[str] = frozenset()                         # the container stops making progress
    delay: Mapping[str, float] = field(default_factory=dict)   # the pod starts this late
    preempt: Mapping[str, float] = field(default_factory=dict)  # SIGTERM this long after it starts, SIGKILL after its grace

    @staticmethod
    def matches(selector: str, pod: model.Pod) -> bool:
        return selector in (pod.hostname, pod.name, str(pod.global_index))

    def lookup(self, table: Mapping[str, Any] | frozenset[str], pod: model.Pod) -> Any:
        for selector in table:
            if self.matches(selector, pod):
                return table[selector] if isinstance(table, Mapping) else True
        return None


@dataclass(frozen=True)
class Options:
    run_command: bool = False       # run the container's own command instead of the probe
    images: Mapping[str, Path] = field(default_factory=dict)   # image (as in the manifest) -> the folder standing in for its working directory
    volumes: Mapping[str, Path] = field(default_factory=dict)  # claim or bucket name -> a folder that outlives the simulation
    grace_cap: float = 3.0          # cap on terminationGracePeriodSeconds when a pod is stopped (speed; a cluster waits it out)
    k8s_client: bool = True         # the pods' Python can import `kubernetes` (an image built with jax[k8s])
    timeout: float = 300.0          # the whole simulation
    init_timeout: float | None = None   # cap on every pod's JAX init timeout
    heartbeat_timeout: int = 10
    shutdown_timeout: int = 10
    faults: Faults = field(default_factory=Faults)


@dataclass(frozen=True)
class Credentials:
    """What the ServiceAccount token volume holds for pods that mount one: the API server's CA and a token per account."""

    ca_pem: bytes
    tokens: Mapping[tuple[str, str], str]   # (namespace, ServiceAccount) -> bearer token

    def write(self, pod: model.Pod, folder: Path) -> Path:
        """The volume's files (token, ca.crt, namespace), as the kubelet projects them."""
        folder.mkdir(parents=True)
        (folder / "token").write_text(self.tokens[(pod.namespace, pod.service_account)], encoding="utf-8")
        (folder / "ca.crt").write_bytes(self.ca_pem)
        (folder / "namespace").write_text(pod.namespace, encoding="utf-8")
        return folder


STDERR_TAIL = 20
"""How many of a container's last stderr lines the report keeps: what a failure says of itself."""


@dataclass
class PodRun:
    """One pod in one attempt, as the runner saw it."""

    pod: model.Pod
    phase: str = "pending"          # pending -> initializing -> running -> succeeded | failed
    pid: int | None = None
    reaped: bool = False
    exit_code: int | None = None
    signal: str | None = None
    reason: str | None = None
    timings: dict[str, float] = field(default_factory=dict)   # phase -> seconds since the attempt began
    result: dict[str, Any] | None = None
    fds: dict[int, str] = field(default_factory=dict)          # read fd -> "status" | "stdout" | "stderr"
    buffers: dict[int, bytes] = field(default_factory=dict)
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_TAIL))   # its last non-empty stderr lines
    cwd: Path | None = None         # the folder its container ran in
    preempted: float | None = None  # when it got SIGTERM for --preempt (seconds since the attempt began)

    @property
    def last_stderr(self) -> str | None:
        return self.stderr_tail[-1] if self.stderr_tail else None

    @property
    def done(self) -> bool:
        return self.phase in ("succeeded", "failed")

    def as_dict(self) -> dict[str, Any]:
        checks = (self.result or {}).get("checks", {})
        return {"name": self.pod.name, "hostname": self.pod.hostname, "rank": self.pod.global_index, "pid": self.pid,
                "ip": self.pod.ip, "phase": self.phase, "exit_code": self.exit_code, "signal": self.signal,
                "reason": self.reason, "timings": {k: round(v, 3) for k, v in self.timings.items()},
                "checks": checks, "checks_passed": bool(checks) and all(c["ok"] for c in checks.values()),
                "probe_timings": (self.result or {}).get("timings", {}), "program": (self.result or {}).get("program"),
                "stderr_tail": list(self.stderr_tail)}


@dataclass
class Attempt:
    index: int
    pods: list[PodRun]
    ok: bool = False
    reason: str | None = None
    seconds: float = 0.0
    backoff: float = 0.0            # simulated seconds the kubelet waited before it (CrashLoopBackOff); not waited here

    @property
    def first_failure(self) -> PodRun:
        """The pod that failed by itself (the others were ended with it; a preempted one first, since the others'
        exits follow from it), else the first failed one."""
        failed = [r for r in self.pods if r.phase == "failed"] or self.pods
        own = [r for r in failed if r.reason != ENDED_WITH_GROUP] or failed
        return next((r for r in own if r.preempted is not None), own[0])


Listener = Callable[[str, Any], None]   # (event, payload): "phase" PodRun, "log" (PodRun, stream, line), "attempt" Attempt


def _child(pod: model.Pod, env: dict[str, str], workdir: Path, status_w: int, out_w: int, err_w: int,
           inherited: list[int], options: Options, workload: model.Workload, fail: bool, hang: bool,
           isolation: str, hosts: Path, token: Path | None, mounts: list[tuple[Path, str, bool]]) -> None:
    """In the forked pod process: enter the pod's sandbox, become the container. Never returns."""
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)   # the simulator's own handler is not the container's
        os.setpgid(0, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        sandbox.enter(isolation, dns.uts_hostname(pod), hosts, token, mounts)   # first, while this process has one thread
        # Other pods' pipes must not stay open here (their EOFs would never come). Only those:
        # libraries' own descriptors (gRPC's at-fork state, for one) must survive.
        for fd in inherited:
            os.close(fd)
        sys.stdout = open(1, "w", buffering=1, closefd=False)   # fresh objects: the parent's locks stay behind
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(workdir)
        status = os.fdopen(status_w, "w", buffering=1)

        def report(phase: str, data: Mapping[str, Any]) -> None:
            status.write(json.dumps({"phase": phase, **data}) + "\n")

        if fail:
            print("jaxinfra simulate: injected failure (--fail)", file=sys.stderr)
            os._exit(1)
        if hang:
            report("initializing", {})
            while True:
                time.sleep(3600)
        if options.run_command:
            argv = [*pod.command, *pod.args]
            report("running", {})
            os.execvpe(argv[0], argv, env)
        from jaxinfra.simulate import probe

        # What this process inherited is never garbage here: left to the collector, every full
        # collection would walk it and copy each page it touches (copy-on-write), a third of the
        # probe's compile time in a parent without many objects of its own.
        gc.freeze()
        probe.configure(pod.devices)
        image.shape(env)
        report("initializing", {})
        result = probe.run_probe(_probe_spec(pod, workload, env, options), report)
        report("result", {"result": result})
        code = 0 if result.get("ok") else 1
    except BaseException as err:  # the container crashed: say why on its stderr, exit non-zero
        try:
            print(f"jaxinfra simulate: {type(err).__name__}: {err}", file=sys.stderr)
        except BaseException:
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _init_timeout(env: Mapping[str, str], options: Options) -> float:
    value = float(env.get("JAX_INITIALIZATION_TIMEOUT", "300") or 300)
    return min(value, options.init_timeout) if options.init_timeout else value


def _probe_spec(pod: model.Pod, workload: model.Workload, env: Mapping[str, str], options: Options) -> Any:
    from jaxinfra.simulate.probe import ProbeSpec

    return ProbeSpec(expected_rank=pod.global_index, num_processes=len(workload.pods),
                     devices_per_process=pod.devices, groups=workload.groups,
                     hosts_per_group=workload.hosts_per_group, init_timeout=int(_init_timeout(env, options)),
                     heartbeat_timeout=options.heartbeat_timeout, shutdown_timeout=options.shutdown_timeout)


def process_env(pod: model.Pod, sitecustomize: Path | None, k8s_client: bool = True) -> dict[str, str]:
    """The pod's env plus what stands in for its machine and image: the CPU as its accelerator, its own IP,
    whether its Python has the `kubernetes` package."""
    env = dict(pod.env)
    env.setdefault("PATH", f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    env.setdefault("HOME", os.environ.get("HOME", "/root"))
    env["JAX_PLATFORMS"] = "cpu"
    env["JAX_NUM_CPU_DEVICES"] = str(pod.devices)
    # A real pod binds the coordinator on its own network namespace's wildcard; here, its own IP,
    # where the port is known from the env (a script may hard-code its own: then the wildcard).
    if port := coordinator_port(pod):
        env.setdefault("JAX_COORDINATOR_BIND_ADDRESS", f"{pod.ip}:{port}")
    if pod.accelerator == "tpu":
        env[gke_tpu.MARKER] = "1"
    if not k8s_client:
        env[image.WITHOUT_K8S_CLIENT] = "1"
    if sitecustomize is not None and image.needs_hook(env):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(sitecustomize), env.get("PYTHONPATH", "")) if p)
    return env


def container_cwd(pod: model.Pod, images: Mapping[str, Path], scratch: Path) -> Path:
    """The container's working directory: the folder that stands in for its image's (`--image IMAGE=DIR`), with
    the container's workingDir resolved inside it; else an empty folder (the image's files are not here).
    A workingDir missing from the image is created empty, as the container runtime (runc) does."""
    image_dir = images.get(pod.image)
    if image_dir is not None:
        cwd = image_dir / (pod.working_dir or "").lstrip("/")
        if cwd.is_dir():
            return cwd
    scratch.mkdir(parents=True, exist_ok=True)
    return scratch


def coordinator_port(pod: model.Pod) -> int | None:
    """The port rank 0 will listen on, as far as the env says: JAX_COORDINATOR_ADDRESS, or the
    Training Operator v1's COORDINATOR_PORT (next to COORDINATOR_ADDRESS), or JAX's TPU detection
    default (JAX_COORDINATOR_PORT, else 8482)."""
    address = pod.env.get("JAX_COORDINATOR_ADDRESS", "")
    if ":" in address:
        port = address.rsplit(":", 1)[1]
    elif pod.env.get("COORDINATOR_ADDRESS") and "COORDINATOR_PORT" in pod.env:
        port = pod.env["COORDINATOR_PORT"]
    elif pod.accelerator == "tpu":
        port = pod.env.get("JAX_COORDINATOR_PORT", "8482")
    else:
        return None
    return int(port) if port.isdigit() else None


class Runner:
    """Runs one attempt of a workload: every pod at once, the group ended at the first failure."""

    def __init__(self, workload: model.Workload, options: Options, workdir: Path, listener: Listener,
                 deadline: float, isolation: str, records: Mapping[str, str], credentials: Credentials | None = None,
                 storage: Callable[[model.Mount], Path] | None = None):
        """`isolation`: the sandbox strategy that works here (`sandbox.preflight`); `records`: the cluster's
        DNS names (name -> ip) that every pod's /etc/hosts holds; `credentials`: for pods that mount a token."""
        self.workload = workload
        self.isolation = isolation
        self.records = records
        self.credentials = credentials
        self.storage = storage or (lambda mount: workdir / "storage" / mount.kind / mount.key)
        self.options = options
        self.workdir = workdir
        self.listener = listener
        self.deadline = deadline
        self.selector = selectors.DefaultSelector()
        self.sitecustomize = image.sitecustomize_dir(workdir / "_site") if options.run_command else None
        self.listening = False

    def run(self, index: int) -> Attempt:
        # Faults are transient: injected into the first attempt, so a restart shows recovery.
        self.faults = faults = self.options.faults if index == 0 else Faults()
        runs = [PodRun(p) for p in self.workload.pods]
        attempt = Attempt(index, runs)
        self.t0 = t0 = time.monotonic()
        starts = {id(r): t0 + (faults.lookup(faults.delay, r.pod) or 0.0) for r in runs}
        # Timed signals per pod: (seconds after it starts, signal); a preemption's SIGKILL follows its SIGTERM.
        timed = {id(r): [(t, signal.SIGKILL) for t in [faults.lookup(faults.kill, r.pod)] if t is not None]
                 + [(t, signal.SIGTERM) for t in [faults.lookup(faults.preempt, r.pod)] if t is not None] for r in runs}
        coordinator = runs[0]
        try:
            while True:
                now = time.monotonic()
                due = [r for r in runs if r.phase == "pending" and r.pid is None and now >= starts[id(r)]]
                if coordinator in due:
                    self._start(coordinator)
                hold = self._coordinator_warming(coordinator, now)
                for r in due:
                    if r is not coordinator and not hold:
                        self._start(r)
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
                        os.killpg(r.pid, signum)
                        if signum == signal.SIGTERM:      # a node drain or a Spot reclaim: the kubelet's graceful stop
                            r.preempted = now - t0
                            timed[id(r)].append((r.preempted - r.timings["started"] + self._grace(r), signal.SIGKILL))
                self._reap(runs)
                if any(r.phase == "failed" for r in runs):
                    break
                if all(r.phase == "succeeded" for r in runs):
                    attempt.ok = True
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
        if not attempt.ok and attempt.reason is None:   # told once every pod has ended (a preempted one may end last)
            failed = attempt.first_failure
            attempt.reason = f"{failed.pod.hostname}: {failed.reason}"
        attempt.seconds = time.monotonic() - t0
        return attempt

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
        with socket.socket() as probe:
            self.listening = probe.connect_ex((coordinator.pod.ip, port)) == 0
        return not self.listening

    def _start(self, r: PodRun) -> None:
        faults = self.faults
        pod_dir = self.workdir / r.pod.name
        for fresh in ("fs", "sandbox"):                 # a (re)started container begins with a fresh filesystem
            shutil.rmtree(pod_dir / fresh, ignore_errors=True)
        (pod_dir / "sandbox").mkdir(parents=True)
        env = process_env(r.pod, self.sitecustomize, self.options.k8s_client)
        hosts = pod_dir / "sandbox" / "hosts"
        hosts.write_text(dns.hosts_file(r.pod, self.records), encoding="utf-8")
        r.cwd = cwd = container_cwd(r.pod, self.options.images, pod_dir / "fs")
        token = (self.credentials.write(r.pod, pod_dir / "sandbox" / "serviceaccount")
                 if r.pod.token and self.credentials is not None else None)
        status_r, status_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            _child(r.pod, env, cwd, status_w, out_w, err_w, [fd for fd in self.selector.get_map()], self.options, self.workload,
                   bool(faults.lookup(faults.fail, r.pod)), bool(faults.lookup(faults.hang, r.pod)), self.isolation, hosts, token,
                   self._volumes(r.pod, pod_dir))
        try:
            os.setpgid(pid, pid)   # also here: no race with an early kill
        except OSError:
            pass
        for fd in (status_w, out_w, err_w):
            os.close(fd)
        r.pid = pid
        r.fds = {status_r: "status", out_r: "stdout", err_r: "stderr"}
        for fd in r.fds:
            os.set_blocking(fd, False)
            self.selector.register(fd, selectors.EVENT_READ, r)
        self._phase(r, "started", quiet=True)

    def _volumes(self, pod: model.Pod, pod_dir: Path) -> list[tuple[Path, str, bool]]:
        """Each mount's source: an emptyDir lives with the pod (kept across its container's restarts), a claim or a
        bucket with the simulation (or in --volume's folder), a configMap/secret/downwardAPI volume's files are
        written afresh at each start."""
        out = []
        for m in pod.mounts:
            if m.kind == "emptyDir":
                source = pod_dir / "volumes" / m.volume
            elif m.kind == "files":
                source = pod_dir / "sandbox" / "volumes" / m.volume
                for relative, content in m.files:
                    (source / relative).parent.mkdir(parents=True, exist_ok=True)
                    (source / relative).write_text(content, encoding="utf-8")
            else:
                source = self.storage(m)
            source.mkdir(parents=True, exist_ok=True)
            if m.sub_path:   # the kubelet creates a missing subPath as a folder
                source = source / m.sub_path
                if not source.exists():
                    source.mkdir(parents=True)
            out.append((source, m.path, m.read_only))
        return out

    def _phase(self, r: PodRun, phase: str, quiet: bool = False) -> None:
        r.timings[phase] = time.monotonic() - self.t0
        if not quiet:
            r.phase = phase
            self.listener("phase", r)

    def _read(self, r: PodRun, fd: int) -> bool:
        """Consume what the pipe holds now; False once it has nothing more (drained or at EOF)."""
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return False
        stream = r.fds[fd]
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
            r.reaped = True
            self._drain(r)
            if os.WIFSIGNALED(status):
                r.signal = signal.Signals(os.WTERMSIG(status)).name
                r.reason = f"killed by {r.signal}"
            else:
                r.exit_code = os.WEXITSTATUS(status)
                if r.exit_code != 0:
                    failed = [k for k, c in ((r.result or {}).get("checks") or {}).items() if not c["ok"]]
                    r.reason = f"exit code {r.exit_code}" + (f"; failed checks: {', '.join(failed)}" if failed else "")
            if r.preempted is not None:   # deleted by the drain, whatever its container said: the controllers see a failure
                r.reason = self._preemption(r)
            self._phase(r, "succeeded" if r.exit_code == 0 and r.preempted is None else "failed")

    def _preemption(self, r: PodRun) -> str:
        """How a preempted pod ended, for its reason."""
        ended = time.monotonic() - self.t0 - (r.preempted or 0.0)
        how = f"exited {r.exit_code}" if r.signal is None else f"killed by {r.signal}"
        return f"preempted: SIGTERM at {r.preempted:.2f} s; {how} {ended:.2f} s later (grace period {self._grace(r):g} s)"

    def _drain(self, r: PodRun) -> None:
        """Read what the pod wrote before it exited (its last lines explain the failure)."""
        for fd in list(r.fds):
            while self._read(r, fd):
                pass

    def _stuck(self, runs: list[PodRun], now: float) -> str | None:
        """A pod that makes no progress by its deadline ends the group (JAX would wait minutes)."""
        if now >= self.deadline:
            waiting = [r.pod.hostname for r in runs if not r.done]
            return f"--timeout reached with pods still {', '.join(sorted({r.phase for r in runs if not r.done}))}: {', '.join(waiting[:8])}"
        for r in runs:
            if r.phase == "initializing" and not self.options.run_command:
                limit = _init_timeout(r.pod.env, self.options) + INIT_GRACE_S
                if now - self.t0 - r.timings.get("started", 0.0) > limit:
                    pending = [p.pod.hostname for p in runs if p.phase == "pending"]
                    why = f"; not started yet: {', '.join(pending)}" if pending else ""
                    r.phase, r.reason = "failed", f"no progress: still initializing after its init timeout ({limit - INIT_GRACE_S:g} s){why}"
                    self.listener("phase", r)
                    return f"{r.pod.hostname}: {r.reason}"
        return None

    def _grace(self, r: PodRun) -> float:
        """How long a stopped pod may take: its terminationGracePeriodSeconds, capped by --grace-cap."""
        return min(r.pod.grace_period, self.options.grace_cap)

    def _end(self, runs: list[PodRun]) -> None:
        """Stop every pod still running, reap it, close its pipes: nothing is left behind.

        After a preemption the others are stopped as a controller deleting them does — SIGTERM, then SIGKILL
        once their grace period is over — so a program that checkpoints on SIGTERM may finish its save, as
        on a cluster. After a crash they are killed at once: a group that lost a process can save nothing
        together, and JAX's own SIGTERM handler would only hold the verdict up for the grace period."""
        live = [r for r in runs if r.pid is not None and not r.reaped]
        graceful = [r for r in live if any(p.preempted is not None for p in runs)]
        for r in graceful:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(r.pid, signal.SIGTERM)
        until = time.monotonic() + max((self._grace(r) for r in graceful), default=0.0)
        while any(not r.reaped for r in live) and time.monotonic() < until:
            for key, _ in self.selector.select(0.02):
                self._read(key.data, key.fd)
            for r in live:
                if not r.reaped and (found := os.waitpid(r.pid, os.WNOHANG))[0]:
                    self._ended(r, found[1])
        for r in runs:
            if r.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(r.pid, signal.SIGKILL)   # the pod's own children too, even after it exited
        for r in runs:
            if r.pid is not None and not r.reaped:
                self._ended(r, os.waitpid(r.pid, 0)[1])
            elif r.pid is None and r.phase == "pending":
                r.reason = "never started"
        for r in runs:
            for fd in list(r.fds):
                self.selector.unregister(fd)
                os.close(fd)
            r.fds.clear()

    def _ended(self, r: PodRun, status: int) -> None:
        """A pod the group's end stopped (not a failure of its own): how it went, from its wait status."""
        r.reaped = True
        self._drain(r)
        if os.WIFSIGNALED(status):
            r.signal = signal.Signals(os.WTERMSIG(status)).name
        else:
            r.exit_code = os.WEXITSTATUS(status)
        r.reason = r.reason or (self._preemption(r) if r.preempted is not None else ENDED_WITH_GROUP)
        if not r.done:
            self._phase(r, "failed")

