"""Deterministic YAML: sorted keys, block style, the C emitter when present. Same input, same bytes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def dump(manifests: Iterable[Mapping[str, Any]]) -> str:
    """A multi-document YAML stream, one document per manifest, in the given order."""
    return yaml.dump_all(list(manifests), Dumper=_Dumper, sort_keys=True, default_flow_style=False,
                         explicit_start=True, width=1_000_000, allow_unicode=True)


def load(text: str) -> list[Any]:
    """Every document of a YAML stream, empty documents dropped."""
    return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
