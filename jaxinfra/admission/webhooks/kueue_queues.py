"""Kueue's validating webhooks for its quota objects, ClusterQueue and Cohort, as far as cohorts go: a
`borrowingLimit` or `lendingLimit` is refused where there is no cohort to borrow from or lend to ("must be nil when
cohort is empty"; for a Cohort, "when parent is empty"), a ClusterQueue's `lendingLimit` above its `nominalQuota`
("must be less than or equal to the nominalQuota"), and a negative quota or limit.

Source: kubernetes-sigs/kueue v0.19.2 (8eab6877, the release `jaxinfra.releases` pins): pkg/webhooks/
clusterqueue_webhook.go (validateClusterQueueSpec, validateFlavorQuotas, validateLimit, validateLendingLimit,
validateResourceQuantity, limitIsEmptyErrorMsgTemplate, lendingLimitErrorMsg), pkg/webhooks/cohort_webhook.go (the
same rules with hasParent from `parentName`, lending above nominal allowed). The v1beta1 spelling of a ClusterQueue's
cohort, `spec.cohort`, converts to v1beta2's `spec.cohortName`, so either counts.

Knowingly not emulated: the webhooks' other rules (preemption, flavor fungibility, fair sharing, resource and flavor
counts, the name matching coveredResources, which the CRD's CEL rules also state), update-time rules.
"""

from __future__ import annotations

from collections.abc import Mapping

from jaxinfra.admission.decoded import as_list, as_map
from jaxinfra.admission.store import Finding
from jaxinfra.admission.webhooks.shared import invalid_text
from jaxinfra.quantity import parse as quantity
from jaxinfra.upstream import KUEUE_API_GROUP

CLUSTER_QUEUE = (KUEUE_API_GROUP, "ClusterQueue")
COHORT = (KUEUE_API_GROUP, "Cohort")
QUOTA_KINDS = (CLUSTER_QUEUE, COHORT)

_EMPTY = "must be nil when {} is empty"  # kueue limitIsEmptyErrorMsgTemplate
_ABOVE_NOMINAL = "must be less than or equal to the nominalQuota"  # kueue lendingLimitErrorMsg
_NEGATIVE = "must be greater than or equal to 0"  # apimachinery IsNegativeErrorMsg


def quota_validate(obj: Mapping, group_kind: tuple[str, str]) -> list[Finding]:
    """What Kueue's ClusterQueue or Cohort webhook refuses of its quotas' limits."""
    spec = as_map(obj.get("spec"))
    cohort = group_kind == COHORT
    parent = spec.get("parentName") if cohort else spec.get("cohortName") or spec.get("cohort")
    out: list[Finding] = []
    for g, group in enumerate(as_list(spec.get("resourceGroups"))):
        for f, flavor in enumerate(as_list(as_map(group).get("flavors"))):
            for r, resource in enumerate(as_list(as_map(flavor).get("resources"))):
                at = ("spec", "resourceGroups", g, "flavors", f, "resources", r)
                out += _limits(as_map(resource), at, bool(parent), cohort)
    return out


def _limits(resource: Mapping, at: tuple[str | int, ...], has_parent: bool, cohort: bool) -> list[Finding]:
    out: list[Finding] = []
    nominal = quantity(resource.get("nominalQuota"))
    if nominal is not None and nominal < 0:
        out.append(_finding((*at, "nominalQuota"), resource["nominalQuota"], _NEGATIVE, "use a quota of 0 or more"))
    for field in ("borrowingLimit", "lendingLimit"):
        value = resource.get(field)
        if value is None:
            continue
        amount = quantity(value)
        where = (*at, field)
        if field == "lendingLimit" and amount is not None and amount < 0:
            out.append(_finding(where, value, _NEGATIVE, f"use a {field} of 0 or more"))
        if not has_parent:
            joins = "a parent (spec.parentName)" if cohort else "a cohort (spec.cohortName)"
            out.append(
                _finding(
                    where,
                    value,
                    _EMPTY.format("parent" if cohort else "cohort"),
                    f"remove {field}, or put the {'Cohort' if cohort else 'ClusterQueue'} in {joins}",
                )
            )
        if field == "borrowingLimit" and amount is not None and amount < 0:
            out.append(_finding(where, value, _NEGATIVE, f"use a {field} of 0 or more"))
        if field == "lendingLimit" and not cohort and amount is not None and nominal is not None and amount > nominal:
            out.append(_finding(where, value, _ABOVE_NOMINAL, "lend at most the nominalQuota"))
    return out


def _finding(at: tuple[str | int, ...], value: object, detail: str, fix: str) -> Finding:
    return Finding(at, value, invalid_text(str(value), detail), fix, step="webhook")
