"""The `ClusterComponent` and the program Pulumi.yaml runs: config and stack checked as one error, then
the cloud resources (provider gke: the GPU networks, the cluster, its node pools), the controllers and GPUDirect node
installers, the GPU networks' in-cluster objects, Namespaces, queues and jobs, in dependency order, and the outputs
exported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from jaxinfra import gpudirect, releases
from jaxinfra.errors import JaxinfraError, Problem
from jaxinfra.plan import ClusterPlan, JobPlan, plan, pool_gpudirect
from jaxinfra.pulumi.checks import controller_problems, existing_cluster_gaps, gke_problems, prerequisites
from jaxinfra.pulumi.config import ConfigError, Settings, project_root, pulumi_config, read_settings, region_of
from jaxinfra.pulumi.gke import (
    BUCKET_ROLE,
    CLOUD_PLATFORM_SCOPE,
    NODE_ROLES,
    base_node_config,
    cluster_addons,
    cluster_networking,
    cluster_security,
    flex_start_pool,
    gke_kubeconfig,
    node_account_id,
    node_config,
    workload_principal,
)
from jaxinfra.pulumi.kubernetes import ControllerInstall, JaxJobComponent, NodeInstaller, k8s_resource
from jaxinfra.pulumi.networks import GpuNetworks, gpu_networks
from jaxinfra.pulumi.pools import SHADOW_POOL, SYSTEM_POOL, SYSTEM_POOL_NODES, PoolSlice, node_pools
from jaxinfra.render.common import namespace as render_namespace
from jaxinfra.render.gpudirect import network_objects
from jaxinfra.render.kueue import kueue_objects


class ClusterComponent(pulumi.ComponentResource):
    """A cluster's node pools and GPU networks (provider gke), a Kubernetes provider, the controllers and GPUDirect
    node installers, the GPU networks' objects, the Namespaces, the Kueue queues, and a `JaxJobComponent` per job."""

    def __init__(self, name: str, cluster: Any, settings: Settings, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("jaxinfra:index:Cluster", name, None, opts)
        self.spec = cluster
        self.plan = cp = plan(cluster)
        self.gke_cluster: gcp.container.Cluster | None = None
        self.node_pools: dict[str, list[gcp.container.NodePool]] = {}
        self.system_pool: gcp.container.NodePool | None = None
        self.node_account: pulumi.Output[str] | None = None
        self.kubeconfig: pulumi.Output[str] | None = None
        self.buckets: dict[str, gcp.storage.Bucket] = {}  # the checkpoint buckets created, by name
        self.bucket_access: dict[
            str, gcp.storage.BucketIAMMember
        ] = {}  # each job's grant on its bucket, by namespace/name
        self.gpu_networks: dict[str, GpuNetworks] = {}  # each GPUDirect stack's VPCs (provider gke), by stack name
        self.network_objects: dict[str, list[pulumi.CustomResource]] = {}  # its Network objects, by stack name
        self.installers: dict[str, NodeInstaller] = {}  # the GPUDirect node installers, by name
        child = pulumi.ResourceOptions(parent=self)
        if settings.provider == "gke":
            self.k8s_provider = self._gke(cluster, cp, settings, child)
            self._checkpoint_buckets(cp, settings, child)
        else:
            self.kubeconfig = pulumi.Output.secret(settings.kubeconfig) if settings.kubeconfig else None
            self.k8s_provider = k8s.Provider(
                f"{cluster.name}-k8s", kubeconfig=self.kubeconfig, context=settings.context, opts=child
            )
        on_k8s = pulumi.ResourceOptions(parent=self, provider=self.k8s_provider)
        nodes: list[pulumi.Resource] = [
            *([self.gke_cluster] if self.gke_cluster else []),
            *(p for ps in self.node_pools.values() for p in ps),
            *([self.system_pool] if self.system_pool else []),
        ]
        # The controllers: after the nodes they run on, before every object of theirs.
        self.controllers: dict[str, ControllerInstall] = {}
        if settings.install_controllers:
            for c in releases.needed(cp):
                first = [self.controllers[n].install for n in c.after if n in self.controllers]
                self.controllers[c.name] = ControllerInstall(
                    c, cp, provider=self.k8s_provider, depends_on=[*nodes, *first], opts=child
                )
        serving = {kind: ci.resources for ci in self.controllers.values() for kind in ci.controller.kinds}
        self._gpudirect(cluster, cp, settings, nodes, on_k8s, child)
        self.namespaces = {ns: k8s_resource(render_namespace(ns, cp.pod_security), on_k8s) for ns in cp.namespaces}
        # Kueue (Cluster(kueue=True)): flavors, then the ClusterQueues naming them, then the LocalQueues the
        # workloads name; a workload whose LocalQueue is missing would wait, suspended, for nothing.
        self.queues: list[pulumi.CustomResource] = []
        for m in kueue_objects(cp.queues, cp.queue_priorities):
            ns = m["metadata"].get("namespace")
            deps = [
                *serving.get(m["kind"], ()),
                *self.queues,
                *([self.namespaces[ns]] if ns in self.namespaces else []),
            ]
            self.queues.append(
                k8s_resource(m, pulumi.ResourceOptions.merge(on_k8s, pulumi.ResourceOptions(depends_on=deps)))
            )
        self.jobs: dict[str, JaxJobComponent] = {}
        for jp in cp.jobs:
            key = f"{jp.namespace}/{jp.name}"
            stack = jp.gpudirect
            deps = [
                *([self.namespaces[jp.namespace]] if jp.namespace in self.namespaces else []),
                *self.node_pools.get(SHADOW_POOL if cp.shadow else jp.pool.name, []),
                *self.queues,
                *([self.bucket_access[key]] if key in self.bucket_access else []),
                # the networks its pods' interfaces name, and what their nodes need installed
                *(self.network_objects[stack.name] if stack else []),
                *(self.installers[i.name] for i in (stack.installers if stack else ()) if i.name in self.installers),
            ]
            self.jobs[key] = JaxJobComponent(
                key, jp, provider=self.k8s_provider, depends_on=deps, serving=serving, opts=child
            )
        for line in prerequisites(cp, settings):
            pulumi.log.warn(line, resource=self)
        self.register_outputs({"kubeconfig": self.kubeconfig})

    def _gpudirect(
        self,
        cluster: Any,
        cp: ClusterPlan,
        s: Settings,
        nodes: Sequence[pulumi.Resource],
        on_k8s: pulumi.ResourceOptions,
        child: pulumi.ResourceOptions,
    ) -> None:
        """The GPUDirect stacks' in-cluster part (`ClusterPlan.gpudirect`): their `GKENetworkParamSet` and `Network`
        objects, after the cluster (multi-networking) and its node pools, as GKE's multi-networking setup orders them
        (how-to/setup-multinetwork-support-for-pods); and, with `installControllers`, their node installers
        (`releases.installers`), after the node pools and, like the controllers, on any provider."""
        gke_name = (s.cluster_name or cluster.name) if s.provider == "gke" else cluster.name  # what `render` names
        for stack in cp.gpudirect:
            subnets = list(self.gpu_networks[stack.name].subnets.values()) if stack.name in self.gpu_networks else []
            after = pulumi.ResourceOptions.merge(on_k8s, pulumi.ResourceOptions(depends_on=[*nodes, *subnets]))
            self.network_objects[stack.name] = [k8s_resource(m, after) for m in network_objects(stack, gke_name)]
        if s.install_controllers:
            for installer in releases.installers(cp):
                self.installers[installer.name] = NodeInstaller(
                    installer, provider=self.k8s_provider, depends_on=nodes, opts=child
                )

    def _gke(self, cluster: Any, cp: ClusterPlan, s: Settings, child: pulumi.ResourceOptions) -> k8s.Provider:
        gke_name = s.cluster_name or cluster.name
        for stack in cp.gpudirect:  # the GPU NICs' VPCs, before the pools that attach to them
            self.gpu_networks[stack.name] = gpu_networks(stack, gke_name, s, child)
        fuse = any(
            jp.checkpoint_bucket for jp in cp.jobs
        )  # GKE's Cloud Storage FUSE CSI driver for the checkpoint buckets
        account, grants = self._node_account(gke_name, s, child)
        granted = pulumi.ResourceOptions.merge(
            child, pulumi.ResourceOptions(depends_on=grants)
        )  # nodes boot with their roles
        if s.existing_cluster:
            found = gcp.container.get_cluster_output(
                name=gke_name, location=s.location, project=s.project, opts=pulumi.InvokeOptions(parent=self)
            )
            network_policies = any(jp.job.network_policy for jp in cp.jobs)

            def warn_gaps(found_cluster: Any) -> None:
                for line in existing_cluster_gaps(found_cluster, s, network_policies, fuse, bool(cp.gpudirect)):
                    pulumi.log.warn(line, resource=self)

            found.apply(warn_gaps)
            cluster_ref: Any = gke_name
            endpoint, ca = found.endpoint, found.master_auths.apply(lambda auths: auths[0].cluster_ca_certificate)
        else:
            # The default pool GKE creates (and jaxinfra then removes) runs as the node account too.
            default_pool = (
                gcp.container.ClusterNodeConfigArgs(service_account=account, oauth_scopes=[CLOUD_PLATFORM_SCOPE])
                if account is not None
                else None
            )
            gke = gcp.container.Cluster(
                gke_name,
                name=gke_name,
                project=s.project,
                location=s.location,
                remove_default_node_pool=True,
                initial_node_count=1,
                node_config=default_pool,
                deletion_protection=s.deletion_protection,
                **{**cluster_security(s), **cluster_networking(cp.gpudirect)},
                addons_config=cluster_addons(s, fuse),
                opts=granted,
            )
            self.gke_cluster = gke
            cluster_ref = gke.name
            endpoint, ca = gke.endpoint, gke.master_auth.apply(lambda auth: auth.cluster_ca_certificate)
        for pool_name, slices in node_pools(cluster, cp).items():
            self.node_pools[pool_name] = [self._node_pool(ps, cluster_ref, s, account, granted) for ps in slices]
        if s.system_pool:
            self.system_pool = self._system_pool(cluster_ref, s, account, granted)
        context = f"gke_{s.project}_{s.location}_{gke_name}"  # gcloud's context name
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(endpoint, ca).apply(lambda a: gke_kubeconfig(context, a[0], a[1]))
        )
        return k8s.Provider(f"{cluster.name}-k8s", kubeconfig=self.kubeconfig, opts=child)

    def _checkpoint_buckets(self, cp: ClusterPlan, s: Settings, child: pulumi.ResourceOptions) -> None:
        """The buckets the jobs checkpoint to (unless `jaxinfra:createBuckets` is false) and each job's access to its
        own.

        Created in the cluster's region (GKE's FUSE docs: a regional bucket in the cluster's region performs best),
        with uniform bucket-level access (required for read-write access through Workload Identity: gcs-fuse-csi-driver
        docs/authentication.md) and a hierarchical namespace (atomic folder renames, which orbax's commit of a
        checkpoint relies on; cloud.google.com/storage/docs/hns-overview); kept by `pulumi destroy` (retainOnDelete),
        since they hold the checkpoints. The grant names the job's Kubernetes ServiceAccount as a Workload Identity
        principal, after the cluster (whose creation makes the identity pool), before the job.
        """
        jobs = [jp for jp in cp.jobs if jp.checkpoint_bucket]
        if not jobs:
            return
        number = gcp.organizations.get_project_output(
            project_id=s.project, opts=pulumi.InvokeOptions(parent=self)
        ).number
        if s.create_buckets:
            for name in sorted({str(jp.checkpoint_bucket) for jp in jobs}):
                self.buckets[name] = gcp.storage.Bucket(
                    name,
                    name=name,
                    project=s.project,
                    location=region_of(str(s.location)).upper(),
                    uniform_bucket_level_access=True,
                    hierarchical_namespace=gcp.storage.BucketHierarchicalNamespaceArgs(enabled=True),
                    opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(retain_on_delete=True)),
                )
        after = pulumi.ResourceOptions.merge(
            child, pulumi.ResourceOptions(depends_on=[self.gke_cluster] if self.gke_cluster else [])
        )
        for jp in jobs:
            bucket = str(jp.checkpoint_bucket)

            def principal(n: Any, jp: JobPlan = jp) -> str:
                return workload_principal(str(n), str(s.project), jp.namespace, jp.name)

            member = number.apply(principal)
            self.bucket_access[f"{jp.namespace}/{jp.name}"] = gcp.storage.BucketIAMMember(
                f"{bucket}/{jp.namespace}/{jp.name}",
                bucket=self.buckets[bucket].name if bucket in self.buckets else bucket,
                role=BUCKET_ROLE,
                member=member,
                opts=after,
            )

    def _node_account(
        self, gke_name: str, s: Settings, child: pulumi.ResourceOptions
    ) -> tuple[pulumi.Input[str] | None, list[pulumi.Resource]]:
        """The node pools' service account and the grants it needs before nodes boot.

        Unless configured otherwise, a dedicated account with the role GKE documents as the least
        privilege its nodes need, roles/container.defaultNodeServiceAccount (logs, metrics, and the
        rest of GKE's node tasks; docs, security/configure-node-service-accounts and
        how-to/hardening-your-cluster#use_least_privilege_sa), plus roles/artifactregistry.reader:
        the kubelet pulls the project's private images with the node's identity.
        """
        if s.node_service_account == "default":
            return None, []
        if s.node_service_account:
            return s.node_service_account, []
        account_id = node_account_id(gke_name)
        account = gcp.serviceaccount.Account(
            account_id,
            account_id=account_id,
            project=s.project,
            display_name=f"GKE nodes of {gke_name} (jaxinfra)",
            opts=child,
        )
        self.node_account = account.email
        grants = [
            gcp.projects.IAMMember(
                f"{account_id}-{role.rpartition('/')[2]}",
                project=str(s.project),
                role=role,
                member=account.member,
                opts=child,
            )
            for role in NODE_ROLES
        ]
        return account.email, list(grants)

    def _node_pool(
        self,
        ps: PoolSlice,
        cluster_ref: Any,
        s: Settings,
        account: pulumi.Input[str] | None,
        opts: pulumi.ResourceOptions,
    ) -> gcp.container.NodePool:
        row = ps.row
        stack = pool_gpudirect(ps.pool)
        nets = self.gpu_networks[stack.name] if stack else None
        placement = None
        if row.kind == "tpu" and row.multi_host:
            placement = gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT", tpu_topology=row.topology)
        elif nets and ps.pool.capacity not in ("spot", "flex-start"):  # GPUDirect nodes close together, as xpk's
            # A3 Mega, A3 Ultra and A4 blueprints place them, but for Spot VMs (xpk @ 367c8382
            # src/xpk/core/blueprint/blueprint_generator.py `placement_policy: {type: COMPACT}` unless the capacity is
            # Spot); and not for flex-start, where DWS places the nodes it obtains
            placement = gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT")
        # gke_problems: an accelerator pool's zone is set
        zones = cast("list[str]", [s.accelerator_zone]) if row.kind != "cpu" else list(s.node_locations)
        return gcp.container.NodePool(
            ps.name,
            name=ps.name,
            cluster=cluster_ref,
            project=s.project,
            location=s.location,
            node_locations=zones or None,
            node_count=None if ps.pool.flex_start else ps.node_count,
            node_config=node_config(ps, s, account),
            **flex_start_pool(ps),
            placement_policy=placement,
            network_config=nets.node_network_config() if nets else None,
            max_pods_per_node=gpudirect.PODS_PER_NODE if nets else None,
            # A named pool cannot coexist with its replacement: delete first. A GPUDirect pool after its subnets.
            opts=pulumi.ResourceOptions.merge(
                opts,
                pulumi.ResourceOptions(
                    delete_before_replace=True, depends_on=list(nets.subnets.values()) if nets else None
                ),
            ),
        )

    def _system_pool(
        self, cluster_ref: Any, s: Settings, account: pulumi.Input[str] | None, opts: pulumi.ResourceOptions
    ) -> gcp.container.NodePool:
        """Untainted CPU nodes for the controllers and kube-system: GKE taints TPU and GPU nodes
        (`google.com/tpu`, `nvidia.com/gpu`), and the default pool is removed. xpk keeps such a CPU pool,
        autoscaled, in the accelerators' zone (src/xpk/commands/cluster.py); so does this one when there is one."""
        zones = [s.accelerator_zone] if s.accelerator_zone else list(s.node_locations)
        low, high = SYSTEM_POOL_NODES
        return gcp.container.NodePool(
            SYSTEM_POOL,
            name=SYSTEM_POOL,
            cluster=cluster_ref,
            project=s.project,
            location=s.location,
            node_locations=zones or None,
            initial_node_count=low,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(min_node_count=low, max_node_count=high),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                **base_node_config(s, account, str(s.system_pool), secure_boot=True)
            ),
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(delete_before_replace=True)),
        )


def program(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The Pulumi program (Pulumi.yaml's `main` calls this): check config and stack, declare, export.

    Every configuration and stack problem is raised as one `pulumi.RunError` before any resource
    is declared. Returns the exported outputs.
    """
    from jaxinfra import stack
    from jaxinfra.shadow import shadow

    config = pulumi_config() if config is None else config
    problems: list[Problem] = []
    settings = cluster = None
    try:
        settings = read_settings(config)
    except ConfigError as err:
        problems += err.problems
        path = config.get("jaxinfra:stack")
        stack_path = Path(str(path)) if path else None
        if stack_path is not None and not stack_path.is_absolute():
            stack_path = project_root() / stack_path
    else:
        stack_path = settings.stack
    if stack_path is not None and stack_path.suffix == ".py" and stack_path.is_file():
        try:
            cluster = stack.load(stack_path)
            if (
                settings is not None and settings.shadow
            ):  # the stack's CPU shadow, as `jaxinfra synth --shadow cpu` renders it
                cluster = shadow(cluster)
        except JaxinfraError as err:
            cluster = None
            problems += [p.located(str(config.get("jaxinfra:stack"))) for p in err.problems]
    if cluster is not None and settings is not None:
        problems += gke_problems(cluster, settings) if settings.provider == "gke" else []
        problems += controller_problems(cluster) if settings.install_controllers else []
    if problems:
        raise pulumi.RunError(str(ConfigError(problems)))
    assert settings is not None and cluster is not None

    c = ClusterComponent(cluster.name, cluster, settings)
    outputs: dict[str, Any] = {
        "cluster": cluster.name,
        "jobNames": [jp.name for jp in c.plan.jobs],
        "coordinatorAddresses": {key: job.coordinator_address for key, job in c.jobs.items()},
        "nodePools": {name: [p.name for p in pools] for name, pools in c.node_pools.items()},
        "controllers": {name: ci.controller.tag for name, ci in c.controllers.items()},
    }
    if c.node_account is not None:
        outputs["nodeServiceAccount"] = c.node_account
    if buckets := sorted({str(jp.checkpoint_bucket) for jp in c.plan.jobs if jp.checkpoint_bucket}):
        outputs["checkpointBuckets"] = buckets
    if c.kubeconfig is not None:
        outputs["kubeconfig"] = c.kubeconfig
    for key, value in outputs.items():
        pulumi.export(key, value)
    return outputs
