"""Deterministic YAML: sorted keys, block style, the C emitter when present. Same input, same bytes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from jaxinfra.errors import Problem

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def dump(manifests: Iterable[Mapping[str, Any]]) -> str:
    """A multi-document YAML stream, one document per manifest, in the given order."""
    return yaml.dump_all(list(manifests), Dumper=_Dumper, sort_keys=True, default_flow_style=False,
                         explicit_start=True, width=1_000_000, allow_unicode=True)


def load(text: str) -> list[Any]:
    """Every document of a YAML stream, empty documents dropped."""
    return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]


def read_manifests(paths: Iterable[str | Path]) -> tuple[list[dict[str, Any]], list[Problem]]:
    """Every manifest of some multi-document YAML files, in order (a `kind: List` is flattened),
    and one Problem per unreadable file or non-mapping document, so all are reported at once."""
    manifests: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for path in map(Path, paths):
        try:
            docs = load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as err:
            problems.append(Problem(str(path), str(path), f"cannot read the file: {err}", "pass a readable YAML file"))
            continue
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark else str(path)
            problems.append(Problem(where, str(path), f"not valid YAML: {getattr(err, 'problem', None) or err}", "fix the YAML syntax"))
            continue
        for i, doc in enumerate(docs):
            if not isinstance(doc, dict):
                problems.append(Problem(f"{path} document {i + 1}", type(doc).__name__, "a manifest must be a mapping",
                                        "each YAML document must be one Kubernetes object"))
            elif doc.get("kind") == "List":
                manifests += [item for item in doc.get("items") or [] if isinstance(item, dict)]
            else:
                manifests.append(doc)
    return manifests, problems
