"""JobSet (jobset.x-k8s.io/v1alpha2, kubernetes-sigs/jobset): one replicated Job per TPU slice, or one for GPU/CPU
nodes; jaxinfra renders the headless Service and writes the env contract itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jaxinfra import names as N
from jaxinfra.backends.base import (
    Backend,
    EnvSources,
    JobNames,
    Manifest,
    Parts,
    indexed_hostname,
    indexed_names,
    jaxinfra_coordinator,
    jaxinfra_coordinator_env,
    subdomain_host,
)

if TYPE_CHECKING:
    from jaxinfra.errors import Problem
    from jaxinfra.plan import JobPlan
    from jaxinfra.spec import JaxJob, NodePool


class JobSet:
    """The default: every shape, multi-slice included (JobSet's labels give each pod its slice)."""

    name = "jobset"
    title = "JobSet"
    summary = "JobSet"
    api_version = "jobset.x-k8s.io/v1alpha2"
    kind = "JobSet"
    kueue_framework = "jobset.x-k8s.io/jobset"
    controllers = ("jobset",)
    container = N.CONTAINER
    port_name = N.PORT_NAME
    fixed_port = None
    name_label = N.JOBSET_NAME_LABEL
    owns_dns = True
    indexed_pods = True
    runtimes = False
    writes_container = True
    dns1035 = "JobSet derives"
    rank_rule = "JAX_PROCESS_ID = the pod's completion index"

    def replicated_job(self, tpu: bool) -> str | None:
        return "slice" if tpu else "node"

    def hostname(self, names: JobNames, rank: int) -> str:
        return indexed_hostname(names, rank)

    def coordinator_host(self, names: JobNames) -> str:
        return subdomain_host(names)

    def derived_names(self, names: JobNames) -> dict[str, str]:
        return indexed_names(names, pod_suffix=True)

    def group(self, names: JobNames, slice_index: int) -> str:
        return f"Job {names.child_job(slice_index)}"

    def dns_service(self, names: JobNames) -> str:
        return f"{names.service} (headless)"

    def coordinator_env(self, jp: JobPlan, rank: int) -> EnvSources:
        return jaxinfra_coordinator(jp, rank)

    def written_coordinator_env(self, jp: JobPlan) -> list[dict[str, Any]]:
        return jaxinfra_coordinator_env(jp)

    def problems(self, at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
        return []

    def render(self, jp: JobPlan, parts: Parts) -> list[Manifest]:
        """Any pod failure fails its Job (backoffLimit 0), which restarts the whole JobSet."""
        annotations = {N.EXCLUSIVE_TOPOLOGY: N.NODEPOOL_LABEL} if jp.exclusive_placement else {}
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
