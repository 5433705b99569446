"""The GPUDirect pools' networks in the cloud: per VPC of a stack (`gpudirect.vpcs`) a `gcp.compute.Network`, its
`gcp.compute.Subnetwork`s and, unless it is the RoCE VPC, a `gcp.compute.Firewall` between the GPU NICs; and a node
pool's extra NICs on them (`gpudirect.node_networks`, in NIC order).

Every name and number comes from `jaxinfra.gpudirect`: the pools' additional node networks here and the cluster's
`Network`/`GKENetworkParamSet` objects (`render.gpudirect.network_objects`) read the same list, so the pods' interfaces
name networks whose VPCs and subnets exist. What each VPC gets follows xpk @ 367c8382 src/xpk/core/network.py (A3 High:
custom subnets, the MTU, the `<cluster>-internal-<i>` rule) and src/xpk/core/blueprint/blueprint_generator.py (A3 Ultra,
A4: the `<zone>-vpc-roce` network profile, no rule on the RoCE VPC), with cluster-toolkit @ 465b3271
modules/network/gpu-rdma-vpc (its RoCE VPC has no firewall rules: RDMA traffic does not pass the VPC firewall).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from jaxinfra import gpudirect
from jaxinfra.gpudirect import Stack, Vpc
from jaxinfra.pulumi.config import Settings, region_of

#: What the rule on each non-RDMA GPU VPC allows from `gpudirect.GPU_SOURCE_RANGE` (xpk @ 367c8382
#: src/xpk/core/network.py create_cluster_firewall_rule: `--rules=tcp:0-65535,udp:0-65535,icmp`).
FIREWALL_ALLOWS: tuple[tuple[str, tuple[str, ...]], ...] = (("tcp", ("0-65535",)), ("udp", ("0-65535",)), ("icmp", ()))


def firewall_name(vpc: Vpc) -> str:
    """The VPC's firewall rule: xpk's `<cluster>-internal-<i>`, named after its VPC so that two stacks of one cluster
    (TCPX and TCPXO pools) never share a name."""
    return f"{vpc.name}-internal"


def roce_profile(project: str, zone: str) -> str:
    """The RoCE network profile of the accelerator pools' zone, which an RDMA VPC needs for its MRDMA NICs (xpk's
    A3 Ultra and A4 blueprints: `projects/<project>/global/networkProfiles/<zone>-vpc-roce`;
    cloud.google.com/vpc/docs/rdma-network-profiles: a zonal profile)."""
    return f"projects/{project}/global/networkProfiles/{zone}-vpc-roce"


@dataclass(frozen=True)
class GpuNetworks:
    """One stack's VPCs, subnets and firewall rules, by name."""

    stack: Stack
    gke_cluster: str
    networks: dict[str, gcp.compute.Network]
    subnets: dict[str, gcp.compute.Subnetwork]
    firewalls: dict[str, gcp.compute.Firewall]

    def node_network_config(self) -> gcp.container.NodePoolNetworkConfigArgs:
        """A pool's extra NICs, eth1 first: the VPC and subnet of each `gpudirect.node_networks` entry, by the created
        resources' names (so the pool waits for its subnets). GKE cannot add or remove them once the pool exists
        (how-to/setup-multinetwork-support-for-pods, "General limitations"): a change replaces the pool."""
        return gcp.container.NodePoolNetworkConfigArgs(
            additional_node_network_configs=[
                gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(
                    network=self.networks[n.vpc].name, subnetwork=self.subnets[n.subnet].name
                )
                for n in gpudirect.node_networks(self.stack, self.gke_cluster)
            ]
        )


def gpu_networks(stack: Stack, gke_cluster: str, s: Settings, opts: pulumi.ResourceOptions) -> GpuNetworks:
    """Declare a stack's VPCs on GKE cluster `gke_cluster`: custom-mode (no auto subnets) with the stack's MTU; the
    RoCE VPC with its zone's network profile; each subnet in the cluster's region; a firewall rule per non-RDMA VPC."""
    networks: dict[str, gcp.compute.Network] = {}
    subnets: dict[str, gcp.compute.Subnetwork] = {}
    firewalls: dict[str, gcp.compute.Firewall] = {}
    for vpc in gpudirect.vpcs(stack, gke_cluster):
        net = networks[vpc.name] = gcp.compute.Network(
            vpc.name,
            name=vpc.name,
            project=s.project,
            auto_create_subnetworks=False,
            mtu=stack.mtu,
            # gke_problems: accelerator pools have one zone
            network_profile=roce_profile(str(s.project), str(s.accelerator_zone)) if vpc.rdma else None,
            opts=opts,
        )
        on_net = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[net]))
        for name, cidr in vpc.subnets:
            subnets[name] = gcp.compute.Subnetwork(
                name,
                name=name,
                project=s.project,
                region=region_of(str(s.location)),
                network=net.name,
                ip_cidr_range=cidr,
                opts=on_net,
            )
        if not vpc.rdma:
            rule = firewall_name(vpc)
            firewalls[rule] = gcp.compute.Firewall(
                rule,
                name=rule,
                project=s.project,
                network=net.name,
                allows=[
                    gcp.compute.FirewallAllowArgs(protocol=protocol, ports=list(ports) or None)
                    for protocol, ports in FIREWALL_ALLOWS
                ],
                source_ranges=[gpudirect.GPU_SOURCE_RANGE],
                opts=on_net,
            )
    return GpuNetworks(stack, gke_cluster, networks, subnets, firewalls)
