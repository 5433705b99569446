"""JAXJob (kubeflow.org/v1, Kubeflow Training Operator v1): `replicas` bare pods `<job>-worker-<i>`, each with its
own headless Service (the operator's), and the coordinator, count and rank injected by the operator
(kubeflow/training-operator pkg/controller.v1/jax/envvar.go; the names in `jaxinfra.names`)."""

from __future__ import annotations

from typing import Any

from jaxinfra import names as N
from jaxinfra.backends.base import Backend, EnvVar, JobNames, JobSpec, Manifest, Parts, Plan, PoolSpec, constant
from jaxinfra.errors import Problem
from jaxinfra.upstream import (
    JAXJOB_API,
    JAXJOB_CONTAINER,
    JAXJOB_NAME_LABEL,
    JAXJOB_PORT_NAME,
    JAXJOB_REPLICA,
    OPERATOR_ENV,
)


class JAXJob:
    """The operator makes plain pods, no Jobs: no completion index, no JobSet labels, no GKE TPU env."""

    name = "jaxjob"
    title = "JAXJob"
    summary = "Kubeflow Training Operator v1 JAXJob"
    api_version = JAXJOB_API
    kind = "JAXJob"
    kueue_framework = "kubeflow.org/jaxjob"  # off in the Kueue chart's default
    controllers = ("training-operator",)
    container = JAXJOB_CONTAINER
    port_name = JAXJOB_PORT_NAME
    fixed_port = None
    name_label = JAXJOB_NAME_LABEL
    owns_dns = False
    indexed_pods = False
    runtimes = False
    writes_container = True
    dns1035 = "the Training Operator derives Service"
    rank_rule = "PROCESS_ID = the replica index (set by the Training Operator)"

    def replicated_job(self, tpu: bool) -> str | None:
        return None

    def hostname(self, names: JobNames, rank: int) -> str:
        """The pod and its per-replica Service: `<job>-worker-<i>`."""
        return f"{names.name}-{JAXJOB_REPLICA.lower()}-{rank}"

    def coordinator_host(self, names: JobNames) -> str:
        """Rank 0's own Service."""
        return names.hostname(0)

    def derived_names(self, names: JobNames) -> dict[str, str]:
        """The pod name is the per-replica Service's, a DNS-1035 label."""
        return {"pod and Service name": names.hostname(names.processes - 1)}

    def group(self, names: JobNames, slice_index: int) -> str:
        return "pods of the Training Operator"

    def dns_service(self, names: JobNames) -> str:
        return f"{names.hostname(0)} (the operator's, per replica)"

    def coordinator_env(self, jp: Plan) -> tuple[EnvVar, ...]:
        """All the operator's, none written: the rank is the replica index, the global rank."""
        return (
            EnvVar("COORDINATOR_ADDRESS", constant(jp.coordinator_host), N.BY_OPERATOR),
            EnvVar("COORDINATOR_PORT", constant(str(jp.port)), N.BY_OPERATOR),
            EnvVar("NUM_PROCESSES", constant(str(jp.processes)), N.BY_OPERATOR),
            EnvVar("PROCESS_ID", str, N.BY_OPERATOR),
            EnvVar("PYTHONUNBUFFERED", constant("1"), N.BY_OPERATOR),
        )

    def problems(self, at: str, job: JobSpec, pool: PoolSpec) -> list[Problem]:
        """Plain pods cannot form a multi-host TPU slice; the operator's own env is not the user's to set."""
        row = pool.accelerator.row
        out = []
        if row.kind == "tpu" and job.num_slices > 1:
            out.append(
                Problem(
                    f"{at}.backend",
                    job.backend,
                    "the Training Operator creates plain pods: no JobSet labels for MEGASCALE_SLICE_ID, so "
                    "multi-slice cannot be expressed",
                    "use backend='jobset'",
                )
            )
        elif row.kind == "tpu" and row.multi_host:
            out.append(
                Problem(
                    f"{at}.backend",
                    job.backend,
                    f"the Training Operator creates plain pods, and GKE injects TPU_WORKER_ID / TPU_WORKER_HOSTNAMES "
                    f"only into Indexed Job pods: the hosts of a multi-host slice ({row.family} {row.topology}) could "
                    f"not form the slice",
                    "use backend='jobset' (or 'trainjob', or a single-host topology)",
                )
            )
        for name in sorted(set(job.env) & set(OPERATOR_ENV)):
            out.append(
                Problem(
                    f"{at}.env.{name}", job.env[name], "set by the Training Operator for backend='jaxjob'", "remove it"
                )
            )
        return out

    def render(self, jp: Plan, parts: Parts) -> list[Manifest]:
        """Restarts: with `max_restarts` 0 the replicas use `Never` (the operator's default): the first
        failed pod fails the JAXJob. Otherwise `OnFailure`: the kubelet restarts a failed container
        in place (same pod, name and Service), the others follow when the coordinator goes away,
        and `runPolicy.backoffLimit` caps the sum of container restarts over all pods; as for the
        Indexed Job, a group restart costs one restart per pod, so it is `max_restarts x pods`.
        """
        restart = "OnFailure" if jp.job.max_restarts else "Never"
        run_policy: dict[str, Any] = {"cleanPodPolicy": "Running"}  # end the survivors when the job ends
        if jp.job.max_restarts:
            run_policy["backoffLimit"] = jp.job.max_restarts * jp.processes
        jaxjob = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": parts.workload_metadata(),
            "spec": {
                "runPolicy": run_policy,
                "jaxReplicaSpecs": {
                    JAXJOB_REPLICA: {
                        "replicas": jp.processes,
                        "restartPolicy": restart,
                        "template": parts.pod_template(restart_policy=restart),
                    },
                },
            },
        }
        return [jaxjob]


BACKEND: Backend = JAXJob()
