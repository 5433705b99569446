"""What GKE and IAM are given: the node pools' machine config, a created cluster's security settings and
add-ons, its kubeconfig, and the identities of the nodes and the jobs.

Each is a function of `Settings` (and a pool), with the GKE docs it follows; `cluster.ClusterComponent` only
passes them to the resources it declares.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_gcp as gcp

from jaxinfra.gpudirect import Stack
from jaxinfra.plan import pool_gpudirect
from jaxinfra.pulumi.config import DEFAULT_CPU_MACHINE_TYPE, Settings
from jaxinfra.pulumi.pools import PoolSlice
from jaxinfra.upstream import SPOT_LABEL

RESERVATION_KEY = "compute.googleapis.com/reservation-name"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
#: Project roles of the dedicated node service account (`ClusterComponent._node_account`).
NODE_ROLES = ("roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader")
#: What a job's Kubernetes ServiceAccount gets on its checkpoint bucket: read and write objects (and an HNS
#: bucket's folders), GKE's role for a read-write Cloud Storage FUSE volume (how-to/cloud-storage-fuse-csi-driver-setup,
#: "Configure access"; gcs-fuse-csi-driver docs/authentication.md).
BUCKET_ROLE = "roles/storage.objectUser"


def workload_principal(project_number: str, project: str, namespace: str, service_account: str) -> str:
    """The IAM principal of a Kubernetes ServiceAccount under Workload Identity Federation for GKE (GKE docs,
    how-to/workload-identity: `principal://.../subject/ns/NAMESPACE/sa/KSA`): no Google service account to
    impersonate."""
    return (
        f"principal://iam.googleapis.com/projects/{project_number}/locations/global/workloadIdentityPools/"
        f"{project}.svc.id.goog/subject/ns/{namespace}/sa/{service_account}"
    )


def node_account_id(gke_name: str) -> str:
    """The dedicated node service account's id: 6 to 30 characters, as IAM requires."""
    return f"{gke_name[:24].rstrip('-')}-nodes"


def base_node_config(
    s: Settings, account: pulumi.Input[str] | None, machine_type: str, secure_boot: bool
) -> dict[str, Any]:
    """What every node pool gets: the node service account, Workload Identity's metadata server, shielded VMs.

    Workload Identity: pods see the GKE metadata server, not the node's credentials (GKE docs,
    how-to/workload-identity: node pools `--workload-metadata=GKE_METADATA`). With a least-privilege
    account, GKE recommends the cloud-platform scope and IAM for access (docs, how-to/access-scopes).
    """
    kw: dict[str, Any] = {"machine_type": machine_type, "oauth_scopes": [CLOUD_PLATFORM_SCOPE]}
    if account is not None:
        kw["service_account"] = account
    if s.workload_identity:
        kw["workload_metadata_config"] = gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA")
    if s.shielded_nodes:
        kw["shielded_instance_config"] = gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
            enable_integrity_monitoring=True, enable_secure_boot=secure_boot
        )
    return kw


def node_config(ps: PoolSlice, s: Settings, account: pulumi.Input[str] | None) -> gcp.container.NodePoolNodeConfigArgs:
    """A pool's machines. Secure boot only on CPU pools: GPU nodes load the NVIDIA driver as an out-of-tree
    kernel module (GKE docs, security/secure-modules-cos), and GKE documents secure boot for TPU VMs nowhere."""
    row, pool = ps.row, ps.pool
    machine_type = (
        row.machine_type if row.kind != "cpu" else (pool.accelerator.machine_type or DEFAULT_CPU_MACHINE_TYPE)
    )
    kw = base_node_config(s, account, machine_type, secure_boot=row.kind == "cpu")
    if row.kind == "gpu":
        kw["guest_accelerators"] = [
            gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                type=row.gke_accelerator,
                count=row.chips_per_host,
                gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                    gpu_driver_version="LATEST"
                ),
            )
        ]
    if pool_gpudirect(pool) is not None:
        # GPUDirect's NICs are gVNICs (xpk @ 367c8382 src/xpk/core/nodepool.py: `--enable-gvnic` on every GPU pool;
        # cluster-toolkit @ 465b3271 modules/compute/gke-node-pool/main.tf `gvnic`).
        kw["gvnic"] = gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True)
    if pool.spot:  # the rendered pods select and tolerate this (render/common.py `_placement`)
        kw["spot"] = True
        kw["taints"] = [gcp.container.NodePoolNodeConfigTaintArgs(key=SPOT_LABEL, value="true", effect="NO_SCHEDULE")]
    if pool.reservation:
        kw["reservation_affinity"] = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="SPECIFIC_RESERVATION", key=RESERVATION_KEY, values=[pool.reservation]
        )
    if pool.flex_start:  # `flex_start_pool`: flex-start VMs, never a reservation's
        kw["flex_start"] = True
        kw["reservation_affinity"] = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="NO_RESERVATION"
        )
    return gcp.container.NodePoolNodeConfigArgs(**kw)


def flex_start_pool(ps: PoolSlice) -> dict[str, Any]:
    """What makes a node pool a flex-start pool with queued provisioning, beside its node config (`node_config`):
    GKE's DWS guide (how-to/provisioningrequest: `--enable-queued-provisioning --flex-start --enable-autoscaling
    --num-nodes=0 --total-max-nodes=N --location-policy=ANY --reservation-affinity=none --no-enable-autorepair`) and
    xpk's flex-start capacity (AI-Hypercomputer/xpk @ 446cfe17 src/xpk/core/capacity.py
    get_capacity_arguments_from_capacity_type). The pool has no node until a ProvisioningRequest asks for all of
    them: autoscaled from 0 to its hosts (a TPU slice pool: its whole slice, which GKE provisions at once), in any of
    its zones, and not auto-repaired (`--no-enable-autorepair`, as both do). Empty for other pools."""
    if not ps.pool.flex_start:
        return {}
    return {
        "initial_node_count": 0,
        "autoscaling": gcp.container.NodePoolAutoscalingArgs(
            total_min_node_count=0, total_max_node_count=ps.node_count, location_policy="ANY"
        ),
        "queued_provisioning": gcp.container.NodePoolQueuedProvisioningArgs(enabled=True),
        "management": gcp.container.NodePoolManagementArgs(auto_repair=False, auto_upgrade=True),
    }


def cluster_security(s: Settings) -> dict[str, Any]:
    """A created cluster's security settings (each a config key to opt out).

    - NetworkPolicy enforcement: "Kubernetes network policy is always on in clusters with GKE
      Dataplane V2" (GKE docs, concepts/dataplane-v2: `datapath_provider = ADVANCED_DATAPATH`, set at
      creation only); calico is the legacy network policy add-on plus enforcement (how-to/network-policy).
    - Workload Identity: the pool `<project>.svc.id.goog` (how-to/workload-identity).
    - Shielded GKE Nodes and a release channel (how-to/hardening-your-cluster; concepts/release-channels).
    """
    kw: dict[str, Any] = {
        "enable_shielded_nodes": s.shielded_nodes,
        "release_channel": gcp.container.ClusterReleaseChannelArgs(channel=s.release_channel),
    }
    if s.workload_identity:
        kw["workload_identity_config"] = gcp.container.ClusterWorkloadIdentityConfigArgs(
            workload_pool=f"{s.project}.svc.id.goog"
        )
    if s.network_policy == "dataplaneV2":
        kw["datapath_provider"] = "ADVANCED_DATAPATH"
    elif s.network_policy == "calico":
        kw["network_policy"] = gcp.container.ClusterNetworkPolicyArgs(enabled=True, provider="CALICO")
    return kw


def cluster_networking(stacks: Sequence[Stack]) -> dict[str, Any]:
    """A created cluster's networking for the GPUDirect pools' extra NICs (`ClusterPlan.gpudirect`); nothing without.

    GKE multi-networking, which "requires GKE Dataplane V2" (how-to/setup-multinetwork-support-for-pods) on a VPC-native
    cluster: xpk creates every cluster with `--enable-ip-alias --enable-dataplane-v2 --enable-multi-networking`
    (xpk @ 367c8382 src/xpk/commands/cluster.py run_gke_cluster_create_command), cluster-toolkit @ 465b3271
    modules/scheduler/gke-cluster/main.tf turns on Dataplane V2 with multi-networking. VPC-native is set explicitly
    (`networking_mode`), its ranges left to GKE, as `--enable-ip-alias` without ranges does. Dataplane V2 is the
    default here already (`cluster_security`); it is chosen at creation only, and the gke_problems refuse GPUDirect
    pools with another `jaxinfra:networkPolicy`.
    """
    if not stacks:
        return {}
    return {"enable_multi_networking": True, "datapath_provider": "ADVANCED_DATAPATH", "networking_mode": "VPC_NATIVE"}


def cluster_addons(s: Settings, fuse: bool) -> gcp.container.ClusterAddonsConfigArgs | None:
    """A created cluster's add-ons: the network policy add-on for calico (how-to/network-policy), and GKE's Cloud
    Storage FUSE CSI driver when a job checkpoints to a bucket (off by default on Standard clusters: `addonsConfig.
    gcsFuseCsiDriverConfig.enabled`, how-to/cloud-storage-fuse-csi-driver-setup)."""
    kw: dict[str, Any] = {}
    if s.network_policy == "calico":
        kw["network_policy_config"] = gcp.container.ClusterAddonsConfigNetworkPolicyConfigArgs(disabled=False)
    if fuse:
        kw["gcs_fuse_csi_driver_config"] = gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(enabled=True)
    return gcp.container.ClusterAddonsConfigArgs(**kw) if kw else None


def gke_kubeconfig(context: str, endpoint: str, ca: str) -> str:
    """A kubeconfig for a GKE cluster that authenticates with gke-gcloud-auth-plugin (as Pulumi's GKE examples do)."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "current-context": context,
            "clusters": [
                {"name": context, "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca}}
            ],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
            "users": [
                {
                    "name": context,
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": "gke-gcloud-auth-plugin",
                            "installHint": "Install gke-gcloud-auth-plugin: https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin",
                            "provideClusterInfo": True,
                        }
                    },
                }
            ],
        },
        indent=2,
    )
