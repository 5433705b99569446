"""What happened, as a cluster's Events say it (`kubectl get events`, `kubectl describe`): the reason, the type and
the message each component records, in the order they came. The runner, the prober and the engine record them;
the JSON report and the trace read them. Each reason and message is upstream's:

- the Job controller (kubernetes/kubernetes @ 5c68f560): `pkg/controller/controller_utils.go`
  (`SuccessfulCreatePodReason` "SuccessfulCreate", "Created pod: %v"; `SuccessfulDeletePodReason` "SuccessfulDelete",
  "Deleted pod: %v"), `pkg/controller/job/job_controller.go` (a finished Job: Normal "Completed", "Job completed", or
  Warning with its Failed condition's reason and message);
- the kubelet: `pkg/kubelet/events/event.go` (reasons), `pkg/kubelet/kuberuntime/kuberuntime_container.go`
  (`startContainer`: "Created container: %v", "Started container %v"; `killContainer`: "Stopping container %s" unless
  the caller gave a message), `kuberuntime_manager.go` (`computePodActions`: "Container %s failed %s probe", with
  ", will be restarted" where it is), `pkg/kubelet/prober/prober.go` (Warning "Unhealthy", "%s probe failed: %s"),
  `pkg/kubelet/eviction/eviction_manager.go` (`evictPod`: Warning "Evicted" with the eviction message),
  `pkg/kubelet/oom/oom_watcher_linux.go` (the node's Warning "SystemOOM") and @ 000d9543 `pkg/kubelet/kubelet.go`
  (`rejectPod`: a Warning with the admit handler's reason and message; the pod Failed, that reason, and the message
  "Pod was rejected: " + it);
- the JobSet controller (kubernetes-sigs/jobset @ 08dfbdfd `pkg/constants/constants.go`,
  `pkg/controllers/failure_policy.go`): "AllJobsCompleted", "jobset completed successfully"; for a failed child Job,
  what its failure policy did (`JOBSET_FAILURES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class EventType(StrEnum):
    """core/v1 EventTypeNormal and EventTypeWarning."""

    NORMAL = "Normal"
    WARNING = "Warning"


class Reason(StrEnum):
    """Every reason the simulated cluster's components give, in its events and in the conditions and statuses it
    writes, spelled once as upstream spells it (the sources in the module's docstring)."""

    # the Job controller: pkg/controller/controller_utils.go, pkg/controller/job (the Job's Failed condition)
    SUCCESSFUL_CREATE = "SuccessfulCreate"
    SUCCESSFUL_DELETE = "SuccessfulDelete"
    FAILED_CREATE = "FailedCreate"
    COMPLETED = "Completed"
    BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    POD_FAILURE_POLICY = "PodFailurePolicy"
    FAILED_INDEXES = "FailedIndexes"
    # the kubelet: pkg/kubelet/events/event.go, pkg/kubelet/eviction (a pod's status.reason too)
    CREATED = "Created"
    STARTED = "Started"
    KILLING = "Killing"
    UNHEALTHY = "Unhealthy"
    EVICTED = "Evicted"
    SYSTEM_OOM = "SystemOOM"
    FAILED_CREATE_POD_SANDBOX = "FailedCreatePodSandBox"
    # the kubelet's admission (a pod's status.reason too): pkg/kubelet/sysctl/allowlist.go ForbiddenReason
    SYSCTL_FORBIDDEN = "SysctlForbidden"
    # containerd: a container that never started (internal/cri/server/container_start.go errorStartReason)
    START_ERROR = "StartError"
    # the JobSet controller: pkg/constants/constants.go
    ALL_JOBS_COMPLETED = "AllJobsCompleted"
    FAILED_JOBS = "FailedJobs"
    REACHED_MAX_RESTARTS = "ReachedMaxRestarts"
    FAIL_JOBSET_ACTION = "FailJobSetFailurePolicyAction"
    RESTART_JOBSET_ACTION = "RestartJobSetFailurePolicyAction"
    RESTART_JOBSET_IGNORE_MAX_ACTION = "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"
    JOB_CREATION_FAILED = "JobCreationFailed"
    # Kubeflow Trainer: pkg/controller/trainjob_controller.go
    TRAINJOB_RESOURCES_CREATION_FAILED = "TrainJobResourcesCreationFailed"


@dataclass(frozen=True)
class Event:
    """One event: `at` seconds into its attempt, about `involved` (`Kind/namespace/name`)."""

    at: float
    type: EventType
    reason: str
    involved: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "at": round(self.at, 3),
            "type": self.type,
            "reason": self.reason,
            "object": self.involved,
            "message": self.message,
        }


def pod(namespace: str, name: str) -> str:
    return f"Pod/{namespace}/{name}"


def job(namespace: str, name: str) -> str:
    return f"Job/{namespace}/{name}"


def created_pod(at: float, namespace: str, job_name: str, pod_name: str) -> Event:
    return Event(at, EventType.NORMAL, Reason.SUCCESSFUL_CREATE, job(namespace, job_name), f"Created pod: {pod_name}")


def deleted_pod(at: float, namespace: str, job_name: str, pod_name: str) -> Event:
    return Event(at, EventType.NORMAL, Reason.SUCCESSFUL_DELETE, job(namespace, job_name), f"Deleted pod: {pod_name}")


def started(at: float, involved: str, container: str) -> list[Event]:
    """The kubelet's two events for a container it created and started."""
    return [
        Event(at, EventType.NORMAL, Reason.CREATED, involved, f"Created container: {container}"),
        Event(at, EventType.NORMAL, Reason.STARTED, involved, f"Started container {container}"),
    ]


def killing(at: float, involved: str, container: str, why: str = "") -> Event:
    """The kubelet stops a container: `why` is its caller's message (a failed probe), else "Stopping container"."""
    return Event(at, EventType.NORMAL, Reason.KILLING, involved, why or f"Stopping container {container}")


def probe_failed_kill(container: str, kind: str, restarts: bool) -> str:
    """The kubelet's message when a liveness or startup probe's failure stops a container (computePodActions: ", will
    be restarted" where its pod's restartPolicy restarts it)."""
    return f"Container {container} failed {kind} probe" + (", will be restarted" if restarts else "")


def unhealthy(at: float, involved: str, kind: str, output: str) -> Event:
    return Event(at, EventType.WARNING, Reason.UNHEALTHY, involved, f"{kind.capitalize()} probe failed: {output}")


def evicted(at: float, involved: str, message: str) -> Event:
    return Event(at, EventType.WARNING, Reason.EVICTED, involved, message)


def rejected(at: float, involved: str, reason: str, message: str) -> Event:
    """The kubelet refused a pod it was given (kubelet.go rejectPod: a Warning with its admit handler's reason and
    message), or could not make its sandbox."""
    return Event(at, EventType.WARNING, reason, involved, message)


def system_oom(at: float, node: str) -> Event:
    """The kubelet's OOM watcher on a node whose kernel's OOM killer ended a process (its message names the victim
    process, which only this machine's kernel log could name)."""
    return Event(at, EventType.WARNING, Reason.SYSTEM_OOM, f"Node//{node}", "System OOM encountered")


def job_completed(at: float, namespace: str, name: str) -> Event:
    return Event(at, EventType.NORMAL, Reason.COMPLETED, job(namespace, name), "Job completed")


def job_failed(at: float, namespace: str, name: str, reason: str, message: str) -> Event:
    return Event(at, EventType.WARNING, reason, job(namespace, name), message)


def operator_job_failed(
    at: float, kind: str, namespace: str, name: str, reason: str, message: str, warning: bool
) -> Event:
    """The Training Operator's event for a job of `kind` it failed (`controllers.jaxjob.failed_condition`)."""
    return Event(at, EventType.WARNING if warning else EventType.NORMAL, reason, f"{kind}/{namespace}/{name}", message)


JOBSET_FAILURES = {
    "FailedJobs": (Reason.FAILED_JOBS, "jobset failed due to one or more job failures"),
    "ReachedMaxRestarts": (Reason.REACHED_MAX_RESTARTS, "jobset failed due to reaching max number of restarts"),
    "FailJobSet": (Reason.FAIL_JOBSET_ACTION, "applying FailJobSet failure policy action"),
    "RestartJobSet": (Reason.RESTART_JOBSET_ACTION, "applying RestartJobSet failure policy action"),
    "RestartJobSetAndIgnoreMaxRestarts": (
        Reason.RESTART_JOBSET_IGNORE_MAX_ACTION,
        "applying RestartJobSetAndIgnoreMaxRestarts failure policy action",
    ),
}
"""What the JobSet controller records for a failed child Job (kubernetes-sigs/jobset @ 08dfbdfd
pkg/controllers/failure_policy.go executeFailurePolicy and the action appliers, pkg/constants/constants.go), by
what it did: no failurePolicy, maxRestarts used up, or the rule's action; each a Warning, its message naming the
first failed Job (`messageWithFirstFailedJob`)."""


def jobset_failure(at: float, namespace: str, name: str, action: str, first_failed: str) -> Event | None:
    """The JobSet's Warning for `action` (`JOBSET_FAILURES`), None for an action not listed there."""
    if action not in JOBSET_FAILURES:
        return None
    reason, message = JOBSET_FAILURES[action]
    involved = f"JobSet/{namespace}/{name}"
    return Event(at, EventType.WARNING, reason, involved, f"{message} (first failed job: {first_failed})")


def jobset_completed(at: float, namespace: str, name: str) -> Event:
    return Event(
        at, EventType.NORMAL, Reason.ALL_JOBS_COMPLETED, f"JobSet/{namespace}/{name}", "jobset completed successfully"
    )
