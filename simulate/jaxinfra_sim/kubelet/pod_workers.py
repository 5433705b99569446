"""Run a workload's pods as real processes: fork from a parent that imported jax once, watch
them from one single-threaded loop, and do there what the kubelet and the controllers do while
pods run — a pod's containers in the kubelet's order, a JobSet's start order, a Job's waves and
its recreated pods — ending a JAX group at its first failure.

Each container's process is its shim (`shim`: the parent of PID 1 of the container's PID namespace,
signalled as a container runtime signals it), with a control pipe to ask the shim for signals, a
status pipe (phase changes, the probe's result) and log pipes (prefixed by the reporter), relayed by
`relay`; `reaper` reaps the shims, `podstatus` decides the pods' status from their exits, `podnetworks`
holds the pods' networks, `faultsignals` sends the faults' timed signals.
"""

from __future__ import annotations

import functools
import os
import signal
import time
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from jaxinfra import interrupts
from jaxinfra_sim.controllers.job_failure import Failures
from jaxinfra_sim.controllers.running import Running
from jaxinfra_sim.core import events, fds, model, paths
from jaxinfra_sim.core.errors import NetworkError, Unavailable
from jaxinfra_sim.core.options import Faults, Options
from jaxinfra_sim.core.podrun import Attempt, ContainerRun, Listener, Phase, PodRun, Process, container_name, involved
from jaxinfra_sim.core.steps import Stop, Wait, drive
from jaxinfra_sim.kubelet import container, eviction, image, podsandbox, podstatus, prober, sysctls
from jaxinfra_sim.kubelet.container import Credentials, coordinator_port
from jaxinfra_sim.kubelet.faultsignals import FaultSignals
from jaxinfra_sim.kubelet.podnetworks import PodNetworks
from jaxinfra_sim.kubelet.podstatus import PodStatus
from jaxinfra_sim.kubelet.reaper import Reaper
from jaxinfra_sim.kubelet.relay import Relay
from jaxinfra_sim.network import dns, kubeproxy
from jaxinfra_sim.network.netns import PodNetwork
from jaxinfra_sim.node import parts
from jaxinfra_sim.node.machine import Machine
from jaxinfra_sim.node.node import Node
from jaxinfra_sim.runtime import runc, sandbox

if TYPE_CHECKING:
    from jaxinfra_sim.node.cgroups import PodGroup

#: The longest the other pods wait for a started rank 0 to listen before starting anyway.
COORDINATOR_HOLD_S = 2.0
#: How long the kubelet waits before it starts a native sidecar that exited again (its CrashLoopBackOff begins at
#: 10 s, pkg/kubelet/kubelet.go backOffPeriod; shorter here, and not recorded: a sidecar's restarts fail nothing).
SIDECAR_RESTART_S = 1.0


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
        self.networks = PodNetworks(node, proxy, workload.id, serial)  # each begun pod's network; kube-proxy's
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
        self.relay = Relay(listener, self._phase)  # the containers' pipes: their output, their phases
        self.sitecustomize = image.sitecustomize_dir(workdir / "_site") if options.run_command else None
        self.runtime = runc.create(workdir / "runc", parts.runc_trusted()) if options.run_command else None
        self.listening = False
        self.rank0 = workload.group[0].global_index if workload.group else 0  # its JAX group's first pod
        self.controls: set[int] = set()  # every live shim's control pipe: no other pod may hold one open
        self.pauses: dict[int, podsandbox.Pause] = {}  # each begun pod's pause, where it has one, by id() of its run

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
        self.machine = Machine(runs, self.node.root if self.node is not None else None)
        self.status = PodStatus(t0, self.machine, self.options.grace_cap, self._phase)
        self.reaper = Reaper(self.relay, self.status, self.controls, self.controllers, self._record, t0)
        signals = FaultSignals(faults, runs, t0, self.status.grace, self._record)  # a kill, a preemption
        self.eviction_manager = eviction.StorageWatch(self._pod_dir, self._scratch)
        network = self.node.network if self.node is not None else None
        self.prober = prober.Prober(network.join if network is not None else None, self.runtime, self._unhealthy)
        self.stops: list[tuple[float, prober.Target]] = []  # containers a failed probe stopped: when each gets SIGKILL
        ended = False
        try:
            while True:
                interrupts.check()  # a Ctrl-C whose KeyboardInterrupt a callback swallowed
                now = time.monotonic()
                coordinator = runs[self.rank0]  # (a replaced pod takes its place)
                wake = [s for r, s in zip(runs, starts.values()) if not r.begun and s > now]
                for r in runs:
                    if not r.begun:
                        r.begun = now >= starts[id(r)] and self.controllers.may_create(r, runs)
                        r.created = now if r.begun else None
                        if r.begun and (refused := sysctls.admit(r.pod)) is not None:  # the kubelet's admission
                            self._reject(r, sysctls.REASON, refused, now, sysctls.REJECTED)
                        elif r.begun:
                            self.networks.begin(r, index)
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
                signals.send(runs, now, wake)
                self.reaper.reap(runs)
                self.networks.release(runs, now)
                self._release_pauses(runs)
                self._probes(runs, now, wake)
                self.networks.kube_proxy(runs, now, wake, self._ready)
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
                        starts[id(new)] = time.monotonic()
                        signals.replaced(new)
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
                stuck = podstatus.stuck(runs, now, t0, self.options, self._phase)
                if stuck is not None:
                    attempt.reason = stuck
                    break
                timeout = min([w - now for w in wake] + [0.01 if hold else 0.2])
                try:
                    yield Wait(max(timeout, 0.0), self.relay.fileno())
                except Stop as stop:
                    attempt.reason = attempt.stopped = str(stop)
                    break
                self.relay.pump()
            self.prober.close()
            yield from self.reaper.ending(runs)
            ended = True
        finally:
            if not ended:  # an interrupt, or the machine's verdict elsewhere: stopped at once, without a step
                self.prober.close()
                self._end(runs)
            self.networks.close()
            self._release_pauses(runs, every=True)
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
            *(key.fd for key in self.relay.selector.get_map().values()),
            *self.controls,
            *self.relay.answers,
            *self.networks.descriptors(keep),
            *(pause.control for pause in self.pauses.values()),
        ]

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
            self.status.settle(r)
            return
        if r.exited is None:
            self._restart_sidecars(r, runs, wake)
        if not r.initialized:
            r.initialized = self._init_step(r, runs)
            return
        if r.exited is None:
            return
        live = [c for c in r.latest("sidecar") if c.live]
        if not live:
            self.status.settle(r)
            return
        if live[-1].stopping is None:
            live[-1].stopping = t
            live[-1].request(signal.SIGTERM)
        kill = r.exited + self.status.grace(r)
        if t >= kill:
            for c in live:
                c.request(signal.SIGKILL)
        else:
            wake.append(self.t0 + kill)

    def _restart_sidecars(self, r: PodRun, runs: list[PodRun], wake: list[float]) -> None:
        """Start again each sidecar that exited (or that a probe's failure stopped) while the pod runs."""
        for c in r.latest("sidecar"):
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
        latest: list[PodRun | ContainerRun] = [r, *(c for role in ("main", "sidecar") for c in r.latest(role))]
        return r.initialized and all(self.prober.ready(p) for p in latest)

    def _probes(self, runs: list[PodRun], now: float, wake: list[float]) -> None:
        """The kubelet's prober (`prober`): a container whose liveness or startup probe failed is stopped, its stop
        signal then SIGKILL after the probe's terminationGracePeriodSeconds (else the pod's), and restarted as its
        pod's restartPolicy says (kuberuntime_manager.go computePodActions); each pod's first Ready is recorded."""
        for w in self.prober.poll(now, wake):
            grace = w.probe.grace_period if w.probe.grace_period is not None else w.target.pod.grace_period
            w.target.request(signal.SIGTERM)
            if isinstance(w.target, PodRun | ContainerRun):
                restarts = w.target.pod.restart_policy != "Never"
                why = events.probe_failed_kill(container_name(w.target), w.probe.kind, restarts)
                self._record(events.killing(now - self.t0, involved(w.target), container_name(w.target), why))
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

    def _container(self, r: PodRun, c: model.Container, slot: int, restarts: int = 0) -> ContainerRun:
        run = ContainerRun(container=c, pod=r.pod.as_container(c), slot=slot, owner=r, restarts=restarts)
        r.others.append(run)
        return run

    def _init_step(self, r: PodRun, runs: list[PodRun]) -> bool:
        """Start the pod's next init container once the one before is through — an init container completed, a
        sidecar started (running, its startup probe passed: kuberuntime_container.go computeInitContainerActions) —
        True once all are. One that completed in an earlier attempt of the same pod (its container restarted in
        place) does not run again: the kubelet reruns init containers only for a new pod sandbox. One that fails
        fails the pod (`PodStatus.settle`)."""
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
                    self.status.settle(r)
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
        if p is r and not r.done:  # (a pod whose sandbox could not be made starts nothing more)
            for slot, c in enumerate(self._others(r), 1):
                if c.role == "main" and self.machine.verdict is None:
                    self._start_or_stop(self._container(r, c, slot), r, runs)

    def _start(self, p: PodRun | ContainerRun) -> None:
        own = isinstance(p, PodRun)
        r, slot = (p, 0) if isinstance(p, PodRun) else (p.owner, p.slot)
        try:
            pause = self._pause(r)
        except podsandbox.SandboxFailed as err:  # the kubelet would retry; the pod never runs
            self._reject(r, events.Reason.FAILED_CREATE_POD_SANDBOX, str(err), time.monotonic())
            return
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
        own_network = isinstance(self.networks.get(r), PodNetwork)
        privileged = self.isolation == "privileged"  # root maps all ids: over a handshake of two more pipes
        c = replace(c, namespaces=podsandbox.namespaces(r.pod, pause, privileged, own_network))
        p.cwd, p.env, p.name = c.cwd, c.env, c.name
        if isinstance(self.records, dns.LiveRecords):  # rewritten as the cluster's pods come and go
            self.records.track(p.pod, c.spec.hosts)
        p.group = self.node.cgroup(p.pod, self.attempt_index, slot, self.serial) if self.node is not None else None
        p.security = c.pod.security  # an image given whole may have set its user (`oci_image.applied`)
        p.unapplied = sandbox.unapplied(self.isolation, c.pod.security, c.runtime is not None)
        if own:
            p.unapplied += podsandbox.notes(r.pod, self.options.run_command)
        self._network_ready(r)
        with interrupts.held():
            pid, (control_w, status_r, out_r, err_r), theirs = self._fork(c, r, p.group, privileged)
            p.pid, p.control, p.handshake = pid, control_w, theirs
            self.controls.add(control_w)
            for fd, stream in ((status_r, "status"), (out_r, "stdout"), (err_r, "stderr")):
                self.relay.watch(p, fd, stream)
            if theirs is not None:  # answered once it asks (`Relay.read`): the next pods fork meanwhile
                self.relay.grant(p, theirs)
            self.relay.watch(p, os.pidfd_open(pid), "exit")  # a full table raises here: `_end` closes what p.fds holds
        at = time.monotonic() - self.t0
        if isinstance(p, PodRun):
            p.timings["started"] = at
        else:
            p.started = at
        self._record(*events.started(at, involved(p), container_name(p)))
        if self.options.run_command:
            now = time.monotonic()
            self.prober.watch(p, r.created or now, now)

    def _network_ready(self, r: PodRun) -> None:
        """Wait for the pod's own network namespace, which its containers join."""
        sandbox_net = self.networks.get(r)
        if isinstance(sandbox_net, PodNetwork):
            sandbox_net.fd()  # set up by now, or NetworkError: the pod's sandbox could not be made

    def _fork(
        self, c: container.Container, r: PodRun, group: PodGroup | None, handshake: bool
    ) -> tuple[int, tuple[int, int, int, int], sandbox.Handshake | None]:
        """Fork the process that becomes container `c` of pod `r` (`container.become`): in `group`, in the pod's
        network (`_network_ready`); `handshake`: as root, with the pipes over which it asks for its id maps. Its
        pid, the runner's ends of its pipes (control, status, stdout, stderr) and of its handshake. Call it inside
        `interrupts.held()`, where the caller records them."""
        network = self.node.network if self.node else None
        sandbox_net = self.networks.get(r)
        own_network = sandbox_net if isinstance(sandbox_net, PodNetwork) else None
        join = functools.partial(network.join, own_network) if network is not None else None
        joins = [j for j in (group.enter if group else None, join) if j]
        ends = fds.pipes(6 if handshake else 4)
        control_r, control_w, status_r, status_w, out_r, out_w, err_r, err_w = ends[:8]
        mine, theirs = sandbox.Handshake.pair(*ends[8:]) if handshake else (None, None)
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
                group.adopt if group else None,
                self.node.nproc if self.node is not None else None,
            )
        for fd in (control_r, status_w, out_w, err_w):
            os.close(fd)
        if mine is not None:
            mine.close()
        return pid, (control_w, status_r, out_r, err_r), theirs

    def _pause(self, r: PodRun) -> podsandbox.Pause | None:
        """The pod's pause, started with its first container where its containers share namespaces
        (`podsandbox`); None where they share none. Raises `podsandbox.SandboxFailed`."""
        if id(r) in self.pauses or not podsandbox.needed(r.pod, self.options.run_command):
            return self.pauses.get(id(r))
        network = self.node.network if self.node is not None else None
        subordinate = network.subordinate if network is not None else None
        mapped = os.geteuid() == 0 or not runc.unmapped({podsandbox.PAUSE_UID}, subordinate)
        c = container.prepare(
            podsandbox.pause_pod(r.pod, podsandbox.PAUSE_UID if mapped else 0),
            self._pod_dir(r),
            self.records,
            self.options,
            Faults(),
            None,
            None,
            self.storage,
            sandbox_name="pause",
            own_command=True,
            oci=self.runtime,
        )
        own_network = isinstance(self.networks.get(r), PodNetwork)
        made = podsandbox.namespaces(r.pod, None, self.isolation == "privileged", own_network)
        c = replace(c, env={}, namespaces=made)
        slot = len(r.pod.others) + 1  # a group of its own, beside its containers'
        group = self.node.cgroup(r.pod, self.attempt_index, slot, self.serial) if self.node is not None else None
        self._network_ready(r)
        with interrupts.held():
            pid, (control, status, out, err), _ = self._fork(c, r, group, handshake=False)
            self.pauses[id(r)] = pause = podsandbox.Pause(pid, control)
        try:
            pause.wait((status, out, err))
        except podsandbox.SandboxFailed:
            del self.pauses[id(r)]
            raise
        return pause

    def _release_pauses(self, runs: list[PodRun], every: bool = False) -> None:
        """End the pause of each pod whose network is let go (`PodNetworks.release`: the kubelet's StopPodSandbox),
        or `every` pause."""
        for r in runs:
            if id(r) in self.pauses and (every or (r.done and r not in self.networks)):
                self.pauses.pop(id(r)).stop()

    def _reject(self, r: PodRun, reason: str, message: str, now: float, status: str = "") -> None:
        """The kubelet refuses the pod (kubelet.go rejectPod: `status` before its status message) or cannot make its
        sandbox: a Warning with `message`, and the pod Failed with that reason; none of its containers starts."""
        self._record(events.rejected(now - self.t0, involved(r), reason, message))
        r.reason = f"{reason}: {status}{message}"
        self._phase(r, Phase.FAILED)

    def _phase(self, r: PodRun, phase: Phase) -> None:
        """The pod's new phase, when it came (its timings) and to the listener."""
        r.timings[phase] = time.monotonic() - self.t0
        r.phase = phase
        self.listener("phase", r)

    def _scratch(self, r: PodRun, p: Process) -> Path:
        """Where a container's sandbox keeps its writable layer."""
        return self._pod_dir(r) / (f"sandbox-{p.slot}" if isinstance(p, ContainerRun) else "sandbox")

    def _evict(self, r: PodRun, why: str, now: float) -> None:
        """Evict a pod as the kubelet's eviction manager does: each running container gets its stop signal, then
        SIGKILL after `eviction.EVICTION_GRACE_S` (capped by --grace-cap), whatever the pod's own grace period; the
        pod fails with reason Evicted once they have all ended (`PodStatus.settle`)."""
        r.evicted = why
        grace = min(eviction.EVICTION_GRACE_S, self.options.grace_cap)
        self._record(events.evicted(now - self.t0, involved(r), why))
        for p in r.processes:
            if p.live:
                p.request(signal.SIGTERM)
                self._record(events.killing(now - self.t0, involved(p), container_name(p)))
                self.stops.append((now + grace, p))

    def _record(self, *happened: events.Event) -> None:
        """Events of the attempt (`events`), in the order they came."""
        self.events.extend(happened)

    def _unhealthy(self, target: prober.Target, kind: str, output: str, now: float) -> None:
        """The prober's event for each failed probe."""
        if isinstance(target, PodRun | ContainerRun):
            self._record(events.unhealthy(now - self.t0, involved(target), kind, output))

    def _end(self, runs: list[PodRun]) -> None:
        """`Reaper.ending`, waited for here."""
        drive(self.reaper.ending(runs))
