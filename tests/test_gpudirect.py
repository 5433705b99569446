"""GPU pools at full network speed: each A3/A4 machine type's GPUDirect stack in the manifests, compared field by field
with what xpk renders for the same machine, strictly valid, snapshotted; opting out; Pod Security; explain."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jaxinfra import GPU, Cluster, JaxJob, NodePool, SpecError, manifests
from jaxinfra.explain import facts
from jaxinfra.plan import plan
from jaxinfra.validate import validate_objects
from jaxinfra.yamlio import dump

pytestmark = pytest.mark.unit

NVIDIA = [f"/dev/nvidia{i}" for i in range(8)] + ["/dev/nvidiactl", "/dev/nvidia-uvm"]

#: What xpk renders into a GPU workload's pods per machine type: facts read from AI-Hypercomputer/xpk @ 367c8382
#: src/xpk/core/workload_decorators/tcpx_decorator.py (A3 High), tcpxo_decorator.py (A3 Mega), rdma_decorator.py
#: (A3 Ultra, A4): each `add_volumes`, `update_gpu_containers`, `add_*_daemon_container`, `add_annotations`. Written
#: out here, not read from jaxinfra.gpudirect, so that a wrong fact there fails.
XPK: dict[str, dict[str, Any]] = {
    "h100-80gb": {
        "machine": "a3-highgpu-8g",
        "gpu_nics": 4,
        "first": 1,
        "volumes": {
            "libraries": "/home/kubernetes/bin/nvidia/lib64",
            "sys": "/sys",
            "proc-sys": "/proc/sys",
            "tcpx-socket": "/run/tcpx",
        },
        "mounts": {"libraries": "/usr/local/nvidia/lib64", "tcpx-socket": "/tmp"},
        "env": {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"},
        "daemon": {
            "name": "tcpx-daemon",
            "image": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.11",
            "command": [
                "/tcpgpudmarxd/build/app/tcpgpudmarxd",
                "--gpu_nic_preset",
                "a3vm",
                "--gpu_shmem_type",
                "fd",
                "--uds_path",
                "/run/tcpx",
                "--setup_param",
                '"--verbose 128 2 0 "',
            ],
            "args": None,
            "add": ["NET_ADMIN"],
            "mounts": {
                "libraries": "/usr/local/nvidia/lib64",
                "tcpx-socket": "/run/tcpx",
                "sys": "/hostsysfs",
                "proc-sys": "/hostprocsysfs",
            },
            "devices": NVIDIA,
        },
    },
    "h100-mega-80gb": {
        "machine": "a3-megagpu-8g",
        "gpu_nics": 8,
        "first": 1,
        "volumes": {
            "libraries": "/home/kubernetes/bin/nvidia",
            "sys": "/sys",
            "proc-sys": "/proc/sys",
            "aperture-devices": "/dev/aperture_devices",
        },
        "mounts": {"aperture-devices": "/dev/aperture_devices", "libraries": "/usr/local/nvidia"},
        "env": {
            "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64",
            "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY": "/dev/aperture_devices",
        },
        "daemon": {
            "name": "tcpxo-daemon",
            "image": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.12",
            "command": ["/bin/sh", "-c"],
            "args": [
                "set -ex\nchmod 755 /fts/entrypoint_rxdm_container.sh\n"
                "/fts/entrypoint_rxdm_container.sh --num_hops=2 --num_nics=8 --uid= --alsologtostderr"
            ],
            "add": ["NET_ADMIN", "NET_BIND_SERVICE"],
            "mounts": {"libraries": "/usr/local/nvidia", "sys": "/hostsysfs", "proc-sys": "/hostprocsysfs"},
            "devices": [*NVIDIA, "/dev/dmabuf_import_helper"],
        },
    },
    **{
        gpu: {
            "machine": machine,
            "gpu_nics": 8,
            "first": 2,  # container-engine-accelerators @ 992db812 gpudirect-rdma/nccl-test.yaml: eth2..eth9
            "volumes": {"library-dir-host": "/home/kubernetes/bin/nvidia", "gib": "/home/kubernetes/bin/gib"},
            "mounts": {"library-dir-host": "/usr/local/nvidia", "gib": "/usr/local/gib"},
            "env": {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"},
            "daemon": None,
        }
        for gpu, machine in (("h200-141gb", "a3-ultragpu-8g"), ("b200", "a4-highgpu-8g"))
    },
}


def two_nodes(gpu: str, **pool: Any) -> Cluster:
    return Cluster(
        name="gpus",
        node_pools=[NodePool("gpu", GPU(gpu, 8, **pool))],
        jobs=[JaxJob("train", image="img", command=["python", "-m", "train"], node_pool="gpu", nodes=2)],
    )


def pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    [js] = [o for o in objects if o["kind"] == "JobSet"]
    template: dict[str, Any] = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    return template


@pytest.mark.parametrize("gpu", sorted(XPK))
def test_the_pods_carry_what_xpk_renders_for_the_machine(gpu: str) -> None:
    xpk = XPK[gpu]
    objects = manifests(two_nodes(gpu))
    template = pod(objects)
    spec, annotations = template["spec"], template["metadata"]["annotations"]
    [main] = spec["containers"]
    assert plan(two_nodes(gpu)).jobs[0].accel.machine_type == xpk["machine"]
    # multi-networking: eth0 on the default network, then one interface per GPU NIC, each a Network that exists
    assert annotations["networking.gke.io/default-interface"] == "eth0"
    interfaces = json.loads(annotations["networking.gke.io/interfaces"])
    assert interfaces[0] == {"interfaceName": "eth0", "network": "default"}
    assert [i["interfaceName"] for i in interfaces[1:]] == [f"eth{xpk['first'] + n}" for n in range(xpk["gpu_nics"])]
    networks = {o["metadata"]["name"] for o in objects if o["kind"] == "Network"}
    assert {i["network"] for i in interfaces[1:]} <= networks
    # the host volumes and where the training container sees them; /dev/shm memory-backed as before
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert {n: v["hostPath"]["path"] for n, v in volumes.items() if "hostPath" in v} == xpk["volumes"]
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    mounts = {m["name"]: m["mountPath"] for m in main["volumeMounts"]}
    assert mounts == {"dshm": "/dev/shm", **xpk["mounts"]}
    env = {e["name"]: e.get("value") for e in main["env"]}
    assert {k: env.get(k) for k in xpk["env"]} == xpk["env"]
    assert {"key": "user-workload", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in spec["tolerations"]
    daemon = xpk["daemon"]
    if daemon is None:
        assert "initContainers" not in spec and not [k for k in annotations if k.startswith("devices.gke.io/")]
        return
    [sidecar] = spec["initContainers"]
    assert (sidecar["name"], sidecar["image"], sidecar["restartPolicy"]) == (daemon["name"], daemon["image"], "Always")
    assert (sidecar["command"], sidecar.get("args")) == (daemon["command"], daemon["args"])
    assert sidecar["securityContext"]["capabilities"] == {"add": daemon["add"]}
    assert {m["name"]: m["mountPath"] for m in sidecar["volumeMounts"]} == daemon["mounts"]
    assert {e["name"]: e["value"] for e in sidecar["env"]} == {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}
    devices = annotations[f"devices.gke.io/container.{daemon['name']}"]
    assert [line.removeprefix("- path: ") for line in devices.splitlines()] == daemon["devices"]


@pytest.mark.parametrize("gpu", sorted(XPK))
def test_gpudirect_manifests_are_strictly_valid_and_snapshotted(gpu: str, yaml_snapshot: Any) -> None:
    objects = manifests(two_nodes(gpu))
    assert validate_objects(objects, source=gpu) == []
    assert dump(objects) == yaml_snapshot(name=f"gpudirect.{gpu}")


def test_each_network_object_names_its_vpc_and_subnet() -> None:
    """A3 Ultra: the second gVNIC's network beside the 8 RDMA ones, each GKENetworkParamSet naming the VPC and subnet
    the Pulumi component creates, the RDMA ones in RDMA mode."""
    objects = manifests(two_nodes("h200-141gb"))
    params = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "GKENetworkParamSet"}
    assert params["rdma-gvnic"] == {"vpc": "gpus-rdma-gvnic", "vpcSubnet": "gpus-rdma-gvnic", "deviceMode": "NetDevice"}
    assert params["rdma-3"] == {"vpc": "gpus-rdma", "vpcSubnet": "gpus-rdma-3", "deviceMode": "RDMA"}
    assert len(params) == 9
    refs = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Network"}
    assert refs.keys() == params.keys()
    assert all(r["type"] == "Device" and r["parametersRef"]["name"] == n for n, r in refs.items())


@pytest.mark.parametrize("cluster", ["standard", "one node", "older machine"])
def test_plain_pod_networking_where_there_is_no_stack_or_no_need(cluster: str) -> None:
    """network='standard' opts out; a one-node job uses NVLink only; an A2 node has no GPUDirect stack. None of
    their pods gets a host volume, a daemon or a multi-networking annotation; only the one-node job's pool still has
    its networks (its nodes have the NICs)."""
    c = {
        "standard": two_nodes("h100-80gb", network="standard"),
        "one node": Cluster(
            name="gpus",
            node_pools=[NodePool("gpu", GPU("h100-mega-80gb", 8))],
            jobs=[JaxJob("train", image="img", node_pool="gpu", nodes=1)],
        ),
        "older machine": two_nodes("a100-80gb"),
    }[cluster]
    objects = manifests(c)
    text = json.dumps(pod(objects))
    assert "hostPath" not in text and "networking.gke.io" not in text and "initContainers" not in text
    assert bool([o for o in objects if o["kind"] == "Network"]) == (cluster == "one node")
    expected = {"standard": "GPU(network='standard')", "one node": "NVLink", "older machine": "no GPUDirect stack"}
    assert expected[cluster] in dict(facts(plan(c).jobs[0]))["GPU network"]


def test_a_namespace_enforcing_restricted_refuses_a_gpudirect_job_with_both_fixes() -> None:
    with pytest.raises(SpecError) as err:
        Cluster(
            name="gpus",
            node_pools=[NodePool("gpu", GPU("h100-mega-80gb", 8))],
            jobs=[JaxJob("train", namespace="ml", image="img", node_pool="gpu", nodes=2)],
        )
    [problem] = err.value.problems
    assert problem.path == "jobs[0].node_pool" and "GPUDirect-TCPXO" in problem.message
    assert "tcpxo-daemon" in problem.message and "enforce=restricted" in problem.message
    assert "pod_security='privileged'" in problem.fix and "network='standard'" in problem.fix
    ok = Cluster(
        name="gpus",
        pod_security="privileged",
        node_pools=[NodePool("gpu", GPU("h100-mega-80gb", 8))],
        jobs=[JaxJob("train", namespace="ml", image="img", node_pool="gpu", nodes=2)],
    )
    [ns] = [o for o in manifests(ok) if o["kind"] == "Namespace"]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_explain_names_the_protocol_nics_and_bandwidth() -> None:
    text = dict(facts(plan(two_nodes("b200")).jobs[0]))["GPU network"]
    assert text.startswith("GPUDirect RDMA (RoCE, gIB): 8 x 400 Gbps NICs for GPU traffic (3200 Gbps per node")
    assert "MTU 8896" in text
    text = dict(facts(plan(two_nodes("h100-80gb")).jobs[0]))["GPU network"]
    assert "GPUDirect-TCPX: 4 x 200 Gbps" in text and "tcpx-daemon sidecar" in text


def test_a_jobs_own_env_wins_over_the_stacks() -> None:
    c = Cluster(
        name="gpus",
        node_pools=[NodePool("gpu", GPU("h100-80gb", 8))],
        jobs=[JaxJob("train", image="img", node_pool="gpu", nodes=2, env={"LD_LIBRARY_PATH": "/opt/lib"})],
    )
    env = [e for e in pod(manifests(c))["spec"]["containers"][0]["env"] if e["name"] == "LD_LIBRARY_PATH"]
    assert env == [{"name": "LD_LIBRARY_PATH", "value": "/opt/lib"}]
