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
  400,000 decoded nodes, 10% from 4,000,000, linear in between. `_Survey` replays that count on
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
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from jaxinfra.errors import Problem

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_REQUEST_BYTES = 3 * 1024 * 1024
"""kube-apiserver's request body limit (MaxRequestBodyBytes): a file over it is refused."""
MAX_OBJECT_BYTES = 3 * 1024 * 1024 // 2
"""etcd's default request limit (1.5 MiB): an object whose JSON is bigger cannot be stored."""
ALIAS_RATIO_LOW = 400_000
ALIAS_RATIO_HIGH = 4_000_000
"""goyaml's alias_ratio_range_low/high: where the allowed aliased share starts and stops falling."""

_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
_NULL, _BOOL = "tag:yaml.org,2002:null", "tag:yaml.org,2002:bool"


class _Loader(_SafeLoader):  # type: ignore[misc, valid-type]
    """PyYAML's safe loader (C when libyaml is there); `=` is a string, as in goyaml, not a
    `tag:yaml.org,2002:value` that the safe constructor cannot build."""


_Loader.add_constructor("tag:yaml.org,2002:value", _SafeLoader.construct_yaml_str)


def dump(manifests: Iterable[Mapping[str, Any]]) -> str:
    """A multi-document YAML stream, one document per manifest, in the given order."""
    return yaml.dump_all(list(manifests), Dumper=_Dumper, sort_keys=True, default_flow_style=False,
                         explicit_start=True, width=1_000_000, allow_unicode=True)


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


def allowed_alias_ratio(decoded: int) -> float:
    """The share of decoded nodes that may come from aliases once `decoded` nodes are decoded
    (goyaml's allowedAliasRatio): 0.99 up to 400,000, 0.10 from 4,000,000, linear in between."""
    if decoded <= ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * ((decoded - ALIAS_RATIO_LOW) / (ALIAS_RATIO_HIGH - ALIAS_RATIO_LOW))


def excessive_aliasing(decoded: int, aliased: int) -> bool:
    """goyaml's refusal test, made at every node it decodes."""
    return aliased > 100 and decoded > 1000 and aliased / decoded > allowed_alias_ratio(decoded)


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
        return [], [Problem(source, source, f"cannot read the file: {err.strerror or err}", "pass a readable YAML or JSON file")]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        return [], [Problem(source, data[err.start:err.start + 4],
                            f"not UTF-8 at line {line}, column {column} (byte {err.start}: {err.reason})",
                            "save the file as UTF-8, the encoding the API server reads")]
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
            where = f"{path}#{doc.index}"
            if doc.value is None:
                continue
            if not isinstance(doc.value, dict):
                problems.append(_not_a_mapping(where, doc.value, f"line {doc.line}"))
            elif doc.value.get("kind") == "List":
                for i, item in enumerate(doc.value.get("items") or []):
                    if isinstance(item, dict):
                        manifests.append(item)
                    else:
                        problems.append(_not_a_mapping(f"{where} List items[{i}]", item, f"in the List at line {doc.line}"))
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
        loader = _Loader(text)
    except UnicodeError as err:  # a lone surrogate in the text: the C parser reads UTF-8
        return [], [Problem(source, None, f"not UTF-8: {err}", "pass text that encodes as UTF-8")]
    index = 0
    try:
        while loader.check_node():
            node = loader.get_node()
            index, line = index + 1, node.start_mark.line + 1
            where = f"{source}#{index - 1}"
            _reset(loader)
            survey = _Survey(node, text, loader)
            ident = _identity(node)
            if ident:
                where += f" {ident}"
            if survey.refusal:
                problems.append(Problem(where, *survey.refusal))
                continue
            problems += [Problem(f"{where} {_json_path(at)}", *rest) for at, *rest in survey.duplicates]
            big = [(obj, n) for obj in _objects(node) if (n := survey.json_bytes[id(obj)]) > MAX_OBJECT_BYTES]
            for obj, n in big:
                item = _identity(obj) if obj is not node else ""
                problems.append(_too_big_object(f"{where} {item}".rstrip(), n, obj.start_mark.line + 1))
            if big:
                continue
            try:
                value = loader.construct_document(node)
            except Exception as err:  # noqa: BLE001 a ConstructorError (an unknown tag), a ValueError (`2024-13-45`
                # as a timestamp, a 5,000-digit int), from an explicit tag on the wrong value anything (`!!timestamp x`)
                _reset(loader)
                problems.append(Problem(where, _line_text(text, err), f"cannot decode it{_at(err, text) or f' (the document at line {line})'}: "
                                        f"{_reason(err)}", "use plain YAML data: the standard tags only (no !!python/...), valid dates and numbers"))
                continue
            docs.append(Document(index - 1, line, _unshare(value) if survey.aliases else value))
    except yaml.YAMLError as err:
        problems.append(Problem(source, _line_text(text, err), f"not valid YAML{_at(err, text)}: {_reason(err)}", "fix the YAML syntax there"))
    except RecursionError:
        problems.append(Problem(source, None, "nested too deeply to decode", "flatten the structure"))
    finally:
        loader.dispose()
    return docs, problems


class _Survey:
    """One document's node graph walked once, in goyaml's decode order, without expanding aliases.

    A node met a second time is an alias of it. Per node: `size`, the nodes goyaml decodes for it
    (itself, its children, each alias inside counted as 1 plus its value's size) and `json_bytes`,
    about its compact JSON length. On the way: goyaml's excessive-aliasing test at every decoded node
    (an alias's expansion in one step, which is exact, see the module docstring; a merge key's list
    of aliases counts one node, the list, that goyaml does not), aliases inside their own anchor's
    value, and duplicate keys. `refusal` is the (value, message, fix) that stops
    the document; `duplicates` are (path, value, message, fix).
    """

    def __init__(self, root: yaml.Node, text: str, loader: Any):
        self.text, self.loader = text, loader
        self.size: dict[int, int] = {}
        self.json_bytes: dict[int, int] = {}
        self.duplicates: list[tuple[tuple[Any, ...], Any, str, str]] = []
        self.refusal: tuple[Any, str, str] | None = None
        self.aliases = 0
        self.decoded = 1  # the document node
        self.aliased = 0
        self._walk(root)

    def _walk(self, root: yaml.Node) -> None:
        opened: set[int] = set()     # being decoded: an alias to one of them is a cycle
        seen: set[int] = set()
        if not self._enter(root, (), opened, seen):
            return
        # a frame: node, its path, its edges (child, path-of-child, counted), next edge, size, bytes
        stack: list[list[Any]] = [[root, (), _edges(root), 0, 1, 0]]
        while stack:
            frame = stack[-1]
            node, path, edges, i = frame[0], frame[1], frame[2], frame[3]
            if i == len(edges):
                stack.pop()
                opened.discard(id(node))
                self.size[id(node)] = frame[4]
                self.json_bytes[id(node)] = (_scalar_bytes(node) if isinstance(node, yaml.ScalarNode)
                                             else _container_bytes(node, frame[5]))
                if stack:
                    stack[-1][4] += frame[4]
                    stack[-1][5] += self.json_bytes[id(node)]
                continue
            frame[3] = i + 1
            child, step, counted = edges[i]
            child_path = path + step if step else path
            if id(child) in opened:
                self.refusal = self._cycle(child)
                return
            if id(child) in seen:  # an alias: 1 for the alias node, then its value's nodes, all aliased
                self.aliases += 1
                self.decoded += counted
                if self._refused(child):
                    return
                size = self.size[id(child)]
                self.decoded += size
                self.aliased += size
                if self._refused(child):
                    return
                frame[4] += counted + size
                frame[5] += self.json_bytes[id(child)]
                continue
            if not counted:  # a merge key `<<`: goyaml does not decode it, and it is no JSON
                seen.add(id(child))
                self.size[id(child)] = self.json_bytes[id(child)] = 0
                continue
            if isinstance(child, yaml.ScalarNode):  # most nodes: the short way
                seen.add(id(child))
                self.decoded += 1
                if self.aliased > 100 and self._refused(child):
                    return
                self.size[id(child)] = 1
                self.json_bytes[id(child)] = n = _scalar_bytes(child)
                frame[4] += 1
                frame[5] += n
                continue
            if not self._enter(child, child_path, opened, seen):
                return
            stack.append([child, child_path, _edges(child), 0, 1, 0])

    def _enter(self, node: yaml.Node, path: tuple[Any, ...], opened: set[int], seen: set[int]) -> bool:
        """A node decoded for the first time (its definition): count it, check its keys."""
        seen.add(id(node))
        opened.add(id(node))
        self.decoded += 1
        if isinstance(node, yaml.MappingNode):
            self._check_keys(node, path)
        return not self._refused(node)

    def _refused(self, node: yaml.Node) -> bool:
        if excessive_aliasing(self.decoded, self.aliased):
            anchor = _anchor(self.text, node)
            self.refusal = (
                f"*{anchor}",
                (f"excessive aliasing (expanding *{anchor}, anchored at line {node.start_mark.line + 1}): after {self.decoded:,} "
                 f"decoded nodes, {self.aliased:,} come from aliases ({self.aliased / self.decoded:.1%}), over the "
                 f"{allowed_alias_ratio(self.decoded):.0%} the API server's YAML decoder allows (goyaml allowedAliasRatio, CVE-2019-11253)"),
                "write the repeated parts out, or alias less: an alias of an alias multiplies",
            )
        return self.refusal is not None

    def _cycle(self, node: yaml.Node) -> tuple[Any, str, str]:
        anchor = _anchor(self.text, node)
        return (f"&{anchor}", (f"the value of the anchor &{anchor} (line {node.start_mark.line + 1}) contains an alias to "
                               "itself, which the API server's YAML decoder refuses (goyaml: anchor value contains itself)"),
                f"remove *{anchor} from inside its own value")

    def _check_keys(self, node: yaml.MappingNode, path: tuple[Any, ...]) -> None:
        first: dict[Any, int] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == _MERGE:
                continue
            ident = self._key(key)
            line = key.start_mark.line + 1
            if ident in first:
                self.duplicates.append((path + (key.value,), key.value,
                                        (f"duplicate key {key.value!r} at line {line} (first at line {first[ident]}): the API "
                                         "server's strict field validation refuses a field set twice (kubectl keeps the last silently)"),
                                        "keep one of them"))
            else:
                first[ident] = line

    def _key(self, key: yaml.ScalarNode) -> Any:
        """A key as goyaml compares them: its decoded value (so `1` and `0x1` are one int), typed (so
        `1` and `"1"` are two keys)."""
        if key.tag == _STR:
            return ("str", key.value)
        try:
            value = self.loader.construct_object(key)
            hash(value)
            return (type(value).__name__, value)
        except Exception:  # noqa: BLE001 (a key that cannot be built is reported when the document is)
            return (key.tag, key.value)


def _edges(node: yaml.Node) -> list[tuple[yaml.Node, tuple[Any, ...] | None, int]]:
    """The children goyaml decodes, in order: (child, its step from the node, 1; 0 for a merge key)."""
    if isinstance(node, yaml.SequenceNode):
        return [(child, (i,), 1) for i, child in enumerate(node.value)]
    if isinstance(node, yaml.MappingNode):
        out: list[tuple[yaml.Node, Any, int]] = []
        for key, value in node.value:
            merge = isinstance(key, yaml.ScalarNode) and key.tag == _MERGE
            out += [(key, None, 0 if merge else 1), (value, (key.value if isinstance(key, yaml.ScalarNode) else "?",), 1)]
        return out
    return []


def _objects(root: yaml.Node) -> list[yaml.Node]:
    """The objects the API server would store: the document, or each item of a `kind: List`."""
    if _lookup(root, "kind") == "List":
        items = _child(root, "items")
        if isinstance(items, yaml.SequenceNode):
            return list(items.value)
    return [root]


def _scalar_bytes(node: yaml.ScalarNode) -> int:
    if node.tag == _STR:
        return len(node.value.encode("utf-8", "surrogatepass")) + 2  # the quotes (escapes not counted)
    return {_NULL: 4, _BOOL: 5}.get(node.tag) or len(node.value)  # `~` is null, `yes` is true


def _container_bytes(node: yaml.Node, children: int) -> int:
    n = len(node.value)
    if isinstance(node, yaml.MappingNode):
        return 2 + children + n + max(n - 1, 0)  # braces, colons, commas
    return 2 + children + max(n - 1, 0)


def _child(node: yaml.Node, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
    return None


def _lookup(node: yaml.Node, *keys: str) -> str | None:
    for key in keys:
        node = _child(node, key)  # type: ignore[assignment]
    return node.value if isinstance(node, yaml.ScalarNode) else None


def _identity(node: yaml.Node) -> str:
    """`Kind/name`, as validate names an object, when the node is a mapping."""
    if not isinstance(node, yaml.MappingNode):
        return ""
    return f"{_lookup(node, 'kind') or '?'}/{_lookup(node, 'metadata', 'name') or '?'}"


_ANCHOR = re.compile(r"&([^\s,\[\]{}]+)")


def _anchor(text: str, node: yaml.Node) -> str:
    """The anchor's name, read at the node's start (PyYAML's nodes do not keep it)."""
    start = node.start_mark.index
    end = text.find("\n", start)
    m = _ANCHOR.search(text, start, end if end >= 0 else len(text))
    return m.group(1) if m else "?"


def _unshare(value: Any) -> Any:
    """The value with every dict and list rebuilt, so that no two places share one: goyaml decodes
    each alias into its own copy, and the simulator changes objects in place. Iterative: an alias
    can put a deep value deeper still."""
    def fresh(v: Any) -> Any:
        return {} if isinstance(v, dict) else [] if isinstance(v, list) else v

    out = fresh(value)
    stack = [(value, out)] if out is not value else []
    while stack:
        src, dst = stack.pop()
        for k, v in (src.items() if isinstance(src, dict) else enumerate(src)):
            c = fresh(v)
            if isinstance(dst, dict):
                dst[k] = c
            else:
                dst.append(c)
            if c is not v:
                stack.append((v, c))
    return out


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
        where = f"{source}#{index}" + (f" {_name(value)}" if isinstance(value, dict) else "")
        index += 1
        listed = isinstance(value, dict) and value.get("kind") == "List" and isinstance(value.get("items"), list)
        big = [(obj, n) for obj in (value["items"] if listed else [value]) if (n := _json_size(obj)) > MAX_OBJECT_BYTES]
        problems += [_too_big_object(f"{where} {_name(obj)}" if listed else where, n, line) for obj, n in big]
        if not big:
            docs.append(Document(index - 1, line, value))
        at = ws.match(text, end).end()  # type: ignore[union-attr]
    if duplicates:  # valid JSON has raw tabs only between tokens, where YAML wants spaces
        _, located = _decode_yaml(text.replace("\t", " "), source)
        found = [p for p in located if "duplicate key" in p.message]
        problems += found or [Problem(source, k, f"duplicate key {k!r}: the API server's strict field validation refuses a field set twice",
                                      "keep one of them")
                              for k in duplicates]
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
    return Problem(source, size, f"the file is over the API server's {MAX_REQUEST_BYTES:,}-byte (3 MiB) request body limit",
                   "split it into smaller files (one object is one request)")


def _too_big_object(where: str, size: int, line: int) -> Problem:
    return Problem(where, f"{size:,} bytes", f"the object (line {line}) is about {size:,} bytes as JSON, over etcd's "
                   f"{MAX_OBJECT_BYTES:,}-byte (1.5 MiB) limit, so the API server cannot store it",
                   "make it smaller: move bulk data to a volume or an image (a ConfigMap holds at most 1 MiB)")


def _not_a_mapping(where: str, value: Any, line: str) -> Problem:
    kind = {list: "list", str: "string"}.get(type(value), type(value).__name__)
    return Problem(where, _clip(value), f"a manifest must be a mapping (one Kubernetes object), not a {kind} ({line})",
                   "make each YAML document one object with apiVersion, kind and metadata")


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
        context = err.context and (f"{err.context} (line {err.context_mark.line + 1})" if err.context_mark and err.problem_mark
                                   and err.context_mark.line != err.problem_mark.line else err.context)
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
