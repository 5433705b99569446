"""What a JobSet's controller does when one of its child Jobs fails: its failurePolicy rules, matched on the Job's
Failed condition (why the Job failed: job_failure.py).

Source: kubernetes-sigs/jobset pkg/controllers/failure_policy.go (executeFailurePolicy,
findFirstFailedPolicyRuleAndJob, ruleIsApplicable, the action appliers; no rule matched: RestartJobSet; no
failurePolicy: the JobSet fails).
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
