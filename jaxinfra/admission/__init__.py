"""The API server's front door: what happens to each applied object before it is stored, in the API server's order,
shared by `jaxinfra validate` and `jaxinfra simulate` (one admission path, so both give the same verdict).

For each object, in apply order, against the objects stored before it (`store.Store`):

1. decoding with the API server's bounds (`jaxinfra.yamlio`), then apiVersion and kind, which must be served:
   a kind or version of a known API group that is not served is refused (kubectl: "no matches for kind");
   a kind of a group jaxinfra has no schema for is stored as is, with a note (its CRD must be installed);
2. custom resources: non-nullable nulls pruned and the CRD schema's defaults applied (`structural`);
3. the schema, strict (`jaxinfra.admission.schema`): unknown and mistyped fields are refused here, as decoding refuses
   them; a missing required field only after the next steps, which may fill it in (JobSet names its rules);
4. built-in defaulting (`defaults`);
5. mutating admission: the controllers' webhooks (`webhooks`);
6. `generateName` made a name (`naming`);
7. validation (the schema's required fields, `validation`), a Service's cluster IP allocated (`clusterip`), then
   validating admission: the webhooks' checks,
   object-count quotas (`plugins`) and Pod Security (`pod_security`: a Pod violating its namespace's `enforce` level
   is refused, a built-in workload such as a Job only warned; its pods are refused when a controller creates them).

Objects a controller creates through the API server (the JobSet a TrainJob's Trainer applies, the JobSet controller's
child Jobs, the pods of every Job) take the same path (`admit_created`), against the applied objects; each finding
names the step that gave it (`Finding.step`), since the API server words a webhook's denial, an admission plugin's
refusal and a field error differently.

An object refused at any step is not stored; every step still runs on what it can, so every problem is reported
at once. Not emulated: other admission webhooks and plugins, CEL validation rules (x-kubernetes-validations,
ValidatingAdmissionPolicy), RBAC of the applying user, updates' immutability rules beyond workloads
(`simulate/sources.py`).

Sources: kubernetes staging/src/k8s.io/apiserver/pkg/endpoints/handlers/create.go (decode, mutating admission,
then the strategy's validation and validating admission), pkg/registry/rest/create.go (BeforeCreate:
generateName, then Validate); each step's own sources in its module.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from jaxinfra.admission.store import Finding, Store, meta, namespace_of
from jaxinfra.errors import Problem, Refused
from jaxinfra.upstream import KUEUE_API_GROUP, QUEUE_LABEL, SYSTEM_NAMESPACES

__all__ = ["Admitted", "Request", "admit", "admit_created", "read", "where"]


@dataclass(frozen=True)
class Request:
    """One applied object: from which file, the document's index in it, the object as decoded."""

    file: str
    index: int
    obj: Any


@dataclass
class Admitted:
    """What the API server holds after the requests (each as stored: defaulted and mutated), what it refused, what it
    warned about, and what the simulation cannot tell."""

    stored: list[tuple[Request, dict[str, Any]]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # Refused, each
    warnings: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read(paths: Iterable[str | Path]) -> tuple[list[Request], list[Problem]]:
    """The requests of YAML/JSON files and folders (recursively), decoded with the API server's bounds; every
    unreadable file or document a problem."""
    from jaxinfra.manifest_paths import expand
    from jaxinfra.yamlio import read_documents

    problems: list[Problem] = []
    requests: list[Request] = []
    for path in expand(map(Path, paths), problems):
        docs, decoding = read_documents(path)
        problems += decoding
        requests += [Request(str(path), doc.index, doc.value) for doc in docs if doc.value is not None]
    return requests, problems


def where(obj: Any, at: Sequence[str | int] = ()) -> str:
    """How a problem names its object and field inside its document: `Kind/name field.path`."""
    from jaxinfra.admission.schema import json_path

    head = ""
    if isinstance(obj, Mapping):
        name = meta(obj).get("name") or (f"{meta(obj).get('generateName')}*" if meta(obj).get("generateName") else None)
        head = f"{obj.get('kind') or '?'}/{name or '?'}"
    return f"{head} {json_path(tuple(at))}".strip() if at else head


def admit(requests: Iterable[Request]) -> Admitted:
    """Every request through the front door, in order, as one cluster; what the garbage collector then does with
    objects whose owners the cluster does not hold, a note each (`owners`)."""
    from jaxinfra.admission import owners, plugins

    out = Admitted()
    store = Store()
    usage = plugins.Usage()
    unknown: dict[str, list[str]] = {}
    for request in requests:
        stored, findings, kind = _admit_one(request, store, usage)
        for f in findings:
            problem_type = Problem if f.warning else Refused
            (out.warnings if f.warning else out.problems).append(
                problem_type(where(stored or request.obj, f.at), f.value, f.message, f.fix, request.file, request.index)
            )
        if stored is not None:
            store.add(stored)
            out.stored.append((request, stored))
            if kind == "unknown":
                unknown.setdefault(f"{stored.get('kind')} ({stored.get('apiVersion')})", []).append(request.file)
    out.notes += [
        f"{kind} stored as is, not validated or emulated: neither Kubernetes nor the bundled or given CRDs "
        f"define it (a cluster needs its CRD installed; {', '.join(dict.fromkeys(files))})"
        for kind, files in unknown.items()
    ]
    out.notes += _assumed(out.stored)
    out.notes += [orphan.note() for orphan in owners.orphans(store)]
    return out


def _admit_one(request: Request, store: Store, usage: Any) -> tuple[dict[str, Any] | None, list[Finding], str]:
    """One object through every step: (the object as stored or None when refused, the findings, how it is served)."""
    from jaxinfra.admission import clusterip, defaults, plugins, pod_security, schema, structural, validation, webhooks

    if not isinstance(request.obj, Mapping):
        return (
            None,
            [
                Finding(
                    (),
                    schema.short(request.obj),
                    "a manifest document must be a mapping (one Kubernetes object)",
                    "make each YAML document one object with apiVersion, kind and metadata",
                )
            ],
            "",
        )
    obj: dict[str, Any] = copy.deepcopy(dict(request.obj))
    header = schema.header_findings(obj)
    if header:
        return None, [Finding(*f) for f in header], ""
    kind, validator, served = schema.resolve(obj["apiVersion"], obj["kind"], store.of_kind("CustomResourceDefinition"))
    if kind == "unserved":
        return None, [Finding(*schema.unserved(obj["apiVersion"], obj["kind"]))], kind
    if kind == "custom" and served is not None:
        structural.prune_and_default(obj, served)
    decoding = [Finding(*f) for f in schema.schema_findings(obj, validator)] if validator is not None else []
    if undecodable := [f for f in decoding if not _missing(f)]:  # mistyped or unknown fields: refused at decoding
        return None, _dedupe(undecodable), kind
    if kind == "builtin":
        defaults.apply(obj)
    webhooks.mutate(obj, store)
    _generate_name(obj, request)
    findings = validation.validate(obj) if kind != "unknown" else validation.object_meta(meta(obj), "subdomain")
    if decoding:  # the schema's required fields the defaults and webhooks did not fill in, unless reported above
        reported = {f.at for f in findings}
        findings = [Finding(*f) for f in schema.schema_findings(obj, validator) if f[0] not in reported] + findings
    if kind == "custom" and served is not None:
        findings += structural.list_findings(obj, served)  # list-type set/map: no duplicates, after defaulting
    if kind == "builtin":  # the registry's allocation (its BeginCreate; released again where validation refuses)
        findings += clusterip.allocate(obj, store)
    findings += [replace(f, step="webhook") for f in webhooks.validate(obj, store)]
    if store.get(str(obj["kind"]), namespace_of(obj), str(meta(obj).get("name"))) is None:  # a create, not an update
        findings += [replace(f, step="admission") for f in plugins.admit_object(obj, store, usage)]
    findings += [
        replace(f, step="admission") for f in pod_security.admit(obj, store.namespace_labels(namespace_of(obj)))
    ]
    refused = [f for f in findings if not f.warning]
    return (None if refused else obj), _dedupe(findings), kind


def admit_created(
    objs: Sequence[dict[str, Any]], store: Store, by: str, usage: Any = None
) -> list[tuple[dict[str, Any] | None, list[Finding]]]:
    """Objects a controller creates (`by` names it), each through the same front door as an applied object, against
    the applied objects in `store`, one quota usage for them all (`usage`, a `plugins.Usage` the caller keeps on
    charging, or a new one): (the object as stored, or None when refused; the findings), in order."""
    from jaxinfra.admission import plugins

    usage = plugins.Usage() if usage is None else usage
    out: list[tuple[dict[str, Any] | None, list[Finding]]] = []
    for i, obj in enumerate(objs):
        stored, findings, _ = _admit_one(Request(by, i, obj), store, usage)
        out.append((stored, findings))
    return out


def _missing(finding: Finding) -> bool:
    """A schema finding for a required field that is absent: defaulting or a webhook may still fill it in."""
    return finding.value is None and finding.message.endswith("is a required property")


def _dedupe(findings: list[Finding]) -> list[Finding]:
    """Each finding once (a schema's `required` expansion can repeat one), in order."""
    seen: dict[tuple[Any, ...], Finding] = {}
    for f in findings:
        seen.setdefault((f.at, repr(f.value), f.message, f.warning), f)
    return list(seen.values())


def _generate_name(obj: dict[str, Any], request: Request) -> None:
    """The API server names an object that gives only `generateName` (kubectl create; kubectl apply refuses it)."""
    from jaxinfra.admission.naming import generate

    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and not metadata.get("name") and isinstance(metadata.get("generateName"), str):
        seed = hashlib.sha256(f"{request.file}#{request.index}".encode()).hexdigest()
        metadata["name"] = generate(metadata["generateName"], seed)


def _assumed(stored: Sequence[tuple[Request, Mapping]]) -> list[str]:
    """What the cluster must have that the inputs do not hold: namespaces, and the controllers of their kinds."""
    from jaxinfra.releases import CONTROLLERS
    from jaxinfra.schemas.operators import TRAINING_OPERATOR, serving

    declared = {str(meta(obj).get("name")) for _, obj in stored if obj.get("kind") == "Namespace"}
    missing = sorted({namespace_of(obj) for _, obj in stored} - declared - SYSTEM_NAMESPACES - {""})
    notes = [
        f"namespace {ns} is not among the inputs: it must exist on the cluster (the API server refuses objects "
        "in a namespace that does not exist)"
        for ns in missing
    ]
    # Other operators' kinds name their own operator (an MPIJob v2beta1 the MPI Operator, not the Training Operator of
    # its API group), but for the Training Operator's, which come with the release jaxinfra installs for JAXJobs.
    served = [
        (str(obj.get("apiVersion", "")), serving(str(obj.get("apiVersion", "")), str(obj.get("kind"))))
        for _, obj in stored
    ]
    groups = {v.rpartition("/")[0] for v, other in served if other is None or other.operator is TRAINING_OPERATOR}
    queued = any(QUEUE_LABEL in (meta(obj).get("labels") or {}) for _, obj in stored)
    needed = [f"{c.name} {c.tag}" for c in CONTROLLERS if c.group in groups or (c.group == KUEUE_API_GROUP and queued)]
    needed += dict.fromkeys(
        o.operator.short for _, o in served if o is not None and o.operator is not TRAINING_OPERATOR
    )
    if needed:
        notes.append("the cluster must run " + ", ".join(needed) + " (their CRDs installed; jaxinfra assumes so)")
    return notes
