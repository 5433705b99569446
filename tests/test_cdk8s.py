"""The cdk8s adapter: charts equal `jaxinfra synth`, compose in a user's app, and `cdk8s synth` to dist/.

jsii starts one Node process per Python process, so every cdk8s test lives in this module and
the charts share one App.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.adapters

# Node 20 is past jsii's support window: silence its banner here, as `python -m jaxinfra.cdk8s` does.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
cdk8s = pytest.importorskip("cdk8s")

from constructs import Construct  # noqa: E402

from jaxinfra import manifests, stack  # noqa: E402
from jaxinfra.cdk8s import JaxinfraChart, JaxJobConstruct, stacks_app  # noqa: E402
from jaxinfra.plan import plan  # noqa: E402
from jaxinfra.spec import CPU, Cluster, JaxJob, NodePool  # noqa: E402
from jaxinfra.validate import validate_objects  # noqa: E402
from jaxinfra.yamlio import dump, load  # noqa: E402
from tests.sim.cluster.test_simulate import verdicts  # noqa: E402
from tests.support.paths import ROOT, STACKS  # noqa: E402
from tests.support.stacks import PAIR_IDS, PAIRS, load_stack, rendered  # noqa: E402

CPU_DEV = ROOT / "stacks" / "cpu_dev.py"
MULTISLICE = ROOT / "stacks" / "tpu_v5p_2x2x4_x2.py"  # its job is in namespace `ml`


@pytest.fixture(scope="module")
def app() -> Any:
    return cdk8s.App()


def container(obj: dict[str, Any]) -> dict[str, Any]:
    job = obj["spec"]["replicatedJobs"][0]["template"] if obj["kind"] == "JobSet" else obj
    [c] = job["spec"]["template"]["spec"]["containers"]
    return c


def contract(objects: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What the env contract rests on: names, the Service's selector, subdomain and the pods' env."""
    out = []
    for o in objects:
        if o["kind"] in ("JobSet", "Job"):
            spec = o["spec"]
            subdomain = spec["network"]["subdomain"] if o["kind"] == "JobSet" else spec["template"]["spec"]["subdomain"]
            out.append((o["kind"], o["metadata"]["name"], subdomain, container(o)["env"]))
        else:
            out.append((o["kind"], o["metadata"]["name"], o.get("spec", {}).get("selector")))
    return out


# --- the chart is the rendered manifests ------------------------------------------------------


@pytest.mark.parametrize(("path", "backend"), PAIRS, ids=PAIR_IDS)
def test_chart_equals_jaxinfra_synth_object_for_object(path: Path, backend: str, app: Any) -> None:
    chart = JaxinfraChart(app, f"{path.stem}-{backend}".replace("_", "-"), load_stack(path, backend))
    objects = cdk8s.Testing.synth(chart)
    assert objects == rendered(path, backend)  # order included: cdk8s keeps construct order
    assert validate_objects(objects, f"cdk8s:{path.stem}.{backend}") == []


def test_chart_with_kueue_equals_synth(app: Any) -> None:
    """Kueue's cluster-scoped objects and LocalQueues are in the chart too, in apply order."""
    cluster = Cluster(
        name="q",
        kueue=True,
        node_pools=[NodePool("cpu", CPU(devices=2))],
        jobs=[
            JaxJob(
                f"t-{b}",
                namespace="ml",
                image="i",
                node_pool="cpu",
                nodes=2,
                backend=b,
                resources={"requests": {"cpu": "1"}},
            )
            for b in ("jobset", "jaxjob", "trainjob")
        ],
    )
    objects = cdk8s.Testing.synth(JaxinfraChart(app, "kueue", cluster))
    assert objects == manifests(cluster)
    assert [o["kind"] for o in objects[:4]] == ["Namespace", "ResourceFlavor", "ClusterQueue", "LocalQueue"]


@pytest.mark.parametrize("path", STACKS, ids=[p.stem for p in STACKS])
def test_snapshot(path: Path, app: Any, yaml_snapshot: Any) -> None:
    chart = JaxinfraChart(app, f"snap-{path.stem}".replace("_", "-"), stack.load(path))
    assert dump(cdk8s.Testing.synth(chart)) == yaml_snapshot(name=f"cdk8s.{path.stem}")


def test_names_are_explicit_whatever_the_construct_path(app: Any) -> None:
    scope = cdk8s.Chart(app, "deeply", disable_resource_name_hashes=False)
    job = JaxJobConstruct(Construct(Construct(scope, "nested"), "Some_Path"), "x", plan(stack.load(CPU_DEV)).jobs[0])
    # SA, NetworkPolicy, the checkpoints' claim, Service, JobSet
    assert [o["metadata"]["name"] for o in cdk8s.Testing.synth(scope)] == [
        "train",
        "train",
        "train-checkpoints",
        "train",
        "train",
    ]
    assert job.workload is job.objects["JobSet"]


# --- a user's own app -------------------------------------------------------------------------


def test_users_app_composes_jaxinfra_with_its_own_chart(tmp_path: Path) -> None:
    app = cdk8s.App(outdir=str(tmp_path))
    labels = {"team": "research", "app.kubernetes.io/name": "theirs"}  # the second key must not win
    platform = cdk8s.Chart(app, "platform", namespace="ml-platform", labels=labels)
    cdk8s.ApiObject(platform, "settings", api_version="v1", kind="ConfigMap").add_json_patch(
        cdk8s.JsonPatch.add("/data", {"LOG_LEVEL": "info"})
    )
    cpu = stack.load(CPU_DEV)
    training = JaxinfraChart(app, "training", cpu, namespace="ml-platform", labels=labels)
    JaxinfraChart(app, "multislice", stack.load(MULTISLICE), namespace="ml-platform", labels=labels)
    # a job construct placed in the user's own chart, deep in their construct tree
    JaxJobConstruct(Construct(platform, "jobs"), "cpu-train", plan(cpu.with_backend("job")).jobs[0])
    app.synth()

    files = {p.name: load(p.read_text()) for p in tmp_path.glob("*.k8s.yaml")}
    assert set(files) == {"platform.k8s.yaml", "training.k8s.yaml", "multislice.k8s.yaml"}
    every = [o for objs in files.values() for o in objs]
    assert validate_objects(every, "user app") == []

    # the chart namespace moves jobs from `default`; the spec renders them there, Namespace included
    moved = cpu.model_copy(update={"jobs": (cpu.jobs[0].model_copy(update={"namespace": "ml-platform"}),)})
    assert training.cluster.jobs[0].namespace == "ml-platform"
    expected = manifests(moved)
    for o in expected:
        o["metadata"]["labels"] = {**labels, **o["metadata"]["labels"]}  # chart labels added, jaxinfra's win
    assert files["training.k8s.yaml"] == expected
    assert [o["metadata"].get("namespace") for o in expected] == [None] + ["ml-platform"] * 5
    # names and the env contract: unchanged by the chart's namespace and labels
    assert contract(files["training.k8s.yaml"][1:]) == contract(manifests(cpu))
    env = {e["name"]: e.get("value") for e in container(files["training.k8s.yaml"][-1])["env"]}
    assert env["JAX_COORDINATOR_ADDRESS"] == "train-node-0-0.train:8482"  # namespace-relative DNS
    for o in every:
        if o["metadata"]["labels"].get("app.kubernetes.io/managed-by") == "jaxinfra" and o["kind"] != "Namespace":
            assert (
                o["metadata"]["labels"]["app.kubernetes.io/name"] == "train"
            )  # the job's (every job here), not theirs

    # an explicit namespace wins over the chart's, as in cdk8s; the objects are jaxinfra's, plus the labels
    multislice = files["multislice.k8s.yaml"]
    assert [o["metadata"].get("namespace") for o in multislice] == [None] + ["ml"] * 4
    assert contract(multislice) == contract(manifests(stack.load(MULTISLICE)))
    assert [{**o, "metadata": {**o["metadata"], "labels": {}}} for o in multislice] == [
        {**o, "metadata": {**o["metadata"], "labels": {}}} for o in manifests(stack.load(MULTISLICE))
    ]

    # the user's chart: their ConfigMap keeps cdk8s's own naming; the job construct its explicit names
    settings, *job = files["platform.k8s.yaml"]
    assert settings["kind"] == "ConfigMap" and settings["metadata"]["name"].startswith("platform-settings-")
    assert settings["metadata"]["namespace"] == "ml-platform"
    assert [(o["kind"], o["metadata"]["name"], o["metadata"]["namespace"]) for o in job] == [
        ("ServiceAccount", "train", "ml-platform"),
        ("NetworkPolicy", "train", "ml-platform"),
        ("PersistentVolumeClaim", "train-checkpoints", "ml-platform"),
        ("Service", "train", "ml-platform"),
        ("Job", "train", "ml-platform"),
    ]
    assert contract(job) == contract(manifests(cpu.with_backend("job"))[-5:])


def test_escape_hatch_patches_reach_the_output(app: Any) -> None:
    chart = JaxinfraChart(app, "hatch", stack.load(CPU_DEV))
    chart.jobs["train"].objects["JobSet"].add_json_patch(cdk8s.JsonPatch.add("/spec/suspend", True))
    cdk8s.ApiObject.of(chart.jobs["train"].objects["Service"]).metadata.add_annotation("example.com/owner", "ml")
    objects = cdk8s.Testing.synth(chart)
    expected = manifests(stack.load(CPU_DEV))
    expected[-1]["spec"]["suspend"] = True
    expected[3]["metadata"]["annotations"] = {
        "example.com/owner": "ml"
    }  # after the ServiceAccount, NetworkPolicy, claim
    assert objects == expected
    assert validate_objects(objects) == []


def test_chart_namespace_conflict_is_a_spec_error(app: Any) -> None:
    from jaxinfra.errors import SpecError
    from jaxinfra.spec import CPU, Cluster, JaxJob, NodePool

    cluster = Cluster(
        name="two",
        node_pools=[NodePool("cpu", CPU())],
        jobs=[
            JaxJob("train", image="i", command=["x"], node_pool="cpu"),
            JaxJob("train", namespace="ml", image="i", command=["x"], node_pool="cpu"),
        ],
    )
    assert [jp.namespace for jp in plan(cluster).jobs] == ["default", "ml"]
    assert set(JaxinfraChart(app, "two", cluster).jobs) == {"default/train", "ml/train"}
    with pytest.raises(SpecError, match="duplicate job name in namespace ml"):
        JaxinfraChart(app, "two-in-ml", cluster, namespace="ml")


def test_stacks_app_has_one_chart_per_stack(tmp_path: Path) -> None:
    app = stacks_app([ROOT / "stacks"], outdir=str(tmp_path))
    assert [c.node.id for c in app.charts] == [stack.load(p).name for p in STACKS]
    for chart, path in zip(app.charts, STACKS):
        assert cdk8s.Testing.synth(chart) == manifests(stack.load(path))


# --- the core never starts Node -------------------------------------------------------------

NO_CDK8S = """
import sys
from jaxinfra.entry import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    assert not e.code, e.code
import jaxinfra
jaxinfra.manifests
heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('jsii', 'cdk8s', 'constructs') or m == 'jaxinfra.cdk8s')
print(heavy, file=sys.stderr)
assert not heavy, heavy
"""


@pytest.mark.parametrize("argv", [["synth", "stacks", "--stdout"], ["--help"], ["validate", "--help"]])
def test_cli_never_imports_cdk8s_nor_starts_node(argv: list[str], tmp_path: Path) -> None:
    # PATH without node: a command that tried to start it would fail
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    r = subprocess.run(
        [sys.executable, "-c", NO_CDK8S, *argv], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert "[]" in r.stderr


# --- `npx cdk8s synth` at the root (its cdk8s.yaml runs `python -m jaxinfra.cdk8s`) ----------------------------

CLI = ROOT / "node_modules" / ".bin" / "cdk8s"


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Fresh output of the example's pinned `cdk8s synth` when `npm ci` has run there, else its dist/."""
    if CLI.exists() and shutil.which("node"):
        out = tmp_path_factory.mktemp("dist")
        r = subprocess.run(
            [str(CLI), "synth", "--no-check-upgrade", "--output", str(out)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        assert "!!" not in r.stdout + r.stderr  # no jsii banner
        return out
    if list((ROOT / "dist").glob("*.k8s.yaml")):
        return ROOT / "dist"
    pytest.skip(
        "no cdk8s output: run `npm ci && npx cdk8s synth` at the checkout's root (its node_modules/ and "
        "dist/ are missing)"
    )


def test_cdk8s_synth_writes_jaxinfra_synth_objects(synthesized: Path) -> None:
    clusters = {stack.load(p).name: stack.load(p) for p in STACKS}
    files = sorted(synthesized.glob("*.k8s.yaml"))
    assert [f.name for f in files] == sorted(f"{name}.k8s.yaml" for name in clusters)
    for f in files:
        objects = load(f.read_text())
        assert objects == manifests(clusters[f.name.removesuffix(".k8s.yaml")]), f"{f} is stale: run npx cdk8s synth"
        assert validate_objects(objects, str(f)) == []


def _simulate(inputs: list[str], report: Path) -> dict[str, Any]:
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "simulate", *inputs, "--no-logs", "--json", str(report)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(report.read_text())


def test_simulating_cdk8s_output_reaches_the_stacks_verdicts(synthesized: Path, tmp_path: Path) -> None:
    pytest.importorskip("jax")
    names = [stack.load(p).name for p in STACKS]
    # each chart is a cluster of its own (their JobSets share a name): one invocation per file, as one stack each
    runs = [_simulate([str(synthesized / f"{n}.k8s.yaml")], tmp_path / f"{n}.json") for n in names]
    from_dist = {"workloads": [w for run in runs for w in run["workloads"]]}
    from_stacks = _simulate([str(p) for p in STACKS], tmp_path / "stacks.json")
    assert verdicts(from_dist) == verdicts(from_stacks)
    assert len(from_dist["workloads"]) == len(STACKS)
    assert all(w["verdict"] == "succeeded" for w in from_dist["workloads"])
