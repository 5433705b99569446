"""One workload's controllers, attempt after attempt: its pods created, run (`pod_workers`), restarted in place or
recreated as the Job and JobSet controllers and the kubelet decide, until a verdict. Each workload's loop is a generator
of `pod_workers.Wait`s, so that `workloads` drives the loops of every workload of a simulation side by side
in one thread, as a cluster runs every applied workload at once."""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Generator, Mapping, Sequence
from typing import Any

from jaxinfra.upstream import JAXJOB_NAME_LABEL, JOBSET_NAME_LABEL
from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.cluster.shared import IP_BLOCKS, Simulation
from jaxinfra_sim.controllers import failure_policy, job_failure
from jaxinfra_sim.controllers.jaxjob import failed_condition
from jaxinfra_sim.controllers.job_failure import Failures, JobFailure
from jaxinfra_sim.core import events, model, paths
from jaxinfra_sim.core.podrun import ENDED_WITH_GROUP, Attempt, Phase, PodRun, first_failure
from jaxinfra_sim.core.results import Verdict, WorkloadResult
from jaxinfra_sim.core.steps import Stop, Wait
from jaxinfra_sim.kubelet.pod_workers import Runner
from jaxinfra_sim.kueue import scheduler

BACKOFF_START_S, BACKOFF_CAP_S = 10.0, 300.0
"""The kubelet's CrashLoopBackOff for a container restarted in place: 10 s, doubling to 5 min
(kubernetes pkg/kubelet/kubelet.go backOffPeriod, MaxContainerBackOff). Simulated, not waited."""
CRASH_LOOP_REPEATS = 3
"""Identical failures in a row after which a restart loop that no limit would end is a crash loop."""
MIN_ATTEMPT_INTERVAL_S = 0.25
"""Back-off is not waited, so this bounds a fast loop: at most four attempts a second of wall time."""


ON_A_CLUSTER = "on a cluster it would keep running (raise --timeout to see it end)"
SUSPENDED = (
    "suspended, its controller creates no pod until it is resumed (set it to false, or label the workload "
    "kueue.x-k8s.io/queue-name for a LocalQueue whose ClusterQueue admits it); on a cluster it would wait"
)


def restart_decision(policy: model.RestartPolicy, attempts: list[Attempt], failures: Failures) -> str | None:
    """None to start the group again (how: the last attempt's `restart`), else why the workload has failed.

    Each child Job with failed pods asks the Job controller first (controllers/job_failure.py): within its limits,
    its pods start again (in place under restartPolicy OnFailure) and no other controller notices. A Job that
    fails fails the workload; in a JobSet, the JobSet's failurePolicy rules apply to it
    (controllers/failure_policy.py): fail, or recreate every child Job, counted towards maxRestarts or not.
    """
    last = attempts[-1]
    jobs: dict[tuple[str, int], list[PodRun]] = {}
    for r in last.pods:
        if r.phase == Phase.FAILED:
            jobs.setdefault(job_failure.job_of(r.pod), []).append(r)
    mine = job_failure.job_of(last.first_failure.pod)
    failed: list[tuple[str, JobFailure]] = [last.job_failure] if last.job_failure else []  # the runner's Job controller
    for key in sorted(jobs, key=lambda k: k != mine) if not failed else ():  # the failed pod's own Job first
        job = policy.job(key[0])
        if why := job_failure.job_failed(job, jobs[key], first_failure(jobs[key]), failures.setdefault(key, {})):
            failed.append((key[0], why))
    if not failed:
        last.restart = model.Restart(in_place=bool(jobs) and all(policy.job(rjob).in_place for rjob, _ in jobs))
        return None
    rjob, why = failed[0]
    pod = _failed_job(last, rjob)
    if pod is not None:  # the Job controller's event for the Job's Failed condition
        last.events.append(events.job_failed(last.seconds, pod.pod.namespace, pod.pod.job, why.reason, why.message))
    if policy.operator:  # a Training Operator job: its own Failed condition and event, no Job's
        first = last.first_failure.pod
        namespace, name = first.namespace, first.labels.get(JAXJOB_NAME_LABEL, "")
        failing = sum(r.phase == Phase.FAILED and r.reason != ENDED_WITH_GROUP for r in last.pods) or 1
        reason, message, warning = failed_condition(policy, why, name, failing)
        last.events.append(
            events.operator_job_failed(last.seconds, policy.operator, namespace, name, reason, message, warning)
        )
        return f"{why.summary} (the {policy.operator}'s Failed condition: {reason}, {message!r})"
    if policy.kind == "job":
        return f"{why.summary} (the Job's Failed condition: {why.reason}, {why.message!r})"
    decision = failure_policy.decide(policy.jobset_rules, rjob, why.reason, why.message)
    counted = sum(bool(a.restart and a.restart.jobset and a.restart.counted) for a in attempts[:-1])
    if pod is not None:  # the JobSet controller's: what its failure policy made of it
        exhausted = decision.counts and counted >= policy.max_restarts
        action = "FailedJobs" if not policy.failure_policy else "ReachedMaxRestarts" if exhausted else decision.action
        jobset = pod.pod.labels.get(JOBSET_NAME_LABEL, "")
        if found := events.jobset_failure(last.seconds, pod.pod.namespace, jobset, action, pod.pod.job):
            last.events.append(found)
    if decision.action not in failure_policy.RESTARTS:
        return f"failurePolicy rule {decision.rule}: {decision.action} on the failed Job's {why.reason} ({why.message})"
    if decision.counts and counted >= policy.max_restarts:
        return f"{why.summary}; failurePolicy.maxRestarts ({policy.max_restarts}) exhausted"
    last.restart = model.Restart(jobset=True, counted=decision.counts)
    failures.clear()  # new child Jobs: their counts start anew
    return None


def _failed_job(attempt: Attempt, rjob: str) -> PodRun | None:
    """The first failed pod of a Job of replicatedJob `rjob` ("": a Job's own pods) that names its Job: whose events
    the controllers record."""
    return next(
        (r for r in attempt.pods if r.phase == Phase.FAILED and job_failure.job_of(r.pod)[0] == rjob and r.pod.job),
        None,
    )


def _completed(workload: model.Workload, attempt: Attempt) -> None:
    """Each Job's Completed event, when its last pod succeeded, and a JobSet's once all are."""
    ends: dict[tuple[str, str], float] = {}
    for r in attempt.pods:
        if name := r.pod.job:
            key = (r.pod.namespace, name)
            ends[key] = max(ends.get(key, 0.0), r.timings.get(Phase.SUCCEEDED, attempt.seconds))
    for (namespace, name), at in sorted(ends.items(), key=lambda item: item[1]):
        attempt.events.append(events.job_completed(at, namespace, name))
    if workload.kind == "JobSet":
        attempt.events.append(events.jobset_completed(attempt.seconds, workload.namespace, workload.name))


def _failure_signature(attempt: Attempt) -> tuple[Any, ...]:
    """What makes two failures the same: how the first pod failed and the last thing it said (whichever pod of
    the group it was: they may take turns)."""
    first = attempt.first_failure
    said = first.last_stderr.replace(str(first.cwd), ".") if first.last_stderr and first.cwd else first.last_stderr
    return first.exit_code, first.signal, said


def crash_loop(policy: model.RestartPolicy, attempts: list[Attempt]) -> str | None:
    """Why a loop that no controller limit ends would never end: the same failure CRASH_LOOP_REPEATS times in a row."""
    recent = attempts[-CRASH_LOOP_REPEATS:]
    restarts = [a.restart for a in recent if a.restart is not None]
    ignored = any(r.jobset for r in restarts) and not any(r.jobset and r.counted for r in restarts)  # ...IgnoreMax...
    unlimited = policy.unlimited or ignored
    if not unlimited or len(recent) < CRASH_LOOP_REPEATS or len({_failure_signature(a) for a in recent}) > 1:
        return None
    first = recent[-1].first_failure
    how = f"exits {first.exit_code}" if first.signal is None else f"is killed by {first.signal}"
    after = max(first.timings.values(), default=0.0) - first.timings.get("started", 0.0)
    said = f"; last stderr line: {first.last_stderr}" if first.last_stderr else ""
    forever = (
        "on a cluster it would restart forever under CrashLoopBackOff (10 s, doubling to 5 min)"
        if restarts and restarts[-1].in_place
        else "on a cluster its controller would recreate it forever"
    )
    return (
        f"crash loop: container {first.pod.container} of pod {first.pod.name} "
        f"{how} {CRASH_LOOP_REPEATS} times in a row, "
        f"{after:.1f} s after it starts{said}; {forever}"
    )


def _job_deadlines(workload: model.Workload, job_started: dict[tuple[str, int], float], now: float) -> dict[int, float]:
    """When each pod's Job passes its activeDeadlineSeconds (by the pod's global index), counted from the Job's start
    (the attempt where it was first seen: recreated or restarted pods keep their Job, and its clock)."""
    out = {}
    for pod in workload.pods:
        key = job_failure.job_of(pod)
        deadline = workload.restart.job(key[0]).active_deadline
        if deadline is not None:
            out[pod.global_index] = job_started.setdefault(key, now) + deadline
    return out


def _respawn(
    sim: Simulation,
    manifests: Sequence[Mapping[str, Any]],
    base: int,
    result: WorkloadResult,
    restarts: list[model.Restart],
    position: int,
) -> model.Pod:
    """The pod a Job controller creates in place of the failed one at `position`: the same index and address, a new
    name (drawn from a seed of its own: each replacement is another pod)."""
    result.replacements += 1
    cluster = emulate(
        manifests,
        base,
        check_all=not sim.options.run_command,
        restarts=sum(r.jobset for r in restarts),
        recreated=result.recreated + REPLACEMENT_SEEDS * result.replacements,
        api=sim.api,
        k8s_client=sim.options.k8s_client,
    )
    return next(w for w in cluster.workloads if w.id == result.workload.id).pods[position]


REPLACEMENT_SEEDS = 1_000_000
"""Pod-name seeds of replaced pods start here, apart from those of whole recreations (`WorkloadResult.recreated`)."""


def run_workload(result: WorkloadResult, sim: Simulation, serial: int) -> Generator[Wait, None, None]:
    """Attempts until one succeeds or the controller's rules (or a crash loop, or --timeout) end the workload; each
    `Wait` is what it waits for before its next step. `serial`: its number in the simulation.

    A restart recreates the pods (new names and IPs), except where the kubelet restarts the container in
    place (pod restartPolicy OnFailure): same pods, after a CrashLoopBackOff delay that is recorded, not waited.
    While an attempt runs, its pods are the cluster's (`Simulation.attach`): other workloads resolve their names and
    the NetworkPolicies select them."""
    if result.workload.suspended is not None:
        result.verdict, result.reason = Verdict.NOT_FINISHED, f"{result.workload.suspended} is true: {SUSPENDED}"
        return
    wid = result.workload.id
    manifests = result.manifests
    result.held = scheduler.provisioned(wid, result.workload.provisioning, sim.options.faults.provision)
    if result.held is not None and result.held.pending is not None:  # Kueue never admits it: it waits, not fails
        result.verdict, result.reason = Verdict.NOT_FINISHED, result.held.note
        return
    options = sim.options
    failures: Failures = {}
    job_started: dict[
        tuple[str, int], float
    ] = {}  # each child Job's startTime: its activeDeadlineSeconds count from it
    base = sim.ip_block()
    started = 0.0
    while True:
        index = len(result.attempts)
        restarts = [a.restart for a in result.attempts if a.restart is not None]
        backoff = 0.0
        if restarts and not restarts[-1].in_place:
            result.recreated += 1
            base = sim.ip_block()
        elif restarts:  # the kubelet's back-off grows with each restart in place since the pod was created
            in_place = len(list(itertools.takewhile(lambda r: r.in_place, reversed(restarts))))
            backoff = min(BACKOFF_START_S * 2 ** min(in_place - 1, 10), BACKOFF_CAP_S)
        if index:
            try:
                yield Wait(max(0.0, started + MIN_ATTEMPT_INTERVAL_S - time.monotonic()))
            except Stop as stop:  # between two attempts: no pod to stop
                result.verdict, result.reason = Verdict.NOT_FINISHED, str(stop)
                return
        started = time.monotonic()
        cluster, workload, base = _emulated(result, sim, base, restarts)
        if restarts and restarts[-1].jobset:
            job_started.clear()  # new child Jobs
        for key in job_started:  # the kubelet's back-off, simulated rather than waited, counts towards the deadline
            job_started[key] -= backoff
        # its own folder: workloads of two clusters may share a namespace and a name (two stacks' JobSet/default/train)
        workdir = sim.tmp / f"{serial}-{paths.safe_name(workload.id)}.{result.recreated}"
        runner = Runner(
            workload,
            options,
            workdir,
            sim.listener,
            sim.deadline,
            sim.isolation,
            sim.records(manifests),
            sim.credentials,
            sim.storage,
            sim.node,
            _job_deadlines(workload, job_started, started),
            failures,
            functools.partial(_respawn, sim, manifests, base, result, restarts),
            serial,
            functools.partial(sim.beside, wid),
            sim.proxy,
        )
        sim.attach(manifests, wid, workload.pods, cluster.records_of, runner.descriptors)
        try:
            yield Wait(0.0)  # the workloads starting together are all the cluster's before any pod of theirs begins
            attempt = yield from runner.steps(index)
        except Stop as stop:  # before its pods began, or while they were being stopped: at once (`Runner.steps`)
            result.verdict, result.reason = Verdict.NOT_FINISHED, str(stop)
            return
        finally:
            sim.detach(manifests, wid, workdir)
        attempt.backoff = backoff
        attempt.began = runner.t0 - sim.started  # where its pods' timings count from
        result.attempts.append(attempt)
        sim.listener("attempt", (result, attempt))
        if attempt.stopped is not None:
            result.verdict, result.reason = Verdict.NOT_FINISHED, attempt.stopped
            return
        if attempt.ok:
            result.verdict = Verdict.SUCCEEDED
            _completed(workload, attempt)
            return
        if attempt.machine is not None:  # the machine's verdict, not the job's: no restart would fare better
            result.verdict, result.reason = Verdict.FAILED, attempt.machine
            return
        if attempt.unfinished:
            result.verdict, result.reason = Verdict.NOT_FINISHED, f"{attempt.reason}; {ON_A_CLUSTER}"
            return
        why = restart_decision(workload.restart, result.attempts, failures) or crash_loop(
            workload.restart, result.attempts
        )
        if why is not None:
            result.verdict, result.reason = Verdict.FAILED, f"{attempt.reason}; {why}"
            return
        if time.monotonic() >= sim.deadline:  # its controller would restart it: the workload is not over
            result.verdict = Verdict.NOT_FINISHED
            result.reason = f"{attempt.reason}; --timeout reached before restart {index + 1}; {ON_A_CLUSTER}"
            return


def _emulated(
    result: WorkloadResult, sim: Simulation, base: int, restarts: list[model.Restart]
) -> tuple[model.EmulatedCluster, model.Workload, int]:
    """The cluster as this attempt's controllers create its pods, the workload, and the address block they took: the
    first from `base` on where none of its pods' addresses is one a live pod of another workload holds (each stack's
    pods are numbered from the block's start, so two stacks' workloads may meet in one block)."""
    taken = sim.in_use()
    for _ in range(IP_BLOCKS):
        cluster = emulate(
            result.manifests,
            base,
            check_all=not sim.options.run_command,
            restarts=sum(r.jobset for r in restarts),
            recreated=result.recreated,
            api=sim.api,
            api_objects=sim.server is not None,
            k8s_client=sim.options.k8s_client,
        )
        workload = next(w for w in cluster.workloads if w.id == result.workload.id)
        if not taken.intersection(p.ip for p in workload.pods):
            break
        base = sim.ip_block()
    if sim.server is not None:
        sim.server.publish(cluster.objects)
    return cluster, workload, base
