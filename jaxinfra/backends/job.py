"""Indexed Job (batch/v1): one Job, one pod per host, with jaxinfra's own headless Service; no controller to
install. One group of hosts only: multi-slice needs one Job per slice."""

from __future__ import annotations

from jaxinfra import names as N
from jaxinfra.backends.base import (
    Backend,
    IndexedPods,
    JobSpec,
    Manifest,
    Parts,
    Plan,
    PoolSpec,
    tpu_multi_slice,
)
from jaxinfra.errors import Problem
from jaxinfra.upstream import BATCH_API, JOB_NAME_LABEL


class Job(IndexedPods):
    """Kubernetes' own Indexed Job: the pods' hostnames come from the Job's name and index."""

    name = "job"
    title = "Indexed Job"
    summary = "Indexed Job"
    api_version = BATCH_API
    kind = "Job"
    kueue_framework = "batch/job"
    controllers: tuple[str, ...] = ()
    container = N.CONTAINER
    port_name = N.PORT_NAME
    fixed_port = None
    name_label = JOB_NAME_LABEL
    owns_dns = True
    pod_suffix = False  # a plain Job's pods get no JobSet webhook
    runtimes = False
    writes_container = True
    dns1035 = None  # nothing derives a DNS-1035 name from a Job's
    rank_rule = "JAX_PROCESS_ID = the pod's completion index"

    def replicated_job(self, tpu: bool) -> str | None:
        return None

    def problems(self, at: str, job: JobSpec, pool: PoolSpec) -> list[Problem]:
        if not tpu_multi_slice(job, pool):
            return []
        return [
            Problem(
                f"{at}.backend",
                job.backend,
                "an Indexed Job cannot express multi-slice (MEGASCALE_SLICE_ID needs one Job per slice)",
                "use backend='jobset'",
            )
        ]

    def render(self, jp: Plan, parts: Parts) -> list[Manifest]:
        """An Indexed Job cannot restart the group as one; the budget counts pod failures.

        A group failure costs one failure per pod (the survivors fail once the coordinator
        notices), so `max_restarts` group restarts is `max_restarts x pods` pod failures; with
        0, the first failure fails the Job and Kubernetes ends every pod. Disruptions
        (preemption, eviction) do not count. Replacements start only after the failed pod is
        gone, so two pods never hold one rank.
        """
        job = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": parts.workload_metadata(),
            "spec": {
                "backoffLimit": jp.job.max_restarts * jp.processes,
                "completionMode": "Indexed",
                "completions": jp.processes,
                "parallelism": jp.processes,
                "podFailurePolicy": {
                    "rules": [
                        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                    ]
                },
                "podReplacementPolicy": "Failed",
                "template": parts.pod_template(subdomain=jp.service),
            },
        }
        return [job]


BACKEND: Backend = Job()
