"""The `jaxinfra` command: synth, init, explain, catalog, validate, diff, simulate, doctor.

Heavy imports (pydantic via the spec, rich, jsonschema) happen inside the commands that use
them, so `jaxinfra --help` and `jaxinfra synth` start fast. Every input problem is printed
as one line, followed by a one-line summary and exit status 2; never a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from jaxinfra import backends, invocation
from jaxinfra.errors import MACHINE_LIMIT, CommandFailed, JaxinfraError, ManifestError, OutputError, Problem, SpecError

if TYPE_CHECKING:
    pass

app = typer.Typer(
    name="jaxinfra",
    help="Multi-host JAX training on Kubernetes: declare it in Python, synthesize, validate, simulate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    """--version: its line, then exit (`jaxinfra.entry` answers it before typer loads; this lists it in --help)."""
    if value:
        from jaxinfra.init import version_line

        print(version_line())
        raise typer.Exit()


@app.callback()
def _app(
    version: Annotated[
        bool, typer.Option("--version", help="Print jaxinfra's version and exit.", is_eager=True, callback=_version)
    ] = False,
) -> None:
    """Multi-host JAX training on Kubernetes: declare it in Python, synthesize, validate, simulate."""


def _start(
    given: list[Path] | None,
    files: dict[str, Path | None] | None = None,
    folders: dict[str, tuple[Path | None, list[str]]] | None = None,
    command: str | None = None,
) -> list[Path]:
    """Before any work: the stacks (those given, else `stack.defaults` of `command` from where the user is) and every
    output path checked (`jaxinfra.outputs`), the problems of both at once."""
    from jaxinfra import outputs, stack

    problems = outputs.check(files, folders)
    try:
        stacks = list(given) if given else stack.defaults(command=command)
    except JaxinfraError as err:
        raise type(err)([*problems, *err.problems]) from None
    if problems:
        raise OutputError(problems)
    return stacks


def _shadow(kind: str | None, cpu: str | None, memory: str | None) -> dict[str, str] | None:
    """--shadow and its request options: None (no shadow) or the requests given; misuse is an input problem."""
    if kind is None:
        extra = [(flag, v) for flag, v in (("--shadow-cpu", cpu), ("--shadow-memory", memory)) if v is not None]
        if extra:
            raise SpecError([Problem(flag, v, "only applies to a shadow", "add --shadow cpu") for flag, v in extra])
        return None
    if kind != "cpu":
        raise SpecError([Problem("--shadow", kind, "unknown shadow", "use --shadow cpu")])
    return {key: v for key, v in (("cpu", cpu), ("memory", memory)) if v is not None}


DEFAULT_STACKS = "default: [tool.jaxinfra] stacks of ./pyproject.toml, else every stack of ./stacks"
StacksArg = Annotated[
    list[Path] | None,
    typer.Argument(
        help=f"Stack files (Python) or folders of them, e.g. stacks/cpu_dev.py; helpers (_*.py) are skipped "
        f"({DEFAULT_STACKS}).",
        show_default=False,
    ),
]
BackendOpt = Annotated[
    str | None,
    typer.Option("--backend", "-b", help=f"Render every job with this backend: {backends.words(backends.BACKENDS)}."),
]


@app.command()
def synth(
    stacks: StacksArg = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write <cluster>.yaml into.")] = Path("out"),
    stdout: Annotated[bool, typer.Option("--stdout", help="Print the YAML instead of writing files.")] = False,
    backend: BackendOpt = None,
    shadow: Annotated[
        str | None,
        typer.Option(
            "--shadow",
            help="Render each job as a shadow: 'cpu' (the same processes, names, Services, restart rules and queues "
            "on CPU nodes, for a real cluster without accelerators).",
        ),
    ] = None,
    shadow_cpu: Annotated[
        str | None,
        typer.Option(
            "--shadow-cpu", help="With --shadow cpu: the CPU request of each process (default: jaxinfra.spec.Shadow's)."
        ),
    ] = None,
    shadow_memory: Annotated[
        str | None,
        typer.Option(
            "--shadow-memory",
            help="With --shadow cpu: the memory request of each process (default: jaxinfra.spec.Shadow's).",
        ),
    ] = None,
) -> None:
    """Synthesize every Kubernetes object of the stacks as YAML (one file per cluster)."""
    from jaxinfra import manifests, outputs
    from jaxinfra.yamlio import dump

    stacks = _start(stacks, folders=None if stdout else {"--out": (out, [])})
    loaded = invocation.load(stacks, backend, _shadow(shadow, shadow_cpu, shadow_memory))
    rendered = [(cluster.name, dump(manifests(cluster))) for _, cluster in loaded]
    if stdout:
        sys.stdout.write("".join(text for _, text in rendered))
        return
    names = [name for name, _ in rendered]
    if len(set(names)) != len(names):
        raise SpecError([Problem("stacks", names, "two stacks declare the same cluster name", "rename one cluster")])
    if problems := outputs.check(folders={"--out": (out, [f"{name}.yaml" for name in names])}):
        raise OutputError(problems)
    outputs.write([("--out", out / f"{name}.yaml", text) for name, text in rendered])  # never a half-written file
    for name in names:
        print(f"wrote {out / f'{name}.yaml'}", file=sys.stderr)


@app.command()
def init(
    directory: Annotated[
        Path, typer.Argument(metavar="[DIR]", help="Folder of the new repository (created if missing).")
    ] = Path("."),
    template: Annotated[
        str,
        typer.Option(
            "--template",
            "-t",
            help="The stack to start from: cpu, tpu (a v5e 2x4 slice), gpu (2 x 8 H100) or gpu-flex (2 x 8 H100 from "
            "flex-start capacity, DWS queued provisioning through Kueue).",
        ),
    ] = "cpu",
) -> None:
    """Write a ready repository: a stack, pyproject.toml, Pulumi and cdk8s files, .gitignore and a CI workflow (never overwrites)."""  # noqa: E501 (one line in --help)
    from jaxinfra.init import write

    for path in write(directory, template):
        print(f"wrote {path}", file=sys.stderr)


ExplainArg = Annotated[
    list[Path] | None,
    typer.Argument(
        help="Stack files (Python) or folders of them, e.g. stacks/cpu_dev.py; or YAML/JSON manifests and folders of "
        "them, applied together as one cluster: what would hold each workload, and the fix "
        f"({DEFAULT_STACKS}).",
        show_default=False,
    ),
]


@app.command()
def explain(
    stacks: ExplainArg = None,
    backend: BackendOpt = None,
    rank: Annotated[list[int], typer.Option("--rank", help="Show this rank's env on its own (repeatable).")] = [],
    all_ranks: Annotated[
        bool, typer.Option("--all-ranks", help="Show every rank's env on its own, not as patterns.")
    ] = False,
    svg: Annotated[
        Path | None,
        typer.Option("--svg", help="Also draw the jobs' topology (slices, hosts, ranks, devices) as SVG here."),
    ] = None,
) -> None:
    """Per job: pods, hosts, devices, coordinator, and the env each rank receives; per workload of manifests: what would hold it."""  # noqa: E501 (one line in --help)
    from rich.console import Console

    from jaxinfra import outputs
    from jaxinfra.explain import render_explanation
    from jaxinfra.plan import plan

    given = _start(stacks, {"--svg": svg})
    manifests = [p for p in given if p.suffix != ".py" and not (p.is_dir() and _has_stacks(p))]
    held = _explain_manifests(manifests) if manifests else None
    plans = [
        (path, plan(cluster)) for path, cluster in invocation.load([p for p in given if p not in manifests], backend)
    ]
    most = max(jp.processes for _, cp in plans for jp in cp.jobs) if plans else 0
    problems = [
        Problem(
            "--rank", r, f"no job has this rank (ranks go from 0 to {most - 1})", f"use a rank from 0 to {most - 1}"
        )
        for r in rank
        if not 0 <= r < most
    ]
    if problems:
        raise SpecError(problems)
    console = Console()
    for path, cp in plans:
        render_explanation(console, path, cp, rank, all_ranks)
    if held is not None:
        console.print(held, markup=False, highlight=False, soft_wrap=True)
    if svg is not None:
        from jaxinfra.explain import layout
        from jaxinfra.topology import svg as draw

        outputs.write([("--svg", svg, draw([layout(jp) for _, cp in plans for jp in cp.jobs]))])
        print(f"wrote {svg}", file=sys.stderr)


def _has_stacks(folder: Path) -> bool:
    from jaxinfra import stack

    return bool(stack.discover(folder))


def _explain_manifests(paths: list[Path]) -> str:
    """What would hold each workload of the manifests (one cluster, applied in order), as the simulator decides it
    before any pod starts (`jaxinfra_sim.cluster.pending`, imported only here, as `simulate` imports the simulator).
    What the API server refuses of the manifests themselves is an input problem (exit 2)."""
    from jaxinfra_sim.cluster.pending import lines, pending

    [source] = invocation.sources(paths, None)
    if source.problems:
        raise ManifestError([source.where(p) for p in source.problems])
    found = pending(source)
    out = [f"{source.name}: {len(found)} workload{'s' if len(found) != 1 else ''}, what would hold each"]
    out += [f"note: {note}" for note in source.notes]  # objects applied twice (the later wins), what is assumed
    for p in found:
        out += ["", f"{p.workload} ({p.file})", *lines(p)]
    if not found:
        out.append("  no workload (JobSet, Job, JAXJob, TrainJob) among them")
    return "\n".join(out)


@app.command()
def catalog(
    filter: Annotated[
        str | None, typer.Argument(help="Only rows whose name, alias, family or machine type contains this.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as a JSON array.")] = False,
) -> None:
    """List the accelerators jaxinfra knows (TPU slices, GPU machines, CPU)."""
    from jaxinfra import catalog as cat

    rows = cat.search(filter)
    if as_json:
        sys.stdout.write(json.dumps([r.as_dict() for r in rows], indent=2) + "\n")
        return
    if not rows:
        raise CommandFailed(f"no accelerator matches {filter!r}; try `jaxinfra catalog` for all", 1)
    from rich.console import Console
    from rich.table import Table

    table = Table(
        "name", "kind", "topology", "chips", "hosts", "chips/host", "machine type", "GKE accelerator", "aliases"
    )
    for r in rows:
        table.add_row(
            r.name,
            r.kind,
            r.topology or "",
            str(r.chips),
            str(r.hosts),
            str(r.chips_per_host),
            r.machine_type or "",
            r.gke_accelerator or "",
            ", ".join(r.aliases),
        )
    Console().print(table)


@app.command()
def validate(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="YAML or JSON manifest files, and folders (recursively: their .json, .yaml and .yml files, as "
            "`kubectl apply -f DIR -R`).",
            show_default=False,
        ),
    ],
) -> None:
    """Check manifests as the API server would on `kubectl apply` of them all to one cluster: decoding, schemas (strict),
    defaulting, the controllers' webhooks, validation and admission; the same path `jaxinfra simulate` takes."""  # noqa: E501 (--help)
    from jaxinfra import manifest_paths
    from jaxinfra.admission import admit, read
    from jaxinfra.validate import K8S_VERSION

    problems: list[Problem] = []
    given, files = files, manifest_paths.expand(files, problems)
    problems += [
        Problem(str(p), str(p), "no .json, .yaml or .yml file in this folder", "pass a folder of manifests")
        for p in given
        if p.is_dir() and not any(f.is_relative_to(p) for f in files)
    ]
    requests, unreadable = read(files)
    result = admit(requests)
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if problems := problems + unreadable + result.problems:
        for p in problems:
            print(f"error: {p}", file=sys.stderr)
        raise CommandFailed(
            f"{len(problems)} problem{'s' * (len(problems) != 1)} in {len(files)} file{'s' * (len(files) != 1)}: "
            "the API server would refuse them "
            f"(Kubernetes {K8S_VERSION}, strict)"
        )
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    print(
        f"{len(files)} files valid: {len(result.stored)} objects the API server would store (Kubernetes {K8S_VERSION} "
        "and CRD schemas, strict)",
        file=sys.stderr,
    )


@app.command()
def diff(
    stack: Annotated[Path, typer.Argument(help="The stack file (Python), e.g. stacks/cpu_dev.py.", show_default=False)],
    directory: Annotated[
        Path,
        typer.Argument(
            metavar="DIR",
            help="The folder of YAML written before by `jaxinfra synth -o` (or `cdk8s synth`).",
            show_default=False,
        ),
    ],
    backend: BackendOpt = None,
) -> None:
    """Compare a stack with YAML synthesized before: objects added, removed, changed, and what needs delete-and-recreate."""  # noqa: E501 (one line in --help)
    from jaxinfra import manifests
    from jaxinfra.diff import PreviousError, read_dir
    from jaxinfra.diff import diff as compare

    loaded = invocation.load([stack], backend)
    previous, problems = read_dir(directory)
    if problems:
        raise PreviousError(problems)
    result = compare([m for _, cluster in loaded for m in manifests(cluster)], previous)
    lines = result.lines()
    sys.stdout.write("\n".join(lines[:-1] + [f"jaxinfra: {lines[-1]}"]) + "\n")
    if result.changed:
        raise typer.Exit(1)


@app.command()
def simulate(
    ctx: typer.Context,
    inputs: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Stack files (.py), YAML or JSON manifest files, and folders (default: [tool.jaxinfra.simulate] "
            f"stacks of ./pyproject.toml, else its {DEFAULT_STACKS.removeprefix('default: ')}). One invocation, "
            "one cluster: every manifest file and folder given (folders recursively, their .json, .yaml and "
            ".yml files in sorted order, as `kubectl apply -f DIR -R`) is applied to one cluster, a later "
            "object updating an earlier one of the same kind, namespace and name (a workload defined twice, "
            "differently, is a problem: its pod template is immutable); each stack file (a folder's too) is a "
            "cluster of its own.",
            show_default=False,
        ),
    ] = None,
    json_report: Annotated[Path | None, typer.Option("--json", help="Write the report as JSON here.")] = None,
    run_command: Annotated[
        bool, typer.Option("--run-command", help="Run each container's own command instead of the built-in probe.")
    ] = False,
    egress: Annotated[
        bool,
        typer.Option(
            "--egress/--no-egress",
            help="Let pods reach beyond the simulation (GKE's default), through pasta or slirp4netns where installed; "
            "this machine's own loopback and networks stay unreachable either way.",
        ),
    ] = True,
    kill: Annotated[
        list[str], typer.Option(help="SIGKILL a pod: POD@SECONDS after it starts (POD: hostname or rank).")
    ] = [],
    fail: Annotated[list[str], typer.Option(help="Make a pod's container exit 1 at start.")] = [],
    hang: Annotated[list[str], typer.Option(help="Make a pod stop making progress.")] = [],
    delay: Annotated[list[str], typer.Option(help="Start a pod late: POD=SECONDS.")] = [],
    preempt: Annotated[
        list[str],
        typer.Option(
            help="Preempt a pod (a Spot VM reclaim or a node drain): SIGTERM POD@SECONDS after it starts, SIGKILL "
            "after its grace period."
        ),
    ] = [],
    provision: Annotated[
        list[str],
        typer.Option(
            help="Rehearse a Kueue ProvisioningRequest AdmissionCheck (flex-start capacity): CHECK@SECONDS, its "
            "capacity provisioned that late (simulated, not waited); CHECK@never, never provisioned (the workload "
            "stays pending). A check not named is Ready at once."
        ),
    ] = [],
    grace_cap: Annotated[
        float, typer.Option(help="Cap every pod's terminationGracePeriodSeconds when it is stopped (seconds).")
    ] = 3.0,
    volume: Annotated[
        list[str],
        typer.Option(
            help="NAME=DIR: a PersistentVolumeClaim or GCS bucket kept in DIR, which outlives the simulation."
        ),
    ] = [],
    host_path: Annotated[
        list[str],
        typer.Option(
            "--host-path",
            help="PATH=DIR: the hostPath volumes whose path is PATH (exactly as the manifest writes it) are this "
            "machine's DIR, which must exist; without it a hostPath is an empty folder of the pod's own node, never "
            "this machine's PATH.",
        ),
    ] = [],
    timeout: Annotated[float, typer.Option(help="Give up on the whole simulation after this many seconds.")] = 300.0,
    init_timeout: Annotated[float | None, typer.Option(help="Cap every pod's JAX init timeout (seconds).")] = None,
    backend: BackendOpt = None,
    logs: Annotated[bool, typer.Option("--logs/--no-logs", help="Print each pod's output, prefixed.")] = True,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace", help="Write a trace (Trace Event Format JSON: Perfetto, chrome://tracing, speedscope) here."
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html", help="Write a self-contained HTML report (verdict, topology, timeline, pods, logs) here."
        ),
    ] = None,
    k8s_client: Annotated[
        bool,
        typer.Option(
            "--k8s-client/--no-k8s-client",
            help="Pods' Python can import the kubernetes package, as in an image built with jax[k8s] (default); "
            "--no-k8s-client: as in an image with plain jax.",
        ),
    ] = True,
    image: Annotated[
        list[str],
        typer.Option(
            "--image",
            help="IMAGE=PATH: containers of IMAGE (as written in the manifest) run from PATH: an OCI image layout or a "
            "`docker save` archive (with --run-command: the image's own root, Entrypoint, Cmd, WorkingDir, Env and "
            "User), or a folder standing in for the image's top layer over this machine's system "
            "(defaults: [tool.jaxinfra.simulate.images] in ./pyproject.toml).",
        ),
    ] = [],
    image_limits: Annotated[
        list[str],
        typer.Option(
            "--image-limits",
            help="KEY=QUANTITY,...: bounds on each image unpacked (size: its bytes, default half the cache's free "
            "disk; files: its files, default 1000000) and on the image cache (cache: its bytes, default 64Gi, pruned "
            "least recently used first).",
        ),
    ] = [],
) -> None:
    """Run the job as N real JAX processes on this machine, started from its manifests as Kubernetes would.

    All the YAML given is one cluster (a Job and its ServiceAccount, a workload and its Kueue queues, a TrainJob and its
    runtime may be in different files); each stack is its own. The report names the file each object came from."""
    from jaxinfra import simulate_flags
    from jaxinfra_sim.cluster.sources import Request
    from jaxinfra_sim.core.options import Options

    inputs = _start(inputs, {"--json": json_report, "--trace": trace, "--html": html}, command="simulate")
    paths, claims = simulate_flags.images(image, volume)
    faults = simulate_flags.faults(kill, fail, hang, delay, preempt, provision)
    host_paths = simulate_flags.host_paths(host_path)
    sources = invocation.sources(inputs, backend)
    options = Options(
        run_command=run_command,
        egress=egress,
        timeout=timeout,
        init_timeout=init_timeout,
        faults=faults,
        images=simulate_flags.load_images(paths, run_command, egress, simulate_flags.image_limits(image_limits)),
        volumes=claims,
        host_paths=host_paths,
        grace_cap=grace_cap,
        k8s_client=k8s_client,
    )
    request = Request(sources, options, logs, json_report, trace, html, tuple(invocation.shadow_notes(sources)))
    if ctx.obj is not None:  # a prefork child has imported JAX meanwhile: it runs the rest
        raise typer.Exit(ctx.obj.hand_over(request))
    from jaxinfra_sim.report.terminal import run

    run(request)


@app.command()
def doctor(
    run_command: Annotated[
        bool, typer.Option("--run-command", help="Check what --run-command uses too: runc (newuidmap, unprivileged).")
    ] = False,
    image: Annotated[
        bool, typer.Option("--image", help="Check what --image uses too: umoci, skopeo and bubblewrap.")
    ] = False,
    egress: Annotated[
        bool, typer.Option("--egress/--no-egress", help="Check the egress tool (pasta or slirp4netns) too.")
    ] = True,
    every: Annotated[bool, typer.Option("--all", help="Check every part any simulation can use.")] = False,
    install: Annotated[
        bool,
        typer.Option(
            "--install",
            help="Install what is missing with this machine's package manager (apt-get on Debian and Ubuntu, dnf on "
            "Fedora; through sudo unless root), quietly.",
        ),
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the check as JSON instead of a table.")] = False,
) -> None:
    """Check this machine for every part `jaxinfra simulate` uses: the kernel's user namespaces and cgroups, the CNI
    plugins, ip, nft, the egress tool, runc and newuidmap (--run-command), umoci, skopeo and bubblewrap (--image).

    A table (part, status, where it was found, its version, what needs it), or JSON; exit status 3 naming every
    missing part at once and the one command that installs them all, which --install runs."""
    try:
        from jaxinfra_sim.node import doctor as check
    except ImportError:
        raise CommandFailed("the simulator is not installed; fix: pip install 'jaxinfra[sim]'", MACHINE_LIMIT) from None
    check.run(run_command, image, egress, every, install, json_out)
