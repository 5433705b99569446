"""What a JobSet's controller does when one of its child Jobs fails: its failurePolicy rules, and why the child Job
failed (its podFailurePolicy), which those rules match on.

Sources: kubernetes-sigs/jobset pkg/controllers/failure_policy.go (executeFailurePolicy,
findFirstFailedPolicyRuleAndJob, ruleIsApplicable, the action appliers; no rule matched: RestartJobSet; no
failurePolicy: the JobSet fails), and kubernetes pkg/controller/job (the Job's failure condition: reason
PodFailurePolicy with "Container C for pod NS/P failed with exit code N matching FailJob rule at index I", else
BackoffLimitExceeded, "Job has reached the specified backoff limit").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Actions that recreate every child Job; whether each counts towards maxRestarts. RestartJob and
#: RestartJobAndIgnoreMaxRestarts recreate the failed Job alone on a cluster; its peers in one JAX group then fail
#: too, so the simulator recreates the group for them (docs/simulate.md says so).
RESTARTS = {
    "RestartJobSet": True,
    "RestartJob": True,
    "RestartJobSetAndIgnoreMaxRestarts": False,
    "RestartJobAndIgnoreMaxRestarts": False,
}


@dataclass(frozen=True)
class Decision:
    """The controller's answer to a failed child Job: `action` (FailJobSet or a RESTARTS key), by which rule."""

    action: str
    rule: str  # "failurePolicyRule0" or its name; "" where no rule matched (the default action)

    @property
    def counts(self) -> bool:
        return RESTARTS.get(self.action, False)


def pod_failure_action(rules: Sequence[Mapping[str, Any]], run: Any) -> tuple[str, int | None]:
    """The action of the first podFailurePolicy rule matching a failed pod, and its index ("Count", None if none)."""
    for index, rule in enumerate(rules):
        codes = rule.get("onExitCodes")
        if codes and run.exit_code is not None:
            inside = run.exit_code in set(codes.get("values", []))
            if (codes.get("operator") == "In" and inside) or (codes.get("operator") == "NotIn" and not inside):
                return rule.get("action", "Count"), index
        conditions = {c.get("type") for c in rule.get("onPodConditions") or [] if c.get("status", "True") == "True"}
        if "DisruptionTarget" in conditions and run.preempted is not None:  # --preempt: the kubelet marks it disrupted
            return rule.get("action", "Count"), index
    return "Count", None


def job_failure(pod_rules: Sequence[Mapping[str, Any]], run: Any) -> tuple[str, str]:
    """Why the child Job of a failed pod failed, as its condition says: (reason, message)."""
    action, index = pod_failure_action(pod_rules, run)
    if action == "FailJob" and run.exit_code is not None:
        pod = run.pod
        return "PodFailurePolicy", (
            f"Container {pod.container} for pod {pod.namespace}/{pod.name} failed with exit code {run.exit_code} "
            f"matching FailJob rule at index {index}"
        )
    return "BackoffLimitExceeded", "Job has reached the specified backoff limit"


def decide(rules: Sequence[Mapping[str, Any]], rjob: str, reason: str, message: str) -> Decision:
    """The first rule (in order) that applies to the failed Job of replicatedJob `rjob`, else RestartJobSet."""
    for index, rule in enumerate(rules):
        reasons, targets = rule.get("onJobFailureReasons") or [], rule.get("targetReplicatedJobs") or []
        patterns = rule.get("onJobFailureMessagePatterns") or []
        if (
            (not reasons or reason in reasons)
            and (not targets or rjob in targets)
            and (not patterns or any(re.search(str(p), message) for p in patterns))
        ):
            return Decision(str(rule.get("action", "")), str(rule.get("name") or f"failurePolicyRule{index}"))
    return Decision("RestartJobSet", "")
