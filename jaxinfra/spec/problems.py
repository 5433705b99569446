"""How a spec object reports a problem, and how pydantic's errors become jaxinfra `Problem`s.

Validators raise `problem(message, fix, field)`; pydantic collects every such error of the tree, and
`problems_of` turns them into `Problem`s located at the user's own path, with the fix each carries.
"""

from __future__ import annotations

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from jaxinfra.errors import Problem


def problem(message: str, fix: str, field: str | None = None) -> PydanticCustomError:
    """A validation error that carries its fix (and optionally a sub-field) to `SpecError`."""
    return PydanticCustomError("jaxinfra", message, {"fix": fix, "field": field or ""})


_FIXES: dict[str, str] = {
    "missing": "set it",
    "extra_forbidden": "remove it or check its spelling",
    "greater_than": "use a value greater than {gt}",
    "greater_than_equal": "use a value of at least {ge}",
    "less_than": "use a value less than {lt}",
    "less_than_equal": "use a value of at most {le}",
    "literal_error": "use one of {expected}",
    "too_short": "give at least {min_length}",
    "string_too_short": "give a non-empty string",
}


def path_of(loc: tuple[str | int, ...]) -> str:
    """('jobs', 0, 'port') -> 'jobs[0].port'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


UNION_TAGS = {
    "accelerator": (1, {"tpu", "gpu", "cpu"}),
    "env": (2, {"literal", "secret", "configmap"}),
    "checkpoints": (1, {"gcs", "pvc", "none"}),
}
"""Where pydantic puts a tagged union's tag in an error's location: (parts after the field, tags)."""


def _untagged(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """The location without the tags of tagged unions: `jobs[0].env.A.name`, not `...env.A.secret.name`
    (only at the tag's own position, so an env var named like a tag stays)."""
    return tuple(
        part
        for i, part in enumerate(loc)
        if not any(
            i >= offset and loc[i - offset] == field and part in tags for field, (offset, tags) in UNION_TAGS.items()
        )
    )


def problems_of(err: ValidationError) -> list[Problem]:
    """Every error of one validation pass as a `Problem`: the user's path, the value, the message and its fix."""
    problems = []
    for e in err.errors(include_url=False):
        ctx = e.get("ctx") or {}
        loc = _untagged(e["loc"])
        value = e.get("input")
        if field := ctx.get("field"):
            loc = (*loc, field)
            value = value.get(field, value) if isinstance(value, dict) else value
        fix = ctx.get("fix") or _FIXES.get(e["type"], "correct the type or value").format(**ctx)
        problems.append(Problem(path_of(loc) or "cluster", value, e["msg"], fix))
    return problems
