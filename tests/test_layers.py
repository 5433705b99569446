"""The core's dependencies point one way (DESIGN §2): names -> spec -> plan -> render.

Read from the source (every import, also inside functions; `if TYPE_CHECKING:` blocks are for
readers of types only and are skipped), so a lazy import back up a layer fails here too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "jaxinfra"

#: Module -> the jaxinfra modules it may import at run time.
ALLOWED = {
    "errors": set(),
    "names": set(),
    "catalog": {"errors"},
    "spec": {"catalog", "errors", "names"},
    "plan": {"catalog", "errors", "names"},
    "render": {"catalog", "names", "plan", "render"},
}


def runtime_imports(path: Path) -> set[str]:
    """The first component under `jaxinfra.` of every import in the file, outside `if TYPE_CHECKING:`."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "jaxinfra":
            parts = node.module.split(".")
            found.update([parts[1]] if len(parts) > 1 else [alias.name for alias in node.names])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("jaxinfra."))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_core_imports_only_the_layers_below(layer: str) -> None:
    files = sorted((PACKAGE / layer).glob("*.py")) if (PACKAGE / layer).is_dir() else [PACKAGE / f"{layer}.py"]
    for path in files:
        extra = runtime_imports(path) - ALLOWED[layer]
        assert not extra, f"{path.relative_to(PACKAGE.parent)} imports {sorted(extra)}, above or beside its layer"


def test_the_check_reads_function_level_imports() -> None:
    """The check would miss the old cycle if it skipped imports inside functions."""
    code = "def f():\n    from jaxinfra.plan import check\nif TYPE_CHECKING:\n    from jaxinfra.render import render\n"
    path = Path(__file__).with_name("_layers_sample.py")
    try:
        path.write_text(code, encoding="utf-8")
        assert runtime_imports(path) == {"plan"}
    finally:
        path.unlink()


def test_spec_uses_no_private_pydantic_module() -> None:
    tree = ast.parse((PACKAGE / "spec.py").read_text(encoding="utf-8"))
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not [m for m in modules if m and "._" in m]
