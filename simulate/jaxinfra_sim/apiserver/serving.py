"""The simulation's API server's HTTPS serving, inside its own process (`server` forks it): a thread per
connection, each request authenticated, authorized, then answered or refused, and logged.

The HTTP surface follows kube-apiserver (staging/src/k8s.io/apiserver/pkg/endpoints):
- request attributes as `request.RequestInfoFactory` derives them (`request.parse_request`);
- authentication by bearer token, else 401; authorization (RBAC, rbac.py) before anything else,
  so a write the caller may not make is 403 and one it may make is 405 (this server is
  read-only: nothing a pod sends changes the simulation);
- errors as `Status` bodies (`request`);
- lists as `<Kind>List` with `metadata.resourceVersion`, selectors as selectors.py; a watch
  streams ADDED events for the current objects (none when the client resumes from the current
  resourceVersion), then holds until `timeoutSeconds`, a new attempt, or `close`;
- discovery: /api, /api/v1, /apis, /apis/<group>[/<version>], /version, /healthz|livez|readyz;
- at most `MAX_CONNECTIONS` connections served at once, each on a thread of its own; one more is answered as
  kube-apiserver answers a request past its in-flight limits (staging/src/k8s.io/apiserver/pkg/server/filters/
  maxinflight.go @ 04791b49 `tooManyRequests`: 429, `Retry-After: 1`, "Too many requests, please try again later.")
  and closed, so a pod that opens connections without end holds a bounded number of the server's threads.
What it holds, and how it lists and selects, is apiobjects.py's; who may read what, rbac.py's.
Not served: subresources other than `status` (pods/log, exec, ...), EndpointSlices,
Table/protobuf output, server-side paging (`limit` returns everything, as a server may).
"""

from __future__ import annotations

import os
import queue
import socket
import ssl
import threading
import time
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from jaxinfra_sim.apiserver.objects import Snapshot, resource_of
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
from jaxinfra_sim.apiserver.selectors import SelectorError

MAX_REQUESTS_INFLIGHT = 400
"""kube-apiserver's `--max-requests-inflight` default: the read-only requests it serves at once."""
MAX_MUTATING_REQUESTS_INFLIGHT = 200
"""kube-apiserver's `--max-mutating-requests-inflight` default: the writes it serves at once."""
MAX_CONNECTIONS = MAX_REQUESTS_INFLIGHT + MAX_MUTATING_REQUESTS_INFLIGHT
"""The most connections this server serves at once, each holding a thread of its own until it closes. kube-apiserver
bounds requests, not connections (its goroutines are cheap): read-only ones at 400, writes at 200 (maxinflight.go,
watches exempt as long-running), or under API Priority and Fairness, on by default, their sum, 600, as the server's
whole concurrency limit (kube-apiserver's BuildPriorityAndFairness hands utilflowcontrol.New MaxRequestsInFlight +
MaxMutatingRequestsInFlight). Here a connection's thread is what a request in flight costs, a watch's too, so the
connections are capped at that sum."""
RETRY_AFTER_S = 1
"""The Retry-After of a 429 (maxinflight.go `retryAfter`)."""
TOO_MANY = b"Too many requests, please try again later.\n"
"""A 429's body, as Go's http.Error writes maxinflight.go's message (text/plain, a newline added)."""
OVERFLOW_QUEUE = 64
"""Connections past the cap waiting for their 429; past these the server accepts nothing more until one is answered
(the kernel's listen backlog holds them)."""
REFUSE_TIMEOUT_S = 2.0
"""How long a connection past the cap may take to send its request before it is closed unanswered."""


class Server(ThreadingHTTPServer):
    """The child's HTTPS server: a listening socket made by the parent, a snapshot per attempt."""

    daemon_threads = True

    def __init__(
        self,
        listener: socket.socket,
        context: ssl.SSLContext,
        tokens: Mapping[str, Subject],
        address: str,
        log_fd: int,
        max_connections: int = MAX_CONNECTIONS,
    ):
        self.bound: tuple[str, int] = listener.getsockname()[:2]  # (host, port), which the Endpoints name
        super().__init__(self.bound, Handler, bind_and_activate=False)
        self.socket.close()
        self.socket = context.wrap_socket(listener, server_side=True, do_handshake_on_connect=False)
        self.tokens, self.address, self.log_fd = dict(tokens), address, log_fd
        self.changed = threading.Condition()
        self.generation = 0
        self.snapshot: Snapshot | None = None
        self.max_connections = max_connections
        self.slots = threading.BoundedSemaphore(max_connections)  # one per connection served on a thread of its own
        self.overflow: queue.Queue[Any] = queue.Queue(OVERFLOW_QUEUE)  # connections past the cap, for their 429
        threading.Thread(target=self._refuse_overflow, name="apiserver-429", daemon=True).start()

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread for the connection while fewer than `max_connections` are served; else it waits for its 429
        (`_refuse_overflow`), and while that queue is full nothing more is accepted."""
        if not self.slots.acquire(blocking=False):
            self.overflow.put((request, client_address))
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def _refuse_overflow(self) -> None:
        """One thread answering each connection past the cap with 429, one at a time, each within
        `REFUSE_TIMEOUT_S` (a client that sends nothing is closed unanswered)."""
        while True:
            request, _ = self.overflow.get()
            try:
                self._too_many(request)
            except (OSError, ValueError):  # a failed handshake (ssl.SSLError is an OSError), a timeout, a reset
                pass
            finally:
                self.shutdown_request(request)

    def _too_many(self, connection: ssl.SSLSocket) -> None:
        deadline = time.monotonic() + REFUSE_TIMEOUT_S
        connection.settimeout(REFUSE_TIMEOUT_S)
        connection.do_handshake()
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            connection.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = connection.recv(4096)
            if not chunk:
                return
            head += chunk
        method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
        path = rest.rpartition(" ")[0] or rest
        headers = (
            "HTTP/1.1 429 Too Many Requests\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n"
            "X-Content-Type-Options: nosniff\r\n"
            f"Retry-After: {RETRY_AFTER_S}\r\n"
            f"Content-Length: {len(TOO_MANY)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
        connection.sendall(headers + (b"" if method == "HEAD" else TOO_MANY))
        self.log(f"429 {method} {path} - too many connections ({self.max_connections} served at once)")

    def publish(self, objects: Sequence[Mapping]) -> None:
        snapshot = Snapshot(objects, self.generation + 1, *self.bound)
        with self.changed:
            self.generation += 1
            self.snapshot = snapshot
            self.changed.notify_all()

    def log(self, line: str) -> None:
        os.write(self.log_fd, (line.replace("\n", " ") + "\n").encode())

    def handle_error(self, request: Any, client_address: Any) -> None:  # e.g. a client that drops the TLS handshake
        import sys

        self.log(f"connection from {client_address[0]} failed: {sys.exc_info()[1]!r}")


class Handler(BaseHTTPRequestHandler):
    """One connection; each request is authenticated, authorized, then answered or refused, and
    logged as one line: status, method, path, caller, and why (the RBAC reason, the refusal)."""

    protocol_version = "HTTP/1.1"
    server_version = "kube-apiserver (jaxinfra simulate)"
    timeout = 60
    server: Server
    who = "-"

    def setup(self) -> None:
        super().setup()
        # Headers and body go out as separate TLS records: without NODELAY, Nagle's algorithm and
        # the client's delayed ACK add ~40 ms to every response.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.request.do_handshake()

    def log_message(self, format: str, *args: Any) -> None:  # our own request log replaces stderr's
        pass

    def _serve(self) -> None:
        if length := int(self.headers.get("Content-Length") or 0):
            self.rfile.read(length)  # a write's body, read and dropped
        snapshot = self.server.snapshot
        assert snapshot is not None
        auth = self.headers.get("Authorization", "")
        subject = self.server.tokens.get(auth[7:].strip()) if auth[:7].lower() == "bearer " else None
        self.who = subject.username if subject else "-"
        if subject is None:
            return self._reply(401, status_body(401, "Unauthorized", "Unauthorized"), "no valid bearer token")
        try:
            request = parse_request(self.command, self.path)
            decision = snapshot.policy.decide(subject, request.attrs)
            if not decision.allowed:
                body = forbidden(subject, request.attrs, decision)
                return self._reply(403, body, body["message"])
            if self.command not in ("GET", "HEAD"):
                return self._refuse(snapshot, request)
            if request.attrs.path:
                return self._discovery(snapshot, request.discovery, decision.reason)
            self._read(snapshot, request, decision.reason)
        except SelectorError as e:
            self._reply(400, status_body(400, "BadRequest", str(e)), str(e))
        except Exception as e:  # noqa: BLE001 - a bug here must answer 500, as the API server's panic filter does
            message = f"Internal error occurred: {e!r}"
            self._reply(500, status_body(500, "InternalError", message), message)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def _refuse(self, snapshot: Snapshot, request: Request) -> None:
        """A write RBAC allows: 405, logged; nothing changes."""
        verb = request.attrs.verb
        note = f"refused {verb}: the simulated API server is read-only; the simulation's objects do not change"
        if request.attrs.path:
            return self._reply(
                405,
                status_body(
                    405,
                    "MethodNotAllowed",
                    f"{self.command} is not supported on {request.attrs.path}: the simulated API server is read-only",
                ),
                note,
            )
        resource = snapshot.find(request.group, request.version, request.plural) or resource_of(
            f"{request.group}/{request.version}" if request.group else request.version, request.plural
        )
        message = (
            f'{verb} is not supported on resources of kind "{resource.qualified}": '
            "the simulated API server is read-only"
        )
        details = {**({"group": resource.group} if resource.group else {}), "kind": resource.plural}
        self._reply(405, status_body(405, "MethodNotAllowed", message, details), note)

    def _read(self, snapshot: Snapshot, request: Request, why: str) -> None:
        resource = snapshot.find(request.group, request.version, request.plural)
        attrs = request.attrs
        if (
            resource is None
            or (attrs.namespace and not resource.namespaced and resource.plural != "namespaces")
            or (resource.namespaced and attrs.name and not attrs.namespace and attrs.verb == "get")
            or request.subresource not in ("", "status")
        ):
            return self._reply(404, NO_ROUTE, why)
        namespace = attrs.namespace if resource.namespaced else ""
        if attrs.verb == "get":
            found = snapshot.get(resource, namespace, attrs.name)
            return self._reply(200, found, why) if found else self._reply(404, not_found(resource, attrs.name), why)
        items = snapshot.select(resource, namespace, request.query)
        if request.watch:
            return self._watch(snapshot, items, request.query, why)
        body = {
            "kind": f"{resource.kind}List",
            "apiVersion": resource.group_version,
            "metadata": {"resourceVersion": snapshot.resource_version},
            "items": items,
        }
        self._reply(200, body, f"{why} ({len(items)} items)")

    def _discovery(self, snapshot: Snapshot, parts: tuple[str, ...], why: str) -> None:
        groups = snapshot.groups()
        body: Any = None
        if parts == ("api",):
            body = {
                "kind": "APIVersions",
                "versions": groups.get("", []),
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": self.server.address}],
            }
        elif parts[:1] == ("api",) and len(parts) == 2 and parts[1] in groups.get("", []):
            body = snapshot.resource_list("", parts[1])
        elif parts == ("apis",):
            body = {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [group(g, v) for g, v in groups.items() if g],
            }
        elif parts[:1] == ("apis",) and len(parts) == 2 and parts[1] and parts[1] in groups:
            body = {"kind": "APIGroup", "apiVersion": "v1", **group(parts[1], groups[parts[1]])}
        elif parts[:1] == ("apis",) and len(parts) == 3 and parts[1] and parts[2] in groups.get(parts[1], []):
            body = snapshot.resource_list(parts[1], parts[2])
        elif parts == ("version",):
            body = VERSION
        elif parts in (("healthz",), ("livez",), ("readyz",)):
            return self._send(200, b"ok", "text/plain; charset=utf-8", why)
        if body is None:
            return self._reply(404, NO_ROUTE, why)
        self._reply(200, body, why)

    def _watch(self, snapshot: Snapshot, items: list[dict], query: Mapping[str, str], why: str) -> None:
        """ADDED events for the current objects (none when resuming from the current
        resourceVersion), then hold until timeoutSeconds or the next attempt."""
        since = query.get("resourceVersion", "")
        events = [] if since not in ("", "0") and since == snapshot.resource_version else items
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.server.log(f"200 {self.command} {self.path} {self.who} {why} (watch: {len(events)} ADDED events)")
        for obj in events:
            self._chunk(to_json({"type": "ADDED", "object": obj}) + b"\n")
        timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds", "").isdigit() else None
        with self.server.changed:
            generation = self.server.generation
            self.server.changed.wait_for(lambda: self.server.generation != generation, timeout)
        self._chunk(b"")
        self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _reply(self, code: int, body: Any, note: str) -> None:
        self._send(code, to_json(body), "application/json", note)

    def _send(self, code: int, data: bytes, content_type: str, note: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.server.log(f"{code} {self.command} {self.path} {self.who}" + (f" {note}" if note else ""))
