"""The simulation's API server's answers: a request's line and headers in (wire.py reads them), a `Reply` out
(connections.py writes it); no I/O here.

The HTTP surface follows kube-apiserver (staging/src/k8s.io/apiserver/pkg/endpoints; its filters in the order
kubernetes/apiserver @ 24a394e516bf pkg/server/config.go `DefaultBuildHandlerChain` runs them):
- a request other than a watch with a `timeout` that does not parse: 400, before authentication (list_options.py);
- authentication by bearer token, else 401, before the body is read (the body of a request that is refused is never
  read: connections.py reads away at most Go's 256 KiB of it, else closes the connection after the answer);
- past the in-flight seats (`Bounds.max_requests_inflight`, a held watch among them), an authenticated request is
  answered as maxinflight.go `tooManyRequests` and priority-and-fairness.go answer it: 429, `Retry-After: 1`,
  "Too many requests, please try again later." (text/plain, as Go's http.Error writes it);
- authorization (RBAC, rbac.py), so a write the caller may not make is 403; one it may make has its body read, up to
  MaxRequestBodyBytes (3 MiB: 413 RequestEntityTooLarge past it, kubernetes/kubernetes @ 001a2d0ff58b
  staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go `limitedReadBody`), then 405
  (this server is read-only: nothing a pod sends changes the simulation);
- request attributes as `request.RequestInfoFactory` derives them (`request.parse_request`), a list's and watch's
  query parameters decoded and checked as the handler checks them before anything is streamed (list_options.py);
- errors as `Status` bodies (`request`); a failure of this code as the panic filter answers it: 500 InternalError;
- lists as `<Kind>List` with `metadata.resourceVersion`, selectors as selectors.py; a watch streams ADDED events for
  the current objects (none when the client resumes from the current resourceVersion, or asks sendInitialEvents=false;
  sendInitialEvents=true with allowWatchBookmarks ends them with the `k8s.io/initial-events-end` BOOKMARK, cacher.go
  `isListWatchRequest`), then holds until its timeout, a new attempt, or `close`;
- discovery: /api, /api/v1, /apis, /apis/<group>[/<version>], /version, /healthz|livez|readyz.
What it holds, and how it lists and selects, is objects.py's; who may read what, rbac.py's.
Not served: subresources other than `status` (pods/log, exec, ...), EndpointSlices, Table/protobuf output,
server-side paging (`limit` returns everything, as a server may; `continue` is not read).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from jaxinfra_sim.apiserver.bounds import DEFAULT, Bounds
from jaxinfra_sim.apiserver.list_options import (
    ApiStatus,
    ListOptions,
    bad_request,
    check_timeout,
    decode,
    resource_version,
    watch_seconds,
)
from jaxinfra_sim.apiserver.objects import Resource, Snapshot, resource_of
from jaxinfra_sim.apiserver.rbac import Subject
from jaxinfra_sim.apiserver.request import (
    NO_ROUTE,
    VERSION,
    Request,
    forbidden,
    group,
    not_found,
    parse_request,
    status_body,
    to_json,
)
from jaxinfra_sim.apiserver.selectors import SelectorError, parse_fields, parse_labels
from jaxinfra_sim.apiserver.wire import Head, chunk

TOO_MANY = b"Too many requests, please try again later.\n"
"""A 429's body, as Go's http.Error writes maxinflight.go's message (text/plain, a newline added)."""
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
"""metav1.InitialEventsAnnotationKey: the BOOKMARK that ends a watch's initial events (storage/util.go)."""


@dataclass(frozen=True)
class Reply:
    """An answer, and what connections.py must do around it."""

    code: int
    body: bytes
    note: str  # why, for the log: the RBAC reason, the refusal
    who: str = "-"
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    seat: bool = False  # holds one of the in-flight seats until it is written (a watch's until it ends)
    read_body: bool = False  # a write: its body is read first, up to MaxRequestBodyBytes (413 past it)
    watch_s: float | None = None  # a watch: `body` is its first events (chunks); it lasts this long (or to publish)


def status_reply(status: ApiStatus, who: str = "-", seat: bool = False) -> Reply:
    return Reply(status.code, to_json(status.body), status.body["message"], who, headers=status.headers, seat=seat)


class Api:
    """The API: the objects of the current attempt, the tokens that may read them."""

    def __init__(self, tokens: Mapping[str, Subject], address: str, bounds: Bounds = DEFAULT):
        self.tokens, self.address, self.bounds = dict(tokens), address, bounds
        self.generation = 0
        self.snapshot: Snapshot | None = None

    def publish(self, objects: Sequence[Mapping], host: str, port: int) -> None:
        self.snapshot = Snapshot(objects, self.generation + 1, host, port)
        self.generation += 1

    def too_large(self, who: str) -> Reply:
        """handlers/rest.go limitedReadBody past MaxRequestBodyBytes: apierrors.NewRequestEntityTooLargeError."""
        message = f"Request entity too large: limit is {self.bounds.max_request_body_bytes}"
        return Reply(413, to_json(status_body(413, "RequestEntityTooLarge", message)), message, who, seat=True)

    @staticmethod
    def timed_out(who: str) -> Reply:
        """filters/timeout.go: a request not done within --request-timeout, nothing written yet: 504 Timeout."""
        message = "Timeout: request did not complete within the allotted timeout"
        return Reply(504, to_json(status_body(504, "Timeout", message, {})), message, who, seat=True)

    def answer(self, head: Head, overloaded: bool) -> Reply:
        """The answer to a request, in kube-apiserver's filter order; `overloaded`: every in-flight seat is held."""
        target = head.target
        if not target.startswith("/"):  # the absolute form (`https://host/path?query`): its path and query
            url = urlsplit(target)
            target = (url.path or "/") + (f"?{url.query}" if url.query else "")
        try:
            request = parse_request(head.method, target)
            if not request.watch:
                check_timeout(request.query)
        except ApiStatus as e:
            return status_reply(e)
        except Exception as e:  # noqa: BLE001 - as the panic filter answers it
            message = f"Internal error occurred: {e!r}"
            return Reply(500, to_json(status_body(500, "InternalError", message)), message)
        auth = head.header("Authorization")
        subject = self.tokens.get(auth[7:].strip()) if auth[:7].lower() == "bearer " else None
        if subject is None:
            body = to_json(status_body(401, "Unauthorized", "Unauthorized"))
            return Reply(401, body, "no valid bearer token")
        who = subject.username
        if overloaded:
            headers = (("Retry-After", str(self.bounds.retry_after_s)), ("X-Content-Type-Options", "nosniff"))
            note = f"too many requests in flight ({self.bounds.max_requests_inflight} at once)"
            return Reply(429, TOO_MANY, note, who, "text/plain; charset=utf-8", headers)
        try:
            reply = self._authorized(subject, head.method, request)
        except ApiStatus as e:
            reply = status_reply(e)
        except SelectorError as e:
            reply = status_reply(bad_request(str(e)))
        except Exception as e:  # noqa: BLE001 - a bug here must answer 500, as the API server's panic filter does
            message = f"Internal error occurred: {e!r}"
            reply = Reply(500, to_json(status_body(500, "InternalError", message)), message)
        return replace(reply, who=who, seat=True)

    def _authorized(self, subject: Subject, method: str, request: Request) -> Reply:
        snapshot = self.snapshot
        assert snapshot is not None
        decision = snapshot.policy.decide(subject, request.attrs)
        if not decision.allowed:
            body = forbidden(subject, request.attrs, decision)
            return Reply(403, to_json(body), body["message"])
        if method not in ("GET", "HEAD"):
            return self._refuse(snapshot, method, request)
        if request.attrs.path:
            return self._discovery(snapshot, request.discovery, decision.reason)
        return self._read(snapshot, request, decision.reason)

    def _refuse(self, snapshot: Snapshot, method: str, request: Request) -> Reply:
        """A write RBAC allows: its body read (up to the limit), then 405, logged; nothing changes."""
        verb = request.attrs.verb
        note = f"refused {verb}: the simulated API server is read-only; the simulation's objects do not change"
        if request.attrs.path:
            message = f"{method} is not supported on {request.attrs.path}: the simulated API server is read-only"
            return Reply(405, to_json(status_body(405, "MethodNotAllowed", message)), note, read_body=True)
        resource = snapshot.find(request.group, request.version, request.plural) or resource_of(
            f"{request.group}/{request.version}" if request.group else request.version, request.plural
        )
        message = (
            f'{verb} is not supported on resources of kind "{resource.qualified}": '
            "the simulated API server is read-only"
        )
        details = {**({"group": resource.group} if resource.group else {}), "kind": resource.plural}
        return Reply(405, to_json(status_body(405, "MethodNotAllowed", message, details)), note, read_body=True)

    def _read(self, snapshot: Snapshot, request: Request, why: str) -> Reply:
        resource = snapshot.find(request.group, request.version, request.plural)
        attrs = request.attrs
        if (
            resource is None
            or (attrs.namespace and not resource.namespaced and resource.plural != "namespaces")
            or (resource.namespaced and attrs.name and not attrs.namespace and attrs.verb == "get")
            or request.subresource not in ("", "status")
        ):
            return Reply(404, to_json(NO_ROUTE), why)
        namespace = attrs.namespace if resource.namespaced else ""
        current = int(snapshot.resource_version)
        if attrs.verb == "get":
            resource_version(request.query.get("resourceVersion", ""), current, listing=False)
            found = snapshot.get(resource, namespace, attrs.name)
            return (
                Reply(200, to_json(found), why) if found else Reply(404, to_json(not_found(resource, attrs.name)), why)
            )
        options = decode(request.query)
        parse_labels(options.label_selector)  # the selectors parse as the options decode, before anything else
        parse_fields(options.field_selector)
        items = snapshot.select(resource, namespace, options.selectors)
        if request.named:
            items = self._named(options, request.named, items)
        if options.watch or attrs.verb == "watch":
            return self._watch(resource, options, current, items, why)
        resource_version(options.resource_version, current, listing=True)
        body = {
            "kind": f"{resource.kind}List",
            "apiVersion": resource.group_version,
            "metadata": {"resourceVersion": snapshot.resource_version},
            "items": items,
        }
        return Reply(200, to_json(body), f"{why} ({len(items)} items)")

    @staticmethod
    def _named(options: ListOptions, name: str, items: list[dict]) -> list[dict]:
        """A watch of one named object: a field selector, if any, must select that name (handlers/get.go)."""
        if options.field_selector.strip():
            chosen = [v for f, equal, v in parse_fields(options.field_selector) if f == "metadata.name" and equal]
            if chosen[:1] != [name]:
                raise bad_request("fieldSelector metadata.name doesn't match requested name")
        return [o for o in items if o.get("metadata", {}).get("name") == name]

    def _watch(self, resource: Resource, options: ListOptions, current: int, items: list[dict], why: str) -> Reply:
        """ADDED events for the current objects (none when resuming from the current resourceVersion), then held."""
        since = resource_version(options.resource_version, current, listing=False)
        if options.send_initial_events is not None:
            events: list[dict[str, Any]] = [
                {"type": "ADDED", "object": o} for o in items if options.send_initial_events
            ]
            if options.send_initial_events and options.allow_watch_bookmarks:
                metadata = {"resourceVersion": str(current), "annotations": {INITIAL_EVENTS_END: "true"}}
                bookmark = {"kind": resource.kind, "apiVersion": resource.group_version, "metadata": metadata}
                events.append({"type": "BOOKMARK", "object": bookmark})
        else:
            events = [] if since and since == current else [{"type": "ADDED", "object": o} for o in items]
        seconds = watch_seconds(options, self.bounds.min_request_timeout_s)
        body = b"".join(chunk(to_json(e) + b"\n") for e in events)
        return Reply(200, body, f"{why} (watch: {len(events)} events, {seconds:.0f} s)", watch_s=seconds)

    def _discovery(self, snapshot: Snapshot, parts: tuple[str, ...], why: str) -> Reply:
        groups = snapshot.groups()
        body: Any = None
        if parts == ("api",):
            body = {
                "kind": "APIVersions",
                "versions": groups.get("", []),
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": self.address}],
            }
        elif parts[:1] == ("api",) and len(parts) == 2 and parts[1] in groups.get("", []):
            body = snapshot.resource_list("", parts[1])
        elif parts == ("apis",):
            body = {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group(g, v) for g, v in groups.items() if g]}
        elif parts[:1] == ("apis",) and len(parts) == 2 and parts[1] and parts[1] in groups:
            body = {"kind": "APIGroup", "apiVersion": "v1", **group(parts[1], groups[parts[1]])}
        elif parts[:1] == ("apis",) and len(parts) == 3 and parts[1] and parts[2] in groups.get(parts[1], []):
            body = snapshot.resource_list(parts[1], parts[2])
        elif parts == ("version",):
            body = VERSION
        elif parts in (("healthz",), ("livez",), ("readyz",)):
            return Reply(200, b"ok", why, content_type="text/plain; charset=utf-8")
        if body is None:
            return Reply(404, to_json(NO_ROUTE), why)
        return Reply(200, to_json(body), why)
