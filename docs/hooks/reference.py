"""The reference pages, generated from the code at each build so they cannot drift from it (mkdocs hook).

`reference/spec.md` reads the pydantic models of `jaxinfra.spec` (`model_fields`: name, type, default, constraints,
`Field(description=...)`), `reference/cli.md` walks the click commands of `jaxinfra.cli`'s typer app, and
`reference/api.md` hands `jaxinfra.pulumi` and `jaxinfra.cdk8s` to mkdocstrings. None of them is a file under
`docs/`: `on_files` adds them to the build (mkdocs `File.generated`), so `mkdocs.yml`'s nav can list them.
`tests/test_docs.py` checks that every field of every public model is on the spec page.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

if typing.TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files

#: The models in reading order (the root first, then what it holds); any other public model follows, by name.
ORDER = (
    "Cluster",
    "NodePool",
    "TPU",
    "GPU",
    "CPU",
    "JaxJob",
    "Resources",
    "Toleration",
    "Sidecar",
    "Shadow",
    "GCSBucket",
    "PVC",
    "SecretRef",
    "ConfigMapRef",
)

#: How each constraint of `annotated_types` reads in the type column.
CONSTRAINTS: dict[type, tuple[str, str]] = {
    annotated_types.Gt: ("gt", "> {}"),
    annotated_types.Ge: ("ge", "≥ {}"),
    annotated_types.Lt: ("lt", "< {}"),
    annotated_types.Le: ("le", "≤ {}"),
    annotated_types.MinLen: ("min_length", "length ≥ {}"),
    annotated_types.MaxLen: ("max_length", "length ≤ {}"),
}


def models() -> list[type[BaseModel]]:
    """Every public pydantic model of `jaxinfra.spec` with fields of its own (not the `Spec` base)."""
    import jaxinfra.spec as spec

    found = [getattr(spec, name) for name in spec.__all__]
    found = [m for m in found if isinstance(m, type) and issubclass(m, BaseModel) and m.model_fields]
    return sorted(found, key=lambda m: (ORDER.index(m.__name__) if m.__name__ in ORDER else len(ORDER), m.__name__))


def aliases() -> dict[str, Any]:
    """The public type aliases of `jaxinfra.spec` (the unions a field may hold: `Accelerator`, `Checkpoints`, ...)."""
    import jaxinfra.spec as spec

    return {
        name: value
        for name in spec.__all__
        if typing.get_origin(value := getattr(spec, name)) in (typing.Annotated, typing.Literal, typing.Union)
    }


def type_text(tp: Any, linked: frozenset[str] = frozenset()) -> str:
    """A type as Python spells it, the models in `linked` as links to their sections."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return type_text(args[0], linked)
    if tp is type(None) or tp is None:
        return "None"
    if tp is Any:
        return "Any"
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_text(a, linked) for a in args)
    if origin is not None:
        parts = [("..." if a is Ellipsis else type_text(a, linked)) for a in args]
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(parts)}]"
    name = getattr(tp, "__name__", str(tp))
    return f"[{name}](#{name.lower()})" if name in linked else name


def constraints(field: FieldInfo) -> list[str]:
    """The field's numeric and length bounds (`gt=0`, `le=1024`, `min_length=1`), as they read."""
    out = []
    for meta in field.metadata:
        for kind, (attr, text) in CONSTRAINTS.items():
            if isinstance(meta, kind):
                out.append(text.format(getattr(meta, attr)))
    return out


def default_text(field: FieldInfo) -> str:
    """`required`, or the default as Python would write it (a factory's value: `{}`, `Resources()`)."""
    if field.default_factory is not None:
        factory = field.default_factory
        if isinstance(factory, type) and issubclass(factory, BaseModel):
            return f"`{factory.__name__}()`"
        return f"`{factory()!r}`"  # type: ignore[call-arg]
    if field.default is PydanticUndefined:
        return "required"
    return f"`{field.default!r}`"


def cell(text: str) -> str:
    """One table cell: a single line, pipes escaped, and `<` `>` outside code spans kept as text (`<cluster>.yaml`)."""
    parts = " ".join(text.split()).replace("|", "\\|").split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def undocumented() -> list[str]:
    """`Model.field` for every field without a `Field(description=...)`."""
    return [f"{m.__name__}.{name}" for m in models() for name, f in m.model_fields.items() if not f.description]


def spec_page() -> str:
    """Every public model of the spec: its docstring, how it is called, and a table of its fields."""
    found = models()
    linked = frozenset(m.__name__ for m in found)
    lines = [
        "# The spec",
        "",
        "Generated from `jaxinfra.spec` at build time (`docs/hooks/reference.py`): every public model, each field",
        "with its type, default and description, as the code declares them. A stack assigns one `Cluster`; leaf",
        "objects only record what they are given, and `Cluster(...)` validates the whole tree at once (one error per",
        "problem, with its path, such as `jobs[0].coordinator_port`). Import them from `jaxinfra`.",
        "",
    ]
    for model in found:
        positional = getattr(model, "_positional", ())
        call = ", ".join(positional) + (", ..." if len(positional) < len(model.model_fields) else "")
        lines += [f"## {model.__name__}", "", inspect.cleandoc(model.__doc__ or ""), ""]
        lines += [f"`{model.__name__}({call if positional else '**fields'})`", ""]
        lines += ["| field | type | default | description |", "| --- | --- | --- | --- |"]
        for name, field in model.model_fields.items():
            kind = ", ".join([type_text(field.annotation, linked), *constraints(field)])
            text = field.description or "—"
            lines.append(f"| `{name}` | {cell(kind)} | {cell(default_text(field))} | {cell(text)} |")
        lines.append("")
    lines += ["## Type aliases", "", "The unions and choices a field may hold.", "", "| name | is |", "| --- | --- |"]
    lines += [f"| `{name}` | {cell(type_text(tp, linked))} |" for name, tp in aliases().items()]
    return "\n".join(lines) + "\n"


def commands() -> Iterator[tuple[str, Any, Any]]:
    """The `jaxinfra` group, then each of its commands, in the order `--help` lists them, with their contexts.

    Typer carries its own copy of click (`typer._click`), so the objects are reached through typer alone.
    """
    import typer.main

    from jaxinfra.cli import app

    group: Any = typer.main.get_command(app)  # a TyperGroup: list_commands, get_command
    root = group.context_class(group, info_name="jaxinfra")
    yield "jaxinfra", group, root
    for name in group.list_commands(root):
        command = group.get_command(root, name)
        yield name, command, command.context_class(command, info_name=name, parent=root)


def param_row(param: Any, ctx: Any) -> str:
    """One row of a command's table: how it is written, its default, what it does."""
    from typer.core import TyperOption

    record = param.get_help_record(ctx)
    written = re.sub(r"<(?:list\[)?(\w+)\]?>", lambda m: f"<{m[1].lower()}>", record[0] if record else param.name)
    default = param.default
    if isinstance(param, TyperOption) and param.is_flag and param.default is False and not param.secondary_opts:
        default = ""
    if param.multiple:
        written, default = written + " (repeatable)", ""
    shown = "required" if param.required else ("" if default in (None, "", [], ()) else f"`{default}`")
    code = f"`{written}`"
    return f"| {cell(code)} | {shown} | {cell(getattr(param, 'help', None) or '')} |"


def cli_page() -> str:
    """`jaxinfra` and each command: its help, its usage line, and a table of its arguments and options."""
    lines = [
        "# The command line",
        "",
        "Generated from the typer app in `jaxinfra.cli` at build time (`docs/hooks/reference.py`): each command's",
        "help, usage and options, as `jaxinfra COMMAND --help` prints them. Every problem with the input is one",
        "line naming the field, the value and the fix, and exits 2 with nothing written; `diff` exits 1 when",
        "something changed; `simulate` exits 1 when a workload failed or did not finish, 3 where this machine",
        "cannot run it (no pod sandbox, too little memory), 4 where nothing failed but the probe could not give a",
        "workload's verdict (a contract its command computes: `--run-command` checks it), and 130 or 143 when it is",
        "stopped (Ctrl-C, SIGTERM).",
        "",
    ]
    for name, command, ctx in commands():
        title = "jaxinfra" if name == "jaxinfra" else f"jaxinfra {name}"
        lines += [f"## {title}", "", inspect.cleandoc(command.help or ""), ""]
        lines += ["```text", command.get_usage(ctx), "```", ""]
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        if params:
            lines += ["| argument or option | default | what it does |", "| --- | --- | --- |"]
            lines += [param_row(p, ctx) for p in params]
            lines.append("")
    return "\n".join(lines) + "\n"


def api_page() -> str:
    """The adapters' Python API, from their docstrings (mkdocstrings reads the source; nothing is imported)."""
    return "\n".join(
        [
            "# The adapters' API",
            "",
            "Generated by mkdocstrings from the source at build time: the Pulumi components and program",
            "(`jaxinfra.pulumi`) and the cdk8s constructs (`jaxinfra.cdk8s`). How to use them:",
            "[Pulumi](../pulumi.md) and [GitOps with cdk8s](../cdk8s.md).",
            "",
            "## jaxinfra.pulumi",
            "",
            "::: jaxinfra.pulumi",
            "    options:",
            "      show_root_heading: false",
            "      heading_level: 3",
            "",
            "## jaxinfra.cdk8s",
            "",
            "::: jaxinfra.cdk8s",
            "    options:",
            "      show_root_heading: false",
            "      heading_level: 3",
            "",
        ]
    )


#: Each generated page, by its path under docs/.
PAGES: dict[str, Callable[[], str]] = {
    "reference/spec.md": spec_page,
    "reference/cli.md": cli_page,
    "reference/api.md": api_page,
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """mkdocs: add the generated pages to the build, as if they were files under docs/."""
    from mkdocs.structure.files import File

    for uri, page in PAGES.items():
        files.append(File.generated(config, uri, content=page()))
    return files
