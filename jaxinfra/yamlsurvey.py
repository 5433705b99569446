"""The node graph of one YAML document, walked once as goyaml decodes it, without expanding aliases:
what the API server's YAML decoder would refuse (excessive aliasing, an anchor that contains itself,
a key set twice) and how big each object would be as JSON. `yamlio` decodes through it; the bounds
and their sources are in yamlio's docstring.

goyaml (go-yaml `decode.go`, branches v2 and v3: `allowedAliasRatio`, `decoder.unmarshal`) counts
every node it decodes, an alias once for itself and again for each node of its value, and refuses
the document at the first node where more than 100 nodes came from aliases, more than 1,000 were
decoded, and the aliased share exceeds `allowed_alias_ratio(decoded)`.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

ALIAS_RATIO_LOW = 400_000
ALIAS_RATIO_HIGH = 4_000_000
"""goyaml's alias_ratio_range_low/high: where the allowed aliased share starts and stops falling."""

_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
_NULL, _BOOL = "tag:yaml.org,2002:null", "tag:yaml.org,2002:bool"


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


class Survey:
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
        opened: set[int] = set()  # being decoded: an alias to one of them is a cycle
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
                self.json_bytes[id(node)] = (
                    _scalar_bytes(node) if isinstance(node, yaml.ScalarNode) else _container_bytes(node, frame[5])
                )
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
                (
                    f"excessive aliasing (expanding *{anchor}, anchored at line {node.start_mark.line + 1}): "
                    f"after {self.decoded:,} decoded nodes, {self.aliased:,} come from aliases "
                    f"({self.aliased / self.decoded:.1%}), over the {allowed_alias_ratio(self.decoded):.0%} the API "
                    "server's YAML decoder allows (goyaml allowedAliasRatio, CVE-2019-11253)"
                ),
                "write the repeated parts out, or alias less: an alias of an alias multiplies",
            )
        return self.refusal is not None

    def _cycle(self, node: yaml.Node) -> tuple[Any, str, str]:
        anchor = _anchor(self.text, node)
        return (
            f"&{anchor}",
            (
                f"the value of the anchor &{anchor} (line {node.start_mark.line + 1}) contains an alias to "
                "itself, which the API server's YAML decoder refuses (goyaml: anchor value contains itself)"
            ),
            f"remove *{anchor} from inside its own value",
        )

    def _check_keys(self, node: yaml.MappingNode, path: tuple[Any, ...]) -> None:
        first: dict[Any, int] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == _MERGE:
                continue
            ident = self._key(key)
            line = key.start_mark.line + 1
            if ident in first:
                self.duplicates.append(
                    (
                        path + (key.value,),
                        key.value,
                        (
                            f"duplicate key {key.value!r} at line {line} (first at line {first[ident]}): the API "
                            "server's strict field validation refuses a field set twice (kubectl keeps the last "
                            "silently)"
                        ),
                        "keep one of them",
                    )
                )
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
            out += [
                (key, None, 0 if merge else 1),
                (value, (key.value if isinstance(key, yaml.ScalarNode) else "?",), 1),
            ]
        return out
    return []


def objects(root: yaml.Node) -> list[yaml.Node]:
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


def identity(node: yaml.Node) -> str:
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
