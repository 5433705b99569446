"""Pure functions from a plan to manifests: plain dicts in apply order, explicit names."""

from __future__ import annotations

from collections.abc import Callable

from jaxinfra.plan import ClusterPlan, JobPlan
from jaxinfra.render.common import Manifest, headless_service, namespace, service_account
from jaxinfra.render.job import indexed_job
from jaxinfra.render.jobset import jobset

WORKLOADS: dict[str, Callable[[JobPlan], Manifest]] = {"jobset": jobset, "job": indexed_job}


def render_job(jp: JobPlan) -> list[Manifest]:
    """A job's objects, dependencies first: identity, DNS, then the workload."""
    return [service_account(jp), headless_service(jp), WORKLOADS[jp.backend](jp)]


def render(cp: ClusterPlan) -> list[Manifest]:
    """Every object of a cluster plan, namespaces first, jobs in declared order."""
    return [namespace(ns) for ns in cp.namespaces] + [m for jp in cp.jobs for m in render_job(jp)]
