"""The API server's built-in admission plugins that act on pods and on object counts: LimitRanger, Priority and
ResourceQuota, in the order kube-apiserver runs them, so a plan is refused here exactly where a cluster refuses it.

Order (the API server stops at the first plugin that refuses): mutating LimitRanger (container defaults), mutating
Priority (spec.priority, spec.preemptionPolicy), then validating LimitRanger (min / max / maxLimitRequestRatio) and
ResourceQuota last. Before them, admit_pod applies the one pod default these plugins depend on (`defaults.requests_from_limits`,
SetDefaults_Pod: a container limit without a request gives the request, so a LimitRange's defaultRequest never
overrides it). LimitRanges are read as stored: their defaults already filled in from max and min.

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
- kubernetes/kubernetes plugin/pkg/admission/limitranger/admission.go (the stored copy with validateContainerLimits;
  the index names no commit; commit 0061479890ddf827bd55570ccbf8bd59352543c3 for the annotation and defaulting):
  defaults from type Container items fill missing requests/limits of containers and init containers and are recorded
  in the `kubernetes.io/limit-ranger` annotation; min/max/ratio for type Container per container, for type Pod on
  the pod's summed requests/limits, for type PersistentVolumeClaim on spec.resources.requests; exact comparisons;
  every violation of the first LimitRange that has any is reported.
- kubernetes/apiserver pkg/admission/plugin/resourcequota/controller.go (commit
  24a394e516bfda066d7e2221d7d92c052de27c54): CheckRequest -- a quota applies when one of its hard resources is tracked
  for the object and every scope matches; Constraints first (`failed quota: <name>: ...`), negative usage refused,
  zero usage ignored, then `exceeded quota: <name>, requested: ..., used: ..., limited: ...` with prettyPrint's
  sorted `name=quantity` lists; no evaluator means a generic `count/<resource>.<group>` one; same repository,
  pkg/quota/v1/generic/evaluator.go (object counts; scoped quotas never match them) and pkg/quota/v1/resources.go.
- kubernetes/kubernetes pkg/quota/v1/evaluator/core/pods.go (commit 05e7cb29dcda163fe2adfc6952f89c164dc061b3): the
  resources a pod is charged (pods, count/pods, cpu, memory, ephemeral-storage with requests./limits. forms,
  hugepages-*, extended resources only as requests.<name>), the cpu/memory-only rule `must specify <resource> for:
  <containers>`, scopes Terminating / NotTerminating / BestEffort / NotBestEffort / PriorityClass /
  CrossNamespacePodAffinity; services.go (commit 04791b4906602ffda5ccf9bc4c84d3329f1d7080);
  persistent_volume_claims.go (commit 008ef699a50afe9b8c52df50b6d2cfc21c4f7240); registry.go (commit
  1163218c3bf4cde4615b0c36e89e666d7ae95ece) for the legacy aliases configmaps, secrets, resourcequotas,
  replicationcontrollers; pkg/quota/v1/install/registry.go for the resources quota ignores (events, reviews).
- kubernetes/apimachinery pkg/api/resource/quantity.go facts for showing a quantity back (CanonicalizeBytes): the
  format follows the suffix written, binary below 1024 or fractional shows as decimal, precision is nano rounded up.

Knowingly not emulated: the quota controller's own delay (a quota's status is taken as already synced, `status
unknown for quota` never occurs), AdmissionConfiguration limitedResources, in-place resize and updates, pod-level
resources defaulting (pod-level requests/limits are honoured as written), DefaultStorageClass (a claim without a
class is charged to no class), and the pod validation that runs between the mutating and validating plugins (e.g.
a LimitRange default limit below the container's request).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from jaxinfra.admission import defaults
from jaxinfra.admission.decoded import as_list, as_map, as_str
from jaxinfra.admission.store import Finding, Path, Store, meta, namespace_of
from jaxinfra.quantity import parse, suffix_of

__all__ = ["Usage", "admit_pod", "admit_object"]

# --- quantities: (exact value, format), added and shown back as resource.Quantity does -----------------------------

_Q = tuple[Fraction, str]
_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_ZERO: _Q = (Fraction(0), "DecimalSI")


def _quantity(value: Any) -> _Q | None:
    """A quantity as written, with the format its suffix implies; None for one the schema step reports."""
    amount = parse(value)
    if amount is None:
        return None
    suffix = suffix_of(value)
    fmt = "BinarySI" if suffix in _BINARY[1:] else "DecimalExponent" if suffix[:1] in ("e", "E") else "DecimalSI"
    return amount, fmt


def _digits(number: int) -> str:
    """An integer's decimal text; past Python's 4300-digit str limit (a quantity like 1e999999), a short
    mantissa-and-exponent form so that showing an absurd value never raises."""
    if number.bit_length() < 14000:
        return str(number)
    exponent = int(abs(number).bit_length() * 0.30103) - 30
    return f"{number // 10**exponent if number > 0 else -(-number // 10**exponent)}e{exponent}"


def _show(q: _Q) -> str:
    """What the API server prints for a quantity (its canonical form: `8`, `500m`, `1536Mi`, `2k`)."""
    amount, fmt = q
    if amount == 0:
        return "0"
    if fmt == "BinarySI" and abs(amount) >= 1024 and amount.denominator == 1:
        number, power = int(amount), 0
        while number % 1024 == 0 and power < len(_BINARY) - 1:
            number, power = number // 1024, power + 1
        return f"{_digits(number)}{_BINARY[power]}"
    nanos = amount * 10**9
    number = math.ceil(nanos) if nanos > 0 else math.floor(nanos)
    exponent = -9
    while number % 1000 == 0 and exponent < 18:
        number, exponent = number // 1000, exponent + 3
    if fmt == "DecimalExponent":
        return f"{_digits(number)}e{exponent}" if exponent else _digits(number)
    return f"{_digits(number)}{_DECIMAL[exponent]}"


def _add(a: _Q, b: _Q) -> _Q:
    """Quantity.Add: the sum keeps the first operand's format unless that operand is zero."""
    return a[0] + b[0], (b[1] if a[0] == 0 else a[1])


def _add_into(total: dict[str, _Q], more: Mapping[str, _Q]) -> None:
    for name, q in more.items():
        total[name] = _add(total[name], q) if name in total else q


def _max_into(total: dict[str, _Q], more: Mapping[str, _Q]) -> None:
    for name, q in more.items():
        if name not in total or q[0] > total[name][0]:
            total[name] = q


def _resources(value: Any) -> dict[str, _Q]:
    """A ResourceList (requests or limits) parsed; entries of an odd type are skipped (the schema step reports)."""
    if not isinstance(value, Mapping):
        return {}
    out = {}
    for name, raw in value.items():
        if isinstance(name, str) and (q := _quantity(raw)) is not None:
            out[name] = q
    return out


def _pretty(items: Mapping[str, _Q]) -> str:
    """controller.go prettyPrint: `name=quantity` sorted by name, comma-joined."""
    return ",".join(f"{name}={_show(items[name])}" for name in sorted(items))








# --- the pod's containers -----------------------------------------------------------------------------------------

_CONTAINER_KINDS = (("containers", "container"), ("initContainers", "init container"))


def _containers(pod: Mapping) -> Iterator[tuple[Path, Mapping]]:
    """Every container and init container, with its path, in field order."""
    spec = as_map(pod.get("spec"))
    for field, _ in _CONTAINER_KINDS:
        for i, c in enumerate(as_list(spec.get(field))):
            if isinstance(c, Mapping):
                yield ("spec", field, i), c


def _container_resources(c: Mapping) -> tuple[dict[str, _Q], dict[str, _Q]]:
    res = as_map(c.get("resources"))
    return _resources(res.get("requests")), _resources(res.get("limits"))


def _fill(c: Any, key: str, values: Mapping[str, Any]) -> list[str]:
    """Add to a container's resources.<key> the entries it lacks (creating the maps only when one is added); the
    names added, sorted. A container or map of an odd type is left alone (the schema step reports it)."""
    if not isinstance(c, dict):
        return []
    res = c.get("resources", {})
    have = res.get(key, {}) if isinstance(res, dict) else None
    if not isinstance(have, dict):
        return []
    added = sorted(k for k in values if k not in have)
    if added:
        have.update({k: values[k] for k in added})
        res[key] = have
        c["resources"] = res
    return added


_POD_LEVEL = ("cpu", "memory")


def _aggregate(pod: Mapping, which: int, overhead: bool = True) -> dict[str, _Q]:
    """PodRequests (which=0) / PodLimits (which=1) from pkg/api/v1/resource: containers and sidecars add up, a plain
    init container counts alone (with the sidecars started before it), the larger wins; pod-level values replace
    cpu/memory/hugepages; overhead (quota's sum, not LimitRanger's) adds to every request and to limits present."""
    spec = as_map(pod.get("spec"))
    total: dict[str, _Q] = {}
    for c in as_list(spec.get("containers")):
        if isinstance(c, Mapping):
            _add_into(total, _container_resources(c)[which])
    sidecars: dict[str, _Q] = {}
    init: dict[str, _Q] = {}
    for c in as_list(spec.get("initContainers")):
        if not isinstance(c, Mapping):
            continue
        own = _container_resources(c)[which]
        if c.get("restartPolicy") == "Always":
            _add_into(total, own)
            _add_into(sidecars, own)
            _max_into(init, sidecars)
        else:
            alone = dict(own)
            _add_into(alone, sidecars)
            _max_into(init, alone)
    _max_into(total, init)
    pod_level = _resources(as_map(spec.get("resources")).get(("requests", "limits")[which]))
    for name, q in pod_level.items():
        if name in _POD_LEVEL or name.startswith("hugepages-"):
            total[name] = q
    for name, q in _resources(spec.get("overhead") if overhead else None).items():
        if which == 0 or name in total:
            total[name] = _add(total[name], q) if name in total else q
    return total


# --- Priority -----------------------------------------------------------------------------------------------------

_SYSTEM_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
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


def _priority(pod: dict, store: Store) -> list[Finding]:
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
    elif name in _SYSTEM_CLASSES:
        value, policy = _SYSTEM_CLASSES[name], _PREEMPT_LOWER
    elif (pc := store.get("PriorityClass", "", name)) is not None:
        value, policy = _class_value(pc), _class_policy(pc)
    else:
        return [Finding(("spec", "priorityClassName"), name, f"no PriorityClass with name {name} was found",
                        f"add a PriorityClass (scheduling.k8s.io/v1) named {name} to the inputs, or name one that "
                        "exists (system-cluster-critical and system-node-critical always do)")]
    given = spec.get("priority")
    if isinstance(given, int) and not isinstance(given, bool) and given != value:
        return [Finding(("spec", "priority"), given,
                        f"the integer value of priority ({given}) must not be provided in pod spec; priority "
                        f"admission controller computed {value} from the given PriorityClass name",
                        "drop spec.priority: the PriorityClass decides it")]
    spec["priority"] = value
    given_policy = spec.get("preemptionPolicy")
    if isinstance(given_policy, str) and given_policy != policy:
        return [Finding(("spec", "preemptionPolicy"), given_policy,
                        f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; "
                        f"priority admission controller computed {policy} from the given PriorityClass name",
                        "drop spec.preemptionPolicy: set preemptionPolicy on the PriorityClass instead")]
    spec["preemptionPolicy"] = policy
    return []


def _priority_class(obj: Mapping, store: Store) -> list[Finding]:
    """Validating Priority on a PriorityClass: only one class may be the global default."""
    if obj.get("globalDefault") is not True:
        return []
    name = meta(obj).get("name")
    for pc in store.of_kind("PriorityClass"):
        other = meta(pc).get("name")
        if pc.get("globalDefault") is True and other != name:
            return [Finding(("globalDefault",), True,
                            f"PriorityClass {other} is already marked as default. Only one default can exist",
                            f"set globalDefault: false here or on PriorityClass {other}")]
    return []


# --- LimitRanger --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _LimitItem:
    """One spec.limits[] entry after SetDefaults_LimitRangeItem, with the raw default values for writing back."""

    type: str
    min: dict[str, _Q]
    max: dict[str, _Q]
    ratio: dict[str, _Q]
    default: dict[str, Any]
    default_request: dict[str, Any]


def _limit_items(limit_range: Mapping) -> list[_LimitItem]:
    """A LimitRange's items as stored: their default and defaultRequest already filled from max and min
    (`defaults`, SetDefaults_LimitRange)."""
    items = []
    for raw in as_list(as_map(limit_range.get("spec")).get("limits")):
        if not isinstance(raw, Mapping):
            continue
        default = {k: v for k, v in as_map(raw.get("default")).items() if _quantity(v) is not None}
        request = {k: v for k, v in as_map(raw.get("defaultRequest")).items() if _quantity(v) is not None}
        items.append(_LimitItem(as_str(raw.get("type")), _resources(raw.get("min")), _resources(raw.get("max")),
                                _resources(raw.get("maxLimitRequestRatio")), default, request))
    return items


def _limit_ranges(store: Store, namespace: str) -> list[tuple[str, list[_LimitItem]]]:
    return [(as_str(meta(lr).get("name")), _limit_items(lr)) for lr in store.of_kind("LimitRange", namespace)]


def _limit_defaults(pod: dict, ranges: list[tuple[str, list[_LimitItem]]]) -> None:
    """Mutating LimitRanger: fill each container's missing requests/limits from every LimitRange in turn."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    for _, items in ranges:
        limits: dict[str, Any] = {}
        requests: dict[str, Any] = {}
        for item in items:
            if item.type == "Container":
                limits.update(item.default)
                requests.update(item.default_request)
        notes: list[str] = []
        for field, label in _CONTAINER_KINDS:
            for c in as_list(spec.get(field)):
                for key, values, word in (("limits", limits, "limit"), ("requests", requests, "request")):
                    if added := _fill(c, key, values):
                        notes.append(f"{', '.join(added)} {word} for {label} {as_str(c.get('name'))}")
        metadata = pod.setdefault("metadata", {})
        if notes and isinstance(metadata, dict):
            annotations = metadata.setdefault("annotations", {})
            if isinstance(annotations, dict):
                annotations["kubernetes.io/limit-ranger"] = "LimitRanger plugin set: " + "; ".join(notes)


_Violation = tuple[str, str] | None
"""A LimitRange rule's verdict: (upstream message, the field to change: requests or limits), or None."""


def _min(kind: str, name: str, enforced: _Q, requests: Mapping[str, _Q], limits: Mapping[str, _Q]) -> _Violation:
    head = f"minimum {name} usage per {kind} is {_show(enforced)}"
    if name not in requests:
        return f"{head}.  No request is specified", "requests"
    if enforced[0] > requests[name][0]:
        return f"{head}, but request is {_show(requests[name])}", "requests"
    if name in limits and enforced[0] > limits[name][0]:
        return f"{head}, but limit is {_show(limits[name])}", "limits"
    return None


def _max(kind: str, name: str, enforced: _Q, requests: Mapping[str, _Q], limits: Mapping[str, _Q] | None) -> _Violation:
    """maxConstraint, or maxRequestConstraint when `limits` is None (a claim has requests only)."""
    head = f"maximum {name} usage per {kind} is {_show(enforced)}"
    if limits is not None:
        if name not in limits:
            return f"{head}.  No limit is specified", "limits"
        if limits[name][0] > enforced[0]:
            return f"{head}, but limit is {_show(limits[name])}", "limits"
    elif name not in requests:
        return f"{head}.  No request is specified", "requests"
    if name in requests and requests[name][0] > enforced[0]:
        return f"{head}, but request is {_show(requests[name])}", "requests"
    return None


def _ratio(kind: str, name: str, enforced: _Q, requests: Mapping[str, _Q], limits: Mapping[str, _Q]) -> _Violation:
    head = f"{name} max limit to request ratio per {kind} is {_show(enforced)}"
    if name not in requests or requests[name][0] == 0:
        return f"{head}, but no request is specified or request is 0", "requests"
    if name not in limits or limits[name][0] == 0:
        return f"{head}, but no limit is specified or limit is 0", "limits"
    ratio = abs(limits[name][0]) / abs(requests[name][0])
    if ratio > enforced[0]:
        return f"{head}, but provided ratio is {float(ratio):.6f}", "limits"
    return None


def _check(item: _LimitItem, at: Path, requests: Mapping[str, _Q], limits: Mapping[str, _Q]) -> Iterator[Finding]:
    """One LimitRange item's min, max and ratio on one set of requests/limits, resources in name order."""
    for rule, bounds in ((_min, item.min), (_max, item.max), (_ratio, item.ratio)):
        for name in sorted(bounds):
            if (verdict := rule(item.type, name, bounds[name], requests, limits)) is not None:
                message, field = verdict
                yield Finding((*at, field, name), _show(bounds[name]), message,
                              f"set resources.{field}.{name} within the LimitRange's bounds for type {item.type}, "
                              "or change the LimitRange")


def _limit_validate(pod: Mapping, ranges: list[tuple[str, list[_LimitItem]]]) -> list[Finding]:
    """Validating LimitRanger: the first LimitRange with violations refuses the pod with all of them."""
    for _, items in ranges:
        found: list[Finding] = []
        for item in items:
            if item.type == "Container":
                for at, c in _containers(pod):
                    found.extend(_check(item, (*at, "resources"), *_container_resources(c)))
            elif item.type == "Pod":
                found.extend(_check(item, ("spec", "resources"), _aggregate(pod, 0, False), _aggregate(pod, 1, False)))
        if found:
            return found
    return []


def _claim_limits(claim: Mapping, store: Store, namespace: str) -> list[Finding]:
    """Validating LimitRanger on a claim: min and max of type PersistentVolumeClaim on spec.resources.requests."""
    requests = _resources(as_map(as_map(claim.get("spec")).get("resources")).get("requests"))
    at: Path = ("spec", "resources", "requests")
    for _, items in _limit_ranges(store, namespace):
        found = []
        for item in items:
            if item.type != "PersistentVolumeClaim":
                continue
            for rule, bounds in ((_min, item.min), (_max, item.max)):
                for name in sorted(bounds):
                    limits: dict[str, _Q] | None = {} if rule is _min else None
                    if (verdict := rule(item.type, name, bounds[name], requests, limits)) is not None:
                        found.append(Finding((*at, name), _show(bounds[name]), verdict[0],
                                             f"request {name} within the LimitRange's bounds, or change it"))
        if found:
            return found
    return []


# --- ResourceQuota: what each kind is charged, and which quotas it falls under ------------------------------------

_POD_RESOURCES = frozenset({
    "count/pods", "pods", "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
})
_MUST_SPECIFY = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
_SERVICE_RESOURCES = frozenset({"count/services", "services", "services.nodeports", "services.loadbalancers"})
_CLAIM_RESOURCES = ("persistentvolumeclaims", "requests.storage")
_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
_ALIASES = {"configmaps": "configmaps", "secrets": "secrets", "resourcequotas": "resourcequotas",
            "replicationcontrollers": "replicationcontrollers"}
_IGNORED = frozenset({
    "bindings", "componentstatuses", "events", "events.events.k8s.io", "tokenreviews.authentication.k8s.io",
    "selfsubjectreviews.authentication.k8s.io", "subjectaccessreviews.authorization.k8s.io",
    "selfsubjectaccessreviews.authorization.k8s.io", "localsubjectaccessreviews.authorization.k8s.io",
    "selfsubjectrulesreviews.authorization.k8s.io",
})
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def _native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _extended(name: str) -> bool:
    """helper.IsExtendedResourceName: a domain-qualified, non-kubernetes.io name (nvidia.com/gpu, google.com/tpu)."""
    if _native(name) or name.startswith("requests."):
        return False
    prefix, _, short = name.rpartition("/")
    return bool(prefix) and len(short) <= 63 and _NAME.fullmatch(short) is not None


def _matching(group_resource: str, names: Iterable[str]) -> list[str]:
    """The evaluator's MatchingResources: which of a quota's hard names an object of this resource is charged."""
    out = []
    for name in names:
        if group_resource == "pods":
            hit = name in _POD_RESOURCES or name.startswith(("hugepages-", "requests.hugepages-")) or (
                not _native(name) and name.startswith("requests."))
        elif group_resource == "services":
            hit = name in _SERVICE_RESOURCES
        elif group_resource == "persistentvolumeclaims":
            hit = name in (*_CLAIM_RESOURCES, "count/persistentvolumeclaims") or any(
                name.endswith(_CLASS_SUFFIX + r) for r in _CLAIM_RESOURCES)
        else:
            hit = name == f"count/{group_resource}" or name == _ALIASES.get(group_resource)
        if hit:
            out.append(name)
    return out


def _pod_usage(pod: Mapping, computing: bool = True) -> dict[str, _Q]:
    """PodUsageFunc: count/pods always; pods and compute resources while the pod is not terminal."""
    usage: dict[str, _Q] = {"count/pods": (Fraction(1), "DecimalSI")}
    if not computing:
        return usage
    usage["pods"] = (Fraction(1), "DecimalSI")
    requests, limits = _aggregate(pod, 0), _aggregate(pod, 1)
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            usage[name] = usage[f"requests.{name}"] = requests[name]
        if name in limits:
            usage[f"limits.{name}"] = limits[name]
    for name, q in requests.items():
        if name.startswith("hugepages-"):
            usage[name] = usage[f"requests.{name}"] = q
        elif _extended(name):
            usage[f"requests.{name}"] = q
    return usage


def _missing(pod: Mapping, required: set[str]) -> tuple[str, Path] | None:
    """podEvaluator.Constraints: each container must state the cpu/memory requests and limits a quota tracks."""
    missing: dict[str, set[str]] = {}
    first: Path | None = None
    for at, c in _containers(pod):
        requests, limits = _container_resources(c)
        have = {f"{w}{r}" for r in ("cpu", "memory") if r in requests for w in ("", "requests.")}
        have |= {f"limits.{r}" for r in ("cpu", "memory") if r in limits}
        for name in sorted(required - have):
            missing.setdefault(name, set()).add(as_str(c.get("name")))
            first = first or (*at, "resources", "limits" if name.startswith("limits.") else "requests")
    if not missing or first is None:
        return None
    parts = "; ".join(f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing))
    return f"must specify {parts}", first


def _pod_facts(pod: Mapping) -> dict[str, bool | str]:
    """What the pod scopes look at (podMatchesScopeFunc), taken when the pod is charged."""
    spec = as_map(pod.get("spec"))
    deadline = spec.get("activeDeadlineSeconds")
    terminating = isinstance(deadline, int) and not isinstance(deadline, bool) and deadline >= 0
    compute = [_container_resources(c) for _, c in _containers(pod)]
    pod_level = as_map(spec.get("resources"))
    compute.append((_resources(pod_level.get("requests")), _resources(pod_level.get("limits"))))
    best_effort = not any(q[0] != 0 for pair in compute for side in pair for n, q in side.items() if n in _POD_LEVEL)
    affinity = as_map(spec.get("affinity"))
    terms = []
    for kind in ("podAffinity", "podAntiAffinity"):
        rules = as_map(affinity.get(kind))
        terms += as_list(rules.get("requiredDuringSchedulingIgnoredDuringExecution"))
        preferred = as_list(rules.get("preferredDuringSchedulingIgnoredDuringExecution"))
        terms += [as_map(w).get("podAffinityTerm") for w in preferred]
    cross = any(isinstance(t, Mapping) and (bool(as_list(t.get("namespaces"))) or t.get("namespaceSelector") is not None)
                for t in terms)
    return {"Terminating": terminating, "NotTerminating": not terminating, "BestEffort": best_effort,
            "NotBestEffort": not best_effort, "PriorityClass": as_str(spec.get("priorityClassName")),
            "CrossNamespacePodAffinity": cross}


def _scope_matches(selector: Mapping, facts: Mapping[str, bool | str] | None) -> bool:
    """One scope selector against an object's facts; objects with no scope facts match no scope."""
    if facts is None or (scope := as_str(selector.get("scopeName"))) not in facts:
        return False
    value = facts[scope]
    if isinstance(value, bool):
        return value
    operator, values = selector.get("operator"), [v for v in as_list(selector.get("values")) if isinstance(v, str)]
    if operator == "Exists":
        return bool(value)
    if operator == "DoesNotExist":
        return not value
    if operator == "In":
        return bool(value) and value in values
    if operator == "NotIn":
        return not value or value not in values
    return False


@dataclass(frozen=True)
class _Quota:
    name: str
    hard: dict[str, _Q]
    selectors: tuple[Mapping, ...]

    @classmethod
    def of(cls, obj: Mapping) -> _Quota:
        spec = as_map(obj.get("spec"))
        selectors = [{"scopeName": s, "operator": "Exists"} for s in as_list(spec.get("scopes")) if isinstance(s, str)]
        selectors += [s for s in as_list(as_map(spec.get("scopeSelector")).get("matchExpressions"))
                      if isinstance(s, Mapping)]
        return cls(as_str(meta(obj).get("name")), _resources(spec.get("hard")), tuple(selectors))

    def covers(self, group_resource: str, facts: Mapping[str, bool | str] | None) -> bool:
        """generic.Matches: one hard resource is tracked for the object and every scope matches it."""
        return bool(_matching(group_resource, self.hard)) and all(_scope_matches(s, facts) for s in self.selectors)


@dataclass
class _Charge:
    group_resource: str
    usage: dict[str, _Q]
    facts: dict[str, bool | str] | None


class Usage:
    """The quota usage accumulated so far in a cluster: every admitted object's charge, by namespace, from which each
    quota's status.used follows (as the quota controller recounts it, so a quota admitted after the objects it covers
    still sees them). Starts empty."""

    def __init__(self) -> None:
        self._charges: dict[str, dict[tuple[str, str], _Charge]] = {}
        self._unnamed = 0
        # status.used already summed, by namespace and quota, kept up to date as charges arrive (a namespace's
        # entries are dropped when a charge leaves or changes), so admitting n pods costs n, not n squared.
        self._sums: dict[str, dict[str, tuple[_Quota, dict[str, _Q]]]] = {}

    def used(self, quota: Mapping) -> dict[str, str]:
        """A ResourceQuota's status.used: every hard resource, shown as the API server prints it."""
        q = _Quota.of(quota)
        return {name: _show(used) for name, used in sorted(self._used(namespace_of(quota), q).items())}

    def release(self, obj: Mapping) -> None:
        """The object was deleted: its charge goes back to every quota."""
        if self._charges.get(namespace_of(obj), {}).pop(_key(obj), None) is not None:
            self._sums.pop(namespace_of(obj), None)

    def finish(self, pod: Mapping) -> None:
        """The pod reached Succeeded or Failed: it keeps only its count/pods charge."""
        charge = self._charges.get(namespace_of(pod), {}).get(_key(pod))
        if charge is not None and charge.group_resource == "pods":
            charge.usage = _pod_usage(pod, computing=False)
            self._sums.pop(namespace_of(pod), None)

    def _used(self, namespace: str, quota: _Quota) -> dict[str, _Q]:
        sums = self._sums.setdefault(namespace, {})
        if (cached := sums.get(repr(quota))) is None:
            used = {name: _ZERO for name in quota.hard}
            for charge in self._charges.get(namespace, {}).values():
                _count(used, quota, charge)
            cached = sums[repr(quota)] = (quota, used)
        return dict(cached[1])

    def _charge(self, obj: Mapping, charge: _Charge) -> None:
        namespace, key = namespace_of(obj), _key(obj)
        if not key[1]:
            self._unnamed += 1
            key = (key[0], f"{as_str(meta(obj).get('generateName'))}#{self._unnamed}")
        charges = self._charges.setdefault(namespace, {})
        if key in charges:
            self._sums.pop(namespace, None)
        charges[key] = charge
        for quota, used in self._sums.get(namespace, {}).values():
            _count(used, quota, charge)


def _count(used: dict[str, _Q], quota: _Quota, charge: _Charge) -> None:
    """Add one charge to a quota's used, where the quota covers it."""
    if quota.covers(charge.group_resource, charge.facts):
        for name in _matching(charge.group_resource, quota.hard):
            if name in charge.usage:
                used[name] = _add(used[name], charge.usage[name])


def _key(obj: Mapping) -> tuple[str, str]:
    return as_str(obj.get("kind")) or "Pod", as_str(meta(obj).get("name"))


def _quota_check(obj: Mapping, store: Store, usage: Usage, charge: _Charge) -> list[Finding]:
    """ResourceQuota's CheckRequest for one created object, then its charge when admitted."""
    namespace = namespace_of(obj)
    quotas = [q for q in map(_Quota.of, store.of_kind("ResourceQuota", namespace))
              if q.covers(charge.group_resource, charge.facts)]
    if charge.group_resource == "pods":
        for q in quotas:
            required = set(_matching("pods", q.hard)) & _MUST_SPECIFY
            if (miss := _missing(obj, required)) is not None:
                return [Finding(miss[1], None, f"failed quota: {q.name}: {miss[0]}",
                                "set resources.requests and resources.limits for cpu and memory on every container "
                                "(or a LimitRange default) since the quota tracks them")]
    negative = sorted(name for name, q in charge.usage.items() if q[0] < 0)
    if negative:
        return [Finding((), None, f"quota usage is negative for resource(s): {','.join(negative)}",
                        "request no negative quantity")]
    delta = {name: q for name, q in charge.usage.items() if q[0] != 0}
    for q in quotas if delta else ():
        requested = {name: v for name, v in delta.items() if name in q.hard}
        if not requested:
            continue
        used = usage._used(namespace, q)
        exceeded = sorted(n for n, v in requested.items() if _add(used[n], v)[0] > q.hard[n][0])
        if exceeded:
            pick = {n: requested[n] for n in exceeded}
            return [Finding((), _pretty(pick),
                            f"exceeded quota: {q.name}, requested: {_pretty(pick)}, used: "
                            f"{_pretty({n: used[n] for n in exceeded})}, limited: "
                            f"{_pretty({n: q.hard[n] for n in exceeded})}",
                            f"raise spec.hard of ResourceQuota {q.name} in namespace {namespace}, or ask for less "
                            "(fewer replicas or smaller requests)")]
    usage._charge(obj, charge)
    return []


# --- the two entry points -----------------------------------------------------------------------------------------

def admit_pod(pod: dict, store: Store, usage: Usage) -> list[Finding]:
    """One pod a controller creates, through LimitRanger, Priority and ResourceQuota: mutated in place, the
    findings of the first plugin that refuses it (then nothing is charged), or [] and its usage is charged."""
    if not isinstance(pod, dict):
        return []
    namespace = namespace_of(pod)
    if isinstance(pod.get("spec"), dict):
        defaults.requests_from_limits(pod["spec"])   # SetDefaults_Pod, which runs before admission
    ranges = _limit_ranges(store, namespace)
    _limit_defaults(pod, ranges)
    found = _priority(pod, store) or _limit_validate(pod, ranges)
    if found:
        return found
    return _quota_check(pod, store, usage, _Charge("pods", _pod_usage(pod), _pod_facts(pod)))


def admit_object(obj: Mapping, store: Store, usage: Usage) -> list[Finding]:
    """One non-pod object being created: PriorityClass's single-default rule, LimitRanger on claims, then the
    ResourceQuota object counts (and services' / claims' own resources); a pod (as a dict) goes to admit_pod."""
    kind = as_str(obj.get("kind"))
    if kind == "Pod":
        return admit_pod(obj, store, usage) if isinstance(obj, dict) else []
    if kind == "PriorityClass":
        return _priority_class(obj, store)
    namespace = namespace_of(obj)
    if not kind or not namespace:
        return []
    group_resource = _group_resource(obj, store)
    if group_resource in _IGNORED:
        return []
    if group_resource == "persistentvolumeclaims":
        if found := _claim_limits(obj, store, namespace):
            return found
    return _quota_check(obj, store, usage, _Charge(group_resource, _object_usage(obj, group_resource),
                                                   _claim_facts(obj) if group_resource == "persistentvolumeclaims"
                                                   else None))


def _group_resource(obj: Mapping, store: Store) -> str:
    """`<resource>` or `<resource>.<group>`: the plural from the input CRD for the kind, else the RESTMapper's guess."""
    api_version, kind = as_str(obj.get("apiVersion")), as_str(obj.get("kind"))
    group = api_version.rpartition("/")[0]
    plural = ""
    for crd in store.of_kind("CustomResourceDefinition"):
        spec = as_map(crd.get("spec"))
        names = as_map(spec.get("names"))
        if spec.get("group") == group and names.get("kind") == kind:
            plural = as_str(names.get("plural"))
    if not plural:
        lower = kind.lower()
        plural = (lower if lower.endswith("endpoints") else f"{lower}es" if lower.endswith("s")
                  else f"{lower[:-1]}ies" if lower.endswith("y") else f"{lower}s")
    return f"{plural}.{group}" if group else plural


def _object_usage(obj: Mapping, group_resource: str) -> dict[str, _Q]:
    one: _Q = (Fraction(1), "DecimalSI")
    spec = as_map(obj.get("spec"))
    if group_resource == "services":
        ports = as_list(spec.get("ports"))
        kind = spec.get("type")
        if kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is False:
            node_ports = sum(1 for p in ports if isinstance(p, Mapping) and p.get("nodePort"))
        else:
            node_ports = len(ports) if kind in ("NodePort", "LoadBalancer") else 0
        return {"count/services": one, "services": one, "services.nodeports": (Fraction(node_ports), "DecimalSI"),
                "services.loadbalancers": (Fraction(int(kind == "LoadBalancer")), "DecimalSI")}
    if group_resource == "persistentvolumeclaims":
        out = {"persistentvolumeclaims": one, "count/persistentvolumeclaims": one}
        annotations = as_map(meta(obj).get("annotations"))
        storage_class = as_str(annotations.get("volume.beta.kubernetes.io/storage-class")) or as_str(
            spec.get("storageClassName"))
        if storage_class:
            out[f"{storage_class}{_CLASS_SUFFIX}persistentvolumeclaims"] = one
        storage = _resources(as_map(spec.get("resources")).get("requests")).get("storage")
        if storage is not None:
            storage = (Fraction(math.ceil(storage[0])), storage[1])
            out["requests.storage"] = storage
            if storage_class:
                out[f"{storage_class}{_CLASS_SUFFIX}requests.storage"] = storage
        return out
    names = [f"count/{group_resource}"] + ([_ALIASES[group_resource]] if group_resource in _ALIASES else [])
    return {name: one for name in names}


def _claim_facts(claim: Mapping) -> dict[str, bool | str]:
    """The one claim scope, VolumeAttributesClass."""
    return {"VolumeAttributesClass": as_str(as_map(claim.get("spec")).get("volumeAttributesClassName"))}
