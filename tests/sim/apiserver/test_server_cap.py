"""The simulated API server's in-flight seats (simulate/jaxinfra_sim/apiserver/bounds.py `max_requests_inflight`): at
most 600 requests are served at once, a held watch among them, and each authenticated request past them is answered
as kube-apiserver answers a request past its in-flight limits (maxinflight.go: 429, Retry-After: 1); connections are
served from one event loop, so neither the held watches nor idle connections cost the server a thread."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from jaxinfra_sim.apiserver.bounds import DEFAULT, Bounds
from jaxinfra_sim.apiserver.rbac import Subject
from jaxinfra_sim.apiserver.server import ApiServer

pytestmark = pytest.mark.simulator

TOKEN = "reader-token"
SUBJECTS = {TOKEN: Subject("train", "jax")}
WATCH = "/api/v1/namespaces/train/pods?watch=true&timeoutSeconds=30"
RBAC = "rbac.authorization.k8s.io/v1"
OBJECTS = [  # the subject may watch the namespace's pods
    {
        "apiVersion": RBAC,
        "kind": "Role",
        "metadata": {"name": "watch-pods", "namespace": "train"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
    },
    {
        "apiVersion": RBAC,
        "kind": "RoleBinding",
        "metadata": {"name": "watch-pods", "namespace": "train"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "watch-pods"},
        "subjects": [{"kind": "ServiceAccount", "name": "jax", "namespace": "train"}],
    },
]


def _children() -> set[int]:
    return {int(p) for task in Path("/proc/self/task").iterdir() for p in (task / "children").read_text().split()}


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError(f"no Threads line for {pid}")


@pytest.fixture
def started(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[ApiServer, int, ssl.SSLContext]]:
    """A started server (its in-flight seats `request.param`), its process id, and a client TLS context trusting
    its CA."""
    before = _children()
    bounds = Bounds(max_requests_inflight=request.param)
    with ApiServer("127.0.0.1", SUBJECTS, tmp_path / "apiserver.log", bounds) as api:
        api.start(OBJECTS)
        [pid] = _children() - before
        yield api, pid, ssl.create_default_context(cadata=api.ca_pem.decode())


def connect(api: ApiServer, context: ssl.SSLContext) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", api.port), timeout=10)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def ask(conn: ssl.SSLSocket, path: str) -> None:
    conn.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode())


def answer(conn: ssl.SSLSocket) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of a response that ends with the connection (a 429) or has a Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    while len(body) < int(headers.get("content-length", 0)):
        body += conn.recv(4096)
    return int(status.split()[1]), headers, body


@pytest.mark.parametrize("started", [DEFAULT.max_requests_inflight], indirect=True)
def test_requests_past_the_default_seats_get_429_and_the_server_holds_no_thread_for_them(
    started: tuple[ApiServer, int, ssl.SSLContext],
) -> None:
    """600 watches (kube-apiserver's 400 + 200 in-flight defaults) are served; 40 more get 429; the server serves
    them all from its one thread (it held a thread per connection, 600 and more, before)."""
    api, pid, context = started
    held, refused = [], []
    try:
        for _ in range(DEFAULT.max_requests_inflight):
            conn = connect(api, context)
            ask(conn, WATCH)
            held.append(conn)
        assert answer(held[-1])[0] == 200  # served: a watch, held open
        for _ in range(40):
            conn = connect(api, context)
            ask(conn, WATCH)
            refused.append(answer(conn))
            conn.close()
        assert _threads(pid) == 1
    finally:
        for conn in held:
            conn.close()
    assert {status for status, _, _ in refused} == {429}
    status, headers, body = refused[0]
    assert headers["retry-after"] == "1" and body == b"Too many requests, please try again later.\n"
    assert headers["content-type"] == "text/plain; charset=utf-8"
    log = api.log.read_text()
    assert log.count("429 GET /api/v1/namespaces/train/pods") == 40, log[-2000:]


@pytest.mark.parametrize("started", [8], indirect=True)
def test_a_seat_freed_by_a_watch_serves_the_next_request(started: tuple[ApiServer, int, ssl.SSLContext]) -> None:
    """8 held watches take the 8 seats: a request gets 429 and its connection stays open, as Go keeps it; once a
    watch ends, the same connection is served."""
    api, pid, context = started
    watches = [connect(api, context) for _ in range(8)]
    try:
        for conn in watches:
            ask(conn, WATCH)
        assert answer(watches[-1])[0] == 200
        over = connect(api, context)
        ask(over, "/version")
        assert answer(over)[0] == 429
        watches.pop().close()
        for _ in range(50):  # the server sees the end of file and frees the watch's seat
            ask(over, "/version")
            status = answer(over)[0]
            if status == 200:
                break
        assert status == 200
        assert _threads(pid) == 1
    finally:
        for conn in watches:
            conn.close()


@pytest.mark.parametrize("started", [8], indirect=True)
def test_idle_connections_hold_no_seat(started: tuple[ApiServer, int, ssl.SSLContext]) -> None:
    """Kept-alive connections that ask nothing hold no seat (kube-apiserver counts requests, not connections): with
    8 seats, 50 idle connections and a request is served."""
    api, _, context = started
    idle = [connect(api, context) for _ in range(50)]
    try:
        conn = connect(api, context)
        ask(conn, "/version")
        assert answer(conn)[0] == 200
    finally:
        for c in idle:
            c.close()
