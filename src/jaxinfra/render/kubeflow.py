"""Kubeflow workloads: JAXJob (Training Operator v1) and TrainJob + TrainingRuntime (Trainer v2).

Both operators inject the coordinator, process count and rank themselves (docs/design.md, "The env contracts";
`JobPlan.env_sources` says which variable comes from whom), so jaxinfra writes only what they
do not: the init timeout, the CPU device count, the user's env, and the pool's placement.
"""

from __future__ import annotations

from typing import Any

from jaxinfra import names as N
from jaxinfra.plan import JobPlan
from jaxinfra.render.common import Manifest, contract_env, metadata, pod_template, resources, workload_metadata

TRAINER_API = "trainer.kubeflow.org/v1alpha1"


def jaxjob(jp: JobPlan) -> Manifest:
    """A JAXJob: `replicas` pods `<job>-worker-<i>`, each with its own headless Service (the operator's).

    Restarts: with `max_restarts` 0 the replicas use `Never` (the operator's default): the first
    failed pod fails the JAXJob. Otherwise `OnFailure`: the kubelet restarts a failed container
    in place (same pod, name and Service), the others follow when the coordinator goes away,
    and `runPolicy.backoffLimit` caps the sum of container restarts over all pods; as for the
    Indexed Job, a group restart costs one restart per pod, so it is `max_restarts x pods`.
    """
    restart = "OnFailure" if jp.job.max_restarts else "Never"
    run_policy: dict[str, Any] = {"cleanPodPolicy": "Running"}  # end the survivors when the job ends
    if jp.job.max_restarts:
        run_policy["backoffLimit"] = jp.job.max_restarts * jp.processes
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "JAXJob",
        "metadata": workload_metadata(jp),
        "spec": {
            "runPolicy": run_policy,
            "jaxReplicaSpecs": {
                N.JAXJOB_REPLICA: {
                    "replicas": jp.processes,
                    "restartPolicy": restart,
                    "template": pod_template(jp, restart_policy=restart),
                },
            },
        },
    }


def training_runtime(jp: JobPlan) -> Manifest:
    """The TrainingRuntime a TrainJob runs on: `mlPolicy.jax` plus what the upstream
    `jax-distributed` runtime lacks: the pool's node selectors and tolerations, the accelerator
    resources, /dev/shm for GPUs, the job's ServiceAccount, and the restart policy.

    Restarts: any pod failure fails its Job (backoffLimit 0), which restarts the whole JobSet,
    up to `max_restarts` times, as for the jobset backend.
    """
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainingRuntime",
        "metadata": metadata(jp, jp.runtime),
        "spec": {
            "mlPolicy": {"numNodes": jp.processes, "jax": {}},
            "template": {
                "metadata": {"labels": dict(jp.labels)},
                "spec": {
                    "failurePolicy": {"maxRestarts": jp.job.max_restarts},
                    "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
                    "replicatedJobs": [
                        {
                            "name": N.TRAINER_NODE,
                            "replicas": 1,
                            "template": {
                                "metadata": {"labels": {**jp.labels, N.TRAINER_ANCESTOR_LABEL: N.TRAINER_ANCESTOR}},
                                "spec": {
                                    "backoffLimit": 0,
                                    "completionMode": "Indexed",
                                    "completions": jp.processes,
                                    "parallelism": jp.processes,
                                    "template": pod_template(jp),
                                },
                            },
                        }
                    ],
                },
            },
        },
    }


def trainjob(jp: JobPlan) -> Manifest:
    """A TrainJob: image, command, env and resources per node go to the runtime's `node` container.

    The env goes here rather than into the runtime so that it follows the JAX plugin's
    variables (user env may use `$(JAX_PROCESS_ID)`) and works with either runtime.
    """
    trainer: dict[str, Any] = {"image": jp.job.image, "numNodes": jp.processes, "env": contract_env(jp)}
    if jp.command is not None:
        trainer["command"] = list(jp.command)
    if jp.job.args:
        trainer["args"] = list(jp.job.args)
    if res := resources(jp):
        trainer["resourcesPerNode"] = res
    kind = "TrainingRuntime" if jp.renders_runtime else "ClusterTrainingRuntime"
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": workload_metadata(jp),
        "spec": {
            "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": kind, "name": jp.runtime},
            "trainer": trainer,
        },
    }
