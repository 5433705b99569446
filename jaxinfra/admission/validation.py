"""The API server's validation step: what `pkg/apis/*/validation` refuses in an object after defaulting, beyond
what the JSON schema already checked (types), with the API server's messages.

Each rule is emulated from the upstream source (kubernetes/kubernetes; the commit is the stored version read):

- names, keys and values -- staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go @008b3652959c
  (IsDNS1123Label, IsDNS1123Subdomain, IsDNS1035Label, IsConfigMapKey, IsEnvVarName, IsRelaxedEnvVarName,
  IsValidPortNum, IsValidPortName, IsDomainPrefixedPath, RegexError, hasChDirPrefix) and
  staging/src/k8s.io/apimachinery/pkg/api/validate/content/kube.go @26c0309663d6 (IsLabelKey, which is
  IsQualifiedName, and IsLabelValue). Lengths are Go's `len`: bytes. Newer content/errors.go @248642091bda says
  "must be no more than N bytes"; this module keeps util/validation's "characters", which the DNS rules print.
- the relaxed environment variable names -- pkg/features/kube_features.go: RelaxedEnvironmentVariableValidation
  is GA and locked on since 1.34, so every printable ASCII character but '=' is allowed (`RELAXED_ENV_VAR_NAMES`).
  RelaxedServiceNameValidation is alpha (off): a Service name stays a DNS-1035 label.
- the message grammar -- staging/src/k8s.io/apimachinery/pkg/util/validation/field/errors.go @014a908cc415
  (`Invalid value: "x": ...`, `Required value`, `Duplicate value`, `Not found`, `Unsupported value: ...:
  supported values: ...`, `Forbidden`, `Too long: must have at most N bytes`, `Too many`).
- ObjectMeta -- staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go @008b3652959c
  (ValidateObjectMetaAccessor: generateName, name, namespace, generation, labels, annotations (keys, 256 KiB in
  all), ownerReferences, finalizers), generic.go @1a76ea441251 (NameIsDNSSubdomain / NameIsDNSLabel /
  NameIsDNS1035Label and maskTrailingDash for generateName), apis/meta/v1/validation/validation.go @046d201c45ce
  (ValidateLabels, ValidateLabelSelector); pkg/apis/core/validation/validation.go @000f26050b9b
  (validateKubeFinalizerName; the name function of each kind).
- PodSpec / PodTemplateSpec -- pkg/apis/core/validation/validation.go @000f26050b9b: ValidatePodSpec,
  ValidatePodTemplateSpec, validateContainers, validateInitContainers, validateContainerCommon,
  validateContainerPorts, AccumulateUniqueHostPorts, ValidateEnv, validateEnvVarValueFrom, ValidateEnvFrom,
  ValidateVolumes, validateVolumeSource (and the sources below), validateKeyToPath,
  validateDownwardAPIVolumeFile, validateProjectionSources, validateLocalDescendingPath,
  ValidateLocalNonReservedPath, ValidateVolumeMounts, validateMountPropagation, validateResourceRequirements,
  validateContainerResourceName, ValidateResourceQuantityValue, validateRestartPolicy, validateDNSPolicy,
  validatePodDNSConfig (dnsPolicy None), ValidateTolerations, validateContainerOnlyForPod; the Pod warnings from
  pkg/api/pod/warnings.go (a negative terminationGracePeriodSeconds is accepted, with a warning, and treated as 1)
  and pkg/registry/core/pod/strategy.go @008b3652959c (WarningsOnCreate: a Pod name that is no DNS label).
- Service, ConfigMap, Secret, Namespace, ServiceAccount -- the same validation.go (ValidateService,
  validateServicePort, ValidateConfigMap, ValidateSecret, ValidateServiceAccount, ValidateNamespace).
- Job -- pkg/apis/batch/validation/validation.go (the stored current version: validateGeneratedSelector,
  ValidateJob, ValidateJobSpec, validateJobSpec, validatePodFailurePolicy(Rule...), validateSuccessPolicy,
  validatePodReplacementPolicy) and the selector the registry generates (pkg/registry/batch/job/strategy.go).

The rules the simulator also applies at run time (volume item paths, subPaths, ConfigMap/Secret keys, volume
names) live here once; `simulate/volumes.py` imports them.

Knowingly not emulated: probes, lifecycle handlers, securityContext, affinity, topologySpreadConstraints,
Service IP families / traffic policies / session affinity, the volume sources other than emptyDir, hostPath,
secret, configMap, persistentVolumeClaim, downwardAPI, projected, csi, nfs and ephemeral (their "exactly one
source" rule is), hugepage divisibility, successPolicy's succeededIndexes grammar, Secret payload formats (only
the required keys per type). Quantities print as written, not in Go's canonical form. Go reports map entries in
random order; this module keeps the object's order.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from jaxinfra import quantity
from jaxinfra.admission import naming
from jaxinfra.admission.decoded import as_int, as_list, as_map, as_str, entries
from jaxinfra.admission.goformat import go_quote
from jaxinfra.admission.store import CLUSTER_SCOPED, Finding, Path

__all__ = [
    "validate", "object_meta", "pod_spec", "pod_template",
    "SUBDOMAIN", "LABEL", "DNS1035",
    "dns1123_label", "dns1123_subdomain", "dns1035_label", "qualified_name", "label_value", "config_map_key",
    "env_var_name", "local_descending_path", "local_non_reserved_path", "RELAXED_ENV_VAR_NAMES",
]

# --- apimachinery util/validation: the string rules -----------------------------------------------------------

SUBDOMAIN, LABEL, DNS1035 = "subdomain", "label", "dns1035"
"""The `name_rule` values of `object_meta`: NameIsDNSSubdomain, NameIsDNSLabel, NameIsDNS1035Label (another value
is taken as a subdomain, the rule of most kinds and of every custom resource)."""

RELAXED_ENV_VAR_NAMES = True
"""RelaxedEnvironmentVariableValidation: GA and locked on since Kubernetes 1.34."""

_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + r"(\." + _LABEL_FMT + ")*"
_DNS1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_VALUE_FMT = "(" + _KEY_FMT + ")?"
_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"
_ENV_FMT = "[-._a-zA-Z][-._a-zA-Z0-9]*"
_HTTP_PATH_FMT = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"
_KEY_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
            "character")


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """apimachinery RegexError, spacing included (each example is followed by ', ', then ' or ')."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    return msg + " (e.g. " + " or ".join(f"'{e}', " for e in examples) + f"regex used for validation is '{fmt}')"


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def _size(value: str) -> int:
    return len(value.encode())


def dns1123_label(value: str) -> list[str]:
    """IsDNS1123Label: at most 63 bytes of [a-z0-9-], alphanumeric at both ends ("must not contain dots" for a
    subdomain)."""
    errs = [_max_len(63)] if _size(value) > 63 else []
    if not re.fullmatch(_LABEL_FMT, value):
        errs.append("must not contain dots" if re.fullmatch(_SUBDOMAIN_FMT, value) else _regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
            "and end with an alphanumeric character", _LABEL_FMT, "my-name", "123-abc"))
    return errs


def dns1123_subdomain(value: str) -> list[str]:
    """IsDNS1123Subdomain: at most 253 bytes of dot-separated DNS-1123 labels."""
    errs = [_max_len(253)] if _size(value) > 253 else []
    if not re.fullmatch(_SUBDOMAIN_FMT, value):
        errs.append(_regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
            "must start and end with an alphanumeric character", _SUBDOMAIN_FMT, "example.com"))
    return errs


def dns1035_label(value: str) -> list[str]:
    """IsDNS1035Label: a DNS-1123 label that starts with a letter (Service names)."""
    errs = [_max_len(63)] if _size(value) > 63 else []
    if not re.fullmatch(_DNS1035_FMT, value):
        errs.append(_regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
            "character, and end with an alphanumeric character", _DNS1035_FMT, "my-name", "abc-123"))
    return errs


def qualified_name(value: str) -> list[str]:
    """IsQualifiedName (content.IsLabelKey): an optional DNS subdomain prefix and '/', then a name of at most 63
    bytes; label keys, annotation keys (lowercased), finalizers, resource names."""
    parts = value.split("/")
    errs: list[str] = []
    if len(parts) > 2:
        return ["a valid label key " + _regex_error(_KEY_MSG, _KEY_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if len(parts) == 2:
        if not parts[0]:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in dns1123_subdomain(parts[0]))
    name = parts[-1]
    if not name:
        errs.append("name part must be non-empty")
    elif _size(name) > 63:
        errs.append("name part " + _max_len(63))
    if not re.fullmatch(_KEY_FMT, name):
        errs.append("name part " + _regex_error(_KEY_MSG, _KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def label_value(value: str) -> list[str]:
    """IsValidLabelValue: empty, or at most 63 bytes of [A-Za-z0-9-_.], alphanumeric at both ends."""
    errs = [_max_len(63)] if _size(value) > 63 else []
    if not re.fullmatch(_VALUE_FMT, value):
        errs.append(_regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character", _VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def _chdir_prefix(value: str) -> list[str]:
    if value in (".", ".."):
        return [f"must not be '{value}'"]
    return ["must not start with '..'"] if value.startswith("..") else []


def config_map_key(value: str) -> list[str]:
    """IsConfigMapKey: a ConfigMap's or Secret's key (and so a projected file's name)."""
    errs = [_max_len(253)] if _size(value) > 253 else []
    if not re.fullmatch(_CONFIG_KEY_FMT, value):
        errs.append(_regex_error("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                                 _CONFIG_KEY_FMT, "key.name", "KEY_NAME", "key-name"))
    return errs + _chdir_prefix(value)


def env_var_name(value: str, relaxed: bool = RELAXED_ENV_VAR_NAMES) -> list[str]:
    """IsRelaxedEnvVarName (the gate on: printable ASCII but '='), or IsEnvVarName (a C-like name with '-' '.')."""
    if relaxed:
        errs = ["environment variable name must be non-empty"] if not value else []
        if any(not " " <= c <= "~" or c == "=" for c in value):
            errs.append("a valid environment variable name must consist only of printable ASCII characters other "
                        "than '='")
        return errs
    errs = [] if re.fullmatch(_ENV_FMT, value) else [_regex_error(
        "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and "
        "must not start with a digit", _ENV_FMT, "my.env-name", "MY_ENV.NAME", "MyEnvName1")]
    return errs + _chdir_prefix(value)


def _port_name(value: str) -> list[str]:
    """IsValidPortName: an IANA service name."""
    errs = [_max_len(15)] if _size(value) > 15 else []
    if not re.fullmatch("[-a-z0-9]+", value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", value):
        errs.append("must contain at least one letter (a-z)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if value.startswith("-") or value.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


_PORT_RANGE = "must be between 1 and 65535, inclusive"


def local_descending_path(value: str) -> list[str]:
    """validateLocalDescendingPath: relative, with no '..' element (subPath, subPathExpr, gitRepo directory)."""
    errs = ["must be a relative path"] if value.startswith("/") else []
    return errs + (["must not contain '..'"] if ".." in value.split("/") else [])


def local_non_reserved_path(value: str) -> list[str]:
    """ValidateLocalNonReservedPath: a descending path that does not start with '..' (the kubelet's ..data)."""
    reserved = value.startswith("..") and not value.startswith("../")
    return local_descending_path(value) + (["must not start with '..'"] if reserved else [])


# --- the message grammar (field/errors.go) -------------------------------------------------------------------

class _Raw(str):
    """A value the API server prints without quotes (a Quantity, a Go struct)."""


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _Raw) or isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):   # %#v sorts map keys
        pairs = sorted((str(k), v) for k, v in value.items())
        return "map[string]string{" + ", ".join(f"{go_quote(k)}:{go_quote(v)}" for k, v in pairs) + "}"
    return json.dumps(value, sort_keys=True, default=str)   # Go prints its struct here; JSON reads the same


def _invalid(at: Path, value: Any, detail: str, fix: str) -> Finding:
    return Finding(at, value, f"Invalid value: {_show(value)}: {detail}", fix)


def _omitted(at: Path, detail: str, fix: str) -> Finding:
    return Finding(at, None, f"Invalid value: {detail}", fix)


def _required(at: Path, fix: str, detail: str = "", value: Any = None) -> Finding:
    return Finding(at, value, "Required value" + (f": {detail}" if detail else ""), fix)


def _duplicate(at: Path, value: Any, fix: str) -> Finding:
    return Finding(at, value, f"Duplicate value: {_show(value)}", fix)


def _not_found(at: Path, value: Any, fix: str) -> Finding:
    return Finding(at, value, f"Not found: {_show(value)}", fix)


def _not_supported(at: Path, value: Any, supported: Sequence[str], fix: str) -> Finding:
    listed = ", ".join(go_quote(s) for s in supported)
    return Finding(at, value, f"Unsupported value: {_show(value)}: supported values: {listed}", fix)


def _forbidden(at: Path, detail: str, fix: str, value: Any = None) -> Finding:
    return Finding(at, value, f"Forbidden: {detail}", fix)


def _too_long(at: Path, limit: int, fix: str, value: Any = None) -> Finding:
    return Finding(at, value, f"Too long: must have at most {limit} bytes", fix)


def _too_many(at: Path, actual: int, limit: int, fix: str) -> Finding:
    return Finding(at, actual, f"Too many: {actual}: must have at most {limit} items", fix)


def _go_list(values: Sequence[str]) -> str:
    """Go's %q of a []string: ["a" "b"]."""
    return "[" + " ".join(map(go_quote, values)) + "]"


def _each(at: Path, value: Any, messages: Iterable[str], fix: str) -> list[Finding]:
    return [_invalid(at, value, m, fix) for m in messages]












def _strings(value: Any) -> dict[str, str]:
    return {k: v for k, v in as_map(value).items() if isinstance(k, str) and isinstance(v, str)}


def _nonnegative(at: Path, value: Any, fix: str) -> list[Finding]:
    n = as_int(value)
    return [_invalid(at, n, "must be greater than or equal to 0", fix)] if n is not None and n < 0 else []


# --- ObjectMeta ---------------------------------------------------------------------------------------------

_NAME_RULES = {SUBDOMAIN: dns1123_subdomain, LABEL: dns1123_label, DNS1035: dns1035_label}
_NAME_FIX = {
    SUBDOMAIN: "use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253",
    LABEL: "use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit",
    DNS1035: "use at most 63 lowercase letters, digits and '-', starting with a letter, ending with a letter or digit",
}
_STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})
TOTAL_ANNOTATION_BYTES = 256 * 1024


def _name_errors(rule: str, name: str, prefix: bool = False) -> list[str]:
    """A ValidateNameFunc; a generateName prefix may end in '-' (maskTrailingDash, which also drops the character
    before it)."""
    if prefix and name.endswith("-"):
        name = name[:-2] + "a"
    return _NAME_RULES.get(rule, dns1123_subdomain)(name)


def _labels(labels: Any, at: Path) -> list[Finding]:
    """ValidateLabels: every key a qualified name, every value a label value (the path is the map's)."""
    out: list[Finding] = []
    for k, v in _strings(labels).items():
        out += _each(at, k, qualified_name(k), "label keys are an optional DNS prefix and '/', then at most 63 "
                     "letters, digits, '-', '_' or '.'")
        out += _each(at, v, label_value(v), "label values are at most 63 letters, digits, '-', '_' or '.', "
                     "starting and ending with a letter or digit (or empty); put longer text in an annotation")
    return out


def _annotations(annotations: Any, at: Path) -> list[Finding]:
    """ValidateAnnotations: keys are qualified names whatever their case; keys and values 256 KiB in all."""
    values = _strings(annotations)
    out: list[Finding] = []
    for k in values:
        out += _each(at, k, qualified_name(k.lower()), "annotation keys are an optional DNS prefix and '/', then at "
                     "most 63 letters, digits, '-', '_' or '.'")
    if sum(_size(k) + _size(v) for k, v in values.items()) > TOTAL_ANNOTATION_BYTES:
        out.append(_too_long(at, TOTAL_ANNOTATION_BYTES, "keep annotations under 256 KiB in all: move large data "
                                                         "into a ConfigMap"))
    return out


def _owner_references(refs: Any, at: Path) -> list[Finding]:
    out: list[Finding] = []
    controller = ""
    for _, ref in entries(refs):
        api_version = as_str(ref.get("apiVersion"))
        if not api_version.rpartition("/")[2]:
            out.append(_invalid(at + ("apiVersion",), api_version, "version must not be empty", "set the owner's "
                                                                                                "apiVersion"))
        for key in ("kind", "name", "uid"):
            if not as_str(ref.get(key)):
                out.append(_invalid(at + (key,), as_str(ref.get(key)), "must not be empty", f"set the owner's {key}"))
        if ref.get("controller") is True:
            this = f"{as_str(ref.get('kind'))}/{as_str(ref.get('name'))}"
            if controller:
                out.append(_invalid(at, refs, "Only one reference can have Controller set to true. Found \"true\" in "
                                    f"references for {controller} and {this}", "mark one owner as the controller"))
            else:
                controller = this
    return out


def _finalizers(finalizers: Any, at: Path, kube: bool) -> list[Finding]:
    """ValidateFinalizers (+ validateKubeFinalizerName for built-in kinds: standard or fully qualified)."""
    names = [f for f in as_list(finalizers) if isinstance(f, str)]
    out: list[Finding] = []
    for name in names:
        out += _each(at, name, qualified_name(name), _FINALIZER_FIX)
    if "orphan" in names and "foregroundDeletion" in names:
        out.append(_invalid(at, names, "finalizer orphan and foregroundDeletion cannot be both set",
                            "keep one of them"))
    if kube:
        for i, name in enumerate(names):
            out += _kube_finalizer(name, at + (i,))
    return out


_FINALIZER_FIX = "a finalizer is a qualified name such as example.com/cleanup"


def _kube_finalizer(name: str, at: Path) -> list[Finding]:
    """validateKubeFinalizerName: a qualified name, and standard unless it has a domain prefix."""
    out = _each(at, name, qualified_name(name), _FINALIZER_FIX)
    if "/" not in name and name not in _STANDARD_FINALIZERS:
        out.append(_invalid(at, name, "name is neither a standard finalizer name nor is it fully qualified",
                            "prefix it with your domain: example.com/" + name))
    return out


def object_meta(meta: Mapping, name_rule: str, *, namespaced: bool = True, kube: bool = True,
                at: Path = ("metadata",)) -> list[Finding]:
    """ValidateObjectMeta on create: generateName and name by `name_rule` (SUBDOMAIN, LABEL or DNS1035), the
    namespace (a namespaced object's; a cluster-scoped one's is cleared before validation), generation, labels,
    annotations, ownerReferences and finalizers (`kube`: a built-in kind's, which must also be standard or
    qualified)."""
    meta = as_map(meta)
    out: list[Finding] = []
    fix = _NAME_FIX.get(name_rule, _NAME_FIX[SUBDOMAIN])
    generate = as_str(meta.get("generateName"))
    name = as_str(meta.get("name"))
    if generate:
        out += _each(at + ("generateName",), generate, _name_errors(name_rule, generate, prefix=True), fix)
        name = name or naming.generate(generate, generate)   # the registry names it before validation
    if not name:
        out.append(_required(at + ("name",), "set metadata.name (or metadata.generateName)",
                             "name or generateName is required"))
    else:
        out += _each(at + ("name",), name, _name_errors(name_rule, name), fix)
    namespace = as_str(meta.get("namespace"))
    if namespaced and namespace:
        out += _each(at + ("namespace",), namespace, dns1123_label(namespace), _NAME_FIX[LABEL])
    out += _nonnegative(at + ("generation",), meta.get("generation"), "drop metadata.generation: the API server "
                                                                      "sets it")
    out += _labels(meta.get("labels"), at + ("labels",))
    out += _annotations(meta.get("annotations"), at + ("annotations",))
    out += _owner_references(meta.get("ownerReferences"), at + ("ownerReferences",))
    out += _finalizers(meta.get("finalizers"), at + ("finalizers",), kube)
    return out


def _selector(selector: Any, at: Path) -> list[Finding]:
    """ValidateLabelSelector."""
    sel = as_map(selector)
    out = _labels(sel.get("matchLabels"), at + ("matchLabels",))
    for i, expr in entries(sel.get("matchExpressions")):
        where = at + ("matchExpressions", i)
        op, values = as_str(expr.get("operator")), as_list(expr.get("values"))
        if op in ("In", "NotIn") and not values:
            out.append(_required(where + ("values",), "list the values to match",
                                 "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist") and values:
            out.append(_forbidden(where + ("values",), "may not be specified when `operator` is 'Exists' or "
                                  "'DoesNotExist'", "drop the values"))
        elif op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            out.append(_invalid(where + ("operator",), op, "not a valid selector operator",
                                "use In, NotIn, Exists or DoesNotExist"))
        key = as_str(expr.get("key"))
        out += _each(where + ("key",), key, qualified_name(key), "use a valid label key")
        for j, value in enumerate(values):   # AllowInvalidLabelValueInSelector is off for new objects
            if isinstance(value, str):
                out += _each(where + ("values", j), value, label_value(value), "use a valid label value")
    return out


def _matches(selector: Mapping, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector(...).Matches(labels)."""
    if any(labels.get(k) != v for k, v in _strings(selector.get("matchLabels")).items()):
        return False
    for _, expr in entries(selector.get("matchExpressions")):
        key, op = as_str(expr.get("key")), expr.get("operator")
        values = {v for v in as_list(expr.get("values")) if isinstance(v, str)}
        present = key in labels
        if (op == "In" and not (present and labels[key] in values)) or (op == "NotIn" and present and
                                                                        labels[key] in values):
            return False
        if (op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return True


# --- PodSpec -------------------------------------------------------------------------------------------------

_VOLUME_SOURCES = (   # validateVolumeSource's order; the path it names when a second one is set
    ("emptyDir", "emptyDir"), ("hostPath", "hostPath"), ("gitRepo", "gitRepo"),
    ("gcePersistentDisk", "gcePersistentDisk"), ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("secret", "secret"), ("nfs", "nfs"), ("iscsi", "iscsi"), ("glusterfs", "glusterfs"), ("flocker", "flocker"),
    ("persistentVolumeClaim", "persistentVolumeClaim"), ("rbd", "rbd"), ("cinder", "cinder"),
    ("cephfs", "cephFS"), ("quobyte", "quobyte"), ("downwardAPI", "downwarAPI"), ("fc", "fc"),
    ("flexVolume", "flexVolume"), ("configMap", "configMap"), ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"), ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"), ("azureDisk", "azureDisk"), ("storageos", "storageos"),
    ("projected", "projected"), ("scaleIO", "scaleIO"), ("csi", "csi"), ("ephemeral", "ephemeral"),
    ("image", "image"),
)
_FILE_MODE = "must be a number between 0 and 0777 (octal), both inclusive"
_VOLUME_FIELD_PATHS = ("metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace",
                       "metadata.uid")
_ENV_FIELD_PATHS = ("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
                    "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")
_RESOURCE_FIELDS = ("limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu",
                    "requests.ephemeral-storage", "requests.memory")
_PATH_FIX = {"must be a relative path": "drop the leading '/': the path is relative to the volume",
             "must not contain '..'": "name a path inside the volume, without '..' elements",
             "must not start with '..'": "rename it: names starting with '..' are the kubelet's own (..data)"}


def _mode(at: Path, value: Any) -> list[Finding]:
    n = as_int(value)
    return [_invalid(at, n, _FILE_MODE, "use an octal mode such as 0644 (420 in decimal)")] \
        if n is not None and not 0 <= n <= 0o777 else []


def _item_path(at: Path, path: str, reserved_ok: bool = False) -> list[Finding]:
    reasons = local_descending_path(path) if reserved_ok else local_non_reserved_path(path)
    return [_invalid(at, path, r, _PATH_FIX[r]) for r in reasons]


def _key_to_path(item: Mapping, at: Path) -> list[Finding]:
    """validateKeyToPath: a configMap/secret item."""
    out: list[Finding] = []
    if not as_str(item.get("key")):
        out.append(_required(at + ("key",), "name the key of the ConfigMap or Secret to project"))
    path = as_str(item.get("path"))
    if not path:
        out.append(_required(at + ("path",), "name the file the key becomes"))
    return out + _item_path(at + ("path",), path) + _mode(at + ("mode",), item.get("mode"))


_FIELD_LABELS = frozenset({   # pods.ConvertDownwardAPIFieldLabel, v1
    "metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid",
    "spec.nodeName", "spec.restartPolicy", "spec.serviceAccountName", "spec.schedulerName", "status.phase",
    "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"})


def _field_ref(ref: Mapping, at: Path, allowed: Sequence[str]) -> list[Finding]:
    """validateObjectFieldSelector (apiVersion defaults to v1)."""
    path = as_str(ref.get("fieldPath"))
    if not path:
        return [_required(at + ("fieldPath",), "name the pod field, e.g. metadata.name")]
    if m := re.fullmatch(r"(metadata\.(?:annotations|labels))\['(.*)'\]", path):
        key = m.group(2).lower() if m.group(1).endswith("annotations") else m.group(2)
        return _each(at, key, qualified_name(key), "subscript a valid label or annotation key")
    if path not in _FIELD_LABELS:
        return [_invalid(at + ("fieldPath",), path, f"error converting fieldPath: field label not supported: {path}",
                         "use a supported pod field, e.g. metadata.name")]
    if path not in allowed:
        return [_not_supported(at + ("fieldPath",), path, allowed, "use one of the supported pod fields")]
    return []


def _resource_ref(ref: Mapping, at: Path, volume: bool) -> list[Finding]:
    """validateContainerResourceFieldSelector (hugepages prefixes allowed)."""
    resource = as_str(ref.get("resource"))
    if volume and not as_str(ref.get("containerName")):
        return [_required(at + ("containerName",), "name the container whose resources to expose")]
    if not resource:
        return [_required(at + ("resource",), "name the resource, e.g. limits.cpu")]
    if resource not in _RESOURCE_FIELDS and not resource.startswith(("requests.hugepages-", "limits.hugepages-")):
        return [_not_supported(at + ("resource",), resource, _RESOURCE_FIELDS, "expose one of the supported fields")]
    return []


def _downward_file(item: Mapping, at: Path) -> list[Finding]:
    """validateDownwardAPIVolumeFile: `at` is the source's path (upstream does not index the item)."""
    out: list[Finding] = []
    path = as_str(item.get("path"))
    if not path:
        out.append(_required(at + ("path",), "name the file the field becomes"))
    out += _item_path(at + ("path",), path)
    field_ref, resource_ref = item.get("fieldRef"), item.get("resourceFieldRef")
    if isinstance(field_ref, Mapping):
        out += _field_ref(field_ref, at + ("fieldRef",), _VOLUME_FIELD_PATHS)
        if isinstance(resource_ref, Mapping):
            out.append(_invalid(at, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously",
                                "keep one of them per item"))
    elif isinstance(resource_ref, Mapping):
        out += _resource_ref(resource_ref, at + ("resourceFieldRef",), volume=True)
    else:
        out.append(_required(at, "set fieldRef or resourceFieldRef", "one of fieldRef and resourceFieldRef is "
                                                                      "required"))
    return out + _mode(at + ("mode",), item.get("mode"))


def _projected(source: Mapping, at: Path) -> list[Finding]:
    """validateProjectedVolumeSource and validateProjectionSources (one kind per source, no path twice)."""
    out = _mode(at + ("defaultMode",), source.get("defaultMode"))
    seen: set[str] = set()

    def claim(path: str, value: Any) -> None:
        if path in seen:
            out.append(_invalid(at, value, "conflicting duplicate paths", "give each projected file its own path"))
        seen.add(path)

    for i, src in entries(source.get("sources")):
        where = at + ("sources", i)
        kinds = [k for k in ("secret", "configMap", "downwardAPI", "serviceAccountToken", "clusterTrustBundle",
                             "podCertificate") if isinstance(src.get(k), Mapping)]
        for kind in ("secret", "configMap"):
            ref = as_map(src.get(kind))
            if kind not in kinds:
                continue
            if not as_str(ref.get("name")):
                out.append(_required(where + (kind, "name"), f"name the {kind} to project"))
            for j, item in entries(ref.get("items")):
                out += _key_to_path(item, where + (kind, "items", j))
                if as_str(item.get("path")):
                    claim(as_str(item.get("path")), as_str(ref.get("name")))
        if "downwardAPI" in kinds:
            for _, item in entries(src["downwardAPI"].get("items")):
                out += _downward_file(item, where + ("downwardAPI",))
                if as_str(item.get("path")):
                    claim(as_str(item.get("path")), as_str(item.get("path")))
        if "serviceAccountToken" in kinds:
            token = src["serviceAccountToken"]
            seconds = as_int(token.get("expirationSeconds"))
            if seconds is not None and seconds < 600:
                out.append(_invalid(where + ("serviceAccountToken", "expirationSeconds"), seconds,
                                    "may not specify a duration less than 10 minutes", "use at least 600 seconds"))
            if seconds is not None and seconds > 1 << 32:
                out.append(_invalid(where + ("serviceAccountToken", "expirationSeconds"), seconds,
                                    "may not specify a duration larger than 2^32 seconds", "use a shorter duration"))
            path = as_str(token.get("path"))
            if not path:
                out.append(_required(at + ("path",), "name the token's file"))
            else:
                out += _item_path(at + ("path",), path)
        if len(kinds) > 1:
            out.append(_forbidden(where, "may not specify more than 1 volume type per source",
                                  "split it into one source per kind"))
    return out


def _volume_source(volume: Mapping, at: Path) -> list[Finding]:
    """validateVolumeSource: exactly one source, and the rules of the common ones."""
    out: list[Finding] = []
    count = 0
    for key, named in _VOLUME_SOURCES:
        if key not in volume or volume[key] is None:
            continue
        if count:
            out.append(_forbidden(at + (named,), "may not specify more than 1 volume type",
                                  "split it into two volumes, one source each"))
            continue
        count += 1
        out += _source_rules(key, as_map(volume[key]), at + (key,))
    if not count:
        out.append(_required(at, "give the volume a source, e.g. emptyDir: {}", "must specify a volume type"))
    return out


def _source_rules(key: str, src: Mapping, at: Path) -> list[Finding]:
    out: list[Finding] = []
    if key == "emptyDir" and "sizeLimit" in src:
        size = quantity.parse(src["sizeLimit"])
        if size is None:
            out.append(_invalid(at + ("sizeLimit",), src["sizeLimit"], quantity.MESSAGE, "write a quantity: 1Gi"))
        elif size < 0:
            out.append(_forbidden(at + ("sizeLimit",), "SizeLimit field must be a valid resource quantity",
                                  "use a non-negative size"))
    elif key == "hostPath":
        path = as_str(src.get("path"))
        if not path:
            out.append(_required(at + ("path",), "name the node's path"))
        elif ".." in path.split("/"):
            out.append(_invalid(at + ("path",), path, "must not contain '..'", "name the path without '..'"))
    elif key in ("secret", "configMap"):
        name_key = "secretName" if key == "secret" else "name"
        if not as_str(src.get(name_key)):
            out.append(_required(at + (name_key,), f"name the {key} to mount"))
        out += _mode(at + ("defaultMode",), src.get("defaultMode"))
        for i, item in entries(src.get("items")):
            out += _key_to_path(item, at + ("items", i))
    elif key == "persistentVolumeClaim" and not as_str(src.get("claimName")):
        out.append(_required(at + ("claimName",), "name the PersistentVolumeClaim"))
    elif key == "downwardAPI":
        out += _mode(at + ("defaultMode",), src.get("defaultMode"))
        for _, item in entries(src.get("items")):
            out += _downward_file(item, at)
    elif key == "projected":
        out += _projected(src, at)
    elif key == "csi":
        driver = as_str(src.get("driver"))
        if not driver:
            out.append(_required(at + ("driver",), "name the CSI driver, e.g. gcsfuse.csi.storage.gke.io"))
        if _size(driver) > 63:
            out.append(_too_long(at + ("driver",), 63, "use the driver's registered name"))
        out += _each(at + ("driver",), driver, dns1123_subdomain(driver.lower()), "use the driver's registered name")
    elif key == "nfs":
        for field in ("server", "path"):
            if not as_str(src.get(field)):
                out.append(_required(at + (field,), f"set the NFS {field}"))
        if not as_str(src.get("path")).startswith("/"):
            out.append(_invalid(at + ("path",), as_str(src.get("path")), "must be an absolute path",
                                "start the export path with '/'"))
    elif key == "ephemeral" and not isinstance(src.get("volumeClaimTemplate"), Mapping):
        out.append(_required(at + ("volumeClaimTemplate",), "give the ephemeral volume a volumeClaimTemplate"))
    return out


def _volumes(volumes: Any, at: Path) -> tuple[dict[str, Mapping], list[Finding]]:
    """ValidateVolumes: the volumes that passed (mounts may name only those) and what was wrong."""
    valid: dict[str, Mapping] = {}
    out: list[Finding] = []
    for i, volume in entries(volumes):
        name = as_str(volume.get("name"))
        errs = _volume_source(volume, at + (i,))
        if not name:
            errs.append(_required(at + (i, "name"), "name the volume, e.g. scratch"))
        else:
            errs += _each(at + (i, "name"), name, dns1123_label(name), _NAME_FIX[LABEL])
        if name in valid:
            errs.append(_duplicate(at + (i, "name"), name, "give each volume its own name"))
        if errs:
            out += errs
        else:
            valid[name] = volume
    return valid, out


_PROPAGATIONS = ("Bidirectional", "HostToContainer", "None")


def _mounts(container: Mapping, volumes: Mapping[str, Mapping], at: Path) -> list[Finding]:
    """ValidateVolumeMounts (subPath and subPathExpr errors name the list, not the entry, as upstream does)."""
    out: list[Finding] = []
    seen: set[str] = set()
    privileged = as_map(container.get("securityContext")).get("privileged") is True
    for i, mount in entries(container.get("volumeMounts")):
        where = at + (i,)
        name, path = as_str(mount.get("name")), as_str(mount.get("mountPath"))
        if not name:
            out.append(_required(where + ("name",), "name the volume to mount"))
        if name not in volumes:
            out.append(_not_found(where + ("name",), name, "add a volume of this name to spec.volumes, or fix the "
                                                           "name"))
        if not path:
            out.append(_required(where + ("mountPath",), "set the path where the container sees the volume"))
        if path in seen:
            out.append(_invalid(where + ("mountPath",), path, "must be unique", "mount each volume at its own path"))
        seen.add(path)
        if isinstance(volumes.get(name, {}).get("image"), Mapping):
            for key in ("subPath", "subPathExpr"):
                if as_str(mount.get(key)):
                    out.append(_invalid(where + (key,), mount[key], "not allowed in image volume sources",
                                        f"drop {key}: an image volume mounts whole"))
        sub, expr = as_str(mount.get("subPath")), as_str(mount.get("subPathExpr"))
        out += _item_path(at + ("subPath",), sub, reserved_ok=True) if sub else []
        if expr:
            if sub:
                out.append(_invalid(where + ("subPathExpr",), expr, "subPathExpr and subPath are mutually exclusive",
                                    "keep one of them"))
            out += _item_path(at + ("subPathExpr",), expr, reserved_ok=True)
        propagation = mount.get("mountPropagation")
        if isinstance(propagation, str):
            if propagation not in _PROPAGATIONS:
                out.append(_not_supported(at + ("mountPropagation",), propagation, _PROPAGATIONS,
                                          "use None or HostToContainer"))
            elif propagation == "Bidirectional" and not privileged:
                out.append(_forbidden(at + ("mountPropagation",), "Bidirectional mount propagation is available "
                                      "only to privileged containers", "use HostToContainer"))
    return out


_PROTOCOLS = ("SCTP", "TCP", "UDP")


def _ports(ports: Any, at: Path) -> list[Finding]:
    """validateContainerPorts (protocol defaults to TCP)."""
    out: list[Finding] = []
    names: set[str] = set()
    for i, port in entries(ports):
        where = at + (i,)
        name = as_str(port.get("name"))
        if name:
            if errs := _port_name(name):
                out += _each(where + ("name",), name, errs, "use at most 15 lowercase letters, digits and single "
                                                            "'-', with at least one letter")
            elif name in names:
                out.append(_duplicate(where + ("name",), name, "give each port its own name"))
            names.add(name)
        number = as_int(port.get("containerPort"))
        if not number:
            out.append(_required(where + ("containerPort",), "set the port the container listens on"))
        elif not 1 <= number <= 65535:
            out.append(_invalid(where + ("containerPort",), number, _PORT_RANGE, "use a port from 1 to 65535"))
        host = as_int(port.get("hostPort"))
        if host and not 1 <= host <= 65535:
            out.append(_invalid(where + ("hostPort",), host, _PORT_RANGE, "use a port from 1 to 65535"))
        protocol = port.get("protocol", "TCP")
        if isinstance(protocol, str) and protocol not in _PROTOCOLS:
            out.append(_not_supported(where + ("protocol",), protocol, _PROTOCOLS, "use TCP, UDP or SCTP"))
    return out


def _host_ports(containers: Iterable[tuple[int, Mapping]], at: Path, seen: set[str]) -> list[Finding]:
    """AccumulateUniqueHostPorts: one protocol/hostIP/hostPort per pod."""
    out: list[Finding] = []
    for i, container in containers:
        for j, port in entries(container.get("ports")):
            host = as_int(port.get("hostPort"))
            if not host:
                continue
            key = f"{as_str(port.get('protocol')) or 'TCP'}/{as_str(port.get('hostIP'))}/{host}"
            if key in seen:
                out.append(_duplicate(at + (i, "ports", j, "hostPort"), key, "use another hostPort"))
            seen.add(key)
    return out


def _env(env: Any, at: Path) -> list[Finding]:
    """ValidateEnv and validateEnvVarValueFrom."""
    out: list[Finding] = []
    for i, var in entries(env):
        where = at + (i,)
        name = as_str(var.get("name"))
        if not name:
            out.append(_required(where + ("name",), "name the variable"))
        else:
            out += _each(where + ("name",), name, env_var_name(name), "use printable ASCII without '='")
        source = var.get("valueFrom")
        if not isinstance(source, Mapping):
            continue
        src_at = where + ("valueFrom",)
        kinds = [k for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
                 if isinstance(source.get(k), Mapping)]
        for kind in kinds:
            ref = source[kind]
            if kind == "fieldRef":
                out += _field_ref(ref, src_at + (kind,), _ENV_FIELD_PATHS)
            elif kind == "resourceFieldRef":
                out += _resource_ref(ref, src_at + (kind,), volume=False)
            else:
                ref_name = as_str(ref.get("name"))
                out += _each(src_at + (kind, "name"), ref_name, dns1123_subdomain(ref_name),
                             f"name the {'ConfigMap' if kind == 'configMapKeyRef' else 'Secret'}")
                key = as_str(ref.get("key"))
                if not key:
                    out.append(_required(src_at + (kind, "key"), "name the key to read"))
                else:
                    out += _each(src_at + (kind, "key"), key, config_map_key(key), "use a valid key")
        if not kinds:
            out.append(_invalid(src_at, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` "
                                "or `secretKeyRef`", "set one source, or use value"))
        elif as_str(var.get("value")):
            out.append(_invalid(src_at, "", "may not be specified when `value` is not empty",
                                "keep either value or valueFrom"))
        elif len(kinds) > 1:
            out.append(_invalid(src_at, "", "may not have more than one field specified at a time",
                                "keep one source"))
    return out


def _env_from(env_from: Any, at: Path) -> list[Finding]:
    """ValidateEnvFrom (a missing source is reported on the list, as upstream does)."""
    out: list[Finding] = []
    for i, entry in entries(env_from):
        prefix = as_str(entry.get("prefix"))
        if prefix:
            out += _each(at + (i, "prefix"), prefix, env_var_name(prefix), "use printable ASCII without '='")
        kinds = [k for k in ("configMapRef", "secretRef") if isinstance(entry.get(k), Mapping)]
        for kind in kinds:
            name = as_str(entry[kind].get("name"))
            if not name:
                out.append(_required(at + (i, kind, "name"), "name the object to read"))
            else:
                out += _each(at + (i, kind, "name"), name, _name_errors(SUBDOMAIN, name, prefix=True),
                             _NAME_FIX[SUBDOMAIN])
        if not kinds:
            out.append(_invalid(at, "", "must specify one of: `configMapRef` or `secretRef`", "set one source"))
        elif len(kinds) > 1:
            out.append(_invalid(at, "", "may not have more than one field specified at a time", "keep one source"))
    return out


# -- resources: helper/helpers.go IsNativeResource, IsExtendedResourceName, IsOvercommitAllowed

_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_STANDARD_RESOURCES = frozenset(_CONTAINER_RESOURCES) | {
    "requests.cpu", "requests.memory", "requests.ephemeral-storage", "limits.cpu", "limits.memory",
    "limits.ephemeral-storage", "pods", "services", "replicationcontrollers", "resourcequotas", "secrets",
    "configmaps", "persistentvolumeclaims", "storage", "requests.storage", "services.nodeports",
    "services.loadbalancers"}


def _hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def _native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _extended(name: str) -> bool:
    return not _native(name) and not name.startswith("requests.") and not qualified_name("requests." + name)


def _resource_name(name: str, at: Path) -> list[Finding]:
    """validateContainerResourceName."""
    out = _each(at, name, qualified_name(name), "use cpu, memory, ephemeral-storage or a vendor/resource name")
    if out:
        return out
    if "/" not in name:
        if name not in _STANDARD_RESOURCES and not _hugepages(name):
            out.append(_invalid(at, name, "must be a standard resource type or fully qualified",
                                "use cpu, memory, ephemeral-storage or a vendor/resource name such as nvidia.com/gpu"))
        if name not in _CONTAINER_RESOURCES and not _hugepages(name):
            out.append(_invalid(at, name, "must be a standard resource for containers",
                                "use cpu, memory, ephemeral-storage or hugepages-<size>"))
    elif not _native(name) and not _extended(name):
        out.append(_invalid(at, name, "doesn't follow extended resource name standard",
                            "use a vendor domain and a name: example.com/device"))
    return out


def _resources(resources: Any, at: Path) -> list[Finding]:
    """validateResourceRequirements: names, quantities (non-negative; extended resources whole), requests <=
    limits, and requests == limits (limits required) for what cannot be overcommitted."""
    res = as_map(resources)
    out: list[Finding] = []
    parsed: dict[str, dict[str, Fraction]] = {"limits": {}, "requests": {}}
    cpu_or_memory = hugepages = False
    for part in ("limits", "requests"):
        for name, value in as_map(res.get(part)).items():
            name = str(name)
            where = at + (part, name)
            out += _resource_name(name, where)
            amount = quantity.parse(value)
            if amount is None:
                out.append(_invalid(where, value, quantity.MESSAGE, "write a quantity such as 500m, 2 or 16Gi "
                                                                    "(kilo is a lowercase k)"))
                continue
            parsed[part][name] = amount
            if amount < 0:
                out.append(_invalid(where, str(value), "must be greater than or equal to 0", "use a non-negative "
                                                                                              "amount"))
            elif _extended(name) and amount.denominator != 1:
                out.append(_invalid(where, _Raw(value), "must be an integer", f"request whole {name} devices"))
            cpu_or_memory |= name in ("cpu", "memory")
            hugepages |= _hugepages(name)
            if part != "requests":
                continue
            overcommit = _native(name) and not _hugepages(name)
            limit = parsed["limits"].get(name)
            written = as_map(res.get("limits")).get(name)
            if limit is not None:
                if amount != limit and not overcommit:
                    out.append(_invalid(at + ("requests",), str(value), f"must be equal to {name} limit of {written}",
                                        f"set the {name} request equal to its limit (or drop the request)"))
                elif amount > limit:
                    out.append(_invalid(at + ("requests",), str(value), f"must be less than or equal to {name} "
                                        f"limit of {written}", f"lower the {name} request or raise its limit"))
            elif not overcommit and name not in as_map(res.get("limits")):
                out.append(_required(at + ("limits",), f"set limits.{name} equal to the request (or set only the "
                                     "limit: the request defaults to it)",
                                     "Limit must be set for non overcommitable resources"))
    if hugepages and not cpu_or_memory:
        out.append(_forbidden(at, "HugePages require cpu or memory", "request cpu or memory too"))
    return out


def _container(container: Mapping, volumes: Mapping[str, Mapping], at: Path) -> list[Finding]:
    """validateContainerCommon."""
    out: list[Finding] = []
    name = as_str(container.get("name"))
    if not name:
        out.append(_required(at + ("name",), "name the container"))
    else:
        out += _each(at + ("name",), name, dns1123_label(name), _NAME_FIX[LABEL])
    if not as_str(container.get("image")):
        out.append(_required(at + ("image",), "set the container image, e.g. python:3.11"))
    policy = container.get("terminationMessagePolicy")
    if isinstance(policy, str) and policy not in ("File", "FallbackToLogsOnError"):
        out.append(_not_supported(at + ("terminationMessagePolicy",), policy, ("File", "FallbackToLogsOnError"),
                                  "use File or FallbackToLogsOnError"))
    out += _ports(container.get("ports"), at + ("ports",))
    out += _env(container.get("env"), at + ("env",))
    out += _env_from(container.get("envFrom"), at + ("envFrom",))
    out += _mounts(container, volumes, at + ("volumeMounts",))
    pull = container.get("imagePullPolicy")
    if isinstance(pull, str) and pull not in ("Always", "IfNotPresent", "Never"):
        out.append(_not_supported(at + ("imagePullPolicy",), pull, ("Always", "IfNotPresent", "Never"),
                                  "use Always, IfNotPresent or Never"))
    out += _resources(container.get("resources"), at + ("resources",))
    return out


_HOOKS = ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe")


def _containers(spec: Mapping, volumes: Mapping[str, Mapping], at: Path) -> list[Finding]:
    """validateContainers and validateInitContainers: names unique across both lists."""
    out: list[Finding] = []
    containers = list(entries(spec.get("containers")))
    if not containers:
        out.append(_required(at + ("containers",), "list at least one container"))
    names: set[str] = set()
    for i, c in containers:
        where = at + ("containers", i)
        out += _container(c, volumes, where)
        if as_str(c.get("name")) in names:
            out.append(_duplicate(where + ("name",), as_str(c.get("name")), "give each container its own name"))
        names.add(as_str(c.get("name")))
        if "restartPolicy" in c:
            out.append(_forbidden(where + ("restartPolicy",), "may not be set for non-init containers",
                                  "drop it, or move the container to initContainers as a sidecar"))
    out += _host_ports(containers, at + ("containers",), set())
    for i, c in entries(spec.get("initContainers")):
        where = at + ("initContainers", i)
        out += _container(c, volumes, where)
        policy = c.get("restartPolicy")
        if isinstance(policy, str) and policy != "Always":
            out.append(_not_supported(where + ("restartPolicy",), policy, ("Always",),
                                      "use Always (a sidecar) or drop it"))
        name = as_str(c.get("name"))
        if name in names:
            out.append(_duplicate(where + ("name",), name, "give each container, init or not, its own name"))
        elif name:
            names.add(name)
        out += _host_ports([(i, c)], at + ("initContainers",), set())
        if policy != "Always":
            out += [_forbidden(where + (hook,), "may not be set for init containers without restartPolicy=Always",
                               "drop it, or make the init container a sidecar (restartPolicy: Always)")
                    for hook in _HOOKS if c.get(hook) is not None]
    return out


def _tolerations(tolerations: Any, at: Path) -> list[Finding]:
    """ValidateTolerations."""
    out: list[Finding] = []
    for i, t in entries(tolerations):
        where = at + (i,)
        key, op, effect = as_str(t.get("key")), as_str(t.get("operator")), as_str(t.get("effect"))
        if key:
            out += _each(where + ("key",), key, qualified_name(key), "use the taint's key")
        if not key and op != "Exists":
            out.append(_invalid(where + ("operator",), op, "operator must be Exists when `key` is empty, which means "
                                '"match all values and all keys"', "set the key, or use operator: Exists"))
        if t.get("tolerationSeconds") is not None and effect != "NoExecute":
            out.append(_invalid(where + ("effect",), effect, "effect must be 'NoExecute' when `tolerationSeconds` is "
                                "set", "use effect: NoExecute or drop tolerationSeconds"))
        value = as_str(t.get("value"))
        if op in ("Equal", ""):
            if errs := label_value(value):
                out.append(_invalid(where + ("operator",), value, ";".join(errs), "use the taint's value"))
        elif op == "Exists":
            if value:
                out.append(_invalid(where + ("operator",), value, "value must be empty when `operator` is 'Exists'",
                                    "drop the value"))
        else:
            out.append(_not_supported(where + ("operator",), op, ("Equal", "Exists"), "use Equal or Exists"))
        if effect and effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            out.append(_not_supported(where + ("effect",), effect, ("NoSchedule", "PreferNoSchedule", "NoExecute"),
                                      "use NoSchedule, PreferNoSchedule or NoExecute"))
    return out


_RESTART = ("Always", "OnFailure", "Never")
_DNS = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")


def pod_spec(spec: Mapping, at: Path) -> list[Finding]:
    """ValidatePodSpec: volumes, containers, restartPolicy (default Always), dnsPolicy (default ClusterFirst),
    nodeSelector, names it refers to, activeDeadlineSeconds, hostname/subdomain, tolerations; a negative
    terminationGracePeriodSeconds is a warning (the API server treats it as 1)."""
    spec = as_map(spec)
    volumes, out = _volumes(spec.get("volumes"), at + ("volumes",))
    out += _containers(spec, volumes, at)
    restart = spec.get("restartPolicy", "Always")
    if isinstance(restart, str) and restart not in _RESTART:
        out.append(_required(at + ("restartPolicy",), "use Always, OnFailure or Never") if not restart else
                   _not_supported(at + ("restartPolicy",), restart, _RESTART, "use Always, OnFailure or Never"))
    dns = spec.get("dnsPolicy", "ClusterFirst")
    if isinstance(dns, str) and dns not in _DNS:
        out.append(_required(at + ("dnsPolicy",), "use ClusterFirst") if not dns else
                   _not_supported(at + ("dnsPolicy",), dns, _DNS, "use ClusterFirst (the default)"))
    out += _labels(spec.get("nodeSelector"), at + ("nodeSelector",))
    if dns == "None":
        config = spec.get("dnsConfig")
        if not isinstance(config, Mapping):
            out.append(_required(at + ("dnsConfig",), "give dnsConfig.nameservers, or use dnsPolicy: ClusterFirst",
                                 "must provide `dnsConfig` when `dnsPolicy` is None"))
        elif not as_list(config.get("nameservers")):
            out.append(_required(at + ("dnsConfig", "nameservers"), "list at least one nameserver",
                                 "must provide at least one DNS nameserver when `dnsPolicy` is None"))
    for key, rule in (("serviceAccountName", SUBDOMAIN), ("nodeName", SUBDOMAIN)):
        value = as_str(spec.get(key))
        if value:
            out += _each(at + (key,), value, _name_errors(rule, value), _NAME_FIX[rule])
    deadline = as_int(spec.get("activeDeadlineSeconds"))
    if deadline is not None and not 1 <= deadline <= 2**31 - 1:
        out.append(_invalid(at + ("activeDeadlineSeconds",), deadline, "must be between 1 and 2147483647, inclusive",
                            "use a positive number of seconds"))
    for key in ("hostname", "subdomain"):
        value = as_str(spec.get(key))
        if value:
            out += _each(at + (key,), value, dns1123_label(value), _NAME_FIX[LABEL])
    out += _tolerations(spec.get("tolerations"), at + ("tolerations",))
    priority = as_str(spec.get("priorityClassName"))
    if priority:
        out += _each(at + ("priorityClassName",), priority, dns1123_subdomain(priority), _NAME_FIX[SUBDOMAIN])
    grace = as_int(spec.get("terminationGracePeriodSeconds"))
    if grace is not None and grace < 0:
        out.append(Finding(at + ("terminationGracePeriodSeconds",), grace, "must be >= 0; negative values are "
                           "invalid and will be treated as 1", "use 0 or more seconds", warning=True))
    return out


def pod_template(template: Mapping, at: Path) -> list[Finding]:
    """ValidatePodTemplateSpec: the template's labels and annotations (upstream names them `<at>.labels`), its pod
    spec, and no ephemeral containers."""
    template = as_map(template)
    meta = as_map(template.get("metadata"))
    out = _labels(meta.get("labels"), at + ("labels",))
    out += _annotations(meta.get("annotations"), at + ("annotations",))
    spec = as_map(template.get("spec"))
    out += pod_spec(spec, at + ("spec",))
    if as_list(spec.get("ephemeralContainers")):
        out.append(_forbidden(at + ("spec", "ephemeralContainers"), "ephemeral containers not allowed in pod template",
                              "drop ephemeralContainers: they are added to running pods only"))
    return _distinct(out)


def _pod(obj: Mapping) -> list[Finding]:
    """ValidatePodCreate: the spec, images without surrounding blanks, and the name warning of WarningsOnCreate."""
    spec = as_map(obj.get("spec"))
    out = pod_spec(spec, ("spec",))
    for part in ("containers", "initContainers"):
        for i, c in entries(spec.get(part)):
            image = as_str(c.get("image"))
            if image != image.strip():
                out.append(_invalid(("spec", part, i, "image"), image, "must not have leading or trailing whitespace",
                                    "trim the image reference"))
    name = as_str(as_map(obj.get("metadata")).get("name"))
    if name and (errs := dns1123_label(name)) and not dns1123_subdomain(name):
        out.append(Finding(("metadata", "name"), name, "this is used in the Pod's hostname, which can result in "
                           f"surprising behavior; a DNS label is recommended: [{' '.join(errs)}]",
                           "use a DNS label: no dots, at most 63 characters", warning=True))
    return out


# --- batch/v1 Job --------------------------------------------------------------------------------------------

MAX_INDEXED_PARALLELISM = 100_000
MAX_FAILED_INDEXES = 100_000
COMPLETIONS_SOFT_LIMIT = 100_000
HIGH_COMPLETIONS_LIMIT = 10_000
_JOB_NAME_LABELS = ("job-name", "batch.kubernetes.io/job-name")
_JOB_UID_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")
_UID = "<uid>"   # the Job's uid, unknown before it is stored


def _job_selector(obj: Mapping, spec: Mapping, labels: Mapping[str, str]) -> tuple[list[Finding], list[Finding]]:
    """validateGeneratedSelector (unless manualSelector), then ValidateJobSpec's selector rules; the registry
    generates the selector and the template's job-name/controller-uid labels before validation."""
    first: list[Finding] = []
    name = as_str(as_map(obj.get("metadata")).get("name"))
    selector = given = spec.get("selector")   # `given` is validated; the generated one is matched
    manual = spec.get("manualSelector") is True
    if not manual:
        generated = {**{k: name for k in _JOB_NAME_LABELS}, **{k: _UID for k in _JOB_UID_LABELS}}
        for key, expected in generated.items():
            # the registry keeps a label the user set, and validation compares it (a uid nobody can know yet)
            if key in labels and (labels[key] != expected or expected == _UID):
                first.append(_invalid(("spec", "template", "metadata", "labels", key), labels,
                                      f"must be '{expected}'", f"drop the {key} label: the API server sets it"))
        labels = {**generated, **labels}
        if isinstance(selector, Mapping) and selector and not _matches(selector, generated):
            first.append(_invalid(("spec", "selector"), selector, "`selector` not auto-generated",
                                  "drop spec.selector (the API server generates it), or set manualSelector: true"))
        selector = {"matchLabels": {_JOB_UID_LABELS[1]: _UID, **_strings(as_map(selector).get("matchLabels"))},
                    "matchExpressions": as_map(selector).get("matchExpressions") or []}
    last: list[Finding] = []
    if not isinstance(selector, Mapping):
        last.append(_required(("spec", "selector"), "give spec.selector with manualSelector: true, or drop "
                                                    "manualSelector"))
        return first, last
    last += _selector(given if isinstance(given, Mapping) else {}, ("spec", "selector"))
    if not _matches(selector, labels):
        last.append(_invalid(("spec", "template", "metadata", "labels"), dict(labels),
                             "`selector` does not match template `labels`",
                             "add the selector's labels to spec.template.metadata.labels"))
    return first, last


def _pod_failure_policy(spec: Mapping, at: Path) -> list[Finding]:
    """validatePodFailurePolicy and its rules."""
    rules = list(entries(as_map(spec.get("podFailurePolicy")).get("rules")))
    tmpl = as_map(as_map(spec.get("template")).get("spec"))
    containers = {as_str(c.get("name")) for part in ("containers", "initContainers") for _, c in entries(tmpl.get(part))}
    out: list[Finding] = []
    if len(rules) > 20:
        out.append(_too_many(at + ("rules",), len(rules), 20, "merge rules: at most 20"))
    actions = ("Count", "FailIndex", "FailJob", "Ignore")
    for i, rule in rules:
        where = at + ("rules", i)
        action = as_str(rule.get("action"))
        if not action:
            out.append(_required(where + ("action",), "set the action", f"valid values: {_go_list(actions)}"))
        elif action == "FailIndex":
            if spec.get("backoffLimitPerIndex") is None:
                out.append(_invalid(where + ("action",), action, "requires the backoffLimitPerIndex to be set",
                                    "set spec.backoffLimitPerIndex (Indexed Jobs)"))
        elif action not in actions:
            out.append(_not_supported(where + ("action",), action, actions, "use Count, FailIndex, FailJob or Ignore"))
        codes = rule.get("onExitCodes")
        if isinstance(codes, Mapping):
            out += _on_exit_codes(codes, where + ("onExitCodes",), containers)
        conditions = list(entries(rule.get("onPodConditions")))
        if len(conditions) > 20:
            out.append(_too_many(where + ("onPodConditions",), len(conditions), 20, "at most 20 patterns"))
        for j, pattern in conditions:
            ptype, status = as_str(pattern.get("type")), as_str(pattern.get("status"))
            out += _each(where + ("onPodConditions", j, "type"), ptype, qualified_name(ptype), "use a condition type")
            statuses = ("False", "True", "Unknown")
            if not status:
                out.append(_required(where + ("onPodConditions", j, "status"), "set status: \"True\"",
                                     f"valid values: {_go_list(statuses)}"))
            elif status not in statuses:
                out.append(_not_supported(where + ("onPodConditions", j, "status"), status, statuses,
                                          'use "True", "False" or "Unknown"'))
        if isinstance(codes, Mapping) and conditions:
            out.append(_omitted(where, "specifying both OnExitCodes and OnPodConditions is not supported",
                                "split it into two rules"))
        if not isinstance(codes, Mapping) and not conditions:
            out.append(_omitted(where, "specifying one of OnExitCodes and OnPodConditions is required",
                                "add onExitCodes or onPodConditions"))
    return out


def _on_exit_codes(codes: Mapping, at: Path, containers: set[str]) -> list[Finding]:
    out: list[Finding] = []
    op = as_str(codes.get("operator"))
    if not op:
        out.append(_required(at + ("operator",), "set operator: In", f"valid values: {_go_list(('In', 'NotIn'))}"))
    elif op not in ("In", "NotIn"):
        out.append(_not_supported(at + ("operator",), op, ("In", "NotIn"), "use In or NotIn"))
    container = codes.get("containerName")
    if isinstance(container, str) and container not in containers:
        out.append(_invalid(at + ("containerName",), container, "must be one of the container or initContainer names "
                            "in the pod template", "name a container of the template"))
    values = [v for v in as_list(codes.get("values")) if as_int(v) is not None]
    if not values:
        out.append(_invalid(at + ("values",), values, "at least one value is required", "list the exit codes"))
    elif len(values) > 255:
        out.append(_too_many(at + ("values",), len(values), 255, "list at most 255 exit codes"))
    for j, v in enumerate(values):
        if op == "In" and v == 0:
            out.append(_invalid(at + ("values", j), v, "must not be 0 for the In operator", "drop 0: it is success"))
        if v in values[:j]:
            out.append(_duplicate(at + ("values", j), v, "list each exit code once"))
    if values != sorted(values):
        out.append(_invalid(at + ("values",), values, "must be ordered", "sort the exit codes"))
    return out


def _success_policy(spec: Mapping, at: Path, indexed: bool, completions: int | None) -> list[Finding]:
    policy = spec.get("successPolicy")
    if not isinstance(policy, Mapping):
        return []
    if not indexed:
        return [_invalid(at, _Raw("{...}"), "requires indexed completion mode", "set completionMode: Indexed")]
    rules = list(entries(policy.get("rules")))
    out: list[Finding] = []
    if not rules:
        out.append(_required(at + ("rules",), "add a rule", "at least one rules must be specified when the "
                                                           "successPolicy is specified"))
    if len(rules) > 20:
        out.append(_too_many(at + ("rules",), len(rules), 20, "at most 20 rules"))
    for i, rule in rules:
        count = as_int(rule.get("succeededCount"))
        if count is None and rule.get("succeededIndexes") is None:
            out.append(_required(at + ("rules", i), "set succeededCount or succeededIndexes",
                                 "at least one of succeededCount or succeededIndexes must be specified"))
        if count is not None:
            out += _nonnegative(at + ("rules", i, "succeededCount"), count, "use 0 or more")
            if completions is not None and count > completions:
                out.append(_invalid(at + ("rules", i, "succeededCount"), count, f"must be less than or equal to "
                                    f"{completions} (the number of specified completions)", "lower it"))
    return out


def _job_spec(spec: Mapping) -> list[Finding]:
    """validateJobSpec: counts, Indexed limits, per-index backoff, policies, the template and its restartPolicy."""
    at: Path = ("spec",)
    out: list[Finding] = []
    fixes = {"parallelism": "use 0 or more pods", "completions": "use 0 or more completions",
             "activeDeadlineSeconds": "use 0 or more seconds", "backoffLimit": "use 0 or more retries",
             "ttlSecondsAfterFinished": "use 0 or more seconds", "backoffLimitPerIndex": "use 0 or more retries",
             "maxFailedIndexes": "use 0 or more indexes"}
    for key, fix in fixes.items():
        out += _nonnegative(at + (key,), spec.get(key), fix)
    parallelism, completions = as_int(spec.get("parallelism")), as_int(spec.get("completions"))
    per_index, max_failed = spec.get("backoffLimitPerIndex"), as_int(spec.get("maxFailedIndexes"))
    if max_failed is not None and per_index is None:
        out.append(_required(at + ("backoffLimitPerIndex",), "set backoffLimitPerIndex too",
                             "when maxFailedIndexes is specified"))
    managed = spec.get("managedBy")
    if isinstance(managed, str):
        out += _domain_prefixed_path(at + ("managedBy",), managed)
        if _size(managed) > 63:
            out.append(Finding(at + ("managedBy",), managed, "Too long: may not be longer than 63",
                               "use a shorter controller name"))
    mode = spec.get("completionMode")
    indexed = mode == "Indexed"
    if isinstance(mode, str) and mode not in ("NonIndexed", "Indexed"):
        out.append(_not_supported(at + ("completionMode",), mode, ("NonIndexed", "Indexed"),
                                  "use NonIndexed or Indexed"))
    if indexed:
        if spec.get("completions") is None:
            out.append(_required(at + ("completions",), "set completions: the number of indexes",
                                 "when completion mode is Indexed"))
        if parallelism is not None and parallelism > MAX_INDEXED_PARALLELISM:
            out.append(_invalid(at + ("parallelism",), parallelism, f"must be less than or equal to "
                                f"{MAX_INDEXED_PARALLELISM} when completion mode is Indexed",
                                "run at most 100000 pods at a time"))
        if completions is not None and max_failed is not None and max_failed > completions:
            out.append(_invalid(at + ("maxFailedIndexes",), max_failed, "must be less than or equal to completions",
                                "lower maxFailedIndexes"))
        if max_failed is not None and max_failed > MAX_FAILED_INDEXES:
            out.append(_invalid(at + ("maxFailedIndexes",), max_failed, f"must be less than or equal to "
                                f"{MAX_FAILED_INDEXES}", "lower maxFailedIndexes"))
        if completions is not None and completions > COMPLETIONS_SOFT_LIMIT and per_index is not None:
            above = (f"must be less than or equal to {HIGH_COMPLETIONS_LIMIT} when completions are above "
                     f"{COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index")
            if max_failed is None:
                out.append(_required(at + ("maxFailedIndexes",), "set maxFailedIndexes (at most 10000)",
                                     f"must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}"))
            if parallelism is not None and parallelism > HIGH_COMPLETIONS_LIMIT:
                out.append(_invalid(at + ("parallelism",), parallelism, above, "run at most 10000 pods at a time"))
            if max_failed is not None and max_failed > HIGH_COMPLETIONS_LIMIT:
                out.append(_invalid(at + ("maxFailedIndexes",), max_failed, above, "lower maxFailedIndexes"))
    elif mode in (None, "NonIndexed"):
        for key, value in (("backoffLimitPerIndex", as_int(per_index)), ("maxFailedIndexes", max_failed)):
            if value is not None:
                out.append(_invalid(at + (key,), value, "requires indexed completion mode",
                                    "set completionMode: Indexed, or drop it"))
    if isinstance(spec.get("podFailurePolicy"), Mapping):
        out += _pod_failure_policy(spec, at + ("podFailurePolicy",))
    out += _success_policy(spec, at + ("successPolicy",), indexed, completions)
    replacement = spec.get("podReplacementPolicy")
    if isinstance(replacement, str):
        with_policy = isinstance(spec.get("podFailurePolicy"), Mapping)
        allowed = ("Failed",) if with_policy else ("Failed", "TerminatingOrFailed")
        if replacement not in allowed:
            out.append(_not_supported(at + ("podReplacementPolicy",), replacement, allowed, "use Failed"))
    template = as_map(spec.get("template"))
    out += pod_template(template, at + ("template",))
    restart = as_map(template.get("spec")).get("restartPolicy", "Always")
    where = at + ("template", "spec", "restartPolicy")
    if restart in ("Always", ""):
        out.append(_required(where, "set spec.template.spec.restartPolicy: Never (or OnFailure); a pod's default, "
                             "Always, never lets a Job finish", 'valid values: "OnFailure", "Never"', restart))
    elif isinstance(restart, str) and restart not in ("OnFailure", "Never"):
        out.append(_not_supported(where, restart, ("OnFailure", "Never"), "use Never or OnFailure"))
    elif isinstance(spec.get("podFailurePolicy"), Mapping) and restart != "Never":
        out.append(_invalid(where, restart, 'only "Never" is supported when podFailurePolicy is specified',
                            "use restartPolicy: Never with a podFailurePolicy"))
    return out


def _domain_prefixed_path(at: Path, value: str) -> list[Finding]:
    """IsDomainPrefixedPath (spec.managedBy)."""
    if not value:
        return [_required(at, "name the controller: example.com/name")]
    host, sep, path = value.partition("/")
    if not sep or not host or not path:
        return [_invalid(at, value, 'must be a domain-prefixed path (such as "acme.io/foo")',
                         "name the controller as domain/name")]
    out = _each(at, host, dns1123_subdomain(host), "use a DNS domain before the '/'")
    if not re.fullmatch(_HTTP_PATH_FMT, path):
        out.append(_invalid(at, path, _regex_error("Invalid path", _HTTP_PATH_FMT), "use URL path characters"))
    return out


def _job(obj: Mapping) -> list[Finding]:
    """ValidateJob (after the registry generated the selector): selector, spec, and the longest pod hostname of
    an Indexed Job."""
    spec = as_map(obj.get("spec"))
    template = as_map(spec.get("template"))
    labels = _strings(as_map(template.get("metadata")).get("labels"))
    first, last = _job_selector(obj, spec, labels)
    name = as_str(as_map(obj.get("metadata")).get("name"))
    if spec.get("manualSelector") is not True:   # the template is validated with the job-name labels added
        generated = {**labels, **{k: name for k in _JOB_NAME_LABELS if k not in labels}}
        meta = {**as_map(template.get("metadata")), "labels": generated}
        spec = {**spec, "template": {**template, "metadata": meta}}
    out = first + _job_spec(spec) + last
    completions = as_int(spec.get("completions"))
    if spec.get("completionMode") == "Indexed" and completions and completions > 0 and name:
        hostname = f"{name}-{completions - 1}"
        if dns1123_label(hostname):
            out.append(_invalid(("metadata", "name"), name, f"will not able to create pod with invalid DNS label: "
                                f"{hostname}", "shorten the Job name: its pods' hostnames add -<index>"))
    return out


# --- Service, ConfigMap, Secret, Namespace ------------------------------------------------------------------

MAX_SECRET_BYTES = 1024 * 1024
_SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")


def _service(obj: Mapping) -> list[Finding]:
    """ValidateService: ports (required unless headless or ExternalName; names, numbers, protocols, uniqueness),
    the selector, the type and externalName."""
    spec = as_map(obj.get("spec"))
    at: Path = ("spec",)
    out: list[Finding] = []
    kind = spec.get("type", "ClusterIP")
    ips = [ip for ip in as_list(spec.get("clusterIPs")) if isinstance(ip, str)]
    headless = spec.get("clusterIP") == "None" or (ips[:1] == ["None"])
    ports = list(entries(spec.get("ports")))
    if not ports and not headless and kind != "ExternalName":
        out.append(_required(at + ("ports",), "list the ports the Service exposes"))
    if kind == "ExternalName":
        cname = as_str(spec.get("externalName")).removesuffix(".")
        if cname:
            out += _each(at + ("externalName",), cname, dns1123_subdomain(cname), "use a DNS name")
        else:
            out.append(_required(at + ("externalName",), "set the DNS name the Service aliases"))
    names: set[str] = set()
    for i, port in ports:
        where = at + ("ports", i)
        name = as_str(port.get("name"))
        if len(ports) > 1 and not name:
            out.append(_required(where + ("name",), "name every port of a multi-port Service"))
        elif name:
            out += _each(where + ("name",), name, dns1123_label(name), _NAME_FIX[LABEL])
            if name in names:
                out.append(_duplicate(where + ("name",), name, "give each port its own name"))
            names.add(name)
        number = as_int(port.get("port")) or 0
        if not 1 <= number <= 65535:
            out.append(_invalid(where + ("port",), number, _PORT_RANGE, "use a port from 1 to 65535"))
        protocol = port.get("protocol", "TCP")
        if isinstance(protocol, str) and protocol not in _PROTOCOLS:
            out.append(_not_supported(where + ("protocol",), protocol, _PROTOCOLS, "use TCP, UDP or SCTP"))
        target = port.get("targetPort")
        if isinstance(target, str):
            out += _each(where + ("targetPort",), target, _port_name(target), "name a container port, or give a "
                                                                              "number")
        elif as_int(target) and not 1 <= target <= 65535:   # 0 is defaulted to the port
            out.append(_invalid(where + ("targetPort",), target, _PORT_RANGE, "use a port from 1 to 65535"))
    if isinstance(spec.get("selector"), Mapping):
        out += _labels(spec["selector"], at + ("selector",))
    if isinstance(kind, str) and kind not in _SERVICE_TYPES:
        out.append(_not_supported(at + ("type",), kind, _SERVICE_TYPES, "use ClusterIP (the default)"))
    if kind == "ClusterIP":
        out += [_forbidden(at + ("ports", i, "nodePort"), "may not be used when `type` is 'ClusterIP'",
                           "drop nodePort, or use type: NodePort") for i, p in ports if as_int(p.get("nodePort"))]
    seen: set[tuple[str, int]] = set()
    for i, port in ports:
        key = (as_str(port.get("protocol")) or "TCP", as_int(port.get("port")) or 0)
        if key in seen:
            out.append(_duplicate(at + ("ports", i), _Raw(f"{{{key[1]} {key[0]}}}"), "expose each port once per "
                                                                                     "protocol"))
        seen.add(key)
    return out


def _decoded_size(value: Any) -> int:
    if not isinstance(value, str):
        return 0
    try:
        return len(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        return len(value)


def _config_map(obj: Mapping) -> list[Finding]:
    """ValidateConfigMap: keys of data and binaryData, no key in both, 1 MiB in all."""
    data, binary = as_map(obj.get("data")), as_map(obj.get("binaryData"))
    out: list[Finding] = []
    fix = "use letters, digits, '-', '_' and '.' (not '.', '..' or a leading '..'); items[].path names the file"
    for key in data:
        out += _each(("data", str(key)), str(key), config_map_key(str(key)), fix)
        if key in binary:
            out.append(_invalid(("data", str(key)), str(key), "duplicate of key present in binaryData",
                                "keep the key in one of data and binaryData"))
    for key in binary:
        out += _each(("binaryData", str(key)), str(key), config_map_key(str(key)), fix)
    total = sum(_size(v) for v in data.values() if isinstance(v, str)) + sum(map(_decoded_size, binary.values()))
    if total > MAX_SECRET_BYTES:
        out.append(_too_long((), MAX_SECRET_BYTES, "keep a ConfigMap under 1 MiB: mount large files from a volume"))
    return out


_SECRET_KEYS = {   # type -> the keys it requires (ValidateSecret)
    "kubernetes.io/dockercfg": (".dockercfg",), "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",), "kubernetes.io/tls": ("tls.crt", "tls.key"),
}


def _secret(obj: Mapping) -> list[Finding]:
    """ValidateSecret: keys (stringData is merged into data first), 1 MiB, the keys each type requires."""
    data = {str(k): _decoded_size(v) for k, v in as_map(obj.get("data")).items()}
    data.update({str(k): _size(v) for k, v in as_map(obj.get("stringData")).items() if isinstance(v, str)})
    out: list[Finding] = []
    for key in data:
        out += _each(("data", key), key, config_map_key(key), "use letters, digits, '-', '_' and '.' (not '.', '..' "
                                                              "or a leading '..')")
    if sum(data.values()) > MAX_SECRET_BYTES:
        out.append(_too_long(("data",), MAX_SECRET_BYTES, "keep a Secret under 1 MiB"))
    kind = obj.get("type")
    if kind == "kubernetes.io/service-account-token":
        if not as_str(_strings(as_map(obj.get("metadata")).get("annotations")).get("kubernetes.io/service-account.name")):
            out.append(_required(("metadata", "annotations", "kubernetes.io/service-account.name"),
                                 "name the ServiceAccount in the annotation kubernetes.io/service-account.name"))
    elif kind == "kubernetes.io/basic-auth":
        if "username" not in data and "password" not in data:
            out += [_required(("data", k), "set username or password") for k in ("username", "password")]
    elif kind == "kubernetes.io/ssh-auth":
        if not data.get("ssh-privatekey"):
            out.append(_required(("data", "ssh-privatekey"), "set the private key"))
    elif isinstance(kind, str) and kind in _SECRET_KEYS:
        out += [_required(("data", k), f"set data[{k}]") for k in _SECRET_KEYS[kind] if k not in data]
    return out


def _namespace(obj: Mapping) -> list[Finding]:
    """ValidateNamespace's spec: its finalizers are standard or qualified names."""
    finalizers = as_list(as_map(obj.get("spec")).get("finalizers"))
    return [f for i, name in enumerate(finalizers) if isinstance(name, str)
            for f in _kube_finalizer(name, ("spec", "finalizers", i))]


# --- the entry point ----------------------------------------------------------------------------------------

_BUILTIN = {   # (apiVersion, kind) -> (the name rule, the kind's own rules)
    ("batch/v1", "Job"): (SUBDOMAIN, _job), ("v1", "Pod"): (SUBDOMAIN, _pod),
    ("v1", "Service"): (DNS1035, _service), ("v1", "ConfigMap"): (SUBDOMAIN, _config_map),
    ("v1", "Secret"): (SUBDOMAIN, _secret), ("v1", "Namespace"): (LABEL, _namespace),
    ("v1", "ServiceAccount"): (SUBDOMAIN, None),
}


def validate(obj: Mapping) -> list[Finding]:
    """Every finding of the validation step for one object: ObjectMeta for every kind (a kind without its own
    rules here, a custom one included, has DNS-1123 subdomain names), then the kind's own rules."""
    if not isinstance(obj, Mapping):
        return []
    api_version, kind = as_str(obj.get("apiVersion")), as_str(obj.get("kind"))
    rule, rules = _BUILTIN.get((api_version, kind), (SUBDOMAIN, None))
    group = api_version.rpartition("/")[0]
    builtin = "." not in group or (group.endswith(".k8s.io") and not group.endswith(".x-k8s.io"))
    out = object_meta(as_map(obj.get("metadata")), rule, namespaced=kind not in CLUSTER_SCOPED, kube=builtin)
    return _distinct(out + (rules(obj) if rules else []))


def _distinct(findings: list[Finding]) -> list[Finding]:
    """ErrorList.ToAggregate: one of each (path, message) the API server would print twice."""
    seen: set[tuple[Path, str, bool]] = set()
    out = []
    for f in findings:
        if (f.at, f.message, f.warning) not in seen:
            seen.add((f.at, f.message, f.warning))
            out.append(f)
    return out
