"""The Pulumi adapter: `pulumi up` for the cluster (GKE node pools) plus the jobs that run on it.

Thin, like the cdk8s one (DESIGN §2): every name and number comes from `jaxinfra.plan.plan`, every
Kubernetes object from `jaxinfra.render`; this module only maps them onto Pulumi resources.

- `Cluster` (`jaxinfra:index:Cluster`): with provider `gke`, a `gcp.container.Cluster` (or an
  existing one looked up by name) and one `gcp.container.NodePool` per node pool of the spec, one
  per slice for multi-slice TPU jobs; with provider `existing`, no cloud resources, only a
  Kubernetes provider for a kubeconfig / context. Then the Namespaces, the Kueue queues (with
  `Cluster(kueue=True)`), and one `JaxJob` per job.
- `JaxJob` (`jaxinfra:index:JaxJob`): every object `render_job` yields, as a typed
  `pulumi_kubernetes` resource (a `CustomResource` for JobSet), with its name verbatim.

The one backend-specific change to the rendered objects (DESIGN §2, §5.7) is the annotation
`pulumi.com/skipAwait: "true"`, on the workload (Pulumi's Job awaiter would otherwise block until
training ends) and on the headless Service (pulumi-kubernetes' Service awaiter waits for endpoints
of a Service that has a selector, and those only exist once the workload's pods do: without it
`pulumi up` would time out; see provider/pkg/await/service.go, `emptyHeadlessOrExternalName`).

This is the only module of jaxinfra that imports pulumi; `jaxinfra synth` and `simulate` never
import it. Configuration (`read_settings`) is checked, and the stack loaded and checked, before any
resource is declared: one error lists every problem.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from jaxinfra.errors import JaxinfraError, Problem
from jaxinfra.plan import ClusterPlan, JobPlan, plan
from jaxinfra.render import render_job
from jaxinfra.render.common import namespace as render_namespace
from jaxinfra.render.kueue import kueue_objects

__all__ = ["Cluster", "ConfigError", "JaxJob", "PoolSlice", "Settings", "node_pools", "program", "read_settings"]

#: The annotation this adapter adds (see the module docstring); the value must be the string "true".
SKIP_AWAIT = "pulumi.com/skipAwait"
#: Kinds that run pods: they get SKIP_AWAIT and are replaced (not patched) when their spec changes.
WORKLOAD_KINDS = frozenset({"Job", "JobSet", "JAXJob", "TrainJob"})
#: Kinds that get SKIP_AWAIT although they are no workload (the headless Service, see above).
SKIP_AWAIT_KINDS = WORKLOAD_KINDS | {"Service"}

PROVIDERS = ("gke", "existing")
#: Machine type of a CPU pool that names none (`CPU(machine_type=...)`).
DEFAULT_CPU_MACHINE_TYPE = "e2-standard-4"
#: GKE's limit on node pool names.
MAX_POOL_NAME = 40
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
SPOT_LABEL = "cloud.google.com/gke-spot"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"

#: Where relative `jaxinfra:stack` paths are resolved: the folder of Pulumi.yaml (the repo root).
PROJECT_ROOT = Path(__file__).resolve().parents[1]


class ConfigError(JaxinfraError):
    """The Pulumi stack configuration is invalid."""

    kind = "invalid Pulumi config"


# --- configuration --------------------------------------------------------------------------

#: Every config key the program reads, with what it means (the README's table).
KEYS: dict[str, str] = {
    "jaxinfra:stack": "required: path of the stack file (.py), relative to the folder of Pulumi.yaml",
    "jaxinfra:provider": "required: gke (create node pools, and the cluster unless existingCluster) or existing (any cluster, by kubeconfig/context)",
    "gcp:project": "gke: the GCP project",
    "jaxinfra:location": "gke: region or zone of the cluster (default: gcp:zone, else gcp:region)",
    "jaxinfra:clusterName": "gke: the GKE cluster's name (default: the stack's Cluster name)",
    "jaxinfra:existingCluster": "gke: true to add node pools to an existing cluster named clusterName instead of creating one (default false)",
    "jaxinfra:nodeLocations": "gke: zones of the node pools, a list (default: the cluster's)",
    "jaxinfra:deletionProtection": "gke: GKE deletion protection of a created cluster (default false, so `pulumi destroy` works)",
    "jaxinfra:kubeconfig": "existing: kubeconfig path or contents (default: $KUBECONFIG / ~/.kube/config)",
    "jaxinfra:context": "existing: kubeconfig context (default: the current context)",
}
_GKE_ONLY = ("jaxinfra:location", "jaxinfra:clusterName", "jaxinfra:existingCluster", "jaxinfra:nodeLocations",
             "jaxinfra:deletionProtection")
_EXISTING_ONLY = ("jaxinfra:kubeconfig", "jaxinfra:context")


@dataclass(frozen=True)
class Settings:
    """The program's configuration, checked."""

    stack: Path
    provider: str
    project: str | None = None
    location: str | None = None
    cluster_name: str | None = None
    existing_cluster: bool = False
    node_locations: tuple[str, ...] = ()
    deletion_protection: bool = False
    kubeconfig: str | None = None
    context: str | None = None


def _bool(key: str, value: Any, problems: list[Problem]) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    if str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    problems.append(Problem(key, value, "not a boolean", "use true or false"))
    return False


def _zones(key: str, value: Any, problems: list[Problem]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = [z.strip() for z in value.split(",") if z.strip()]
    if not isinstance(value, list) or not all(isinstance(z, str) and z for z in value):
        problems.append(Problem(key, value, "not a list of zones", "e.g. `pulumi config set --path 'jaxinfra:nodeLocations[0]' us-east5-a`"))
        return ()
    return tuple(value)


def read_settings(config: Mapping[str, Any], root: Path = PROJECT_ROOT) -> Settings:
    """Check the stack configuration (`namespace:key` -> value); every problem in one `ConfigError`."""
    import difflib

    problems: list[Problem] = []
    for key in sorted(k for k in config if k.startswith("jaxinfra:") and k not in KEYS):
        close = difflib.get_close_matches(key, list(KEYS), n=1)
        problems.append(Problem(key, config[key], "unknown config key", f"did you mean {close[0]}?" if close else
                                f"use one of {', '.join(k for k in KEYS if k.startswith('jaxinfra:'))}"))
    get = lambda key: config.get(key) if config.get(key) not in ("", None) else None  # noqa: E731

    stack = get("jaxinfra:stack")
    path = Path(str(stack)) if stack else Path()
    if stack is None:
        problems.append(Problem("jaxinfra:stack", None, "missing", "`pulumi config set jaxinfra:stack stacks/<name>.py`"))
    else:
        path = path if path.is_absolute() else root / path
        if path.suffix != ".py" or not path.is_file():
            problems.append(Problem("jaxinfra:stack", stack, f"no stack file at {path}", "give the path of a .py stack file, relative to Pulumi.yaml"))

    provider = get("jaxinfra:provider")
    if provider not in PROVIDERS:
        problems.append(Problem("jaxinfra:provider", provider, "missing" if provider is None else "unknown provider",
                                f"use one of {', '.join(PROVIDERS)}"))
    other = {"gke": _EXISTING_ONLY, "existing": _GKE_ONLY}.get(str(provider), ())
    for key in other:
        if get(key) is not None:
            problems.append(Problem(key, get(key), f"not used with provider {provider}", "remove it, or change jaxinfra:provider"))

    project = location = None
    if provider == "gke":
        project = get("gcp:project")
        if project is None:
            problems.append(Problem("gcp:project", None, "missing (provider gke)", "`pulumi config set gcp:project <project>`"))
        location = get("jaxinfra:location") or get("gcp:zone") or get("gcp:region")
        if location is None:
            problems.append(Problem("jaxinfra:location", None, "missing (provider gke), and neither gcp:zone nor gcp:region is set",
                                    "`pulumi config set jaxinfra:location <region or zone>`, e.g. us-east5-a"))
    cluster_name = get("jaxinfra:clusterName")
    if cluster_name is not None and not re.fullmatch(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", str(cluster_name)):
        problems.append(Problem("jaxinfra:clusterName", cluster_name, "not a GKE cluster name",
                                "use at most 40 lower-case letters, digits and '-', starting with a letter"))
    settings = Settings(
        stack=path, provider=str(provider), project=project, location=location, cluster_name=cluster_name,
        existing_cluster=_bool("jaxinfra:existingCluster", get("jaxinfra:existingCluster"), problems),
        node_locations=_zones("jaxinfra:nodeLocations", get("jaxinfra:nodeLocations"), problems),
        deletion_protection=_bool("jaxinfra:deletionProtection", get("jaxinfra:deletionProtection"), problems),
        kubeconfig=get("jaxinfra:kubeconfig"), context=get("jaxinfra:context"),
    )
    if problems:
        raise ConfigError(problems)
    return settings


def pulumi_config() -> dict[str, Any]:
    """Every config value of the running Pulumi stack, keyed `namespace:key`."""
    from pulumi.runtime import config as rc

    keys = {**rc.get_config_env(), **rc.CONFIG.get()}
    return {k: rc.get_config(k) for k in keys}


# --- node pools -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolSlice:
    """One GKE node pool: a spec `NodePool`, or one slice of it for multi-slice TPU jobs."""

    pool: Any  # jaxinfra.spec.NodePool
    name: str
    node_count: int
    slice_index: int | None = None

    @property
    def row(self) -> Any:
        return self.pool.accelerator.row


def node_pools(cluster: Any, cp: ClusterPlan | None = None) -> dict[str, list[PoolSlice]]:
    """GKE node pools per spec pool: TPU, one per slice (max `slices` of its jobs), each of the
    topology's hosts; GPU/CPU, one of the max `nodes` of its jobs. Unused pools get one slice/node."""
    cp = cp or plan(cluster)
    out: dict[str, list[PoolSlice]] = {}
    for pool in cluster.node_pools:
        jobs = [jp for jp in cp.jobs if jp.pool.name == pool.name]
        row = pool.accelerator.row
        if row.kind == "tpu":
            slices = max((jp.slices for jp in jobs), default=1)
            out[pool.name] = ([PoolSlice(pool, pool.name, row.hosts)] if slices == 1 else
                              [PoolSlice(pool, f"{pool.name}-{i}", row.hosts, i) for i in range(slices)])
        else:
            out[pool.name] = [PoolSlice(pool, pool.name, max((jp.hosts_per_slice for jp in jobs), default=1))]
    return out


def pool_problems(pools: Mapping[str, list[PoolSlice]]) -> list[Problem]:
    """Derived GKE node pool names that GKE would refuse (over 40 characters with the slice suffix)."""
    out = []
    for i, (name, slices) in enumerate(pools.items()):
        longest = max((s.name for s in slices), key=len)
        if len(longest) > MAX_POOL_NAME:
            out.append(Problem(f"node_pools[{i}].name", name, f"derived GKE node pool name {longest!r} is {len(longest)} characters, over {MAX_POOL_NAME}",
                               f"shorten the name by at least {len(longest) - MAX_POOL_NAME} characters"))
    return out


def _node_config(ps: PoolSlice) -> gcp.container.NodePoolNodeConfigArgs:
    row, pool = ps.row, ps.pool
    machine_type = row.machine_type if row.kind != "cpu" else (pool.accelerator.machine_type or DEFAULT_CPU_MACHINE_TYPE)
    kw: dict[str, Any] = {"machine_type": machine_type, "oauth_scopes": [CLOUD_PLATFORM_SCOPE]}
    if row.kind == "gpu":
        kw["guest_accelerators"] = [gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
            type=row.gke_accelerator, count=row.chips_per_host,
            gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                gpu_driver_version="LATEST"),
        )]
    if pool.spot:  # the rendered pods select and tolerate this (render/common.py `_placement`)
        kw["spot"] = True
        kw["taints"] = [gcp.container.NodePoolNodeConfigTaintArgs(key=SPOT_LABEL, value="true", effect="NO_SCHEDULE")]
    if pool.reservation:
        kw["reservation_affinity"] = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="SPECIFIC_RESERVATION", key=RESERVATION_KEY, values=[pool.reservation])
    return gcp.container.NodePoolNodeConfigArgs(**kw)


# --- Kubernetes objects ---------------------------------------------------------------------

#: Typed pulumi_kubernetes classes for built-in kinds; anything else is a CustomResource.
_TYPED: dict[tuple[str, str], Any] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "Service"): k8s.core.v1.Service,
    ("batch/v1", "Job"): k8s.batch.v1.Job,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
}


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def logical_name(manifest: Mapping[str, Any]) -> str:
    """The Pulumi resource name: `namespace/name` (the type is part of the URN), as pulumi_kubernetes.yaml names them."""
    meta = manifest["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def with_skip_await(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the manifest with `pulumi.com/skipAwait: "true"` (the adapter's one annotation)."""
    meta = dict(manifest["metadata"])
    meta["annotations"] = {**meta.get("annotations", {}), SKIP_AWAIT: "true"}
    return {**manifest, "metadata": meta}


def k8s_resource(manifest: Mapping[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """One rendered manifest as a typed pulumi_kubernetes resource; fields passed as rendered."""
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    if kind in SKIP_AWAIT_KINDS:
        manifest = with_skip_await(manifest)
    if kind in WORKLOAD_KINDS:  # an immutable template: replace (delete first: the name is explicit), never patch
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(replace_on_changes=["spec"], delete_before_replace=True))
    fields = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
    cls = _TYPED.get((api_version, kind))
    if cls is None:
        return k8s.apiextensions.CustomResource(logical_name(manifest), api_version=api_version, kind=kind, opts=opts, **fields)
    return cls(logical_name(manifest), opts=opts, **{_snake(k): v for k, v in fields.items()})


# --- components -----------------------------------------------------------------------------


class JaxJob(pulumi.ComponentResource):
    """One job's objects (`render_job`): identity and DNS first, then the workload that needs them."""

    def __init__(self, name: str, jp: JobPlan, *, provider: pulumi.ProviderResource,
                 depends_on: Sequence[pulumi.Resource] = (), opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("jaxinfra:index:JaxJob", name, None, opts)
        self.plan = jp
        self.manifests = render_job(jp)
        self.resources: list[pulumi.CustomResource] = []
        before: list[pulumi.Resource] = []
        for m in self.manifests:
            deps = [*depends_on, *(before if m["kind"] in WORKLOAD_KINDS else [])]
            res = k8s_resource(m, pulumi.ResourceOptions(parent=self, provider=provider, depends_on=deps))
            self.resources.append(res)
            if m["kind"] not in WORKLOAD_KINDS:
                before.append(res)
        self.job_name = pulumi.Output.from_input(jp.name)
        self.coordinator_address = pulumi.Output.from_input(jp.coordinator_address)
        self.register_outputs({"job_name": self.job_name, "coordinator_address": self.coordinator_address})


def _kubeconfig(context: str, endpoint: str, ca: str) -> str:
    """A kubeconfig for a GKE cluster that authenticates with gke-gcloud-auth-plugin (as Pulumi's GKE examples do)."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "preferences": {}, "current-context": context,
        "clusters": [{"name": context, "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "users": [{"name": context, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "gke-gcloud-auth-plugin",
            "installHint": "Install gke-gcloud-auth-plugin: https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin",
            "provideClusterInfo": True}}}],
    }, indent=2)


class Cluster(pulumi.ComponentResource):
    """A cluster's node pools (provider gke), a Kubernetes provider, the Namespaces, the Kueue queues, and a
    `JaxJob` per job."""

    def __init__(self, name: str, cluster: Any, settings: Settings, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("jaxinfra:index:Cluster", name, None, opts)
        self.spec = cluster
        self.plan = cp = plan(cluster)
        self.node_pools: dict[str, list[gcp.container.NodePool]] = {}
        self.kubeconfig: pulumi.Output[str] | None = None
        child = pulumi.ResourceOptions(parent=self)
        if settings.provider == "gke":
            self.k8s_provider = self._gke(cluster, cp, settings, child)
        else:
            self.kubeconfig = pulumi.Output.secret(settings.kubeconfig) if settings.kubeconfig else None
            self.k8s_provider = k8s.Provider(f"{cluster.name}-k8s", kubeconfig=self.kubeconfig, context=settings.context,
                                             opts=child)
        on_k8s = pulumi.ResourceOptions(parent=self, provider=self.k8s_provider)
        self.namespaces = {ns: k8s_resource(render_namespace(ns, cp.pod_security), on_k8s) for ns in cp.namespaces}
        # Kueue (Cluster(kueue=True)): flavors, then the ClusterQueues naming them, then the LocalQueues the
        # workloads name; a workload whose LocalQueue is missing would wait, suspended, for nothing.
        self.queues: list[pulumi.CustomResource] = []
        for m in kueue_objects(cp.queues):
            ns = m["metadata"].get("namespace")
            deps = [*self.queues, *([self.namespaces[ns]] if ns in self.namespaces else [])]
            self.queues.append(k8s_resource(m, pulumi.ResourceOptions.merge(on_k8s, pulumi.ResourceOptions(depends_on=deps))))
        self.jobs: dict[str, JaxJob] = {}
        for jp in cp.jobs:
            deps = [*([self.namespaces[jp.namespace]] if jp.namespace in self.namespaces else []),
                    *self.node_pools.get(jp.pool.name, []), *self.queues]
            self.jobs[f"{jp.namespace}/{jp.name}"] = JaxJob(f"{jp.namespace}/{jp.name}", jp, provider=self.k8s_provider,
                                                            depends_on=deps, opts=child)
        self.register_outputs({"kubeconfig": self.kubeconfig})

    def _gke(self, cluster: Any, cp: ClusterPlan, s: Settings, child: pulumi.ResourceOptions) -> k8s.Provider:
        gke_name = s.cluster_name or cluster.name
        if s.existing_cluster:
            found = gcp.container.get_cluster_output(name=gke_name, location=s.location, project=s.project,
                                                     opts=pulumi.InvokeOptions(parent=self))
            cluster_ref: Any = gke_name
            endpoint, ca = found.endpoint, found.master_auths.apply(lambda auths: auths[0].cluster_ca_certificate)
        else:
            gke = gcp.container.Cluster(
                gke_name, name=gke_name, project=s.project, location=s.location,
                remove_default_node_pool=True, initial_node_count=1, deletion_protection=s.deletion_protection,
                opts=child)
            self.gke_cluster = gke
            cluster_ref = gke.name
            endpoint, ca = gke.endpoint, gke.master_auth.apply(lambda auth: auth.cluster_ca_certificate)
        for pool_name, slices in node_pools(cluster, cp).items():
            self.node_pools[pool_name] = [self._node_pool(ps, cluster_ref, s, child) for ps in slices]
        context = f"gke_{s.project}_{s.location}_{gke_name}"  # gcloud's context name
        self.kubeconfig = pulumi.Output.secret(pulumi.Output.all(endpoint, ca).apply(lambda a: _kubeconfig(context, a[0], a[1])))
        return k8s.Provider(f"{cluster.name}-k8s", kubeconfig=self.kubeconfig, opts=child)

    def _node_pool(self, ps: PoolSlice, cluster_ref: Any, s: Settings, child: pulumi.ResourceOptions) -> gcp.container.NodePool:
        row = ps.row
        placement = (gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT", tpu_topology=row.topology)
                     if row.kind == "tpu" and row.multi_host else None)
        return gcp.container.NodePool(
            ps.name, name=ps.name, cluster=cluster_ref, project=s.project, location=s.location,
            node_locations=list(s.node_locations) or None, node_count=ps.node_count,
            node_config=_node_config(ps), placement_policy=placement,
            # A named pool cannot coexist with its replacement: delete first.
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(delete_before_replace=True)))


# --- the program ----------------------------------------------------------------------------


def program(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The Pulumi program (Pulumi.yaml's `main` calls this): check config and stack, declare, export.

    Every configuration and stack problem is raised as one `pulumi.RunError` before any resource
    is declared. Returns the exported outputs.
    """
    from jaxinfra import stack

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
            stack_path = PROJECT_ROOT / stack_path
    else:
        stack_path = settings.stack
    if stack_path is not None and stack_path.suffix == ".py" and stack_path.is_file():
        try:
            cluster = stack.load(stack_path)
        except JaxinfraError as err:
            problems += [Problem(f"{config.get('jaxinfra:stack')}: {p.path}", p.value, p.message, p.fix) for p in err.problems]
    if cluster is not None and settings is not None and settings.provider == "gke":
        problems += pool_problems(node_pools(cluster))
    if problems:
        raise pulumi.RunError(str(ConfigError(problems)))
    assert settings is not None and cluster is not None

    c = Cluster(cluster.name, cluster, settings)
    outputs: dict[str, Any] = {
        "cluster": cluster.name,
        "jobNames": [jp.name for jp in c.plan.jobs],
        "coordinatorAddresses": {key: job.coordinator_address for key, job in c.jobs.items()},
        "nodePools": {name: [p.name for p in pools] for name, pools in c.node_pools.items()},
    }
    if c.kubeconfig is not None:
        outputs["kubeconfig"] = c.kubeconfig
    for key, value in outputs.items():
        pulumi.export(key, value)
    return outputs
