"""The workload controllers: each turns one manifest into the Indexed Jobs (or operator pods) it creates, as the
Job controller (Kubernetes 1.37, pkg/controller/job), JobSet's (kubernetes-sigs/jobset v0.12.0), the Kubeflow Training
Operator's (v1.9.4, JAXJob) and Kubeflow Trainer's (v2.3.0, TrainJob) do; their policies while pods run (`running`,
`job_failure`, `failure_policy`). Adding a workload kind is one module here and one line in `WORKLOAD_KINDS` (this
registry: the kinds served, the ones not, and each pod's identity)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jaxinfra.admission.store import key_of
from jaxinfra.errors import Problem, Unserved
from jaxinfra.schemas import operators
from jaxinfra.upstream import BATCH_API, JAXJOB_API, JOBSET_API, KUBEFLOW_API_GROUP, TRAINER_API
from jaxinfra_sim.controllers import garbage
from jaxinfra_sim.controllers import job as job_controller
from jaxinfra_sim.controllers.base import SUPPORTED, ChildJob, Draft, Identity, init_timeout_problems, positions
from jaxinfra_sim.controllers.jaxjob import jaxjob
from jaxinfra_sim.controllers.job import indexed_job
from jaxinfra_sim.controllers.jobset import jobset
from jaxinfra_sim.controllers.trainjob import trainjob
from jaxinfra_sim.core.inputs import PASSIVE_KINDS, Objects, meta, oid, strings

__all__ = [
    "SUPPORTED",
    "UNSERVED_KINDS",
    "WORKLOAD_KINDS",
    "ChildJob",
    "Draft",
    "Identity",
    "drafts",
    "pod_identity",
    "positions",
]

WORKLOAD_KINDS: dict[tuple[str, str], Callable[[Mapping[str, Any], Objects], Draft | Problem]] = {
    (JOBSET_API, "JobSet"): jobset,
    (BATCH_API, "Job"): indexed_job,
    (JAXJOB_API, "JAXJob"): jaxjob,
    (TRAINER_API, "TrainJob"): trainjob,
}
"""Which controller makes what of a manifest, by (apiVersion, kind)."""

UNSERVED_KINDS: frozenset[tuple[str, str]] = frozenset(
    {
        ("", "Pod"),  # the kubelet runs it as it is, with no controller: nothing here runs a bare Pod
        ("", "ReplicationController"),
        ("apps", "Deployment"),
        ("apps", "ReplicaSet"),
        ("apps", "StatefulSet"),
        ("apps", "DaemonSet"),
        ("batch", "CronJob"),  # its Jobs come on a schedule; the Job kind itself is served (a NonIndexed one too)
        # The Training Operator before v1.9.0 (kubeflow/trainer#2150); its CRD is not bundled: "no matches for kind"
        # unless the inputs hold one
        (KUBEFLOW_API_GROUP, "MXJob"),
        ("batch.volcano.sh", "Job"),
        ("argoproj.io", "Workflow"),
        ("argoproj.io", "CronWorkflow"),
        ("sparkoperator.k8s.io", "SparkApplication"),
    }
    | {(k.group, k.kind) for k in operators.KINDS if k.pods}  # other operators' kinds, their CRDs bundled
)
"""Kinds, by (API group, kind), whose controller creates pods on a cluster and that no emulated controller serves:
an input problem (`errors.Unserved`, exit 2), never a stored-and-noted object. Kinds that run no pods (ConfigMaps,
Services, Kueue's queues, custom resources that are not workloads) stay stored, with a note (`not_simulated`).

An input holding one of these alongside a served workload is refused too, nothing started: a pass would vouch for
manifests whose pods partly never ran, and the served workload may need those pods (a Service selecting a
Deployment's pods resolves on a cluster, not here), so even its own verdict might not be the cluster's. `jaxinfra
validate` is unaffected: it checks what the API server stores, and the API server stores these."""

SUSPEND: dict[str, tuple[str, ...]] = {
    "JobSet": ("spec", "suspend"),  # jobset api/jobset/v1alpha2 JobSetSpec.Suspend
    "Job": ("spec", "suspend"),  # batch/v1 JobSpec.Suspend: the Job controller creates no pod while it is true
    "JAXJob": ("spec", "runPolicy", "suspend"),  # kubeflow/training-operator v1 RunPolicy.Suspend
    "TrainJob": ("spec", "suspend"),  # kubeflow/trainer v1alpha1 TrainJobSpec.Suspend
}
"""Where each workload kind says it is suspended: while true, its controller starts no pod."""


def _suspended(obj: Mapping[str, Any]) -> str | None:
    """The suspend field's path where it is true, else None."""
    path = SUSPEND.get(str(obj.get("kind")), ())
    node: object = obj
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return ".".join(path) if node is True else None


def drafts(manifests: Sequence[Mapping[str, Any]], objects: Objects) -> tuple[list[Draft], list[Problem]]:
    """Delete what the garbage collector deletes (`garbage`: objects whose owners the cluster does not hold), index
    every passive object left (workloads read them), then let each workload kind's controller draft its Jobs, in
    manifest order; other kinds are stored and not simulated (`not_simulated`)."""
    found: list[tuple[int, Mapping[str, Any]]] = []
    problems: list[tuple[int, Problem]] = []
    collected = garbage.collect(objects.store)
    for i, obj in enumerate(manifests):
        orphan = collected.get(key) if isinstance(obj, Mapping) and (key := key_of(obj)) is not None else None
        if orphan is not None:
            if (obj.get("apiVersion", ""), obj["kind"]) in WORKLOAD_KINDS or unserved_kind(obj) is not None:
                problems.append((i, garbage.never_runs(obj, orphan, i)))  # its pods would run: now they never do
        elif not isinstance(obj, Mapping) or not obj.get("kind"):
            problems.append(
                (
                    i,
                    Problem(
                        "",
                        type(obj).__name__ if not isinstance(obj, Mapping) else None,
                        "not a Kubernetes object (no kind)",
                        "each manifest needs apiVersion, kind and metadata.name",
                        document=i,  # the cluster's manifest: `sources.Source.where` names its file
                    ),
                )
            )
        elif obj["kind"] in PASSIVE_KINDS:
            objects.add(obj)
        elif (obj.get("apiVersion", ""), obj["kind"]) in WORKLOAD_KINDS:
            found.append((i, obj))
        elif unserved := unserved_kind(obj):
            problems.append((i, unserved))
    made_drafts = []
    for i, obj in found:
        made = WORKLOAD_KINDS[(obj.get("apiVersion", ""), obj["kind"])](obj, objects)
        if isinstance(made, Problem):
            problems.append((i, made))
        else:
            made.labels = strings(meta(obj).get("labels"))
            made.suspended = _suspended(obj)
            made.jax_problems += init_timeout_problems(made)
            made_drafts.append(made)
    return made_drafts, [p for _, p in sorted(problems, key=lambda item: item[0])]


def _group(obj: Mapping[str, Any]) -> str:
    """The API group of an object's apiVersion ("" for the core group's `v1`)."""
    api_version = str(obj.get("apiVersion", ""))
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def unserved_kind(obj: Mapping[str, Any]) -> Unserved | None:
    """The input problem of an object whose kind runs pods on a cluster but that the simulator does not run
    (`UNSERVED_KINDS`), else None. Another operator's kind names that operator and the release whose CRD `jaxinfra
    validate` checked it against (`jaxinfra.schemas.operators`)."""
    kind = str(obj.get("kind"))
    api_version = str(obj.get("apiVersion", ""))
    if (_group(obj), kind) not in UNSERVED_KINDS or (api_version, kind) in WORKLOAD_KINDS:
        return None
    served = operators.serving(api_version, kind)
    if kind == "Pod":
        runs = (
            "a bare Pod runs on a cluster (its node's kubelet starts it), but the simulator runs only the pods of the "
            "workloads whose controllers it emulates: it would not run here"
        )
    elif served is not None:
        runs = (
            f"served by {served.operator}, the release whose CRD it was checked against, not emulated: on a cluster "
            "that operator runs its pods; none would run here"
        )
    else:
        runs = (
            f"a {kind} runs pods on a cluster, but the simulator does not emulate its controller: its pods would not "
            "run here"
        )
    return Unserved(
        oid(obj),
        f"{kind} ({api_version})",
        f"{runs}, so no verdict would be the cluster's (nothing started)",
        "the simulator runs JobSet, Indexed Job, JAXJob and TrainJob; simulate the workload as one of those, or leave "
        "it out of the simulation's inputs",
    )


def not_simulated(manifests: Sequence[Mapping[str, Any]]) -> list[str]:
    """The objects no emulated controller reads or runs and that run no pods themselves (an operator's custom resource
    that is not a workload): on a cluster their controllers act on them; here they are only stored. A kind that runs
    pods is an input problem instead (`unserved_kind`)."""
    return [
        oid(obj)
        for obj in manifests
        if isinstance(obj, Mapping)
        and obj.get("kind") not in PASSIVE_KINDS
        and (obj.get("apiVersion", ""), obj.get("kind")) not in WORKLOAD_KINDS
        and unserved_kind(obj) is None
    ]


def pod_identity(job: ChildJob, index: int, recreated: int) -> Identity:
    """Who the index-th pod of `job` is: an operator's own pod, else the Job controller's."""
    if job.operator is not None:
        return job.operator.identity(job, index)
    return job_controller.identity(job, index, recreated)
