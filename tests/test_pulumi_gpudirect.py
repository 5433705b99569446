"""`pulumi up` for GPUDirect pools (issue 25, part 3), under mocks.

For a 2-node job on each of A3 High (TCPX), A3 Mega (TCPXO), A3 Ultra and A4 (RDMA): the GPU NICs' VPCs (MTU, the
RoCE profile), their subnets and firewall rules, a cluster with multi-networking on Dataplane V2, a pool with gVNIC,
its extra NICs in order and compact placement, the GKE `Network` objects, the node installers, and their order. The
cross-check: every network a rendered pod's `networking.gke.io/interfaces` names is a Network object whose
GKENetworkParamSet names a created VPC and subnet, and its interface `ethN` is the pool's N-th extra NIC. The expected
names, ranges and MTUs are written out here (xpk @ 367c8382 src/xpk/core/network.py and blueprint_generator.py,
cluster-toolkit @ 465b3271 modules/network/gpu-rdma-vpc), not read back from `jaxinfra.gpudirect`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jaxinfra import gpudirect, releases, stack
from jaxinfra.plan import plan
from tests.support.pulumi_harness import (
    CONFIG_FILE_T,
    EXISTING,
    FIREWALL_T,
    GKE,
    GKE_T,
    INSTALLER_T,
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

GKE_NET = "kubernetes:networking.gke.io/v1:Network"
PARAM_SET = "kubernetes:networking.gke.io/v1:GKENetworkParamSet"
CEA = "https://raw.githubusercontent.com/GoogleCloudPlatform/container-engine-accelerators/" + gpudirect.CEA_COMMIT
ROCE = "projects/proj/global/networkProfiles/us-east5-a-vpc-roce"  # GKE's location us-east5-a: the pools' zone


def tcp_like(stack: str, nics: int) -> dict[str, Any]:
    """TCPX/TCPXO: one VPC per GPU NIC, each one /24 subnet of 192.168.0.0/16 and a firewall rule."""
    return {
        "vpcs": {f"gd-{stack}-{i}": (None, [(f"gd-{stack}-{i}", f"192.168.{i}.0/24")]) for i in range(nics)},
        "firewalls": [f"gd-{stack}-{i}-internal" for i in range(nics)],
        "networks": [f"{stack}-{i}" for i in range(nics)],
        "nics": [(f"gd-{stack}-{i}", f"gd-{stack}-{i}") for i in range(nics)],
    }


#: A3 Ultra and A4: the second gVNIC's VPC (a firewall rule, 192.168.64.0/18) and the RoCE VPC, eight /21 subnets of
#: 192.168.128.0/18, its zone's network profile, no firewall rule.
RDMA = {
    "vpcs": {
        "gd-rdma-gvnic": (None, [("gd-rdma-gvnic", "192.168.64.0/18")]),
        "gd-rdma": (ROCE, [(f"gd-rdma-{i}", f"192.168.{128 + 8 * i}.0/21") for i in range(8)]),
    },
    "firewalls": ["gd-rdma-gvnic-internal"],
    "networks": ["rdma-gvnic", *(f"rdma-{i}" for i in range(8))],
    "nics": [("gd-rdma-gvnic", "gd-rdma-gvnic"), *(("gd-rdma", f"gd-rdma-{i}") for i in range(8))],
}

#: machine -> (GPU type, MTU, what its stack creates, its installers)
MACHINES: dict[str, tuple[str, int, dict[str, Any], list[str]]] = {
    "a3-high": ("h100-80gb", 8244, tcp_like("tcpx", 4), ["nccl-tcpx-installer", "device-injector"]),
    "a3-mega": ("h100-mega-80gb", 8896, tcp_like("tcpxo", 8), ["nccl-tcpxo-installer", "device-injector"]),
    "a3-ultra": ("h200-141gb", 8896, RDMA, ["nccl-rdma-installer"]),
    "a4": ("b200", 8896, RDMA, ["nccl-rdma-installer"]),
}
INSTALLER_FILES = {
    "nccl-tcpx-installer": "gpudirect-tcpx/nccl-tcpx-installer.yaml",
    "nccl-tcpxo-installer": "gpudirect-tcpxo/nccl-tcpxo-installer.yaml",
    "nccl-rdma-installer": "gpudirect-rdma/nccl-rdma-installer.yaml",
    "device-injector": "nri_device_injector/nri-device-injector.yaml",
}


def gpu_stack(path: Path, gpu: str, network: str = "auto", nodes: int = 2, name: str = "gd") -> Path:
    return write_stack(
        path,
        f"""
        cluster = Cluster(name="{name}", node_pools=[NodePool("gpu", GPU("{gpu}", 8, network="{network}"))],
                          jobs=[JaxJob("train", image="i", node_pool="gpu", nodes={nodes})])
    """,
        name=f"{name}_{gpu.replace('-', '_')}_{network}_{nodes}",
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    folder = tmp_path_factory.mktemp("gpudirect")
    return {m: run_program({"jaxinfra:stack": str(gpu_stack(folder, gpu)), **GKE}) for m, (gpu, *_) in MACHINES.items()}


def kind(r: Any) -> str:
    return r.type.rpartition(":")[2]


def annotations(obj: Any) -> Iterator[dict[str, str]]:
    """Every `annotations` map in a rendered object (the pod template's, wherever the backend nests it)."""
    if isinstance(obj, dict):
        if isinstance(obj.get("annotations"), dict):
            yield obj["annotations"]
        for v in obj.values():
            yield from annotations(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from annotations(v)


def pod_interfaces(run: Run) -> list[dict[str, str]]:
    """The `networking.gke.io/interfaces` of the workload's pods, as Pulumi sends the rendered workload."""
    [workload] = [r for r in run.k8s if kind(r) == "JobSet"]
    [value] = [a[gpudirect.INTERFACES] for a in annotations(workload.inputs["spec"]) if gpudirect.INTERFACES in a]
    return json.loads(value)


MACHINE_IDS = list(MACHINES)


# --- the cloud: VPCs, subnets, firewall rules ------------------------------------------------------------------------


@pytest.mark.parametrize("machine", MACHINE_IDS)
def test_the_gpu_vpcs_their_subnets_and_firewall_rules(runs: dict[str, Run], machine: str) -> None:
    run = runs[machine]
    _, mtu, want, _ = MACHINES[machine]
    nets = {r.name: r for r in run.of(NETWORK_T)}
    assert sorted(nets) == sorted(want["vpcs"]), "one Network per VPC, names explicit"
    for name, (profile, subnets) in want["vpcs"].items():
        net = nets[name]
        assert net.parent == ("jaxinfra:index:Cluster", "gd")
        expected = {"name": name, "project": "proj", "autoCreateSubnetworks": False, "mtu": mtu}
        assert net.inputs == ({**expected, "networkProfile": profile} if profile else expected), name
        for sub, cidr in subnets:
            s = run.one(SUBNET_T, sub)
            assert s.inputs == {
                "name": sub,
                "project": "proj",
                "region": "us-east5",
                "network": name,
                "ipCidrRange": cidr,
            }
            assert net.key in s.deps
    assert sorted(r.name for r in run.of(SUBNET_T)) == sorted(s for _, subs in want["vpcs"].values() for s, _ in subs)
    rules = {r.name: r for r in run.of(FIREWALL_T)}
    assert sorted(rules) == sorted(want["firewalls"]), "a rule per non-RDMA VPC: RDMA traffic bypasses the VPC firewall"
    for name, rule in rules.items():
        vpc = name.removesuffix("-internal")
        assert rule.inputs == {
            "name": name,
            "project": "proj",
            "network": vpc,
            "allows": [
                {"protocol": "tcp", "ports": ["0-65535"]},
                {"protocol": "udp", "ports": ["0-65535"]},
                {"protocol": "icmp"},
            ],
            "sourceRanges": ["192.168.0.0/16"],
        }
        assert (NETWORK_T, vpc) in rule.deps


# --- the cluster and the pool ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("machine", MACHINE_IDS)
def test_the_cluster_has_multi_networking_on_dataplane_v2(runs: dict[str, Run], machine: str) -> None:
    [gke] = runs[machine].of(GKE_T)
    assert (gke.inputs["enableMultiNetworking"], gke.inputs["datapathProvider"], gke.inputs["networkingMode"]) == (
        True,
        "ADVANCED_DATAPATH",
        "VPC_NATIVE",
    )


@pytest.mark.parametrize("machine", MACHINE_IDS)
def test_the_pool_has_gvnic_its_extra_nics_in_order_and_compact_placement(runs: dict[str, Run], machine: str) -> None:
    run = runs[machine]
    _, _, want, _ = MACHINES[machine]
    pool = run.pools["gpu"]
    assert pool.inputs["nodeCount"] == 2
    assert pool.inputs["networkConfig"] == {
        "additionalNodeNetworkConfigs": [{"network": vpc, "subnetwork": sub} for vpc, sub in want["nics"]]
    }
    assert pool.inputs["nodeConfig"]["gvnic"] == {"enabled": True}
    assert pool.inputs["placementPolicy"] == {"type": "COMPACT"}
    assert pool.inputs["maxPodsPerNode"] == 32  # xpk's and cluster-toolkit's
    assert {(SUBNET_T, sub) for _, sub in want["nics"]} <= pool.deps, "after its subnets"
    assert "gvnic" not in run.one(POOL_T, "system").inputs["nodeConfig"], "only the GPUDirect pools"


# --- in the cluster: the Network objects, and the cross-check with the pods ------------------------------------------


@pytest.mark.parametrize("machine", MACHINE_IDS)
def test_the_network_objects_after_the_cluster_and_pools(runs: dict[str, Run], machine: str) -> None:
    run = runs[machine]
    _, _, want, _ = MACHINES[machine]
    assert (
        sorted(r.name for r in run.of(GKE_NET)) == sorted(r.name for r in run.of(PARAM_SET)) == sorted(want["networks"])
    )
    for name, (vpc, sub) in zip(want["networks"], want["nics"], strict=True):
        params, net = run.one(PARAM_SET, name), run.one(GKE_NET, name)
        rdma = sub.startswith("gd-rdma-") and sub != "gd-rdma-gvnic"
        assert params.inputs["spec"] == {"vpc": vpc, "vpcSubnet": sub, "deviceMode": "RDMA" if rdma else "NetDevice"}
        assert net.inputs["spec"] == {
            "type": "Device",
            "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": name},
        }
        for r in (params, net):
            assert r.provider == ("pulumi:providers:kubernetes", "gd-k8s") and r.parent == (
                "jaxinfra:index:Cluster",
                "gd",
            )
            assert {(GKE_T, "gd"), (POOL_T, "gpu"), (SUBNET_T, sub)} <= r.deps


@pytest.mark.parametrize("machine", MACHINE_IDS)
def test_every_interface_of_the_pods_is_a_created_network_on_its_nic(runs: dict[str, Run], machine: str) -> None:
    """The issue's cross-check: the rendered pods' interfaces name Network objects, their GKENetworkParamSets name
    VPCs and subnets that `pulumi up` creates, and interface ethN is on the pool's N-th additional node network."""
    run = runs[machine]
    interfaces = pod_interfaces(run)
    assert interfaces[0] == {"interfaceName": "eth0", "network": "default"}
    assert len(interfaces) == 1 + (4 if machine == "a3-high" else 8), "one per GPU NIC"
    nets = {r.name: r for r in run.of(GKE_NET)}
    params = {r.name: r for r in run.of(PARAM_SET)}
    vpcs = {r.name for r in run.of(NETWORK_T)}
    subnets = {r.name: r.inputs["network"] for r in run.of(SUBNET_T)}
    nics = run.pools["gpu"].inputs["networkConfig"]["additionalNodeNetworkConfigs"]
    for i in interfaces[1:]:
        ref = nets[i["network"]].inputs["spec"]["parametersRef"]
        spec = params[ref["name"]].inputs["spec"]
        assert spec["vpc"] in vpcs and subnets[spec["vpcSubnet"]] == spec["vpc"], i
        n = int(i["interfaceName"].removeprefix("eth"))
        assert nics[n - 1] == {"network": spec["vpc"], "subnetwork": spec["vpcSubnet"]}, i
    [workload] = [r for r in run.k8s if kind(r) == "JobSet"]
    assert {(GKE_NET, i["network"]) for i in interfaces[1:]} <= workload.deps, "the job after the networks it names"


# --- the installers --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("machine", MACHINE_IDS)
def test_the_installers_after_the_pools_before_the_job(runs: dict[str, Run], machine: str) -> None:
    run = runs[machine]
    _, _, _, names = MACHINES[machine]
    assert sorted(r.name for r in run.of(INSTALLER_T)) == sorted(names)
    files = run.of(CONFIG_FILE_T)
    assert sorted((f.name, f.parent) for f in files) == sorted((n, (INSTALLER_T, n)) for n in names)
    [workload] = [r for r in run.k8s if kind(r) == "JobSet"]
    for f in files:
        assert f.inputs == {"file": f"{CEA}/{INSTALLER_FILES[f.name]}"}, (
            "pinned at one container-engine-accelerators commit"
        )
        assert f.provider == ("pulumi:providers:kubernetes", "gd-k8s")
        assert {(GKE_T, "gd"), (POOL_T, "gpu"), (POOL_T, "system")} <= f.deps, "after the nodes"
        assert f.key in workload.deps, "before the job"
    assert all(f.key not in r.deps for f in files for r in run.k8s if kind(r) in ("Network", "GKENetworkParamSet"))


def test_two_stacks_share_the_device_injector_and_never_a_name(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        """
        cluster = Cluster(name="mix", node_pools=[NodePool("high", GPU("h100-80gb", 8)),
                                                  NodePool("mega", GPU("h100-mega-80gb", 8))],
                          jobs=[JaxJob("a", image="i", node_pool="high", nodes=2),
                                JaxJob("b", image="i", node_pool="mega", nodes=2)])
    """,
    )
    run = run_program({"jaxinfra:stack": str(path), **GKE})
    assert [i.name for i in releases.installers(plan(stack.load(path)))] == [
        "nccl-tcpx-installer",
        "device-injector",
        "nccl-tcpxo-installer",
    ], "in the stacks' order, each once"
    assert sorted(r.name for r in run.of(INSTALLER_T)) == [
        "device-injector",
        "nccl-tcpx-installer",
        "nccl-tcpxo-installer",
    ]
    assert len(run.of(NETWORK_T)) == len({r.name for r in run.of(NETWORK_T)}) == 12
    assert len({r.name for r in run.of(FIREWALL_T)}) == 12
    pools = run.pools
    assert [n["network"] for n in pools["high"].inputs["networkConfig"]["additionalNodeNetworkConfigs"]] == [
        f"mix-tcpx-{i}" for i in range(4)
    ]
    assert [n["network"] for n in pools["mega"].inputs["networkConfig"]["additionalNodeNetworkConfigs"]] == [
        f"mix-tcpxo-{i}" for i in range(8)
    ]
    workloads = {r.name: r for r in run.k8s if kind(r) == "JobSet"}
    assert (GKE_NET, "tcpx-0") in workloads["default/a"].deps and (GKE_NET, "tcpxo-0") not in workloads[
        "default/a"
    ].deps
    assert (CONFIG_FILE_T, "nccl-tcpxo-installer") in workloads["default/b"].deps
    assert (CONFIG_FILE_T, "device-injector") in workloads["default/b"].deps


# --- none of it without GPUDirect ------------------------------------------------------------------------------------


def assert_no_gpudirect(run: Run) -> None:
    assert not run.of(NETWORK_T) and not run.of(SUBNET_T) and not run.of(FIREWALL_T)
    assert not run.of(INSTALLER_T) and not run.of(GKE_NET) and not run.of(PARAM_SET)
    [gke] = run.of(GKE_T)
    assert not {"enableMultiNetworking", "networkingMode"} & set(gke.inputs), "the cluster as without GPUs"
    for pool in run.of(POOL_T):
        assert "networkConfig" not in pool.inputs and "gvnic" not in pool.inputs["nodeConfig"], pool.name


@pytest.mark.parametrize("machine", MACHINE_IDS)
def test_standard_network_creates_none_of_it(tmp_path: Path, machine: str) -> None:
    run = run_program({"jaxinfra:stack": str(gpu_stack(tmp_path, MACHINES[machine][0], network="standard")), **GKE})
    assert_no_gpudirect(run)
    assert "placementPolicy" not in run.pools["gpu"].inputs
    assert all(gpudirect.INTERFACES not in a for r in run.k8s for a in annotations(r.inputs))


def test_spot_gpudirect_nodes_are_not_compactly_placed(tmp_path: Path) -> None:
    """xpk's blueprints place Spot capacity without a compact placement policy; the NICs and gVNIC stay."""
    stack = write_stack(
        tmp_path,
        """
        cluster = Cluster(name="gd", node_pools=[NodePool("gpu", GPU("h100-mega-80gb", 8), spot=True)],
                          jobs=[JaxJob("train", image="i", node_pool="gpu", nodes=2)])
    """,
        name="gd_spot",
    )
    pool = run_program({"jaxinfra:stack": str(stack), **GKE}).pools["gpu"]
    assert "placementPolicy" not in pool.inputs
    assert len(pool.inputs["networkConfig"]["additionalNodeNetworkConfigs"]) == 8
    assert pool.inputs["nodeConfig"]["gvnic"] == {"enabled": True}


@pytest.mark.parametrize("config", ["tpu-v5p", "l4"])
def test_a_cluster_without_gpudirect_pools_is_unchanged(tmp_path: Path, config: str) -> None:
    if config == "l4":  # a GPU without GPUDirect (g2-standard)
        path = write_stack(
            tmp_path,
            """
            cluster = Cluster(name="l4", node_pools=[NodePool("l4", GPU("l4", 1))],
                              jobs=[JaxJob("t", image="i", node_pool="l4", nodes=2)])
        """,
        )
        run = run_program({"jaxinfra:stack": str(path), **GKE})
    else:
        run = run_program(root_config(config))
    assert_no_gpudirect(run)
    [gke] = run.of(GKE_T)
    assert gke.inputs["datapathProvider"] == "ADVANCED_DATAPATH", "jaxinfra:networkPolicy's default, as before"


def test_a_single_node_job_needs_no_gpu_network_but_its_pool_has_them(tmp_path: Path) -> None:
    run = run_program({"jaxinfra:stack": str(gpu_stack(tmp_path, "h100-mega-80gb", nodes=1)), **GKE})
    assert len(run.pools["gpu"].inputs["networkConfig"]["additionalNodeNetworkConfigs"]) == 8
    [workload] = [r for r in run.k8s if kind(r) == "JobSet"]
    assert not [a for a in annotations(workload.inputs) if gpudirect.INTERFACES in a], "NVLink: one node's GPUs"
    assert not [d for d in workload.deps if d and d[0] in (GKE_NET, CONFIG_FILE_T)]


# --- config and existing clusters ------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["calico", "none"])
def test_gpudirect_on_a_created_cluster_needs_dataplane_v2(tmp_path: Path, policy: str) -> None:
    text, run = run_error(
        {"jaxinfra:stack": str(gpu_stack(tmp_path, "h200-141gb")), **GKE, "jaxinfra:networkPolicy": policy}
    )
    assert text.splitlines()[0] == "1 problem (invalid Pulumi config)", text
    assert f"jaxinfra:networkPolicy = '{policy}': GPU pools gpu get GPUDirect (GPUDirect RDMA (RoCE, gIB))" in text
    assert ("cannot run beside Calico" in text) == (policy == "calico")
    assert "fix: unset jaxinfra:networkPolicy (dataplaneV2), or GPU(..., network='standard')" in text
    assert not run.resources


def test_an_existing_cluster_gets_the_networks_under_its_own_name_and_is_checked(tmp_path: Path) -> None:
    config = {
        "jaxinfra:stack": str(gpu_stack(tmp_path, "h100-80gb")),
        **GKE,
        "jaxinfra:existingCluster": True,
        "jaxinfra:clusterName": "shared",
    }
    ready = {**SECURE_CLUSTER, "enableMultiNetworking": True}
    run = run_program(config, existing=ready)
    assert not run.warnings, run.warnings
    assert not run.of(GKE_T) and sorted(r.name for r in run.of(NETWORK_T)) == [f"shared-tcpx-{i}" for i in range(4)]
    assert run.one(PARAM_SET, "tcpx-0").inputs["spec"]["vpc"] == "shared-tcpx-0", (
        "the GKE cluster's name, not the stack's"
    )
    assert run.pools["gpu"].inputs["networkConfig"]["additionalNodeNetworkConfigs"][0] == {
        "network": "shared-tcpx-0",
        "subnetwork": "shared-tcpx-0",
    }
    warnings = run_program(config, existing={**SECURE_CLUSTER, "datapathProvider": "LEGACY_DATAPATH"}).warnings
    [gap] = [w for w in warnings if "GPUDirect" in w]
    assert gap.startswith("GKE cluster shared has no multi-networking and Dataplane V2, which the GPUDirect pools'")
    assert "--enable-ip-alias --enable-dataplane-v2 --enable-multi-networking" in gap
    [gap] = run_program(config, existing=SECURE_CLUSTER).warnings
    assert gap.startswith("GKE cluster shared has no multi-networking, which")


def test_what_the_cluster_must_have_when_jaxinfra_does_not_give_it(tmp_path: Path) -> None:
    path = gpu_stack(tmp_path, "h100-mega-80gb")
    run = run_program({"jaxinfra:stack": str(path), **GKE, "jaxinfra:installControllers": False})
    assert not run.of(INSTALLER_T) and run.of(NETWORK_T), "the networks are jaxinfra's; the installers are not"
    [installers] = [w for w in run.warnings if "GPUDirect" in w]
    assert installers.startswith(
        "jaxinfra:installControllers is false: the GPUDirect nodes need the DaemonSets nccl-tcpxo-installer, "
        f"device-injector (`kubectl apply -f` each of {CEA}/gpudirect-tcpxo/nccl-tcpxo-installer.yaml "
        f"{CEA}/nri_device_injector/nri-device-injector.yaml)"
    )
    run = run_program({"jaxinfra:stack": str(path), **EXISTING})
    assert not [r for r in run.resources if r.type.startswith("gcp:")]
    assert sorted(r.name for r in run.of(GKE_NET)) == [f"tcpxo-{i}" for i in range(8)], (
        "the rendered objects, as synth's"
    )
    assert run.one(PARAM_SET, "tcpxo-0").inputs["spec"]["vpc"] == "gd-tcpxo-0"
    [network] = [w for w in run.warnings if w.startswith("GPUDirect-TCPXO:")]
    assert network.startswith(
        "GPUDirect-TCPXO: the cluster needs GKE multi-networking and Dataplane V2, and the GPU nodes the additional "
        "node networks (VPC/subnet, in NIC order) gd-tcpxo-0/gd-tcpxo-0, gd-tcpxo-1/gd-tcpxo-1,"
    )
    assert any(w.startswith("jaxinfra:installControllers is false: the GPUDirect nodes need") for w in run.warnings)
