"""The simulation's Kubernetes API server: read-only, over real HTTPS, authorizing every request
with RBAC, so in-cluster clients in the pods (JAX's `K8sCluster`, the `kubernetes` client,
kubectl) read the objects the cluster would hold.

Why a process of its own: the simulator forks its pods and must stay free of threads of its own
making, while a server wants a thread per connection (a watch holds one open). So `start` makes
the TLS material and the listening socket in the simulator's process, then forks; the child
alone has threads. The parent keeps a pipe to it (`publish` sends a new attempt's objects, the
child acknowledges) and `close` kills and reaps it, which also closes the port. The child exits
by itself when the simulator dies (the pipe's end of file, and PR_SET_PDEATHSIG).

The HTTP surface follows kube-apiserver (staging/src/k8s.io/apiserver/pkg/endpoints):
- request attributes as `request.RequestInfoFactory` derives them (verb from method, name and
  namespace, `watch=true`, a `metadata.name` field selector naming the object of a list);
- authentication by bearer token, else 401; authorization (RBAC, rbac.py) before anything else,
  so a write the caller may not make is 403 and one it may make is 405 (this server is
  read-only: nothing a pod sends changes the simulation); a 403's message is
  handlers/responsewriters/errors.go `forbiddenMessage` wrapped by apierrors.NewForbidden;
- errors as `Status` bodies (apimachinery/pkg/api/errors: NewNotFound, NewForbidden,
  NewMethodNotSupported, NewBadRequest);
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

import ctypes
import datetime
import gc
import json
import os
import queue
import signal
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from jaxinfra import interrupts
from jaxinfra.schemas import K8S_VERSION
from jaxinfra_sim import fds
from jaxinfra_sim.apiobjects import Resource, Snapshot, resource_of
from jaxinfra_sim.errors import ApiServerError
from jaxinfra_sim.rbac import Attributes, Decision, Subject
from jaxinfra_sim.selectors import SelectorError, parse_fields

__all__ = ["ApiServer", "parse_request"]

SERVICE_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
"""The names a real API server's certificate carries besides its address (the `kubernetes` Service)."""

START_TIMEOUT_S = 10.0
"""How long `start` and `publish` wait for the server's answer before giving up on it."""
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


def status_body(code: int, reason: str, message: str, details: Mapping[str, str] | None = None) -> dict:
    """A metav1.Status failure, keys in the order the API server writes them."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
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


# --------------------------------------------------------------------------------------------
# Requests.


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
    if verb in ("list", "watch") and not name:  # a list of one named object is authorized as that name
        terms = parse_fields(query.get("fieldSelector", "")) if "fieldSelector" in query else ()
        name = next((v for f, equal, v in terms if f == "metadata.name" and equal), "")
    resource = f"{plural_}/{subresource}" if subresource else plural_
    return Request(Attributes(verb, group, resource, namespace, name), query, group, version, plural_, subresource)


class _Server(ThreadingHTTPServer):
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
        super().__init__(self.bound, _Handler, bind_and_activate=False)
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


class _Handler(BaseHTTPRequestHandler):
    """One connection; each request is authenticated, authorized, then answered or refused, and
    logged as one line: status, method, path, caller, and why (the RBAC reason, the refusal)."""

    protocol_version = "HTTP/1.1"
    server_version = "kube-apiserver (jaxinfra simulate)"
    timeout = 60
    server: _Server
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
                "groups": [_group(g, v) for g, v in groups.items() if g],
            }
        elif parts[:1] == ("apis",) and len(parts) == 2 and parts[1] and parts[1] in groups:
            body = {"kind": "APIGroup", "apiVersion": "v1", **_group(parts[1], groups[parts[1]])}
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


def _group(name: str, versions: list[str]) -> dict:
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


# --------------------------------------------------------------------------------------------
# The process.

_HEADER = struct.Struct("!Q")


def _read_exact(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _messages(fd: int) -> Iterator[list[dict]]:
    """The objects the parent publishes, until it closes the pipe (or dies)."""
    while (header := _read_exact(fd, _HEADER.size)) is not None:
        payload = _read_exact(fd, _HEADER.unpack(header)[0])
        if payload is None:
            return
        yield json.loads(payload)


def _become_server_process(keep: Sequence[int], log_fd: int, parent: int) -> None:
    """The forked child's first steps: default signals, die with the parent, stdout and stderr
    into the log, and no descriptor of the simulator's but its own (a pipe the simulator waits on
    must not stay open here)."""
    gc.freeze()  # the parent's objects are never collected here
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the simulator's to handle; it closes us
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    interrupts.release()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    lo = 3
    for fd in sorted({*keep, log_fd, devnull}):
        if fd >= lo:
            os.closerange(lo, fd)
            lo = fd + 1
    os.closerange(lo, 1 << 20)
    os.close(devnull)


class ApiServer:
    """A read-only Kubernetes API server for one simulation: real HTTPS on a loopback address,
    a CA made for the run (trustme), in a process of its own (forked; the simulator itself must
    stay single-threaded because it forks pods), serving `objects` to bearer tokens."""

    def __init__(self, host: str, tokens: Mapping[str, Subject], log: Path, max_connections: int = MAX_CONNECTIONS):
        self.host, self.tokens, self.log = host, dict(tokens), Path(log)
        self.max_connections = max_connections
        self._pid: int | None = None
        self._port = 0
        self._ca_pem = b""
        self._to_child = self._from_child = -1

    @property
    def port(self) -> int:
        return self._port

    @property
    def ca_pem(self) -> bytes:
        """The CA's certificate: a pod's ca.crt."""
        return self._ca_pem

    def start(self, objects: Sequence[Mapping], join: Callable[[], None] | None = None) -> None:
        """Make the CA and the serving certificate, fork the server, listen; returns once it serves. `join`: what
        the server's process calls first, to listen in the pods' network (then it picks its port there)."""
        if self._pid is not None:
            raise ApiServerError("the API server is already running")
        import trustme  # only simulations that use the API server pay for it

        ca = trustme.CA(organization_name="jaxinfra simulate")
        leaf = ca.issue_cert(self.host, *SERVICE_NAMES, common_name="kube-apiserver")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        leaf.configure_cert(context)  # via a temporary file that trustme removes at once
        listener = socket.create_server((self.host, 0), backlog=256) if join is None else None
        self._port = listener.getsockname()[1] if listener is not None else 0
        self._ca_pem = ca.cert_pem.bytes()
        log_fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        from_parent, to_child = os.pipe()
        from_child, to_parent = os.pipe()
        parent = os.getpid()
        with interrupts.held():
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child (measured by the tests through its sockets)
                status = 1
                try:
                    if listener is None and join is not None:
                        join()
                        listener = socket.create_server((self.host, 0), backlog=256)
                        self._port = listener.getsockname()[1]
                    assert listener is not None
                    _become_server_process((listener.fileno(), from_parent, to_parent), log_fd, parent)
                    server = _Server(
                        listener, context, self.tokens, f"{self.host}:{self._port}", log_fd, self.max_connections
                    )
                    server.publish(objects)
                    threading.Thread(target=server.serve_forever, name="apiserver", daemon=True).start()
                    server.log(f"serving https://{self.host}:{self._port} (read-only; CA made for this run)")
                    os.write(to_parent, b"R" + b"%05d" % self._port)
                    for published in _messages(from_parent):
                        server.publish(published)
                        server.log(f"published {len(published)} objects (resourceVersion {server.generation})")
                        os.write(to_parent, b"P")
                    status = 0
                except BaseException as e:  # noqa: BLE001 - the child must never return into the simulator
                    os.write(log_fd, f"API server failed: {e!r}\n".encode())
                finally:
                    os._exit(status)
            self._pid, self._to_child, self._from_child = pid, to_child, from_child
            for fd in (from_parent, to_parent, log_fd):
                os.close(fd)
        if listener is not None:
            listener.close()
        self._await(b"R")
        self._port = int(os.read(self._from_child, 5))

    def publish(self, objects: Sequence[Mapping]) -> None:
        """Serve these objects from now on (a new attempt); returns once the server does.
        Open watches end, as they do when a real server's history moves on; clients list again."""
        if self._pid is None:
            raise ApiServerError("the API server is not running")
        payload = to_json(list(objects))
        _write_all(self._to_child, _HEADER.pack(len(payload)) + payload)
        self._await(b"P")

    def _await(self, token: bytes) -> None:
        ready = fds.readable([self._from_child], START_TIMEOUT_S)
        got = os.read(self._from_child, 1) if ready else b""
        if got != token:
            tail = self.log.read_text(errors="replace").strip().splitlines()[-1:] if self.log.exists() else []
            self.close()
            raise ApiServerError("the simulated API server stopped answering" + (f": {tail[0]}" if tail else ""))

    def close(self) -> None:
        """Kill and reap the server; its port closes with it. Safe to call twice."""
        pid, self._pid = self._pid, None
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        for fd in (self._to_child, self._from_child):
            if fd >= 0:
                os.close(fd)
        self._to_child = self._from_child = -1

    def __enter__(self) -> ApiServer:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
