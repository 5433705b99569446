"""YAML in and out. Out: deterministic (sorted keys, block style, the C emitter when present; same
input, same bytes). In: decoded the way the API server's front door decodes a manifest, with its
bounds, so that a hostile or broken file is a list of `Problem`s, never a traceback, a minute of CPU
or an out-of-memory kill.

The bounds, and where they come from:

- Alias expansion ("billion laughs"). Since CVE-2019-11253 the YAML decoder behind sigs.k8s.io/yaml
  (go-yaml, `decode.go` in go-yaml/yaml branches v2 and v3: `allowedAliasRatio` and
  `decoder.unmarshal`; kubernetes-sigs/yaml `yaml.go` imports go.yaml.in/yaml/v2, the same code)
  counts every node it decodes, an alias once for itself and again for each node of the value it
  stands for, and the nodes decoded inside an alias. It refuses the document ("document contains
  excessive aliasing") at the first node where more than 100 nodes came from aliases, more than
  1,000 were decoded, and the aliased share exceeds `allowed_alias_ratio(decoded)`: 99% up to
  400,000 decoded nodes, 10% from 4,000,000, linear in between. `yamlsurvey.Survey` replays that count on
  PyYAML's node graph in goyaml's order (a mapping's key, then its value), without expanding
  anything: an alias adds the (memoised) size of its value in one step. That is exact: inside an
  alias both counts grow by one a node, so the aliased share only rises while the allowed share only
  falls, and the test fails somewhere in the expansion if and only if it fails at its end. An alias inside its
  own anchor's value is refused as goyaml refuses it ("anchor 'a' value contains itself").
- Nesting: libyaml (the C parser PyYAML uses) refuses more than 1,000 levels; goyaml allows 10,000
  (`max_flow_level`, `max_indents` in its scannerc.go). Stricter here; no manifest comes close.
  Also stricter: PyYAML refuses an anchor defined twice, which goyaml allows (the later one wins).
- The request body: 3 MiB (`MaxRequestBodyBytes: 3 * 1024 * 1024` in kubernetes
  staging/src/k8s.io/apiserver/pkg/server/config.go, `NewConfig`). A file over it is refused unread.
  (kubectl sends one request per object, so a bigger file of small objects would go through; this
  bound is what keeps a huge file from being read at all.)
- The stored object: 1.5 MiB, etcd's default `--max-request-bytes` (etcd `embed/config.go`
  `DefaultMaxRequestBytes`; etcd's "System limits" page; the config.go comment above derives the
  3 MiB from it). Estimated as the object's compact JSON size, aliases expanded; each item of a
  `kind: List` counts alone, as kubectl sends them one by one.
- Duplicate keys: the API server's strict field validation (`fieldValidation=Strict`, what
  `kubectl --validate=strict`, the default, asks for) refuses a field set twice: a YAML body through
  sigs.k8s.io/yaml `YAMLToJSONStrict` (apimachinery pkg/runtime/serializer/json/json.go; goyaml v2
  `UnmarshalStrict`: "key ... already set in map"), a JSON body through kjson.UnmarshalStrict. But
  kubectl converts a YAML file to JSON before sending it, keeping the last value silently
  (kubernetes/kubernetes#125885): either way the first value is lost, so it is an error here.
  Reported; the document is still decoded (the last value wins) so `validate` can report its
  other problems too.
- Tags: safe loading only. `_Loader` is PyYAML's (C)SafeLoader, whose constructor knows the
  standard YAML tags alone: `!!python/object` and the like are a problem, never code.
- JSON: a document that starts with `{` is decoded as a JSON stream first (as the API machinery's
  YAMLOrJSONDecoder does), so tabs and `\\ud83d\\ude00` escapes, which YAML refuses, are accepted;
  text that is not valid JSON falls back to YAML (`{a: 1}` is a YAML flow mapping).

What a document decodes to is what kubectl sends the API server, JSON (`kubectl apply` converts each YAML document
with sigs.k8s.io/yaml `YAMLToJSON`: goyaml v2 into `interface{}`, `convertToJSONableObject`, then encoding/json's
`Marshal`; kubernetes-sigs/yaml `yaml.go` at aadfabb7d369 (v1.6.0 and later), which imports go.yaml.in/yaml/v2
v2.4.2 = yaml/go-yaml tag v2.4.2, 246a95c22c57, `resolve.go` and `decode.go`), not what PyYAML's YAML 1.1 makes of it:

- Plain scalars resolve as goyaml v2's `resolve` does (`goyaml_scalar`, used as the loader's resolver): `y`, `Y`, `n`,
  `N` are booleans too; `1e3` is a float; `0o17` is an int; `1:30` (PyYAML's base 60) and every date or timestamp are
  strings, as written (goyaml's `decoder.scalar` keeps a timestamp's text for `interface{}`); an int past uint64 is a
  float, and a number past float64 the text itself (`1e5000`, `1.0e+5000`). An explicit tag that does not fit its
  value is goyaml's refusal: "cannot decode !!str `x` as a !!int".
- `!!binary` is its bytes as a string (encoding/json writes each byte that is not UTF-8 as U+FFFD); `!!set`, `!!omap`
  and `!!pairs` are the mapping or the list goyaml v2 makes of them (it ignores a collection's tag).
- Keys become strings as `convertToJSONableObject` writes them: `true`/`false`, decimal ints, floats by
  `FormatFloat(k, 'g', -1, 32)` (`.inf`, `-.inf`, `.nan`); a null key and a uint64 one are refused as it refuses
  them ("unsupported map key of type"). Two keys that become one string (`1` and `"1"`) lose a value (kubectl keeps
  one, in Go's map order): a problem, as a duplicate key is.
- `.inf`, `-.inf` and `.nan` are refused where they are values (encoding/json: "unsupported value: +Inf"), and so are
  JSON's `NaN` and `Infinity`, which the API machinery's JSON decoder refuses; a float with no fraction under 1e21 is
  the integer encoding/json writes for it (`2.0` is sent as `2`).

Stricter than kubectl, knowingly: tags goyaml ignores (`!custom`, `!!python/...`: it decodes the value under them)
are refused here.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import functools
import json
import math
import os
import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from jaxinfra.errors import Problem
from jaxinfra.yamlsurvey import Survey, identity, objects

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_REQUEST_BYTES = 3 * 1024 * 1024
"""kube-apiserver's request body limit (MaxRequestBodyBytes): a file over it is refused."""
MAX_OBJECT_BYTES = 3 * 1024 * 1024 // 2
"""etcd's default request limit (1.5 MiB): an object whose JSON is bigger cannot be stored."""


_YAML = "tag:yaml.org,2002:"


class _Loader(_SafeLoader):  # type: ignore[misc, valid-type]
    """PyYAML's safe loader (C when libyaml is there) with goyaml v2's scalars: plain scalars resolved by
    `goyaml_scalar` (libyaml's parser calls this method for each), the standard scalar tags built by it; `=` is a
    string, as in goyaml, not a `tag:yaml.org,2002:value` that the safe constructor cannot build."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0]:
            return _YAML + goyaml_scalar(value)[0]
        return super().resolve(kind, value, implicit)

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        """SafeConstructor's, with each key that is not a string wrapped (`_GoKey`), so that keys are one only where
        goyaml's `map[interface{}]interface{}` has them as one: Python's `True == 1 == 1.0` would merge three."""
        if not isinstance(node, yaml.MappingNode):
            return super().construct_mapping(node, deep=deep)  # which refuses it: "expected a mapping node"
        self.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (dict, list)):  # goyaml: "invalid map key"
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, "found unhashable key", key_node.start_mark
                )
            out[key if type(key) is str else _GoKey(key)] = self.construct_object(value_node, deep=deep)
        return out


class _GoKey:
    """A mapping key that is not a string, equal to another only when of the same type and value, as Go's
    interface{} keys are (a NaN to none)."""

    __slots__ = ("key",)

    def __init__(self, key: Any):
        self.key = key

    def __hash__(self) -> int:
        return hash((type(self.key), self.key))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _GoKey) and type(other.key) is type(self.key) and other.key == self.key


_Loader.add_constructor("tag:yaml.org,2002:value", _SafeLoader.construct_yaml_str)


def dump(manifests: Iterable[Mapping[str, Any]]) -> str:
    """A multi-document YAML stream, one document per manifest, in the given order."""
    return yaml.dump_all(
        list(manifests),
        Dumper=_Dumper,
        sort_keys=True,
        default_flow_style=False,
        explicit_start=True,
        width=1_000_000,
        allow_unicode=True,
    )


@dataclass(frozen=True, slots=True)
class Document:
    """One decoded document: its position in the stream (0-based, empty documents counted), the line
    it starts on, and its value (None for an empty one)."""

    index: int
    line: int
    value: Any


class DecodeError(yaml.YAMLError):
    """`load`'s refusal: every problem of the text, one per line."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems = tuple(problems)
        super().__init__("\n".join(map(str, self.problems)))


def load(text: str) -> list[Any]:
    """Every document of a YAML (or JSON) stream, empty documents dropped; DecodeError (a YAMLError)
    with every problem if the API server would refuse to decode any of it."""
    docs, problems = decode(text)
    if problems:
        raise DecodeError(problems)
    return [d.value for d in docs if d.value is not None]


def read_documents(path: str | Path) -> tuple[list[Document], list[Problem]]:
    """Every document of one file, and every problem with it: unreadable, over the request limit,
    not UTF-8, not YAML, over a decoding bound. Problems name the file (`FILE`, or `FILE#INDEX
    Kind/name` for one document) and say the line."""
    source = str(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_REQUEST_BYTES + 1)
            if len(data) > MAX_REQUEST_BYTES:
                try:
                    size = f"{max(len(data), _size(f)):,} bytes"
                except OSError:
                    size = f"over {MAX_REQUEST_BYTES:,} bytes"
                return [], [_too_big(source, size)]
    except OSError as err:
        return [], [
            Problem(
                "",
                source,
                f"cannot read the file: {err.strerror or err}",
                "pass a readable YAML or JSON file",
                file=source,
            )
        ]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        return [], [
            Problem(
                "",
                data[err.start : err.start + 4],
                f"not UTF-8 at line {line}, column {column} (byte {err.start}: {err.reason})",
                "save the file as UTF-8, the encoding the API server reads",
                file=source,
            )
        ]
    return decode(text, source)


def read_manifests(paths: Iterable[str | Path]) -> tuple[list[dict[str, Any]], list[Problem]]:
    """Every manifest of some multi-document YAML or JSON files, in order (a `kind: List` is
    flattened), and every problem with them (those of `read_documents`, and a document or List item
    that is not a mapping), all at once: any problem means the input is refused."""
    manifests: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for path in paths:
        docs, found = read_documents(path)
        problems += found
        for doc in docs:
            if doc.value is None:
                continue
            if not isinstance(doc.value, dict):
                problems.append(_not_a_mapping("", doc.value, f"line {doc.line}").located(str(path), doc.index))
            elif doc.value.get("kind") == "List":
                for i, item in enumerate(doc.value.get("items") or []):
                    if isinstance(item, dict):
                        manifests.append(item)
                    else:
                        problems.append(
                            _not_a_mapping(f"List items[{i}]", item, f"in the List at line {doc.line}").located(
                                str(path), doc.index
                            )
                        )
            else:
                manifests.append(doc.value)
    return manifests, problems


def decode(text: str, source: str = "<text>") -> tuple[list[Document], list[Problem]]:
    """Every document of a YAML or JSON stream that decodes, and every problem: a syntax error ends
    the stream (the documents before it are kept); a document over a bound is left out."""
    if len(text) > MAX_REQUEST_BYTES // 4 and (size := len(text.encode("utf-8", "surrogatepass"))) > MAX_REQUEST_BYTES:
        return [], [_too_big(source, f"{size:,} bytes")]
    if text.lstrip(" \t\r\n\ufeff").startswith("{"):
        decoded = _decode_json(text, source)
        if decoded is not None:
            return decoded
    return _decode_yaml(text, source)


# --- what kubectl sends: goyaml v2's scalars, sigs.k8s.io/yaml's JSON ----------------------------------------

_GO_WORDS: dict[str, tuple[str, Any]] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), ("bool", True)),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), ("bool", False)),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), ("null", None)),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), ("float", math.nan)),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), ("float", math.inf)),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), ("float", -math.inf)),
}
"""goyaml v2's `resolveMapList`: the words that are not strings (YAML 1.1's booleans, `y` and `n` included)."""
_GO_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")  # goyaml's yamlStyleFloat
_GO_DOT_FLOAT = re.compile(r"\.[0-9]+(?:[eE][-+]?[0-9]+)?")  # what strconv.ParseFloat reads of a text starting '.'
_GO_INT = re.compile(r"([-+]?)(?:0[xX]([0-9a-fA-F]+)|0[oO]([0-7]+)|0[bB]([01]+)|0([0-7]+)|([1-9][0-9]*|0))")
"""strconv.ParseInt's base 0: 0x, 0o, 0b, a leading 0 (octal), else decimal."""
_GO_TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
    r"(?:[Tt]([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:[.,][0-9]+)?(?:Z|[-+][0-9]{2}:[0-9]{2})"
    r"| ([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:[.,][0-9]+)?)?"
)
"""goyaml's allowedTimestampFormats as time.Parse reads them: RFC 3339 with short fields (`T` or `t`), a space
and no zone, or a date alone."""
INT64 = 2**63
UINT64 = 2**64


def goyaml_scalar(text: str, tag: str = "") -> tuple[str, Any]:
    """(the tag, without its `tag:yaml.org,2002:` prefix, and the value) that goyaml v2's `resolve` gives a plain
    scalar (`tag` ""), or one written with `!!<tag>` (str, bool, int, float, null or timestamp), as decoded into an
    `interface{}`: a timestamp keeps its text (so a plain one is "str" here: the same string, and no date is parsed
    for it), `<<` is the merge key."""
    if text == "<<" and not tag:
        return "merge", text
    if tag == "str":
        return "str", text
    if text in _GO_WORDS:
        return _GO_WORDS[text]
    first = text[:1]
    if first == ".":
        if _GO_DOT_FLOAT.fullmatch(text) and not math.isinf(value := float(text)):
            return "float", value
    elif first and first in "+-0123456789":
        if tag == "timestamp" and _go_timestamp(text):
            return "timestamp", text
        plain = text.replace("_", "")
        number = _go_int(plain)
        if number is not None:
            return "int", number
        if _GO_FLOAT.fullmatch(plain) and not math.isinf(value := float(plain)):  # out of range: a string
            return "float", value
    return "str", text


_GO_BASES = {2: 16, 3: 8, 4: 2, 5: 8, 6: 10}
"""_GO_INT's digit groups, by their number, and the base of each."""


def _go_int(plain: str) -> int | None:
    """strconv.ParseInt(plain, 0, 64), else ParseUint (no sign): None where both fail."""
    if plain.isascii() and plain.isdigit() and len(plain) < 19 and (plain[0] != "0" or plain == "0"):
        return int(plain)  # the usual case: a short decimal
    m = _GO_INT.fullmatch(plain)
    if m is None:
        return None
    sign, base, digits = m.group(1), _GO_BASES[m.lastindex or 6], m.group(m.lastindex or 6)
    digits = digits.lstrip("0") or "0"
    if len(digits) > 64:  # past uint64 in any base (and short of int()'s 4,300-digit limit)
        return None
    number = -int(digits, base) if sign == "-" else int(digits, base)
    return number if -INT64 <= number < INT64 or (not sign and number < UINT64) else None


def _go_timestamp(text: str) -> bool:
    m = _GO_TIMESTAMP.fullmatch(text)
    if m is None:
        return False
    year, month, day, *clock = (int(g) if g is not None else 0 for g in m.groups())
    hour, minute, second = clock[:3] if m.group(4) is not None else clock[3:]
    try:
        datetime.date(year, month, day)
    except ValueError:
        return False
    return hour < 24 and minute < 60 and second < 60


def _construct_scalar(loader: Any, node: yaml.Node) -> Any:
    """A scalar with a standard tag, as goyaml v2 decodes it (see `goyaml_scalar`); a tag that does not fit its value
    is refused as goyaml refuses it."""
    tag = node.tag.removeprefix(_YAML)
    text = loader.construct_scalar(node)
    if tag == "binary":
        return _binary(text, node)
    resolved, value = goyaml_scalar(text, tag)
    if resolved == tag:
        return value
    if tag == "float" and resolved == "int" and -INT64 <= value < INT64:
        return float(value)
    raise yaml.constructor.ConstructorError(
        None, None, f"cannot decode !!{resolved} `{_clip(text, 40)}` as a !!{tag}", node.start_mark
    )


def _binary(text: str, node: yaml.Node) -> str:
    """`!!binary`: base64.StdEncoding (line breaks ignored), the bytes as a Go string, which encoding/json writes as
    UTF-8 with U+FFFD for each byte that is not."""
    try:
        data = base64.b64decode(text.replace("\n", "").replace("\r", ""), validate=True)
    except (binascii.Error, ValueError):
        raise yaml.constructor.ConstructorError(
            None, None, "!!binary value contains invalid base64 data", node.start_mark
        ) from None
    return re.sub("[\udc80-\udcff]", "\ufffd", data.decode("utf-8", "surrogateescape"))


for _tag in ("bool", "int", "float", "null", "timestamp", "binary"):
    _Loader.add_constructor(_YAML + _tag, _construct_scalar)
_Loader.add_constructor(_YAML + "set", yaml.constructor.SafeConstructor.construct_yaml_map)  # goyaml: a mapping
for _tag in ("omap", "pairs"):  # goyaml: a list (of one-entry mappings)
    _Loader.add_constructor(_YAML + _tag, yaml.constructor.SafeConstructor.construct_yaml_seq)

_Found = tuple[tuple[Any, ...], Any, str, str, bool]
"""(where in the document, value, message, fix, whether kubectl cannot send the document at all)."""


def _jsonable(value: Any) -> tuple[Any, list[_Found]]:
    """The document as the JSON kubectl sends (module docstring), every dict and list its own copy (goyaml decodes
    each alias into one, and the simulator changes objects in place); and what is lost or refused on the way.
    Iterative: an alias can put a deep value deeper still. (Hot: every node of every document passes here.)"""
    found: list[_Found] = []
    out = {} if type(value) is dict else [] if type(value) is list else _json_float(value, (), found)
    stack: list[tuple[Any, Any, tuple[Any, ...]]] = [(value, out, ())] if type(out) in (dict, list) else []
    while stack:
        src, dst, at = stack.pop()
        child: Any
        if type(dst) is dict:
            mixed = False  # a key that was no string: a later string key may be it once written
            for k, v in src.items():
                key: str | None
                if type(k) is str:
                    key = k
                    if mixed and key in dst:
                        found.append(_collision(at, key, k))
                else:
                    mixed, written = True, k.key if isinstance(k, _GoKey) else k
                    key = _json_key(written, at, found)
                    if key is None:
                        continue
                    if key in dst:
                        found.append(_collision(at, key, written))
                t = type(v)
                if t is dict or t is list:
                    dst[key] = child = {} if t is dict else []
                    stack.append((v, child, (*at, key)))
                else:
                    dst[key] = _json_float(v, (*at, key), found) if t is float else v
        else:
            for i, v in enumerate(src):
                t = type(v)
                if t is dict or t is list:
                    dst.append(child := {} if t is dict else [])
                    stack.append((v, child, (*at, i)))
                else:
                    dst.append(_json_float(v, (*at, i), found) if t is float else v)
    return out, found


def _json_float(v: Any, at: tuple[Any, ...], found: list[_Found]) -> Any:
    """A float as encoding/json writes it: an integer where it has no fraction and is under 1e21, none at all for
    NaN and the infinities (a problem); anything else as it is."""
    if type(v) is not float:
        return v
    if math.isnan(v) or math.isinf(v):
        word = "NaN" if math.isnan(v) else "+Inf" if v > 0 else "-Inf"
        found.append(
            (
                at,
                word,
                f"{word} is no JSON number: kubectl cannot send it (encoding/json: unsupported value: {word})",
                "write a finite number, or quote it to send the text",
                True,
            )
        )
    elif v.is_integer() and abs(v) < 1e21:
        return int(v)
    return v


def _collision(at: tuple[Any, ...], key: str, written: Any) -> _Found:
    return (
        (*at, key),
        written,
        f"two keys are {key!r} once kubectl writes them as JSON strings (this one was {type(written).__name__} "
        f"{written!r}): kubectl keeps one of them, in Go's map order, and the other value is lost",
        "keep one of them, or make them different strings",
        False,
    )


def _json_key(key: Any, at: tuple[Any, ...], found: list[_Found]) -> str | None:
    """A mapping key as sigs.k8s.io/yaml's convertToJSONableObject writes it, or None (a problem) where it refuses."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int) and -INT64 <= key < INT64:
        return str(key)
    if isinstance(key, float):
        return go_float32(key)
    kind = "<nil>" if key is None else "uint64" if isinstance(key, int) else type(key).__name__
    written = "null" if key is None else str(key) if isinstance(key, int) else repr(key)
    found.append(
        (
            (*at, written),
            key,
            f"a {'null' if key is None else kind} key, which JSON cannot have: kubectl refuses the document "
            f'(sigs.k8s.io/yaml: "unsupported map key of type: {kind}")',
            "quote the key to make it a string, or remove the entry",
            True,
        )
    )
    return None


def go_float32(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32), with goyaml's `.inf`, `-.inf`, `.nan`: a float key as
    sigs.k8s.io/yaml writes it (the shortest digits that read back as the same float32, in %e form for an exponent
    under -4 or from 6 on)."""
    if math.isnan(value):
        return ".nan"
    try:
        single = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        single = math.copysign(math.inf, value)
    if math.isinf(single):
        return ".inf" if single > 0 else "-.inf"
    if single == 0:
        return "-0" if math.copysign(1, single) < 0 else "0"
    for precision in range(1, 10):
        text = f"{single:.{precision - 1}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            break
    mantissa, exponent = text.split("e")
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    exp = int(exponent)
    if exp < -4 or exp >= 6:
        tail = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{tail}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    point = exp + 1
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"


# --- YAML ----------------------------------------------------------------------------------------


def _decode_yaml(text: str, source: str) -> tuple[list[Document], list[Problem]]:
    docs: list[Document] = []
    problems: list[Problem] = []
    try:
        loader = _Loader(text)
    except UnicodeError as err:  # a lone surrogate in the text: the C parser reads UTF-8
        return [], [Problem("", None, f"not UTF-8: {err}", "pass text that encodes as UTF-8", file=source)]
    index = 0
    try:
        while loader.check_node():
            node = loader.get_node()
            index, line = index + 1, node.start_mark.line + 1
            _reset(loader)
            survey = Survey(node, text, loader)
            _reset(loader)  # a key the survey could not build must not read as a recursive node now
            where = identity(node) or ""
            in_doc = functools.partial(Problem, file=source, document=index - 1)
            if survey.refusal:
                problems.append(in_doc(where, *survey.refusal))
                continue
            problems += [in_doc(f"{where} {_json_path(at)}".lstrip(), *rest) for at, *rest in survey.duplicates]
            big = [(obj, n) for obj in objects(node) if (n := survey.json_bytes[id(obj)]) > MAX_OBJECT_BYTES]
            for obj, n in big:
                item = identity(obj) if obj is not node else ""
                too_big = _too_big_object(f"{where} {item}".strip(), n, obj.start_mark.line + 1)
                problems.append(too_big.located(source, index - 1))
            if big:
                continue
            try:
                value = loader.construct_document(node)
            except Exception as err:  # noqa: BLE001 a ConstructorError (an unknown tag), a ValueError (`2024-13-45`
                # as a timestamp, a 5,000-digit int), from an explicit tag on the wrong value anything (`!!timestamp x`)
                _reset(loader)
                problems.append(
                    in_doc(
                        where,
                        _line_text(text, err),
                        f"cannot decode it{_at(err, text) or f' (the document at line {line})'}: {_reason(err)}",
                        "use plain YAML data: the standard tags only (no !!python/...), valid dates and numbers",
                    )
                )
                continue
            value, found = _jsonable(value)
            problems += [in_doc(f"{where} {_json_path(path)}".lstrip(), *rest) for path, *rest, _ in found]
            if not any(refused for *_, refused in found):
                docs.append(Document(index - 1, line, value))
    except yaml.YAMLError as err:
        problems.append(
            Problem(
                "",
                _line_text(text, err),
                f"not valid YAML{_at(err, text)}: {_reason(err)}",
                "fix the YAML syntax there",
                file=source,
            )
        )
    except RecursionError:
        problems.append(Problem("", None, "nested too deeply to decode", "flatten the structure", file=source))
    finally:
        loader.dispose()
    return docs, problems


def _reset(loader: Any) -> None:
    """Forget a document whose construction failed, so the next one starts clean."""
    loader.constructed_objects, loader.recursive_objects = {}, {}
    loader.state_generators, loader.deep_construct = [], False


# --- JSON ----------------------------------------------------------------------------------------


def _decode_json(text: str, source: str) -> tuple[list[Document], list[Problem]] | None:
    """A stream of JSON objects, as the API machinery's JSON decoder reads it; None when the text is
    not JSON (then it is YAML). A duplicate key is a problem (strict decoding), with its line found
    by YAML when YAML can read the text."""
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                duplicates.append(k)
            out[k] = v
        return out

    decoder = json.JSONDecoder(object_pairs_hook=pairs)
    docs: list[Document] = []
    problems: list[Problem] = []
    index = 0
    at = len(text) - len(text.lstrip("\ufeff"))
    ws = re.compile(r"[ \t\r\n]*")
    at = ws.match(text, at).end()  # type: ignore[union-attr]
    while at < len(text):
        try:
            value, end = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            return None
        line = text.count("\n", 0, at) + 1
        where = _name(value) if isinstance(value, dict) else ""
        in_doc = functools.partial(Problem, file=source, document=index)
        index += 1
        value, lost = _jsonable(value)  # NaN, Infinity (which Go's decoder refuses), 1e999; 2.0 as 2
        problems += [in_doc(f"{where} {_json_path(path)}".lstrip(), *rest) for path, *rest, _ in lost]
        if any(refused for *_, refused in lost):
            at = ws.match(text, end).end()  # type: ignore[union-attr]
            continue
        listed = isinstance(value, dict) and value.get("kind") == "List" and isinstance(value.get("items"), list)
        big = [(obj, n) for obj in (value["items"] if listed else [value]) if (n := _json_size(obj)) > MAX_OBJECT_BYTES]
        problems += [
            _too_big_object(f"{where} {_name(obj)}" if listed else where, n, line).located(source, index - 1)
            for obj, n in big
        ]
        if not big:
            docs.append(Document(index - 1, line, value))
        at = ws.match(text, end).end()  # type: ignore[union-attr]
    if duplicates:  # valid JSON has raw tabs only between tokens, where YAML wants spaces
        _, located = _decode_yaml(text.replace("\t", " "), source)
        found = [p for p in located if "duplicate key" in p.message]
        problems += found or [
            Problem(
                "",
                k,
                f"duplicate key {k!r}: the API server's strict field validation refuses a field set twice",
                "keep one of them",
                file=source,
            )
            for k in duplicates
        ]
    return docs, problems


def _json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))


def _name(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return f"{(obj.get('kind') if isinstance(obj, dict) else None) or '?'}/{name or '?'}"


# --- problems ------------------------------------------------------------------------------------


def _size(f: Any) -> int:
    return os.fstat(f.fileno()).st_size


def _too_big(source: str, size: str) -> Problem:
    return Problem(
        "",
        size,
        f"the file is over the API server's {MAX_REQUEST_BYTES:,}-byte (3 MiB) request body limit",
        "split it into smaller files (one object is one request)",
        file=source,
    )


def _too_big_object(where: str, size: int, line: int) -> Problem:
    return Problem(
        where,
        f"{size:,} bytes",
        f"the object (line {line}) is about {size:,} bytes as JSON, over etcd's "
        f"{MAX_OBJECT_BYTES:,}-byte (1.5 MiB) limit, so the API server cannot store it",
        "make it smaller: move bulk data to a volume or an image (a ConfigMap holds at most 1 MiB)",
    )


def _not_a_mapping(where: str, value: Any, line: str) -> Problem:
    names: dict[type, str] = {list: "list", str: "string"}
    kind = names.get(type(value), type(value).__name__)
    return Problem(
        where,
        _clip(value),
        f"a manifest must be a mapping (one Kubernetes object), not a {kind} ({line})",
        "make each YAML document one object with apiVersion, kind and metadata",
    )


def _at(err: BaseException, text: str) -> str:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    if mark is not None:
        return f" at line {mark.line + 1}, column {mark.column + 1}"
    position = getattr(err, "position", None)  # a ReaderError: a character index
    if isinstance(position, int):
        line = text.count("\n", 0, position) + 1
        return f" at line {line}, column {position - (text.rfind(chr(10), 0, position) + 1) + 1}"
    return ""


def _reason(err: BaseException) -> str:
    if isinstance(err, yaml.MarkedYAMLError):
        context = err.context and (
            f"{err.context} (line {err.context_mark.line + 1})"
            if err.context_mark and err.problem_mark and err.context_mark.line != err.problem_mark.line
            else err.context
        )
        return ", ".join(p for p in (context, err.problem) if p) or str(err)
    if isinstance(err, RecursionError):
        return "nested too deeply"
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def _line_text(text: str, err: BaseException) -> str | None:
    """The line the error points at (the one it started on, when it points past the end)."""
    lines = text.splitlines()
    for mark in (getattr(err, "problem_mark", None), getattr(err, "context_mark", None)):
        if mark is not None and mark.line < len(lines) and lines[mark.line].strip():
            return _clip(lines[mark.line])
    return None


def _clip(value: Any, limit: int = 80) -> Any:
    """A number as it is; anything else as text cut to `limit` characters (a whole pod spec, say)."""
    if isinstance(value, (bool, int, float, type(None))):
        return value
    s = value if isinstance(value, str) else repr(value)
    return s if len(s) <= limit else s[: limit - 3] + "..."


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _json_path(at: tuple[Any, ...]) -> str:
    """`metadata.name`, `spec.containers[0].env`, `labels["app.kubernetes.io/name"]` (as validate writes them)."""
    out = ""
    for part in at:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{json.dumps(str(part))}]"
    return out or "(the document)"
