"""The dependencies point one way (docs/design.md, "The core layers"): names -> backends -> spec -> plan -> render,
and the simulator (`jaxinfra_sim`) beside them on the API server's front door, never on the model.

Read from the source (every import, also inside functions; `if TYPE_CHECKING:` blocks are for readers of types only
and are skipped by the layer rules, but not by the cycle check), so a lazy import back up a layer fails here too;
what each layer loads is checked transitively, and what the simulator loads also at run time, in a process of its own.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "jaxinfra"

#: Module -> the jaxinfra modules it may import at run time.
ALLOWED = {
    "upstream": set(),  # upstream's names, spelled once: the lowest layer, allowed everywhere
    "errors": {"upstream"},
    "names": {"upstream"},
    "quantity": {"upstream"},
    "podresources": set(),  # a pod's effective requests (PodRequests): admission's plugins and the simulator's Kueue
    "catalog": {"errors", "upstream"},
    "gpudirect": {"upstream"},
    # One module per workload kind; the plan and the pod parts reach it as arguments (types only), never imports.
    "backends": {"backends", "errors", "names", "upstream"},
    "spec": {"backends", "catalog", "errors", "gpudirect", "names", "quantity", "spec", "upstream"},
    "plan": {"backends", "catalog", "errors", "gpudirect", "names", "quantity", "upstream"},
    "render": {
        "backends",
        "catalog",
        "errors",
        "gpudirect",
        "names",
        "plan",
        "render",
        "upstream",
    },  # errors: a pod patch that does not apply
    "topology": {"upstream"},  # a pure drawing: a Layout comes from a plan (explain) or from simulated pods
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

#: Module of the pulumi package -> the pulumi modules it may import at run time: the configuration first, then the
#: node pools, what GKE is given and the checks over them, the GPU networks; the Kubernetes objects apart from GKE;
#: the Cluster component (and the program) over all of them.
PULUMI_ALLOWED = {
    "config": set(),
    "pools": {"config"},
    "gke": {"config", "pools"},
    "checks": {"config", "gke", "pools"},
    "networks": {"config"},  # the GPUDirect VPCs, beside what GKE is given
    "kubernetes": set(),
    "cluster": {"checks", "config", "gke", "kubernetes", "networks", "pools"},
}

#: Module of the backends package -> the backends modules it may import at run time: each backend builds on the
#: protocol and its shared helpers only, never on another backend (the registry, `__init__`, imports them all).
BACKENDS_ALLOWED = {
    "base": set(),
    "jobset": {"base"},
    "job": {"base"},
    "jaxjob": {"base"},
    "trainjob": {"base"},
}

#: Package -> (its module -> the modules of the same package it may import at run time).
PACKAGES = {"backends": BACKENDS_ALLOWED, "spec": SPEC_ALLOWED, "pulumi": PULUMI_ALLOWED}
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


# --- the simulator ----------------------------------------------------------------------------------------------------

#: The jaxinfra modules the simulator may import at run time: what makes it a cluster emulator (the API server's steps,
#: decoding, signal handling, quantities, the bundled schemas' release, the drawing), never jaxinfra's model. It runs
#: manifests jaxinfra did not write, so it reads them as a cluster would: knowing the spec, the plan or the backends
#: would let it take a shortcut through what jaxinfra meant instead of what the manifests say.
SIMULATOR_ALLOWED = {
    "errors",
    "yamlio",  # decoding, as the API server's front door does
    "yamlsurvey",
    "interrupts",  # signal handling
    "descriptors",  # what the caller passed down, which no pod may hold
    "quantity",
    "podresources",  # a pod's effective requests, as Kueue and ResourceQuota count them
    "admission",  # the API server's steps (defaulting, webhooks, validation, admission)
    "schemas",  # K8S_VERSION, the release whose schemas are bundled (the API server's /version)
    "topology",  # a pure drawing of hosts (the HTML report's)
    "outputs",  # `terminal.run` writes its reports as every command writes its outputs: whole or not at all
    "upstream",  # upstream's names (API groups, label keys), which a cluster's controllers spell
}
SIMULATE = ROOT / "simulate" / "jaxinfra_sim"


@pytest.mark.parametrize("path", sorted(SIMULATE.rglob("*.py")), ids=lambda p: str(p.relative_to(SIMULATE)))
def test_simulator_imports_only_what_a_cluster_emulator_needs(path: Path) -> None:
    extra = runtime_imports(path) - SIMULATOR_ALLOWED
    assert not extra, f"{path.relative_to(ROOT)} imports {sorted(extra)}: jaxinfra's model, not a cluster's"


#: The pods' network's holder: a program of its own (`python -I -S netns_holder.py`, `netns.HOLDER`), which imports
#: the modules beside it as `jaxinfra_sim.<module>` through a stand-in for the package (netns_holder's docstring).
HOLDER_MODULES = {"netns_holder", "netns_setup", "netns_workers", "netns_egress", "netns_boundary"}


def every_import(path: Path) -> set[str]:
    """Every module the file names in an import, wherever it is (functions, `if TYPE_CHECKING:` too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
    return found


@pytest.mark.parametrize("module", sorted(HOLDER_MODULES))
def test_the_holder_imports_only_the_standard_library_and_its_own_modules(module: str) -> None:
    """The holder runs with the standard library only (no site-packages, no simulator): each of its modules imports
    the standard library and the holder's other modules, each by its full name (`from jaxinfra_sim.network.netns_setup
    import`), never the package itself nor any other of its modules."""
    own = {f"jaxinfra_sim.network.{m}" for m in HOLDER_MODULES}
    outside = {
        m
        for m in every_import(SIMULATE / "network" / f"{module}.py")
        if m not in own and m.partition(".")[0] not in sys.stdlib_module_names
    }
    assert not outside, (
        f"simulate/jaxinfra_sim/network/{module}.py imports {sorted(outside)}: the holder's program lacks them"
    )


def module_graph(folder: Path) -> dict[str, set[str]]:
    """Each module (or subpackage, all its files together) of the package in `folder` -> the others it imports at
    run time; a name the package's `__init__` defines counts as `__init__`."""
    package = ".".join(folder.relative_to(SIMULATE.parent).parts)
    members = {p: p.stem for p in folder.glob("*.py")} | {
        p: p.name for p in folder.iterdir() if (p / "__init__.py").exists()
    }
    graph: dict[str, set[str]] = {}
    for path, node in members.items():
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        found = set().union(*(runtime_imports(f, package) for f in files))
        graph[node] = {m if m in members.values() else "__init__" for m in found} - {node}
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """A cycle of `graph` as a path that ends where it starts, or [] when it has none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str]:
        path.append(node)
        for after in sorted(graph.get(node, ())):
            if after in path:
                return path[path.index(after) :] + [after]
            if after not in done and (found := visit(after)):
                return found
        done.add(path.pop())
        return []

    return next((found for node in sorted(graph) if node not in done and (found := visit(node))), [])


PACKAGES_OF_THE_SIMULATOR = sorted(p.parent for p in SIMULATE.rglob("__init__.py"))


@pytest.mark.parametrize("folder", PACKAGES_OF_THE_SIMULATOR, ids=lambda p: str(p.relative_to(SIMULATE.parent)))
def test_simulator_modules_import_one_another_one_way(folder: Path) -> None:
    """No import cycle among a simulator package's modules, lazy imports included: data flows one way (the report
    calls the HTML page, which needs nothing of the report)."""
    found = cycle(module_graph(folder))
    assert not found, f"{folder.relative_to(ROOT)}: import cycle {' -> '.join(found)}"


def test_the_cycle_check_finds_one() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []
    assert module_graph(SIMULATE / "report")["html"] == {"trace"}
    assert module_graph(SIMULATE)["report"] >= {"cluster", "core"}


# --- the whole graph: both distributions, every import, types too ---------------------------------------------------

#: Each top-level import package -> its folder.
TOP = {"jaxinfra": PACKAGE, "jaxinfra_sim": SIMULATE}
#: Every module of both, dotted -> its file (a package is its `__init__`); the templates are data, never imported.
MODULES_OF = {
    ".".join((top, *path.relative_to(folder).with_suffix("").parts)).removesuffix(".__init__"): path
    for top, folder in TOP.items()
    for path in sorted(folder.rglob("*.py"))
    if "templates" not in path.relative_to(folder).parts
}


def imported(path: Path, types: bool, lazy: bool = True) -> set[str]:
    """The modules of `MODULES_OF` that the file imports (inside functions too when `lazy`; under `if TYPE_CHECKING:`
    only when `types`): `from a.b import c` is the module a.b.c when there is one, else a.b (c is a name it defines)."""
    found: set[str] = set()

    def module(name: str) -> str | None:
        while name and name not in MODULES_OF:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node: ast.AST) -> None:
        if not types and isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(m for a in node.names if (m := module(f"{node.module}.{a.name}")))
        elif isinstance(node, ast.Import):
            found.update(m for a in node.names if (m := module(a.name)))
        if lazy or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for child in ast.iter_child_nodes(node):
                visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


@functools.cache
def graph(types: bool, lazy: bool = True) -> dict[str, set[str]]:
    return {name: imported(path, types, lazy) - {name} for name, path in MODULES_OF.items()}


def loads(start: str, edges: dict[str, set[str]], eager: dict[str, set[str]] | None = None) -> set[str]:
    """Every module that importing `start` and running any of it can load: its imports' closure, functions' included.
    Importing a module also runs the packages above it, but only their module-level code (`eager`'s edges): a
    package's lazy names (`jaxinfra.manifests`) load the model only when called, which a lower layer never does."""
    eager = graph(types=False, lazy=False) if eager is None else eager
    seen: set[tuple[str, bool]] = set()  # (module, whether any of its functions may run)
    todo = [(start, True)]
    while todo:
        name, whole = todo.pop()
        if (name, whole) in seen or name not in MODULES_OF:
            continue
        seen.add((name, whole))
        parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        todo += [(m, whole) for m in (edges if whole else eager).get(name, ())] + [(m, False) for m in parents]
    return {name for name, _ in seen}


def test_no_module_imports_another_that_imports_it_back() -> None:
    """No cycle anywhere in either distribution, at module level, type-only imports included: a cycle through
    `if TYPE_CHECKING:` still means two modules know each other (the old backends <-> plan, kubelet <-> volumes)."""
    found = cycle(graph(types=True))
    assert not found, f"import cycle: {' -> '.join(found)}"


def layer_of(module: str) -> str:
    """The core layer a jaxinfra module belongs to: its top-level module or subpackage."""
    return module.split(".")[1] if module.count(".") else module


def allowed_closure(layer: str) -> set[str]:
    """The layers `layer` may load, directly or through those it may import."""
    seen, todo = set(), [layer]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += ALLOWED.get(name, set())
    return seen


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_core_layers_load_only_the_layers_below_transitively(layer: str) -> None:
    edges = graph(types=False)
    starts = [m for m in MODULES_OF if m.startswith(f"jaxinfra.{layer}.") or m == f"jaxinfra.{layer}"]
    loaded = {layer_of(m) for s in starts for m in loads(s, edges) if m.startswith("jaxinfra.")} - {"jaxinfra"}
    assert loaded <= allowed_closure(layer), f"jaxinfra.{layer} loads {sorted(loaded - allowed_closure(layer))}"


#: What the simulator must never load: jaxinfra's model (the layers that know what jaxinfra meant, not what the
#: manifests say) and its adapters.
THE_MODEL = {"spec", "plan", "render", "backends", "stack", "shadow", "explain", "cdk8s", "pulumi", "cli"}


def test_the_simulator_never_loads_the_model_transitively() -> None:
    edges = graph(types=False)
    for start in (m for m in MODULES_OF if m.startswith("jaxinfra_sim")):
        model = {layer_of(m) for m in loads(start, edges) if m.startswith("jaxinfra.")} & THE_MODEL
        assert not model, f"{start} loads jaxinfra's {sorted(model)}"


def test_the_transitive_check_follows_lazy_imports() -> None:
    """The front door's lazy import of `releases` once pulled the plan into every simulation: the check sees such a
    path (a function-level import, two steps away)."""
    edges = {"jaxinfra.admission": {"jaxinfra.releases"}, "jaxinfra.releases": {"jaxinfra.plan"}}
    assert "jaxinfra.plan" in loads("jaxinfra.admission", edges, eager={})
    # ...while a package's lazy name (`jaxinfra.manifests` imports the plan when called) does not count for its modules
    assert "jaxinfra.plan" not in loads("jaxinfra.errors", {"jaxinfra": {"jaxinfra.plan"}}, eager={"jaxinfra": set()})
    assert imported(PACKAGE / "admission" / "__init__.py", types=False) >= {"jaxinfra.admission.schema"}


# --- the simulator's house: subpackages in layers ---------------------------------------------------------------------

#: The simulator's subpackages, bottom to top (docs/design.md, "The simulator's house"): each may import its own
#: modules and those of the layers below it, never one above; the subpackages of one layer never import each other (a
#: workload's controllers and Kueue act on the same objects, apart). The shared records sit at the bottom (`core`:
#: the model, the inputs, the options, the pods' runs, the results), so nothing imports an orchestrator for a type.
SIMULATOR_LAYERS: list[set[str]] = [
    {"core"},  # errors, events, paths, programs, the records every layer shares, the results
    {"runtime"},  # runc, the shim, the sandbox, the root filesystem, seccomp, images
    {"apiserver"},  # the store's objects, RBAC, selectors, requests, HTTPS serving, admission of pods
    {"network"},  # the pods' network: its holder, CNI, NetworkPolicy, kube-proxy, DNS
    {"jax"},  # what JAX reads and does: its env, its Kubernetes detection, its timeouts, the probe, the checks
    {"node"},  # this machine as a node: cgroups, capacity, the machine while pods run, its parts
    {"controllers", "kueue"},  # the workload controllers; Kueue
    {"platform"},  # what GKE adds to pods (TPU, Cloud Storage FUSE, its own containers)
    {"kubelet"},  # pod workers, containers, volumes, the prober, eviction, QoS, pod status
    {"cluster"},  # the simulation: the control plane over the manifests, workloads side by side, attempts
    {"report"},  # what a person or a program reads: terminal, JSON, trace, HTML
]
LAYER_OF = {package: i for i, layer in enumerate(SIMULATOR_LAYERS) for package in layer}


def subpackage(module: str) -> str | None:
    """The simulator subpackage a dotted `jaxinfra_sim` module belongs to (None: a top-level module)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "jaxinfra_sim" and len(parts) > 1 and parts[1] in LAYER_OF else None


def layer_violations(edges: dict[str, set[str]], starts: list[str] | None = None) -> list[str]:
    """Every module of `edges` (or of `starts`) that loads, directly or through what it loads (lazy imports
    included), a module of a subpackage in a layer above its own or beside it: `a -> b` lines."""
    found = []
    for start in starts if starts is not None else sorted(edges):
        if (own := subpackage(start)) is None:
            continue
        for loaded in sorted(loads(start, edges, eager={})):
            other = subpackage(loaded)
            if other is not None and other != own and LAYER_OF[other] >= LAYER_OF[own]:
                found.append(f"{start} -> {loaded}")
    return found


SIM_MODULES = sorted(m for m in MODULES_OF if m.startswith("jaxinfra_sim."))


def test_every_subpackage_of_the_simulator_has_a_layer() -> None:
    packages = {p.name for p in SIMULATE.iterdir() if (p / "__init__.py").exists()}
    assert packages == set(LAYER_OF), f"subpackages without a layer: {sorted(packages - set(LAYER_OF))}"


def test_the_simulators_subpackages_load_only_the_layers_below() -> None:
    """At run time (`if TYPE_CHECKING:` types exempt), lazy imports included, and transitively."""
    found = layer_violations(graph(types=False), SIM_MODULES)
    assert not found, "a subpackage loads one above it or beside it:\n" + "\n".join(found)


def test_the_layer_check_finds_an_upward_import() -> None:
    """A lower subpackage importing a higher one fails, directly, lazily, through a third module, and between the
    two subpackages of one layer; the other way round passes."""
    edges = {
        "jaxinfra_sim.core.model": {"jaxinfra_sim.cluster.engine"},
        "jaxinfra_sim.cluster.engine": set(),
        "jaxinfra_sim.runtime.runc": {"jaxinfra_sim.core.paths"},
        "jaxinfra_sim.core.paths": {"jaxinfra_sim.core.errors"},
        "jaxinfra_sim.core.errors": set(),
        "jaxinfra_sim.network.netns": {"jaxinfra_sim.runtime.runc"},
        "jaxinfra_sim.kueue.quotas": {"jaxinfra_sim.controllers.job"},
        "jaxinfra_sim.controllers.job": set(),
    }
    found = layer_violations(edges)
    assert {f.partition(" ")[0] for f in found} == {"jaxinfra_sim.core.model", "jaxinfra_sim.kueue.quotas"}, found
    assert "jaxinfra_sim.core.model -> jaxinfra_sim.cluster.engine" in found
    assert "jaxinfra_sim.kueue.quotas -> jaxinfra_sim.controllers.job" in found
    edges["jaxinfra_sim.core.errors"] = {"jaxinfra_sim.kubelet.container"}  # runc -> paths -> errors -> kubelet
    assert "jaxinfra_sim.runtime.runc -> jaxinfra_sim.kubelet.container" in layer_violations(edges)
    assert "jaxinfra_sim.network.netns -> jaxinfra_sim.kubelet.container" in layer_violations(edges)
    sample = SIMULATE / "core" / "_layers_sample.py"
    try:  # read from the source as the real modules are: a lazy import counts, a type-only one does not
        sample.write_text(
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from jaxinfra_sim.report import html\n"
            "def f():\n    from jaxinfra_sim.cluster import engine\n",
            encoding="utf-8",
        )
        assert imported(sample, types=False) == {"jaxinfra_sim.cluster.engine"}
    finally:
        sample.unlink()


def longest_chain(edges: dict[str, set[str]]) -> list[str]:
    """The longest path of modules through `edges` (a graph without cycles), each importing the next."""

    @functools.cache
    def longest(name: str) -> tuple[str, ...]:
        return (name, *max((longest(after) for after in edges.get(name, ())), key=len, default=()))

    return list(max((longest(name) for name in edges), key=len))


MAX_CHAIN = 12
"""The longest chain of run-time imports between the simulator's modules (issue #54: 20 before its house)."""


def test_the_simulators_longest_import_chain_is_short() -> None:
    edges = {m: {n for n in graph(types=False)[m] if n.startswith("jaxinfra_sim.")} for m in SIM_MODULES}
    chain = longest_chain(edges)
    assert len(chain) <= MAX_CHAIN, f"{len(chain)} modules: {' -> '.join(chain)}"
    assert longest_chain({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == ["a", "b", "c"]


def test_the_simulators_house_has_few_loose_modules_and_no_long_one() -> None:
    loose = sorted(p.name for p in SIMULATE.glob("*.py"))
    assert len(loose) <= 6, f"top-level modules beside the subpackages: {loose}"
    assert len(LAYER_OF) >= 8
    long = {
        str(p.relative_to(SIMULATE)): n for p in SIMULATE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 600
    }
    assert not long, f"modules over 600 lines: {long}"


@pytest.mark.parametrize("package", sorted(LAYER_OF))
def test_each_subpackage_says_what_it_emulates(package: str) -> None:
    """Its `__init__` is its docstring: what it emulates, citing the upstream it follows; no code, so importing one of
    its modules loads nothing else of it (the controllers' registry excepted: the kinds they serve)."""
    tree = ast.parse((SIMULATE / package / "__init__.py").read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree) or ""
    assert len(doc.split()) >= 15, f"jaxinfra_sim/{package}/__init__.py: say what it emulates, at which version"
    if package != "controllers":
        assert len(tree.body) == 1, f"jaxinfra_sim/{package}/__init__.py holds code; keep it a docstring"
