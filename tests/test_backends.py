"""The backends are one registry (docs/backends.md): every choice of the spec, the CLI and the schema is a module of
`jaxinfra.backends`; each module implements the protocol; a fifth backend, registered and nothing else, flows through
the rules, the plan, render and explain; and no module outside the package asks which backend it has."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import get_args

import pytest

from jaxinfra import CPU, Cluster, JaxJob, NodePool, SpecError, backends, cli, diff, invocation, releases
from jaxinfra.backends import base
from jaxinfra.errors import Problem
from jaxinfra.explain import facts, layout
from jaxinfra.plan import BY_JAXINFRA, JobPlan, plan
from jaxinfra.render import render
from jaxinfra.spec import BACKENDS, Backend
from jaxinfra.spec.rules import cross_object_problems

pytestmark = pytest.mark.unit

PACKAGE = Path(backends.__file__).resolve().parent.parent
MODULES = sorted(m.name for m in pkgutil.iter_modules(backends.__path__) if m.name != "base")


def test_the_registry_is_the_spec_the_schema_and_the_cli() -> None:
    names = tuple(backends.BACKENDS)
    assert names == backends.NAMES == BACKENDS == get_args(Backend) == ("jobset", "job", "jaxjob", "trainjob")
    assert get_args(JaxJob.model_fields["backend"].annotation) == names
    schema = JaxJob.model_json_schema()["properties"]["backend"]
    assert schema["enum"] == list(names) and schema["default"] == names[0]
    assert cli.BackendOpt.__metadata__[0].help == "Render every job with this backend: jobset, job, jaxjob or trainjob."
    with pytest.raises(SpecError) as err:
        invocation.load([], "mpi")
    assert [p.fix for p in err.value.problems] == [f"use one of {', '.join(names)}"]


@pytest.mark.parametrize("module", MODULES)
def test_every_backend_module_implements_the_protocol(module: str) -> None:
    """One object per module, registered under its name, with every member of `Backend` and its methods' signatures."""
    b = importlib.import_module(f"jaxinfra.backends.{module}").BACKEND
    assert isinstance(b, backends.Backend) and backends.get(b.name) is b and b.name == module
    for member, declared in vars(backends.Backend).items():
        if inspect.isfunction(declared) and not member.startswith("_"):
            assert inspect.signature(getattr(b, member)).parameters.keys() == (
                inspect.signature(declared).parameters.keys() - {"self"}
            ), member
    assert set(b.controllers) <= {c.name for c in releases.CONTROLLERS}


def test_the_kinds_are_the_backends() -> None:
    kinds = [b.kind for b in backends.BACKENDS.values()]
    assert len(set(kinds)) == len(kinds) and diff.WORKLOAD_KINDS == set(kinds)


class LeaderWorkerSet:
    """A fifth backend as a test registers it: nothing but this object and its registry entry."""

    name = "lws"
    title = "LeaderWorkerSet"
    summary = "LeaderWorkerSet"
    api_version = "leaderworkerset.x-k8s.io/v1"
    kind = "LeaderWorkerSet"
    kueue_framework = "leaderworkerset.x-k8s.io/leaderworkerset"
    controllers = ("jobset",)  # stands in for its own release
    container = "jax"
    port_name = "coordinator"
    fixed_port = 7777
    name_label = "leaderworkerset.sigs.k8s.io/name"
    owns_dns = True
    indexed_pods = False
    runtimes = False
    writes_container = True
    dns1035 = None
    rank_rule = "LWS_WORKER_INDEX"

    def replicated_job(self, tpu: bool) -> str | None:
        return None

    def hostname(self, names: base.JobNames, rank: int) -> str:
        return f"{names.name}-0" + (f"-{rank}" if rank else "")

    def coordinator_host(self, names: base.JobNames) -> str:
        return base.subdomain_host(names)

    def derived_names(self, names: base.JobNames) -> dict[str, str]:
        return {"worker pod name": names.hostname(names.processes - 1)}

    def group(self, names: base.JobNames, slice_index: int) -> str:
        return f"group {names.name}-{slice_index}"

    def dns_service(self, names: base.JobNames) -> str:
        return f"{names.service} (the controller's)"

    def coordinator_env(self, jp: JobPlan) -> tuple[base.EnvVar, ...]:
        return (base.EnvVar.literal("JAX_COORDINATOR_ADDRESS", jp.coordinator_address),)

    def problems(self, at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
        return [Problem(f"{at}.nodes", job.nodes, "too many", "fewer")] if job.num_nodes > 4 else []

    def render(self, jp: JobPlan, parts: base.Parts) -> list[base.Manifest]:
        spec = {"replicas": 1, "leaderWorkerTemplate": {"size": jp.processes, "workerTemplate": parts.pod_template()}}
        return [
            {"apiVersion": self.api_version, "kind": self.kind, "metadata": parts.workload_metadata(), "spec": spec}
        ]


def on(backend: str, nodes: int = 3) -> Cluster:
    """A cluster whose job is on `backend`, past the spec's choices (they are fixed when the spec is imported)."""
    cluster = Cluster(
        name="c",
        node_pools=[NodePool("cpu", CPU(devices=2))],
        jobs=[JaxJob("train", image="img", node_pool="cpu", nodes=nodes, resources={"requests": {"cpu": "1"}})],
    )
    return cluster.model_copy(update={"jobs": (cluster.jobs[0].model_copy(update={"backend": backend}),)})


def test_a_fifth_backend_flows_through_rules_plan_render_and_explain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "BACKENDS", {**backends.BACKENDS, "lws": LeaderWorkerSet()})
    assert [p.message for p in cross_object_problems(on("lws", nodes=5))] == ["too many"]
    cluster = on("lws")
    assert cross_object_problems(cluster) == []
    [jp] = plan(cluster).jobs
    assert (jp.port, jp.coordinator_address, jp.selector) == (
        7777,
        "train-0.train:7777",
        {"leaderworkerset.sigs.k8s.io/name": "train"},
    )
    assert [jp.hostname(r) for r in range(3)] == ["train-0", "train-0-1", "train-0-2"]
    assert list(jp.env_sources(1)) == ["JAX_COORDINATOR_ADDRESS", "JAX_INITIALIZATION_TIMEOUT", "JAX_NUM_CPU_DEVICES"]
    assert jp.env_sources(1)["JAX_COORDINATOR_ADDRESS"] == ("train-0.train:7777", BY_JAXINFRA)
    objects = render(plan(cluster))
    assert [o["kind"] for o in objects] == ["ServiceAccount", "NetworkPolicy", "Service", "LeaderWorkerSet"]
    [container] = objects[-1]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]
    assert [e["name"] for e in container["env"]][:1] == ["JAX_COORDINATOR_ADDRESS"]
    assert container["ports"] == [{"name": "coordinator", "containerPort": 7777, "protocol": "TCP"}]
    assert ("backend", "lws") in facts(jp) and ("rank", "LWS_WORKER_INDEX") in facts(jp)
    assert layout(jp).title == "default/train (LeaderWorkerSet)" and layout(jp).group(0) == "group train-0"
    kueue = releases.helm_values(releases.KUEUE, plan(cluster))["managerConfig"]["controllerManagerConfigYaml"]
    assert "leaderworkerset.x-k8s.io/leaderworkerset" in kueue  # its Kueue integration, read from the object


def backend_comparisons(tree: ast.AST, names: frozenset[str]) -> list[int]:
    """Lines that compare something called `backend` (`jp.backend`, `job.backend`, a variable) with a backend's name,
    or look a backend's name up in a table keyed by them."""

    def is_backend(node: ast.expr) -> bool:
        if isinstance(node, ast.Attribute) and node.attr == "name":  # the backend object's name: `jp.backend.name`
            node = node.value
        return (isinstance(node, ast.Attribute) and node.attr == "backend") or (
            isinstance(node, ast.Name) and node.id == "backend"
        )

    def is_name(node: ast.expr) -> bool:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(map(is_name, node.elts))
        return isinstance(node, ast.Constant) and node.value in names

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(map(is_backend, sides)) and any(map(is_name, sides)):
                found.append(node.lineno)
        elif isinstance(node, ast.Subscript) and is_backend(node.slice) and isinstance(node.value, ast.Dict):
            if any(k is not None and is_name(k) for k in node.value.keys):
                found.append(node.lineno)
    return sorted(found)


def test_no_module_outside_the_backends_asks_which_backend_it_has() -> None:
    names = frozenset(backends.NAMES)
    outside = [p for p in sorted(PACKAGE.rglob("*.py")) if "backends" not in p.relative_to(PACKAGE).parts[:1]]
    found = {
        str(p.relative_to(PACKAGE)): lines
        for p in outside
        if (lines := backend_comparisons(ast.parse(p.read_text(encoding="utf-8")), names))
    }
    assert found == {}


def test_the_check_finds_a_branch_on_the_backend() -> None:
    code = (
        'if jp.backend == "jaxjob":\n    pass\n'
        'x = job.backend in ("jobset", "trainjob")\n'
        'y = {"jobset": 1, "job": 2}[jp.backend]\n'
        'z = backend != "job"\n'
        'w = jp.backend.name == "trainjob"\n'
        'ok = jp.backend.name == other and kind == "jobset" and jp.backend.runtimes\n'
    )
    assert backend_comparisons(ast.parse(code), frozenset(backends.NAMES)) == [1, 3, 4, 5, 6]
