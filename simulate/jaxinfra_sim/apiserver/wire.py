"""HTTP/1.x on the simulated API server's connections, as Go's net/http server reads and writes it (kube-apiserver is
that server): a request's line and headers, checked as they arrive, the body's framing, and the bytes of an answer.
Nothing here does I/O (connections.py does).

What Go refuses, and how (golang/go @ 003dbc4cda6a src/net/http/server.go `(*conn).serve`, `readRequest`,
`http1ServerSupportsRequest`; request.go `readRequest`, `parseRequestLine`, `validMethod`, `ParseHTTPVersion`;
transfer.go `readTransfer`, `parseTransferEncoding`, `fixLength`, `parseContentLength`; net/textproto
`ReadMIMEHeader`; net/url `ParseRequestURI`; internal/chunked.go `readChunkLine`, 4096-byte lines):
- a request line that is not `METHOD SP target SP HTTP/x.y` (HTTP/0.9's `GET /`, garbage), a method that is not a
  token, a version that does not parse, a target with a control character or neither `/...`, `*` nor absolute:
  400 as soon as the line is in (nothing else is awaited);
- a header line without a colon, a name that is not a token, a value with a control character, a folded first line;
  an HTTP/1.1 request without exactly one valid Host; differing Content-Lengths, a bad one: 400 once the headers are in
  (`400 Bad Request`, with Go's reason where Go gives one: "missing required Host header", "unsupported protocol
  version" for HTTP/0.x and 2+, ...);
- a line and headers past MaxHeaderBytes + 4096: 431; a Transfer-Encoding other than one `chunked`: 501;
each as Go writes it: text/plain, `Connection: close`, no Content-Length, then the connection closed.
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import urlsplit

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 7230 tchar: Go's validMethod, header names
_CTL = re.compile(rb"[\x00-\x1f\x7f]")  # net/url stringContainsCTLByte
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")  # textproto validHeaderValueByte: CTLs but HT
_HOST = re.compile(rb"[0-9A-Za-z!$%&'()*+,\-.:;=\[\]_~]*")  # httpguts validHostByte
_VERSION = re.compile(rb"HTTP/([0-9])\.([0-9])")  # ParseHTTPVersion: one digit each
_ABSOLUTE = re.compile(rb"[A-Za-z][A-Za-z0-9+.\-]*://")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")  # chunked.go parseHexUint: at most 16 digits
CHUNK_LINE_BYTES = 4096
"""internal/chunked.go maxLineLength: a chunk's size line (or a trailer line) past this ends the connection."""


class WireError(Exception):
    """A request Go's server cannot read: answered with `code` (and Go's reason, where it gives one) and closed."""

    def __init__(self, code: int, reason: str = ""):
        super().__init__(f"{code} {reason}".strip())
        self.code, self.reason = code, reason

    def answer(self) -> bytes:
        """The bytes Go writes: status line, text/plain, Connection: close, the status again as the body."""
        phrase = HTTPStatus(self.code).phrase
        if self.code == 501:
            public, text = f"{self.code} {phrase}", "Unsupported transfer encoding"
        else:
            public = text = f"{self.code} {phrase}" + (f": {self.reason}" if self.reason else "")
        return (
            f"HTTP/1.1 {public}\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n{text}".encode()
        )


@dataclass(frozen=True)
class Head:
    """A request's line and headers, as Go's server read them."""

    method: str
    target: str
    version: tuple[int, int]
    headers: Mapping[str, tuple[str, ...]]  # by lower-cased name, in arrival order
    length: int | None  # the body's Content-Length (0 without one); None: chunked

    def header(self, name: str) -> str:
        return next(iter(self.headers.get(name.lower(), ())), "")

    @property
    def keep_alive(self) -> bool:
        """Whether the connection serves a next request after this one (Go's wantsClose, wantsHttp10KeepAlive)."""
        tokens = {t.strip().lower() for v in self.headers.get("connection", ()) for t in v.split(",")}
        return "keep-alive" in tokens if self.version < (1, 1) else "close" not in tokens

    @property
    def expects_continue(self) -> bool:
        return self.header("Expect").lower() == "100-continue"


def line_end(data: bytes | bytearray, start: int = 0) -> int:
    """Where the request line ends (after its LF), searching from `start`, or -1 while it has not."""
    at = data.find(b"\n", start)
    return at + 1 if at >= 0 else -1


def head_end(data: bytes | bytearray, start: int = 0) -> int:
    """Where the headers end (after the empty line; CRLF or bare LF, as textproto reads lines), searching from
    `start`, or -1."""
    ends = [at + n for at, n in ((data.find(b"\n\r\n", start), 3), (data.find(b"\n\n", start), 2)) if at >= 0]
    return min(ends) if ends else -1


def _lines(data: bytes) -> list[bytes]:
    """textproto's lines: split at LF, a trailing CR dropped."""
    return [line[:-1] if line.endswith(b"\r") else line for line in data.split(b"\n")]


def check_request_line(line: bytes) -> tuple[str, str, tuple[int, int]]:
    """The method, target and version of a request line (its LF optional), or the 400 Go answers at once."""
    text = _lines(line)[0]
    method, sp1, rest = text.partition(b" ")
    target, sp2, proto = rest.partition(b" ")
    version = _VERSION.fullmatch(proto)
    if not sp1 or not sp2 or not _TOKEN.fullmatch(method) or version is None:
        raise WireError(400)  # "malformed HTTP request", "invalid method", "malformed HTTP version"
    if not target or _CTL.search(target) or not (target[:1] == b"/" or target == b"*" or _ABSOLUTE.match(target)):
        raise WireError(400)  # url.ParseRequestURI: "empty url", a control character, "invalid URI for request"
    try:
        urlsplit(target.decode("latin-1"))
    except ValueError:  # an absolute target's authority that does not parse ("http://[::1/")
        raise WireError(400) from None
    return method.decode(), target.decode("latin-1"), (int(version[1]), int(version[2]))


def _headers(lines: Iterable[bytes]) -> dict[str, list[str]]:
    """textproto.ReadMIMEHeader: `Name: value` lines, a line starting with a space or tab folded into the one before
    (never the first); a missing colon, a name that is not a token, a control character in a value: 400."""
    found: dict[str, list[str]] = {}
    last: list[str] | None = None
    for line in lines:
        if line[:1] in (b" ", b"\t"):
            if last is None:
                raise WireError(400)  # "malformed MIME header initial line"
            folded = line.strip(b" \t").decode("latin-1")
            last[-1] = f"{last[-1]} {folded}".strip()
            continue
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
            raise WireError(400)  # "malformed MIME header line"
        last = found.setdefault(name.decode().lower(), [])
        last.append(value.strip(b" \t").decode("latin-1"))
    return found


def parse_head(data: bytes) -> Head:
    """A request's line and headers (through their empty line), as Go's server reads them; WireError otherwise."""
    lines = _lines(data)
    while lines and not lines[-1]:
        lines.pop()
    method, target, version = check_request_line(lines[0])
    headers = _headers(lines[1:])
    length: int | None = 0
    if version >= (1, 1) and "transfer-encoding" in headers:
        codings = headers.pop("transfer-encoding")
        if len(codings) != 1 or codings[0].lower() != "chunked":
            raise WireError(501)  # "too many transfer encodings", "unsupported transfer encoding"
        headers.pop("content-length", None)
        length = None
    elif lengths := headers.get("content-length"):
        if len(set(lengths)) > 1 or not lengths[0].isdigit() or not lengths[0].isascii() or int(lengths[0]) >= 2**63:
            raise WireError(400)  # "message cannot contain multiple Content-Length headers", "bad Content-Length"
        length = int(lengths[0])
    if version[0] != 1 and not (version == (2, 0) and method == "PRI" and target == "*"):
        raise WireError(400, "unsupported protocol version")
    hosts = headers.get("host", [])
    if version >= (1, 1) and not hosts and method != "CONNECT":
        raise WireError(400, "missing required Host header")
    if len(hosts) > 1:
        raise WireError(400, "too many Host headers")
    if hosts and not _HOST.fullmatch(hosts[0].encode("latin-1")):
        raise WireError(400, "malformed Host header")
    return Head(method, target, version, {k: tuple(v) for k, v in headers.items()}, length)


class Body:
    """A request body's framing (Content-Length or chunked), read and counted, never kept: `feed` takes what arrived
    and says how much of it was body; `done` once it ended; a malformed chunk raises WireError."""

    def __init__(self, length: int | None):
        self.left = length if length is not None else -1  # bytes of the current chunk (or the whole body) left
        self.chunked = length is None
        self.state = "size" if self.chunked else "data"  # size, data, crlf, trailer, done
        self.line = bytearray()  # a chunk's size line or a trailer line, while it arrives
        self.read = 0  # the body's bytes so far
        if not self.chunked and self.left == 0:
            self.state = "done"

    @property
    def done(self) -> bool:
        return self.state == "done"

    def feed(self, data: bytes | bytearray | memoryview) -> int:
        view, used = memoryview(data), 0
        while used < len(view) and self.state != "done":
            if self.state == "data":
                take = min(self.left, len(view) - used)
                used, self.left, self.read = used + take, self.left - take, self.read + take
                if self.left == 0:
                    self.state = "crlf" if self.chunked else "done"
                continue
            if self.state == "crlf":  # exactly CRLF after a chunk's data (chunked.go), checked byte by byte
                self.line.append(view[used])
                used += 1
                if not b"\r\n".startswith(self.line):
                    raise WireError(400, "malformed chunked encoding")
                if len(self.line) == 2:
                    self.line.clear()
                    self.state = "size"
                continue
            end = bytes(view[used : used + CHUNK_LINE_BYTES + 1]).find(b"\n")
            if end < 0:
                self.line += view[used:]
                used = len(view)
            else:
                self.line += view[used : used + end]
                used += end + 1
            if len(self.line) > CHUNK_LINE_BYTES:
                raise WireError(400, "chunk line too long")
            if end >= 0:
                self._line(bytes(self.line))
                self.line.clear()
        return used

    def _line(self, line: bytes) -> None:
        if self.state == "size":
            size = line.split(b";", 1)[0].strip(b" \t\r")
            if not _HEX.fullmatch(size):
                raise WireError(400, "invalid chunk length")
            self.left = int(size, 16)
            self.state = "data" if self.left else "trailer"
        elif self.state == "trailer" and not line.rstrip(b"\r"):
            self.state = "done"


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked answer (an empty one ends it)."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def answer_head(code: int, headers: Iterable[tuple[str, str]], length: int | None, close: bool) -> bytes:
    """An answer's status line and headers as Go writes them: the handler's sorted, then Date, Content-Length (None:
    chunked, Transfer-Encoding), Connection."""
    lines = [f"HTTP/1.1 {code} {HTTPStatus(code).phrase}"]
    lines += [f"{k}: {v}" for k, v in sorted(headers)]
    lines.append(f"Date: {email.utils.formatdate(usegmt=True)}")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if close:
        lines.append("Connection: close")
    if length is None:
        lines.append("Transfer-Encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
"""What Go writes before it reads the body of a request that asked `Expect: 100-continue`."""
NOT_TLS = b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
"""What Go writes, unencrypted, to a client that spoke HTTP to its TLS port (server.go `serve`)."""
