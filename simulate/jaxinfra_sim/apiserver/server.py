"""The simulation's Kubernetes API server: read-only, over real HTTPS, authorizing every request
with RBAC, so in-cluster clients in the pods (JAX's `K8sCluster`, the `kubernetes` client,
kubectl) read the objects the cluster would hold.

Why a process of its own: the simulator forks its pods and must stay free of threads and of a server's state of its
own making, and what a pod can make the server hold must be bounded apart from the simulator's memory. So `start`
makes the TLS material and the listening socket in the simulator's process, then forks; the child serves every
connection from one event loop (connections.py: no thread per connection), raising its own descriptor limit to what
its connections need. The parent keeps a pipe to it (`publish` sends a new attempt's objects, the child
acknowledges) and `close` kills and reaps it, which also closes the port. The child exits by itself when the
simulator dies (the pipe's end of file, and PR_SET_PDEATHSIG).

How it reads requests and writes answers on the wire is wire.py's; how long and how much each client may hold is
bounds.py's (kube-apiserver's limits, and the simulator's own where it has none); what a request is answered,
serving.py's; what a request asks and the bodies it is answered with, request.py's and list_options.py's; what it
holds, and how it lists and selects, objects.py's; who may read what, rbac.py's.
"""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import json
import os
import resource
import signal
import socket
import ssl
import struct
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from jaxinfra import interrupts
from jaxinfra_sim.apiserver.bounds import DEFAULT, Bounds
from jaxinfra_sim.apiserver.connections import Connections
from jaxinfra_sim.apiserver.rbac import Subject
from jaxinfra_sim.apiserver.request import parse_request, to_json
from jaxinfra_sim.apiserver.server_log import Log
from jaxinfra_sim.apiserver.serving import Api
from jaxinfra_sim.core import fds
from jaxinfra_sim.core.errors import ApiServerError

__all__ = ["ApiServer", "Bounds", "parse_request"]

SERVICE_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
"""The names a real API server's certificate carries besides its address (the `kubernetes` Service)."""

START_TIMEOUT_S = 10.0
"""How long `start` and `publish` wait for the server's answer before giving up on it."""


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


def _message(fd: int) -> list[dict] | None:
    """The objects the parent publishes next, or None once it closed the pipe (or died)."""
    header = _read_exact(fd, _HEADER.size)
    payload = _read_exact(fd, _HEADER.unpack(header)[0]) if header is not None else None
    return json.loads(payload) if payload is not None else None


def _descriptors(bounds: Bounds) -> Bounds:
    """Raise the process's soft descriptor limit to what `bounds.max_connections` needs (up to its hard limit); where
    the hard limit is lower, fewer connections."""
    need = bounds.max_connections + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        soft = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if soft != resource.RLIM_INFINITY and soft < need:
        return dataclasses.replace(bounds, max_connections=max(16, soft - 64))
    return bounds


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

    def __init__(self, host: str, tokens: Mapping[str, Subject], log: Path, bounds: Bounds = DEFAULT):
        self.host, self.tokens, self.log = host, dict(tokens), Path(log)
        self.bounds = bounds
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
                    self._serve(listener, context, objects, log_fd, from_parent, to_parent)
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

    def _serve(
        self,
        listener: socket.socket,
        context: ssl.SSLContext,
        objects: Sequence[Mapping],
        log_fd: int,
        from_parent: int,
        to_parent: int,
    ) -> None:  # pragma: no cover - the child
        """The child's work: serve until the parent's pipe closes, publishing each attempt's objects it sends."""
        bounds = _descriptors(self.bounds)
        log = Log(log_fd, bounds.max_log_bytes)
        api = Api(self.tokens, f"{self.host}:{self._port}", bounds)
        api.publish(objects, self.host, self._port)
        loop = Connections(listener, context, api, log, bounds)

        def published() -> None:
            message = _message(from_parent)
            if message is None:
                loop.running = False
                return
            api.publish(message, self.host, self._port)
            loop.end_watches()
            log(f"published {len(message)} objects (resourceVersion {api.generation})")
            os.write(to_parent, b"P")

        loop.watch_fd(from_parent, published)
        log(f"serving https://{self.host}:{self._port} (read-only; CA made for this run)")
        if bounds != self.bounds:
            log(f"serving at most {bounds.max_connections} connections (the descriptor limit)")
        os.write(to_parent, b"R" + b"%05d" % self._port)
        loop.serve_forever()

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
