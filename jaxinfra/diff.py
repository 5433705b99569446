"""`jaxinfra diff`: what applying a stack would change, against YAML synthesized before.

Pure: manifests in, a `Diff` out. Objects are identified by (API group, kind, namespace, name),
so a version bump of the same group is a change of `apiVersion`, not a new object. Each changed
field is classified:

- `immutable`: the API server (or the CRD's CEL rules / the controller's webhook) rejects an
  in-place update of it; the object must be deleted and recreated. Sources, checked upstream:
  Kubernetes `ValidateJobSpecUpdate` (pkg/apis/batch/validation): Job `spec.selector`,
  `spec.template` (only nodeSelector, tolerations, node affinity, labels, annotations and
  scheduling gates of a *suspended, never started* Job are mutable; jaxinfra's Jobs are not
  suspended), `spec.completions` (an Indexed Job may change it only in tandem with
  `parallelism`, completions == parallelism: the ElasticIndexedJob rule), `spec.completionMode`,
  `spec.podFailurePolicy`, `spec.backoffLimitPerIndex`, `spec.managedBy`, `spec.successPolicy`.
  JobSet webhook `ValidateUpdate`: all of `spec.replicatedJobs` (pod-template labels,
  annotations, nodeSelector, tolerations only while suspended) and `spec.managedBy`; its CRD's
  CEL rules: `failurePolicy`, `successPolicy`, `startupPolicy`, `network`,
  `volumeClaimPolicies`. TrainJob CRD (CEL, `self == oldSelf`): `runtimeRef`, `trainer`,
  `initializer`, `managedBy`, `activeDeadlineSeconds`. JAXJob: the Training Operator webhook
  (`ValidateRunPolicyUpdate`) `spec.runPolicy.managedBy`, the CRD `runPolicy.schedulingPolicy.queue`.
  Service: `spec.clusterIP` / `spec.clusterIPs` once set.
- `replaced`: accepted in place by the API, but on a workload kind (Job, JobSet, JAXJob,
  TrainJob) the Pulumi component replaces the object on any `spec` change
  (`replace_on_changes=["spec"]`, `jaxinfra.pulumi.WORKLOAD_KINDS`), e.g. a JAXJob's
  `jaxReplicaSpecs`, which the Training Operator would not roll out to running pods anyway.
- `mutable`: patched in place (labels, annotations, a ConfigMap's data, a Role's rules, ...).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxinfra import backends
from jaxinfra.errors import JaxinfraError, Problem

#: The backends' workload kinds, as `jaxinfra.pulumi.WORKLOAD_KINDS` (pulumi is an optional import).
WORKLOAD_KINDS = frozenset(b.kind for b in backends.BACKENDS.values())

#: kind -> top-level field paths (under the object) that cannot be updated in place.
IMMUTABLE: Mapping[str, tuple[str, ...]] = {
    "Job": (
        "spec.selector",
        "spec.template",
        "spec.completions",
        "spec.completionMode",
        "spec.podFailurePolicy",
        "spec.backoffLimitPerIndex",
        "spec.managedBy",
        "spec.successPolicy",
    ),
    "JobSet": (
        "spec.replicatedJobs",
        "spec.managedBy",
        "spec.failurePolicy",
        "spec.successPolicy",
        "spec.startupPolicy",
        "spec.network",
        "spec.volumeClaimPolicies",
    ),
    "TrainJob": ("spec.runtimeRef", "spec.trainer", "spec.initializer", "spec.managedBy", "spec.activeDeadlineSeconds"),
    "JAXJob": ("spec.runPolicy.managedBy", "spec.runPolicy.schedulingPolicy.queue"),
    "Service": ("spec.clusterIP", "spec.clusterIPs"),
}


class PreviousError(JaxinfraError):
    """The previously synthesized YAML (DIR) cannot be read as manifests."""

    kind = "unreadable DIR"


RECREATE = "delete and recreate (the Pulumi component replaces these)"
ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "(absent)"})()


@dataclass(frozen=True)
class Key:
    group: str  # the API group ("" for the core group)
    kind: str
    namespace: str  # "" for cluster-scoped objects
    name: str

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}" + (f" ({self.group})" if self.group else "")


@dataclass(frozen=True)
class FieldChange:
    path: str
    old: Any
    new: Any
    kind: str  # immutable | replaced | mutable

    def __str__(self) -> str:
        return f"{self.path}: {_show(self.old)} -> {_show(self.new)}"


@dataclass(frozen=True)
class ObjectDiff:
    key: Key
    status: str  # added | removed | changed
    fields: tuple[FieldChange, ...] = ()

    @property
    def recreate(self) -> bool:
        """Whether applying it needs delete-and-recreate (an immutable field, or a workload's spec under Pulumi)."""
        return any(f.kind in ("immutable", "replaced") for f in self.fields)


@dataclass(frozen=True)
class Diff:
    objects: tuple[ObjectDiff, ...] = field(default_factory=tuple)

    @property
    def changed(self) -> bool:
        return bool(self.objects)

    def lines(self) -> list[str]:
        """The report, deterministic: objects in the stack's apply order, then the removed ones in file order."""
        out = []
        for od in self.objects:
            if od.status != "changed":
                out.append(f"{'+' if od.status == 'added' else '-'} {od.key}: {od.status}")
                continue
            verdict = "changed, " + RECREATE if od.recreate else "changed in place"
            out.append(f"~ {od.key}: {verdict}")
            for f in od.fields:
                tag = {"immutable": "  [immutable]", "replaced": "  [replaced by Pulumi: spec of a workload]"}.get(
                    f.kind, ""
                )
                out.append(f"    {f}{tag}")
        out.append(self.summary())
        return out

    def summary(self) -> str:
        if not self.objects:
            return "no changes"
        n = {s: sum(o.status == s for o in self.objects) for s in ("added", "removed", "changed")}
        recreate = sum(o.recreate for o in self.objects)
        return (
            f"{n['added']} added, {n['removed']} removed, {n['changed']} changed"
            f" ({recreate} to {RECREATE.split(' (')[0]})"
        )


def key(obj: Mapping[str, Any]) -> Key:
    api_version = str(obj.get("apiVersion", ""))
    meta = obj.get("metadata") or {}
    return Key(
        api_version.rpartition("/")[0],
        str(obj.get("kind", "")),
        str(meta.get("namespace") or ""),
        str(meta.get("name", "")),
    )


def _show(value: Any) -> str:
    if value is ABSENT or isinstance(value, (str, int, float, bool)) or value is None:
        return repr(value)
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def _walk(old: Any, new: Any, path: str) -> Iterable[tuple[str, Any, Any]]:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for k in sorted(set(old) | set(new), key=str):
            yield from _walk(old.get(k, ABSENT), new.get(k, ABSENT), f"{path}.{k}" if path else str(k))
    elif isinstance(old, list) and isinstance(new, list):
        for i in range(max(len(old), len(new))):
            yield from _walk(old[i] if i < len(old) else ABSENT, new[i] if i < len(new) else ABSENT, f"{path}[{i}]")
    elif old != new or type(old) is not type(new):
        yield path, old, new


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")


def classify(kind: str, path: str, old_obj: Mapping[str, Any], new_obj: Mapping[str, Any]) -> str:
    """immutable | replaced | mutable, for one changed field path of an object of this kind."""
    for prefix in IMMUTABLE.get(kind, ()):
        if _under(path, prefix):
            if kind == "Job" and prefix == "spec.completions" and _elastic(old_obj, new_obj):
                break
            if kind == "Service" and (old_obj.get("spec") or {}).get(path.split(".")[1].split("[")[0]) in (
                None,
                ABSENT,
            ):
                break  # not set before: the API server allocates it, setting it is no change of an allocated IP
            return "immutable"
    if kind in WORKLOAD_KINDS and _under(path, "spec"):
        return "replaced"
    return "mutable"


def _elastic(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """An Indexed Job's completions changed in tandem with parallelism (completions == parallelism): allowed."""
    spec = new.get("spec") or {}
    return spec.get("completionMode") == "Indexed" and spec.get("completions") == spec.get("parallelism")


def diff(current: Sequence[Mapping[str, Any]], previous: Sequence[Mapping[str, Any]]) -> Diff:
    """What changes when `previous` (e.g. the YAML synthesized earlier) becomes `current` (the stack now)."""
    before = {key(o): o for o in previous}
    now = {key(o): o for o in current}
    out: list[ObjectDiff] = []
    for k, obj in now.items():
        if k not in before:
            out.append(ObjectDiff(k, "added"))
            continue
        changes = tuple(
            FieldChange(p, a, b, classify(k.kind, p, before[k], obj)) for p, a, b in _walk(before[k], obj, "")
        )
        if changes:
            out.append(ObjectDiff(k, "changed", changes))
    out += [ObjectDiff(k, "removed") for k in before if k not in now]
    return Diff(tuple(out))


def read_dir(directory: Path) -> tuple[list[dict[str, Any]], list[Problem]]:
    """Every object of the YAML files in a directory (or one file), with the problems that stop a diff."""
    from jaxinfra.yamlio import read_manifests

    if directory.is_dir():
        files = sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        if not files:
            return [], [
                Problem("DIR", str(directory), "no .yaml files in it", "pass the folder `jaxinfra synth -o` wrote")
            ]
    elif directory.is_file():
        files = [directory]
    else:
        return [], [Problem("DIR", str(directory), "no such directory", "pass the folder `jaxinfra synth -o` wrote")]
    docs, problems = read_manifests(files)
    objects: list[dict[str, Any]] = []
    seen: set[Key] = set()
    for doc in docs:
        if not doc.get("kind") or not (doc.get("metadata") or {}).get("name"):
            problems.append(
                Problem(
                    str(directory),
                    doc.get("kind"),
                    "not a Kubernetes object (kind and metadata.name)",
                    "keep only manifests in the folder",
                )
            )
            continue
        k = key(doc)
        if k in seen:
            problems.append(Problem(str(directory), str(k), "the same object twice", "keep one copy"))
            continue
        seen.add(k)
        objects.append(doc)
    return objects, problems
