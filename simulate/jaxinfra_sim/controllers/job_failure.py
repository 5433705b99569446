"""When the Job controller fails a Job whose pods failed: its podFailurePolicy, backoffLimit and backoffLimitPerIndex,
and the Failed condition it sets (what a JobSet's failurePolicy rules match on). Until then the Job lives on: its
failed pods are recreated (restartPolicy Never) or their containers restarted in place by the kubelet (OnFailure).

Sources: kubernetes/kubernetes @ 6ae037f1 pkg/controller/job/job_controller.go (syncJob: `failed > backoffLimit`;
pastBackoffLimitOnFailure: the containers' restartCounts summed reach backoffLimit, `> 0` for 0; pastActiveDeadline,
from the Job's startTime, its active pods deleted; the conditions' reasons and messages), pod_failure_policy.go
(matchPodFailurePolicy: the first matching rule; onExitCodes, onPodConditions) and the backoffLimitPerIndex path (an
index past its limit is failed: reason FailedIndexes). Every failed pod of the attempt counts, not only the first:
when one process of a JAX group dies its peers fail too once the coordinator notices (the simulator ends them at once
instead of after the heartbeat timeout). Rules apply to the pod that failed by itself; the others were ended by the
simulator, and their exit codes on a cluster are not known here. Not emulated: the Job controller's own back-off
before it recreates a failed pod (10 s, doubling), which a cluster waits and the simulator neither waits nor records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from jaxinfra.upstream import JOBSET_RJOB
from jaxinfra_sim.core import model
from jaxinfra_sim.core.events import Reason

Failures = dict[tuple[str, int], dict[int, int]]
"""Pod failures so far, per child Job ((replicatedJob, job index); ("", 0) for a Job) and completion index."""


class FailedPod(Protocol):
    """What of a failed pod the Job controller reads (a podrun.PodRun)."""

    @property
    def pod(self) -> model.Pod: ...
    @property
    def terminated(self) -> Sequence[tuple[str, int]]: ...
    @property
    def preempted(self) -> float | None: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def deadline_exceeded(self) -> bool: ...


@dataclass(frozen=True)
class JobFailure:
    """A Job's Failed condition, as its controller sets it, and the report's words for it."""

    reason: str  # DeadlineExceeded | PodFailurePolicy | BackoffLimitExceeded | FailedIndexes
    message: str  # the condition's message: what a JobSet rule's onJobFailureMessagePatterns match
    summary: str  # the report's words: "backoffLimit (6) exceeded: 8 pod failures"


def job_of(pod: model.Pod) -> tuple[str, int]:
    """Which child Job a pod belongs to: (its replicatedJob, its job index); ("", 0) for a Job's own pods."""
    return pod.labels.get(JOBSET_RJOB, ""), pod.job_index


def pod_failure_action(
    rules: Sequence[Mapping[str, Any]], run: FailedPod
) -> tuple[str, int | None, tuple[str, int] | None]:
    """The action of the first podFailurePolicy rule matching a failed pod, its index, and the (container, exit
    code) it matched on ("Count", None, None if none). An onExitCodes rule looks at each container that exited
    non-zero (`FailedPod.terminated`: main containers, then init containers; a `containerName` picks one)."""
    for index, rule in enumerate(rules):
        codes = rule.get("onExitCodes")
        if codes:
            values, operator, wanted = set(codes.get("values", [])), codes.get("operator"), codes.get("containerName")
            for name, code in run.terminated:
                if wanted in (None, name) and (
                    code in values if operator == "In" else operator == "NotIn" and code not in values
                ):
                    return rule.get("action", "Count"), index, (name, code)
        conditions = {c.get("type") for c in rule.get("onPodConditions") or [] if c.get("status", "True") == "True"}
        if "DisruptionTarget" in conditions and run.preempted is not None:  # --preempt: the kubelet marks it disrupted
            return rule.get("action", "Count"), index, None
    return "Count", None, None


def tolerated(policy: model.RestartPolicy) -> int | None:
    """How many pod failures the Job survives: backoffLimit failed pods (`failed > backoffLimit` fails it), one fewer
    where the kubelet restarts containers in place (their restartCounts reaching backoffLimit fail it; any restart
    for 0). None: no limit."""
    if policy.backoff_limit is None:
        return None
    return max(policy.backoff_limit - 1, 0) if policy.in_place else policy.backoff_limit


def index_intervals(indexes: Iterable[int]) -> str:
    """Completion indexes as a Job's status writes them (status.failedIndexes, completedIndexes): ascending, runs of
    three or more as `first-last`, e.g. "1,3,5-7" (kubernetes pkg/controller/job/indexed_job_utils.go,
    orderedIntervals)."""
    runs: list[list[int]] = []
    for i in sorted(set(indexes)):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a},{b}" if b == a + 1 else f"{a}-{b}" for a, b in runs)


def failed_indexes(policy: model.RestartPolicy, lost: int = 1, indexes: Iterable[int] = ()) -> JobFailure:
    """The Failed condition of a Job whose indexes (`lost` of them; `indexes`, where known) failed past
    backoffLimitPerIndex: at once past maxFailedIndexes, else once none of its indexes is left running."""
    limit = policy.max_failed_indexes
    summary = (
        f"maxFailedIndexes ({limit}) exceeded: {lost} failed indexes"
        if limit is not None and lost > limit
        else f"backoffLimitPerIndex ({policy.backoff_limit_per_index}) exceeded"
        + (f" on {lost} indexes" if lost > 1 else "")
    )
    if written := index_intervals(indexes):
        summary += f" (failedIndexes {written})"
    return JobFailure(Reason.FAILED_INDEXES, "Job has failed indexes", summary)


def job_failed(
    policy: model.RestartPolicy, runs: Sequence[FailedPod], first: FailedPod, failures: MutableMapping[int, int]
) -> JobFailure | None:
    """The Job controller's answer to one attempt of a Job (`policy`, kind "job") whose pods `runs` failed, `first`
    by itself: its Failed condition, or None while it is within its limits. `failures` (completion index -> pod
    failures) carries the Job's count from attempt to attempt. A Job past its activeDeadlineSeconds (its pods
    deleted by the runner) fails whatever its other limits say: the deadline takes precedence."""
    if any(r.deadline_exceeded for r in runs):
        return JobFailure(
            Reason.DEADLINE_EXCEEDED,
            "Job was active longer than specified deadline",
            f"activeDeadlineSeconds ({policy.active_deadline}) exceeded",
        )
    action, index, container = pod_failure_action(policy.pod_failure_rules, first)
    pod = first.pod
    if action in ("FailJob", "FailIndex"):
        matched = (
            f"Container {container[0]} for pod {pod.namespace}/{pod.name} failed with exit code {container[1]}"
            if container is not None
            else f"Pod {pod.namespace}/{pod.name} has condition DisruptionTarget"
        )
        said = f"podFailurePolicy: {action} on {pod.hostname} ({first.reason})"
        if action == "FailJob":
            return JobFailure(Reason.POD_FAILURE_POLICY, f"{matched} matching FailJob rule at index {index}", said)
        # FailIndex: the index fails for good; its JAX group cannot complete without it
        return JobFailure(Reason.FAILED_INDEXES, "Job has failed indexes", said)
    counted = [r.pod.completion_index for r in runs if not (r is first and action == "Ignore")]
    for index in counted:
        failures[index] = failures.get(index, 0) + 1
    per_index = policy.backoff_limit_per_index
    # each index against its own count (the pods' job-index-failure-count annotation, indexed_job_utils.go
    # getIndexFailureCount), never another index's: an index fails once it has failed backoffLimitPerIndex + 1 times
    over = sorted({i for i in counted if per_index is not None and failures[i] > per_index})
    if over:
        return failed_indexes(policy, len(over), over)
    total, limit = sum(failures.values()), tolerated(policy)
    if limit is not None and total > limit:
        return JobFailure(
            Reason.BACKOFF_LIMIT_EXCEEDED,
            "Job has reached the specified backoff limit",
            f"backoffLimit ({policy.backoff_limit}) exceeded: {total} pod failures",
        )
    return None
