"""JobSet (jobset.x-k8s.io/v1alpha2): one replicated Job per TPU slice, or one for GPU/CPU nodes."""

from __future__ import annotations

from jaxinfra import names as N
from jaxinfra.plan import JobPlan
from jaxinfra.render.common import Manifest, pod_template, workload_metadata


def jobset(jp: JobPlan) -> Manifest:
    """Any pod failure fails its Job (backoffLimit 0), which restarts the whole JobSet."""
    annotations = {N.EXCLUSIVE_TOPOLOGY: N.NODEPOOL_LABEL} if jp.exclusive_placement else {}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": workload_metadata(jp, annotations=annotations),
        "spec": {
            "failurePolicy": {"maxRestarts": jp.job.max_restarts},
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True, "subdomain": jp.service},
            "replicatedJobs": [
                {
                    "name": jp.replicated_job,
                    "replicas": jp.slices,
                    "template": {
                        "metadata": {"labels": dict(jp.labels)},
                        "spec": {
                            "backoffLimit": 0,
                            "completionMode": "Indexed",
                            "completions": jp.hosts_per_slice,
                            "parallelism": jp.hosts_per_slice,
                            "template": pod_template(jp),
                        },
                    },
                }
            ],
        },
    }
