"""What the simulated API server reads off the wire and out of a query, checked in-process: requests as Go's net/http
server reads them (simulate/jaxinfra_sim/apiserver/wire.py), query parameters as kube-apiserver decodes and checks them
(list_options.py), each refusal with the real server's code and words."""

from __future__ import annotations

import pytest

from jaxinfra_sim.apiserver.list_options import (
    ApiStatus,
    ListOptions,
    check_timeout,
    decode,
    go_duration,
    go_parse_int,
    resource_version,
    watch_seconds,
)
from jaxinfra_sim.apiserver.wire import Body, WireError, check_request_line, parse_head

pytestmark = pytest.mark.unit


# ---- request lines and headers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        b"GET /\r\n",
        b"GET\r\n",
        b"\x16\x03\x01\x02\x00\r\n",
        b"G(T / HTTP/1.1\r\n",
        b"GET / HTTP/1\r\n",
        b"GET x HTTP/1.1",
    ],
    ids=["http-0.9", "method-alone", "tls-bytes", "bad-method", "bad-version", "relative-target"],
)
def test_a_line_go_cannot_read_is_400_at_once(line: bytes) -> None:
    """HTTP/0.9's `GET /`, garbage, a method that is not a token, a version that does not parse, a target neither
    `/...`, `*` nor absolute: Go's "400 Bad Request", decided from the line alone."""
    with pytest.raises(WireError) as caught:
        check_request_line(line)
    assert caught.value.answer() == (
        b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
        b"400 Bad Request"
    )


@pytest.mark.parametrize(
    ("head", "code", "reason"),
    [
        (b"GET / HTTP/0.9\r\nHost: x\r\n\r\n", 400, "unsupported protocol version"),
        (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 400, "unsupported protocol version"),
        (b"GET / HTTP/1.1\r\n\r\n", 400, "missing required Host header"),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "too many Host headers"),
        (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "malformed Host header"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n", 400, ""),
        (b"GET / HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n", 400, ""),
        (b"GET / HTTP/1.1\r\nHost: x\r\nA: \x01\r\n\r\n", 400, ""),
        (b"GET / HTTP/1.1\r\n folded: first\r\nHost: x\r\n\r\n", 400, ""),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400, ""),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400, ""),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, ""),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501, ""),
    ],
)
def test_headers_go_refuses(head: bytes, code: int, reason: str) -> None:
    with pytest.raises(WireError) as caught:
        parse_head(head)
    assert (caught.value.code, caught.value.reason) == (code, reason)
    if code == 501:
        assert caught.value.answer().endswith(b"\r\n\r\nUnsupported transfer encoding")
    elif reason:
        assert caught.value.answer().startswith(f"HTTP/1.1 400 Bad Request: {reason}\r\n".encode())


def test_a_request_as_clients_send_it() -> None:
    """The kubernetes client's request: its headers by lower-cased name, a folded line joined, a chunked body's
    Content-Length dropped (RFC 7230 3.3.3), HTTP/1.0 without Host, keep-alive as Go reads it."""
    head = parse_head(
        b"POST /api/v1/namespaces/ns/pods?x=1 HTTP/1.1\r\nHost: 10.244.0.1:443\r\nAuthorization: Bearer t\r\n"
        b"X-Long: a\r\n  b\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    assert (head.method, head.target, head.version, head.length) == (
        "POST",
        "/api/v1/namespaces/ns/pods?x=1",
        (1, 1),
        None,
    )
    assert head.header("authorization") == "Bearer t" and head.header("X-Long") == "a b" and head.keep_alive
    old = parse_head(b"GET /version HTTP/1.0\nContent-Length: 0\n\n")  # bare LFs, as textproto reads them
    assert (old.version, old.length, old.keep_alive) == ((1, 0), 0, False)
    assert not parse_head(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").keep_alive


def test_a_chunked_body_is_counted_not_kept() -> None:
    body = Body(None)
    data = b"5;ext=1\r\nhello\r\n0\r\nTrailer: x\r\n\r\nNEXT"
    assert body.feed(data[:7]) == 7 and not body.done  # a size line split across reads
    used = body.feed(data[7:])
    assert body.done and body.read == 5 and data[7 + used :] == b"NEXT"
    for bad in (b"zz\r\n", b"5\r\nhelloXX", b"1" * 17 + b"\r\n", b"1" * 5000):
        with pytest.raises(WireError):
            Body(None).feed(bad)
    sized = Body(3)
    assert sized.feed(b"abcdef") == 3 and sized.done


# ---- query parameters ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "func", "expected"),
    [
        ("42", "ParseInt", 42),
        ("-9223372036854775808", "ParseInt", -(2**63)),
        ("+7", "ParseInt", 7),
        ("9223372036854775808", "ParseInt", 'strconv.ParseInt: parsing "9223372036854775808": value out of range'),
        ("1e9", "ParseInt", 'strconv.ParseInt: parsing "1e9": invalid syntax'),
        ("", "ParseInt", 'strconv.ParseInt: parsing "": invalid syntax'),
        ("99999999999999999999x", "ParseInt", 'strconv.ParseInt: parsing "99999999999999999999x": value out of range'),
        ("18446744073709551615", "ParseUint", 2**64 - 1),
        ("+1", "ParseUint", 'strconv.ParseUint: parsing "+1": invalid syntax'),
        ("abc", "ParseUint", 'strconv.ParseUint: parsing "abc": invalid syntax'),
    ],
)
def test_numbers_parse_as_strconv_parses_them(text: str, func: str, expected: int | str) -> None:
    if isinstance(expected, int):
        assert go_parse_int(text, func) == expected
    else:
        with pytest.raises(ValueError, match="^" + expected.replace("+", r"\+") + "$"):
            go_parse_int(text, func)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", 30 * 10**9),
        ("1.5h", 5400 * 10**9),
        ("-2m3.5s", -123_500_000_000),
        ("0", 0),
        ("2562047h47m16.854775807s", 2**63 - 1),
        ("5", 'time: missing unit in duration "5"'),
        ("5x", 'time: unknown unit "x" in duration "5x"'),
        ("", 'time: invalid duration ""'),
        (".s", 'time: invalid duration ".s"'),
        ("9999999999h", 'time: invalid duration "9999999999h"'),
        ("2562047h47m16.854775808s", 'time: invalid duration "2562047h47m16.854775808s"'),
    ],
)
def test_durations_parse_as_time_parse_duration_parses_them(text: str, expected: int | str) -> None:
    if isinstance(expected, int):
        assert go_duration(text) == expected
    else:
        with pytest.raises(ValueError) as caught:
            go_duration(text)
        assert str(caught.value) == expected


def _refused(call: object, *args: object) -> tuple[int, dict]:
    with pytest.raises(ApiStatus) as caught:
        call(*args)  # type: ignore[operator]
    return caught.value.code, caught.value.body


def test_a_bad_number_is_400_with_strconvs_words() -> None:
    code, body = _refused(decode, {"watch": "1", "timeoutSeconds": "99999999999999999999"})
    assert (code, body["reason"]) == (400, "BadRequest")
    assert body["message"] == 'strconv.ParseInt: parsing "99999999999999999999": value out of range'
    assert _refused(decode, {"limit": "ten"})[1]["message"] == 'strconv.ParseInt: parsing "ten": invalid syntax'
    code, body = _refused(check_timeout, {"timeout": "5x"})
    assert (code, body["message"]) == (
        400,
        'invalid timeout specified in the request URL - time: unknown unit "x" in duration "5x"',
    )
    check_timeout({"timeout": "30s"})


def test_list_options_are_validated_as_validate_list_options_validates_them() -> None:
    code, body = _refused(decode, {"resourceVersionMatch": "Exact", "sendInitialEvents": "true"})
    assert code == 422 and body["reason"] == "Invalid"
    assert body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden '
        "unless resourceVersion is provided, sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list]"
    )
    assert body["details"] == {
        "group": "meta.k8s.io",
        "kind": "ListOptions",
        "causes": [
            {
                "reason": "FieldValueForbidden",
                "message": "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                "field": "resourceVersionMatch",
            },
            {
                "reason": "FieldValueForbidden",
                "message": "Forbidden: sendInitialEvents is forbidden for list",
                "field": "sendInitialEvents",
            },
        ],
    }
    message = _refused(decode, {"resourceVersion": "1", "resourceVersionMatch": "Newest"})[1]["message"]
    assert message.endswith('Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""')
    message = _refused(decode, {"watch": "true", "sendInitialEvents": "true"})[1]["message"]
    assert message.endswith("sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
    watch = decode({"watch": "yes", "sendInitialEvents": "1", "resourceVersionMatch": "NotOlderThan"})
    assert watch.watch and watch.send_initial_events  # any value but "0" and "false" is true
    assert not decode({"watch": "False"}).watch


def test_resource_versions_are_checked_as_storage_checks_them() -> None:
    assert resource_version("", 3, listing=True) == 0 and resource_version("2", 3, listing=False) == 2
    code, body = _refused(resource_version, "abc", 3, True)
    assert (code, body["message"]) == (
        400,
        'invalid resource version: resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": '
        "invalid syntax",
    )
    code, body = _refused(resource_version, "-1", 3, False)  # a watch's: the storage error no Status was made of
    assert (code, "reason" in body, body["message"]) == (
        500,
        False,
        'resourceVersion: Invalid value: "-1": strconv.ParseUint: parsing "-1": invalid syntax',
    )
    with pytest.raises(ApiStatus) as caught:
        resource_version("9", 3, listing=False)
    assert (caught.value.code, caught.value.headers) == (504, (("Retry-After", "1"),))
    assert caught.value.body["message"] == "Timeout: Too large resource version: 9, current: 3"


def test_a_watchs_timeout_is_gos_duration() -> None:
    assert watch_seconds(ListOptions(timeout_seconds=5), 1800) == 5
    assert 1800 <= watch_seconds(ListOptions(), 1800) < 3600  # none: MinRequestTimeout times [1, 2)
    assert watch_seconds(ListOptions(timeout_seconds=-1), 1800) < 0  # ends at once
    assert watch_seconds(ListOptions(timeout_seconds=9223372037), 1800) < 0  # time.Duration wraps past int64
    assert watch_seconds(ListOptions(timeout_seconds=9223372036), 1800) > 9e9
