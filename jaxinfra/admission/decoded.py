"""Reading an object that only the schema has checked, as Go's decoder leaves it: a field that is absent, null or of
another type reads as unset (the empty map, list or string), so no admission step raises on odd input."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, TypeGuard


def as_map(value: Any) -> Mapping:
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def is_int(value: Any) -> TypeGuard[int]:
    """A JSON integer (Python's bool is an int, JSON's is not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def as_int(value: Any) -> int | None:
    return value if is_int(value) else None


def entries(value: Any) -> Iterator[tuple[int, Mapping]]:
    """The objects of a list, with their indexes (other items skipped: the schema reports them)."""
    for i, item in enumerate(as_list(value)):
        if isinstance(item, Mapping):
            yield i, item


def dig(value: Any, *keys: str) -> Mapping:
    """value[k1][k2]...: a nested object, or {} where any step is not one."""
    for key in keys:
        value = as_map(value).get(key)
    return as_map(value)
