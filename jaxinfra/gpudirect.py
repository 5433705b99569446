"""GKE's GPU-to-GPU networking stacks as data: which machine type gets which, and everything it needs.

A multi-node GPU job on plain pod networking has one NIC; A3 High nodes have 4 more NICs for GPU traffic
(GPUDirect-TCPX), A3 Mega 8 (GPUDirect-TCPXO), A3 Ultra and A4 8 RDMA NICs over RoCE (GPUDirect RDMA with
Google's gIB NCCL plugin). Each stack below says what the cloud (extra VPCs and subnets, their MTU), the cluster
(GKE `Network` and `GKENetworkParamSet` objects, the NCCL plugin installer DaemonSets) and the pod (interfaces
annotation, the GPUDirect daemon sidecar, its device annotation, env, host volumes) need. Render, explain and the
Pulumi component read this module; none hard-codes a fact of it.

Sources, facts only (names, paths, images, numbers):
- xpk, AI-Hypercomputer/xpk @ 367c8382 src/xpk/core/workload_decorators/{tcpx,tcpxo,rdma}_decorator.py (annotations,
  daemons, env, volumes), src/xpk/core/network.py (A3 High's 4 VPCs: MTU 8244, 192.168.<i>.0/24, the firewall rule
  and the Network/GKENetworkParamSet objects), src/xpk/core/blueprint/blueprint_generator.py (A3 Mega's 8 VPCs;
  A3 Ultra's and A4's gVNIC VPC and RoCE VPC: MTU 8896, the `<zone>-vpc-roce` network profile, 8 subnets of
  192.168.128.0/18), src/xpk/core/system_characteristics.py (the installers per machine type);
- GoogleCloudPlatform/container-engine-accelerators @ 992db812 gpudirect-tcpx/nccl-tcpx-installer.yaml,
  gpudirect-tcpxo/nccl-tcpxo-installer.yaml, gpudirect-rdma/nccl-rdma-installer.yaml,
  nri_device_injector/nri-device-injector.yaml (what they install where), gpudirect-rdma/nccl-test.yaml (RDMA
  pods: eth0 the default network, eth2..eth9 the RDMA networks `rdma-0`..`rdma-7`);
- GoogleCloudPlatform/cluster-toolkit @ 465b3271 (v1.94.0) modules/scheduler/gke-cluster (multi-networking with
  Dataplane V2; a GKENetworkParamSet's deviceMode RDMA for RDMA NICs, NetDevice otherwise; the default names
  `gvnic-1`, `rdma-<i>`);
- bandwidth: cloud.google.com/compute/docs/gpus/gpu-network-bandwidth and
  cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-tcpx.

Only the standard library is imported: this sits on the CLI's cold-start path, as the catalog does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CEA_COMMIT = "992db81257553607f1477945f1b3219632991829"
_CEA = f"https://raw.githubusercontent.com/GoogleCloudPlatform/container-engine-accelerators/{CEA_COMMIT}"
_XPK = "https://github.com/AI-Hypercomputer/xpk/blob/367c838253bea41e7d7716145ad6513f44c1a21e/src/xpk/core"

#: The GPU NICs' MTU GKE documents: 8244 for A3 High's VPCs (xpk network.py), 8896 for the others (cluster-toolkit's
#: VPC default, which xpk's blueprints keep).
MTU_TCPX, MTU_JUMBO = 8244, 8896
#: The pod annotations of GKE multi-networking (networking.gke.io) and of the NRI device injector (devices.gke.io).
DEFAULT_INTERFACE = "networking.gke.io/default-interface"
INTERFACES = "networking.gke.io/interfaces"
DEVICES = "devices.gke.io/container.{container}"
#: Pods per GPUDirect node, from which GKE sizes the node's pod range: xpk's and cluster-toolkit's (xpk @ 367c8382
#: src/xpk/core/nodepool.py `--max-pods-per-node=32`, src/xpk/core/blueprint/blueprint_generator.py).
PODS_PER_NODE = 32
#: The toleration every xpk decorator adds for GPUDirect pods' nodes.
USER_WORKLOAD_TOLERATION = {"key": "user-workload", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
NVIDIA_LIB = "/usr/local/nvidia/lib64"
NVIDIA_DEVICES = (*(f"/dev/nvidia{i}" for i in range(8)), "/dev/nvidiactl", "/dev/nvidia-uvm")

Network = Literal["auto", "standard"]


@dataclass(frozen=True)
class HostVolume:
    """A hostPath volume a stack's pods mount: where the daemon and the training container see it."""

    name: str
    host_path: str
    main: str | None = None  # its mount path in the training container, None: not mounted there
    daemon: str | None = None  # its mount path in the daemon


@dataclass(frozen=True)
class Installer:
    """A DaemonSet the cluster needs on these nodes (an NCCL plugin installer, the NRI device injector), by its
    manifest in container-engine-accelerators at a pinned commit."""

    name: str  # the DaemonSet, in kube-system
    manifest: str
    installs: str  # what it puts where, in words (explain)

    @property
    def url(self) -> str:
        return f"{_CEA}/{self.manifest}"


@dataclass(frozen=True)
class Daemon:
    """The GPUDirect daemon: a native sidecar (an init container with restartPolicy Always) beside the training
    container, given the GPU devices through the NRI device injector's annotation."""

    name: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ("NET_ADMIN",)
    devices: tuple[str, ...] = NVIDIA_DEVICES


@dataclass(frozen=True)
class Stack:
    """One GPUDirect stack: the machine types that have it and what each layer needs for it."""

    name: Literal["tcpx", "tcpxo", "rdma"]
    protocol: str
    machine_types: tuple[str, ...]
    nics: int  # NICs for GPU traffic per node
    nic_gbps: int
    node_gbps: int  # the machine type's whole network bandwidth, all NICs, as Compute Engine documents it
    mtu: int
    device_mode: Literal["NetDevice", "RDMA"]  # the GKENetworkParamSet's
    env: tuple[tuple[str, str], ...]
    volumes: tuple[HostVolume, ...]
    installers: tuple[Installer, ...]
    daemon: Daemon | None = None
    gvnic: bool = False  # a second gVNIC VPC on the nodes (A3 Ultra, A4), not attached to the pods
    source: str = ""

    @property
    def first_interface(self) -> int:
        """The pod's interface of the first GPU network: eth1, or eth2 where the node's second gVNIC is eth1."""
        return 2 if self.gvnic else 1

    @property
    def gbps(self) -> int:
        """GPU-to-GPU bandwidth per node."""
        return self.nics * self.nic_gbps

    def networks(self) -> tuple[str, ...]:
        """The in-cluster names of its GPU networks (`Network` and `GKENetworkParamSet` objects), the pods' eth1...
        (or eth2...) in order."""
        return tuple(f"{self.name}-{i}" for i in range(self.nics))

    def interfaces(self) -> list[dict[str, str]]:
        """The pod's `networking.gke.io/interfaces`: eth0 on the cluster's default network, then one per GPU NIC."""
        gpu = [{"interfaceName": f"eth{self.first_interface + i}", "network": n} for i, n in enumerate(self.networks())]
        return [{"interfaceName": "eth0", "network": "default"}, *gpu]

    @property
    def summary(self) -> str:
        """In words, for explain."""
        return (
            f"{self.protocol}: {self.nics} x {self.nic_gbps} Gbps NICs for GPU traffic ({self.gbps} Gbps per node; "
            f"{self.node_gbps} Gbps with the other NICs), MTU {self.mtu}"
        )


_NRI = Installer(
    "device-injector",
    "nri_device_injector/nri-device-injector.yaml",
    "the NRI device injector, which gives a container the devices its devices.gke.io annotation names",
)
_SYS = (
    HostVolume("sys", "/sys", daemon="/hostsysfs"),
    HostVolume("proc-sys", "/proc/sys", daemon="/hostprocsysfs"),
)

TCPX = Stack(
    "tcpx",
    "GPUDirect-TCPX",
    ("a3-highgpu-8g",),
    nics=4,
    nic_gbps=200,
    node_gbps=1000,
    mtu=MTU_TCPX,
    device_mode="NetDevice",
    env=(("LD_LIBRARY_PATH", NVIDIA_LIB),),
    volumes=(
        HostVolume("libraries", "/home/kubernetes/bin/nvidia/lib64", main=NVIDIA_LIB, daemon=NVIDIA_LIB),
        *_SYS,
        HostVolume("tcpx-socket", "/run/tcpx", main="/tmp", daemon="/run/tcpx"),
    ),
    installers=(
        Installer(
            "nccl-tcpx-installer",
            "gpudirect-tcpx/nccl-tcpx-installer.yaml",
            "the GPUDirect-TCPX NCCL plugin, in /home/kubernetes/bin/nvidia/lib64",
        ),
        _NRI,
    ),
    daemon=Daemon(
        "tcpx-daemon",
        "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.11",
        (
            "/tcpgpudmarxd/build/app/tcpgpudmarxd",
            "--gpu_nic_preset",
            "a3vm",
            "--gpu_shmem_type",
            "fd",
            "--uds_path",
            "/run/tcpx",
            "--setup_param",
            '"--verbose 128 2 0 "',
        ),
    ),
    source=f"{_XPK}/workload_decorators/tcpx_decorator.py ; {_XPK}/network.py",
)

TCPXO = Stack(
    "tcpxo",
    "GPUDirect-TCPXO",
    ("a3-megagpu-8g",),
    nics=8,
    nic_gbps=200,
    node_gbps=1800,
    mtu=MTU_JUMBO,
    device_mode="NetDevice",
    env=(("LD_LIBRARY_PATH", NVIDIA_LIB), ("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "/dev/aperture_devices")),
    volumes=(
        HostVolume("libraries", "/home/kubernetes/bin/nvidia", main="/usr/local/nvidia", daemon="/usr/local/nvidia"),
        *_SYS,
        HostVolume("aperture-devices", "/dev/aperture_devices", main="/dev/aperture_devices"),
    ),
    installers=(
        Installer(
            "nccl-tcpxo-installer",
            "gpudirect-tcpxo/nccl-tcpxo-installer.yaml",
            "the GPUDirect-TCPXO NCCL plugin, in /home/kubernetes/bin/nvidia/lib64, and /dev/aperture_devices",
        ),
        _NRI,
    ),
    daemon=Daemon(
        "tcpxo-daemon",
        "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.12",
        ("/bin/sh", "-c"),
        (
            "set -ex\nchmod 755 /fts/entrypoint_rxdm_container.sh\n"
            "/fts/entrypoint_rxdm_container.sh --num_hops=2 --num_nics=8 --uid= --alsologtostderr",
        ),
        capabilities=("NET_ADMIN", "NET_BIND_SERVICE"),
        devices=(*NVIDIA_DEVICES, "/dev/dmabuf_import_helper"),
    ),
    source=f"{_XPK}/workload_decorators/tcpxo_decorator.py ; {_XPK}/blueprint/blueprint_generator.py",
)

RDMA = Stack(
    "rdma",
    "GPUDirect RDMA (RoCE, gIB)",
    ("a3-ultragpu-8g", "a4-highgpu-8g"),
    nics=8,
    nic_gbps=400,
    node_gbps=3600,
    mtu=MTU_JUMBO,
    device_mode="RDMA",
    env=(("LD_LIBRARY_PATH", NVIDIA_LIB),),
    volumes=(
        HostVolume("library-dir-host", "/home/kubernetes/bin/nvidia", main="/usr/local/nvidia"),
        HostVolume("gib", "/home/kubernetes/bin/gib", main="/usr/local/gib"),
    ),
    installers=(
        Installer(
            "nccl-rdma-installer",
            "gpudirect-rdma/nccl-rdma-installer.yaml",
            "the gIB NCCL plugin, in /home/kubernetes/bin/nvidia/lib64 and /home/kubernetes/bin/gib",
        ),
    ),
    gvnic=True,
    source=f"{_XPK}/workload_decorators/rdma_decorator.py ; {_XPK}/blueprint/blueprint_generator.py",
)

STACKS: tuple[Stack, ...] = (TCPX, TCPXO, RDMA)


def for_machine(machine_type: str | None) -> Stack | None:
    """The stack GKE gives this machine type's GPU traffic; None: plain pod networking."""
    return next((s for s in STACKS if machine_type in s.machine_types), None)


def for_job(pool_stack: Stack | None, nodes: int) -> Stack | None:
    """A job's stack: its pool's, for a job of more than one node (one node's GPUs talk over NVLink, and the stack's
    host volumes and daemon would buy it nothing but privileges)."""
    return pool_stack if nodes > 1 else None


def subnet_range(stack: Stack, i: int) -> str:
    """The CIDR of GPU network `i`: 192.168.<i>.0/24 each on TCPX/TCPXO; /21s of 192.168.128.0/18 on RDMA (the
    `cidrsubnet(range, 3, i)` of cluster-toolkit's gpu-rdma-vpc)."""
    return f"192.168.{128 + 8 * i}.0/21" if stack.device_mode == "RDMA" else f"192.168.{i}.0/24"


#: RDMA's second gVNIC: a VPC of its own on the nodes (cluster-toolkit's `gvnic-1`), 192.168.64.0/18.
GVNIC_NETWORK, GVNIC_RANGE = "rdma-gvnic", "192.168.64.0/18"
#: The firewall rule's source on each non-RDMA GPU VPC (xpk's `<cluster>-internal-<i>`): the GPU subnets' range.
GPU_SOURCE_RANGE = "192.168.0.0/16"


@dataclass(frozen=True)
class Vpc:
    """One VPC the stack's nodes need, with its subnets (name, CIDR). `rdma`: the zone's RoCE network profile and no
    firewall rule (RDMA traffic does not pass the VPC firewall: cloud.google.com/vpc/docs/rdma-network-profiles)."""

    name: str
    subnets: tuple[tuple[str, str], ...]
    rdma: bool = False


@dataclass(frozen=True)
class NodeNetwork:
    """One extra NIC of a node, in order (eth1, eth2, ...): its in-cluster network, the VPC and subnet behind it."""

    name: str  # the Network and GKENetworkParamSet
    vpc: str
    subnet: str
    device_mode: str


def vpcs(stack: Stack, gke_cluster: str) -> tuple[Vpc, ...]:
    """The VPCs of a stack on the GKE cluster `gke_cluster`: one per GPU NIC on TCPX/TCPXO; on RDMA the second gVNIC's
    VPC and one RoCE VPC with a subnet per RDMA NIC (cluster-toolkit's gpu-rdma-vpc)."""
    name = f"{gke_cluster}-{GVNIC_NETWORK}"
    gvnic = (Vpc(name, ((name, GVNIC_RANGE),)),) if stack.gvnic else ()
    subnets = tuple((f"{gke_cluster}-{n}", subnet_range(stack, i)) for i, n in enumerate(stack.networks()))
    if stack.device_mode == "RDMA":
        return (*gvnic, Vpc(f"{gke_cluster}-{stack.name}", subnets, rdma=True))
    return (*gvnic, *(Vpc(subnet[0], (subnet,)) for subnet in subnets))


def node_networks(stack: Stack, gke_cluster: str) -> tuple[NodeNetwork, ...]:
    """A node's extra NICs in order, each with its network: the pool's additional node networks and the cluster's
    Network objects both come from here, so the pods' interfaces name networks that exist."""
    names = ((GVNIC_NETWORK,) if stack.gvnic else ()) + stack.networks()
    subnets = [(v, name) for v in vpcs(stack, gke_cluster) for name, _ in v.subnets]
    return tuple(
        NodeNetwork(n, vpc.name, subnet, "RDMA" if vpc.rdma else "NetDevice")
        for n, (vpc, subnet) in zip(names, subnets, strict=True)
    )
