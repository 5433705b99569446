"""The emulated cluster: manifests in, `model.EmulatedCluster` out — every workload's pods as the
controllers and the kubelet would start them, the DNS names the Services make resolvable, and
every static contract problem.

Data flows one way, each step in the module named for the component it emulates:
`inputs` (the objects) -> `controllers/` (JobSet, Job, Training Operator v1, Trainer v2: which
pods, named how) -> `platform/` (what GKE adds to TPU pods, `gke_tpu`; the Cloud Storage FUSE sidecar its
webhook injects, `standins`) -> `kuberuntime` (env, command, devices) -> `dns` (what resolves) -> `contract`
(would JAX find its group). The processes are then
run by `engine` and `pod_workers`, each pod inside its `sandbox`.

The one deliberate difference from a cluster: pod names draw their random suffix from a seed,
so runs are reproducible (a recreated pod still gets a new name).
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from jaxinfra.admission.store import Store
from jaxinfra.errors import Problem
from jaxinfra.upstream import QUEUE_LABEL, TOPOLOGY_PREFERRED, TOPOLOGY_REQUIRED
from jaxinfra_sim import controllers
from jaxinfra_sim.apiserver import admission
from jaxinfra_sim.cluster import apiview
from jaxinfra_sim.controllers.running import JAX_ENV
from jaxinfra_sim.core import model
from jaxinfra_sim.core.errors import InvalidArgument
from jaxinfra_sim.core.inputs import Objects, Service
from jaxinfra_sim.jax import contract, processes
from jaxinfra_sim.kubelet import kuberuntime
from jaxinfra_sim.kueue import scheduler
from jaxinfra_sim.network.dns import ClusterDns
from jaxinfra_sim.network.netns_setup import GATEWAY, POD_CIDR
from jaxinfra_sim.platform import gcsfuse, gke_tpu

API_PORT = 443
"""The `kubernetes` Service's port, which every pod's env names (KUBERNETES_SERVICE_PORT)."""
DEFAULT_API_HOST = GATEWAY
"""The API server's address: the pods' gateway, the simulation's own side of their veths (an address no pod is
given), where the API server listens in the simulation's network namespace."""


def _ip(ip_block: int, k: int) -> str:
    """The k-th pod's address in the pod CIDR (`netns_setup.POD_CIDR`, 10.244.0.0/16):
    10.244.(ip_block + k // 250).(k % 250 + 2), never .0, .1 (the gateway's in block 0) or above .251."""
    network = ipaddress.IPv4Network(POD_CIDR)
    third = ip_block + k // 250
    if ip_block < 0 or third > 255:
        raise InvalidArgument(f"ip block {ip_block} leaves no room for {k + 1} pods inside the pod CIDR {POD_CIDR}")
    return str(network.network_address + (third << 8) + k % 250 + 2)


def _start_pods(
    drafts: Sequence[controllers.Draft], objects: Objects, ip_block: int, api: tuple[str, int]
) -> list[tuple[list[tuple[controllers.ChildJob, model.Pod]], list[tuple[str, Problem]]]]:
    """Each draft's pods (with their Job) in global-index order, with the env problems the kubelet would hit; the
    k-th pod of the whole call runs on node `sim-node-<k>` with the k-th address, so workloads never share one."""
    out, k = [], 0
    for draft in drafts:
        placed: list[tuple[controllers.ChildJob, model.Pod]] = []
        env_problems: list[tuple[str, Problem]] = []
        for job in draft.jobs if draft.unserved is None else ():  # what is not emulated starts no pod
            webhooked = gcsfuse.gcsfuse_webhook(job.pod_spec, job.pod_annotations)
            # the pods as stored: LimitRanger's defaults are what the kubelet enforces (`admission.limit_ranged`)
            stored = admission.limit_ranged(webhooked, draft.namespace, objects.store)
            job = job if stored is job.pod_spec else replace(job, pod_spec=stored)
            token = admission.mounts_token(job.pod_spec, draft.namespace, objects)
            for index in range(job.completions):
                who = controllers.pod_identity(job, index, objects.recreated)
                placed.append(
                    (
                        job,
                        kuberuntime.start_pod(
                            draft,
                            job,
                            who,
                            index,
                            len(placed),
                            f"sim-node-{k}",
                            _ip(ip_block, k),
                            gke_tpu.pod_env(job, index),
                            api,
                            token,
                            objects,
                            env_problems,
                        ),
                    )
                )
                k += 1
        out.append((placed, env_problems))
    return out


def _workload(
    draft: controllers.Draft,
    pods: list[model.Pod],
    env_problems: list[tuple[str, Problem]],
    dns: ClusterDns,
    objects: Objects,
    services: Mapping[tuple[str, str], Service],
    check_all: bool,
    store: Store,
    k8s_client: bool = True,
) -> model.Workload:
    """The finished workload with its admission and static contract problems."""
    if draft.unserved is not None:
        return _unserved(draft, draft.unserved, objects)
    kinds = processes.decide(draft.id, pods)  # the JAX group is its JAX pods' alone
    pods, launched = processes.ranked(draft.id, pods, kinds.others)
    group = [p for p in pods if p.global_index not in kinds.others]
    parallelism = {job.name: job.parallelism for job in draft.jobs}
    checker = contract.Checker(draft.id, group, dns, objects, services, check_all, k8s_client, parallelism)
    for job in draft.jobs[:1]:  # every Job of a workload shares the pod template's ServiceAccount
        if problem := admission.service_account_problem(draft.id, job.pod_spec, draft.namespace, objects):
            checker.findings.add("service-account", problem)
    # Pods that are not one group (under --run-command, no JAX env, not TPU) may end one by one, freeing quota.
    grouped = check_all or any(p.accelerator == "tpu" or JAX_ENV & p.env.keys() for p in pods)
    quota_waves: list[admission.QuotaWaves] = []
    checker.findings.extend(
        admission.pod_refusals(
            draft.id,
            draft.namespace,
            draft.jobs,
            store,
            lambda job, i: controllers.pod_identity(job, i, objects.recreated),
            None if grouped else quota_waves,
        )
    )
    checker.findings.extend(env_problems)
    queued = scheduler.admit(draft.namespace, draft.labels, _podsets(draft), objects, _topology_requests(draft))
    if queued is not None and not queued.admitted:
        checker.findings.add(
            "kueue",
            lambda: Problem(
                f"{draft.id} metadata.labels[{QUEUE_LABEL}]",
                draft.labels[QUEUE_LABEL],
                f"would stay suspended: {queued.note}",
                queued.fix,
            ),
        )
    if group:
        checker.coordinator()
        checker.counts()
        checker.ranks()
    jax_jobs = ([job for job in draft.jobs if job.name in {p.job for p in group}] if kinds.others else []) or draft.jobs
    return model.Workload(
        kind=draft.kind,
        namespace=draft.namespace,
        name=draft.name,
        pods=tuple(pods),
        groups=len(jax_jobs),
        hosts_per_group=jax_jobs[0].completions if jax_jobs else 0,
        chips_per_host=sum(group[0].process_devices) if group else 1,
        restart=draft.restart,
        problems=tuple(draft.problems + (draft.jax_problems if check_all else []) + checker.findings.problems()),
        others=kinds.others,
        undetermined=checker.undetermined,
        notes=((queued.note,) if queued is not None and queued.admitted else ())
        + tuple(note for note in (kinds.note, launched) if note)
        + (_topology_note(draft) if queued is not None and queued.admitted else ())
        + tuple(checker.notes.values())
        + tuple(
            f"{draft.id}: a ResourceQuota admits {w.at_once} of its {len(pods)} pods at once; the Job controller "
            f"creates the others as those end (until then: {w.event})"
            for w in quota_waves
        )
        + tuple(
            f"{p.where} = {p.value}: --run-command runs its pods as the Job says; if they are one JAX group: {p.fix}"
            for p in (() if check_all else draft.jax_problems)
        ),
        success=draft.success,
        gates=draft.gates,
        waves=_waves(
            draft,
            queued.counts if queued is not None and queued.admitted else None,
            quota_waves[0].at_once if quota_waves else None,
        ),
        suspended=draft.suspended if queued is None else None,  # Kueue suspends what it manages, and resumes it
        provisioning=queued.provisioning if queued is not None and queued.admitted else (),
        queued=queued,
    )


def _topology_requests(draft: controllers.Draft) -> dict[str, str]:
    """The pods' Kueue podset topology requests (annotation -> level), which `scheduler.admit` checks the flavor for."""
    return {
        key: str(value)
        for job in draft.jobs
        for key, value in sorted((job.pod_annotations or {}).items())
        if key in (TOPOLOGY_REQUIRED, TOPOLOGY_PREFERRED)
    }


def _topology_note(draft: controllers.Draft) -> tuple[str, ...]:
    """Kueue's Topology-Aware Scheduling is checked (the flavor's Topology has the level: `scheduler.admit`), not played
    (the simulator's nodes carry no topology labels): a note for the pods' podset topology request, what it would do
    on a cluster."""
    return tuple(
        f"its pods' topology request {key}: {value} is not played here: on a cluster Kueue admits the workload "
        + (
            "only once one such domain has room for all its pods"
            if key == TOPOLOGY_REQUIRED
            else "into the fewest such domains it can"
        )
        + " (the nodes' topology labels, through the ResourceFlavor's Topology)"
        for key, value in _topology_requests(draft).items()
    )


def _unserved(draft: controllers.Draft, unserved: Problem, objects: Objects) -> model.Workload:
    """A workload whose controller is not emulated (a TrainJob on a non-JAX runtime), with no pod: the verdict a cluster
    gives before what it runs matters, else the simulator's refusal (`Draft.unserved`, exit 2). Kueue first: a
    workload it never admits stays suspended, its runtime never used (the same verdict as a served workload's); then
    its own suspend field, outside Kueue (`attempts.SUSPENDED`); else the refusal."""
    queued = scheduler.admit(draft.namespace, draft.labels, _podsets(draft), objects, _topology_requests(draft))
    problems: tuple[Problem, ...] = ()
    if queued is not None and not queued.admitted:
        problems = (
            Problem(
                f"{draft.id} metadata.labels[{QUEUE_LABEL}]",
                draft.labels[QUEUE_LABEL],
                f"would stay suspended: {queued.note}",
                queued.fix,
            ),
        )
    elif queued is not None or draft.suspended is None:
        problems = (unserved,)
    return model.Workload(
        kind=draft.kind,
        namespace=draft.namespace,
        name=draft.name,
        pods=(),
        groups=len(draft.jobs),
        hosts_per_group=draft.jobs[0].completions if draft.jobs else 0,
        chips_per_host=1,
        restart=draft.restart,
        problems=problems,
        notes=(queued.note,) if queued is not None and queued.admitted else (),
        suspended=draft.suspended if queued is None else None,
        queued=queued,
    )


def _podsets(draft: controllers.Draft) -> list[scheduler.PodSet]:
    """The workload's pod sets as Kueue's integrations make them: a pod set per Job, counted as many as run at once
    (its parallelism, or its completions where fewer); a batch Job's `kueue.x-k8s.io/job-min-parallelism` is the
    fewest Kueue may admit (kueue pkg/controller/jobs/job `PodSets`, `minPodsCount`)."""
    return [
        scheduler.PodSet(min(job.parallelism, job.completions), job.pod_spec, draft.min_parallelism)
        for job in draft.jobs
    ]


def _waves(
    draft: controllers.Draft, admitted: Sequence[int] | None = None, quota: int | None = None
) -> tuple[tuple[tuple[int, ...], int], ...]:
    """Each Job whose parallelism is below its completions: its pods' positions and its parallelism (as Kueue set it
    where it admitted fewer pods: `admitted`; at most the pods a ResourceQuota admits at once: `quota`)."""
    parallelism = [job.parallelism for job in draft.jobs] if admitted is None else list(admitted)
    if quota is not None:
        parallelism = [min(p, quota) for p in parallelism]
    return tuple(
        (pods, max(p, 0))
        for (job, pods), p in zip(controllers.positions(draft.jobs), parallelism, strict=True)
        if p < job.completions
    )


def _records(services: Sequence[Service], pods: Sequence[model.Pod]) -> dict[str, str]:
    """What the cluster DNS answers for `pods` (those alive now) under `services`."""
    return ClusterDns(services, pods).hosts


def emulate(
    manifests: Sequence[Mapping],
    ip_block: int = 0,
    check_all: bool = True,
    restarts: int = 0,
    recreated: int = 0,
    api: tuple[str, int] = (DEFAULT_API_HOST, API_PORT),
    api_objects: bool = False,
    before_pods: Callable[[Sequence[controllers.Draft]], None] | None = None,
    k8s_client: bool = True,
) -> model.EmulatedCluster:
    """Every workload's pods as the controllers and kubelet would start them, the DNS names the Services make
    resolvable, and every admission and static contract problem, in manifest order (pods by global index, hosts
    sorted).

    `ip_block` picks the pods' addresses (10.244.<ip_block>.x upward, `_ip`): a recreated workload's pods get new
    ones.
    `check_all=False` (the containers' own commands run) does not require the coordinator and rank env;
    what is set is still checked. `restarts`: how often the workloads have restarted (the JobSet
    restart-attempt label and annotation, which pods may read through the downward API); `recreated`: how often
    their pods were recreated (each time with new names). `api`: the API
    server's address, which every container's env names. `api_objects`: also what the API server would hold.
    `before_pods`: called with the controllers' drafts before any pod is made (the simulator's capacity check, which
    a million-pod JobSet must meet before a million pod objects exist). `k8s_client`: the pods' Python can import
    `kubernetes` (Options.k8s_client), which JAX's Kubernetes detection needs to find a rank no env names.
    """
    store = Store(m for m in manifests if isinstance(m, Mapping))
    objects = Objects(restarts=restarts, recreated=recreated, store=store)
    drafts, problems = controllers.drafts(manifests, objects)
    if before_pods is not None:
        before_pods(drafts)
    services = dict(objects.services)
    for draft in drafts:  # controller-created Services, only where none exists yet
        for svc in draft.services:
            services.setdefault((svc.namespace, svc.name), svc)
    objects.claims.update(claim for draft in drafts for claim in draft.claims)  # before the kubelet looks for them
    started = _start_pods(drafts, objects, ip_block, api)
    dns = ClusterDns(services.values(), [p for placed, _ in started for _, p in placed])
    workloads = tuple(
        _workload(d, [p for _, p in placed], env_problems, dns, objects, services, check_all, store, k8s_client)
        for d, (placed, env_problems) in zip(drafts, started)
    )
    served = (
        apiview.api_objects(manifests, drafts, [placed for placed, _ in started], set(objects.services))
        if api_objects
        else ()
    )
    return model.EmulatedCluster(
        workloads=workloads,
        hosts=dns.hosts,
        problems=tuple(problems + dns.findings.problems()),
        objects=served,
        records_of=functools.partial(_records, tuple(services.values())),
    )
