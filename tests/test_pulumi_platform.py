"""`pulumi up` on a fresh project gives a correct, safe, ready platform (issue 16), under mocks.

One zone per accelerator pool with node counts equal to the hosts; a created cluster that enforces
NetworkPolicy, has Workload Identity and runs its nodes as a dedicated least-privilege account; the
controllers the stack's objects need, pinned in `jaxinfra.releases`, installed after the node
pools and before every object of theirs; every opt-out a config key; bad config one error.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxinfra import releases
from jaxinfra.pulumi import KEYS, NODE_ROLES, SYSTEM_POOL
from tests.support.paths import ROOT
from tests.support.pulumi_harness import (
    ACCOUNT_T,
    BUCKET_IAM_T,
    BUCKET_T,
    CHART_T,
    CLUSTER_T,
    CONFIG_FILE_T,
    CONTROLLER_T,
    EXISTING,
    FIREWALL_T,
    FUSE_ON,
    GKE,
    GKE_T,
    IAM_T,
    INSTALLER_T,
    K8S_PROVIDER_T,
    KUSTOMIZE_T,
    NAMESPACE_T,
    NETWORK_T,
    POOL_T,
    SECURE_CLUSTER,
    SUBNET_T,
    Run,
    root_config,
    run_error,
    run_program,
    write_stack,
)

pytestmark = pytest.mark.adapters

H100 = "stacks/gpu_h100_2x8.py"
V5P = "stacks/tpu_v5p_2x2x4_x2.py"
REGIONAL = {**GKE, "jaxinfra:location": "us-central1"}


def kind(r: Any) -> str:
    return r.type.rpartition(":")[2]


# --- zones: accelerator pools in exactly one zone, node counts = hosts --------------------------


@pytest.mark.parametrize(("path", "pools"), [(H100, "h100"), (V5P, "v5p-2x2x4")])
def test_regional_location_without_a_zone_is_one_error_naming_node_locations(path: str, pools: str) -> None:
    text, run = run_error({"jaxinfra:stack": path, **REGIONAL})
    lines = text.splitlines()
    assert lines[0] == "1 problem (invalid Pulumi config)", text
    assert lines[1].startswith(
        f"  jaxinfra:nodeLocations = None: accelerator node pools ({pools}) need one zone, and "
        "us-central1 is a region (node_count is per zone"
    ), text
    assert "fix: `pulumi config set --path 'jaxinfra:nodeLocations[0]' us-central1-<zone>`" in lines[1]
    assert not run.resources and not run.calls, "nothing declared"


@pytest.mark.parametrize(
    "where",
    [
        {"jaxinfra:location": "us-central1-b"},  # a zonal cluster
        {"jaxinfra:location": "us-central1", "gcp:zone": "us-central1-b"},  # regional, gcp:zone
        {
            "jaxinfra:location": "us-central1",
            "jaxinfra:nodeLocations": ["us-central1-b"],
        },  # regional, one node location
    ],
    ids=["zonal", "gcp-zone", "node-locations"],
)
@pytest.mark.parametrize(
    ("path", "hosts"),
    [(V5P, {"v5p-2x2x4-0": 4, "v5p-2x2x4-1": 4}), (H100, {"h100": 2})],
    ids=["v5p-2x2x4-x2", "h100-x2"],
)
def test_every_accelerator_pool_in_the_zone_with_its_hosts(where: dict, path: str, hosts: dict) -> None:
    run = run_program({"jaxinfra:stack": path, **GKE, **where})
    pools = run.pools
    assert {name: p.inputs["nodeCount"] for name, p in pools.items()} == hosts, (
        "v5p: 2 pools x 4 hosts; H100: 1 pool x 2"
    )
    for p in pools.values():
        assert (p.inputs["location"], p.inputs["nodeLocations"]) == (where["jaxinfra:location"], ["us-central1-b"])
    system = run.one(POOL_T, SYSTEM_POOL)
    assert system.inputs["nodeLocations"] == ["us-central1-b"], "the system pool beside the accelerators"


def test_cpu_pools_may_stay_regional() -> None:
    run = run_program({"jaxinfra:stack": "stacks/cpu_dev.py", **REGIONAL})
    [cpu] = run.pools.values()
    assert cpu.inputs["nodeCount"] == 2 and "nodeLocations" not in cpu.inputs, "2 nodes in each of the cluster's zones"
    assert "nodeLocations" not in run.one(POOL_T, SYSTEM_POOL).inputs


def test_zones_outside_the_cluster_region_are_refused() -> None:
    text, run = run_error({"jaxinfra:stack": H100, **REGIONAL, "gcp:zone": "us-east5-a"})
    assert "gcp:zone = 'us-east5-a': the accelerator pools' zone is not in region us-central1" in text
    text, _ = run_error({"jaxinfra:stack": H100, **REGIONAL, "jaxinfra:nodeLocations": ["us-east5-a"]})
    assert "jaxinfra:nodeLocations = ['us-east5-a']: us-east5-a not in region us-central1 of the cluster" in text
    assert not run.resources


# --- a created cluster a security review accepts -----------------------------------------------


def test_created_cluster_enforces_network_policy_with_workload_identity_and_a_dedicated_node_account() -> None:
    run = run_program(root_config("tpu-v5p"))
    [gke] = run.of(GKE_T)
    account = "tpu-v5p-nodes@my-project.iam.gserviceaccount.com"
    assert gke.inputs["datapathProvider"] == "ADVANCED_DATAPATH", "Dataplane V2: NetworkPolicy always enforced"
    assert "networkPolicy" not in gke.inputs
    assert gke.inputs["addonsConfig"] == {"gcsFuseCsiDriverConfig": {"enabled": True}}, "only for the checkpoint bucket"
    assert gke.inputs["workloadIdentityConfig"] == {"workloadPool": "my-project.svc.id.goog"}
    assert gke.inputs["nodeConfig"] == {
        "serviceAccount": account,
        "oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"],
    }
    assert (gke.inputs["enableShieldedNodes"], gke.inputs["releaseChannel"]) == (True, {"channel": "REGULAR"})
    [sa] = run.of(ACCOUNT_T)
    assert (sa.inputs["accountId"], sa.inputs["project"], sa.parent) == (
        "tpu-v5p-nodes",
        "my-project",
        (CLUSTER_T, "tpu-v5p"),
    )
    grants = run.of(IAM_T)
    assert (
        sorted(g.inputs["role"] for g in grants)
        == sorted(NODE_ROLES)
        == ["roles/artifactregistry.reader", "roles/container.defaultNodeServiceAccount"]
    )
    assert all(
        g.inputs["member"] == f"serviceAccount:{account}" and g.inputs["project"] == "my-project" for g in grants
    )
    assert {g.key for g in grants} <= gke.deps
    for pool in run.of(POOL_T):  # the system pool too
        cfg = pool.inputs["nodeConfig"]
        assert (cfg["serviceAccount"], cfg["workloadMetadataConfig"]) == (account, {"mode": "GKE_METADATA"}), pool.name
        assert cfg["shieldedInstanceConfig"]["enableIntegrityMonitoring"] and {g.key for g in grants} <= pool.deps
    assert run.outputs["nodeServiceAccount"] == account
    assert not run.warnings, run.warnings


def test_every_security_default_has_a_config_key_to_opt_out(tmp_path: Path) -> None:
    # The example's H100 pool on plain pod networking: GPUDirect (its default) needs Dataplane V2, which calico and
    # none would not give it (tests/test_pulumi_gpudirect.py).
    standard = write_stack(
        tmp_path,
        """
        cluster = Cluster(name="gpu-h100", node_pools=[NodePool("h100", GPU("h100-80gb", 8, network="standard"))],
                          jobs=[JaxJob("train", image="i", node_pool="h100", nodes=2)])
    """,
    )
    gpu = {**root_config("gpu-h100"), "jaxinfra:stack": str(standard)}
    run = run_program(
        {
            **gpu,
            "jaxinfra:networkPolicy": "calico",
            "jaxinfra:workloadIdentity": False,
            "jaxinfra:nodeServiceAccount": "nodes@other.iam.gserviceaccount.com",
            "jaxinfra:shieldedNodes": False,
            "jaxinfra:releaseChannel": "STABLE",
        }
    )
    [gke] = run.of(GKE_T)
    assert "datapathProvider" not in gke.inputs and "workloadIdentityConfig" not in gke.inputs
    assert gke.inputs["networkPolicy"] == {"enabled": True, "provider": "CALICO"}
    assert gke.inputs["addonsConfig"] == {"networkPolicyConfig": {"disabled": False}}
    assert (gke.inputs["enableShieldedNodes"], gke.inputs["releaseChannel"]) == (False, {"channel": "STABLE"})
    assert gke.inputs["nodeConfig"]["serviceAccount"] == "nodes@other.iam.gserviceaccount.com"
    assert not run.of(ACCOUNT_T) and not run.of(IAM_T) and "nodeServiceAccount" not in run.outputs
    for pool in run.of(POOL_T):
        cfg = pool.inputs["nodeConfig"]
        assert cfg["serviceAccount"] == "nodes@other.iam.gserviceaccount.com"
        assert "workloadMetadataConfig" not in cfg and "shieldedInstanceConfig" not in cfg

    run = run_program({**gpu, "jaxinfra:networkPolicy": "none", "jaxinfra:nodeServiceAccount": "default"})
    [gke] = run.of(GKE_T)
    assert not {"datapathProvider", "networkPolicy", "addonsConfig", "nodeConfig"} & set(gke.inputs)
    assert all("serviceAccount" not in p.inputs["nodeConfig"] for p in run.of(POOL_T)), (
        "Compute Engine's default account"
    )
    assert run.warnings == [
        "jaxinfra:networkPolicy is none: the cluster enforces no NetworkPolicy, and the jobs' are ignored"
    ]


def test_existing_gke_cluster_is_checked_for_what_it_must_have() -> None:
    config = {**root_config("tpu-v5p"), "jaxinfra:existingCluster": True, "jaxinfra:clusterName": "shared"}
    assert not run_program(config, existing=SECURE_CLUSTER).warnings
    run = run_program(
        config,
        existing={
            "datapathProvider": "LEGACY_DATAPATH",
            "networkPolicies": [{"enabled": False}],
            "enableShieldedNodes": False,
            "workloadIdentityConfigs": [],
        },
    )
    assert not run.of(GKE_T) and not run.one(POOL_T, "v5p-2x2x4-0").deps & {(GKE_T, "shared")}
    [policy, identity, shielded, fuse] = run.warnings
    assert (
        policy.startswith("GKE cluster shared enforces no NetworkPolicy")
        and "--update-addons=NetworkPolicy=ENABLED" in policy
    )
    assert "--workload-pool=my-project.svc.id.goog" in identity and "jaxinfra:workloadIdentity false" in identity
    assert "--enable-shielded-nodes" in shielded
    assert "has no Cloud Storage FUSE CSI driver" in fuse and "--update-addons GcsFuseCsiDriver=ENABLED" in fuse
    assert not [p for p in run.of(POOL_T) if p.name == SYSTEM_POOL], (
        "no system pool in a cluster jaxinfra did not create"
    )
    calico = {
        "datapathProvider": "LEGACY_DATAPATH",
        "networkPolicies": [{"enabled": True}],
        "enableShieldedNodes": True,
        "workloadIdentityConfigs": [{"workloadPool": "my-project.svc.id.goog"}],
        **FUSE_ON,
    }
    assert not run_program(config, existing=calico).warnings, "the network policy add-on enforces them too"
    quiet = {**config, "jaxinfra:networkPolicy": "none", "jaxinfra:shieldedNodes": False}
    assert not run_program(
        quiet, existing={"workloadIdentityConfigs": [{"workloadPool": "x.svc.id.goog"}], **FUSE_ON}
    ).warnings


# --- controllers ---------------------------------------------------------------------------------


def installed(run: Run) -> dict[str, Any]:
    return {c.name: run.controller(c.name) for c in run.controllers}


def test_jobset_controller_after_the_node_pools_and_before_the_jobset() -> None:
    run = run_program(root_config("tpu-v5p"))
    [js] = installed(run).values()
    assert (js.type, js.parent) == (CHART_T, (CONTROLLER_T, "jobset")), "no Kueue without kueue=True"
    c = releases.JOBSET
    assert js.inputs == {
        "chart": "oci://registry.k8s.io/jobset/charts/jobset",
        "version": c.version,
        "namespace": "jobset-system",
        "values": {},
    }
    assert js.provider == (K8S_PROVIDER_T, "tpu-v5p-k8s")
    assert {p.key for p in run.of(POOL_T)} | {(GKE_T, "tpu-v5p"), (NAMESPACE_T, "jobset-system")} <= js.deps
    [jobset] = [r for r in run.k8s if kind(r) == "JobSet"]
    assert js.key in jobset.deps
    assert all(js.key not in r.deps for r in run.k8s if kind(r) != "JobSet"), "only JobSet objects wait for it"
    assert run.outputs["controllers"] == {"jobset": "v0.12.0"}


def test_kueue_only_with_kueue_after_the_controllers_it_integrates(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        """
        cluster = Cluster(name="q", kueue=True,
                          node_pools=[NodePool("v5e", TPU("v5e", "2x4")), NodePool("cpu", CPU(devices=2))],
                          jobs=[JaxJob("a", image="i", node_pool="v5e"),
                                JaxJob("b", image="i", node_pool="cpu", backend="jaxjob",
                                       resources={"requests": {"cpu": "2"}})])
    """,
    )
    run = run_program({"jaxinfra:stack": str(path), **GKE})
    got = installed(run)
    assert sorted(got) == ["jobset", "kueue", "training-operator"]
    kueue = got["kueue"]
    assert (kueue.inputs["chart"], kueue.inputs["version"], kueue.inputs["namespace"]) == (
        "oci://registry.k8s.io/kueue/charts/kueue",
        releases.KUEUE.version,
        "kueue-system",
    )
    config = yaml.safe_load(kueue.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config == {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "integrations": {"frameworks": ["jobset.x-k8s.io/jobset", "kubeflow.org/jaxjob"]},
    }
    assert {got["jobset"].key, got["training-operator"].key} <= kueue.deps
    queues = [r for r in run.k8s if r.type.startswith("kubernetes:kueue.x-k8s.io/")]
    assert len(queues) == 6 and all(kueue.key in q.deps for q in queues)
    [jaxjob] = [r for r in run.k8s if kind(r) == "JAXJob"]
    assert got["training-operator"].key in jaxjob.deps and got["jobset"].key not in jaxjob.deps


def test_kubeflow_operators_for_jaxjob_and_trainjob(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        """
        cluster = Cluster(name="kf", node_pools=[NodePool("cpu", CPU(devices=2))], jobs=[
            JaxJob("op", image="i", node_pool="cpu", nodes=2, backend="jaxjob"),
            JaxJob("own", image="i", node_pool="cpu", nodes=2, backend="trainjob"),
            JaxJob("ref", image="i", node_pool="cpu", nodes=2, backend="trainjob", runtime="jax-distributed"),
        ])
    """,
    )
    run = run_program({"jaxinfra:stack": str(path), **GKE})
    got = installed(run)
    assert sorted(got) == ["jobset", "trainer", "training-operator"]
    operator, trainer = got["training-operator"], got["trainer"]
    assert operator.type == KUSTOMIZE_T
    assert operator.inputs == {
        "directory": "https://github.com/kubeflow/trainer/tree/v1.9.4/manifests/overlays/standalone"
    }
    assert trainer.inputs == {
        "chart": "oci://ghcr.io/kubeflow/charts/kubeflow-trainer",
        "version": releases.TRAINER.version,
        "namespace": "kubeflow-system",
        "values": {"jobset": {"install": False}},
    }
    assert got["jobset"].key in trainer.deps, "Trainer runs TrainJobs as JobSets: jaxinfra's JobSet first"
    [runtime] = run.of(CONFIG_FILE_T)
    assert (runtime.name, runtime.parent) == (
        "jax-distributed",
        (CONTROLLER_T, "trainer"),
    ) and trainer.key in runtime.deps
    assert runtime.inputs["file"].endswith("/kubeflow/trainer/v2.3.0/manifests/base/runtimes/jax_distributed.yaml")
    objects = {(kind(r), r.name): r for r in run.k8s}
    assert {trainer.key, runtime.key} <= objects["TrainJob", "default/ref"].deps
    assert trainer.key in objects["TrainingRuntime", "default/own"].deps
    assert operator.key in objects["JAXJob", "default/op"].deps
    assert not run.warnings, "the one runtime the TrainJobs name is installed"


def test_existing_provider_installs_controllers_when_asked_and_says_what_it_relies_on() -> None:
    run = run_program({"jaxinfra:stack": V5P, **EXISTING, "jaxinfra:installControllers": True})
    js = run.controller("jobset")
    assert not [d for d in js.deps if d[0].startswith("gcp:")], "no node pools to wait for"
    [bucket, policies] = run.warnings
    assert bucket.startswith(
        "job ml/train checkpoints to gs://my-project-tpu-v5p-checkpoints: the cluster needs GKE's "
        "Cloud Storage FUSE CSI driver and Workload Identity"
    )
    assert policies == (
        "the jobs' NetworkPolicies take effect only where the cluster enforces NetworkPolicy "
        "(on GKE: Dataplane V2 or the network policy add-on)"
    )
    run = run_program({"jaxinfra:stack": V5P, **GKE, "jaxinfra:installControllers": False})
    assert not run.controllers
    assert run.warnings == [
        "jaxinfra:installControllers is false: the cluster must already run jobset v0.12.0 (the versions "
        "jaxinfra validates against), or the jobs' objects are refused or never run"
    ]


def test_trainjob_naming_another_runtime_is_said(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        """
        cluster = Cluster(name="kf", node_pools=[NodePool("cpu", CPU(devices=2))],
                          jobs=[JaxJob("ref", image="i", node_pool="cpu", backend="trainjob", runtime="my-runtime")])
    """,
    )
    run = run_program({"jaxinfra:stack": str(path), **GKE})
    assert not run.of(CONFIG_FILE_T)
    assert "the TrainJobs name ClusterTrainingRuntime my-runtime: it must exist in the cluster" in run.warnings


def test_versions_come_from_one_place() -> None:
    """jaxinfra.releases names each version; the schemas README says the same; no other module names one."""
    rows = [
        line.split("|")[1:-1]
        for line in (ROOT / "jaxinfra/schemas/README.md").read_text().splitlines()
        if line.startswith("| ") and ".yaml" in line
    ]
    assert rows
    for file, *_, installs in rows:
        if installs.strip().startswith("none"):  # CRDs the platform serves (GKE multi-networking's), no controller
            continue
        [c] = [c for c in releases.CONTROLLERS if file.strip().startswith(c.group + "_")]
        assert installs.strip() == f"`{c.name}` {c.tag}", file
    code = [*(ROOT / "jaxinfra").rglob("*.py"), *(ROOT / "simulate").rglob("*.py")]
    sources = {p: p.read_text() for p in code if p.name != "releases.py"}
    assert len(sources) > 100  # the whole code base (a moved folder would leave nothing to search)
    for c in releases.CONTROLLERS:
        assert not [p for p, text in sources.items() if re.search(rf"\b{re.escape(c.version)}\b", text)], c.name


# --- config ----------------------------------------------------------------------------------------


def test_bad_platform_config_is_one_error_with_every_problem() -> None:
    text, run = run_error(
        {
            "jaxinfra:stack": V5P,
            **GKE,
            "jaxinfra:networkPolicy": "cilium",
            "jaxinfra:releaseChannel": "fast",
            "jaxinfra:nodeServiceAccount": "me",
            "jaxinfra:systemPool": "big box",
            "jaxinfra:installControllers": "maybe",
            "jaxinfra:workloadIdentity": "yes",
            "jaxinfra:shieldedNodes": 3,
        }
    )
    lines = text.splitlines()
    assert lines[0] == "7 problems (invalid Pulumi config)", text
    for needle in (
        "jaxinfra:networkPolicy = 'cilium': not one of the choices; fix: use one of dataplaneV2, calico, none",
        "jaxinfra:releaseChannel = 'fast': not one of the choices; fix: use one of RAPID, REGULAR, STABLE",
        "jaxinfra:nodeServiceAccount = 'me': not a service account email",
        "jaxinfra:systemPool = 'big box': not a machine type",
        "jaxinfra:installControllers = 'maybe': not a boolean",
        "jaxinfra:workloadIdentity = 'yes': not a boolean",
        "jaxinfra:shieldedNodes = '3': not a boolean",
    ):
        assert any(needle in line for line in lines), needle
    assert not run.resources


def test_gke_keys_are_refused_with_the_existing_provider() -> None:
    text, _ = run_error(
        {"jaxinfra:stack": V5P, **EXISTING, "jaxinfra:networkPolicy": "none", "jaxinfra:systemPool": "none"}
    )
    assert text.startswith("2 problems") and "jaxinfra:networkPolicy = 'none': not used with provider existing" in text


def test_system_pool_name_and_controller_namespaces_are_checked(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        """
        cluster = Cluster(name="c", node_pools=[NodePool("system", CPU(devices=2))],
                          jobs=[JaxJob("t", image="i", node_pool="system", namespace="jobset-system")])
    """,
    )
    text, run = run_error({"jaxinfra:stack": str(path), **GKE})
    assert text.startswith("2 problems") and not run.resources
    assert "node_pools[0].name = 'system': 'system' is the name of jaxinfra's system pool" in text
    assert "jobs[0].namespace = 'jobset-system': the namespace of the jobset controller jaxinfra installs" in text
    run = run_program(
        {"jaxinfra:stack": str(path), **GKE, "jaxinfra:systemPool": "none", "jaxinfra:installControllers": False}
    )
    assert [p.name for p in run.of(POOL_T)] == ["system"], "the stack's own pool named system"


def test_system_pool_runs_the_controllers() -> None:
    run = run_program({**root_config("tpu-v5p"), "jaxinfra:systemPool": "n2-standard-8"})
    system = run.one(POOL_T, SYSTEM_POOL)
    assert system.inputs["nodeConfig"]["machineType"] == "n2-standard-8"
    assert (system.inputs["initialNodeCount"], system.inputs["autoscaling"]) == (
        1,
        {"minNodeCount": 1, "maxNodeCount": 3},
    )
    assert "nodeCount" not in system.inputs and "taints" not in system.inputs["nodeConfig"]
    assert system.inputs["nodeConfig"]["shieldedInstanceConfig"] == {
        "enableIntegrityMonitoring": True,
        "enableSecureBoot": True,
    }
    assert system.key in run.controller("jobset").deps


# --- docs --------------------------------------------------------------------------------------------


def pulumi_section() -> str:
    return (ROOT / "docs/pulumi.md").read_text()


def test_readme_config_table_is_complete() -> None:
    keys = re.findall(r"^\| `([a-z]+:[A-Za-z]+)` \|", pulumi_section(), flags=re.M)
    assert sorted(keys) == sorted(KEYS) and len(keys) == len(set(keys))


#: How docs/pulumi.md names each resource type the program registers.
README_NAMES = {
    CLUSTER_T: "jaxinfra:index:Cluster",
    "jaxinfra:index:JaxJob": "jaxinfra:index:JaxJob",
    CONTROLLER_T: "jaxinfra:index:Controller",
    GKE_T: "gcp.container.Cluster",
    POOL_T: "gcp.container.NodePool",
    ACCOUNT_T: "gcp.serviceaccount.Account",
    IAM_T: "gcp.projects.IAMMember",
    K8S_PROVIDER_T: "Kubernetes provider",
    CHART_T: "helm.v4.Chart",
    KUSTOMIZE_T: "kustomize.v2.Directory",
    CONFIG_FILE_T: "yaml.v2.ConfigFile",
    INSTALLER_T: "jaxinfra:index:NodeInstaller",
    NETWORK_T: "gcp.compute.Network",
    SUBNET_T: "gcp.compute.Subnetwork",
    FIREWALL_T: "gcp.compute.Firewall",
    "kubernetes:networking.gke.io/v1:Network": "`Network`",
    "kubernetes:networking.gke.io/v1:GKENetworkParamSet": "`GKENetworkParamSet`",
    NAMESPACE_T: "Namespace",
    BUCKET_T: "gcp.storage.Bucket",
    BUCKET_IAM_T: "gcp.storage.BucketIAMMember",
}


def test_readme_says_what_pulumi_up_creates(tmp_path: Path) -> None:
    section = pulumi_section()
    kubeflow = write_stack(
        tmp_path,
        """
        cluster = Cluster(name="kf", kueue=True, node_pools=[NodePool("cpu", CPU(devices=2))], jobs=[
            JaxJob("op", image="i", node_pool="cpu", backend="jaxjob", resources={"requests": {"cpu": "2"}}),
            JaxJob("ref", image="i", node_pool="cpu", backend="trainjob", runtime="jax-distributed",
                   resources={"requests": {"cpu": "2"}})])
    """,
    )
    types = {
        r.type
        for config in (root_config("tpu-v5p"), root_config("gpu-h100"), {"jaxinfra:stack": str(kubeflow), **GKE})
        for r in run_program(config).resources
        if not r.type.startswith("kubernetes:") or r.type in README_NAMES
    }
    assert set(README_NAMES) <= types, "every named type is registered somewhere"
    for t in types:
        assert README_NAMES[t] in section, t
    for c in releases.CONTROLLERS:
        assert f"{c.name} {c.tag}" in section, c.name
