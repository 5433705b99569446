"""The core's dependencies point one way (docs/design.md, "The core layers"): names -> spec -> plan -> render.

Read from the source (every import, also inside functions; `if TYPE_CHECKING:` blocks are for
readers of types only and are skipped), so a lazy import back up a layer fails here too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "jaxinfra"

#: Module -> the jaxinfra modules it may import at run time.
ALLOWED = {
    "errors": set(),
    "names": set(),
    "quantity": set(),
    "catalog": {"errors"},
    "spec": {"catalog", "errors", "names", "quantity", "spec"},
    "plan": {"catalog", "errors", "names", "quantity"},
    "render": {"catalog", "errors", "names", "plan", "render"},  # errors: a pod patch that does not apply
}

#: Module of the spec package -> the spec modules it may import at run time: each concern builds on the
#: ones below it, siblings stay apart, and only the root (cluster) runs the rules across objects.
SPEC_ALLOWED = {
    "problems": set(),
    "base": {"problems"},
    "accelerators": {"base", "problems"},
    "env": {"base", "problems"},
    "checkpoints": {"base", "problems"},
    "extras": {"base", "problems"},
    "jobs": {"accelerators", "base", "checkpoints", "env", "extras", "problems"},
    "rules": {"checkpoints", "jobs"},
    "cluster": {"base", "jobs", "problems", "rules"},
}

#: Module of the pulumi package -> the pulumi modules it may import at run time: the configuration first,
#: then the node pools, what GKE is given and the checks over them; the Kubernetes objects apart from GKE;
#: the Cluster component (and the program) over all of them.
PULUMI_ALLOWED = {
    "config": set(),
    "pools": {"config"},
    "gke": {"config", "pools"},
    "checks": {"config", "gke", "pools"},
    "kubernetes": set(),
    "cluster": {"checks", "config", "gke", "kubernetes", "pools"},
}

#: Package -> (its module -> the modules of the same package it may import at run time).
PACKAGES = {"spec": SPEC_ALLOWED, "pulumi": PULUMI_ALLOWED}
MODULES = [(package, module) for package, allowed in sorted(PACKAGES.items()) for module in sorted(allowed)]


def runtime_imports(path: Path, package: str = "jaxinfra") -> set[str]:
    """The first component under `<package>.` of every import in the file, outside `if TYPE_CHECKING:`."""
    found: set[str] = set()
    depth = package.count(".") + 1

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.module and f"{node.module}.".startswith(f"{package}."):
            parts = node.module.split(".")
            found.update([parts[depth]] if len(parts) > depth else [alias.name for alias in node.names])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[depth] for a in node.names if a.name.startswith(f"{package}."))
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


@pytest.mark.parametrize(("package", "module"), MODULES, ids=[f"{p}.{m}" for p, m in MODULES])
def test_package_modules_import_only_the_concerns_below(package: str, module: str) -> None:
    extra = runtime_imports(PACKAGE / package / f"{module}.py", f"jaxinfra.{package}") - PACKAGES[package][module]
    assert not extra, f"jaxinfra/{package}/{module}.py imports {sorted(extra)}, above or beside it in its package"


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_every_module_of_a_package_has_a_place_in_its_order(package: str) -> None:
    assert {p.stem for p in (PACKAGE / package).glob("*.py")} == {*PACKAGES[package], "__init__"}


def test_the_check_reads_function_level_imports() -> None:
    """The check would miss the old cycle if it skipped imports inside functions."""
    code = "def f():\n    from jaxinfra.plan import check\nif TYPE_CHECKING:\n    from jaxinfra.render import render\n"
    path = Path(__file__).with_name("_layers_sample.py")
    try:
        path.write_text(code, encoding="utf-8")
        assert runtime_imports(path) == {"plan"}
        path.write_text(
            "from jaxinfra.spec.jobs import JaxJob\nimport jaxinfra.spec.base\nfrom jaxinfra.plan import plan\n",
            encoding="utf-8",
        )
        assert runtime_imports(path, "jaxinfra.spec") == {"jobs", "base"}
    finally:
        path.unlink()


@pytest.mark.parametrize("path", sorted((PACKAGE / "spec").glob("*.py")), ids=lambda p: p.name)
def test_spec_uses_no_private_pydantic_module(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert not [m for m in modules if m and "._" in m]
