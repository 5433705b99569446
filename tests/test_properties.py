"""Properties over generated specs: valid ones render, for every backend they are compatible with,
to strictly valid, deterministic manifests whose names fit and whose env agrees with what
`jaxinfra explain` shows (literal values, and the emulated pods' resolved env per rank); invalid
ones raise the one aggregated SpecError naming every broken field.

A normal run uses the small profile (40 examples); the dedicated large run:
`HYPOTHESIS_PROFILE=thorough .venv/bin/python -m pytest tests/test_properties.py --hypothesis-show-statistics`."""

from __future__ import annotations

import string
from typing import Any

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from jaxinfra import CPU, GPU, TPU, Cluster, JaxJob, NodePool, SpecError, catalog, manifests
from jaxinfra.names import CONTRACT_ENV, MAX_NAME
from jaxinfra.plan import BY_JAXINFRA, plan
from jaxinfra.spec import credential_literal
from jaxinfra.upstream import OPERATOR_ENV
from jaxinfra.validate import validate_objects
from jaxinfra.yamlio import dump
from jaxinfra_sim.cluster.control_plane import emulate

pytestmark = pytest.mark.unit

ROWS = [r for r in catalog.rows() if not r.name.endswith("-1host")]
LABEL = st.from_regex(r"\A[a-z]([-a-z0-9]{0,48}[a-z0-9])?\Z", fullmatch=True)
ENV_NAME = st.from_regex(r"\A[A-Z][A-Z0-9_]{0,12}\Z", fullmatch=True).filter(
    lambda n: (
        n not in CONTRACT_ENV
        and n not in OPERATOR_ENV
        and not n.startswith(("JAX_", "MEGASCALE_", "TPU_", "JOB_COMPLETION"))
        and credential_literal(n, "x") is None
    )
)  # credential-looking names are refused (tests/test_security.py)
#: Emulating the pods of the largest slices costs seconds each; the env check covers jobs up to this many pods.
EMULATE_MAX_PODS = 256


@st.composite
def pool_and_counts(draw: st.DrawFn) -> tuple[Any, dict[str, int]]:
    row = draw(st.sampled_from(ROWS))
    if row.kind == "tpu":
        slices = draw(st.integers(1, 4)) if row.multi_host else 1
        return TPU(row.family, row.topology), {"slices": slices}
    nodes = draw(st.integers(1, 64))
    return (GPU(row.family, row.chips) if row.kind == "gpu" else CPU(draw(st.integers(1, 8)))), {"nodes": nodes}


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    """Keyword arguments of a Cluster with one job (the job as a dict, so tests can mutate it)."""
    accelerator, counts = draw(pool_and_counts())
    multi_slice = counts.get("slices", 1) > 1
    backends = backends_for(accelerator, multi_slice)
    job = {
        "name": draw(LABEL),
        "image": "img",
        "node_pool": "pool",
        **counts,
        "namespace": draw(st.one_of(st.just("default"), LABEL)),
        "backend": draw(st.sampled_from(backends)),
        "coordinator_port": draw(st.integers(1, 65535)),
        "max_restarts": draw(st.integers(0, 10)),
        "init_timeout_seconds": draw(st.integers(1, 3600)),
        "env": draw(st.dictionaries(ENV_NAME, st.text(string.printable, max_size=20), max_size=3)),
        "labels": draw(st.dictionaries(st.sampled_from(["team", "example.com/owner"]), LABEL, max_size=2)),
    }
    if job["backend"] == "trainjob":
        del job["coordinator_port"]  # Trainer's JAX plugin fixes it at 29500
        if isinstance(accelerator, CPU) and draw(st.booleans()):
            job["runtime"] = "jax-distributed"  # the upstream ClusterTrainingRuntime (CPU pools only)
    return {"name": draw(LABEL.filter(lambda n: len(n) <= 40)), "accelerator": accelerator, "job": job}


def backends_for(accelerator: Any, multi_slice: bool) -> list[str]:
    """Every backend this pool and slice count is compatible with (the rules of plan._backend_problems)."""
    if multi_slice:
        return ["jobset"]
    multi_host_tpu = isinstance(accelerator, TPU) and accelerator.row.multi_host
    return ["jobset", "job", "trainjob"] + ([] if multi_host_tpu else ["jaxjob"])


def build(spec: dict[str, Any]) -> Cluster:
    return Cluster(name=spec["name"], node_pools=[NodePool("pool", spec["accelerator"])], jobs=[JaxJob(**spec["job"])])


# Found by Hypothesis in CI: an H100 pool runs GPUDirect-TCPX by default, whose daemons a namespace jaxinfra creates as
# Pod Security `restricted` refuses (a spec problem naming the pool); in `default` it renders GKE's network objects,
# which carry no labels.
_TCPX = GPU("h100-80gb", 8)
_TCPX_JOB = {"name": "a", "image": "img", "node_pool": "pool", "nodes": 1, "backend": "jobset", "coordinator_port": 1}
_TCPX_JOB |= {"max_restarts": 0, "init_timeout_seconds": 1, "env": {}, "labels": {}}


@given(specs())
@example({"name": "a", "accelerator": _TCPX, "job": {**_TCPX_JOB, "nodes": 2, "namespace": "a"}})
@example({"name": "a", "accelerator": _TCPX, "job": {**_TCPX_JOB, "namespace": "default"}})
def test_valid_specs_render_strictly_valid_manifests_whose_names_fit(spec: dict[str, Any]) -> None:
    try:
        cluster = build(spec)
    except SpecError as err:
        # refused only for a job name whose derived names are too long, or a GPUDirect pool's daemons in a
        # namespace jaxinfra makes restricted (the spec's own rule: spec/rules.py)
        for p in err.problems:
            if p.path == "jobs[0].name":
                assert f"over {MAX_NAME}" in p.message, err
            else:
                assert p.path == "jobs[0].node_pool" and "Pod Security enforce=restricted" in p.message, err
        return
    objs = manifests(cluster)
    assert validate_objects(objs) == []
    jp = plan(cluster).jobs[0]
    names = [m["metadata"]["name"] for m in objs] + [jp.hostname(0), jp.hostname(jp.processes - 1)]
    names += [v for m in objs for v in (m["metadata"].get("labels") or {}).values()]
    assert all(len(n) <= MAX_NAME for n in names)
    assert dump(objs) == dump(manifests(build(spec)))
    check_env_contract(jp, objs)


def container_env(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every env entry of every container of every rendered object (JobSet, Job, JAXJob, TrainJob, TrainingRuntime)."""
    out: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("env"), list) and ("image" in node or "name" in node):
                out.extend(e for e in node["env"] if isinstance(e, dict))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(objs)
    return out


def check_env_contract(jp: Any, objs: list[dict[str, Any]]) -> None:
    """`explain` and the manifests agree: literals jaxinfra sets are in the manifest verbatim, and every
    rank's env, as the controllers, the operators and the platform resolve it, is exactly explain's."""
    entries = container_env(objs)
    for rank in {0, jp.processes - 1}:
        for name, (value, by) in jp.env_sources(rank).items():
            if by == BY_JAXINFRA:
                literal = [e.get("value") for e in entries if e.get("name") == name and "valueFrom" not in e]
                assert literal and set(literal) == {value}, (name, value, literal)
            else:  # injected: never written by jaxinfra as a literal that could disagree
                assert all("value" not in e or e.get("name") != name for e in entries), (name, by)
    if jp.processes > EMULATE_MAX_PODS:
        return
    cluster = emulate(objs)
    assert cluster.problems == ()
    [workload] = cluster.workloads
    assert workload.problems == (), workload.problems
    assert [p.global_index for p in workload.pods] == list(range(jp.processes))
    for pod in workload.pods:
        expected = jp.rank_env(pod.global_index)
        assert {k: pod.env.get(k) for k in expected} == expected, pod.name
        assert pod.hostname == jp.hostname(pod.global_index)


MUTATIONS = {
    "jobs[0].coordinator_port": st.one_of(st.integers(max_value=0), st.integers(min_value=65536)).map(
        lambda v: {"coordinator_port": v}
    ),
    "jobs[0].nodes": st.integers(max_value=0).map(lambda v: {"nodes": v}),
    "jobs[0].slices": st.integers(max_value=0).map(lambda v: {"slices": v}),
    "jobs[0].backend": st.text(min_size=1, max_size=8)
    .filter(lambda b: b not in ("jobset", "job", "jaxjob", "trainjob"))
    .map(lambda v: {"backend": v}),
    "jobs[0].name": st.text(string.ascii_uppercase + "_!", min_size=1, max_size=8).map(lambda v: {"name": v}),
    "jobs[0].init_timeout_seconds": st.integers(max_value=0).map(lambda v: {"init_timeout_seconds": v}),
    "jobs[0].max_restarts": st.integers(max_value=-1).map(lambda v: {"max_restarts": v}),
}


@given(
    specs(),
    st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=4, unique=True),
    st.one_of(st.none(), st.text(string.ascii_lowercase + "0123456789-", min_size=1, max_size=8)),
    st.data(),
)
def test_invalid_specs_raise_one_error_naming_every_broken_field(
    spec: dict[str, Any], broken: list[str], generation: str | None, data: st.DataObject
) -> None:
    for path in broken:
        spec["job"].update(data.draw(MUTATIONS[path]))
    expected = set(broken)
    if generation is not None:
        try:
            catalog.resolve(generation)
            assume(False)
        except catalog.CatalogError:
            pass
        spec["accelerator"] = TPU(generation, None)
        expected.add("node_pools[0].accelerator.generation")
    try:
        build(spec)
    except SpecError as err:
        paths = {p.path for p in err.problems}
        assert expected <= paths, err
        assert all(p.message and p.fix for p in err.problems)
    else:
        raise AssertionError(f"accepted an invalid spec: {broken}")


def test_single_host_tpu_worker_id_agrees_with_the_platform() -> None:
    """GKE injects TPU_WORKER_ID only into multi-host slices; explain must not promise it elsewhere."""
    cluster = Cluster(
        name="c", node_pools=[NodePool("pool", TPU("v4", "2x2x1"))], jobs=[JaxJob("a", image="img", node_pool="pool")]
    )
    jp = plan(cluster).jobs[0]
    [pod] = emulate(manifests(cluster)).workloads[0].pods
    assert pod.env.get("TPU_WORKER_ID") == jp.rank_env(0).get("TPU_WORKER_ID")
