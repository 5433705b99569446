"""The Pulumi program under `pulumi.runtime.set_mocks`: no Pulumi CLI, no plugins, no cloud.

The program that Pulumi.yaml names is run with runpy, as the Python language host runs it, for
every stack and both providers. A recording resource monitor sees each registration as the engine
would: type, name, inputs, parent, dependencies, provider, replaceOnChanges, deleteBeforeReplace.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from jaxinfra import manifests, releases, stack
from jaxinfra.plan import plan
from jaxinfra.pulumi import SKIP_AWAIT, node_pools
from tests.support.paths import ROOT, STACKS
from tests.support.pulumi_harness import (
    CA,
    CLUSTER_T,
    EXISTING,
    GKE,
    GKE_T,
    IAM_T,
    JOB_T,
    K8S_PROVIDER_T,
    MAIN,
    POOL_T,
    PROJECT,
    PROVIDERS,
    STACK_T,
    WORKLOADS,
    Run,
    config_for,
    k8s_type,
    root_config,
    run_error,
    run_program,
    secret,
    write_stack,
)

pytestmark = pytest.mark.adapters


@pytest.fixture(scope="module")
def runs() -> dict[tuple[str, str], Run]:
    return {(p.stem, prov): run_program(config_for(p, prov)) for p in STACKS for prov in PROVIDERS}


CASES = [(p, prov) for p in STACKS for prov in PROVIDERS]
CASE_IDS = [f"{p.stem}.{prov}" for p, prov in CASES]


def expected_inputs(m: dict[str, Any]) -> dict[str, Any]:
    """The manifest as the adapter passes it: verbatim, plus skipAwait on workloads, the headless Service and the
    claim."""
    if m["kind"] in WORKLOADS | {"Service", "PersistentVolumeClaim"}:
        meta = {**m["metadata"], "annotations": {**m["metadata"].get("annotations", {}), SKIP_AWAIT: "true"}}
        return {**m, "metadata": meta}
    return m


# --- every stack x both providers -------------------------------------------------------------


@pytest.mark.parametrize(("path", "provider"), CASES, ids=CASE_IDS)
def test_kubernetes_objects_are_the_rendered_manifests(runs: dict, path: Path, provider: str) -> None:
    run, cluster = runs[path.stem, provider], stack.load(path)
    rendered = manifests(cluster)
    got = {(r.type, r.name): r for r in run.k8s}
    want = {
        (
            k8s_type(m),
            f"{m['metadata']['namespace']}/{m['metadata']['name']}"
            if m["metadata"].get("namespace")
            else m["metadata"]["name"],
        ): m
        for m in rendered
    }
    assert sorted(got) == sorted(want), "one Pulumi resource per rendered object, nothing else"
    for key, m in want.items():
        assert got[key].inputs == expected_inputs(m), key  # names verbatim: metadata.name is set, no suffix
        assert got[key].inputs["metadata"]["name"] == m["metadata"]["name"]


@pytest.mark.parametrize(("path", "provider"), CASES, ids=CASE_IDS)
def test_resource_graph(runs: dict, path: Path, provider: str) -> None:
    run, cluster = runs[path.stem, provider], stack.load(path)
    cp = plan(cluster)
    [comp] = run.of(CLUSTER_T)
    assert (comp.name, comp.parent) == (cluster.name, (STACK_T, f"{PROJECT['name']}-test"))
    me = (CLUSTER_T, cluster.name)
    [k8s_provider] = run.of(K8S_PROVIDER_T)
    assert k8s_provider.parent == me
    assert sorted(r.name for r in run.of(JOB_T)) == sorted(f"{jp.namespace}/{jp.name}" for jp in cp.jobs)
    assert all(r.parent == me for r in run.of(JOB_T))
    pools = {(POOL_T, r.name) for r in run.of(POOL_T)}
    for r in run.k8s:
        assert r.provider == (K8S_PROVIDER_T, k8s_provider.name), r.name
        if r.type == "kubernetes:core/v1:Namespace":
            assert r.parent == me and not r.deps
            continue
        if r.type.startswith("kubernetes:networking.gke.io/"):  # a GPU network (tests/test_pulumi_gpudirect.py)
            assert r.parent == me and (provider == "existing" or {(POOL_T, p.name) for p in run.of(POOL_T)} <= r.deps)
            continue
        if r.inputs["apiVersion"].startswith("kueue.x-k8s.io/") and r.parent == me:  # Cluster(kueue=True)'s queues
            assert provider == "existing" or {res.key for res in run.of_parent("kueue")} & r.deps, r.name
            continue
        ns, name = r.name.split("/")
        jp = next(jp for jp in cp.jobs if jp.namespace == ns and name in (jp.name, jp.checkpoint_claim))
        assert r.parent == (JOB_T, f"{ns}/{jp.name}"), "every job object is a child of its JaxJob (its claim too)"
        job_pools = {(POOL_T, ps.name) for ps in node_pools(cluster)[jp.pool.name]} if provider == "gke" else set()
        assert job_pools <= pools and job_pools <= r.deps, "node pools exist before the job's objects"
        if ns in cp.namespaces:
            assert ("kubernetes:core/v1:Namespace", ns) in r.deps
        kind = r.type.rpartition(":")[2]
        for c in releases.needed(cp) if provider == "gke" else ():  # installed by default with gke only
            assert (kind in c.kinds) == bool({res.key for res in run.of_parent(c.name)} & r.deps), (r.name, c.name)
        if kind in WORKLOADS:
            assert {("kubernetes:core/v1:ServiceAccount", r.name), ("kubernetes:core/v1:Service", r.name)} <= r.deps
            if jp.renders_claim:
                assert ("kubernetes:core/v1:PersistentVolumeClaim", f"{ns}/{jp.checkpoint_claim}") in r.deps
            assert r.inputs["metadata"]["annotations"][SKIP_AWAIT] == "true"
            assert (r.replace_on_changes, r.delete_before_replace) == (["spec"], True), (
                "immutable spec: replace, not patch"
            )
        else:
            assert (r.replace_on_changes, r.delete_before_replace) == ([], False)
    assert run.outputs["jobNames"] == [jp.name for jp in cp.jobs]
    assert run.outputs["controllers"] == ({c.name: c.tag for c in releases.needed(cp)} if provider == "gke" else {})
    assert run.outputs["coordinatorAddresses"] == {
        f"{jp.namespace}/{jp.name}": jp.coordinator_address for jp in cp.jobs
    }


@pytest.mark.parametrize("path", STACKS, ids=[p.stem for p in STACKS])
def test_existing_provider_creates_no_cloud_resources(runs: dict, path: Path) -> None:
    run = runs[path.stem, "existing"]
    assert not [r for r in run.resources if r.type.startswith("gcp:")] and not run.calls
    [prov] = run.of(K8S_PROVIDER_T)
    assert prov.inputs.get("context") == "kind-test"
    assert "kubeconfig" not in run.outputs  # none given: the provider uses $KUBECONFIG / ~/.kube/config
    assert not run.controllers and run.outputs["controllers"] == {}, "installControllers is false with existing"
    need = releases.describe(releases.needed(plan(stack.load(path))))
    assert any(f"the cluster must already run {need}" in w for w in run.warnings), run.warnings


@pytest.mark.parametrize("path", STACKS, ids=[p.stem for p in STACKS])
def test_gke_node_pools_follow_the_catalog(runs: dict, path: Path) -> None:
    run, cluster = runs[path.stem, "gke"], stack.load(path)
    [gke] = run.of(GKE_T)
    assert gke.parent == (CLUSTER_T, cluster.name)
    assert (
        gke.inputs.items()
        >= {
            "name": cluster.name,
            "project": "proj",
            "location": "us-east5-a",
            "removeDefaultNodePool": True,
            "deletionProtection": False,
        }.items()
    )
    got = run.pools
    want = node_pools(cluster)
    assert sorted(got) == sorted(ps.name for slices in want.values() for ps in slices)
    for spec_pool in cluster.node_pools:
        row = spec_pool.accelerator.row
        for ps in want[spec_pool.name]:
            r = got[ps.name]
            assert r.parent == (CLUSTER_T, cluster.name) and (GKE_T, cluster.name) in r.deps
            assert {g.key for g in run.of(IAM_T)} <= r.deps, "the node account has its roles before nodes boot"
            assert r.delete_before_replace
            i = r.inputs
            # a flex-start pool has no node until DWS provisions it: autoscaled up to its hosts
            # (tests/test_pulumi_capacity.py)
            size = i["autoscaling"]["totalMaxNodeCount"] if spec_pool.flex_start else i["nodeCount"]
            assert (i["name"], i["cluster"], size, i["location"]) == (
                ps.name,
                cluster.name,
                ps.node_count,
                "us-east5-a",
            )
            assert i.get("nodeLocations") == (None if row.kind == "cpu" else ["us-east5-a"]), (
                "accelerators: one zone, named"
            )
            cfg = i["nodeConfig"]
            assert cfg["machineType"] == (row.machine_type or "e2-standard-4")
            assert cfg["serviceAccount"] == f"{cluster.name}-nodes@proj.iam.gserviceaccount.com"
            assert cfg["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
            assert cfg["shieldedInstanceConfig"] == {
                "enableIntegrityMonitoring": True,
                "enableSecureBoot": row.kind == "cpu",
            }
            assert "spot" not in cfg
            assert cfg.get("reservationAffinity") == (
                {"consumeReservationType": "NO_RESERVATION"} if spec_pool.flex_start else None
            )
            if row.kind == "tpu":
                assert ps.node_count == row.hosts
                assert i.get("placementPolicy") == (
                    {"type": "COMPACT", "tpuTopology": row.topology} if row.multi_host else None
                )
            if row.kind == "gpu":
                assert cfg["guestAccelerators"] == [
                    {
                        "type": row.gke_accelerator,
                        "count": row.chips_per_host,
                        "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"},
                    }
                ]
            else:
                assert "guestAccelerators" not in cfg
    assert run.secret["kubeconfig"], "the kubeconfig output is a secret"
    kubeconfig = json.loads(run.outputs["kubeconfig"])
    assert kubeconfig["clusters"][0]["cluster"] == {"server": "https://203.0.113.1", "certificate-authority-data": CA}
    assert kubeconfig["users"][0]["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
    [prov] = run.of(K8S_PROVIDER_T)
    assert (GKE_T, cluster.name) in prov.deps
    assert prov.inputs["kubeconfig"] == secret(run.outputs["kubeconfig"])


# --- acceptance: the example stack configs ------------------------------------------------------


def test_tpu_v5p_two_slices_two_pools_of_four() -> None:
    run = run_program(root_config("tpu-v5p"))
    pools = sorted(run.pools.values(), key=lambda r: r.name)
    assert [p.name for p in pools] == ["v5p-2x2x4-0", "v5p-2x2x4-1"]
    for p in pools:
        assert (p.inputs["nodeCount"], p.inputs["nodeLocations"]) == (4, ["us-east5-a"]), "4 hosts, in one zone"
        assert p.inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "2x2x4"}
        assert p.inputs["nodeConfig"]["machineType"] == "ct5p-hightpu-4t"
    names = {r.inputs["metadata"]["name"] for r in run.k8s}
    assert names == {"ml", "train"}, "names verbatim, no auto-naming suffix"
    [jobset] = [r for r in run.k8s if r.type.endswith(":JobSet")]
    assert {(POOL_T, "v5p-2x2x4-0"), (POOL_T, "v5p-2x2x4-1")} <= jobset.deps
    assert run.outputs["coordinatorAddresses"] == {"ml/train": "train-slice-0-0.train:8482"}


def test_gpu_h100_one_pool_of_two_nodes_by_eight_gpus() -> None:
    run = run_program(root_config("gpu-h100"))
    [pool] = run.pools.values()
    assert (pool.name, pool.inputs["nodeCount"]) == ("h100", 2)
    assert pool.inputs["nodeConfig"]["machineType"] == "a3-highgpu-8g"
    assert pool.inputs["nodeConfig"]["guestAccelerators"] == [
        {"type": "nvidia-h100-80gb", "count": 8, "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}
    ]
    assert pool.inputs["nodeLocations"] == ["us-central1-a"]
    # a3-highgpu-8g gets GPUDirect-TCPX by default (GPU(network="auto")): 4 extra NICs, close together
    assert pool.inputs["placementPolicy"] == {"type": "COMPACT"}
    assert [n["network"] for n in pool.inputs["networkConfig"]["additionalNodeNetworkConfigs"]] == [
        f"gpu-h100-tcpx-{i}" for i in range(4)
    ]
    assert all((POOL_T, "h100") in r.deps for r in run.k8s if r.type != "kubernetes:core/v1:Namespace")


def test_pulumi_yaml_names_the_program() -> None:
    """The root's Pulumi project: its program, its virtualenv the root's .venv (the README's set-up), its stacks."""
    assert PROJECT["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}}
    assert (MAIN / "__main__.py").is_file()
    for name, path in (("tpu-v5p", "stacks/tpu_v5p_2x2x4_x2.py"), ("gpu-h100", "stacks/gpu_h100_2x8.py")):
        cfg = root_config(name)
        assert (cfg["jaxinfra:stack"], cfg["jaxinfra:provider"]) == (path, "gke")


@pytest.mark.parametrize("where", [".", "infra"], ids=["project folder", "program folder"])
def test_relative_stack_paths_start_at_the_pulumi_project(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder of Pulumi.yaml, found from where the program runs (the engine's root directory is a placeholder
    under mocks), never this library's location: a team's repository resolves its own stacks/."""
    from jaxinfra.pulumi import project_root, read_settings

    (tmp_path / "Pulumi.yaml").write_text("name: team\nruntime: python\nmain: infra/\n")
    (tmp_path / "infra").mkdir()
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks/training.py").write_text("")
    monkeypatch.chdir(tmp_path / where)
    assert project_root() == tmp_path
    settings = read_settings({"jaxinfra:stack": "stacks/training.py", "jaxinfra:provider": "existing"})
    assert settings.stack == tmp_path / "stacks/training.py"
    monkeypatch.chdir(tmp_path.parent)  # outside any project: the working directory, and the message says where
    with pytest.raises(Exception, match=f"no stack file at {tmp_path.parent}/stacks/training.py"):
        read_settings({"jaxinfra:stack": "stacks/training.py", "jaxinfra:provider": "existing"})


# --- options ------------------------------------------------------------------------------------


def test_spot_reservation_cpu_machine_type_and_indexed_job(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        """
        cluster = Cluster(name="opts", node_pools=[
            NodePool("l4", GPU("l4", 1), spot=True),
            NodePool("v5e", TPU("v5e", "2x4"), reservation="my-res"),
            NodePool("cpu", CPU(devices=4, machine_type="n2-standard-16")),
            NodePool("idle", TPU("v5p", "2x2x4")),
        ], jobs=[
            JaxJob("a", image="i", node_pool="l4", nodes=3, backend="job"),
            JaxJob("b", image="i", node_pool="v5e"),
            JaxJob("c", image="i", node_pool="cpu", nodes=2, namespace="team"),
        ])
    """,
    )
    run = run_program({"jaxinfra:stack": str(path), **GKE})
    pools = {name: r.inputs for name, r in run.pools.items()}
    assert sorted(pools) == ["cpu", "idle", "l4", "v5e"]
    l4 = pools["l4"]["nodeConfig"]
    assert (pools["l4"]["nodeCount"], l4["spot"]) == (3, True)
    assert l4["taints"] == [{"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NO_SCHEDULE"}]
    assert pools["v5e"]["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["my-res"],
    }
    assert (pools["v5e"]["nodeCount"], pools["v5e"]["placementPolicy"]) == (
        2,
        {"type": "COMPACT", "tpuTopology": "2x4"},
    )
    assert (pools["cpu"]["nodeCount"], pools["cpu"]["nodeConfig"]["machineType"]) == (2, "n2-standard-16")
    assert pools["idle"]["nodeCount"] == 4, "a pool no job uses still gets one slice"
    [job] = run.of("kubernetes:batch/v1:Job")
    assert job.name == "default/a" and job.inputs["spec"]["completionMode"] == "Indexed"
    assert (job.replace_on_changes, job.delete_before_replace) == (["spec"], True)
    rendered = {
        (k8s_type(m), m["metadata"]["name"], m["metadata"].get("namespace")): m for m in manifests(stack.load(path))
    }
    assert len(run.k8s) == len(rendered)
    for r in run.k8s:
        key = (r.type, r.inputs["metadata"]["name"], r.inputs["metadata"].get("namespace"))
        assert r.inputs == expected_inputs(rendered[key])


def test_kueue_queues_are_created_before_the_jobs_that_name_them(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        """
        cluster = Cluster(name="q", kueue=True,
                          node_pools=[NodePool("v5e", TPU("v5e", "2x4")), NodePool("cpu", CPU(devices=2))],
                          jobs=[JaxJob("a", image="i", node_pool="v5e"),
                                JaxJob("b", image="i", node_pool="cpu", namespace="team",
                                       resources={"requests": {"cpu": "2"}})])
    """,
    )
    run = run_program({"jaxinfra:stack": str(path), **EXISTING})
    rendered = {
        (k8s_type(m), m["metadata"]["name"], m["metadata"].get("namespace")): m for m in manifests(stack.load(path))
    }
    got = {(r.type, r.inputs["metadata"]["name"], r.inputs["metadata"].get("namespace")): r for r in run.k8s}
    assert sorted(got) == sorted(rendered), "one Pulumi resource per rendered object, the queues included"
    queues = {key: r for key, r in got.items() if r.type.startswith("kubernetes:kueue.x-k8s.io/")}
    assert (
        sorted(k[0].rpartition(":")[2] for k in queues)
        == ["ClusterQueue"] * 2 + ["LocalQueue"] * 2 + ["ResourceFlavor"] * 2
    )
    for key, r in queues.items():
        assert r.inputs == expected_inputs(rendered[key]) and r.parent == (CLUSTER_T, "q")
        if key[0].endswith(":LocalQueue"):  # after its ClusterQueue (and its Namespace, where jaxinfra makes one)
            assert ("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", r.inputs["spec"]["clusterQueue"]) in r.deps
    for workload in (r for r in run.k8s if r.type.rpartition(":")[2] in WORKLOADS):
        queue = workload.inputs["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
        ns = workload.inputs["metadata"]["namespace"]
        local_queue = ("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue", f"{ns}/{queue}")
        assert local_queue in workload.deps, "the LocalQueue exists before the workload naming it"


def test_existing_gke_cluster_is_looked_up_not_created() -> None:
    run = run_program({**root_config("tpu-v5p"), "jaxinfra:existingCluster": True, "jaxinfra:clusterName": "shared"})
    assert not run.of(GKE_T)
    [(token, args)] = [
        call for call in run.calls if call[0] != "gcp:organizations/getProject:getProject"
    ]  # the bucket's
    assert token == "gcp:container/getCluster:getCluster"
    assert args.items() >= {"name": "shared", "location": "us-east5-a", "project": "my-project"}.items()
    assert {r.inputs["cluster"] for r in run.of(POOL_T)} == {"shared"}
    assert json.loads(run.outputs["kubeconfig"])["clusters"][0]["cluster"]["server"] == "https://203.0.113.2"


def test_existing_provider_with_kubeconfig() -> None:
    run = run_program(
        {"jaxinfra:stack": "stacks/cpu_dev.py", "jaxinfra:provider": "existing", "jaxinfra:kubeconfig": "/tmp/kc"}
    )
    [prov] = run.of(K8S_PROVIDER_T)
    assert prov.inputs["kubeconfig"] == secret("/tmp/kc"), "passed to the provider as a secret"
    assert run.secret["kubeconfig"] and run.outputs["kubeconfig"] == "/tmp/kc"


# --- bad config: one error, every problem, nothing declared --------------------------------------


def test_missing_config_is_one_error() -> None:
    text, run = run_error({})
    assert text.startswith("2 problems (invalid Pulumi config)")
    assert "jaxinfra:stack = None: missing" in text and "jaxinfra:provider = None: missing" in text
    assert not run.resources and not run.calls


def test_bad_config_lists_every_problem(tmp_path: Path) -> None:
    bad_stack = write_stack(
        tmp_path,
        """
        cluster = Cluster(name="bad", node_pools=[NodePool("p", TPU("v5e", "2x3"))],
                          jobs=[JaxJob("t", image="i", node_pool="p", coordinator_port=70000)])
    """,
    )
    text, run = run_error(
        {
            "jaxinfra:stack": str(bad_stack),
            "jaxinfra:provider": "gke",
            "jaxinfra:context": "x",
            "jaxinfra:locaton": "us-east5-a",
            "jaxinfra:existingCluster": "maybe",
        }
    )
    lines = text.splitlines()
    assert lines[0] == "7 problems (invalid Pulumi config)"
    for needle in (
        "jaxinfra:locaton = 'us-east5-a': unknown config key; fix: did you mean jaxinfra:location?",
        "jaxinfra:context = 'x': not used with provider gke",
        "gcp:project = None: missing (provider gke)",
        "jaxinfra:location = None: missing",
        "jaxinfra:existingCluster = 'maybe': not a boolean",
        "node_pools[0].accelerator.topology = '2x3'",
        "jobs[0].coordinator_port = 70000",
    ):
        assert any(needle in line for line in lines), needle
    assert not run.resources and not run.calls


def test_unknown_provider_and_missing_stack_file() -> None:
    text, run = run_error({"jaxinfra:stack": "stacks/nope.py", "jaxinfra:provider": "aws"})
    assert text.startswith("2 problems")
    assert "jaxinfra:stack = 'stacks/nope.py': no stack file" in text
    assert "jaxinfra:provider = 'aws': unknown provider; fix: use one of gke, existing" in text
    assert not run.resources


def test_slice_pool_name_over_gke_limit(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        f"""
        cluster = Cluster(name="long", node_pools=[NodePool("{"p" * 40}", TPU("v5p", "2x2x4"))],
                          jobs=[JaxJob("t", image="i", node_pool="{"p" * 40}", slices=2)])
    """,
    )
    text, run = run_error({"jaxinfra:stack": str(path), **GKE})
    assert "over 40" in text and "shorten the name by at least 2 characters" in text
    assert not run.resources


# --- pulumi stays out of synth and simulate -------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["synth", "stacks/cpu_dev.py", "--stdout"],
        ["simulate", "stacks/cpu_dev.py", "--timeout", "120"],
    ],
    ids=["synth", "simulate"],
)
def test_synth_and_simulate_never_import_pulumi(argv: list[str]) -> None:
    code = textwrap.dedent(f"""
        import sys, contextlib, io
        from jaxinfra import entry
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                entry.main({argv!r})
            except SystemExit as e:
                assert not e.code, e.code
        bad = sorted(m for m in sys.modules
                     if m == "pulumi" or m.startswith(("pulumi.", "pulumi_")) or m == "jaxinfra.pulumi")
        print(bad)
        sys.exit(1 if bad else 0)
    """)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
