"""What the simulated API server holds for its clients at most, and for how long: each bound in one place,
kube-apiserver's value where it has one (the sources below), the simulator's own where kube-apiserver bounds nothing
(its connections cost it goroutines and file descriptors; here they cost a process a pod may not grow without end).

Sources:
- kubernetes/kubernetes @ 0072a2a3c378 staging/src/k8s.io/apiserver/pkg/server/secure_serving.go `Serve`: the
  http.Server's `MaxHeaderBytes: 1 << 20`, `IdleTimeout: 90s` ("matches http.DefaultTransport keep-alive timeout"),
  `ReadHeaderTimeout: 32s` ("just shy of requestTimeoutUpperBound"); HTTP/2 (100 streams a connection, 256 KiB
  frames) is not served here: the server offers no ALPN, so clients speak HTTP/1.1, as they do where h2 is disabled;
- golang/go @ 003dbc4cda6a src/net/http/server.go: `initialReadLimitSize` (MaxHeaderBytes + 4096 "bufio slop"),
  `tlsHandshakeTimeout` (the least of ReadHeaderTimeout, ReadTimeout, WriteTimeout: the handshake's bound is the
  header timeout), `maxPostHandlerReadBytes` (256 KiB: the unread body a server reads away to keep a connection;
  past it the reply says `Connection: close`), `closeWriteAndWait` (`rstAvoidanceDelay`, 500 ms);
- kubernetes/apiserver @ 24a394e516bf pkg/server/config.go `NewConfig`: `MaxRequestsInFlight: 400`,
  `MaxMutatingRequestsInFlight: 200`, `RequestTimeout: 60s` (`--request-timeout`), `MinRequestTimeout: 1800`
  (a watch without `timeoutSeconds` lasts 1800-3600 s, handlers/get.go `ListResource`), `MaxRequestBodyBytes: 3 MiB`
  (`--max-request-body-bytes`, "2x as the largest request body size" etcd accepts);
- kubernetes/apiserver @ 24a394e516bf pkg/server/filters/maxinflight.go `retryAfter` (1 s).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bounds:
    """The API server's limits on what its clients may hold (tests shorten the timeouts)."""

    max_header_bytes: int = 1 << 20
    """secure_serving.go MaxHeaderBytes: a request line and headers past this (plus Go's 4096 bytes of slop) are
    answered 431 Request Header Fields Too Large and the connection closed."""
    header_slop_bytes: int = 4096
    """Go's initialReadLimitSize adds this to MaxHeaderBytes."""
    read_header_timeout_s: float = 32.0
    """secure_serving.go ReadHeaderTimeout: a request's line and headers must arrive within this of its first byte
    (of the TLS handshake's end, for a connection's first request), else the connection is closed unanswered; the
    TLS handshake's own bound too (Go's tlsHandshakeTimeout)."""
    idle_timeout_s: float = 90.0
    """secure_serving.go IdleTimeout: a kept-alive connection that sends no next request within this is closed."""
    max_request_body_bytes: int = 3 << 20
    """config.go MaxRequestBodyBytes (--max-request-body-bytes): a write's body past this is answered 413
    RequestEntityTooLarge (handlers/rest.go limitedReadBody) and, being unread, closes the connection."""
    post_handler_read_bytes: int = 256 << 10
    """Go's maxPostHandlerReadBytes: a body the answer did not need is read away up to this to keep the connection;
    past it the answer says `Connection: close`."""
    request_timeout_s: float = 60.0
    """config.go RequestTimeout (--request-timeout): a request other than a watch that is not done within this (its
    body not read, its answer not written) is cut off: 504 Timeout where nothing was written yet, else the
    connection closed (filters/timeout.go)."""
    min_request_timeout_s: int = 1800
    """config.go MinRequestTimeout (--min-request-timeout): a watch without timeoutSeconds ends after this times a
    random factor in [1, 2) (handlers/get.go ListResource)."""
    max_requests_inflight: int = 400 + 200
    """--max-requests-inflight + --max-mutating-requests-inflight, API Priority and Fairness's whole concurrency
    limit (kube-apiserver's BuildPriorityAndFairness): the requests served at once, a held watch among them (here a
    watch holds its seat until it ends); one more, once authenticated, is answered 429 with Retry-After."""
    retry_after_s: int = 1
    """maxinflight.go retryAfter."""
    linger_s: float = 0.5
    """Go's rstAvoidanceDelay: how long a connection closed after an answer (its request's body unread) is read away
    before it is closed, so the client reads the answer before the reset an unread body causes."""
    max_connections: int = 2048
    """The simulator's own bound (kube-apiserver bounds no connections, only its file descriptors): the connections
    held open at once (each about 16 KiB of the server's memory); at it, a new one takes the place of the one without
    an in-flight seat that has waited longest (idle, or slow to send its request)."""
    max_connections_per_client: int = 1024
    """The simulator's own: the connections one client address may hold open; one more is closed at once, so a pod
    that opens connections without end cannot take the others' places."""
    head_allowance_bytes: int = 8 << 10
    """The simulator's own: the bytes of a request line and headers every connection may hold while they arrive."""
    head_budget_bytes: int = 32 << 20
    """The simulator's own: the bytes past their allowances all connections may hold together for requests' lines and
    headers (a head may be up to MaxHeaderBytes); a head that would take more than is left is answered 431."""
    max_log_bytes: int = 64 << 20
    """The simulator's own: the API server's log stops (with a line that says so) past this, so a pod's requests
    cannot fill the disk."""

    @property
    def head_limit(self) -> int:
        """The most bytes a request's line and headers may take: Go's initialReadLimitSize."""
        return self.max_header_bytes + self.header_slop_bytes


DEFAULT = Bounds()
