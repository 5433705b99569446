"""The `jaxinfra` command: synth, explain, catalog, validate.

Heavy imports (pydantic via the spec, rich, jsonschema) happen inside the commands that use
them, so `jaxinfra --help` and `jaxinfra synth` start fast. Every input problem is printed
as one line, followed by a one-line summary and exit status 2; never a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from jaxinfra.errors import JaxinfraError, Problem, SpecError

if TYPE_CHECKING:
    from jaxinfra.spec import Cluster

app = typer.Typer(
    name="jaxinfra",
    help="Multi-host JAX training on Kubernetes: declare it in Python, synthesize, validate, simulate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

INPUT_ERROR = 2


class Failed(Exception):
    """Raised by a command to end with a summary line and a status, after its own output."""

    def __init__(self, summary: str, status: int = INPUT_ERROR):
        super().__init__(summary)
        self.status = status


def _load(stacks: list[Path], backend: str | None) -> list[tuple[Path, Cluster]]:
    """Load every stack (and apply --backend), collecting the problems of all of them."""
    from jaxinfra import stack
    from jaxinfra.spec import BACKENDS

    if backend is not None and backend not in BACKENDS:
        raise SpecError([Problem("--backend", backend, "unknown backend", f"use one of {', '.join(BACKENDS)}")])
    loaded, problems = [], []
    for path in stack.expand(stacks):
        try:
            cluster = stack.load(path)
            loaded.append((path, cluster.with_backend(backend) if backend else cluster))
        except JaxinfraError as err:
            problems += [p if p.path.startswith(str(path)) else Problem(f"{path}: {p.path}", p.value, p.message, p.fix)
                         for p in err.problems]
    if problems:
        raise SpecError(problems)
    return loaded


StacksArg = Annotated[list[Path], typer.Argument(help="Stack files (Python) or folders of them, e.g. stacks/cpu_dev.py; helpers (_*.py) are skipped.", show_default=False)]
BackendOpt = Annotated[Optional[str], typer.Option("--backend", "-b", help="Render every job with this backend: jobset or job.")]


@app.command()
def synth(
    stacks: StacksArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write <cluster>.yaml into.")] = Path("out"),
    stdout: Annotated[bool, typer.Option("--stdout", help="Print the YAML instead of writing files.")] = False,
    backend: BackendOpt = None,
) -> None:
    """Synthesize every Kubernetes object of the stacks as YAML (one file per cluster)."""
    from jaxinfra import manifests
    from jaxinfra.yamlio import dump

    rendered = [(cluster.name, dump(manifests(cluster))) for _, cluster in _load(stacks, backend)]
    if stdout:
        sys.stdout.write("".join(text for _, text in rendered))
        return
    names = [name for name, _ in rendered]
    if len(set(names)) != len(names):
        raise SpecError([Problem("stacks", names, "two stacks declare the same cluster name", "rename one cluster")])
    out.mkdir(parents=True, exist_ok=True)
    for name, text in rendered:
        target = out / f"{name}.yaml"
        tmp = target.with_suffix(".yaml.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)  # never a half-written file
        print(f"wrote {target}", file=sys.stderr)


@app.command()
def explain(stacks: StacksArg, backend: BackendOpt = None,
            ranks: Annotated[int, typer.Option(help="Show the env of at most this many ranks per job.")] = 8) -> None:
    """Per job: pods, hosts, devices, coordinator, and the env each rank receives."""
    from rich.console import Console

    from jaxinfra.explain import render_explanation
    from jaxinfra.plan import plan

    console = Console()
    for path, cluster in _load(stacks, backend):
        render_explanation(console, path, plan(cluster), ranks)


@app.command()
def catalog(
    filter: Annotated[Optional[str], typer.Argument(help="Only rows whose name, alias, family or machine type contains this.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as a JSON array.")] = False,
) -> None:
    """List the accelerators jaxinfra knows (TPU slices, GPU machines, CPU)."""
    from jaxinfra import catalog as cat

    rows = cat.search(filter)
    if as_json:
        sys.stdout.write(json.dumps([r.as_dict() for r in rows], indent=2) + "\n")
        return
    if not rows:
        raise Failed(f"no accelerator matches {filter!r}; try `jaxinfra catalog` for all", 1)
    from rich.console import Console
    from rich.table import Table

    table = Table("name", "kind", "topology", "chips", "hosts", "chips/host", "machine type", "GKE accelerator", "aliases")
    for r in rows:
        table.add_row(r.name, r.kind, r.topology or "", str(r.chips), str(r.hosts), str(r.chips_per_host),
                      r.machine_type or "", r.gke_accelerator or "", ", ".join(r.aliases))
    Console().print(table)


@app.command()
def validate(files: Annotated[list[Path], typer.Argument(help="YAML manifest files.", show_default=False)]) -> None:
    """Strictly validate manifests: built-in kinds against Kubernetes' schema, CRDs against theirs."""
    from jaxinfra.validate import K8S_VERSION, validate_files

    if problems := validate_files(files):
        for p in problems:
            print(f"error: {p}", file=sys.stderr)
        raise Failed(f"{len(problems)} schema problems in {len(files)} files (Kubernetes {K8S_VERSION}, strict)")
    print(f"{len(files)} files valid (Kubernetes {K8S_VERSION} and CRD schemas, strict)", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app; turn every input problem into lines plus a summary, exit 2."""
    # Pydantic plugins observe validation for apps; this short-lived command needs none, and
    # discovering them (an entry-point scan) is a tenth of its start-up. Typer does the same.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "1")
    try:
        app(args=argv, standalone_mode=True)
    except JaxinfraError as err:
        for p in err.problems:
            print(f"error: {p}", file=sys.stderr)
        n = len(err.problems)
        print(f"jaxinfra: {n} {'problem' if n == 1 else 'problems'} ({err.kind}); nothing written", file=sys.stderr)
        sys.exit(INPUT_ERROR)
    except Failed as err:
        print(f"jaxinfra: {err}", file=sys.stderr)
        sys.exit(err.status)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
