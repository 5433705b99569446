"""The schema step of the API server's front door (`jaxinfra.admission`): which schema serves an apiVersion and
kind (`resolve`), and every way an object fails it (`schema_findings`).

Built-in kinds are checked against the strict JSON schemas that `kubernetes-validate` ships for
`K8S_VERSION`; the custom kinds jaxinfra renders, and other operators' (`jaxinfra.schemas.operators`), are checked
against the `openAPIV3Schema` of their upstream CRDs (bundled in `jaxinfra.schemas`), made strict the way the API
server's strict field validation is. Either way an unknown field is an error, because a silently dropped field (a
misspelt `podFailurePolicy`, say) is how a training job ends up running with the wrong policy.

jsonschema, kubernetes_validate and yaml are imported inside functions: the CLI imports this
module on every start and most commands never validate.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from jaxinfra.admission.gobase64 import illegal_at
from jaxinfra.errors import ManifestError, Problem
from jaxinfra.schemas import K8S_VERSION, operators
from jaxinfra.upstream import (
    GKE_NETWORKING_API_GROUP,
    JOBSET_API_GROUP,
    KUBEFLOW_API_GROUP,
    KUEUE_API_GROUP,
    TRAINER_API_GROUP,
)

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator
    from referencing import Registry

# (group, kind) -> bundled CRD file of the kinds jaxinfra renders, in the order the unknown-kind hint lists them.
_RENDERED_CRD_FILES: dict[tuple[str, str], str] = {
    (JOBSET_API_GROUP, "JobSet"): "jobset.x-k8s.io_jobsets.yaml",
    (KUBEFLOW_API_GROUP, "JAXJob"): "kubeflow.org_jaxjobs.yaml",
    (TRAINER_API_GROUP, "TrainJob"): "trainer.kubeflow.org_trainjobs.yaml",
    (TRAINER_API_GROUP, "ClusterTrainingRuntime"): "trainer.kubeflow.org_clustertrainingruntimes.yaml",
    (TRAINER_API_GROUP, "TrainingRuntime"): "trainer.kubeflow.org_trainingruntimes.yaml",
    (KUEUE_API_GROUP, "ClusterQueue"): "kueue.x-k8s.io_clusterqueues.yaml",
    (KUEUE_API_GROUP, "LocalQueue"): "kueue.x-k8s.io_localqueues.yaml",
    (KUEUE_API_GROUP, "ResourceFlavor"): "kueue.x-k8s.io_resourceflavors.yaml",
    (KUEUE_API_GROUP, "Topology"): "kueue.x-k8s.io_topologies.yaml",
    (KUEUE_API_GROUP, "AdmissionCheck"): "kueue.x-k8s.io_admissionchecks.yaml",
    (KUEUE_API_GROUP, "ProvisioningRequestConfig"): "kueue.x-k8s.io_provisioningrequestconfigs.yaml",
    (KUEUE_API_GROUP, "WorkloadPriorityClass"): "kueue.x-k8s.io_workloadpriorityclasses.yaml",
    (KUEUE_API_GROUP, "Cohort"): "kueue.x-k8s.io_cohorts.yaml",
    (KUEUE_API_GROUP, "MultiKueueConfig"): "kueue.x-k8s.io_multikueueconfigs.yaml",
    (KUEUE_API_GROUP, "MultiKueueCluster"): "kueue.x-k8s.io_multikueueclusters.yaml",
    (KUEUE_API_GROUP, "Workload"): "kueue.x-k8s.io_workloads.yaml",
    (GKE_NETWORKING_API_GROUP, "Network"): "networking.gke.io_networks.yaml",
    (GKE_NETWORKING_API_GROUP, "GKENetworkParamSet"): "networking.gke.io_gkenetworkparamsets.yaml",
}
# ... and of every bundled kind, other operators' (`operators.KINDS`) after them: a kind's files, each serving its own
# versions (MPIJob: the Training Operator's v1, the MPI Operator's v2beta1). Static so a lookup parses only the files it
# needs; a test checks it against each file's group, kind and versions.
_CRD_FILES: dict[tuple[str, str], tuple[str, ...]] = {key: (file,) for key, file in _RENDERED_CRD_FILES.items()} | {
    (k.group, k.kind): tuple(o.file for o in operators.KINDS if (o.group, o.kind) == (k.group, k.kind))
    for k in operators.KINDS
}
_UNKNOWN_KIND_FIX = "jaxinfra validates built-in kinds and: " + ", ".join(k for _, k in _CRD_FILES)
_INSTALL_FIX = "pip install 'jaxinfra[validate]'"
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

_SCHEMA_NAME = r"[A-Za-z0-9][A-Za-z0-9.-]*"  # keeps lookups inside the schema folder
_PLAIN_KEY = r"[A-Za-z_][A-Za-z0-9_-]*"

_JsonPath = tuple[str | int, ...]
# (location in the object, offending value, message, fix): a Problem before it gets its prefix.
_Finding = tuple[_JsonPath, Any, str, str]


Kind = tuple[str, "Validator | None", "Mapping[str, Any] | None"]
"""How the API server serves an apiVersion and kind: ("builtin", validator, None), ("custom", validator, schema),
("unserved", None, None) for a kind or version a known API group does not serve, ("unknown", validator, None) for a
group jaxinfra has no schema of, its validator checking only what every object has (`_unknown_validator`)."""


def resolve(api_version: str, kind: str, crds: Iterable[Mapping] = ()) -> Kind:
    """The schema of an apiVersion/kind: built in, a bundled CRD's, a CRD's among `crds` (the inputs'), or none."""
    _require_dependencies()
    group, _, version = api_version.rpartition("/")
    if (group, kind) in _CRD_FILES:
        validator = _crd_validator(group, kind, version)
        if validator is None:
            return "unserved", None, None
        return "custom", validator, crd_schema(group, kind, version)
    for crd in crds:
        schema = _input_crd_schema(crd, group, kind, version)
        if schema is not None:
            return "custom", _schema_validator(schema), schema
    validator = _builtin_validator(api_version, kind)
    if validator is not None:
        return "builtin", validator, None
    known = group in {g for g, _ in _CRD_FILES} or group in _builtin_groups() or kind in {k for _, k in _CRD_FILES}
    if known:
        return "unserved", None, None  # a known kind in another group: a typo, refused
    return "unknown", _unknown_validator(), None


@functools.cache
def _unknown_validator() -> Validator:
    """What the API server checks of any custom resource, whatever its CRD's schema: apiVersion and kind strings,
    `metadata` a strict ObjectMeta (customresource_handler.go decodes it into metav1.ObjectMeta, so `annotations: 5`
    or a label value that is no string is refused there), the rest as it is."""
    return _schema_validator({"type": "object", "x-kubernetes-preserve-unknown-fields": True})


def schema_findings(doc: Mapping, validator: Validator) -> list[_Finding]:
    """Every schema finding of one object, sorted by location so that output is stable."""
    return sorted(
        (f for error in validator.iter_errors(doc) for f in _explain(error, doc)), key=lambda f: (_sort_key(f[0]), f[2])
    )


def header_findings(doc: Mapping) -> list[_Finding]:
    """apiVersion and kind, which every object needs before anything else is read."""
    return [
        ((field,), doc.get(field), f"{field} must be a non-empty string", "set it")
        for field in ("apiVersion", "kind")
        if not isinstance(doc.get(field), str) or not doc.get(field)
    ]


def unserved(api_version: str, kind: str) -> _Finding:
    """What the API server (kubectl's REST mapping) answers for a kind or version a known group does not serve."""
    message = f"no matches for kind {kind!r} in version {api_version!r} (Kubernetes {K8S_VERSION} and the bundled CRDs)"
    groups = [g for g, custom in _CRD_FILES if custom == kind]
    if groups:
        return (
            ("apiVersion",),
            api_version,
            message,
            f"use apiVersion {' or '.join(_served_api_versions(groups[0], kind))}",
        )
    return ("kind",), kind, message, _UNKNOWN_KIND_FIX


@functools.cache
def _builtin_groups() -> frozenset[str]:
    """The API groups Kubernetes K8S_VERSION serves ('' is core), from the definitions' group-version-kinds."""
    definitions = json.loads((_k8s_schema_dir() / "_definitions.json").read_text(encoding="utf-8"))
    return frozenset(
        gvk.get("group", "")
        for d in definitions.get("$defs", definitions.get("definitions", {})).values()
        for gvk in d.get("x-kubernetes-group-version-kind", ())
    )


def _input_crd_schema(crd: Mapping, group: str, kind: str, version: str) -> Mapping[str, Any] | None:
    """A served version's schema of a CustomResourceDefinition among the inputs, when it defines group/kind."""
    spec = crd.get("spec") if isinstance(crd, Mapping) else None
    if not isinstance(spec, Mapping) or spec.get("group") != group or (spec.get("names") or {}).get("kind") != kind:
        return None
    for entry in spec.get("versions") or []:
        if isinstance(entry, Mapping) and entry.get("name") == version and entry.get("served"):
            schema = (entry.get("schema") or {}).get("openAPIV3Schema")
            return (
                schema
                if isinstance(schema, Mapping)
                else {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
            )
    return None


def _explain(error: ValidationError, doc: Mapping) -> Iterator[_Finding]:
    """Turn one jsonschema error in `doc` into findings located at the field concerned."""
    at = tuple(error.absolute_path)
    instance = error.instance
    if error.validator == "format" and error.validator_value == BYTES and isinstance(instance, str):
        yield at, short(instance), _illegal_base64(doc, instance), _base64_fix(doc, at)
    elif error.validator == "additionalProperties" and isinstance(instance, Mapping):
        allowed = sorted(error.schema.get("properties", {}))
        for key in instance:
            if key not in allowed:
                fix = _unknown_field_fix(key, allowed)
                yield (*at, key), short(instance[key]), f"unknown field {key!r}", fix
    elif error.validator == "required" and isinstance(instance, Mapping):
        for key in error.validator_value:
            if key not in instance:
                yield (*at, key), None, f"{key!r} is a required property", "set it"
    else:
        yield at, short(instance), _clip(error.message), _fix(error)


def _illegal_base64(doc: Mapping, value: str) -> str:
    """The API server's refusal of a []byte field that is not standard base64 (`gobase64`): the decoding error, as the
    create handler wraps it (kubernetes @001a2d0ff58b staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go
    transformDecodeError: `<Kind> in version "<version>" cannot be handled as a <Kind>: <error>`, a BadRequest)."""
    kind, version = doc.get("kind"), str(doc.get("apiVersion", "")).rpartition("/")[2]
    return (
        f"illegal base64 data at input byte {illegal_at(value)}: the API server cannot decode the object "
        f'(400 BadRequest: {kind} in version "{version}" cannot be handled as a {kind}), so it is never stored'
    )


_TEXT_INSTEAD = {("ConfigMap", "binaryData"): "data", ("Secret", "data"): "stringData"}
"""Where the same object takes text as it is, for each field of bytes a user writes by hand."""


def _base64_fix(doc: Mapping, at: _JsonPath) -> str:
    """How to give a []byte field: the bytes as standard base64, or the text in the object's field for text."""
    fix = "give the bytes as standard base64 (`base64 -w0 FILE`: A-Z a-z 0-9 + /, padded with '=')"
    text = _TEXT_INSTEAD.get((str(doc.get("kind")), str(at[0]) if at else ""))
    return f"{fix}, or put text as it is in {text}" if text and len(at) == 2 else fix


def _unknown_field_fix(key: str, allowed: Sequence[str]) -> str:
    import difflib

    close = difflib.get_close_matches(str(key), allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"remove it or check its spelling{hint}; allowed: {', '.join(allowed) or 'none'}"


_HINTS = {
    "const": "use {!r}",
    "pattern": "make it match the regular expression {}",
    "maxLength": "shorten it to at most {} characters",
    "minLength": "make it at least {} characters long",
    "maximum": "use a value <= {}",
    "minimum": "use a value >= {}",
    "exclusiveMaximum": "use a value < {}",
    "exclusiveMinimum": "use a value > {}",
    "maxItems": "use at most {} items",
    "minItems": "use at least {} items",
    "maxProperties": "use at most {} entries",
    "minProperties": "use at least {} entries",
    "uniqueItems": "remove the duplicate items",
}


def _fix(error: ValidationError) -> str:
    """A short hint for the schema keyword that failed."""
    rule, limit = error.validator, error.validator_value
    if rule == "type":
        return f"use a value of type {_types(limit)}"
    if rule in ("anyOf", "oneOf") and all(isinstance(s, Mapping) and "type" in s for s in limit):
        return f"use a value of type {' or '.join(dict.fromkeys(_types(s['type']) for s in limit))}"
    if rule == "enum":
        return "use one of: " + ", ".join(map(repr, limit))
    if rule == "format" and limit in INT_RANGES:
        return f"use a whole number from {-INT_RANGES[limit]} to {INT_RANGES[limit] - 1}"
    if rule in _HINTS:
        return _HINTS[rule].format(limit)
    return _clip(f"make the value satisfy {rule}: {limit!r}")


def _types(type_: str | Sequence[str]) -> str:
    names = [type_] if isinstance(type_, str) else [t for t in type_ if t != "null"]
    return " or ".join(names)


# --- schemas -------------------------------------------------------------------------------


def _require_dependencies() -> None:
    """Fail with one actionable Problem when the optional validation extras are missing."""
    try:
        import jsonschema  # noqa: F401
        import kubernetes_validate  # noqa: F401
    except ImportError as err:
        message = f"strict validation needs jsonschema and kubernetes-validate ({err})"
        problem = Problem("jaxinfra.validate", err.name, message, _INSTALL_FIX)
        raise ManifestError([problem]) from None


@functools.cache
def _k8s_schema_dir() -> Traversable:
    """kubernetes-validate's strict schema folder for K8S_VERSION (its own `-strict` variant)."""
    from importlib.resources import files

    root = files("kubernetes_validate") / "kubernetes-json-schema"
    wanted = re.compile(rf"v{re.escape(K8S_VERSION)}\.(\d+)-local-strict")
    found = sorted((int(m[1]), d.name) for d in root.iterdir() if (m := wanted.fullmatch(d.name)))
    if not found:
        message = f"the installed kubernetes-validate has no schemas for Kubernetes {K8S_VERSION}"
        fix = f"pip install -U 'kubernetes-validate>={K8S_VERSION}'"
        raise ManifestError([Problem("jaxinfra.validate", K8S_VERSION, message, fix)])
    return root / found[-1][1]


@functools.cache
def _k8s_registry() -> tuple[Registry, str]:
    """A registry resolving `$ref`s into kubernetes-validate's shared definitions; their URI."""
    from referencing import Registry, Resource

    definitions = json.loads((_k8s_schema_dir() / "_definitions.json").read_text(encoding="utf-8"))
    uri = definitions["$id"]
    return Registry().with_resource(uri, Resource.from_contents(definitions)), uri


@functools.cache
def _builtin_validator(api_version: str, kind: str) -> Validator | None:
    """Validator for a built-in kind, or None when K8S_VERSION has no such apiVersion/kind.

    Files follow kubernetes-validate's naming (`<kind>-<first label of group>-<version>.json`);
    the schema's own group-version-kind must match exactly, so that neither a look-alike group
    nor a sub-object schema (Affinity, ...) passes for a kind.
    """
    group, _, version = api_version.rpartition("/")
    stem = f"{group.split('.')[0]}-{version}" if group else version
    if not (re.fullmatch(_SCHEMA_NAME, kind) and re.fullmatch(_SCHEMA_NAME, stem)):
        return None
    file = _k8s_schema_dir() / f"{kind.lower()}-{stem}.json"
    if not file.is_file():
        return None
    schema = json.loads(file.read_text(encoding="utf-8"))
    gvk = {"group": group, "version": version, "kind": kind}
    if gvk not in schema.get("x-kubernetes-group-version-kind", []):
        return None
    return _decoder()(schema, registry=_k8s_registry()[0], format_checker=_typed_formats())


INT_RANGES = {"int32": 2**31, "int64": 2**63}
"""The Go integer a typed field decodes into, by its schema's format: a number outside is refused at decoding."""
BYTES = "byte"
"""The format of a []byte field (OpenAPI's `format: byte`): standard base64, or refused at decoding."""


def _whole(checker: Any, instance: object) -> bool:
    """An integer as the API server reads one: an int, or a float with no fraction that kubectl's YAML-to-JSON writes
    as digits (Go's float formatting, under 1e21) -- never 2.5 or 1e308 ("cannot unmarshal number 1e+308")."""
    if isinstance(instance, bool):
        return False
    return isinstance(instance, int) or (isinstance(instance, float) and instance.is_integer() and abs(instance) < 1e21)


@functools.cache
def _decoder() -> type[Validator]:
    """Draft 2020-12 with the API server's integers (`_whole`)."""
    from jsonschema import Draft202012Validator, validators

    checker = Draft202012Validator.TYPE_CHECKER.redefine("integer", _whole)
    return cast("type[Validator]", validators.extend(Draft202012Validator, type_checker=checker))


@functools.cache
def _typed_formats() -> Any:
    """The formats a built-in kind's typed decoding enforces: int32 and int64 ranges (Go's json into an int32:
    "cannot unmarshal number 3000000000 into Go struct field ... of type int32") and `byte`, a []byte field's standard
    base64 (`gobase64`: "illegal base64 data at input byte N"); other formats are not checked."""
    from jsonschema import FormatChecker

    formats = FormatChecker(formats=())
    for name, bound in INT_RANGES.items():
        formats.checks(name)(lambda x, bound=bound: not isinstance(x, (int, float)) or -bound <= x < bound)
    formats.checks(BYTES)(lambda x: not isinstance(x, str) or illegal_at(x) is None)
    return formats


@functools.cache
def _crd(file: str) -> Mapping[str, Any]:
    """A bundled CRD, parsed once (the large ones take tens of milliseconds, KubeRay's RayJob hundreds)."""
    from importlib.resources import files

    import yaml

    text = (files("jaxinfra.schemas") / file).read_text(encoding="utf-8")
    return yaml.load(text, Loader=_yaml_loader())


def _versions(group: str, kind: str) -> Iterator[Mapping[str, Any]]:
    """The versions the bundled CRDs of a custom kind list, file by file."""
    for file in _CRD_FILES.get((group, kind), ()):
        yield from _crd(file)["spec"]["versions"]


def crd_schema(group: str, kind: str, version: str) -> Mapping[str, Any] | None:
    """The openAPIV3Schema of a served version of a bundled custom kind (as written upstream), or None."""
    for entry in _versions(group, kind):
        if entry["name"] == version and entry.get("served"):
            return entry["schema"]["openAPIV3Schema"]
    return None


def _served_api_versions(group: str, kind: str) -> list[str]:
    return [f"{group}/{v['name']}" for v in _versions(group, kind) if v.get("served")]


@functools.cache
def _crd_validator(group: str, kind: str, version: str) -> Validator | None:
    """Strict validator for a served version of a bundled custom kind, or None if it is not served."""
    schema = crd_schema(group, kind, version)
    return None if schema is None else _schema_validator(schema, typed=True)


def _schema_validator(schema: Mapping[str, Any], typed: bool = False) -> Validator:
    """A strict validator for a structural CRD schema.

    The CRD leaves root `metadata` as a bare object; the API server validates it as ObjectMeta,
    so it is checked against kubernetes-validate's strict ObjectMeta. `typed`: a bundled kind, whose controller's
    webhook decodes it into Go types (an int32 `replicas` past its range is refused there).
    """
    registry, definitions_uri = _k8s_registry()
    strict = _strict(schema)
    metadata = {"$ref": f"{definitions_uri}#/$defs/{_OBJECT_META}"}
    strict["properties"] = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        **strict.get("properties", {}),
        "metadata": metadata,
    }  # every object has these three, whatever its schema says
    return _decoder()(strict, registry=registry, format_checker=_typed_formats() if typed else None)


def _strict(node: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a structural CRD schema in which unknown fields are errors.

    The API server drops (strict mode: rejects) fields a structural schema does not name, unless
    `x-kubernetes-preserve-unknown-fields` is set; JSON Schema allows them unless told, so every
    object schema without `additionalProperties` gets `additionalProperties: false` -- including
    a bare `type: object` such as Trainer's `mlPolicy.jax: {}`, which keeps no fields at all.
    Only structural keywords are followed: `anyOf`/`allOf` branches list partial properties.
    `x-kubernetes-int-or-string` without its usual anyOf gets one, so either form is accepted.
    """
    out = dict(node)
    properties = node.get("properties")
    if isinstance(properties, Mapping):
        out["properties"] = {key: _strict(sub) for key, sub in properties.items()}
    if (
        (properties is not None or node.get("type") == "object")
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    for keyword in ("items", "additionalProperties"):
        if isinstance(node.get(keyword), Mapping):
            out[keyword] = _strict(node[keyword])
    if node.get("x-kubernetes-int-or-string") and "anyOf" not in node and "type" not in node:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if isinstance(node.get("pattern"), str):
        out["pattern"] = _python_pattern(node["pattern"])
    return out


_GO_ANCHORED_FLAGS = re.compile(r"^\^\(\?([ims]+)\)")


def _python_pattern(pattern: str) -> str:
    """An OpenAPI `pattern` as Python's `re` reads what the API server's Go regexp (RE2) does: RE2 takes a flag group
    anywhere (regexp/syntax: `(?flags)` sets flags for the rest of the group), Python only at the very start, so
    `^(?i)...` (Kueue's AdmissionCheck parameters.kind) becomes `(?i)^...`, the same language."""
    return _GO_ANCHORED_FLAGS.sub(lambda m: f"(?{m.group(1)})^", pattern, count=1)


# --- formatting ----------------------------------------------------------------------------


def _yaml_loader() -> type:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def json_path(at: _JsonPath) -> str:
    """`spec.replicatedJobs[0].template`; odd keys quoted: `labels["app.kubernetes.io/name"]`."""
    out = ""
    for part in at:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(_PLAIN_KEY, str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{json.dumps(str(part))}]"
    return out


def _sort_key(at: _JsonPath) -> tuple[tuple[int, int, str], ...]:
    """Orders list indices numerically ([2] before [10]) and keys alphabetically."""
    return tuple((0, part, "") if isinstance(part, int) else (1, 0, str(part)) for part in at)


def short(value: Any, limit: int = 80) -> Any:
    """The value itself, or its repr cut to `limit` characters if long (a whole pod spec, say)."""
    text = repr(value)
    return value if len(text) <= limit else text[: limit - 3] + "..."


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
