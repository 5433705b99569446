"""The Job and JobSet controllers while an attempt's pods run (kubernetes pkg/controller/job job_controller.go,
kubernetes-sigs/jobset pkg/controllers/jobset_controller.go): when each pod may be created (a JobSet's `dependsOn`
and `startupPolicy` gates, a Job's parallelism), a failed pod recreated within its Job's limits, a Job past its
activeDeadlineSeconds, a workload complete by its success policy. It reads and writes the attempt's pod records
(`podrun`); the kubelet's part (starting and stopping containers) is the runner's.

What these controllers decide before any pod exists (the pods, their names, the gates, the limits) is in the
other modules of this package; `job_failure` and `failure_policy` hold the failure rules both use."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from jaxinfra_sim.controllers import job_failure
from jaxinfra_sim.controllers.job_failure import Failures
from jaxinfra_sim.core import model
from jaxinfra_sim.core.events import Reason
from jaxinfra_sim.core.podrun import Attempt, Phase, PodRun

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


class Running:
    """The controllers' view of one workload's attempt: `ready` is the kubelet's Ready condition of a pod."""

    def __init__(
        self,
        workload: model.Workload,
        run_command: bool,
        ready: Callable[[PodRun], bool],
        job_deadlines: Mapping[int, float] | None = None,
        failures: Failures | None = None,
        respawn: Callable[[int], model.Pod] | None = None,
    ):
        """`job_deadlines`: when each pod's Job passes its activeDeadlineSeconds (monotonic, by the pod's global
        index); `failures`: each Job's failure counts, kept across attempts; `respawn`: a new pod at a position."""
        self.workload = workload
        self.run_command = run_command
        self.ready = ready
        self.job_deadlines = job_deadlines or {}
        self.failures = failures if failures is not None else {}
        self.respawn = respawn
        self.jax_group: bool | None = None  # decided at the first failure (`_one_group`)
        self.gates: dict[int, list[model.Gate]] = {}  # by pod position: what its creation waits for
        for gate in workload.gates:
            for i in gate.pods:
                self.gates.setdefault(i, []).append(gate)
        self.waves = {i: wave for wave in workload.waves for i in wave[0]}  # by pod position: its Job's, if any

    def may_create(self, r: PodRun, runs: list[PodRun]) -> bool:
        """Whether the pod's controller creates it now: no gate holds it and its Job's parallelism has room."""
        return self.waiting(r, runs) is None and self.slot(r, runs)

    def never_created(self, r: PodRun, gate: model.Gate | None) -> str:
        """Why a pod that never started was not: the gate that held it, its Job's parallelism, or neither."""
        wave = None if r.begun else self.waves.get(r.pod.global_index)
        if gate is not None:
            return f"never created: its JobSet's {gate.rule} was not reached"
        if wave is not None:
            return f"never created: its Job's parallelism ({wave[1]}) was taken by its other pods"
        return "never started"

    def past_deadline(self, runs: list[PodRun], now: float) -> bool:
        """Whether a Job with pods still running passed its activeDeadlineSeconds: the Job controller then deletes its
        active pods (gracefully: the runner's `_end`) and fails it (job_controller.go pastActiveDeadline,
        DeadlineExceeded)."""
        past = [r for r in runs if not r.done and now >= self.job_deadlines.get(r.pod.global_index, float("inf"))]
        for r in past:
            r.reason, r.deadline_exceeded = (
                "DeadlineExceeded: its Job was active longer than activeDeadlineSeconds",
                True,
            )
        return bool(past)

    def complete(self, runs: list[PodRun]) -> bool:
        """Every pod succeeded, or the workload's success rule is met: then its controller deletes the pods still
        running (jobset_controller.go Reconcile: a finished JobSet deletes its active Jobs), stopped as a deleted
        pod is, SIGTERM and its grace period (the runner's `_end`)."""
        succeeded = [r.phase == Phase.SUCCEEDED for r in runs]
        if all(succeeded):
            return True
        rule = next((s for s in self.workload.success if s.met(succeeded)), None)
        if rule is None:
            return False
        for r in runs:
            if not r.done:
                r.reason, r.deleted = f"deleted: {self.workload.id} completed ({rule.rule})", True
        return True

    def replace_failed(
        self, runs: list[PodRun], attempt: Attempt, stop: Callable[[list[PodRun]], None]
    ) -> list[PodRun] | None:
        """The Job controller, for pods that are not one JAX group: each failed pod counts against its own Job
        (controllers/job_failure.py) while the others run on; within the Job's limits it is recreated (restartPolicy
        Never: a new pod at its index, with a new name, its address, fresh emptyDirs) and the new pods are returned
        (`stop` ends what is left of each failed one: its sidecars); an index past backoffLimitPerIndex fails for good
        while the others run on; a Job past its limits fails
        (`attempt.job_failure`; None: the attempt ends, its other pods are deleted). A JAX group ends at its first
        failure instead (None), as its processes would once the coordinator noticed; so does a pod whose container
        restarts in place (OnFailure: the engine restarts the group in place, its back-off recorded), and a Job with
        no limit (the engine's crash-loop rule ends its loop)."""
        if self.respawn is None:
            return None
        if self.jax_group is None:
            self.jax_group = self._one_group(runs)
        if self.jax_group:
            return None
        created: list[PodRun] = []
        for i, r in enumerate(runs):
            if r.phase != Phase.FAILED or r.index_failed:
                continue
            key = job_failure.job_of(r.pod)
            policy = self.workload.restart.job(key[0])
            if policy.in_place or policy.backoff_limit is None and policy.backoff_limit_per_index is None:
                return None  # the engine restarts it in place (its back-off recorded), or ends its loop
            failed = job_failure.job_failed(policy, [r], r, self.failures.setdefault(key, {}))
            if (
                failed is not None
                and failed.reason == Reason.FAILED_INDEXES
                and policy.backoff_limit_per_index is not None
            ):
                r.index_failed = True  # for good; the Job's other indexes run on (job_controller.go: failedIndexes)
                continue
            if failed is not None:
                attempt.job_failure = (key[0], failed)
                return None
            stop([r])  # what is left of it (its sidecars)
            new = PodRun(self.respawn(i), generation=r.generation + 1)
            attempt.replaced.append(r)
            runs[i] = new
            created.append(new)
        for key in dict.fromkeys(job_failure.job_of(r.pod) for r in runs if r.index_failed):
            policy = self.workload.restart.job(key[0])
            mine = [r for r in runs if job_failure.job_of(r.pod) == key]
            lost, limit = sum(r.index_failed for r in mine), policy.max_failed_indexes
            if (limit is not None and lost > limit) or all(r.index_failed or r.phase == Phase.SUCCEEDED for r in mine):
                # job_controller.go: past maxFailedIndexes at once, else once no index is left running
                gone = [r.pod.completion_index for r in mine if r.index_failed]
                attempt.job_failure = (key[0], job_failure.failed_indexes(policy, lost, gone))
                return None
        return created

    def _one_group(self, runs: list[PodRun]) -> bool:
        """Whether the workload's pods are one JAX group, whose processes all fail once one of them has: always under
        the probe; under --run-command, where the env gives JAX a coordinator (a JAX env contract, GKE's TPU env) or
        some pod's process has loaded jaxlib (a program with a bare `jax.distributed.initialize()`)."""
        if not self.run_command:
            return True
        if any(r.pod.accelerator == "tpu" or JAX_ENV & r.pod.env.keys() for r in runs):
            return True
        return any(_loaded_jax(p.pid) for r in runs for p in r.processes if p.live and p.pid is not None)

    def slot(self, r: PodRun, runs: list[PodRun]) -> bool:
        """Whether its Job's parallelism lets the controller create the pod now: fewer of the Job's pods active than
        its parallelism, counting those before it first (job_controller.go manageJob: the lowest missing indexes)."""
        wave = self.waves.get(r.pod.global_index)
        if wave is None:
            return True
        positions, parallelism = wave
        before = [runs[i] for i in positions if i < r.pod.global_index]
        active = sum(p.begun and not p.done for p in (runs[i] for i in positions))
        return active < parallelism and all(p.begun for p in before)

    def waiting(self, r: PodRun, runs: list[PodRun]) -> model.Gate | None:
        """What keeps the pod's controller from creating it yet (`model.Gate`), or None."""
        for gate in self.gates.get(r.pod.global_index, ()):
            pods = [[runs[i] for i in job] for job in gate.jobs]
            if gate.status == "Complete" and not all(p.phase == Phase.SUCCEEDED for job in pods for p in job):
                return gate
            if gate.status == "Ready" and not all(
                any(p.phase == Phase.FAILED for p in job)
                or all(p.phase == Phase.SUCCEEDED or self.ready(p) for p in job)
                for job in pods
            ):
                return gate
        return None
