"""A ResourceQuota's scopes as the API server's validation step checks them.

Emulated from kubernetes/kubernetes pkg/apis/core/validation/validation.go validateResourceQuotaScopes and
validateScopedResourceSelectorRequirement, and pkg/apis/core/helper/helpers.go IsResourceQuotaScopeValidForResource
(messages carried over): a scope (in spec.scopes or spec.scopeSelector) must be a known one; BestEffort limits only
the pod count, Terminating, NotTerminating, NotBestEffort, PriorityClass and CrossNamespacePodAffinity only the pod
count and compute (cpu, memory, their requests. and limits.), each other standard resource named in spec.hard being
"unsupported scope applied to resource"; BestEffort with NotBestEffort, or Terminating with NotTerminating, conflict;
a scope selector's operator: `Exists` only for the scopes other than PriorityClass, at least one value with `In` and
`NotIn`, none with `Exists` and `DoesNotExist`, no other operator (validateScopedResourceSelectorRequirement).

Knowingly not emulated: the standard names this module does not list (extended resources, as upstream, are not
checked).
"""

from __future__ import annotations

from collections.abc import Mapping

from jaxinfra.admission.decoded import as_list, as_map
from jaxinfra.admission.store import Finding
from jaxinfra.admission.validation.messages import invalid_value, required_value

_POD_COUNT = frozenset({"pods"})
_COMPUTE = frozenset({"cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"})
_OTHER_STANDARD = frozenset(
    {
        "services",
        "services.nodeports",
        "services.loadbalancers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "replicationcontrollers",
        "resourcequotas",
        "requests.storage",
        "ephemeral-storage",
        "requests.ephemeral-storage",
        "limits.ephemeral-storage",
    }
)
_POD_SCOPES = frozenset(
    {"Terminating", "NotTerminating", "NotBestEffort", "PriorityClass", "CrossNamespacePodAffinity"}
)
_SCOPES = _POD_SCOPES | {"BestEffort"}
_CONFLICTS = (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating"))
_EXISTS_ONLY = frozenset({"BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "CrossNamespacePodAffinity"})
_EXISTS_ONLY_DETAIL = (
    "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, "
    "ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"
)
_FIX = "limit only what the scope can count (BestEffort: pods; the other pod scopes: pods, cpu and memory)"


def _applies(scope: str, resource: str) -> bool:
    if scope == "BestEffort":
        return resource in _POD_COUNT
    if scope in _POD_SCOPES:
        return resource in _POD_COUNT | _COMPUTE
    return True


def validate_resource_quota(obj: Mapping) -> list[Finding]:
    spec = as_map(obj.get("spec"))
    hard = sorted(str(k) for k in as_map(spec.get("hard")))
    standard = [k for k in hard if k in _POD_COUNT | _COMPUTE | _OTHER_STANDARD]
    out: list[Finding] = []
    scopes = [s for s in as_list(spec.get("scopes")) if isinstance(s, str)]
    for scope in scopes:
        if scope not in _SCOPES:
            out.append(invalid_value(("spec", "scopes"), scopes, "unsupported scope", f"use one of {sorted(_SCOPES)}"))
        if any(not _applies(scope, k) for k in standard):
            out.append(invalid_value(("spec", "scopes"), scopes, "unsupported scope applied to resource", _FIX))
    for pair in _CONFLICTS:
        if set(pair) <= set(scopes):
            out.append(
                invalid_value(("spec", "scopes"), scopes, "conflicting scopes", f"keep one of {' and '.join(pair)}")
            )
    selector = as_map(spec.get("scopeSelector"))
    at = ("spec", "scopeSelector", "matchExpressions")
    for req in as_list(selector.get("matchExpressions")):
        name = as_map(req).get("scopeName")
        if not isinstance(name, str):
            continue
        if name not in _SCOPES:
            out.append(invalid_value((*at, "scopeName"), name, "unsupported scope", f"use one of {sorted(_SCOPES)}"))
        if any(not _applies(name, k) for k in standard):
            out.append(invalid_value(at, dict(selector), "unsupported scope applied to resource", _FIX))
        out += _operator(at, name, as_map(req))
    return out


def _operator(at: tuple[str, ...], scope: str, req: Mapping) -> list[Finding]:
    """A scope selector's operator and values (validateScopedResourceSelectorRequirement)."""
    op, values = req.get("operator"), as_list(req.get("values"))
    out: list[Finding] = []
    if scope in _EXISTS_ONLY and op != "Exists":
        out.append(invalid_value((*at, "operator"), op, _EXISTS_ONLY_DETAIL, f"use operator: Exists for {scope}"))
    if op in ("In", "NotIn"):
        if not values:
            out.append(
                required_value(
                    (*at, "values"),
                    "list the PriorityClass names the quota counts",
                    "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
                )
            )
    elif op in ("Exists", "DoesNotExist"):
        if values:
            out.append(
                invalid_value(
                    (*at, "values"),
                    values,
                    "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
                    "remove values",
                )
            )
    else:
        out.append(
            invalid_value(
                (*at, "operator"), op, "not a valid selector operator", "use In, NotIn, Exists or DoesNotExist"
            )
        )
    return out
