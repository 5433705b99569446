"""The docs hold together without a build (the lead's `.ci/run` runs `mkdocs build --strict`): the README stays short,
every page is in the nav, every relative link and anchor resolves, every path the prose names exists, and the
generated reference pages (docs/hooks/reference.py) list every spec field and every command option."""

from __future__ import annotations

import importlib.util
import re
import unicodedata
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from pydantic import BaseModel

import jaxinfra.spec

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts)
PROSE = [ROOT / "README.md", *PAGES]


def load_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference_hook", DOCS / "hooks" / "reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOK = load_hook()


def nav_pages() -> list[str]:
    """Every page mkdocs.yml's nav lists, in order (its config is YAML without tags)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def walk(entry: object) -> list[str]:
        if isinstance(entry, str):
            return [entry]
        if isinstance(entry, list):
            return [page for item in entry for page in walk(item)]
        if isinstance(entry, dict):
            return [page for value in entry.values() for page in walk(value)]
        return []

    return walk(config["nav"])


def without_code(text: str) -> str:
    """The text with fenced code blocks blanked (their lines kept, so nothing in them counts as a link or heading)."""
    return re.sub(r"^```.*?^```", lambda m: "\n" * m[0].count("\n"), text, flags=re.S | re.M)


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension gives a heading (its default `slugify`, on the rendered text)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def anchors(text: str) -> set[str]:
    return {slug(m[1]) for m in re.finditer(r"^#{1,6} +(.+?)\s*$", without_code(text), flags=re.M)}


def page_text(path: Path) -> str | None:
    """A page's markdown: the file, or the hook's generated page for a path under docs/ that it makes."""
    if path.is_file():
        return path.read_text()
    uri = path.relative_to(DOCS).as_posix() if path.is_relative_to(DOCS) else None
    return HOOK.PAGES[uri]() if uri in HOOK.PAGES else None


def test_readme_is_at_most_200_lines() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_every_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    listed = nav_pages()
    on_disk = {p.relative_to(DOCS).as_posix() for p in PAGES}
    assert on_disk <= set(listed), f"pages missing from mkdocs.yml's nav: {sorted(on_disk - set(listed))}"
    assert set(listed) <= on_disk | set(HOOK.PAGES), "nav entries that are neither a page nor a generated one"
    assert len(listed) == len(set(listed))


@pytest.mark.parametrize("path", PROSE, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", without_code(path.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        text = page_text(dest) if dest.suffix == ".md" else ("" if dest.exists() else None)
        if text is None:
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(text):
            broken.append(f"{target} (no such heading)")
    assert not broken, broken


#: Where a path the prose names may live: the repository root, or (as the design's tables write them) the package.
PATH_ROOTS = (ROOT, ROOT / "jaxinfra")
NAMED_PATH = re.compile(
    r"`((?:jaxinfra|simulate|tests|benchmarks|examples|docs|admission|render|backends|spec|pulumi)/[^`\s]+)`"
)


@pytest.mark.parametrize("path", PROSE, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_the_prose_names_exists(path: Path) -> None:
    """So a moved or renamed module cannot leave the docs behind (`simulate/emulation.py`, `jaxinfra/...`)."""
    missing = [
        named
        for named in NAMED_PATH.findall(path.read_text())
        if not re.search(r"[*<{$]|\.\.\.", named) and not any((r / named).exists() for r in PATH_ROOTS)
    ]
    assert not missing, missing


def public_models() -> list[type[BaseModel]]:
    found = [getattr(jaxinfra.spec, name) for name in jaxinfra.spec.__all__]
    return [m for m in found if isinstance(m, type) and issubclass(m, BaseModel) and m.model_fields]


def test_the_spec_reference_lists_every_field_of_every_public_model() -> None:
    page = HOOK.spec_page()
    sections = dict(re.findall(r"^## (\w+)\n(.*?)(?=^## |\Z)", page, flags=re.M | re.S))
    assert {m.__name__ for m in public_models()} <= set(sections)
    for model in public_models():
        rows = re.findall(r"^\| `(\w+)` \|", sections[model.__name__], flags=re.M)
        assert rows == list(model.model_fields), model.__name__
        for name, field in model.model_fields.items():
            if field.description:
                assert HOOK.cell(field.description) in sections[model.__name__], f"{model.__name__}.{name}"


def test_the_cli_reference_lists_every_command_and_option() -> None:
    page = HOOK.cli_page()
    for name, command, _ in HOOK.commands():
        assert f"## {'jaxinfra' if name == 'jaxinfra' else f'jaxinfra {name}'}\n" in page, name
        for param in command.params:
            assert all(opt in page for opt in param.opts if opt.startswith("-")), (name, param.name)
            if param.help:
                assert HOOK.cell(param.help) in page, (name, param.name)
