"""What the program says besides declaring: the problems GKE or the controllers would refuse (`gke_problems`,
`controller_problems`: part of the one error raised before any resource is declared), and what the
cluster must already have (`prerequisites`, `existing_cluster_gaps`: warnings).
"""

from __future__ import annotations

from typing import Any

from jaxinfra import gpudirect, releases
from jaxinfra.errors import Problem
from jaxinfra.plan import ClusterPlan, plan, pool_gpudirect
from jaxinfra.pulumi.config import Settings, region_of
from jaxinfra.pulumi.gke import BUCKET_ROLE, workload_principal
from jaxinfra.pulumi.pools import MAX_POOL_NAME, SHADOW_MACHINE, SYSTEM_POOL, node_pools, shadow_pods_per_node


def gke_problems(cluster: Any, s: Settings) -> list[Problem]:
    """What GKE would refuse, or build wrong, for this stack and config: pool names over 40 characters
    (slice suffix included) or taken by the system pool, accelerator pools without one zone, shadow pods
    no shadow node can hold, checkpoint buckets without Workload Identity, and GPUDirect pools on a created
    cluster without Dataplane V2."""
    out = []
    cp = plan(cluster)
    pools = node_pools(cluster, cp)
    for i, (name, slices) in enumerate(pools.items()):
        longest = max((ps.name for ps in slices), key=len)
        if len(longest) > MAX_POOL_NAME:
            out.append(
                Problem(
                    f"node_pools[{i}].name",
                    name,
                    f"derived GKE node pool name {longest!r} is {len(longest)} characters, over {MAX_POOL_NAME}",
                    f"shorten the name by at least {len(longest) - MAX_POOL_NAME} characters",
                )
            )
        if s.system_pool and SYSTEM_POOL in (ps.name for ps in slices):
            out.append(
                Problem(
                    f"node_pools[{i}].name",
                    name,
                    f"{SYSTEM_POOL!r} is the name of jaxinfra's system pool",
                    "rename the node pool, or set jaxinfra:systemPool none",
                )
            )
    accelerators = [name for name, slices in pools.items() if slices[0].row.kind != "cpu"]
    zone = s.accelerator_zone
    if accelerators and s.location and zone is None:
        # One zone: a multi-host TPU slice is one unit of interconnected VMs in one zone
        # (cloud.google.com/tpu/docs/tpus-in-gke), and node_count is per zone, so a regional pool would hold
        # node_count nodes in every zone of the region.
        out.append(
            Problem(
                "jaxinfra:nodeLocations",
                list(s.node_locations) or None,
                f"accelerator node pools ({', '.join(accelerators)}) need one zone, and {s.location} is a region "
                f"(node_count is per zone: each pool would get its hosts in every zone of {s.location})",
                f"`pulumi config set --path 'jaxinfra:nodeLocations[0]' {region_of(s.location)}-<zone>` with a zone "
                "that has the capacity, or a zonal jaxinfra:location",
            )
        )
    elif accelerators and s.location and region_of(zone or "") != region_of(s.location):
        out.append(
            Problem(
                "gcp:zone",
                zone,
                f"the accelerator pools' zone is not in region {region_of(s.location)} of the cluster",
                f"set jaxinfra:nodeLocations to one zone of {region_of(s.location)}",
            )
        )
    if cp.shadow is not None and not shadow_pods_per_node(cp.shadow):
        out.append(
            Problem(
                "jaxinfra:shadow",
                s.shadow,
                f"a shadow pod requests {cp.shadow.cpu} CPU and {cp.shadow.memory}, more "
                f"than one {SHADOW_MACHINE[0]} node of the shadow pool can give it",
                "request less: Cluster(shadow=Shadow(cpu=..., memory=...))",
            )
        )
    if cp.gpudirect and not s.existing_cluster and s.network_policy != "dataplaneV2":
        # Multi-networking requires Dataplane V2 (GKE docs, how-to/setup-multinetwork-support-for-pods), which always
        # enforces NetworkPolicy and excludes Calico (cluster-toolkit @ 465b3271 modules/scheduler/gke-cluster/main.tf:
        # "Enabling network policy (Calico) is not supported when GKE Dataplane V2 is enabled").
        gpu = [p.name for p in cluster.node_pools if pool_gpudirect(p)]
        out.append(
            Problem(
                "jaxinfra:networkPolicy",
                s.network_policy,
                f"GPU pools {', '.join(gpu)} get GPUDirect ({', '.join(st.protocol for st in cp.gpudirect)}), whose "
                "extra NICs need GKE multi-networking and so Dataplane V2, which always enforces NetworkPolicy"
                + (" and cannot run beside Calico" if s.network_policy == "calico" else ""),
                "unset jaxinfra:networkPolicy (dataplaneV2), or GPU(..., network='standard') for plain pod networking",
            )
        )
    buckets = [f"{jp.namespace}/{jp.name}" for jp in cp.jobs if jp.checkpoint_bucket]
    if buckets and not s.workload_identity:
        out.append(
            Problem(
                "jaxinfra:workloadIdentity",
                False,
                f"jobs {', '.join(buckets)} checkpoint to Cloud Storage through "
                "GKE's Cloud Storage FUSE CSI driver, which authenticates their ServiceAccounts with Workload Identity",
                "unset jaxinfra:workloadIdentity (true), or checkpoint to a PVC",
            )
        )
    return out


def controller_problems(cluster: Any) -> list[Problem]:
    """Jobs in a namespace that a controller jaxinfra installs owns (both would create it)."""
    owned = {c.namespace: c.name for c in releases.needed(plan(cluster))}
    return [
        Problem(
            f"jobs[{i}].namespace",
            job.namespace,
            f"the namespace of the {owned[job.namespace]} controller jaxinfra installs",
            "use another namespace, or set jaxinfra:installControllers false and install the controllers yourself",
        )
        for i, job in enumerate(cluster.jobs)
        if job.namespace in owned
    ]


def prerequisites(cp: ClusterPlan, s: Settings) -> list[str]:
    """What the cluster must already have that this program does not give it; one line each."""
    out = []
    need = releases.needed(cp)
    if need and not s.install_controllers:
        out.append(
            f"jaxinfra:installControllers is false: the cluster must already run {releases.describe(need)} "
            "(the versions jaxinfra validates against), or the jobs' objects are refused or never run"
        )
    runtimes = [
        r for r in releases.referenced_runtimes(cp) if not (s.install_controllers and r == releases.TRAINER_JAX_RUNTIME)
    ]
    if runtimes:
        out.append(f"the TrainJobs name ClusterTrainingRuntime {', '.join(runtimes)}: it must exist in the cluster")
    for jp in cp.jobs:
        if jp.checkpoint_bucket and s.provider == "existing":
            out.append(
                f"job {jp.namespace}/{jp.name} checkpoints to gs://{jp.checkpoint_bucket}: the cluster needs GKE's "
                "Cloud Storage FUSE CSI driver and Workload Identity, and the bucket its ServiceAccount's access: "
                f"`gcloud storage buckets add-iam-policy-binding gs://{jp.checkpoint_bucket} --role={BUCKET_ROLE} "
                f"--member={workload_principal('PROJECT_NUMBER', 'PROJECT_ID', jp.namespace, jp.name)}`"
            )
    out += _gpudirect_prerequisites(cp, s)
    for q in cp.queues if s.provider == "existing" else ():
        if q.provisioning_check:  # the program creates the node pools with provider gke only (gke.flex_start_pool)
            out.append(
                f"node pool {q.pool.name} is flex-start: the cluster needs a queued-provisioning node pool for it "
                "(`gcloud container node-pools create ... --enable-queued-provisioning --flex-start "
                "--enable-autoscaling --num-nodes=0 --total-max-nodes=N --location-policy=ANY "
                "--reservation-affinity=none --no-enable-autorepair`), or the ProvisioningRequests of AdmissionCheck "
                f"{q.provisioning_check} are never provisioned and its jobs wait forever"
            )
    if any(jp.job.network_policy for jp in cp.jobs):
        if s.provider == "existing":
            out.append(
                "the jobs' NetworkPolicies take effect only where the cluster enforces NetworkPolicy "
                "(on GKE: Dataplane V2 or the network policy add-on)"
            )
        elif s.network_policy == "none" and not s.existing_cluster:
            out.append(
                "jaxinfra:networkPolicy is none: the cluster enforces no NetworkPolicy, and the jobs' are ignored"
            )
    return out


def _gpudirect_prerequisites(cp: ClusterPlan, s: Settings) -> list[str]:
    """What the GPUDirect pools need that the program does not give them: the node installers without
    `installControllers`; with provider existing, the cluster's multi-networking and the nodes' extra NICs, on the VPCs
    and subnets the rendered GKENetworkParamSets name."""
    out = []
    if (installers := releases.installers(cp)) and not s.install_controllers:
        names, urls = ", ".join(i.name for i in installers), " ".join(i.url for i in installers)
        out.append(
            f"jaxinfra:installControllers is false: the GPUDirect nodes need the DaemonSets {names} "
            f"(`kubectl apply -f` each of {urls}), or their pods find no NCCL plugin (and the GPUDirect daemon no "
            "devices)"
        )
    if s.provider == "existing":
        for stack in cp.gpudirect:
            nics = ", ".join(f"{n.vpc}/{n.subnet}" for n in gpudirect.node_networks(stack, cp.name))
            out.append(
                f"{stack.protocol}: the cluster needs GKE multi-networking and Dataplane V2, and the GPU nodes the "
                f"additional node networks (VPC/subnet, in NIC order) {nics}, which the GKENetworkParamSets name; or "
                "GPU(..., network='standard') for plain pod networking"
            )
    return out


def existing_cluster_gaps(
    found: Any, s: Settings, network_policies: bool, fuse: bool = False, multi_networking: bool = False
) -> list[str]:
    """What an existing GKE cluster lacks of what the config asks for (`getCluster`'s result); one line each.
    `multi_networking`: the stack has GPUDirect pools, whose extra NICs need multi-networking on Dataplane V2."""
    name, where = found.name, f"--location {s.location} --project {s.project}"
    dataplane_v2 = found.datapath_provider == "ADVANCED_DATAPATH"
    out = []
    if multi_networking and not (found.enable_multi_networking and dataplane_v2):
        lacks = " and ".join(
            what
            for what, ok in (("multi-networking", found.enable_multi_networking), ("Dataplane V2", dataplane_v2))
            if not ok
        )
        out.append(
            f"GKE cluster {name} has no {lacks}, which the GPUDirect pools' extra NICs (additional node networks) "
            "need (GKE docs, how-to/setup-multinetwork-support-for-pods). GKE sets them when it creates a "
            f"cluster (`gcloud container clusters create {name} {where} --enable-ip-alias --enable-dataplane-v2 "
            "--enable-multi-networking`, as xpk does), or use GPU(..., network='standard')"
        )
    enforced = dataplane_v2 or any(p.enabled for p in found.network_policies or ())
    if network_policies and s.network_policy != "none" and not enforced:
        out.append(
            f"GKE cluster {name} enforces no NetworkPolicy (neither Dataplane V2 nor the network policy add-on): the "
            f"jobs' NetworkPolicies are ignored. Enable it (`gcloud container clusters update {name} {where} "
            "--update-addons=NetworkPolicy=ENABLED`, then `--enable-network-policy`) or set jaxinfra:networkPolicy none"
        )
    if s.workload_identity and not any(c.workload_pool for c in found.workload_identity_configs or ()):
        out.append(
            f"GKE cluster {name} has no Workload Identity, which node pools with GKE_METADATA need: "
            f"`gcloud container clusters update {name} {where} --workload-pool={s.project}.svc.id.goog`, "
            "or set jaxinfra:workloadIdentity false"
        )
    if s.shielded_nodes and not found.enable_shielded_nodes:
        out.append(
            f"GKE cluster {name} has no Shielded GKE Nodes: `gcloud container clusters update {name} {where} "
            "--enable-shielded-nodes`, or set jaxinfra:shieldedNodes false"
        )
    if fuse and not any(c.enabled for a in found.addons_configs or () for c in a.gcs_fuse_csi_driver_configs or ()):
        out.append(
            f"GKE cluster {name} has no Cloud Storage FUSE CSI driver, which the jobs' checkpoint buckets need: "
            f"`gcloud container clusters update {name} {where} --update-addons GcsFuseCsiDriver=ENABLED`"
        )
    return out
