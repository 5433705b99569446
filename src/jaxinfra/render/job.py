"""Indexed Job (batch/v1) with its own headless Service: one Job, one pod per host."""

from __future__ import annotations

from jaxinfra.plan import JobPlan
from jaxinfra.render.common import Manifest, pod_template, workload_metadata


def indexed_job(jp: JobPlan) -> Manifest:
    """An Indexed Job cannot restart the group as one; the budget counts pod failures.

    A group failure costs one failure per pod (the survivors fail once the coordinator
    notices), so `max_restarts` group restarts is `max_restarts x pods` pod failures; with
    0, the first failure fails the Job and Kubernetes ends every pod. Disruptions
    (preemption, eviction) do not count. Replacements start only after the failed pod is
    gone, so two pods never hold one rank.
    """
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": workload_metadata(jp),
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
            "template": pod_template(jp, subdomain=jp.service),
        },
    }
