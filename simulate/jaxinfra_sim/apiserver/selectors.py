"""Label and field selectors, parsed and matched as the API server does.

Two spellings of one idea: the string a client sends (`?labelSelector=app=x,tier in (a,b)`,
k8s.io/apimachinery/pkg/labels/selector.go `Parse`) and the structured `LabelSelector` that
objects carry (`matchLabels` + `matchExpressions`, e.g. a ClusterRole's `aggregationRule`). Both
become a tuple of `Requirement`s, matched one way. Field selectors
(k8s.io/apimachinery/pkg/fields/selector.go) are exact (`=`, `==`) or inequality (`!=`) terms
over the fields each resource makes selectable; `selectable_fields` says which, per resource,
from the API server's registries (cited there).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "Requirement",
    "SelectorError",
    "parse_labels",
    "label_selector",
    "matches",
    "parse_fields",
    "selectable_fields",
    "fields_match",
]


class SelectorError(ValueError):
    """A selector the API server would refuse with 400 BadRequest; the message is its message."""


@dataclass(frozen=True)
class Requirement:
    """One term of a label selector: `key op values` (operators named as in labels/selector.go)."""

    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        try:  # gt / lt: both sides integers, else no match (labels/selector.go Requirement.Matches)
            have, want = int(str(value)), int(self.values[0])
        except (TypeError, ValueError):
            return False
        return present and (have > want if self.op == "gt" else have < want)


_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_TERM = re.compile(
    rf"\s*(?:(?P<not>!)\s*(?P<absent>{_KEY})"
    rf"|(?P<key>{_KEY})\s*(?:(?P<op>==|=|!=)\s*(?P<value>{_VALUE})"
    rf"|\s+(?P<setop>in|notin)\s*\((?P<set>[^()]*)\)"
    rf"|\s*(?P<cmp>[<>])\s*(?P<num>-?\d+))?)\s*"
)


def _split_terms(text: str) -> list[str]:
    """Split on the commas outside parentheses (`a in (x,y),b` is two terms)."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def parse_labels(text: str) -> tuple[Requirement, ...]:
    """A `labelSelector` query value; "" selects everything."""
    if not text.strip():
        return ()
    found = []
    for term in _split_terms(text):
        m = _TERM.fullmatch(term)
        if m is None:
            raise SelectorError(
                f"unable to parse requirement: {term.strip()!r} is not a label selector term "
                "(key, !key, key=value, key!=value, key in (a,b), key notin (a,b))"
            )
        if m["absent"]:
            found.append(Requirement(m["absent"], "!"))
        elif m["op"]:
            found.append(Requirement(m["key"], "!=" if m["op"] == "!=" else "=", (m["value"],)))
        elif m["setop"]:
            values = tuple(sorted({v.strip() for v in m["set"].split(",")}))
            found.append(Requirement(m["key"], m["setop"], values))
        elif m["cmp"]:
            found.append(Requirement(m["key"], "gt" if m["cmp"] == ">" else "lt", (m["num"],)))
        else:
            found.append(Requirement(m["key"], "exists"))
    return tuple(found)


_EXPRESSION_OPS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def label_selector(selector: Mapping | None) -> tuple[Requirement, ...] | None:
    """A structured metav1.LabelSelector; None (selects nothing) when absent, as
    `metav1.LabelSelectorAsSelector(nil)` gives labels.Nothing(); `{}` selects everything."""
    if selector is None:
        return None
    found = [  # a null value is Go's "" (map[string]string)
        Requirement(str(k), "=", ("" if v is None else str(v),))
        for k, v in sorted((selector.get("matchLabels") or {}).items())
    ]
    for expr in selector.get("matchExpressions") or []:
        op = _EXPRESSION_OPS.get(expr.get("operator", ""))
        if op is None:
            return None  # an invalid selector selects nothing
        found.append(Requirement(str(expr.get("key", "")), op, tuple(sorted(map(str, expr.get("values") or [])))))
    return tuple(found)


def matches(requirements: tuple[Requirement, ...] | None, labels: Mapping[str, str] | None) -> bool:
    return requirements is not None and all(r.matches(labels or {}) for r in requirements)


def parse_fields(text: str) -> tuple[tuple[str, bool, str], ...]:
    """A `fieldSelector` query value as (field, equal?, value) terms; "" selects everything.
    Backslash escapes a `,`, `=` or `!` in a value (fields/selector.go)."""
    terms: list[tuple[str, bool, str]] = []
    for raw in re.split(r"(?<!\\),", text) if text.strip() else []:
        m = re.fullmatch(r"\s*([^=!\s]+)\s*(==|=|!=)(.*)", raw)
        if m is None:
            raise SelectorError(f"invalid selector: '{raw}'; can't understand '{raw}'")
        value = re.sub(r"\\(.)", r"\1", m[3])
        terms.append((m[1], m[2] != "!=", value))
    return tuple(terms)


def _dig(obj: Mapping, *path: str) -> object:
    found: object = obj
    for key in path:
        found = found.get(key) if isinstance(found, Mapping) else None
    return found


def selectable_fields(resource: str, group: str, obj: Mapping) -> dict[str, str]:
    """The fields a list may select on, with this object's values.

    Every object: metadata.name and metadata.namespace (runtime.DefaultSelectableFields). Pods add
    the set of pkg/registry/core/pod/strategy.go `ToSelectableFields` (status.podIP is the first
    of status.podIPs); Jobs add status.successful (pkg/registry/batch/job/strategy.go)."""
    meta = obj.get("metadata") or {}
    found = {"metadata.name": str(meta.get("name", "")), "metadata.namespace": str(meta.get("namespace", ""))}
    if (group, resource) == ("", "pods"):
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        ips = [ip.get("ip", "") for ip in status.get("podIPs") or [] if isinstance(ip, Mapping)]
        found |= {
            "spec.nodeName": str(spec.get("nodeName", "")),
            "spec.restartPolicy": str(spec.get("restartPolicy", "")),
            "spec.schedulerName": str(spec.get("schedulerName", "")),
            "spec.serviceAccountName": str(spec.get("serviceAccountName", "")),
            "spec.hostNetwork": "true" if spec.get("hostNetwork") else "false",
            "status.phase": str(status.get("phase", "")),
            "status.podIP": ips[0] if ips else str(status.get("podIP", "")),
            "status.nominatedNodeName": str(status.get("nominatedNodeName", "")),
        }
    elif (group, resource) == ("batch", "jobs"):
        found["status.successful"] = str(_dig(obj, "status", "succeeded") or 0)
    return found


def fields_match(terms: tuple[tuple[str, bool, str], ...], fields: Mapping[str, str]) -> bool:
    """Whether `fields` (from `selectable_fields`) satisfy every term; a field the resource does not
    make selectable is the API server's 400 (pkg/apis/core/v1/conversion.go wording)."""
    for field, _, _ in terms:
        if field not in fields:
            raise SelectorError(f"field label not supported: {field}")
    return all((fields[f] == v) == equal for f, equal, v in terms)
