"""A request's query parameters as kube-apiserver decodes and checks them before it reads or streams anything: each
bad value a `Status`, with the code and words the real server gives, never an exception mid-stream.

- `timeout` (any request but a watch): Go's time.ParseDuration, else 400 "invalid timeout specified in the request
  URL - time: ..." before authentication (kubernetes/apiserver @ 24a394e516bf pkg/endpoints/filters/
  request_deadline.go `withRequestDeadline`, `parseTimeout`; golang/go @ 08d240357673 src/time/format.go
  `ParseDuration`, `leadingInt`, `leadingFraction`, `unitMap`);
- a list's or watch's ListOptions, decoded from the query: `timeoutSeconds` and `limit` by strconv.ParseInt (base 10,
  64 bits), the booleans true unless "0" or "false" (kubernetes/apimachinery @ eed236ceee2c pkg/apis/meta/v1/
  zz_generated.conversion.go `autoConvert_url_Values_To_v1_ListOptions`; pkg/runtime/conversion.go
  `Convert_Slice_string_To_Pointer_int64`, `Convert_Slice_string_To_int64`, `Convert_Slice_string_To_bool`): a value
  that does not convert is 400 BadRequest with strconv's own message (handlers/get.go `ListResource`,
  kubernetes/kubernetes @ 04e2c35d0b61);
- then ValidateListOptions (apimachinery pkg/apis/meta/internalversion/validation/validation.go; the WatchList feature
  gate on, its default since 1.34): 422 `ListOptions.meta.k8s.io "" is invalid: ...`;
- `resourceVersion` (kubernetes/apiserver @ 24a394e516bf pkg/storage/api_object_versioner.go `ParseResourceVersion`:
  "" and "0" are 0, else strconv.ParseUint): a list's bad one is 400 "invalid resource version: ..."
  (pkg/storage/interfaces.go `ValidateListOptions`); a watch's or a get's reaches the handler as a storage error
  no Status was made of, so the real server answers 500 with that message (pkg/storage/cacher/cacher.go `Watch`,
  delegator.go `Get`, handlers/responsewriters/status.go `ErrorToAPIStatus`), here too, before any byte of a
  stream; one past the server's current resourceVersion is 504 "Too large resource version" with Retry-After 1
  (pkg/storage/errors.go `NewTooLargeResourceVersionError`, cacher/watch_cache.go `waitUntilFreshAndBlock`; here at
  once, not after its 3 s wait: this server's resourceVersion only moves with a new attempt);
- a watch's `timeoutSeconds` is Go's time.Duration(n) * time.Second, overflow and all; 0 or none is
  MinRequestTimeout times a random factor in [1, 2), below 0 a watch that ends at once (handlers/get.go).
Not checked here: `continue` (this server hands out no continue tokens and serves every list whole).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from jaxinfra.admission.goformat import go_quote
from jaxinfra.admission.store import Finding
from jaxinfra.admission.validation.messages import distinct, forbidden, invalid_value, not_supported
from jaxinfra_sim.apiserver.api_errors import aggregate
from jaxinfra_sim.apiserver.request import status_body

INT64 = 1 << 63
UINT64 = 1 << 64
_FALSE = ("0", "false")  # Convert_Slice_string_To_bool: these (any case), else true
_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
NOT_OLDER_THAN, EXACT = "NotOlderThan", "Exact"
LIST_OPTIONS = ("meta.k8s.io", "ListOptions")


class ApiStatus(Exception):
    """A request answered with a metav1.Status before anything else is done for it."""

    def __init__(self, body: dict, headers: Sequence[tuple[str, str]] = ()):
        super().__init__(body["message"])
        self.code, self.body, self.headers = int(body["code"]), body, tuple(headers)


def bad_request(message: str) -> ApiStatus:
    return ApiStatus(status_body(400, "BadRequest", message))


def go_parse_int(text: str, func: str = "ParseInt") -> int:
    """strconv.ParseInt(text, 10, 64) (or ParseUint): the value, else ValueError with strconv's message; a number
    past the type's range is "value out of range" as soon as its digits pass it, whatever follows."""
    digits, negative = text, False
    if func == "ParseInt" and text[:1] in ("+", "-"):
        digits, negative = text[1:], text[0] == "-"
    number, why = 0, "invalid syntax" if not digits else ""
    for ch in digits:
        if not "0" <= ch <= "9":
            why = "invalid syntax"
            break
        number = number * 10 + ord(ch) - 48
        if number >= UINT64:
            why = "value out of range"
            break
    if not why and func == "ParseInt" and (number > INT64 or (number == INT64 and not negative)):
        why = "value out of range"
    if why:
        raise ValueError(f"strconv.{func}: parsing {go_quote(text)}: {why}")
    return -number if negative else number


def _time_quote(text: str) -> str:
    """The time package's own quote: bytes past ASCII and below space as \\xNN, `"` and `\\` escaped."""
    out = []
    for ch in text:
        if ord(ch) < 0x20 or ord(ch) >= 0x80:
            out += [f"\\x{b:02x}" for b in ch.encode("utf-8", "replace")]
        else:
            out.append("\\" + ch if ch in '"\\' else ch)
    return '"' + "".join(out) + '"'


def go_duration(text: str) -> int:
    """time.ParseDuration: nanoseconds, else ValueError with its message."""
    invalid = ValueError(f"time: invalid duration {_time_quote(text)}")
    rest, negative, total = text, False, 0
    if rest[:1] in ("+", "-"):
        negative, rest = rest[0] == "-", rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise invalid
    while rest:
        if not (rest[0] == "." or "0" <= rest[0] <= "9"):
            raise invalid
        i = 0
        whole = 0
        while i < len(rest) and "0" <= rest[i] <= "9":  # leadingInt
            if whole > INT64 // 10:
                raise invalid
            whole = whole * 10 + ord(rest[i]) - 48
            if whole > INT64:
                raise invalid
            i += 1
        pre, fraction, scale = i > 0, 0, 1.0
        rest = rest[i:]
        post = False
        if rest[:1] == ".":
            rest, i, overflow = rest[1:], 0, False
            while i < len(rest) and "0" <= rest[i] <= "9":  # leadingFraction: past int64 it stops counting
                digit = fraction * 10 + ord(rest[i]) - 48
                if overflow or fraction > (INT64 - 1) // 10 or digit > INT64:
                    overflow = True
                else:
                    fraction, scale = digit, scale * 10
                i += 1
            post, rest = i > 0, rest[i:]
        if not pre and not post:
            raise invalid
        i = 0
        while i < len(rest) and not (rest[i] == "." or "0" <= rest[i] <= "9"):
            i += 1
        if i == 0:
            raise ValueError(f"time: missing unit in duration {_time_quote(text)}")
        unit = _UNITS.get(rest[:i])
        if unit is None:
            raise ValueError(f"time: unknown unit {_time_quote(rest[:i])} in duration {_time_quote(text)}")
        rest = rest[i:]
        if whole > INT64 // unit:
            raise invalid
        whole *= unit
        if fraction:
            whole += int(float(fraction) * (float(unit) / scale))
            if whole > INT64:
                raise invalid
        total += whole
        if total > INT64:
            raise invalid
    if not negative and total > INT64 - 1:
        raise invalid
    return -total if negative else total


def check_timeout(query: Mapping[str, str]) -> None:
    """A request's `timeout` (not a watch's): 400 where time.ParseDuration refuses it."""
    if value := query.get("timeout", ""):
        try:
            go_duration(value)
        except ValueError as e:
            raise bad_request(f"invalid timeout specified in the request URL - {e}") from None


@dataclass(frozen=True)
class ListOptions:
    """metav1.ListOptions as the handler decodes them from a list's or watch's query."""

    label_selector: str = ""
    field_selector: str = ""
    watch: bool = False
    allow_watch_bookmarks: bool = False
    resource_version: str = ""
    resource_version_match: str = ""
    timeout_seconds: int | None = None
    limit: int = 0
    continue_token: str = ""
    send_initial_events: bool | None = None

    @property
    def selectors(self) -> dict[str, str]:
        """The selectors, keyed as the query names them (what Snapshot.select reads)."""
        return {"labelSelector": self.label_selector, "fieldSelector": self.field_selector}


def decode(query: Mapping[str, str]) -> ListOptions:
    """The query's ListOptions, checked as the handler checks them: 400 where a number does not convert, 422 where
    ValidateListOptions refuses the combination."""
    try:
        timeout = go_parse_int(query["timeoutSeconds"]) if "timeoutSeconds" in query else None
        limit = go_parse_int(query["limit"]) if "limit" in query else 0
    except ValueError as e:
        raise bad_request(str(e)) from None
    sends = query.get("sendInitialEvents")
    options = ListOptions(
        query.get("labelSelector", ""),
        query.get("fieldSelector", ""),
        "watch" in query and query["watch"].lower() not in _FALSE,
        "allowWatchBookmarks" in query and query["allowWatchBookmarks"].lower() not in _FALSE,
        query.get("resourceVersion", ""),
        query.get("resourceVersionMatch", ""),
        timeout,
        limit,
        query.get("continue", ""),
        None if sends is None else sends.lower() not in _FALSE,
    )
    if errors := _invalid(options):
        raise ApiStatus(invalid(*LIST_OPTIONS, "", errors))
    return options


def _invalid(o: ListOptions) -> list[tuple[str, Finding]]:
    """ValidateListOptions (watch: validateWatchOptions), each finding with its cause type."""
    at, match, found = ("resourceVersionMatch",), o.resource_version_match, []
    if o.watch:
        if o.send_initial_events is not None and match != NOT_OLDER_THAN:
            detail = f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}"
            found.append(("FieldValueForbidden", forbidden(at, detail, "")))
        if match:
            if o.send_initial_events is None:
                detail = "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
                found.append(("FieldValueForbidden", forbidden(at, detail, "")))
            if match != NOT_OLDER_THAN:
                found.append(("FieldValueNotSupported", not_supported(at, match, [NOT_OLDER_THAN], "")))
            if o.continue_token:
                found.append(
                    (
                        "FieldValueForbidden",
                        forbidden(at, "resourceVersionMatch is forbidden when continue is provided", ""),
                    )
                )
        return found
    if match:
        if not o.resource_version:
            detail = "resourceVersionMatch is forbidden unless resourceVersion is provided"
            found.append(("FieldValueForbidden", forbidden(at, detail, "")))
        if o.continue_token:
            found.append(
                (
                    "FieldValueForbidden",
                    forbidden(at, "resourceVersionMatch is forbidden when continue is provided", ""),
                )
            )
        if match not in (EXACT, NOT_OLDER_THAN):
            found.append(("FieldValueNotSupported", not_supported(at, match, [EXACT, NOT_OLDER_THAN, ""], "")))
        if match == EXACT and o.resource_version == "0":
            detail = 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'
            found.append(("FieldValueForbidden", forbidden(at, detail, "")))
    if o.send_initial_events is not None:
        found.append(
            ("FieldValueForbidden", forbidden(("sendInitialEvents",), "sendInitialEvents is forbidden for list", ""))
        )
    return found


def invalid(group: str, kind: str, name: str, errors: Sequence[tuple[str, Finding]]) -> dict:
    """apierrors.NewInvalid: 422, the aggregated field errors, each a cause."""
    from jaxinfra.admission.schema import json_path

    findings = distinct([f for _, f in errors])
    causes = [{"reason": t, "message": f.message, "field": json_path(f.at)} for t, f in errors if f in findings]
    message = f"{kind}.{group} {go_quote(name)} is invalid: {aggregate(findings)}"
    return status_body(422, "Invalid", message, {"group": group, "kind": kind, "causes": causes})


def resource_version(text: str, current: int, listing: bool) -> int:
    """The resourceVersion a list, watch or get asks for (0: any), checked as storage checks it: not a number,
    400 for a list and 500 for a watch or a get; past `current`, 504 with Retry-After 1."""
    if text in ("", "0"):
        return 0
    try:
        asked = go_parse_int(text, "ParseUint")
    except ValueError as e:
        error = f"resourceVersion: {invalid_value(('resourceVersion',), text, str(e), '').message}"
        if listing:
            raise bad_request(f"invalid resource version: {error}") from None
        raise ApiStatus(status_body(500, "", error)) from None
    if asked > current:
        too_large = {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]}
        message = f"Timeout: Too large resource version: {asked}, current: {current}"
        body = status_body(504, "Timeout", message, {**too_large, "retryAfterSeconds": 1})
        raise ApiStatus(body, [("Retry-After", "1")])
    return asked


def watch_seconds(options: ListOptions, min_request_timeout_s: int, rng: random.Random | None = None) -> float:
    """How long a watch lasts: time.Duration(timeoutSeconds) * time.Second as Go computes it (wrapping past int64);
    0 or none, MinRequestTimeout times a random factor in [1, 2); below 0, it ends at once."""
    nanoseconds = ((options.timeout_seconds or 0) * 10**9 + INT64) % UINT64 - INT64
    if nanoseconds == 0:
        return min_request_timeout_s * ((rng or random).random() + 1.0)
    return nanoseconds / 1e9
