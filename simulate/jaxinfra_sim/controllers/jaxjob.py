"""The Kubeflow Training Operator v1 for a JAXJob.

The operator creates the Worker pods itself (no Job), named `<job>-worker-<i>` with hostname =
pod name, labels `training.kubeflow.org/{operator-name, job-name, replica-type, replica-index}`
(+ `job-role: master` on index 0), and one headless Service per replica named like the pod and
selecting it by those labels (no publishNotReadyAddresses). Its defaulting webhook adds port
`jaxjob-port: 6666` to the `jax` container when absent; the operator APPENDS `PYTHONUNBUFFERED`,
`COORDINATOR_PORT`, `COORDINATOR_ADDRESS=<job>-worker-0`, `NUM_PROCESSES`, `PROCESS_ID` to every
container, after the user's env (so `$(PROCESS_ID)` in env stays verbatim; in command/args it
expands). Not emulated: gang-scheduling decorations, cleanPodPolicy, activeDeadlineSeconds.

Source: kubeflow/trainer @ ee38ae8a (the JAXJob CRD's commit; identical in
kubeflow/training-operator release-1.9): pkg/controller.v1/jax/envvar.go (setPodEnv,
getPortFromJAXJob), jaxjob_controller.go (controllerName, IsMasterRole), pkg/apis/kubeflow.org/v1
(jax_types.go, jax_defaults.go, defaulting_utils.go, common_types.go label keys),
pkg/webhooks/jax/jaxjob_webhook.go, pkg/controller.v1/common (pod.go createNewPod/ReconcilePods,
service.go CreateNewService, job.go), pkg/core/job.go PastBackoffLimit,
pkg/controller.v1/control/pod_control.go (pod name = template name), pkg/util/train.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from jaxinfra.errors import Problem
from jaxinfra.upstream import (
    JAXJOB_CONTAINER,
    JAXJOB_CONTROLLER,
    JAXJOB_DEFAULT_PORT,
    JAXJOB_NAME_LABEL,
    JAXJOB_OPERATOR_LABEL,
    JAXJOB_PORT_NAME,
    JAXJOB_REPLICA_INDEX_LABEL,
    JAXJOB_REPLICA_TYPE_LABEL,
    JAXJOB_ROLE_LABEL,
    OPERATOR_ENV,
)
from jaxinfra_sim.controllers.base import ChildJob, Draft, OperatorPods, reference
from jaxinfra_sim.controllers.job_failure import JobFailure
from jaxinfra_sim.core import model
from jaxinfra_sim.core.events import Reason
from jaxinfra_sim.core.inputs import Objects, Service, fake_uid, meta, namespace_of, oid, strings, to_int


def _jaxjob_restart(policy: str, backoff_limit: Any) -> model.RestartPolicy:
    """A JAXJob's failure semantics as "job"-style pod-failure counting (the engine restarts the whole group; the
    operator restarts pods one by one, but when one JAX process dies the others fail too, so each attempt's failures
    count as they would on the cluster).

    - restartPolicy Never (the JAXJob default): the first failed pod fails the JAXJob (UpdateJobStatus).
    - OnFailure / Always: the kubelet restarts the container; the JAXJob fails once the containers' restartCounts sum
      to runPolicy.backoffLimit (PastBackoffLimit: `>= limit`, or `> 0` for 0, as the Job controller counts in-place
      restarts: job_failure.tolerated); no backoffLimit: unlimited, a crash loop under CrashLoopBackOff (the engine
      ends identical repeats). The container restarts in place: same pod, name and IP. Always is treated like
      OnFailure.
    - ExitCode: exit codes >= 128 (signals) are retried, others fail the JAXJob; expressed as a podFailurePolicy-style
      FailJob rule, so the engine's reason reads "podFailurePolicy: FailJob". Its retries (recreated pods) are
      counted as a Job's failed pods are (upstream counts workqueue retries there).
    """
    if policy not in ("OnFailure", "Always", "ExitCode"):
        return model.RestartPolicy(kind="job", backoff_limit=0, operator="JAXJob")
    limit = to_int(backoff_limit, -1)
    rules = (
        ({"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": list(range(128, 256))}},)
        if policy == "ExitCode"
        else ()
    )
    return model.RestartPolicy(
        kind="job",
        backoff_limit=limit if limit >= 0 else None,
        pod_failure_rules=rules,
        in_place=policy != "ExitCode",
        operator="JAXJob",
    )


def failed_condition(policy: model.RestartPolicy, why: JobFailure, name: str, failed: int) -> tuple[str, str, bool]:
    """The JAXJob's Failed condition as the Training Operator writes it (reason, message, and whether its event is a
    Warning), from what the Job-style counting decided (`why`) with `failed` Worker pods failed (kubeflow/training-
    operator @ 078ec30f, reason `NewReason(JAXJobKind, JobFailedReason)`):

    - restartPolicy Never: `pkg/controller.v1/jax/jaxjob_controller.go` UpdateJobStatus, a Normal event;
    - ExitCode, a non-retryable exit code: `pkg/controller.v1/common/pod.go` ReconcilePods, a Warning;
    - OnFailure or Always past runPolicy.backoffLimit: `pkg/controller.v1/common/job.go` ReconcileJobs, Normal.
    """
    reason = f"{policy.operator}Failed"
    if why.reason == Reason.POD_FAILURE_POLICY:
        return reason, f'job "{name}" is failing because "Worker" replica(s) failed.', True
    if policy.in_place:
        return reason, f"Job {name} has failed because it has reached the specified backoff limit", False
    return reason, f"{policy.operator} {name} is failed because {failed} Worker replica(s) failed.", False


def jaxjob(obj: Mapping[str, Any], objects: Objects) -> Draft | Problem:
    """A Training Operator v1 JAXJob: Worker pods `<job>-worker-<i>` created directly by the operator, one headless
    Service per replica, and the operator's env appended to every container."""
    spec, name, ns = obj.get("spec") or {}, meta(obj).get("name", ""), namespace_of(obj)
    replica_specs = spec.get("jaxReplicaSpecs") or {}
    where = f"{oid(obj)} spec.jaxReplicaSpecs"
    # Defaulting: replica type keys are camel-cased ("worker" -> "Worker"); the webhook accepts only Worker.
    others = [k for k in replica_specs if str(k).lower() != "worker"]
    if others:
        return Problem(
            f"{where}.{others[0]}",
            others,
            "the Training Operator's webhook accepts only the replica type Worker for a JAXJob",
            "put every JAX process under jaxReplicaSpecs.Worker",
        )
    worker = next((v for k, v in replica_specs.items() if str(k).lower() == "worker"), None) or {}
    pod_template = worker.get("template") or {}
    pod_spec = copy.deepcopy(dict(pod_template.get("spec") or {}))
    containers = pod_spec.get("containers") or []
    jax = next((c for c in containers if c.get("name") == JAXJOB_CONTAINER), None)
    if jax is None:
        return Problem(
            f"{where}.Worker.template.spec.containers",
            [c.get("name") for c in containers],
            f"must have at least one container with name {JAXJOB_CONTAINER} "
            "(the Training Operator's webhook rejects the "
            f"JAXJob; its controller reads the coordinator port from container '{JAXJOB_CONTAINER}' only)",
            f"name the container that runs JAX '{JAXJOB_CONTAINER}'",
        )
    # Defaulting webhook: port `jaxjob-port: 6666` on the jax container unless a port has that name.
    ports = jax.setdefault("ports", [])
    if not any(p.get("name") == JAXJOB_PORT_NAME for p in ports):
        ports.append({"name": JAXJOB_PORT_NAME, "containerPort": JAXJOB_DEFAULT_PORT})
    port = next(p.get("containerPort") for p in ports if p.get("name") == JAXJOB_PORT_NAME)
    replicas = to_int(worker.get("replicas"), 1)  # defaulting: 1
    restart_policy = worker.get("restartPolicy") or "Never"  # defaulting: Never
    pod_spec["restartPolicy"] = (
        "Never" if restart_policy == "ExitCode" else restart_policy
    )  # replica spec overrides the template
    coordinator = f"{name}-worker-0"
    selector = {JAXJOB_OPERATOR_LABEL: JAXJOB_CONTROLLER, JAXJOB_NAME_LABEL: name, JAXJOB_REPLICA_TYPE_LABEL: "worker"}

    def labels(i: int) -> dict[str, str]:
        return {**selector, JAXJOB_REPLICA_INDEX_LABEL: str(i), **({JAXJOB_ROLE_LABEL: "master"} if i == 0 else {})}

    def env(i: int) -> list[Mapping[str, Any]]:
        values = ("1", str(port), coordinator, str(replicas), str(i))
        return [{"name": k, "value": v} for k, v in zip(OPERATOR_ENV, values)]

    job = ChildJob(
        f"{name}-worker",
        meta(obj).get("uid") or fake_uid("JAXJob", ns, name),
        0,
        replicas,
        replicas,
        strings(meta(pod_template).get("labels")),
        strings(meta(pod_template).get("annotations")),
        pod_spec,
        pod_spec.get("subdomain"),
        False,
        OperatorPods(labels, env),
        JAXJOB_CONTAINER,
    )
    svc_ports = tuple((p.get("containerPort"), p.get("containerPort")) for p in ports)
    services = [
        Service(
            ns,
            f"{name}-worker-{i}",
            {**selector, JAXJOB_REPLICA_INDEX_LABEL: str(i)},
            True,
            False,
            svc_ports,
            f"JAXJob/{ns}/{name} (headless Service {name}-worker-{i} created by the Training Operator)",
            True,
        )
        for i in range(replicas)
    ]
    restart = _jaxjob_restart(restart_policy, (spec.get("runPolicy") or {}).get("backoffLimit"))
    return Draft("JAXJob", ns, name, [job], restart, services, owner=reference(obj, job.uid))
