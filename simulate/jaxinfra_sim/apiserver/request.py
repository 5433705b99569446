"""The Kubernetes API's wire format as the simulation's API server (`server`) speaks it: what a request asks, as
kube-apiserver's `request.RequestInfoFactory` derives it (verb from method, name and namespace, `watch=true`, a
`metadata.name` field selector naming the object of a list), and the bodies it answers with: errors as `Status`
(apimachinery/pkg/api/errors: NewNotFound, NewForbidden, NewMethodNotSupported, NewBadRequest; a 403's message is
handlers/responsewriters/errors.go `forbiddenMessage` wrapped by apierrors.NewForbidden), JSON as the API writes it,
discovery's groups and /version.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from jaxinfra.schemas import K8S_VERSION
from jaxinfra_sim.apiserver.objects import Resource
from jaxinfra_sim.apiserver.rbac import Attributes, Decision, Subject
from jaxinfra_sim.apiserver.selectors import SelectorError, parse_fields


def status_body(code: int, reason: str, message: str, details: Mapping[str, Any] | None = None) -> dict:
    """A metav1.Status failure, keys in the order the API server writes them (an empty reason, StatusReasonUnknown,
    left out as Go's omitempty leaves it)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
    }
    if reason:
        body["reason"] = reason
    if details is not None:
        body["details"] = dict(details)
    body["code"] = code
    return body


def not_found(resource: Resource, name: str) -> dict:
    """apierrors.NewNotFound."""
    details = {"name": name, **({"group": resource.group} if resource.group else {}), "kind": resource.plural}
    return status_body(404, "NotFound", f'{resource.qualified} "{name}" not found', details)


NO_ROUTE = status_body(404, "NotFound", "the server could not find the requested resource", {})


def forbidden(subject: Subject, attrs: Attributes, decision: Decision) -> dict:
    """responsewriters.Forbidden: forbiddenMessage, then the authorizer's reason, in NewForbidden."""
    if attrs.path:
        message = f'forbidden: User "{subject.username}" cannot {attrs.verb} path "{attrs.path}"'
        details: dict[str, str] = {}
    else:
        scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
        base, _, _ = attrs.resource.partition("/")
        qualified = f"{base}.{attrs.api_group}" if attrs.api_group else base
        named = f'{qualified} "{attrs.name}"' if attrs.name else qualified
        message = (
            f'{named} is forbidden: User "{subject.username}" cannot {attrs.verb} resource "{attrs.resource}" '
            f'in API group "{attrs.api_group}" {scope}'
        )
        details = {
            **({"name": attrs.name} if attrs.name else {}),
            **({"group": attrs.api_group} if attrs.api_group else {}),
            "kind": base,
        }
    if decision.reason:
        message += f": {decision.reason}"
    return status_body(403, "Forbidden", message, details)


def _json_default(value: object) -> str:
    """YAML timestamps (creationTimestamp) as RFC 3339, as the API writes them."""
    if isinstance(value, datetime.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, datetime.date):
        return value.isoformat()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def to_json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), default=_json_default).encode()


@dataclass(frozen=True)
class Request:
    """What a request asks, as request.RequestInfoFactory reads it from the method, path and query."""

    attrs: Attributes
    query: Mapping[str, str]
    group: str = ""
    version: str = ""
    plural: str = ""
    subresource: str = ""
    discovery: tuple[str, ...] = ()  # the path's parts, for a non-resource request
    named: str = ""  # the object's name where the path names one

    @property
    def watch(self) -> bool:
        return self.attrs.verb == "watch"


_METHOD_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}  # strconv.ParseBool


def parse_request(method: str, target: str) -> Request:
    url = urlsplit(target)
    query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
    parts = [p for p in url.path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return Request(Attributes(method.lower(), path=url.path or "/"), query, discovery=tuple(parts))
    verb = _METHOD_VERBS.get(method, method.lower())
    if rest[0] == "watch":  # the deprecated /watch/ prefix
        verb, rest = "watch", rest[1:] or [""]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    plural_, name = rest[0], rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if not name and verb == "get":
        verb = "watch" if query.get("watch") in _TRUE else "list"
    elif not name and verb == "delete":
        verb = "deletecollection"
    named = name  # a watch of one object names it in its path
    if verb in ("list", "watch") and not name:  # a list of one named object is authorized as that name
        try:  # a selector that does not parse names nothing here (RequestInfoFactory); the handler refuses it
            terms = parse_fields(query.get("fieldSelector", "")) if "fieldSelector" in query else ()
        except SelectorError:
            terms = ()
        name = next((v for f, equal, v in terms if f == "metadata.name" and equal), "")
    resource = f"{plural_}/{subresource}" if subresource else plural_
    attrs = Attributes(verb, group, resource, namespace, name)
    return Request(attrs, query, group, version, plural_, subresource, named=named)


def group(name: str, versions: list[str]) -> dict:
    """An APIGroup's name and versions, the first preferred, as discovery lists them."""
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


_MAJOR, _MINOR = K8S_VERSION.split(".")
VERSION = {
    "major": _MAJOR,
    "minor": _MINOR,
    "gitVersion": f"v{K8S_VERSION}.0+jaxinfra-simulate",
    "gitCommit": "",
    "gitTreeState": "clean",
    "buildDate": "1970-01-01T00:00:00Z",
    "goVersion": "none (jaxinfra simulate)",
    "compiler": "gc",
    "platform": "linux/amd64",
}
"""/version: the release whose schemas jaxinfra validates against (schemas.K8S_VERSION)."""
