"""The workload controllers: each turns one manifest into the Indexed Jobs (or operator pods) it
creates. Adding a workload kind is one module here and one line in `WORKLOAD_KINDS`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from jaxinfra.errors import Problem
from jaxinfra.upstream import BATCH_API, JAXJOB_API, JOBSET_API, TRAINER_API
from jaxinfra_sim.controllers import job as job_controller
from jaxinfra_sim.controllers.base import SUPPORTED, ChildJob, Draft, Identity, init_timeout_problems, positions
from jaxinfra_sim.controllers.jaxjob import jaxjob
from jaxinfra_sim.controllers.job import indexed_job
from jaxinfra_sim.controllers.jobset import jobset
from jaxinfra_sim.controllers.trainjob import trainjob
from jaxinfra_sim.inputs import PASSIVE_KINDS, Objects, meta, oid, strings

__all__ = ["SUPPORTED", "WORKLOAD_KINDS", "ChildJob", "Draft", "Identity", "drafts", "pod_identity", "positions"]

WORKLOAD_KINDS: dict[tuple[str, str], Callable[[Mapping, Objects], Draft | Problem]] = {
    (JOBSET_API, "JobSet"): jobset,
    (BATCH_API, "Job"): indexed_job,
    (JAXJOB_API, "JAXJob"): jaxjob,
    (TRAINER_API, "TrainJob"): trainjob,
}
"""Which controller makes what of a manifest, by (apiVersion, kind)."""

SUSPEND: dict[str, tuple[str, ...]] = {
    "JobSet": ("spec", "suspend"),  # jobset api/jobset/v1alpha2 JobSetSpec.Suspend
    "Job": ("spec", "suspend"),  # batch/v1 JobSpec.Suspend: the Job controller creates no pod while it is true
    "JAXJob": ("spec", "runPolicy", "suspend"),  # kubeflow/training-operator v1 RunPolicy.Suspend
    "TrainJob": ("spec", "suspend"),  # kubeflow/trainer v1alpha1 TrainJobSpec.Suspend
}
"""Where each workload kind says it is suspended: while true, its controller starts no pod."""


def _suspended(obj: Mapping) -> str | None:
    """The suspend field's path where it is true, else None."""
    path = SUSPEND.get(str(obj.get("kind")), ())
    node: object = obj
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return ".".join(path) if node is True else None


def drafts(manifests: Sequence[Mapping], objects: Objects) -> tuple[list[Draft], list[Problem]]:
    """Index every passive object first (workloads read them), then let each workload kind's controller
    draft its Jobs, in manifest order; other kinds are stored and not simulated (`not_simulated`)."""
    found: list[tuple[int, Mapping]] = []
    problems: list[tuple[int, Problem]] = []
    for i, obj in enumerate(manifests):
        if not isinstance(obj, Mapping) or not obj.get("kind"):
            problems.append(
                (
                    i,
                    Problem(
                        f"manifest {i}",
                        type(obj).__name__ if not isinstance(obj, Mapping) else None,
                        "not a Kubernetes object (no kind)",
                        "each manifest needs apiVersion, kind and metadata.name",
                    ),
                )
            )
        elif obj["kind"] in PASSIVE_KINDS:
            objects.add(obj)
        elif (obj.get("apiVersion", ""), obj["kind"]) in WORKLOAD_KINDS:
            found.append((i, obj))
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


def not_simulated(manifests: Sequence[Mapping]) -> list[str]:
    """The objects no emulated controller reads or runs (a Deployment, an operator's custom resource): on a cluster
    their controllers act on them; here they are only stored."""
    return [
        oid(obj)
        for obj in manifests
        if isinstance(obj, Mapping)
        and obj.get("kind") not in PASSIVE_KINDS
        and (obj.get("apiVersion", ""), obj.get("kind")) not in WORKLOAD_KINDS
    ]


def pod_identity(job: ChildJob, index: int, recreated: int) -> Identity:
    """Who the index-th pod of `job` is: an operator's own pod, else the Job controller's."""
    if job.operator is not None:
        return job.operator.identity(job, index)
    return job_controller.identity(job, index, recreated)
