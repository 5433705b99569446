"""Pure functions from a plan to manifests: plain dicts in apply order, explicit names.

The objects every job has come from `render.common`; the workload (and any object of its own) from the
job's backend (`jaxinfra.backends`), built from the same shared pod parts.
"""

from __future__ import annotations

from jaxinfra.plan import ClusterPlan, JobPlan
from jaxinfra.render.common import (
    Manifest,
    SharedParts,
    checkpoint_claim,
    headless_service,
    namespace,
    network_policy,
    object_patched,
    role,
    role_binding,
    service_account,
)
from jaxinfra.render.gpudirect import network_objects
from jaxinfra.render.kueue import kueue_objects


def render_job(jp: JobPlan) -> list[Manifest]:
    """A job's objects, dependencies first: identity (and its Role when the pods use the API), the
    NetworkPolicy (before any pod exists), the checkpoint claim it renders, DNS, then the backend's own
    objects (a TrainJob's runtime), the workload last.

    No headless Service where the operator owns DNS (JAXJob: one Service per replica) or the
    Trainer's JobSet makes it (TrainJob). The job's `object_patches` apply last, to what every adapter renders.
    """
    out = [service_account(jp)]
    if jp.job.kubernetes_api:
        out += [role(jp), role_binding(jp)]
    if jp.job.network_policy:
        out.append(network_policy(jp))
    if jp.renders_claim:
        out.append(checkpoint_claim(jp))
    if jp.own_service:
        out.append(headless_service(jp))
    out += jp.backend.render(jp, SharedParts(jp))
    return object_patched(jp, out) if jp.job.object_patches else out


def render(cp: ClusterPlan) -> list[Manifest]:
    """Every object of a cluster plan: namespaces, the GPU networks (GKE multi-networking: the pods' interfaces name
    them), Kueue (cluster-scoped first), then jobs in declared order."""
    return (
        [namespace(ns, cp.pod_security) for ns in cp.namespaces]
        + [m for stack in cp.gpudirect for m in network_objects(stack, cp.name)]
        + kueue_objects(cp.queues, cp.queue_priorities)
        + [m for jp in cp.jobs for m in render_job(jp)]
    )
