"""JobSet (jobset.x-k8s.io/v1alpha2, kubernetes-sigs/jobset): one replicated Job per TPU slice, or one for GPU/CPU
nodes; jaxinfra renders the headless Service and writes the env contract itself."""

from __future__ import annotations

from jaxinfra import names as N
from jaxinfra.backends.base import (
    Backend,
    IndexedPods,
    Manifest,
    Parts,
    Plan,
)
from jaxinfra.upstream import EXCLUSIVE_TOPOLOGY, JOBSET_API, JOBSET_NAME_LABEL, NODEPOOL_LABEL


class JobSet(IndexedPods):
    """The default: every shape, multi-slice included (JobSet's labels give each pod its slice)."""

    name = "jobset"
    title = "JobSet"
    summary = "JobSet"
    api_version = JOBSET_API
    kind = "JobSet"
    kueue_framework = "jobset.x-k8s.io/jobset"
    controllers = ("jobset",)
    container = N.CONTAINER
    port_name = N.PORT_NAME
    fixed_port = None
    name_label = JOBSET_NAME_LABEL
    owns_dns = True
    runtimes = False
    writes_container = True
    dns1035 = "JobSet derives"
    rank_rule = "JAX_PROCESS_ID = the pod's completion index"

    def replicated_job(self, tpu: bool) -> str | None:
        return "slice" if tpu else "node"

    def render(self, jp: Plan, parts: Parts) -> list[Manifest]:
        """Any pod failure fails its Job (backoffLimit 0), which restarts the whole JobSet."""
        annotations = {EXCLUSIVE_TOPOLOGY: NODEPOOL_LABEL} if jp.exclusive_placement else {}
        jobset = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": parts.workload_metadata(annotations),
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
                                "template": parts.pod_template(),
                            },
                        },
                    }
                ],
            },
        }
        return [jobset]


BACKEND: Backend = JobSet()
