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
- Tags: safe loading only. `goyaml.Loader` is PyYAML's (C)SafeLoader, whose constructor knows the
  standard YAML tags alone: `!!python/object` and the like are a problem, never code.
- JSON: a document that starts with `{` is decoded as a JSON stream first (as the API machinery's
  YAMLOrJSONDecoder does), so tabs and `\\ud83d\\ude00` escapes, which YAML refuses, are accepted;
  text that is not valid JSON falls back to YAML (`{a: 1}` is a YAML flow mapping).

What a document decodes to (goyaml v2's scalars, sigs.k8s.io/yaml's JSON) is `goyaml`'s.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from jaxinfra import goyaml
from jaxinfra.errors import Problem
from jaxinfra.yamlsurvey import Survey, identity, objects

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

MAX_REQUEST_BYTES = 3 * 1024 * 1024
"""kube-apiserver's request body limit (MaxRequestBodyBytes): a file over it is refused."""
MAX_OBJECT_BYTES = 3 * 1024 * 1024 // 2
"""etcd's default request limit (1.5 MiB): an object whose JSON is bigger cannot be stored."""


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


# --- YAML ----------------------------------------------------------------------------------------


def _decode_yaml(text: str, source: str) -> tuple[list[Document], list[Problem]]:
    docs: list[Document] = []
    problems: list[Problem] = []
    try:
        loader = goyaml.Loader(text)
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
            value, found = goyaml.jsonable(value)
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
        value, lost = goyaml.jsonable(value)  # NaN, Infinity (which Go's decoder refuses), 1e999; 2.0 as 2
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
        goyaml.clip(value),
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
            return goyaml.clip(lines[mark.line])
    return None


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
