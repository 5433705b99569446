"""Run a workload's pods as real processes: fork from a parent that imported jax once, watch
them from one single-threaded loop, and do there what the kubelet and the controllers do while
pods run — a pod's containers in the kubelet's order, a JobSet's start order, a Job's waves and
its recreated pods — ending a JAX group at its first failure.

Each container's process is its shim (`shim`: the parent of PID 1 of the container's PID namespace,
signalled as a container runtime signals it), with a control pipe to ask the shim for signals, a
status pipe (phase changes, the probe's result) and log pipes (prefixed by the reporter).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import selectors
import signal
import time
from collections.abc import Callable, Generator, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from jaxinfra import interrupts
from jaxinfra_sim import (
    container,
    dns,
    events,
    eviction,
    fds,
    image,
    kubeproxy,
    model,
    paths,
    prober,
    runtime,
    sandbox,
    shim,
)
from jaxinfra_sim.container import Credentials, coordinator_port, init_timeout
from jaxinfra_sim.controllers.job_failure import Failures
from jaxinfra_sim.controllers.running import Running
from jaxinfra_sim.errors import NetworkError, Unavailable
from jaxinfra_sim.machine import Machine, oom_group
from jaxinfra_sim.netns import PodNetwork
from jaxinfra_sim.node import Node
from jaxinfra_sim.options import Faults, Options
from jaxinfra_sim.podrun import ENDED_WITH_GROUP, Attempt, ContainerRun, Listener, Phase, PodRun, Process
from jaxinfra_sim.printable import printable
from jaxinfra_sim.steps import Stop, Wait, drive

if TYPE_CHECKING:
    from jaxinfra_sim.netns import HostAddress


def _involved(p: PodRun | ContainerRun) -> str:
    """The pod a container's events are about."""
    return events.pod(p.pod.namespace, (p.owner if isinstance(p, ContainerRun) else p).pod.name)


def _container(p: PodRun | ContainerRun) -> str:
    return p.container.name if isinstance(p, ContainerRun) else p.pod.container


#: The longest the other pods wait for a started rank 0 to listen before starting anyway.
COORDINATOR_HOLD_S = 2.0
#: How long the kubelet waits before it starts a native sidecar that exited again (its CrashLoopBackOff begins at
#: 10 s, pkg/kubelet/kubelet.go backOffPeriod; shorter here, and not recorded: a sidecar's restarts fail nothing).
SIDECAR_RESTART_S = 1.0
#: How long an ended pod's network outlives its last container: the kubelet sees the exit at its next PLEG relist
#: (every second: kubernetes pkg/kubelet/kubelet.go genericPlegRelistPeriod), then its pod worker stops the terminal
#: pod's sandbox (SyncTerminatingPod, StopPodSandbox, whose CNI DEL releases the address). Until then its address still
#: answers, as on a node: a peer's retry loop that sleeps a second between pings still reaches a pod that just ended.
SANDBOX_TEARDOWN_S = 2.0
#: How long past its init timeout a pod may still be initializing before the group is ended.
INIT_GRACE_S = 1.0


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
        serial: int = 0,
        beside: Callable[[], Iterable[int]] = tuple,
        proxy: kubeproxy.Proxy | None = None,
    ):
        """`isolation`: the sandbox strategy that works here (`sandbox.preflight`); `records`: the cluster's
        DNS names (name -> ip) that every pod's /etc/hosts holds; `credentials`: for pods that mount a token;
        `job_deadlines`: when each pod's Job passes its activeDeadlineSeconds (monotonic, by the pod's global index);
        `serial`: the workload's number in the simulation, which names its pods' sandboxes and cgroups apart from those
        of the workloads that run beside it; `beside`: the descriptors of the attempts running beside this one (each
        one's `descriptors`), which its pods must not keep open either (their EOFs would never come)."""
        self.serial = serial
        self.beside = beside
        # each begun pod's own network namespace (a host-network pod's address), by id() of its run
        self.pod_networks: dict[int, PodNetwork | HostAddress] = {}
        self.workload = workload
        self.controllers = Running(workload, options.run_command, self._ready, job_deadlines, failures, respawn)
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
        self.proxy = proxy  # the simulation's kube-proxy (None: no Service has a cluster IP): `_kube_proxy`

    def steps(self, index: int) -> Generator[Wait, None, Attempt]:
        """Attempt `index`, a step at a time: each `Wait` is what it waits for before its next step."""
        # Faults are transient: injected into the first attempt, so a restart shows recovery.
        self.faults = faults = self.options.faults if index == 0 else Faults()
        self.attempt_index = index
        runs = [PodRun(p) for p in self.workload.pods]
        attempt = Attempt(index, runs)
        self.events = attempt.events
        self.t0 = t0 = time.monotonic()
        starts = {id(r): t0 + (faults.lookup(faults.delay, r.pod) or 0.0) for r in runs}
        # Timed signals per pod: (seconds after its JAX container starts, signal, to every container of the pod or
        # to that one); a preemption (the pod deleted) signals them all, its SIGKILL after its SIGTERM.
        timed = {
            id(r): [(t, signal.SIGKILL, False) for t in [faults.lookup(faults.kill, r.pod)] if t is not None]
            + [(t, signal.SIGTERM, True) for t in [faults.lookup(faults.preempt, r.pod)] if t is not None]
            for r in runs
        }
        self.machine = Machine(runs)
        self.eviction_manager = eviction.StorageWatch(self._pod_dir, self._scratch)
        network = self.node.network if self.node is not None else None
        self.prober = prober.Prober(network.join if network is not None else None, self.runtime, self._unhealthy)
        # each begun pod's own network namespace (a host-network pod's address), by id() of its run
        self.pod_networks = {}
        self.teardowns: dict[int, float] = {}  # when an ended pod's network goes (monotonic), by id() of its run
        self.stops: list[tuple[float, prober.Target]] = []  # containers a failed probe stopped: when each gets SIGKILL
        ended = False
        try:
            while True:
                interrupts.check()  # a Ctrl-C whose KeyboardInterrupt a callback swallowed
                now = time.monotonic()
                coordinator = runs[0]  # (a replaced pod takes its place)
                wake = [s for r, s in zip(runs, starts.values()) if not r.begun and s > now]
                for r in runs:
                    if not r.begun:
                        r.begun = now >= starts[id(r)] and self.controllers.may_create(r, runs)
                        r.created = now if r.begun else None
                        if r.begun:
                            self._sandbox_network(r)
                        if r.begun and r.pod.job:  # the Job controller's pod
                            self._record(events.created_pod(now - t0, r.pod.namespace, r.pod.job, r.pod.name))
                    if r.begun and (r.others or not r.initialized) and not r.done and self.machine.verdict is None:
                        self._kubelet(r, runs, now - t0, wake)
                due = [
                    r for r in runs if r.initialized and r.pid is None and r.phase == Phase.PENDING and not r.evicted
                ]
                if coordinator in due:
                    self._start_or_stop(coordinator, coordinator, runs)
                hold = self._coordinator_warming(coordinator, now)
                for r in due:
                    if r is not coordinator and not hold and self.machine.verdict is None:
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
                            if signum == signal.SIGTERM:
                                self._record(events.killing(now - t0, _involved(p), _container(p)))
                        if signum == signal.SIGTERM:  # a node drain or a Spot reclaim: the kubelet's graceful stop
                            r.preempted, r.deaf = now - t0, shim.unhandled(r.pid, signum)
                            timed[id(r)].append(
                                (r.preempted - r.timings["started"] + self._grace(r), signal.SIGKILL, True)
                            )
                self._reap(runs)
                self._release_networks(runs, now)
                self._probes(runs, now, wake)
                self._kube_proxy(runs, now, wake)
                self.machine.poll(now)
                for r, why in self.eviction_manager.poll(runs, now):
                    self._evict(r, why, now)
                if self.machine.verdict is not None:
                    attempt.reason = attempt.machine = self.machine.verdict
                    if self.machine.out_of_memory_seen:  # the node's OOM watcher
                        self._record(events.system_oom(now - t0, runs[0].pod.node))
                    break
                if any(r.phase == Phase.FAILED for r in runs):
                    created = self.controllers.replace_failed(runs, attempt, self._end)
                    if created is None:
                        break
                    for new in created:
                        starts[id(new)], timed[id(new)] = time.monotonic(), []
                if self.controllers.complete(runs):
                    attempt.ok = True
                    break
                if self.controllers.past_deadline(runs, now):
                    attempt.reason = next(r.reason for r in runs if r.deadline_exceeded)
                    break
                if now >= self.deadline:  # not the job's failure: on a cluster its pods would run on
                    waiting = [r.pod.hostname for r in runs if not r.done]
                    phases = sorted({r.phase for r in runs if not r.done})
                    attempt.unfinished = True
                    held = (self.controllers.waiting(r, runs) for r in runs if not r.begun)
                    gated = {g.rule for g in held if g is not None}
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
                try:
                    yield Wait(max(timeout, 0.0), self.selector.fileno())
                except Stop as stop:
                    attempt.reason = attempt.stopped = str(stop)
                    break
                for key, _ in self.selector.select(0):
                    self._read(key.data, key.fd)
            self.prober.close()
            yield from self._ending(runs)
            ended = True
        finally:
            if not ended:  # an interrupt, or the machine's verdict elsewhere: stopped at once, without a step
                self.prober.close()
                self._end(runs)
            for net in self.pod_networks.values():
                net.close()
            self.pod_networks.clear()
            if self.proxy is not None:  # its pods are no Service's endpoints any more
                with contextlib.suppress(NetworkError):  # (the network itself gone: nothing answers them either)
                    self.proxy.sync(time.monotonic(), (), self.workload.id)
        if not attempt.ok and attempt.reason is None:  # told once every pod has ended (a preempted one may end last)
            failed = attempt.first_failure
            attempt.reason = f"{failed.pod.hostname}: {failed.reason}"
        attempt.seconds = time.monotonic() - t0
        attempt.memory_peak = self.machine.memory.peak
        return attempt

    def descriptors(self, keep: object = None) -> list[int]:
        """This attempt's own descriptors that no pod may keep open (its pods' pipes, their shims' control pipes, the
        ends of their id-map handshakes, their network namespaces but `keep`, the one a pod being forked joins)."""
        return [
            *(key.fd for key in self.selector.get_map().values()),
            *self.controls,
            *self.answers,
            *(n.fileno() for n in self.pod_networks.values() if n is not keep and n.fileno() >= 0),
        ]

    def _sandbox_network(self, r: PodRun) -> None:
        """Ask for the pod's own network namespace as its pod begins (the kubelet's RunPodSandbox, before any of its
        containers): the holder makes every begun pod's at once, and its first container waits for it (`_start`).
        A host-network pod stays in the simulation's namespace, the node's. Named for the plugins by numbers only."""
        network = self.node.network if self.node is not None else None
        if network is None or id(r) in self.pod_networks:
            return
        if r.pod.host_network:  # its node's namespace, where it listens on its own address
            self.pod_networks[id(r)] = network.host_address(r.pod.ip)
            return
        sandbox_id = f"jaxinfra-{os.getpid()}-{self.serial}-{self.attempt_index}-{r.pod.global_index}-{r.generation}"
        self.pod_networks[id(r)] = network.pod(r.pod.ip, sandbox_id)

    def _release_networks(self, runs: list[PodRun], now: float) -> None:
        """Let an ended pod's namespace go `SANDBOX_TEARDOWN_S` after every process of it is reaped (the kubelet's
        StopPodSandbox): its veth and its route go with it, and a pod created in its place may take its address."""
        for r in runs:
            if not (r.done and id(r) in self.pod_networks and all(p.pid is None or p.reaped for p in r.processes)):
                continue
            due = self.teardowns.setdefault(id(r), now + SANDBOX_TEARDOWN_S)
            if now >= due:
                self.pod_networks.pop(id(r)).close()

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

    def _ready(self, r: PodRun) -> bool:
        """The pod's Ready condition: initialized, and every main container and sidecar ready — running, started
        (its startup probe passed) and its readiness probe passing, where it has those (kubelet
        pkg/kubelet/status/generate.go GeneratePodReadyCondition, `prober`)."""
        latest: list[PodRun | ContainerRun] = [r, *(c for role in ("main", "sidecar") for c in self._latest(r, role))]
        return r.initialized and all(self.prober.ready(p) for p in latest)

    def _kube_proxy(self, runs: list[PodRun], now: float, wake: list[float]) -> None:
        """The Services' endpoints as the EndpointSlice controller keeps them (each pod with an address that is not
        terminal: Ready or not, being stopped or not), handed to kube-proxy, which syncs its rules when they changed
        (`kubeproxy.Proxy`: at its rate; the loop wakes when the next sync is due)."""
        if self.proxy is None:
            return
        endpoints = [
            kubeproxy.Endpoint(r.pod, self._ready(r), terminating=r.preempted is not None)  # deleted: terminating
            for r in runs
            if r.begun and not r.done and id(r) in self.pod_networks
        ]
        due = self.proxy.sync(now, endpoints, self.workload.id)
        if due is not None:
            wake.append(due)

    def _probes(self, runs: list[PodRun], now: float, wake: list[float]) -> None:
        """The kubelet's prober (`prober`): a container whose liveness or startup probe failed is stopped, its stop
        signal then SIGKILL after the probe's terminationGracePeriodSeconds (else the pod's), and restarted as its
        pod's restartPolicy says (kuberuntime_manager.go computePodActions); each pod's first Ready is recorded."""
        for w in self.prober.poll(now, wake):
            grace = w.probe.grace_period if w.probe.grace_period is not None else w.target.pod.grace_period
            w.target.request(signal.SIGTERM)
            if isinstance(w.target, PodRun | ContainerRun):
                restarts = w.target.pod.restart_policy != "Never"
                why = events.probe_failed_kill(_container(w.target), w.probe.kind, restarts)
                self._record(events.killing(now - self.t0, _involved(w.target), _container(w.target), why))
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
                if c.role == "init" or self.machine.verdict is not None:
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
            if self.machine.refused(err, r):
                r.phase, r.reason = Phase.FAILED, f"not started: {self.machine.verdict}"
                self.listener("phase", r)
                return
            if isinstance(err, NetworkError):  # the kubelet's FailedCreatePodSandBox: it would retry, never run it
                raise Unavailable(
                    f"pod {r.pod.hostname}'s network namespace could not be made here: {err}",
                    "this is this machine's or the simulator's failure, not the job's: check that the CNI plugins "
                    "(Debian's containernetworking-plugins) and nftables work here",
                ) from None
            raise
        if p is r:
            for slot, c in enumerate(self._others(r), 1):
                if c.role == "main" and self.machine.verdict is None:
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
        if isinstance(self.records, dns.LiveRecords):  # rewritten as the cluster's pods come and go
            self.records.track(p.pod, c.spec.hosts)
        p.group = self.node.cgroup(p.pod, self.attempt_index, slot, self.serial) if self.node is not None else None
        p.security = c.pod.security  # an image given whole may have set its user (`oci_image.applied`)
        p.unapplied = sandbox.unapplied(self.isolation, c.pod.security, c.runtime is not None)
        network = self.node.network if self.node else None
        sandbox_net = self.pod_networks.get(id(r))
        own_network = sandbox_net if isinstance(sandbox_net, PodNetwork) else None
        if own_network is not None:
            own_network.fd()  # set up by now, or NetworkError: the pod's sandbox could not be made
        join = functools.partial(network.join, own_network) if network is not None else None
        joins = [j for j in (p.group.enter if p.group else None, join) if j]
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
                    *self.descriptors(sandbox_net),
                    control_w,
                    *([theirs.ask, theirs.done] if theirs else []),
                    *self.beside(),
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
        at = time.monotonic() - self.t0
        if isinstance(p, PodRun):
            p.timings["started"] = at
        else:
            p.started = at
        self._record(*events.started(at, _involved(p), _container(p)))
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

    def _phase(self, r: PodRun, phase: Phase) -> None:
        """The pod's new phase, when it came (its timings) and to the listener."""
        r.timings[phase] = time.monotonic() - self.t0
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
        p.running = p.running or phase == Phase.RUNNING
        if not isinstance(p, PodRun):  # the probe's phases and result: the JAX container's alone
            return
        if phase == "result":
            p.result = msg["result"]
        elif not p.done:
            self._phase(p, Phase(phase))  # initializing, running: what the container says of itself

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
                oom_group(p)
                p.reason = self._why(p)
                if isinstance(p, ContainerRun):
                    p.ended = time.monotonic() - self.t0
                elif r.preempted is not None:  # deleted by the drain, whatever its container said
                    r.reason = self._preemption(r)
            if reaped:
                self._settle(r)

    def _why(self, p: PodRun | ContainerRun) -> str | None:
        """How a reaped container ended, for its reason (None: it exited 0, unless a probe's failure stopped it)."""
        how = self._how(p)
        if p.probe_failed is not None:
            return f"{p.probe_failed}, so the kubelet stopped it: {how or 'exit code 0'}"
        return how

    def _scratch(self, r: PodRun, p: Process) -> Path:
        """Where a container's sandbox keeps its writable layer."""
        return self._pod_dir(r) / (f"sandbox-{p.slot}" if isinstance(p, ContainerRun) else "sandbox")

    def _evict(self, r: PodRun, why: str, now: float) -> None:
        """Evict a pod as the kubelet's eviction manager does: each running container gets its stop signal, then
        SIGKILL after `eviction.EVICTION_GRACE_S` (capped by --grace-cap), whatever the pod's own grace period; the
        pod fails with reason Evicted once they have all ended (`_settle`)."""
        r.evicted = why
        grace = min(eviction.EVICTION_GRACE_S, self.options.grace_cap)
        self._record(events.evicted(now - self.t0, _involved(r), why))
        for p in r.processes:
            if p.live:
                p.request(signal.SIGTERM)
                self._record(events.killing(now - self.t0, _involved(p), _container(p)))
                self.stops.append((now + grace, p))

    def _how(self, p: PodRun | ContainerRun) -> str | None:
        memory = self.machine.how(p)
        if memory is not None:
            return memory
        if p.signal is not None:
            return f"killed by {p.signal}"
        if p.exit_code == shim.START_ERROR and not p.running and p.last_stderr:  # the runtime never started it
            return f"{shim.START_ERROR_REASON}: {p.last_stderr}"
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
                self._phase(r, Phase.FAILED)
            return
        failed_init = next((c for c in r.others if c.container.role == "init" and c.reaped and c.exit_code), None)
        if failed_init is not None:
            r.reason = f"init container {failed_init.container.name}: {failed_init.reason}"
            self._phase(r, Phase.FAILED)
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
            self._phase(r, Phase.SUCCEEDED)
        else:
            self._failed(r, failed)

    def _failed(self, r: PodRun, failed: Process) -> None:
        if isinstance(failed, ContainerRun):
            r.reason = f"container {failed.container.name}: {failed.reason}"
        self._phase(r, Phase.FAILED)

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
            if r.phase == Phase.INITIALIZING and not self.options.run_command:
                limit = init_timeout(r.pod.env, self.options) + INIT_GRACE_S
                if now - self.t0 - r.timings.get("started", 0.0) > limit:
                    pending = [p.pod.hostname for p in runs if p.phase == Phase.PENDING]
                    why = f"; not started yet: {', '.join(pending)}" if pending else ""
                    waited = f"{limit - INIT_GRACE_S:g} s"
                    r.reason = f"no progress: still initializing after its init timeout ({waited}){why}"
                    self._phase(r, Phase.FAILED)  # when: its row's total is the time it hung, not its last report's
                    return f"{r.pod.hostname}: {r.reason}"
        return None

    def _record(self, *happened: events.Event) -> None:
        """Events of the attempt (`events`), in the order they came."""
        self.events.extend(happened)

    def _unhealthy(self, target: prober.Target, kind: str, output: str, now: float) -> None:
        """The prober's event for each failed probe."""
        if isinstance(target, PodRun | ContainerRun):
            self._record(events.unhealthy(now - self.t0, _involved(target), kind, output))

    def _grace(self, r: PodRun) -> float:
        """How long a stopped pod may take: its terminationGracePeriodSeconds, capped by --grace-cap."""
        return min(r.pod.grace_period, self.options.grace_cap)

    def _end(self, runs: list[PodRun]) -> None:
        """`_ending`, waited for here."""
        drive(self._ending(runs))

    def _ending(self, runs: list[PodRun]) -> Generator[Wait, None, None]:
        """Stop every container still running, reap it, close its pipes: nothing is left behind.

        After a preemption, and after the workload completed with pods still running, they are stopped as a
        controller deleting them is — the stop signal, then
        SIGKILL once their grace period is over — so a program that checkpoints on SIGTERM may finish its save, as
        on a cluster; the preempted pod keeps its own deadline (containerd sends a container the stop signal once).
        After a crash they are killed at once: a group that lost a process can save nothing together, and JAX's own
        SIGTERM handler would only hold the verdict up for the grace period."""
        # what the pods never created waited for, read before the others are stopped (a stopped pod opens no gate)
        gates = {id(r): self.controllers.waiting(r, runs) for r in runs if not r.begun}
        for r in runs:  # a pod still waiting for its id maps is no shim yet: it ends on the handshake's EOF instead
            for p in r.processes:
                self._close_handshake(p)
        live = [(r, p, p.pid) for r in runs for p in r.processes if p.live and p.pid is not None]
        graceful = any(r.preempted is not None or r.deleted or r.deadline_exceeded for r in runs)  # deleted pods
        now = time.monotonic()
        deadline = {}
        for r in runs:  # the Job controller deletes its active pods: a completed workload's, a Job past its deadline
            if (r.deleted or r.deadline_exceeded) and r.pod.job and any(p.live for p in r.processes):
                self._record(events.deleted_pod(now - self.t0, r.pod.namespace, r.pod.job, r.pod.name))
        for r, p, _ in live:
            if graceful and r.preempted is None:
                p.request(signal.SIGTERM)
                self._record(events.killing(now - self.t0, _involved(p), _container(p)))
            signalled = self.t0 + r.preempted if r.preempted is not None else now
            deadline[id(p)] = signalled + self._grace(r) if graceful else now
        unkilled = set(deadline)
        while any(not p.reaped for _, p, _ in live) and unkilled:
            for _, p, _ in live:
                if id(p) in unkilled and time.monotonic() >= deadline[id(p)]:
                    p.request(signal.SIGKILL)
                    unkilled.discard(id(p))
            yield Wait(0.02, self.selector.fileno())
            for key, _ in self.selector.select(0):
                self._read(key.data, key.fd)
            for r, p, pid in live:
                if not p.reaped and (found := os.waitpid(pid, os.WNOHANG))[0]:
                    self._ended(r, p, found[1])
        for r, p, pid in live:
            if not p.reaped:  # its container was SIGKILLed: its shim ends once the pod's namespace is empty
                self._ended(r, p, os.waitpid(pid, 0)[1])
        for r in runs:
            if r.pid is None and r.phase == Phase.PENDING:
                r.reason = self.controllers.never_created(r, gates.get(id(r)))
                if r.reason == "never started" and r.others and not r.initialized:
                    r.reason += f": {ENDED_WITH_GROUP} in its init containers"
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
            self._phase(r, Phase.DELETED if r.deleted else Phase.FAILED)
