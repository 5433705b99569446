"""Load a stack: a Python file that builds a `Cluster`. Every failure becomes a StackError/SpecError."""

from __future__ import annotations

import runpy
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path

from jaxinfra.errors import JaxinfraError, Problem, StackError
from jaxinfra.spec import Cluster


def load(path: str | Path) -> Cluster:
    """Run the stack file and return its cluster: the module-level `Cluster` (exactly one).

    The stack's folder is importable while it runs, so stacks can share `_helpers.py`.
    """
    path = Path(path)
    if path.suffix != ".py" or not path.is_file():
        raise StackError([Problem(str(path), str(path), "not a Python stack file", "pass the path of a .py file, e.g. stacks/cpu_dev.py")])
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        namespace = runpy.run_path(str(path), run_name=f"jaxinfra_stack_{path.stem}")
    except JaxinfraError:
        raise
    except SyntaxError as err:
        raise StackError([Problem(f"{path}:{err.lineno}", (err.text or "").strip(), f"syntax error: {err.msg}", "fix the Python syntax")]) from None
    except Exception as err:  # the user's code raised: report where, not a traceback
        frame = next((f for f in reversed(traceback.extract_tb(err.__traceback__)) if Path(f.filename).resolve() == path.resolve()), None)
        where = f"{path}:{frame.lineno}" if frame else str(path)
        raise StackError([Problem(where, type(err).__name__, str(err), "fix the stack file")]) from None
    finally:
        sys.path.pop(0)
    clusters = [v for k, v in namespace.items() if isinstance(v, Cluster) and not k.startswith("_")]
    if len(clusters) != 1:
        raise StackError([Problem(str(path), len(clusters), "a stack defines exactly one module-level Cluster",
                                  "assign one Cluster(...) to a module-level name, e.g. `cluster = Cluster(...)`")])
    return clusters[0]


def discover(folder: str | Path = "stacks") -> list[Path]:
    """Every stack in a folder, sorted; files starting with '_' are helpers, not stacks."""
    return sorted(p for p in Path(folder).glob("*.py") if not p.name.startswith("_"))


def expand(paths: Iterable[str | Path]) -> list[Path]:
    """Stack arguments as given: folders become their stacks, helpers (`_*.py`) are dropped."""
    out: list[Path] = []
    for path in map(Path, paths):
        out += discover(path) if path.is_dir() else [] if path.name.startswith("_") else [path]
    return out
