"""Load a stack: a Python file that builds a `Cluster`. Every failure becomes a StackError/SpecError."""

from __future__ import annotations

import runpy
import sys
import tomllib
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from jaxinfra.errors import JaxinfraError, Problem, StackError
from jaxinfra.spec import Cluster


def load(path: str | Path) -> Cluster:
    """Run the stack file and return its cluster: the module-level `Cluster` (exactly one).

    The stack's folder is importable while it runs, so stacks can share `_helpers.py`.
    """
    path = Path(path)
    if path.suffix != ".py" or not path.is_file():
        raise StackError(
            [
                Problem(
                    "",
                    str(path),
                    "not a Python stack file",
                    "pass the path of a .py file, e.g. stacks/cpu_dev.py",
                )
            ]
        )
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        namespace = runpy.run_path(str(path), run_name=f"jaxinfra_stack_{path.stem}")
    except JaxinfraError:
        raise
    except SyntaxError as err:
        raise StackError(
            [
                Problem(
                    "",
                    (err.text or "").strip(),
                    f"syntax error: {err.msg}",
                    "fix the Python syntax",
                    file=f"{path}:{err.lineno}",
                )
            ]
        ) from None
    except Exception as err:  # the user's code raised: report where, not a traceback
        frame = next(
            (
                f
                for f in reversed(traceback.extract_tb(err.__traceback__))
                if Path(f.filename).resolve() == path.resolve()
            ),
            None,
        )
        where = f"{path}:{frame.lineno}" if frame else str(path)
        raise StackError([Problem("", type(err).__name__, str(err), "fix the stack file", file=where)]) from None
    finally:
        sys.path.pop(0)
    clusters = [v for k, v in namespace.items() if isinstance(v, Cluster) and not k.startswith("_")]
    if len(clusters) != 1:
        raise StackError(
            [
                Problem(
                    "",
                    len(clusters),
                    "a stack defines exactly one module-level Cluster",
                    "assign one Cluster(...) to a module-level name, e.g. `cluster = Cluster(...)`",
                    file=str(path),
                )
            ]
        )
    return clusters[0]


def discover(folder: str | Path = "stacks") -> list[Path]:
    """Every stack in a folder, sorted; files starting with '_' are helpers, not stacks."""
    return sorted(p for p in Path(folder).glob("*.py") if not p.name.startswith("_"))


PROJECT = "pyproject.toml"
"""Where a repository names its stacks (`[tool.jaxinfra] stacks`, `[tool.jaxinfra.simulate] stacks`) and the
simulator's images."""


def settings(cwd: str | Path = ".") -> dict[str, Any]:
    """The `[tool.jaxinfra]` table of `cwd`'s pyproject.toml ({} without one): read in one place, for every command."""
    project = Path(cwd) / PROJECT
    if not project.is_file():
        return {}
    try:
        table = tomllib.loads(project.read_text(encoding="utf-8")).get("tool", {}).get("jaxinfra", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise StackError([Problem(str(project), type(err).__name__, str(err), "fix the file (TOML)")]) from None
    if not isinstance(table, dict):
        raise StackError(
            [Problem(f"{project} [tool.jaxinfra]", table, "not a table", "write [tool.jaxinfra] as a table")]
        )
    return table


def defaults(cwd: str | Path = ".", command: str | None = None) -> list[Path]:
    """The stacks a command runs on when given none, from where the user is: the command's own
    `[tool.jaxinfra.<command>] stacks` of ./pyproject.toml (e.g. the one stack `jaxinfra simulate` runs), else
    `[tool.jaxinfra] stacks` (relative to it; files or folders), else every stack of ./stacks; none is an error."""
    cwd = Path(cwd)
    table = settings(cwd)
    own = table.get(command) if command else None
    key, table = (
        (f"{PROJECT} [tool.jaxinfra.{command}] stacks", own)
        if isinstance(own, dict) and "stacks" in own
        else (f"{PROJECT} [tool.jaxinfra] stacks", table)
    )
    if "stacks" not in table:
        if found := discover(cwd / "stacks"):
            return found
        raise StackError(
            [
                Problem(
                    "stacks",
                    "./stacks" if cwd == Path(".") else str(cwd / "stacks"),
                    f"no stack here (no [tool.jaxinfra] stacks in ./{PROJECT}, no .py in ./stacks)",
                    "pass a stack file, or run from your repository's root (jaxinfra init writes one)",
                )
            ]
        )
    value = table["stacks"]
    fix = 'list stack files or folders, relative to pyproject.toml, e.g. stacks = ["stacks"]'
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise StackError([Problem(key, value, "expected a non-empty list of paths (strings)", fix)])
    problems, found = [], []
    for entry in value:
        path = cwd / entry
        stacks = expand([path])
        where = "" if str(path) == entry else f" ({path})"
        if not path.exists():
            problems.append(Problem(key, entry, f"no such file or folder{where}", fix))
        elif path.is_dir() and not stacks:
            problems.append(Problem(key, entry, f"no stack (.py) in this folder{where}", fix))
        elif path.is_file() and path.suffix != ".py":
            problems.append(Problem(key, entry, f"not a Python stack file{where}", fix))
        found += [s for s in stacks if s not in found]
    if problems:
        raise StackError(problems)
    return found


def expand(paths: Iterable[str | Path]) -> list[Path]:
    """Stack arguments as given: folders become their stacks, helpers (`_*.py`) are dropped."""
    out: list[Path] = []
    for path in map(Path, paths):
        out += discover(path) if path.is_dir() else [] if path.name.startswith("_") else [path]
    return out
