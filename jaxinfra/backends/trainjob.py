"""TrainJob (trainer.kubeflow.org/v1alpha1, Kubeflow Trainer v2) on a TrainingRuntime jaxinfra renders, or on a
named ClusterTrainingRuntime: Trainer makes one JobSet with one `node` replicated Job, and its JAX plugin injects
the coordinator (port 29500), count and rank (kubeflow/trainer pkg/runtime/framework/plugins/jax/jax.go)."""

from __future__ import annotations

from typing import Any

from jaxinfra import names as N
from jaxinfra.backends.base import (
    Backend,
    EnvVar,
    IndexedPods,
    JobSpec,
    Manifest,
    Parts,
    Plan,
    PoolSpec,
    constant,
    host_index,
    tpu_multi_slice,
)
from jaxinfra.errors import Problem
from jaxinfra.upstream import (
    JOBSET_NAME_LABEL,
    TRAINER_ANCESTOR,
    TRAINER_ANCESTOR_LABEL,
    TRAINER_API,
    TRAINER_API_GROUP,
    TRAINER_NODE,
    TRAINER_PORT,
)


class TrainJob(IndexedPods):
    """The pod template is the runtime's; Trainer fills in the container's command, args, env and port from the
    TrainJob's `trainer`."""

    name = "trainjob"
    title = "TrainJob"
    summary = "Kubeflow Trainer v2 TrainJob"
    api_version = TRAINER_API
    kind = "TrainJob"
    kueue_framework = "trainer.kubeflow.org/trainjob"
    controllers = ("jobset", "trainer")  # a TrainJob runs as a JobSet
    container = TRAINER_NODE
    port_name = N.PORT_NAME
    fixed_port = TRAINER_PORT
    name_label = JOBSET_NAME_LABEL
    owns_dns = False
    runtimes = True
    writes_container = False
    dns1035 = "TrainJob and its JobSet derive"
    rank_rule = "JAX_PROCESS_ID = the pod's completion index (set by Trainer's JAX plugin)"

    def replicated_job(self, tpu: bool) -> str | None:
        return TRAINER_NODE

    def coordinator_env(self, jp: Plan) -> tuple[EnvVar, ...]:
        """All the JAX plugin's, none written: the rank is the pod's completion index."""
        return (
            EnvVar(N.COORDINATOR_ADDRESS, constant(jp.coordinator_address), N.BY_TRAINER),
            EnvVar(N.NUM_PROCESSES, constant(str(jp.processes)), N.BY_TRAINER),
            EnvVar(N.PROCESS_ID, host_index(jp.hosts_per_slice), N.BY_TRAINER),
        )

    def problems(self, at: str, job: JobSpec, pool: PoolSpec) -> list[Problem]:
        """One replica of `node`, a fixed port, and a ClusterTrainingRuntime that knows no pool."""
        row = pool.accelerator.row
        out = []
        if tpu_multi_slice(job, pool):
            out.append(
                Problem(
                    f"{at}.backend",
                    job.backend,
                    "Trainer v2 runs one replica of its `node` replicatedJob (kubeflow/trainer#2318): no per-slice "
                    "Job index for MEGASCALE_SLICE_ID, so multi-slice cannot be expressed",
                    "use backend='jobset'",
                )
            )
        if "coordinator_port" in job.model_fields_set and job.coordinator_port != TRAINER_PORT:
            out.append(
                Problem(
                    f"{at}.coordinator_port",
                    job.coordinator_port,
                    f"Trainer's JAX plugin fixes the coordinator port at {TRAINER_PORT}",
                    "remove coordinator_port",
                )
            )
        lacks = [
            what
            for what, needed in (
                ("node selectors and tolerations for TPU", row.kind == "tpu"),
                ("GPU node selectors, tolerations and /dev/shm", row.kind == "gpu"),
                ("Spot node selectors and tolerations", pool.spot),
            )
            if needed
        ]
        if job.runtime is not None and lacks:
            out.append(
                Problem(
                    f"{at}.runtime",
                    job.runtime,
                    f"ClusterTrainingRuntime {job.runtime!r} is not jaxinfra's and lacks {', '.join(lacks)} of pool "
                    f"{pool.name}",
                    "remove runtime: jaxinfra then renders a TrainingRuntime with the pool's placement",
                )
            )
        return out

    def render(self, jp: Plan, parts: Parts) -> list[Manifest]:
        """The TrainingRuntime it runs on, when jaxinfra renders it, then the TrainJob."""
        return [*([training_runtime(jp, parts)] if jp.renders_runtime else []), trainjob(jp, parts)]


def training_runtime(jp: Plan, parts: Parts) -> Manifest:
    """The TrainingRuntime a TrainJob runs on: `mlPolicy.jax` plus what the upstream
    `jax-distributed` runtime lacks: the pool's node selectors and tolerations, the accelerator
    resources, /dev/shm for GPUs, the job's ServiceAccount, and the restart policy.

    Restarts: any pod failure fails its Job (backoffLimit 0), which restarts the whole JobSet,
    up to `max_restarts` times, as for the jobset backend.
    """
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainingRuntime",
        "metadata": parts.metadata(jp.runtime),
        "spec": {
            "mlPolicy": {"numNodes": jp.processes, "jax": {}},
            "template": {
                "metadata": {"labels": dict(jp.labels)},
                "spec": {
                    "failurePolicy": {"maxRestarts": jp.job.max_restarts},
                    "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
                    "replicatedJobs": [
                        {
                            "name": TRAINER_NODE,
                            "replicas": 1,
                            "template": {
                                "metadata": {"labels": {**jp.labels, TRAINER_ANCESTOR_LABEL: TRAINER_ANCESTOR}},
                                "spec": {
                                    "backoffLimit": 0,
                                    "completionMode": "Indexed",
                                    "completions": jp.processes,
                                    "parallelism": jp.processes,
                                    "template": parts.pod_template(),
                                },
                            },
                        }
                    ],
                },
            },
        },
    }


def trainjob(jp: Plan, parts: Parts) -> Manifest:
    """A TrainJob: image, command, env and resources per node go to the runtime's `node` container.

    The env goes here rather than into the runtime so that it follows the JAX plugin's
    variables (user env may use `$(JAX_PROCESS_ID)`) and works with either runtime.
    """
    trainer: dict[str, Any] = {"image": jp.job.image, "numNodes": jp.processes, "env": parts.contract_env()}
    if jp.command is not None:
        trainer["command"] = list(jp.command)
    if jp.job.args:
        trainer["args"] = list(jp.job.args)
    if res := parts.resources():
        trainer["resourcesPerNode"] = res
    kind = "TrainingRuntime" if jp.renders_runtime else "ClusterTrainingRuntime"
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": parts.workload_metadata(),
        "spec": {
            "runtimeRef": {"apiGroup": TRAINER_API_GROUP, "kind": kind, "name": jp.runtime},
            "trainer": trainer,
        },
    }


BACKEND: Backend = TrainJob()
