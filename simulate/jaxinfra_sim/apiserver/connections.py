"""The simulated API server's connections: one thread, one event loop (`selectors`), every connection a small record,
none a thread; what each may hold and for how long is `Bounds`', so no client, and no number of them, grows the server
past a fixed size or keeps it from answering the others.

A connection's life, as Go's net/http server lives it for kube-apiserver (golang/go @ 003dbc4cda6a
src/net/http/server.go `(*conn).serve`, `readRequest`, `closeWriteAndWait`, `(*chunkWriter).writeHeader`):
- TLS handshake, within the header timeout (Go's tlsHandshakeTimeout); a client speaking plain HTTP gets Go's
  unencrypted 400;
- a request's line is checked as soon as it is in (HTTP/0.9, garbage: 400 at once, closed), its line and headers
  must arrive within ReadHeaderTimeout of its first byte (of the handshake's end, for the first) and fit
  MaxHeaderBytes (431), else the connection is closed (unanswered on a timeout, as Go does);
- the answer (serving.py) comes before the body is read: a refused request's body is read away up to Go's
  maxPostHandlerReadBytes (else `Connection: close`), an allowed write's up to MaxRequestBodyBytes (413 past it,
  without reading the rest); bodies are counted, never kept; a body or an answer not through within
  --request-timeout: 504, or closed;
- one request at a time: the next is not read until the answer is written (pipelined bytes wait in the kernel);
- a watch holds its connection (and one of the in-flight seats) until its timeout or the next attempt (`end_watches`);
- kept alive, a connection that sends nothing for IdleTimeout is closed; a connection closed after an answer is read
  away for rstAvoidanceDelay first, so its client reads the answer before the reset.
Beyond what Go bounds (the simulator's own, `Bounds`): the connections held at once (at the cap, the one without an
in-flight seat that has waited longest gives way to a new one) and per client address, the bytes all connections
together may hold for request heads, the log's size.
"""

from __future__ import annotations

import enum
import errno
import heapq
import itertools
import selectors
import socket
import ssl
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jaxinfra_sim.apiserver.bounds import DEFAULT, Bounds
from jaxinfra_sim.apiserver.server_log import Log
from jaxinfra_sim.apiserver.wire import (
    CONTINUE,
    NOT_TLS,
    Body,
    Head,
    WireError,
    answer_head,
    check_request_line,
    chunk,
    head_end,
    line_end,
    parse_head,
)

if TYPE_CHECKING:
    from jaxinfra_sim.apiserver.serving import Api, Reply

READ, WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE
RECORD = 16 << 10  # a TLS record's payload: what one send takes at most
TURN = 256 << 10  # what one connection may read in one turn of the loop before the others get theirs
ACCEPTS = 64  # connections accepted in one turn
LOGGED_TARGET = 512  # the characters of a request's target a log line keeps


class Phase(enum.Enum):
    HANDSHAKE = "handshake"
    HEAD = "head"  # idle, or a request's line and headers arriving, or its answer being written
    BODY = "body"  # a request's body being read (counted), its answer waiting
    WATCH = "watch"  # a watch held open
    LINGER = "linger"  # answered and closing: whatever still comes is read away for a moment


@dataclass(eq=False, slots=True)
class Conn:
    """One connection's state: what it holds (bounded by `Bounds`), where it is in its life, and until when."""

    sock: ssl.SSLSocket
    client: str
    phase: Phase = Phase.HANDSHAKE
    open: bool = True
    inbuf: bytearray = field(default_factory=bytearray)
    scanned: int = 0  # how far `inbuf` was searched for the end of the line or headers
    line_ok: bool = False  # the request line in `inbuf` was checked
    started: bool = False  # a request's first byte arrived (its header timeout runs)
    out: deque[memoryview] = field(default_factory=deque)
    since: float = 0.0  # when it was accepted, its last answer written, or its request begun
    until: float = 0.0  # the phase's deadline
    write_by: float | None = None  # when the pending answer must be written by
    deadline: float = 0.0  # the earlier of the two, as scheduled
    body: Body | None = None
    body_limit: int = 0
    pending: Reply | None = None  # the answer waiting for the body to be read
    close_after: bool = False
    seat: bool = False
    charged: int = 0  # head bytes charged to the shared budget
    want_write: bool = False  # a TLS read or handshake waits for the socket to be writable
    eof: bool = False
    mask: int = 0
    method: str = "-"
    target: str = "-"
    who: str = "-"


class Connections:
    """The event loop: a listener, its connections, other descriptors' callbacks (the parent's pipe)."""

    def __init__(self, listener: socket.socket, context: ssl.SSLContext, api: Api, log: Log, bounds: Bounds = DEFAULT):
        self.listener, self.context, self.api, self.log, self.bounds = listener, context, api, log, bounds
        self.selector = selectors.DefaultSelector()
        listener.setblocking(False)
        self.selector.register(listener, READ, None)
        self.listening, self.resume_at = True, 0.0
        self.conns: set[Conn] = set()
        self.per_client: Counter[str] = Counter()
        self.watches: set[Conn] = set()
        self.ready: set[Conn] = set()  # to serve again without waiting for the selector
        self.inflight = 0
        self.head_charged = 0
        self.timers: list[tuple[float, int, Conn]] = []
        self.order = itertools.count()
        self.running = True

    def watch_fd(self, fd: int, callback: Callable[[], None]) -> None:
        self.selector.register(fd, READ, callback)

    def serve_forever(self) -> None:
        while self.running:
            self.turn()

    def turn(self, longest_s: float = 1.0) -> None:
        """One turn of the loop: wait for events (or the next deadline), serve them, expire deadlines."""
        now = time.monotonic()
        wait = 0.0 if self.ready else max(0.0, min(self._next_deadline(now) - now, longest_s))
        for key, mask in self.selector.select(wait):
            if key.data is None:
                self._accept()
            elif isinstance(key.data, Conn):
                self._serve(key.data, mask)
            else:
                key.data()
        for conn in list(self.ready):
            self.ready.discard(conn)
            if conn.open:
                self._serve(conn, READ)
        self._expire(time.monotonic())

    def end_watches(self) -> None:
        """A new attempt: every watch ends (its stream closes; the client lists again)."""
        for conn in list(self.watches):
            self._end_watch(conn)
            self._update(conn)

    # ---- accepting ------------------------------------------------------------------------------------------

    def _accept(self) -> None:
        b = self.bounds
        for _ in range(ACCEPTS):
            full = len(self.conns) >= b.max_connections
            idlest = self._idlest() if full else None
            if full and idlest is None:
                return self._pause(None)
            try:
                sock, address = self.listener.accept()
            except BlockingIOError:
                return
            except OSError as e:  # out of descriptors: wait a moment, as Go's Serve does
                self.log(f"accept failed: {e!r}")
                return self._pause(time.monotonic() + 0.1 if e.errno in (errno.EMFILE, errno.ENFILE) else None)
            client = str(address[0])
            if self.per_client[client] >= b.max_connections_per_client:
                sock.close()
                self.log(f"connection from {client} closed: it holds {b.max_connections_per_client} already")
                continue
            if idlest is not None:
                message = f"connection from {idlest.client} closed: waited longest of the {b.max_connections} held"
                self._close(idlest, message)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                tls = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            except OSError as e:
                sock.close()
                self.log(f"connection from {client} failed: {e!r}")
                continue
            now = time.monotonic()
            conn = Conn(tls, client, until=now + b.read_header_timeout_s, since=now)
            self.conns.add(conn)
            self.per_client[client] += 1
            self._update(conn)

    def _idlest(self) -> Conn | None:
        """At the connection cap, the connection that holds no in-flight seat and has waited longest since it was
        accepted, answered, or began its request (so an idle one, or a request's line and headers that are slow to
        come): closed to make room for a new one, so clients that ask are served and those that only hold connections
        give way. None where every connection holds a seat (a new one then waits in the listen backlog)."""
        return min((c for c in self.conns if not c.seat), key=lambda c: c.since, default=None)

    def _pause(self, until: float | None) -> None:
        """Stop accepting: until a connection closes (None), or for a moment."""
        if self.listening:
            self.selector.unregister(self.listener)
            self.listening = False
        self.resume_at = until or 0.0

    def _resume(self) -> None:
        if not self.listening and len(self.conns) < self.bounds.max_connections:
            self.selector.register(self.listener, READ, None)
            self.listening, self.resume_at = True, 0.0

    # ---- serving one connection ----------------------------------------------------------------------------------

    def _serve(self, conn: Conn, mask: int) -> None:
        try:
            if conn.phase is Phase.HANDSHAKE:
                self._handshake(conn)
            else:
                if conn.out:
                    self._flush(conn)
                if conn.open and (mask & READ or conn.want_write):
                    self._read(conn)
                if conn.open:
                    self._advance(conn)
        except Exception as e:  # noqa: BLE001 - one connection's trouble never stops the server
            self._close(conn, f"connection from {conn.client} failed: {e!r}")
        self._update(conn)

    def _handshake(self, conn: Conn) -> None:
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            conn.want_write = False
            return
        except ssl.SSLWantWriteError:
            conn.want_write = True
            return
        except ssl.SSLError as e:
            if e.reason == "HTTP_REQUEST":  # plain HTTP: Go's answer, unencrypted
                try:
                    socket.socket.send(conn.sock, NOT_TLS)
                except OSError:
                    pass
            return self._close(conn, f"TLS handshake with {conn.client} failed: {e.reason or e}")
        except OSError as e:
            return self._close(conn, f"TLS handshake with {conn.client} failed: {e!r}")
        conn.phase, conn.want_write = Phase.HEAD, False
        conn.until = time.monotonic() + self.bounds.read_header_timeout_s  # the first request's header timeout
        self.ready.add(conn)  # its first bytes may be in the TLS layer already

    def _room(self, conn: Conn) -> int:
        """How many bytes may be read from the connection now."""
        b = self.bounds
        if not conn.open or conn.phase is Phase.HANDSHAKE:
            return 0
        if conn.phase is Phase.LINGER:
            return 1 << 16
        if conn.phase is Phase.BODY:
            return 0 if conn.body is None or conn.body.done else 1 << 16
        if conn.phase is Phase.WATCH:  # only to see the client go; a client that sends more is not read further
            return b.head_allowance_bytes - len(conn.inbuf)
        if conn.out or conn.close_after or conn.pending is not None:
            return 0  # an answer is being written: the next request waits
        budget_left = b.head_budget_bytes - self.head_charged + conn.charged
        return min(b.head_limit, b.head_allowance_bytes + max(0, budget_left)) - len(conn.inbuf)

    def _read(self, conn: Conn) -> None:
        conn.want_write = False
        left = TURN
        while left > 0:
            room = self._room(conn)
            if room <= 0:
                return
            try:
                data = conn.sock.recv(min(room, 1 << 16))
            except ssl.SSLWantReadError:
                return
            except ssl.SSLWantWriteError:
                conn.want_write = True
                return
            except BlockingIOError:  # lingering: the TLS layer is dropped, the socket read as it is
                return
            except OSError:  # a reset, a TLS error: the client is gone
                conn.eof = True
                return
            if not data:
                conn.eof = True
                return
            left -= len(data)
            if conn.phase is Phase.LINGER:
                continue
            if conn.phase is Phase.BODY and conn.body is not None:
                used = conn.body.feed(data)
                data = data[used:]
            if data:
                conn.inbuf += data
                self._charge(conn)
        self.ready.add(conn)  # its turn is over; it is served again before the loop waits

    def _charge(self, conn: Conn) -> None:
        charge = max(0, len(conn.inbuf) - self.bounds.head_allowance_bytes)
        self.head_charged += charge - conn.charged
        conn.charged = charge

    def _advance(self, conn: Conn) -> None:
        """Whatever the bytes in hand allow: the next request's line and headers, the body, the end."""
        b = self.bounds
        while conn.open:
            if conn.phase is Phase.BODY:
                return self._body(conn)
            if conn.phase in (Phase.WATCH, Phase.LINGER):
                if conn.eof:
                    self._close(conn)
                return
            if conn.out or conn.pending is not None:
                return
            if conn.close_after:
                return self._linger(conn)
            if not conn.inbuf:
                if conn.eof:
                    self._close(conn)
                return
            if not conn.started:
                conn.started, conn.since = True, time.monotonic()
                conn.until = conn.since + b.read_header_timeout_s
            if not conn.line_ok:
                end = line_end(conn.inbuf, conn.scanned)
                if end < 0:
                    return self._short(conn)
                try:
                    check_request_line(bytes(conn.inbuf[:end]))
                except WireError as e:
                    return self._refuse(conn, e)
                conn.line_ok = True
                conn.scanned = end - 1
            end = head_end(conn.inbuf, max(0, conn.scanned - 2))
            if end < 0:
                return self._short(conn)
            try:
                head = parse_head(bytes(conn.inbuf[:end]))
            except WireError as e:
                return self._refuse(conn, e)
            del conn.inbuf[:end]
            self._charge(conn)
            conn.scanned, conn.line_ok, conn.started = 0, False, False
            self._dispatch(conn, head)

    def _short(self, conn: Conn) -> None:
        """A request's line or headers not all in: wait, unless they cannot fit or the client is gone."""
        b = self.bounds
        conn.scanned = len(conn.inbuf)
        if len(conn.inbuf) >= b.head_limit:
            self._refuse(conn, WireError(431))
        elif self._room(conn) <= 0:
            self.log(f"431 from {conn.client}: the API server's header budget is spent ({b.head_budget_bytes} bytes)")
            self._refuse(conn, WireError(431))
        elif conn.eof:
            self._close(conn)

    def _refuse(self, conn: Conn, error: WireError) -> None:
        """A request Go cannot read: its answer as Go writes it, then the connection closes."""
        self.log(
            f"{error.code} - - from {conn.client}: malformed request" + (f" ({error.reason})" if error.reason else "")
        )
        conn.inbuf.clear()
        self._charge(conn)
        conn.close_after, conn.until = True, time.monotonic() + self.bounds.request_timeout_s
        self._queue(conn, error.answer())

    def _dispatch(self, conn: Conn, head: Head) -> None:
        b = self.bounds
        reply = self.api.answer(head, overloaded=self.inflight >= b.max_requests_inflight)
        conn.method, conn.target, conn.who = head.method, head.target[:LOGGED_TARGET], reply.who
        if reply.seat:
            self.inflight += 1
            conn.seat = True
        conn.until = time.monotonic() + b.request_timeout_s
        close = not head.keep_alive
        if reply.read_body:  # an allowed write: its body is read, up to MaxRequestBodyBytes
            if head.length is not None and head.length > b.max_request_body_bytes:
                return self._answer(conn, self.api.too_large(reply.who), close=True)  # its body is never read
            if head.expects_continue:
                self._queue(conn, CONTINUE)
            conn.body, conn.body_limit = Body(head.length), b.max_request_body_bytes
        elif head.length != 0:  # a body the answer does not need: read away if small, else the connection closes
            if head.expects_continue or (head.length is not None and head.length >= b.post_handler_read_bytes):
                return self._answer(conn, reply, close=True)
            conn.body, conn.body_limit = Body(head.length), b.post_handler_read_bytes
        if conn.body is not None and not conn.body.done:
            conn.phase, conn.pending = Phase.BODY, reply
            return self._body(conn)
        conn.body = None
        self._answer(conn, reply, close)

    def _body(self, conn: Conn) -> None:
        body, reply = conn.body, conn.pending
        assert body is not None and reply is not None
        if conn.inbuf and not body.done:
            try:
                used = body.feed(conn.inbuf)
            except WireError as e:
                return self._close(conn, f"{conn.method} {conn.target} {conn.who}: malformed body ({e.reason})")
            del conn.inbuf[:used]
            self._charge(conn)
        if body.read > conn.body_limit:
            conn.body = conn.pending = None
            if reply.read_body:
                return self._answer(conn, self.api.too_large(reply.who), close=True)
            return self._answer(conn, reply, close=True)
        if body.done:
            conn.body = conn.pending = None
            return self._answer(conn, reply, close=False)
        if conn.eof:  # the client stopped sending: a body read away is answered all the same, a write's is not
            conn.body = conn.pending = None
            if reply.read_body:
                return self._close(conn)
            self._answer(conn, reply, close=True)

    def _answer(self, conn: Conn, reply: Reply, close: bool) -> None:
        conn.phase, conn.close_after = Phase.HEAD, close or conn.close_after
        if reply.watch_s is not None:  # held (and its seat with it) until it ends
            conn.phase, conn.until = Phase.WATCH, time.monotonic() + max(0.0, reply.watch_s)
            self.watches.add(conn)
            self._queue(conn, answer_head(200, [("Content-Type", reply.content_type)], None, False) + reply.body)
        else:
            conn.until = time.monotonic() + self.bounds.request_timeout_s  # to be written by then
            headers = [("Content-Type", reply.content_type), *reply.headers]
            data = answer_head(reply.code, headers, len(reply.body), conn.close_after)
            self._queue(conn, data if conn.method == "HEAD" else data + reply.body)
        self.log(f"{reply.code} {conn.method} {conn.target} {conn.who}" + (f" {reply.note}" if reply.note else ""))

    def _end_watch(self, conn: Conn) -> None:
        self.watches.discard(conn)
        conn.phase, conn.until = Phase.HEAD, time.monotonic() + self.bounds.request_timeout_s
        self._queue(conn, chunk(b""))

    def _queue(self, conn: Conn, data: bytes) -> None:
        if not conn.out:
            conn.write_by = time.monotonic() + self.bounds.request_timeout_s
        conn.out.append(memoryview(data))
        self._flush(conn)

    def _flush(self, conn: Conn) -> None:
        while conn.out and conn.open:
            view = conn.out[0]
            try:
                sent = conn.sock.send(view[:RECORD])
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError):
                return
            except OSError:
                return self._close(conn)
            if sent >= len(view):
                conn.out.popleft()
            else:
                conn.out[0] = view[sent:]
        if not conn.open or conn.out:
            return
        conn.write_by = None
        if conn.phase is Phase.HEAD and conn.pending is None:  # the answer is out
            if conn.seat:
                self.inflight -= 1
                conn.seat = False
            if conn.close_after:
                return self._linger(conn)
            conn.since = time.monotonic()
            conn.until = conn.since + self.bounds.idle_timeout_s
            conn.started = False
            if conn.inbuf:
                self.ready.add(conn)  # a pipelined request

    def _linger(self, conn: Conn) -> None:
        """The answer is out and the connection closes: its write side now, its read side after a moment."""
        try:
            conn.sock.shutdown(socket.SHUT_WR)  # plain FIN (the TLS layer is dropped: what comes is read away)
        except OSError:
            return self._close(conn)
        conn.phase, conn.until = Phase.LINGER, time.monotonic() + self.bounds.linger_s
        conn.inbuf.clear()
        self._charge(conn)

    def _close(self, conn: Conn, why: str = "") -> None:
        if not conn.open:
            return
        conn.open = False
        if conn.mask:
            self.selector.unregister(conn.sock)
            conn.mask = 0
        try:
            conn.sock.close()
        except OSError:
            pass
        self.conns.discard(conn)
        self.watches.discard(conn)
        self.ready.discard(conn)
        self.per_client[conn.client] -= 1
        if self.per_client[conn.client] <= 0:
            del self.per_client[conn.client]
        if conn.seat:
            self.inflight -= 1
            conn.seat = False
        conn.inbuf = bytearray()
        self._charge(conn)
        conn.out.clear()
        if why:
            self.log(why)
        if self.resume_at == 0.0:
            self._resume()

    def _update(self, conn: Conn) -> None:
        """Register the events the connection waits for, and its deadline."""
        if not conn.open:
            return
        if conn.phase is Phase.HANDSHAKE:
            events = WRITE if conn.want_write else READ
        else:
            room = self._room(conn)
            events = (WRITE if conn.out or conn.want_write else 0) | (READ if room > 0 else 0)
            if room > 0 and conn.phase is not Phase.LINGER and conn.sock.pending():
                self.ready.add(conn)
        if events != conn.mask:
            if not conn.mask:
                self.selector.register(conn.sock, events, conn)
            elif not events:
                self.selector.unregister(conn.sock)
            else:
                self.selector.modify(conn.sock, events, conn)
            conn.mask = events
        deadline = conn.until if conn.write_by is None else min(conn.until, conn.write_by)
        if deadline != conn.deadline:
            conn.deadline = deadline
            heapq.heappush(self.timers, (deadline, next(self.order), conn))

    # ---- time ------------------------------------------------------------------------------------------------

    def _next_deadline(self, now: float) -> float:
        while self.timers and (not self.timers[0][2].open or self.timers[0][2].deadline != self.timers[0][0]):
            heapq.heappop(self.timers)
        if len(self.timers) > 4 * len(self.conns) + 64:  # stale entries: rebuild
            self.timers = [(c.deadline, next(self.order), c) for c in self.conns]
            heapq.heapify(self.timers)
        soonest = self.timers[0][0] if self.timers else now + 3600
        return min(soonest, self.resume_at) if self.resume_at else soonest

    def _expire(self, now: float) -> None:
        if self.resume_at and now >= self.resume_at:
            self.resume_at = 0.0
            self._resume()
        while self.timers and self.timers[0][0] <= now:
            when, _, conn = heapq.heappop(self.timers)
            if conn.open and conn.deadline == when:
                try:
                    self._timeout(conn, now)
                except Exception as e:  # noqa: BLE001
                    self._close(conn, f"connection from {conn.client} failed: {e!r}")
                if conn.open and min(conn.until, conn.write_by or conn.until) <= now:  # never left without a timer
                    self._close(conn, f"connection from {conn.client} closed: its {conn.phase.value} timed out")
                self._update(conn)

    def _timeout(self, conn: Conn, now: float) -> None:
        b = self.bounds
        if conn.out and (conn.phase is Phase.HEAD or (conn.write_by is not None and conn.write_by <= now)):
            return self._close(
                conn, f"{conn.method} {conn.target} {conn.who}: answer unread for {b.request_timeout_s:g} s"
            )
        if conn.phase is Phase.HANDSHAKE:
            return self._close(
                conn, f"connection from {conn.client} closed: no TLS handshake in {b.read_header_timeout_s:g} s"
            )
        if conn.phase is Phase.HEAD:
            if conn.started or conn.inbuf:
                return self._close(
                    conn,
                    f"connection from {conn.client} closed: no request in {b.read_header_timeout_s:g} s",
                )
            return self._close(conn)  # idle: closed quietly, as Go closes it
        if conn.phase is Phase.BODY:
            reply = conn.pending
            assert reply is not None
            conn.body = conn.pending = None
            return self._answer(conn, self.api.timed_out(reply.who) if reply.read_body else reply, close=True)
        if conn.phase is Phase.WATCH:
            return self._end_watch(conn)
        self._close(conn)  # lingered long enough
