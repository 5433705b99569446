"""Strict validation, the library's entry points to the API server's front door (`jaxinfra.admission`): for objects
in memory (`validate_objects`) and for files (`validate_files`), each problem named by its object and field."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from jaxinfra.errors import Problem
from jaxinfra.schemas import K8S_VERSION

__all__ = ["K8S_VERSION", "validate_files", "validate_objects"]


def validate_objects(objects: Iterable[Mapping], source: str = "<memory>") -> list[Problem]:
    """Every problem the API server finds in `objects`, applied in order to one cluster (`jaxinfra.admission`);
    `source` names them in each Problem's path."""
    from jaxinfra.admission import Request, admit

    return list(admit([Request(source, i, obj) for i, obj in enumerate(objects)]).problems)


def validate_files(paths: Iterable[str | Path]) -> list[Problem]:
    """Every problem in multi-document YAML (or JSON) files applied to one cluster; unreadable or unparsable
    files are problems too. A folder stands for its .json, .yaml and .yml files, recursively
    (`jaxinfra.manifest_paths`, as `kubectl apply -f DIR -R` reads it).

    Empty documents (a stray `---`) are skipped but still counted, so `#index` is the document's
    position in its file (0-based).
    """
    from jaxinfra.admission import admit, read

    requests, problems = read(paths)
    return problems + list(admit(requests).problems)
