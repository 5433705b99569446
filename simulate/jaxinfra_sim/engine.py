"""Simulate every workload of a set of manifests: private DNS, attempts, restart semantics, verdicts."""

from __future__ import annotations

import contextlib
import functools
import importlib
import itertools
import os
import random
import secrets
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jaxinfra.errors import Problem, Refused, Unserved
from jaxinfra.upstream import JOBSET_NAME_LABEL

if TYPE_CHECKING:
    from jaxinfra_sim.apiserver import ApiServer
from jaxinfra_sim import (
    capacity,
    controllers,
    events,
    eviction,
    kubeproxy,
    kueue,
    model,
    netpol,
    paths,
    rootfs,
    runtime,
    sandbox,
    volumes,
)
from jaxinfra_sim.container import Credentials
from jaxinfra_sim.controllers import failure_policy, job_failure
from jaxinfra_sim.controllers.job_failure import Failures, JobFailure
from jaxinfra_sim.emulation import API_PORT, DEFAULT_API_HOST, emulate
from jaxinfra_sim.errors import MachineLimit, Unavailable
from jaxinfra_sim.node import Node
from jaxinfra_sim.options import Options
from jaxinfra_sim.platform import standins
from jaxinfra_sim.podrun import Attempt, Listener, Phase, PodRun, first_failure
from jaxinfra_sim.runner import Runner
from jaxinfra_sim.sources import Source

#: Each attempt's pods get fresh IPs (as recreated pods do): blocks of 40 x 250 addresses.
IP_BLOCK = 40
IP_BLOCKS = 6
BACKOFF_START_S, BACKOFF_CAP_S = 10.0, 300.0
"""The kubelet's CrashLoopBackOff for a container restarted in place: 10 s, doubling to 5 min
(kubernetes pkg/kubelet/kubelet.go backOffPeriod, MaxContainerBackOff). Simulated, not waited."""
CRASH_LOOP_REPEATS = 3
"""Identical failures in a row after which a restart loop that no limit would end is a crash loop."""
MIN_ATTEMPT_INTERVAL_S = 0.25
"""Back-off is not waited, so this bounds a fast loop: at most four attempts a second of wall time."""


class Verdict(StrEnum):
    """A workload's verdict: `pending` until it is decided; `not finished` for one still running (or about to
    restart) at --timeout, or one that would wait (suspended): neither a success nor a failure its controller would
    report. The simulation passes only when every workload `succeeded`: nothing else proved the job ends well."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    NOT_FINISHED = "not finished"


ON_A_CLUSTER = "on a cluster it would keep running (raise --timeout to see it end)"
SUSPENDED = (
    "suspended, its controller creates no pod until it is resumed (set it to false, or label the workload "
    "kueue.x-k8s.io/queue-name for a LocalQueue whose ClusterQueue admits it); on a cluster it would wait"
)


@dataclass
class WorkloadResult:
    source: str  # the file (or stack) its workload object came from
    workload: model.Workload
    attempts: list[Attempt] = field(default_factory=list)
    verdict: Verdict = Verdict.PENDING
    reason: str | None = None
    recreated: int = 0  # times its pods were recreated (new names and IPs); in-place restarts keep them
    replacements: int = 0  # pods its Jobs created in place of failed ones while the others ran on
    manifests: Sequence[Mapping[str, Any]] = field(default=(), repr=False, compare=False)  # its cluster's objects
    held: kueue.Provisioned | None = None  # what Kueue's ProvisioningRequest checks held it for, before it ran

    @property
    def restarts(self) -> int:
        """How often its controllers started pods again: whole attempts, and pods its Jobs replaced within one."""
        return max(len(self.attempts) - 1, 0) + sum(len(a.replaced) for a in self.attempts)

    def as_dict(self) -> dict[str, Any]:
        w = self.workload
        return {
            "source": self.source,
            "id": w.id,
            "kind": w.kind,
            "namespace": w.namespace,
            "name": w.name,
            "pods": len(w.pods),
            "verdict": self.verdict,
            "reason": self.reason,
            "restarts": self.restarts,
            "problems": [_problem(p) for p in w.problems],
            "notes": list(w.notes),
            "held": None
            if self.held is None
            else {"seconds": self.held.seconds, "pending": self.held.pending, "note": self.held.note},
            "attempts": [
                {
                    "index": a.index,
                    "ok": a.ok,
                    "reason": a.reason,
                    "seconds": round(a.seconds, 3),
                    "backoff_s": a.backoff,
                    "then": a.restart.words if a.restart is not None else None,
                    "memory_peak": a.memory_peak,
                    "pods": [r.as_dict() for r in a.pods],
                    "replaced": [r.as_dict() for r in a.replaced],
                    "events": [e.as_dict() for e in sorted(a.events, key=lambda e: e.at)],
                }
                for a in self.attempts
            ],
        }


@dataclass
class Report:
    results: list[WorkloadResult]
    problems: tuple[Problem, ...] = ()
    seconds: float = 0.0
    api_log: list[str] = field(default_factory=list)  # the API server's request log, when the simulation had one
    notes: list[str] = field(
        default_factory=list
    )  # what the run cannot tell (a CPU shadow's limits), objects applied twice
    inputs: dict[str, list[str]] = field(
        default_factory=dict
    )  # per file (or stack), the objects the clusters hold from it
    machine: str | None = None  # this machine gave out while a workload ran (its verdict ended the simulation)

    @property
    def ok(self) -> bool:
        return not self.problems and bool(self.results) and all(r.verdict == Verdict.SUCCEEDED for r in self.results)

    @property
    def refused(self) -> list[Problem]:
        """What the API server refuses, among every problem: then nothing runs."""
        return [
            p
            for p in (*self.problems, *(q for r in self.results for q in r.workload.problems))
            if isinstance(p, Refused)
        ]

    @property
    def unserved(self) -> list[Problem]:
        """What the simulator does not serve (`errors.Unserved`: a kind it does not run), among every problem: then
        nothing runs, and the command stops on its input."""
        return [
            p
            for p in (*self.problems, *(q for r in self.results for q in r.workload.problems))
            if isinstance(p, Unserved)
        ]

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "problems": [_problem(p) for p in self.problems],
            "api_server": self.api_log,
            "notes": self.notes,
            "machine": self.machine,
            "inputs": self.inputs,
            "workloads": [r.as_dict() for r in self.results],
        }


def _problem(p: Problem) -> dict[str, Any]:
    return {
        "where": p.where,
        "file": p.file,
        "document": p.document,
        "path": p.path,
        "value": repr(p.value),
        "message": p.message,
        "fix": p.fix,
    }


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


Sources = Sequence[Source]
"""The clusters of one invocation (simulate/sources.py): all its YAML files one, each stack its own."""


def _probed(pod: model.Pod) -> list[tuple[str, tuple[model.Probe, ...]]]:
    """Each of the pod's containers' name and probes."""
    return [(pod.container, pod.probes), *((c.name, c.probes) for c in pod.others)]


def _plan(
    sources: Sources,
    check_all: bool,
    host_paths: Mapping[str, Path] | None = None,
    k8s_client: bool = True,
    images: Mapping[str, object] | None = None,
) -> Report:
    """Emulate each source as its own cluster; its static problems, before anything runs, each named by its file
    (`host_paths`: the hostPaths --host-path maps, checked as the kubelet checks a node's path; `k8s_client`: the
    pods' Python has `kubernetes`, which JAX's Kubernetes detection needs)."""
    report = Report([])
    for source in sources:
        cluster = emulate(
            source.manifests,
            0,
            check_all,
            before_pods=functools.partial(_refuse_drafts, not check_all),
            k8s_client=k8s_client,
        )
        report.problems += source.problems + tuple(source.where(p) for p in cluster.problems)
        report.problems += tuple(
            source.where(p) for w in cluster.workloads for p in volumes.mapped_problems(w, host_paths or {})
        )
        report.notes += source.notes
        report.notes += [n for w in cluster.workloads for n in volumes.host_path_notes(w, host_paths or {})]
        report.notes += netpol.of_manifests(source.manifests, [p for w in cluster.workloads for p in w.pods]).notes
        if not check_all:  # the containers that run here only because the simulator stands in for their image
            report.notes += [
                note
                for w in cluster.workloads
                if w.pods
                for note in standins.notes(w.id, {c.name: c.image for c in w.pods[0].others})
            ]
        if skipped := controllers.not_simulated(source.manifests):
            report.notes.append(
                f"stored, not simulated (the simulator runs {controllers.SUPPORTED}): {', '.join(skipped)}"
            )
        for file, ids in source.inputs().items():
            report.inputs.setdefault(file, []).extend(ids)
        report.results += [
            WorkloadResult(source.file_of(w.id), w, manifests=source.manifests) for w in cluster.workloads
        ]
        if not cluster.workloads and len(sources) > 1:
            report.notes.append(
                f"{source.name}: no workload here; each stack file is a cluster of its own and all the YAML "
                "another, so these objects reach no other cluster's workloads"
            )
        if not check_all:  # the containers' own commands run: each needs one
            report.problems += tuple(
                source.where(
                    Problem(
                        f"{w.id} container {name}",
                        None,
                        "no command: the image's entrypoint is not known here",
                        "set command (and args) on the container, or give its image as an OCI image layout or a "
                        "`docker save` archive (--image IMAGE=PATH)",
                    )
                )
                for w in cluster.workloads
                if w.pods
                for name, command, image in [
                    (w.pods[0].container, w.pods[0].command, w.pods[0].image),
                    *((c.name, c.command, c.image) for c in w.pods[0].others),
                ]
                if not command and not _runs_something((images or {}).get(image))
            )
            report.problems += tuple(
                source.where(
                    Problem(
                        f"{w.id} container {c.container} securityContext.runAsNonRoot",
                        True,
                        f"CreateContainerConfigError: {why} (the kubelet refuses to start it)",
                        "set runAsUser to a non-zero uid, or give the image a numeric non-root USER",
                    )
                )
                for w in cluster.workloads
                if w.pods
                for c in (w.pods[0], *(w.pods[0].as_container(o) for o in w.pods[0].others))
                for why in [_non_root_refused(c, (images or {}).get(c.image))]
                if why
            )
        else:
            report.notes += [
                f"{w.id}: the probe runs in container {w.pods[0].container} alone; not run: "
                + ", ".join(f"{c.role} container {c.name}" for c in w.pods[0].others)
                + " (--run-command runs every container)"
                for w in cluster.workloads
                if w.pods and w.pods[0].others
            ]
            report.notes += [
                f"{w.id}: its containers' probes ({', '.join(probed)}) are not run: the built-in probe does not serve "
                "what they check (--run-command runs them)"
                for w in cluster.workloads
                if w.pods
                for probed in [
                    sorted({f"{p.kind} of {name}" for name, ps in _probed(w.pods[0]) for p in ps}),
                ]
                if probed
            ]
    if not report.results and not report.problems:
        report.problems = (
            Problem(
                "manifests",
                0,
                f"no workload to simulate: the simulator runs {controllers.SUPPORTED}",
                "pass the YAML that `jaxinfra synth` writes, a stack file, or manifests holding one of those",
            ),
        )
    return report


PRELOAD = ("jax", "jaxinfra_sim.probe")
"""Imported once, before the probe pods are forked, so that every pod starts warm."""
PRELOAD_IF_PRESENT = ("jaxlib.mlir.dialects.mhlo", "jaxlib.mlir.dialects.builtin")
"""MLIR dialects JAX imports only at a process's first lowering, which in every group is rank 0's,
on the critical path; a name this jaxlib lacks is skipped."""


def _runs_something(image: object) -> bool:
    """An image given whole (`oci_image.Image`) whose Entrypoint or Cmd a container without `command` runs."""
    from jaxinfra_sim.oci_image import Image

    return isinstance(image, Image) and bool(image.config.entrypoint or image.config.cmd)


def _non_root_refused(pod: model.Pod, image: object) -> str | None:
    """Why the kubelet refuses the container `pod` is under runAsNonRoot, given its image whole (`oci_image`)."""
    from jaxinfra_sim.image_config import non_root_refused
    from jaxinfra_sim.oci_image import Image

    return non_root_refused(pod.security, image.config) if isinstance(image, Image) else None


def preload() -> None:
    """What the probe pods need, imported in the process that will fork them."""
    for name in PRELOAD:
        importlib.import_module(name)
    for name in PRELOAD_IF_PRESENT:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


@dataclass
class _Simulation:
    """What the workloads of one simulation share: its options, where its pods live, their addresses, the API server."""

    options: Options
    listener: Listener
    isolation: str  # the sandbox strategy that works here
    tmp: Path
    deadline: float
    seed: int  # names the simulation's cgroups: concurrent simulations use other ones
    api: tuple[str, int]  # the API server's address, which every pod's env names
    credentials: Credentials | None = None  # tokens and CA for pods that mount a ServiceAccount token
    server: ApiServer | None = None
    node: Node | None = None  # the cgroups and pod network its pods share
    blocks: Iterator[int] = field(default_factory=itertools.count)

    def ip_block(self) -> int:
        """Addresses of their own for the next pods that are created (`emulation._ip`)."""
        return next(self.blocks) % IP_BLOCKS * IP_BLOCK

    def storage(self, mount: model.Mount) -> Path:
        """Where a claim or a bucket keeps its data: the folder --volume names, else one for the whole simulation;
        where a hostPath is: the folder (or file) --host-path names, else its path in its node's own folder (one per
        simulated node, empty at first: never this machine's path)."""
        if mount.kind == "hostPath":
            node = self.tmp / "nodes" / paths.safe_name(mount.node)
            return self.options.host_paths.get(mount.key) or paths.on_node(node, mount.key, f"volume {mount.volume}")
        return self.options.volumes.get(mount.key) or self.tmp / f"{mount.kind}s" / paths.safe_name(mount.key)


def _start_api_server(sim: _Simulation, runnable: Sequence[WorkloadResult]) -> None:
    """Only where some pod mounts a ServiceAccount token (and so can reach it) does the simulation get its API
    server: each such ServiceAccount a bearer token, the pods the server's CA."""
    accounts = sorted({(p.namespace, p.service_account) for r in runnable for p in r.workload.pods if p.token})
    if not accounts:
        return
    from jaxinfra_sim.apiserver import ApiServer
    from jaxinfra_sim.rbac import Subject

    tokens = {account: secrets.token_urlsafe(32) for account in accounts}
    sim.server = ApiServer(
        sim.api[0], {token: Subject(*account) for account, token in tokens.items()}, sim.tmp / "apiserver.log"
    )
    network = sim.node.network if sim.node is not None else None
    sim.server.start([], network.join if network is not None else None)
    sim.api = (sim.api[0], sim.server.port)
    sim.credentials = Credentials(sim.server.ca_pem, tokens)


def _shifted_folders(options: Options) -> list[str]:
    """As root, the folders the user mapped are written as the containers' shifted ids, not the machine's root: the
    one note that says so."""
    mapped = sorted({str(p) for p in [*options.volumes.values(), *options.host_paths.values()]})
    if os.geteuid() != 0 or not mapped:
        return []
    return [
        f"a container's root is this machine's uid {runtime.id_base()} here (its own user namespace, never the "
        f"machine's root): {', '.join(mapped)} is written as that id, so a folder it must write needs to be writable "
        "by it (chmod o+w), and what it leaves there is that id's"
    ]


def _check_ids(runnable: Sequence[WorkloadResult], node: Node, images: Mapping[str, object]) -> None:
    """Unprivileged, every container's uid, gid and groups (its image's User where the image is given whole: `images`)
    must be ids the pods' user namespace maps (0, the caller, and its subordinate ids): `Unavailable` (exit 3) names
    the first container that needs more, and the fix."""
    if os.geteuid() == 0:
        return
    from jaxinfra_sim.image_config import applied
    from jaxinfra_sim.oci_image import Image

    subordinate = node.network.subordinate if node.network is not None else None
    for r in runnable:
        for pod in r.workload.pods:
            for c in (pod, *(pod.as_container(o) for o in pod.others)):
                image = images.get(c.image)
                s = applied(c, image).security if isinstance(image, Image) else c.security
                missing = runtime.unmapped({s.uid, s.gid, *s.groups}, subordinate)
                if missing:
                    have = f"only {subordinate[0][1]} subordinate ids" if subordinate else "none (/etc/subuid)"
                    raise Unavailable(
                        f"pod {pod.hostname} runs as ids {sorted(missing)}, which a container of an unprivileged user "
                        f"needs from its subordinate ids, and this user has {have}",
                        "sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $USER (and Debian's "
                        "uidmap package), or run jaxinfra simulate as root",
                    )


def simulate(sources: Sources, options: Options, listener: Listener) -> Report:
    """Run every workload, one after another: each source (all the YAML, or one stack) is one cluster."""
    started = time.monotonic()
    deadline = started + options.timeout
    report = _plan(sources, not options.run_command, options.host_paths, options.k8s_client, options.images)
    report.problems += _unknown_checks(report, options)
    runnable = [r for r in report.results if not r.workload.problems]
    for r in report.results:
        if r.workload.problems:
            r.verdict, r.reason = Verdict.FAILED, f"{len(r.workload.problems)} problems; not started"
    if runnable and not report.problems and not report.refused:
        admit(runnable, options)
        isolation = sandbox.preflight()  # before anything runs: can pods get their own /etc/hosts here?
        if options.run_command:
            runtime.binary()  # the OCI runtime their own commands run under
        parent = runtime.scratch_parent() if options.run_command else None
        with tempfile.TemporaryDirectory(prefix="jaxinfra-sim-", dir=parent) as tmp:
            # Searchable (not readable) by others: as root, the OCI runtime reaches each container's root as the
            # container's own ids (`runtime.ID_BASE`), not the machine's root.
            os.chmod(tmp, 0o711)
            seed = random.SystemRandom().randrange(1, 255)
            sim = _Simulation(options, listener, isolation, Path(tmp), deadline, seed, (DEFAULT_API_HOST, API_PORT))
            try:
                rootfs.machine()  # read once, before any pod is forked
                limited = any(
                    p.memory_limit
                    or p.cpu_millis
                    or options.run_command
                    and any(c.memory_limit or c.cpu_millis for c in p.others)
                    for r in runnable
                    for p in r.workload.pods
                )
                sim.node = Node.create(f"{os.getpid()}-{seed}", limited, options.egress)
                report.notes.extend(sim.node.notes)
                report.notes.extend(eviction.notes(p for r in runnable for p in r.workload.pods))
                if options.run_command:
                    _check_ids(runnable, sim.node, options.images)
                    report.notes.extend(_shifted_folders(options))
                _start_api_server(sim, runnable)
                if not options.run_command:
                    preload()
                for result in runnable:
                    _run_workload(result, result.manifests, sim)
                    report.machine = result.attempts[-1].machine if result.attempts else None
                    if report.machine is not None:
                        break
            finally:
                if sim.server is not None:
                    sim.server.close()
                    report.api_log = (sim.tmp / "apiserver.log").read_text(errors="replace").splitlines()
                if sim.node is not None:
                    sim.node.close()
    report.seconds = time.monotonic() - started
    return report


def _unknown_checks(report: Report, options: Options) -> tuple[Problem, ...]:
    """A --provision naming no ProvisioningRequest AdmissionCheck that a workload here waits for would rehearse
    nothing: each is a problem, with the checks there are."""
    known = sorted({c for r in report.results for c in r.workload.provisioning})
    return tuple(
        Problem(
            "--provision",
            check,
            "no workload here waits for a ProvisioningRequest AdmissionCheck of this name",
            f"use one of {', '.join(known)}"
            if known
            else "remove it: no ClusterQueue of these inputs names an AdmissionCheck of Kueue's ProvisioningRequest "
            "controller (a flex-start pool: NodePool(flex_start=True) with Cluster(kueue=True))",
        )
        for check in options.faults.provision
        if check not in known
    )


def admit(runnable: Sequence[WorkloadResult], options: Options) -> None:
    """Capacity admission: refuse (MachineLimit, exit 3) a workload this machine cannot hold, before any pod starts;
    they run one at a time, so each must fit by itself."""
    capacity.raise_descriptor_limit()
    for r in runnable:
        pods = r.workload.pods
        _refuse_past(capacity.need(r.workload.id, len(pods), sum(p.devices for p in pods), options.run_command))


def _refuse_drafts(run_command: bool, drafts: Sequence[controllers.Draft]) -> None:
    """Capacity admission before any pod object exists (a JobSet of a million pods is refused, not built): each
    workload's pods at one device each, the least they can be."""
    for draft in drafts:
        if draft.unserved is not None:  # it starts no pod here
            continue
        pods = sum(job.completions for job in draft.jobs)
        _refuse_past(capacity.need(draft.id, pods, pods, run_command))


def _refuse_past(need: capacity.Need) -> None:
    if why := capacity.refusal(need):
        raise MachineLimit(why)


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
    sim: _Simulation,
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


def _run_workload(result: WorkloadResult, manifests: Sequence[Mapping[str, Any]], sim: _Simulation) -> None:
    """Attempts until one succeeds or the controller's rules (or a crash loop, or --timeout) end the workload.

    A restart recreates the pods (new names and IPs), except where the kubelet restarts the container in
    place (pod restartPolicy OnFailure): same pods, after a CrashLoopBackOff delay that is recorded, not waited."""
    if result.workload.suspended is not None:
        result.verdict, result.reason = Verdict.NOT_FINISHED, f"{result.workload.suspended} is true: {SUSPENDED}"
        return
    wid = result.workload.id
    result.held = kueue.provisioned(wid, result.workload.provisioning, sim.options.faults.provision)
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
        time.sleep(max(0.0, started + MIN_ATTEMPT_INTERVAL_S - time.monotonic()) if index else 0.0)
        started = time.monotonic()
        cluster = emulate(
            manifests,
            base,
            check_all=not options.run_command,
            restarts=sum(r.jobset for r in restarts),
            recreated=result.recreated,
            api=sim.api,
            api_objects=sim.server is not None,
            k8s_client=options.k8s_client,
        )
        if sim.server is not None:
            sim.server.publish(cluster.objects)
        workload = next(w for w in cluster.workloads if w.id == wid)
        if sim.node is not None and sim.node.network is not None:  # this attempt's pods, as its policies select them
            sim.node.network.load_rules(netpol.of_manifests(manifests, workload.pods).ruleset)
        if restarts and restarts[-1].jobset:
            job_started.clear()  # new child Jobs
        for key in job_started:  # the kubelet's back-off, simulated rather than waited, counts towards the deadline
            job_started[key] -= backoff
        runner = Runner(
            workload,
            options,
            sim.tmp / f"{paths.safe_name(workload.id)}.{result.recreated}",
            sim.listener,
            sim.deadline,
            sim.isolation,
            cluster.hosts,
            sim.credentials,
            sim.storage,
            sim.node,
            _job_deadlines(workload, job_started, started),
            failures,
            functools.partial(_respawn, sim, manifests, base, result, restarts),
            kubeproxy.services(manifests),
        )
        attempt = runner.run(index)
        attempt.backoff = backoff
        result.attempts.append(attempt)
        sim.listener("attempt", (result, attempt))
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
