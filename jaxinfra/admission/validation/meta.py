"""ObjectMeta and label selectors, as the API server's validation step checks them on create.

Emulated from the upstream source (kubernetes/kubernetes; the commit is the stored version read):
staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go @008b3652959c (ValidateObjectMetaAccessor:
generateName, name, namespace, generation, labels, annotations (keys, 256 KiB in all), ownerReferences, finalizers),
generic.go @1a76ea441251 (NameIsDNSSubdomain / NameIsDNSLabel / NameIsDNS1035Label and maskTrailingDash for
generateName), apis/meta/v1/validation/validation.go @046d201c45ce (ValidateLabels, ValidateLabelSelector);
pkg/apis/core/validation/validation.go @000f26050b9b (validateKubeFinalizerName; the name function of each kind).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jaxinfra.admission import naming
from jaxinfra.admission.decoded import as_list, as_map, as_str, entries
from jaxinfra.admission.store import Finding, Path
from jaxinfra.admission.validation.messages import (
    forbidden,
    invalid_each,
    invalid_value,
    nonnegative,
    required_value,
    string_map,
    too_long,
)
from jaxinfra.admission.validation.names import (
    DNS1035,
    LABEL,
    SUBDOMAIN,
    byte_size,
    dns1035_label,
    dns1123_label,
    dns1123_subdomain,
    label_value,
    qualified_name,
)

_NAME_RULES = {SUBDOMAIN: dns1123_subdomain, LABEL: dns1123_label, DNS1035: dns1035_label}
NAME_FIX = {
    SUBDOMAIN: "use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253",
    LABEL: "use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit",
    DNS1035: "use at most 63 lowercase letters, digits and '-', starting with a letter, ending with a letter or digit",
}
_STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})
TOTAL_ANNOTATION_BYTES = 256 * 1024


def name_errors(rule: str, name: str, prefix: bool = False) -> list[str]:
    """A ValidateNameFunc; a generateName prefix may end in '-' (maskTrailingDash, which also drops the character
    before it)."""
    if prefix and name.endswith("-"):
        name = name[:-2] + "a"
    return _NAME_RULES.get(rule, dns1123_subdomain)(name)


def validate_labels(labels: Any, at: Path) -> list[Finding]:
    """ValidateLabels: every key a qualified name, every value a label value (the path is the map's)."""
    out: list[Finding] = []
    for k, v in string_map(labels).items():
        out += invalid_each(
            at,
            k,
            qualified_name(k),
            "label keys are an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.'",
        )
        out += invalid_each(
            at,
            v,
            label_value(v),
            "label values are at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit (or empty); put longer text in an annotation",
        )
    return out


def validate_annotations(annotations: Any, at: Path) -> list[Finding]:
    """ValidateAnnotations: keys are qualified names whatever their case; keys and values 256 KiB in all."""
    values = string_map(annotations)
    out: list[Finding] = []
    for k in values:
        out += invalid_each(
            at,
            k,
            qualified_name(k.lower()),
            "annotation keys are an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.'",
        )
    if sum(byte_size(k) + byte_size(v) for k, v in values.items()) > TOTAL_ANNOTATION_BYTES:
        out.append(
            too_long(
                at, TOTAL_ANNOTATION_BYTES, "keep annotations under 256 KiB in all: move large data into a ConfigMap"
            )
        )
    return out


def _owner_references(refs: Any, at: Path) -> list[Finding]:
    out: list[Finding] = []
    controller = ""
    for _, ref in entries(refs):
        api_version = as_str(ref.get("apiVersion"))
        if not api_version.rpartition("/")[2]:
            out.append(
                invalid_value(
                    at + ("apiVersion",), api_version, "version must not be empty", "set the owner's apiVersion"
                )
            )
        for key in ("kind", "name", "uid"):
            if not as_str(ref.get(key)):
                out.append(
                    invalid_value(at + (key,), as_str(ref.get(key)), "must not be empty", f"set the owner's {key}")
                )
        if ref.get("controller") is True:
            this = f"{as_str(ref.get('kind'))}/{as_str(ref.get('name'))}"
            if controller:
                out.append(
                    invalid_value(
                        at,
                        refs,
                        'Only one reference can have Controller set to true. Found "true" in '
                        f"references for {controller} and {this}",
                        "mark one owner as the controller",
                    )
                )
            else:
                controller = this
    return out


def _finalizers(finalizers: Any, at: Path, kube: bool) -> list[Finding]:
    """ValidateFinalizers (+ validateKubeFinalizerName for built-in kinds: standard or fully qualified)."""
    names = [f for f in as_list(finalizers) if isinstance(f, str)]
    out: list[Finding] = []
    for name in names:
        out += invalid_each(at, name, qualified_name(name), _FINALIZER_FIX)
    if "orphan" in names and "foregroundDeletion" in names:
        out.append(
            invalid_value(at, names, "finalizer orphan and foregroundDeletion cannot be both set", "keep one of them")
        )
    if kube:
        for i, name in enumerate(names):
            out += kube_finalizer(name, at + (i,))
    return out


_FINALIZER_FIX = "a finalizer is a qualified name such as example.com/cleanup"


def kube_finalizer(name: str, at: Path) -> list[Finding]:
    """validateKubeFinalizerName: a qualified name, and standard unless it has a domain prefix."""
    out = invalid_each(at, name, qualified_name(name), _FINALIZER_FIX)
    if "/" not in name and name not in _STANDARD_FINALIZERS:
        out.append(
            invalid_value(
                at,
                name,
                "name is neither a standard finalizer name nor is it fully qualified",
                "prefix it with your domain: example.com/" + name,
            )
        )
    return out


def object_meta(
    meta: Mapping, name_rule: str, *, namespaced: bool = True, kube: bool = True, at: Path = ("metadata",)
) -> list[Finding]:
    """ValidateObjectMeta on create: generateName and name by `name_rule` (SUBDOMAIN, LABEL or DNS1035), the
    namespace (a namespaced object's; a cluster-scoped one's is cleared before validation), generation, labels,
    annotations, ownerReferences and finalizers (`kube`: a built-in kind's, which must also be standard or
    qualified)."""
    meta = as_map(meta)
    out: list[Finding] = []
    fix = NAME_FIX.get(name_rule, NAME_FIX[SUBDOMAIN])
    generate = as_str(meta.get("generateName"))
    name = as_str(meta.get("name"))
    if generate:
        out += invalid_each(at + ("generateName",), generate, name_errors(name_rule, generate, prefix=True), fix)
        name = name or naming.generate(generate, generate)  # the registry names it before validation
    if not name:
        out.append(
            required_value(
                at + ("name",), "set metadata.name (or metadata.generateName)", "name or generateName is required"
            )
        )
    else:
        out += invalid_each(at + ("name",), name, name_errors(name_rule, name), fix)
    namespace = as_str(meta.get("namespace"))
    if namespaced and namespace:
        out += invalid_each(at + ("namespace",), namespace, dns1123_label(namespace), NAME_FIX[LABEL])
    out += nonnegative(at + ("generation",), meta.get("generation"), "drop metadata.generation: the API server sets it")
    out += validate_labels(meta.get("labels"), at + ("labels",))
    out += validate_annotations(meta.get("annotations"), at + ("annotations",))
    out += _owner_references(meta.get("ownerReferences"), at + ("ownerReferences",))
    out += _finalizers(meta.get("finalizers"), at + ("finalizers",), kube)
    return out


def validate_selector(selector: Any, at: Path) -> list[Finding]:
    """ValidateLabelSelector."""
    sel = as_map(selector)
    out = validate_labels(sel.get("matchLabels"), at + ("matchLabels",))
    for i, expr in entries(sel.get("matchExpressions")):
        where = at + ("matchExpressions", i)
        op, values = as_str(expr.get("operator")), as_list(expr.get("values"))
        if op in ("In", "NotIn") and not values:
            out.append(
                required_value(
                    where + ("values",),
                    "list the values to match",
                    "must be specified when `operator` is 'In' or 'NotIn'",
                )
            )
        elif op in ("Exists", "DoesNotExist") and values:
            out.append(
                forbidden(
                    where + ("values",),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    "drop the values",
                )
            )
        elif op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            out.append(
                invalid_value(
                    where + ("operator",), op, "not a valid selector operator", "use In, NotIn, Exists or DoesNotExist"
                )
            )
        key = as_str(expr.get("key"))
        out += invalid_each(where + ("key",), key, qualified_name(key), "use a valid label key")
        for j, value in enumerate(values):  # AllowInvalidLabelValueInSelector is off for new objects
            if isinstance(value, str):
                out += invalid_each(where + ("values", j), value, label_value(value), "use a valid label value")
    return out


def selector_matches(selector: Mapping, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector(...).Matches(labels)."""
    if any(labels.get(k) != v for k, v in string_map(selector.get("matchLabels")).items()):
        return False
    for _, expr in entries(selector.get("matchExpressions")):
        key, op = as_str(expr.get("key")), expr.get("operator")
        values = {v for v in as_list(expr.get("values")) if isinstance(v, str)}
        present = key in labels
        if (op == "In" and not (present and labels[key] in values)) or (
            op == "NotIn" and present and labels[key] in values
        ):
            return False
        if (op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return True
