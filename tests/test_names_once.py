"""Each name once: upstream's names are spelled only in `jaxinfra.upstream`, and no module imports another's private
names (the library and the simulator; tests may reach into what they test).

Read from the source with ast: string literals (docstrings aside) and imports.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jaxinfra import upstream

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "jaxinfra").rglob("*.py")) + sorted((ROOT / "simulate" / "jaxinfra_sim").rglob("*.py"))
UPSTREAM = ROOT / "jaxinfra" / "upstream.py"
PACKAGES = ("jaxinfra", "jaxinfra_sim")

#: Upstream's names that no module but `jaxinfra.upstream` may spell: every key, group and version it holds (a value
#: with a dot or a slash), and the distinctive bare names among the rest.
SPELLED_ONCE = sorted(
    {v for v in vars(upstream).values() if isinstance(v, str) and ("." in v or "/" in v)}
    | set(upstream.SYSTEM_NAMESPACES - {"default"})
    | {
        upstream.JOB_COMPLETION_INDEX,
        upstream.JAXJOB_PORT_NAME,
        upstream.JAXJOB_CONTROLLER,
        upstream.KUEUE_SYSTEM,
        "kueue.x-k8s.io/v1beta1",
    }
)


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def upstream_literals(path: Path) -> list[str]:
    """`line: 'literal'` for each string literal in the file (docstrings aside) that is one of upstream's names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    names = set(SPELLED_ONCE)
    return [
        f"{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in docs
    ]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(path: Path) -> list[str]:
    """`line: module.name` for each private name the file takes from another module of the library or the
    simulator: `from m import _name`, or `m._name` where `m` is such a module (or a name) it imported."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    imported: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.lineno}: {node.module}.{alias.name}")
                imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PACKAGES:
                    imported[alias.asname or alias.name.split(".")[0]] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in imported:
                found.append(f"{node.lineno}: {imported[base.id]}...{node.attr}")
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_imports_another_modules_private_names(path: Path) -> None:
    found = private_imports(path)
    assert not found, f"{path.relative_to(ROOT)} imports private names: {found}"


@pytest.mark.parametrize("path", [p for p in SOURCES if p != UPSTREAM], ids=lambda p: str(p.relative_to(ROOT)))
def test_upstream_names_are_spelled_only_in_jaxinfra_upstream(path: Path) -> None:
    found = upstream_literals(path)
    assert not found, f"{path.relative_to(ROOT)} spells upstream's names: {found}; import them from jaxinfra.upstream"


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""kueue.x-k8s.io/queue-name in a docstring is prose."""\n'
        "from jaxinfra.admission.webhooks.shared import _invalid, as_map\n"
        "from jaxinfra_sim.kubelet import pod_workers\n"
        "QUEUE = 'kueue.x-k8s.io/queue-name'\n"
        "loaded = pod_workers._loaded_jax\n",
        encoding="utf-8",
    )
    assert upstream_literals(sample) == ["4: 'kueue.x-k8s.io/queue-name'"]
    assert private_imports(sample) == [
        "2: jaxinfra.admission.webhooks.shared._invalid",
        "5: jaxinfra_sim.kubelet.pod_workers..._loaded_jax",
    ]
    assert {"kubeflow.org/v1", "jobset.x-k8s.io/v1alpha2", "jobset.sigs.k8s.io/", "kube-system"} <= set(SPELLED_ONCE)
