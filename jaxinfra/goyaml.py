"""goyaml v2's scalars and sigs.k8s.io/yaml's JSON: what `yamlio` decodes a YAML document to.

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
import math
import re
import struct
from typing import Any

import yaml

_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_YAML = "tag:yaml.org,2002:"


class Loader(_SafeLoader):  # type: ignore[misc, valid-type]
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


Loader.add_constructor("tag:yaml.org,2002:value", _SafeLoader.construct_yaml_str)

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
        None, None, f"cannot decode !!{resolved} `{clip(text, 40)}` as a !!{tag}", node.start_mark
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
    Loader.add_constructor(_YAML + _tag, _construct_scalar)
Loader.add_constructor(_YAML + "set", yaml.constructor.SafeConstructor.construct_yaml_map)  # goyaml: a mapping
for _tag in ("omap", "pairs"):  # goyaml: a list (of one-entry mappings)
    Loader.add_constructor(_YAML + _tag, yaml.constructor.SafeConstructor.construct_yaml_seq)

_Found = tuple[tuple[Any, ...], Any, str, str, bool]
"""(where in the document, value, message, fix, whether kubectl cannot send the document at all)."""


def jsonable(value: Any) -> tuple[Any, list[_Found]]:
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


def clip(value: Any, limit: int = 80) -> Any:
    """A number as it is; anything else as text cut to `limit` characters (a whole pod spec, say)."""
    if isinstance(value, (bool, int, float, type(None))):
        return value
    s = value if isinstance(value, str) else repr(value)
    return s if len(s) <= limit else s[: limit - 3] + "..."
