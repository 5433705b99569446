"""The kubelet's prober: each container's startup, readiness and liveness probes, run as the kubelet runs them, and
what their results decide (kubernetes/kubernetes @ 00421113 pkg/kubelet/prober/worker.go, prober.go; pkg/probe/exec,
tcp, http).

One worker per probe of a running container, ticking every periodSeconds from when its pod was created:
- no probe before initialDelaySeconds have passed since the container started; readiness and liveness wait until
  the startup probe (if any) has succeeded, which then stops;
- a result counts once it came successThreshold (success) or failureThreshold (failure) times in a row; until then
  the previous one stands: readiness starts as a failure, liveness as a success;
- a liveness or startup failure that counts has the kubelet kill the container (its stop signal, then SIGKILL after
  the probe's terminationGracePeriodSeconds, else the pod's) and restart it as the pod's restartPolicy says
  (kuberuntime_manager.go computePodActions); the worker then holds until a new container runs.

The handlers (pkg/probe):
- exec: the command in the container itself, as containerd's ExecSync runs it: its namespaces (user, mount, UTS,
  PID, the pod's network), its cgroup, its identity and capabilities, its env and working directory; success is
  exit 0; past timeoutSeconds it is killed and fails;
- tcpSocket: a TCP connection to host (default: the pod's IP) and port, made in the pods' network;
- httpGet: GET scheme://host:port/path with httpHeaders (User-Agent kube-probe, Accept */*); a status from 200 to 399
  succeeds (a redirect is not followed); HTTPS does not verify the certificate; a failure's message is the status
  alone, "HTTP probe failed with statuscode: N" (pkg/probe/http/http.go DoHTTPProbe keeps the body, read up to
  maxRespBodyLength, for its verbose log only);
- grpc is not run: a note says so, and the probe counts as passing.
A named port is looked up among the container's ports; one it lacks is the kubelet's probe error, whose result is
thrown away (worker.go doProbe): that probe never changes its result.

tcpSocket and httpGet probes start in the simulation's network namespace (the node's side of the pods' network,
never the machine's), where the boundary's rules (`network.netns_boundary`) refuse every address of the machine, as
they do for the pods; what a probe prints is kept up to the kubelet's 10 KiB, every control character escaped
(`core.printable`), since it reaches the report.

Each probe runs in a process of its own, forked from the simulator (single-threaded, as setns(2) into a user
namespace needs), so that no probe blocks the simulation; the simulator reaps it, or kills it at its timeout.
"""

from __future__ import annotations

import ctypes
import http.client
import os
import signal
import socket
import ssl
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, Protocol

from jaxinfra_sim.core import fds, model
from jaxinfra_sim.core.printable import printable
from jaxinfra_sim.runtime import runc

MAX_OUTPUT = 10 * 1024
"""How much of a probe's output the kubelet keeps (pkg/probe/exec maxReadLength, pkg/probe/http maxRespBodyLength)."""
SUCCESS, FAILURE, UNKNOWN = "success", "failure", "unknown"
INITIAL = {"readiness": FAILURE, "liveness": SUCCESS, "startup": UNKNOWN}
"""Each kind's result before its first probe counts (worker.go newWorker initialValue)."""
_PASSED, _FAILED, _ERROR = 0, 1, 2  # a probe process's exit status
_POLL_S = 0.02


USER_AGENT = "kube-probe/1.34"
"""The kubelet's User-Agent for HTTP probes: kube-probe/<its major>.<minor> (pkg/probe/http/request.go)."""
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
EXEC_GRACE = 1.0
"""Seconds an exec probe's process has past its timeout to kill its command and say so, before it is killed."""


class Target(Protocol):
    """A container's process, as the runner keeps it."""

    pid: int | None  # its shim's
    pod: model.Pod  # the pod as the container sees it: its probes, security, named ports
    cwd: Path | None  # its working directory, inside its root
    name: str  # its id for the OCI runtime
    env: Mapping[str, str]
    reaped: bool
    running: bool  # its sandbox is made and its program started
    probed: dict[str, dict[str, Any]]
    probe_failed: str | None

    @property
    def live(self) -> bool: ...

    def request(self, signum: int) -> None: ...


@dataclass(eq=False)
class _Running:
    pid: int
    out: int
    deadline: float
    data: bytes = b""


@dataclass(eq=False)
class Worker:
    """One probe of one container process (worker.go worker)."""

    probe: model.Probe
    target: Target
    created: float  # when its pod was created (monotonic): its ticks count from there
    started: float  # when its container started (monotonic)
    result: str = ""
    last: str | None = None  # the latest probe's own result
    streak: int = 0  # how many times in a row `last` came
    held: bool = False  # after a liveness or startup failure: no more probes of this container
    tick: int = 0
    running: _Running | None = None
    failures: int = 0

    def __post_init__(self) -> None:
        self.result = INITIAL[self.probe.kind]

    def due(self) -> float:
        return self.created + self.tick * self.probe.period


class Prober:
    """Every probe worker of one attempt. `poll` runs those due and returns the containers whose liveness or startup
    probe failed; `started` and `ready` are what the kubelet's status says of a container."""

    def __init__(
        self,
        network: Callable[[], None] | None,
        oci: runc.Runtime | None = None,
        failed: Callable[[Target, str, str, float], None] | None = None,
    ):
        """`network`: the pods' network's `join` (None: none), which a probe process enters as its container did
        (tcpSocket, httpGet; unprivileged, also its way to an exec probe's user namespace); `oci`: the runtime an
        exec probe's command runs under (`runc exec`: the container's namespaces and cgroup are runc's to join);
        `failed`: told of each failed probe (its target, its kind, its output, when), as the kubelet's prober records
        an Unhealthy event for each (prober.go runProbeWithRetries' caller, `probe`)."""
        self.network = network
        self.runtime = oci
        self.failed = failed
        self.workers: list[Worker] = []

    def watch(self, target: Target, created: float, started: float) -> None:
        for probe in target.pod.probes:
            target.probed[probe.kind] = {"handler": probe.handler, "result": INITIAL[probe.kind], "failures": 0}
            if probe.action != "grpc":
                self.workers.append(Worker(probe, target, created, started))
            else:
                target.probed[probe.kind].update(result=SUCCESS, note="grpc probes are not run here")

    def _of(self, target: Target, kind: str) -> Worker | None:
        return next((w for w in self.workers if w.target is target and w.probe.kind == kind), None)

    def started(self, target: Target) -> bool:
        """The container's `started`: running, and its startup probe (if any) succeeded."""
        startup = self._of(target, "startup")
        return target.live and (startup is None or startup.result == SUCCESS)

    def ready(self, target: Target) -> bool:
        """The container's `ready`: started, and its readiness probe (if any) succeeded (status_manager.go)."""
        readiness = self._of(target, "readiness")
        return self.started(target) and (readiness is None or readiness.result == SUCCESS)

    def poll(self, now: float, wake: list[float]) -> list[Worker]:
        """Reap the probes that ended, start those due; the workers whose liveness or startup failure counts now."""
        failed = []
        for w in self.workers:
            if w.running is not None:
                ended = _finish(w.running, now)
                if ended is not None:
                    w.running = None
                    outcome = (
                        (UNKNOWN, "the container is not running") if _stopped(w.target) else _outcome(w.probe, *ended)
                    )
                    if self._count(w, *outcome, now):
                        failed.append(w)
            if w.running is not None:
                wake.append(min(w.running.deadline, now + _POLL_S))
                continue
            if not (w.target.live and w.target.running):
                continue
            while w.due() <= now:
                w.tick += 1
                if self._may_probe(w, now):
                    w.running = self._spawn(w, now)
                    wake.append(now + _POLL_S)
                    break
            if w.running is None:
                wake.append(w.due())
        return failed

    def _may_probe(self, w: Worker, now: float) -> bool:
        if w.held or int(now - w.started) < w.probe.initial_delay:
            return False
        if w.probe.kind == "startup":
            return w.result != SUCCESS
        return self.started(w.target)

    def _count(self, w: Worker, outcome: str, message: str, now: float) -> bool:
        """Record one probe's outcome (worker.go doProbe); True when it is a liveness or startup failure that counts."""
        status = w.target.probed[w.probe.kind]
        status["probes"] = status.get("probes", 0) + 1
        if outcome == UNKNOWN:  # the kubelet's probe error: the result is thrown away
            status["error"] = message
            return False
        w.streak = w.streak + 1 if outcome == w.last else 1
        w.last = outcome
        if outcome == FAILURE:
            w.failures += 1
            status.update(failures=w.failures, last_failure=message)
            if self.failed is not None:
                self.failed(w.target, w.probe.kind, message, now)
        threshold = w.probe.failure_threshold if outcome == FAILURE else w.probe.success_threshold
        if w.streak < threshold:
            return False
        w.result = status["result"] = outcome
        if outcome == FAILURE and w.probe.kind in ("liveness", "startup"):
            w.held, w.streak = True, 0
            w.target.probe_failed = (
                f"its {w.probe.kind} probe failed {w.probe.failure_threshold} time(s) in a row "
                f"({w.probe.handler}: {message or 'no output'})"
            )
            return True
        return False

    def close(self) -> None:
        """Kill and reap every probe still running: nothing outlives the attempt."""
        for w in self.workers:
            if w.running is not None:
                _kill(w.running.pid)
                os.waitpid(w.running.pid, 0)
                os.close(w.running.out)
                w.running = None

    def _spawn(self, w: Worker, now: float) -> _Running | None:
        """Fork the probe's process; None (the kubelet's probe error) where an exec probe has no sandbox to enter."""
        if w.probe.action == "exec" and (self.runtime is None or not w.target.running):
            w.target.probed[w.probe.kind]["error"] = "the container's sandbox is not there"
            return None
        r, wr = os.pipe()
        try:
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the probe's process
                os.close(r)
                _probe_process(w.probe, w.target, self.runtime, self.network, wr)
        finally:
            os.close(wr)
        os.set_blocking(r, False)
        # An exec probe's process ends its command at the timeout itself (its command is not in its process group).
        return _Running(pid, r, now + w.probe.timeout + (EXEC_GRACE if w.probe.action == "exec" else 0.0))


def _finish(run: _Running, now: float) -> tuple[int | None, str] | None:
    """(wait status, output) once the probe's process has ended (None for one killed at its timeout), else None."""
    _read(run)
    pid, status = os.waitpid(run.pid, os.WNOHANG)
    if pid == 0 and now < run.deadline:
        return None
    if pid == 0:
        _kill(run.pid)
        os.waitpid(run.pid, 0)
    _read(run)
    os.close(run.out)
    return (status if pid else None), printable(run.data[:MAX_OUTPUT].decode("utf-8", "replace").strip())


def _stopped(target: Target) -> bool:
    """Whether the container stopped while its probe ran: its PID 1 (its shim's child) has exited, reaped or not, or
    its shim has. Then the probe's failure is the runtime's ("container does not exist"), not the command's: the
    kubelet's prober does not probe a container that is not running (worker.go doProbe), and an exec that errors is
    a probe error, which the worker does not count (prober.go: result Unknown). runc counts a zombie PID 1 as stopped
    too, so the shim's own exit, which comes after, is too late a sign."""
    if not target.live or target.pid is None:
        return True
    try:
        if os.waitid(os.P_PID, target.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        children = Path(f"/proc/{target.pid}/task/{target.pid}/children").read_text().split()
    except (ChildProcessError, OSError):
        return True
    return not any(_alive(int(pid)) for pid in children)


def _alive(pid: int) -> bool:
    """Whether a process exists and has not exited (a zombie has: /proc/PID/stat's state after the command is Z)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :][:1] != "Z"


def _outcome(probe: model.Probe, status: int | None, text: str) -> tuple[str, str]:
    if status is None:
        return FAILURE, f"timed out after {probe.timeout} s"
    code = os.waitstatus_to_exitcode(status)
    return (SUCCESS if code == _PASSED else UNKNOWN if code == _ERROR else FAILURE), text


def _read(run: _Running) -> None:
    while True:
        try:
            chunk = os.read(run.out, 65536)
        except BlockingIOError:
            return
        if not chunk:
            return
        if len(run.data) < MAX_OUTPUT:
            run.data += chunk


def _kill(pid: int) -> None:
    """SIGKILL the probe's process group: its process and what it started (exec: the command in the container)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# --- in the probe's process ----------------------------------------------------------------------------------------


def _probe_process(
    probe: model.Probe, target: Target, oci: runc.Runtime | None, network: Callable[[], None] | None, out: int
) -> NoReturn:
    """Run one probe and end with its outcome (_PASSED, _FAILED, _ERROR), its output on `out`."""
    code = _ERROR
    try:
        os.setpgid(0, 0)
        for fd in (1, 2):
            os.dup2(out, fd)
        os.close(out)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # fresh objects: nothing the simulator buffered
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        if probe.action == "exec" and oci is not None:
            code = _exec(probe, target, oci, network)
        else:
            if network is not None:
                network()
            host, port = probe.host or target.pod.ip, _port(probe, target.pod)
            code = _tcp(host, port, probe.timeout) if probe.action == "tcpSocket" else _http(probe, host, port)
    except _ProbeError as err:
        print(err)
    except BaseException as err:  # the kubelet's probe error: its result is thrown away
        print(f"{type(err).__name__}: {err}")
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(code)


class _ProbeError(Exception):
    """The kubelet could not run the probe: its result is thrown away."""


def _port(probe: model.Probe, pod: model.Pod) -> int:
    """A probe's port: a number, or a name among its container's ports (probe.ResolveContainerPort)."""
    if isinstance(probe.port, int):
        return probe.port
    if probe.port.isdigit():
        return int(probe.port)
    if probe.port in pod.named_ports:
        return pod.named_ports[probe.port]
    raise _ProbeError(f"couldn't find port {probe.port!r} among the container's ports")


def _exec(probe: model.Probe, target: Target, oci: runc.Runtime, network: Callable[[], None] | None) -> int:
    """The command in the container, as containerd's ExecSync runs it: `runc exec` (its namespaces, cgroup, identity,
    env and working directory, its pod's network namespace, which this process enters first since runc joins only the
    container's own; a fresh runc process, nothing of the simulator's memory), this process the child subreaper its
    command is reparented to; past the timeout it is killed and the probe fails. Exit 0 passes. A runc that cannot
    start the command (a container stopping as it is probed, a command not in it) is ExecSync's error, not an exit
    status: the kubelet's exec prober makes that probe.Unknown (pkg/probe/exec/exec.go Probe: only an ExitError is a
    Failure) and its worker throws the result away (pkg/kubelet/prober/worker.go doProbe): a liveness probe naming a
    command the image lacks never restarts its container (kubernetes/kubernetes#106682).
    Unprivileged, runc runs where the container's shim ran it: in the user namespace its shim made (through the pods'
    network's, `sandbox.node_mounts`), as its root; the command runs in the container's own, nested in that one,
    which runc joins (`runc.config`): never in runc's, so the container's capabilities do not reach runc's init while
    it joins."""
    if not probe.command:
        raise _ProbeError("exec probe without a command")
    libc = ctypes.CDLL(None, use_errno=True)
    nested = os.geteuid() != 0 and network is not None and target.pid is not None
    if nested and network is not None:  # the pods' network's user namespace, which owns every pod's network one
        network()
    # the pod's own network namespace (its shim's), entered while this process may (before the container's user
    # namespace, nested deeper): runc exec joins only the namespaces its container made
    for kind, flag, what in (("net", CLONE_NEWNET, "pod's network"), ("user", CLONE_NEWUSER, "container's user")):
        if target.pid is None or kind == "user" and not nested:
            continue
        fd = os.open(f"/proc/{target.pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
        if libc.setns(fd, flag) != 0:
            raise _ProbeError(f"enter the {what} namespace: {os.strerror(ctypes.get_errno())}")
        os.close(fd)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    security = target.pod.security
    spec = runc.process(list(probe.command), target.env, str(target.cwd or "/"), security)
    job = runc.write(oci.state, f"exec-{os.getpid()}.json", spec)
    pid_file = oci.state / f"exec-{os.getpid()}.pid"
    log = oci.state / f"exec-{os.getpid()}.log"
    try:
        argv = oci.argv("exec", "--detach", "--pid-file", str(pid_file), "--process", str(job), target.name, log=log)
        if runc.run(argv, 1, 2) != 0:  # --detach: runc's own failure, never the command's exit status
            raise _ProbeError(runc.failure(log))
        pid = int(pid_file.read_text())
    finally:
        for made in (job, pid_file, log):
            made.unlink(missing_ok=True)
    handle = os.pidfd_open(pid)
    if not fds.readable([handle], probe.timeout):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        print(f"timed out after {probe.timeout} s")
        return _FAILED
    _, status = os.waitpid(pid, 0)
    return _PASSED if status == 0 else _FAILED


def _tcp(host: str, port: int, timeout: int) -> int:
    """pkg/probe/tcp DoTCPProbe: a connection that opens passes."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as err:
        print(f"dial tcp {host}:{port}: connect: {(err.strerror or str(err)).lower()}")
        return _FAILED
    return _PASSED


def _http(probe: model.Probe, host: str, port: int) -> int:
    """pkg/probe/http DoHTTPProbe: a status from 200 to 399 passes (redirects are not followed here)."""
    url = f"{probe.scheme.lower()}://{host}:{port}{probe.path}"
    conn: http.client.HTTPConnection = (
        http.client.HTTPSConnection(host, port, timeout=probe.timeout, context=ssl._create_unverified_context())
        if probe.scheme == "HTTPS"
        else http.client.HTTPConnection(host, port, timeout=probe.timeout)
    )
    headers = {"User-Agent": USER_AGENT, "Accept": "*/*", **dict(probe.headers)}
    try:
        conn.request("GET", probe.path, headers=headers)
        response = conn.getresponse()
        response.read(MAX_OUTPUT)  # read as the kubelet reads it (at most maxRespBodyLength), kept by neither
    except OSError as err:
        print(f'Get "{url}": dial tcp {host}:{port}: connect: {(getattr(err, "strerror", None) or str(err)).lower()}')
        return _FAILED
    except http.client.HTTPException as err:
        print(f'Get "{url}": {type(err).__name__}: {err}')
        return _FAILED
    finally:
        conn.close()
    if 200 <= response.status < 400:
        return _PASSED
    print(f"HTTP probe failed with statuscode: {response.status}")  # the kubelet keeps none of the body
    return _FAILED
