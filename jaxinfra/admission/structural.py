"""What apiextensions-apiserver does to a custom resource with its CRD's structural schema: before validation, nulls
pruned and defaults applied (`prune_and_default`); at validation, the uniqueness that `x-kubernetes-list-type: map`
and `set` promise (`list_findings`: two replicatedJobs of one name are refused there, not by a webhook).

Unknown fields are not pruned here: with the strict field validation kubectl asks for by default, the API server
reports them as errors instead (`jaxinfra.admission.schema`).

Sources (kubernetes/kubernetes, read at the commits the file index holds):
- staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting/prunenulls.go (008b3652959c):
  a null whose schema is neither `nullable: true` nor has a `default` is deleted from its object; a null list item
  is kept; a key the schema does not describe (no property, no additionalProperties schema) is left alone.
- .../schema/defaulting/algorithm.go (94341df30b4a): every property with a `default` that is missing, or null while
  not nullable, gets a deep copy of the default; then every key is defaulted recursively (so defaults inside a
  default apply too); a non-nullable null list item or additionalProperties value gets its schema's default.
- .../pkg/apiserver/customresource_handler.go (the schema coercer; read as an index excerpt, no commit pinned):
  root `metadata` goes through ObjectMeta, so its null fields disappear (ObjectMeta has no null); its schema in a
  CRD is a bare `type: object`, so nothing under it is defaulted.
- .../schema/listtype/validation.go (95f08499d652): a list-type `set` must not repeat an item, a list-type `map`
  must not repeat the key of its `x-kubernetes-list-map-keys` (an item missing a key counts as one key value); each
  repeat is `Duplicate value: <the key, Go-printed>`; an item of a map list that is not an object is refused.
- The docs page "Extend the Kubernetes API with CustomResourceDefinitions", sections "Defaulting" and "Defaulting
  and Nullable" (the same order: prune nulls, then default).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

from jaxinfra.admission.goformat import go_repr
from jaxinfra.admission.store import Finding, Path

__all__ = ["go_repr", "list_findings", "prune_and_default"]


def prune_and_default(obj: dict, schema: Mapping) -> None:
    """Prune non-nullable nulls, then apply the schema's defaults, in place (`obj` as decoded, any shape)."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        for key in [k for k, v in metadata.items() if v is None]:
            del metadata[key]
    _prune_nulls(obj, schema)
    _default(obj, schema)


def _sub(node: Any, key: str) -> Mapping | None:
    """The schema of an object's field: its property, else the additionalProperties schema, else none."""
    if not isinstance(node, Mapping):
        return None
    properties = node.get("properties")
    if isinstance(properties, Mapping) and isinstance(properties.get(key), Mapping):
        return properties[key]
    extra = node.get("additionalProperties")
    return extra if isinstance(extra, Mapping) else None


def _items(node: Any) -> Mapping | None:
    items = node.get("items") if isinstance(node, Mapping) else None
    return items if isinstance(items, Mapping) else None


def _non_nullable_null(value: Any, node: Mapping | None) -> bool:
    return value is None and node is not None and not node.get("nullable", False)


def _prune_nulls(value: Any, node: Mapping | None) -> None:
    if isinstance(value, dict):
        for key in list(value):
            sub = _sub(node, key)
            if _non_nullable_null(value[key], sub) and "default" not in sub:  # type: ignore[operator]
                del value[key]
            else:
                _prune_nulls(value[key], sub)
    elif isinstance(value, list):
        items = _items(node)
        for item in value:
            _prune_nulls(item, items)


def _default(value: Any, node: Mapping | None) -> None:
    if node is None:
        return
    if isinstance(value, dict):
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            for key, sub in properties.items():
                if (
                    isinstance(sub, Mapping)
                    and "default" in sub
                    and (key not in value or _non_nullable_null(value[key], sub))
                ):
                    value[key] = copy.deepcopy(sub["default"])
        for key in list(value):
            sub = properties.get(key) if isinstance(properties, Mapping) else None
            if isinstance(sub, Mapping):
                _default(value[key], sub)
            elif isinstance(extra := node.get("additionalProperties"), Mapping):
                if _non_nullable_null(value[key], extra) and "default" in extra:
                    value[key] = copy.deepcopy(extra["default"])
                _default(value[key], extra)
    elif isinstance(value, list):
        items = _items(node)
        for i in range(len(value)):
            if items is not None and _non_nullable_null(value[i], items) and "default" in items:
                value[i] = copy.deepcopy(items["default"])
            _default(value[i], items)


# --- list types ----------------------------------------------------------------------------------------------------


def list_findings(obj: Mapping, schema: Mapping) -> list[Finding]:
    """Every repeated item of a list-type set and repeated key of a list-type map in `obj`, in field order."""
    return list(_lists(obj, schema, ()))


def _lists(value: Any, node: Mapping | None, at: Path) -> Iterator[Finding]:
    if node is None:
        return
    if isinstance(value, Mapping):
        for key, sub_value in value.items():
            yield from _lists(sub_value, _sub(node, str(key)), (*at, key))
    elif isinstance(value, list):
        list_type = node.get("x-kubernetes-list-type")
        if list_type == "set":
            for i in _repeats(value):
                yield _duplicate((*at, i), value[i], "make each item of this list unique")
        elif list_type == "map":
            yield from _map_repeats(value, node, at)
        items = _items(node)
        for i, item in enumerate(value):
            yield from _lists(item, items, (*at, i))


_MISSING = object()
"""The key of a map-list item that lacks the key field (listtype's unspecifiedKeyValue)."""


def _map_repeats(value: list, node: Mapping, at: Path) -> Iterator[Finding]:
    for i, item in enumerate(value):
        if item is not None and not isinstance(item, Mapping):
            message = f"Invalid value: {go_repr(item)}: must be an object for an array of list-type map"
            yield Finding((*at, i), item, message, "make each item of this list an object")
            return
    keys = node.get("x-kubernetes-list-map-keys")
    keys = [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []
    if len(keys) == 1:
        single = [(item or {}).get(keys[0], _MISSING) for item in value]
        for i in _repeats(single):
            key = {} if single[i] is _MISSING else {keys[0]: single[i]}
            yield _duplicate((*at, i), key, f"give each item of this list its own {keys[0]!r}")
    else:
        composite = [{k: (item or {})[k] for k in keys if k in (item or {})} for item in value]
        for i in _repeats(composite):
            yield _duplicate((*at, i), composite[i], f"give each item of this list its own {', '.join(keys)}")


def _duplicate(at: Path, key: Any, fix: str) -> Finding:
    return Finding(at, key, f"Duplicate value: {go_repr(key)}", fix)


def _repeats(values: list) -> list[int]:
    """The index of each value's second appearance (a third is not reported again), as validateListSet does."""
    seen: dict[Any, int] = {}
    out = []
    for i, value in enumerate(values):
        identity = _identity(value)
        seen[identity] = seen.get(identity, 0) + 1
        if seen[identity] == 2:
            out.append(i)
    return out


def _identity(value: Any) -> Any:
    """Equality as Go's for decoded JSON: compounds by their JSON text, scalars by type and value (1 != 1.0)."""
    if value is _MISSING:
        return ("missing",)
    if isinstance(value, (dict, list)):
        return ("json", json.dumps(value, sort_keys=True, separators=(",", ":"), default=str))
    return (type(value).__name__, value)
