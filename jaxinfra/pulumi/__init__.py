"""The Pulumi adapter: `pulumi up` for the cluster (GKE node pools) plus the jobs that run on it.

Thin, like the cdk8s one (docs/design.md, "Outputs and adapters"): every name and number comes from
`jaxinfra.plan.plan`, every Kubernetes object from `jaxinfra.render`, every controller version from
`jaxinfra.releases`; this package only maps them onto Pulumi resources.

- `Cluster` (`jaxinfra:index:Cluster`): with provider `gke`, a `gcp.container.Cluster` (or an
  existing one looked up by name and checked) with NetworkPolicy enforcement, Workload Identity,
  Shielded GKE Nodes and a release channel; a dedicated node service account with GKE's
  least-privilege role; one `gcp.container.NodePool` per node pool of the spec (one per slice for
  multi-slice TPU jobs), every accelerator pool in one zone, or with `jaxinfra:shadow` one CPU pool
  sized for the stack's CPU shadow; a `system` CPU pool for the controllers; the Cloud Storage
  buckets the jobs checkpoint to, each job's access to its bucket, and GKE's Cloud Storage FUSE CSI
  driver; for GPUDirect pools (`jaxinfra.gpudirect`) their VPCs, subnets and firewall rules, a
  cluster with multi-networking, and pools with gVNIC, the extra NICs and compact placement. With
  provider `existing`, no cloud resources, only a Kubernetes provider for a kubeconfig / context.
  Then the controllers the objects need (`ControllerInstall`), the GPUDirect node installers
  (`NodeInstaller`) and the GPU networks' `Network`/`GKENetworkParamSet` objects, the Namespaces,
  the Kueue queues (with `Cluster(kueue=True)`), and one `JaxJobComponent` per job.
- `JaxJob` (`jaxinfra:index:JaxJob`): every object `render_job` yields, as a typed
  `pulumi_kubernetes` resource (a `CustomResource` for JobSet), with its name verbatim.

The one backend-specific change to the rendered objects (docs/design.md, "Pulumi's awaiters") is the annotation
`pulumi.com/skipAwait: "true"`, on the workload (Pulumi's Job awaiter would otherwise block until
training ends), on the headless Service (pulumi-kubernetes' Service awaiter waits for endpoints
of a Service that has a selector, and those only exist once the workload's pods do: without it
`pulumi up` would time out; see provider/pkg/await/service.go, `emptyHeadlessOrExternalName`) and
on the checkpoints' PersistentVolumeClaim (its awaiter waits for the claim to bind, which a
`WaitForFirstConsumer` class does only once the workload's pods exist: pulumi/pulumi-kubernetes#895
and #3130 for the first `pulumi up`, #4179 for later updates).

This is the only package of jaxinfra that imports pulumi; `jaxinfra synth` and `simulate` never
import it. Configuration (`read_settings`) is checked, and the stack loaded and checked against
it (`gke_problems`, `controller_problems`), before any resource is declared: one error lists
every problem. What the cluster must already have is said as warnings (`prerequisites`,
`existing_cluster_gaps`).

One module per concern, each importing only those before it: `config` (the keys and `Settings`),
`pools` (the node pools a stack needs), `gke` (what GKE and IAM are given), `networks` (the GPUDirect
pools' VPCs), `checks` (problems and warnings), `kubernetes` (the rendered objects as resources:
`JaxJobComponent`, `ControllerInstall`, `NodeInstaller`) and `cluster` (the `ClusterComponent` and
`program`). Everything is importable from here.
"""

from __future__ import annotations

from jaxinfra.pulumi.checks import controller_problems, existing_cluster_gaps, gke_problems, prerequisites
from jaxinfra.pulumi.cluster import ClusterComponent, program
from jaxinfra.pulumi.config import (
    DEFAULT_CPU_MACHINE_TYPE,
    KEYS,
    NETWORK_POLICIES,
    PROVIDERS,
    RELEASE_CHANNELS,
    SHADOWS,
    ConfigError,
    Settings,
    is_zone,
    project_root,
    pulumi_config,
    read_settings,
    region_of,
)
from jaxinfra.pulumi.gke import (
    BUCKET_ROLE,
    CLOUD_PLATFORM_SCOPE,
    NODE_ROLES,
    RESERVATION_KEY,
    base_node_config,
    cluster_addons,
    cluster_networking,
    cluster_security,
    gke_kubeconfig,
    node_account_id,
    node_config,
    workload_principal,
)
from jaxinfra.pulumi.kubernetes import (
    SKIP_AWAIT,
    SKIP_AWAIT_KINDS,
    WORKLOAD_KINDS,
    ControllerInstall,
    JaxJobComponent,
    NodeInstaller,
    k8s_resource,
    logical_name,
    with_skip_await,
)
from jaxinfra.pulumi.networks import FIREWALL_ALLOWS, GpuNetworks, firewall_name, gpu_networks, roce_profile
from jaxinfra.pulumi.pools import (
    MAX_PODS_PER_NODE,
    MAX_POOL_NAME,
    SHADOW_DAEMONS,
    SHADOW_MACHINE,
    SHADOW_POOL,
    SYSTEM_POOL,
    SYSTEM_POOL_NODES,
    PoolSlice,
    node_pools,
    shadow_nodes,
    shadow_pods_per_node,
)
from jaxinfra.upstream import SPOT_LABEL

__all__ = [
    "BUCKET_ROLE",
    "CLOUD_PLATFORM_SCOPE",
    "DEFAULT_CPU_MACHINE_TYPE",
    "FIREWALL_ALLOWS",
    "KEYS",
    "MAX_PODS_PER_NODE",
    "MAX_POOL_NAME",
    "NETWORK_POLICIES",
    "NODE_ROLES",
    "PROVIDERS",
    "RELEASE_CHANNELS",
    "RESERVATION_KEY",
    "SHADOWS",
    "SHADOW_DAEMONS",
    "SHADOW_MACHINE",
    "SHADOW_POOL",
    "SKIP_AWAIT",
    "SKIP_AWAIT_KINDS",
    "SPOT_LABEL",
    "SYSTEM_POOL",
    "SYSTEM_POOL_NODES",
    "WORKLOAD_KINDS",
    "ClusterComponent",
    "ConfigError",
    "ControllerInstall",
    "GpuNetworks",
    "JaxJobComponent",
    "NodeInstaller",
    "PoolSlice",
    "Settings",
    "base_node_config",
    "cluster_addons",
    "cluster_networking",
    "cluster_security",
    "controller_problems",
    "existing_cluster_gaps",
    "firewall_name",
    "gke_kubeconfig",
    "gke_problems",
    "gpu_networks",
    "is_zone",
    "k8s_resource",
    "logical_name",
    "node_account_id",
    "node_config",
    "node_pools",
    "prerequisites",
    "program",
    "project_root",
    "pulumi_config",
    "read_settings",
    "region_of",
    "roce_profile",
    "shadow_nodes",
    "shadow_pods_per_node",
    "with_skip_await",
    "workload_principal",
]
