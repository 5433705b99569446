"""The `jaxinfra` command: synth, explain, catalog, validate, diff, simulate.

Heavy imports (pydantic via the spec, rich, jsonschema) happen inside the commands that use
them, so `jaxinfra --help` and `jaxinfra synth` start fast. Every input problem is printed
as one line, followed by a one-line summary and exit status 2; never a traceback.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional

import typer

from jaxinfra.errors import JaxinfraError, Problem, SpecError

if TYPE_CHECKING:
    from jaxinfra.prefork import Prefork
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
BackendOpt = Annotated[Optional[str], typer.Option("--backend", "-b", help="Render every job with this backend: jobset, job, jaxjob or trainjob.")]


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


@app.command()
def diff(
    stack: Annotated[Path, typer.Argument(help="The stack file (Python), e.g. stacks/cpu_dev.py.", show_default=False)],
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="The folder of YAML written before by `jaxinfra synth -o` (or `cdk8s synth`).", show_default=False)],
    backend: BackendOpt = None,
) -> None:
    """Compare a stack with YAML synthesized before: objects added, removed, changed, and what needs delete-and-recreate."""
    from jaxinfra import manifests
    from jaxinfra.diff import diff as compare
    from jaxinfra.diff import PreviousError, read_dir

    loaded = _load([stack], backend)
    previous, problems = read_dir(directory)
    if problems:
        raise PreviousError(problems)
    result = compare([m for _, cluster in loaded for m in manifests(cluster)], previous)
    lines = result.lines()
    sys.stdout.write("\n".join(lines[:-1] + [f"jaxinfra: {lines[-1]}"]) + "\n")
    if result.changed:
        raise typer.Exit(1)


def _faults(kill: list[str], fail: list[str], hang: list[str], delay: list[str]) -> Any:
    """Parse POD@SECONDS / POD=SECONDS fault options; every malformed one is reported."""
    from jaxinfra.simulate.runner import Faults

    problems: list[Problem] = []

    def timed(values: list[str], sep: str, flag: str) -> dict[str, float]:
        out = {}
        for v in values:
            pod, _, secs = v.rpartition(sep)
            try:
                out[pod] = float(secs)
                if not pod or out[pod] < 0:
                    raise ValueError
            except ValueError:
                problems.append(Problem(flag, v, f"expected POD{sep}SECONDS", f"e.g. {flag} train-0{sep}2.5 (POD is a hostname or a rank)"))
        return out

    faults = Faults(kill=timed(kill, "@", "--kill"), delay=timed(delay, "=", "--delay"),
                    fail=frozenset(fail), hang=frozenset(hang))
    if problems:
        raise SpecError(problems)
    return faults


def _sources(inputs: list[Path], backend: str | None) -> list[tuple[str, list[dict[str, Any]]]]:
    """(source, manifests) per cluster: a stack is synthesized in memory, a YAML file read as is."""
    from jaxinfra import manifests
    from jaxinfra.simulate.cluster import load_files

    stacks = [p for p in inputs if p.suffix == ".py" or p.is_dir()]
    out = [(str(path), manifests(cluster)) for path, cluster in _load(stacks, backend)] if stacks else []
    return out + [(str(path), load_files([path])) for path in inputs if path not in stacks]


SIMULATE_MODULES = ("jax", "jaxinfra.simulate.probe", "jaxinfra.simulate.engine", "jaxinfra.simulate.report")
"""What `simulate` (built-in probe) imports in its prefork child while the parent reads the inputs."""


@app.command()
def simulate(
    ctx: typer.Context,
    inputs: Annotated[Optional[list[Path]], typer.Argument(help="Stack files or YAML manifests (default: stacks/cpu_dev.py).", show_default=False)] = None,
    json_report: Annotated[Optional[Path], typer.Option("--json", help="Write the report as JSON here.")] = None,
    run_command: Annotated[bool, typer.Option("--run-command", help="Run each container's own command instead of the built-in probe.")] = False,
    kill: Annotated[list[str], typer.Option(help="SIGKILL a pod: POD@SECONDS after it starts (POD: hostname or rank).")] = [],
    fail: Annotated[list[str], typer.Option(help="Make a pod's container exit 1 at start.")] = [],
    hang: Annotated[list[str], typer.Option(help="Make a pod stop making progress.")] = [],
    delay: Annotated[list[str], typer.Option(help="Start a pod late: POD=SECONDS.")] = [],
    timeout: Annotated[float, typer.Option(help="Give up on the whole simulation after this many seconds.")] = 300.0,
    init_timeout: Annotated[Optional[float], typer.Option(help="Cap every pod's JAX init timeout (seconds).")] = None,
    backend: BackendOpt = None,
    logs: Annotated[bool, typer.Option("--logs/--no-logs", help="Print each pod's output, prefixed.")] = True,
) -> None:
    """Run the job as N real JAX processes on this machine, started from its manifests as Kubernetes would."""
    from jaxinfra.simulate.runner import Options

    inputs = inputs or [Path("stacks/cpu_dev.py")]
    options = Options(run_command=run_command, timeout=timeout, init_timeout=init_timeout,
                      faults=_faults(kill, fail, hang, delay))
    sources = _sources(inputs, backend)
    if ctx.obj is not None:  # a prefork child has imported JAX meanwhile: it runs the rest
        raise typer.Exit(ctx.obj.hand_over(_simulate, sources, options, logs, json_report))
    _simulate(sources, options, logs, json_report)


def _simulate(sources: list[tuple[str, list[dict[str, Any]]]], options: Any, logs: bool, json_report: Path | None) -> None:
    """Run and report the simulation of the manifests read (in the prefork child, if any)."""
    from rich.console import Console

    from jaxinfra.simulate.engine import simulate as run
    from jaxinfra.simulate.report import Reporter

    reporter = Reporter(Console(stderr=False), logs=logs)
    report = run(sources, options, reporter)
    reporter.summary(report)
    if json_report is not None:
        json_report.write_text(json.dumps(report.as_dict(), indent=2) + "\n", encoding="utf-8")
    if not report.ok:
        failed = [f"{r.source}: {r.workload.id}" for r in report.results if r.verdict != "succeeded"]
        raise Failed(f"simulation failed: {', '.join(failed) or 'no workload ran'}", 1)
    print(f"jaxinfra: simulation passed: {len(report.results)} workload(s) in {report.seconds:.2f} s", file=sys.stderr)


def _status(call: Callable[[], Any]) -> int:
    """Run `call` and return the exit status: every input problem as a line plus a summary
    (status 2), a failed command's summary line; never a traceback."""
    try:
        call()
        return 0
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else int(done.code is not None)
    except JaxinfraError as err:
        for p in err.problems:
            print(f"error: {p}", file=sys.stderr)
        n = len(err.problems)
        print(f"jaxinfra: {n} {'problem' if n == 1 else 'problems'} ({err.kind}); nothing written", file=sys.stderr)
        return INPUT_ERROR
    except Failed as err:
        print(f"jaxinfra: {err}", file=sys.stderr)
        return err.status
    except KeyboardInterrupt:
        return 130


def _prefork(args: list[str]) -> Prefork | None:
    """For `simulate` with the built-in probe, a child importing JAX while the inputs are read."""
    if args[:1] != ["simulate"] or {"--run-command", "--help"} & set(args):
        return None
    from jaxinfra.prefork import Prefork

    return Prefork(SIMULATE_MODULES, lambda fn, fn_args: _status(lambda: fn(*fn_args)))


def _terminated(signum: int, _: Any) -> None:
    """SIGTERM (`timeout`, a CI cancel) ends the command like Ctrl-C, through every `finally`:
    a simulation kills and reaps its pods on the way out."""
    sys.exit(128 + signum)


def _run(argv: list[str] | None) -> int:
    # Pydantic plugins observe validation for apps; this short-lived command needs none, and
    # discovering them (an entry-point scan) is a tenth of its start-up. Typer does the same.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "1")
    signal.signal(signal.SIGTERM, _terminated)
    args = sys.argv[1:] if argv is None else list(argv)
    warm = _prefork(args)
    try:
        return _status(lambda: app(args=args, standalone_mode=True, obj=warm))
    finally:
        if warm is not None:
            warm.cancel()


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app and exit with its status (2 for input problems)."""
    sys.exit(_run(argv))


def entry() -> None:
    """The console script: `main`, then exit without interpreter teardown.

    Tearing down pydantic and the rest module by module is a fifth of a short command like
    `synth` (and 0.15 s more once jax is loaded); by then every file is written and closed.
    """
    code = _run(None)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe (`| head`): nothing more can be said
        pass
    os._exit(code)


if __name__ == "__main__":
    entry()
