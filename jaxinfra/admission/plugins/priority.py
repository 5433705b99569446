"""The Priority admission plugin: mutating on a pod (spec.priority and spec.preemptionPolicy from its PriorityClass,
or from the global default), validating on a PriorityClass (only one class may be the global default).

Emulated from (facts and message texts, not code):
- kubernetes/kubernetes plugin/pkg/admission/priority/admission.go (commit acd88a099d30b31d7cfe6a20ce3d07c74830dd65
  for `no PriorityClass with name %v was found` and the spec.priority mismatch; the stored copy that also carries
  admitWorkload, whose commit the index does not name, for preemptionPolicy, for setting the global default's name
  on the pod, for PreemptLowerPriority when no default class exists, and for no namespace restriction on the system
  classes): the global default is the globalDefault class with the lowest value; no class means priority 0; the
  PriorityClass validating half refuses a second globalDefault class.
- kubernetes/kubernetes pkg/apis/scheduling/types.go facts: system-cluster-critical = 2000000000,
  system-node-critical = 2000001000 (SystemCriticalPriority + 1000), both always present; PriorityClass
  preemptionPolicy defaults to PreemptLowerPriority (pkg/apis/scheduling/v1/defaults.go).
"""

from __future__ import annotations

from collections.abc import Mapping

from jaxinfra.admission.decoded import as_str
from jaxinfra.admission.store import Finding, Store, meta
from jaxinfra.upstream import SYSTEM_PRIORITY_CLASSES

# --- Priority -----------------------------------------------------------------------------------------------------

_PREEMPT_LOWER = "PreemptLowerPriority"


def _class_value(pc: Mapping) -> int:
    value = pc.get("value")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _class_policy(pc: Mapping) -> str:
    return as_str(pc.get("preemptionPolicy")) or _PREEMPT_LOWER


def _global_default(store: Store) -> Mapping | None:
    """The globalDefault class with the lowest value (the plugin's tie-break when several exist)."""
    best: Mapping | None = None
    for pc in store.of_kind("PriorityClass"):
        if pc.get("globalDefault") is True and (best is None or _class_value(pc) < _class_value(best)):
            best = pc
    return best


def pod_priority(pod: dict, store: Store) -> list[Finding]:
    """Mutating Priority: resolve spec.priority and spec.preemptionPolicy from the pod's class."""
    spec = pod.setdefault("spec", {})
    if not isinstance(spec, dict):
        return []
    name = as_str(spec.get("priorityClassName"))
    if not name:
        default = _global_default(store)
        value, policy = (_class_value(default), _class_policy(default)) if default else (0, _PREEMPT_LOWER)
        if default is not None and as_str(meta(default).get("name")):
            spec["priorityClassName"] = meta(default)["name"]
    elif name in SYSTEM_PRIORITY_CLASSES:
        value, policy = SYSTEM_PRIORITY_CLASSES[name], _PREEMPT_LOWER
    elif (pc := store.get("PriorityClass", "", name)) is not None:
        value, policy = _class_value(pc), _class_policy(pc)
    else:
        return [
            Finding(
                ("spec", "priorityClassName"),
                name,
                f"no PriorityClass with name {name} was found",
                f"add a PriorityClass (scheduling.k8s.io/v1) named {name} to the inputs, or name one that "
                "exists (system-cluster-critical and system-node-critical always do)",
            )
        ]
    given = spec.get("priority")
    if isinstance(given, int) and not isinstance(given, bool) and given != value:
        return [
            Finding(
                ("spec", "priority"),
                given,
                f"the integer value of priority ({given}) must not be provided in pod spec; priority "
                f"admission controller computed {value} from the given PriorityClass name",
                "drop spec.priority: the PriorityClass decides it",
            )
        ]
    spec["priority"] = value
    given_policy = spec.get("preemptionPolicy")
    if isinstance(given_policy, str) and given_policy != policy:
        return [
            Finding(
                ("spec", "preemptionPolicy"),
                given_policy,
                f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; "
                f"priority admission controller computed {policy} from the given PriorityClass name",
                "drop spec.preemptionPolicy: set preemptionPolicy on the PriorityClass instead",
            )
        ]
    spec["preemptionPolicy"] = policy
    return []


def priority_class_check(obj: Mapping, store: Store) -> list[Finding]:
    """Validating Priority on a PriorityClass: only one class may be the global default."""
    if obj.get("globalDefault") is not True:
        return []
    name = meta(obj).get("name")
    for pc in store.of_kind("PriorityClass"):
        other = meta(pc).get("name")
        if pc.get("globalDefault") is True and other != name:
            return [
                Finding(
                    ("globalDefault",),
                    True,
                    f"PriorityClass {other} is already marked as default. Only one default can exist",
                    f"set globalDefault: false here or on PriorityClass {other}",
                )
            ]
    return []
