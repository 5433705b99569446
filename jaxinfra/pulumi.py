"""The Pulumi adapter: `pulumi up` for the cluster (GKE node pools) plus the jobs that run on it.

Thin, like the cdk8s one (DESIGN §2): every name and number comes from `jaxinfra.plan.plan`, every
Kubernetes object from `jaxinfra.render`, every controller version from `jaxinfra.controllers`;
this module only maps them onto Pulumi resources.

- `Cluster` (`jaxinfra:index:Cluster`): with provider `gke`, a `gcp.container.Cluster` (or an
  existing one looked up by name and checked) with NetworkPolicy enforcement, Workload Identity,
  Shielded GKE Nodes and a release channel; a dedicated node service account with GKE's
  least-privilege role; one `gcp.container.NodePool` per node pool of the spec (one per slice for
  multi-slice TPU jobs), every accelerator pool in one zone, or with `jaxinfra:shadow` one CPU pool
  sized for the stack's CPU shadow; a `system` CPU pool for the controllers; the Cloud Storage
  buckets the jobs checkpoint to, each job's access to its bucket, and GKE's Cloud Storage FUSE CSI
  driver. With provider `existing`, no cloud resources, only a Kubernetes provider for a
  kubeconfig / context. Then the controllers the objects need (`ControllerInstall`), the
  Namespaces, the Kueue queues (with `Cluster(kueue=True)`), and one `JaxJob` per job.
- `JaxJob` (`jaxinfra:index:JaxJob`): every object `render_job` yields, as a typed
  `pulumi_kubernetes` resource (a `CustomResource` for JobSet), with its name verbatim.

The one backend-specific change to the rendered objects (DESIGN §2, §5.7) is the annotation
`pulumi.com/skipAwait: "true"`, on the workload (Pulumi's Job awaiter would otherwise block until
training ends), on the headless Service (pulumi-kubernetes' Service awaiter waits for endpoints
of a Service that has a selector, and those only exist once the workload's pods do: without it
`pulumi up` would time out; see provider/pkg/await/service.go, `emptyHeadlessOrExternalName`) and
on the checkpoints' PersistentVolumeClaim (its awaiter waits for the claim to bind, which a
`WaitForFirstConsumer` class does only once the workload's pods exist: pulumi/pulumi-kubernetes#895,
#3130 for the first `pulumi up`, #4179 for later updates).

This is the only module of jaxinfra that imports pulumi; `jaxinfra synth` and `simulate` never
import it. Configuration (`read_settings`) is checked, and the stack loaded and checked against
it (`gke_problems`, `controller_problems`), before any resource is declared: one error lists
every problem. What the cluster must already have is said as warnings (`prerequisites`,
`existing_cluster_gaps`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from jaxinfra import controllers
from jaxinfra.errors import JaxinfraError, Problem
from jaxinfra.plan import ClusterPlan, JobPlan, plan, scale
from jaxinfra.render import render_job
from jaxinfra.render.common import namespace as render_namespace
from jaxinfra.render.kueue import kueue_objects

__all__ = ["Cluster", "ConfigError", "ControllerInstall", "JaxJob", "PoolSlice", "Settings", "node_pools", "program",
           "read_settings"]

#: The annotation this adapter adds (see the module docstring); the value must be the string "true".
SKIP_AWAIT = "pulumi.com/skipAwait"
#: Kinds that run pods: they get SKIP_AWAIT and are replaced (not patched) when their spec changes.
WORKLOAD_KINDS = frozenset({"Job", "JobSet", "JAXJob", "TrainJob"})
#: Kinds that get SKIP_AWAIT although they are no workload (the headless Service and the claim, see above).
SKIP_AWAIT_KINDS = WORKLOAD_KINDS | {"Service", "PersistentVolumeClaim"}

PROVIDERS = ("gke", "existing")
#: Machine type of a CPU pool that names none (`CPU(machine_type=...)`).
DEFAULT_CPU_MACHINE_TYPE = "e2-standard-4"
#: GKE's limit on node pool names.
MAX_POOL_NAME = 40
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
SPOT_LABEL = "cloud.google.com/gke-spot"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
#: The node pool for the controllers and kube-system (`Cluster._system_pool`), and its nodes per zone (autoscaled).
SYSTEM_POOL = "system"
SYSTEM_POOL_NODES = (1, 3)
#: Project roles of the dedicated node service account (`Cluster._node_account`).
NODE_ROLES = ("roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader")
#: What a job's Kubernetes ServiceAccount gets on its checkpoint bucket: read and write objects (and an HNS
#: bucket's folders), GKE's role for a read-write Cloud Storage FUSE volume (how-to/cloud-storage-fuse-csi-driver-setup,
#: "Configure access"; gcs-fuse-csi-driver docs/authentication.md).
BUCKET_ROLE = "roles/storage.objectUser"
#: `jaxinfra:shadow`: the one CPU node pool the shadow runs on, and its machine: e2-standard-4, 4 vCPUs and 16 GiB
#: (Compute Engine's machine types: `memoryMb: 16384`).
SHADOW_POOL = "shadow"
SHADOW_MACHINE = (DEFAULT_CPU_MACHINE_TYPE, 4, 16 * 2**30)
#: Room left on every shadow node for the DaemonSets GKE runs on each node (logging, metrics, Workload Identity's
#: metadata server, networking), whose requests vary with GKE's version and add-ons: jaxinfra's margin, not a GKE figure.
SHADOW_DAEMONS = (Decimal("0.5"), Decimal(512 * 2**20))
#: Pods per node in a GKE Standard node pool unless configured (how-to/flexible-pod-cidr).
MAX_PODS_PER_NODE = 110

#: Where relative `jaxinfra:stack` paths are resolved: the folder of Pulumi.yaml (the repo root).
PROJECT_ROOT = Path(__file__).resolve().parents[1]


class ConfigError(JaxinfraError):
    """The Pulumi stack configuration is invalid."""

    kind = "invalid Pulumi config"


# --- configuration --------------------------------------------------------------------------

#: Every config key the program reads, with what it means (the README's table; a test keeps them equal).
KEYS: dict[str, str] = {
    "jaxinfra:stack": "required: path of the stack file (.py), relative to the folder of Pulumi.yaml",
    "jaxinfra:provider": "required: gke (create node pools, and the cluster unless existingCluster) or existing (any cluster, by kubeconfig/context)",
    "jaxinfra:installControllers": "both: install the controllers the stack's objects need, at the versions jaxinfra.controllers pins (default true with gke, false with existing)",
    "jaxinfra:shadow": "both: cpu to deploy the stack's CPU shadow (jaxinfra.shadow) instead of its jobs: no accelerator pools, and with gke one CPU node pool `shadow` sized for every pod's requests (default: unset, the jobs as declared)",
    "gcp:project": "gke: the GCP project",
    "gcp:zone": "gke: the location when jaxinfra:location is unset; with a regional location, the zone of the accelerator pools",
    "gcp:region": "gke: the location when neither jaxinfra:location nor gcp:zone is set",
    "jaxinfra:location": "gke: region or zone of the cluster (default: gcp:zone, else gcp:region)",
    "jaxinfra:nodeLocations": "gke: zones of the node pools, a list (default: the cluster's); with one zone, the accelerator pools' zone",
    "jaxinfra:clusterName": "gke: the GKE cluster's name (default: the stack's Cluster name)",
    "jaxinfra:existingCluster": "gke: true to add node pools to an existing cluster named clusterName instead of creating one (default false)",
    "jaxinfra:deletionProtection": "gke: GKE deletion protection of a created cluster (default false, so `pulumi destroy` works)",
    "jaxinfra:networkPolicy": "gke: NetworkPolicy enforcement of a created cluster: dataplaneV2 (default), calico (the network policy add-on) or none; with existingCluster, what the cluster is checked for",
    "jaxinfra:workloadIdentity": "gke: Workload Identity: the pool <project>.svc.id.goog on a created cluster, GKE_METADATA on the node pools (default true)",
    "jaxinfra:nodeServiceAccount": "gke: the node pools' service account: unset, a dedicated one with the least-privilege roles; an email, that account; default, Compute Engine's default account",
    "jaxinfra:shieldedNodes": "gke: Shielded GKE Nodes on a created cluster, integrity monitoring on every node pool and secure boot on CPU pools (default true)",
    "jaxinfra:releaseChannel": "gke: release channel of a created cluster: RAPID, REGULAR (default), STABLE, EXTENDED or UNSPECIFIED (none)",
    "jaxinfra:systemPool": "gke: machine type of the autoscaled `system` node pool (1 to 3 nodes per zone) for the controllers and kube-system, or none (default e2-standard-4; none with existingCluster)",
    "jaxinfra:createBuckets": "gke: create the Cloud Storage buckets the jobs checkpoint to (in the cluster's region, uniform access, hierarchical namespace, kept by `pulumi destroy`); false: they exist, and only the jobs' access is granted (default true)",
    "jaxinfra:kubeconfig": "existing: kubeconfig path or contents (default: $KUBECONFIG / ~/.kube/config)",
    "jaxinfra:context": "existing: kubeconfig context (default: the current context)",
}
_GKE_ONLY = ("jaxinfra:location", "jaxinfra:nodeLocations", "jaxinfra:clusterName", "jaxinfra:existingCluster",
             "jaxinfra:deletionProtection", "jaxinfra:networkPolicy", "jaxinfra:workloadIdentity",
             "jaxinfra:nodeServiceAccount", "jaxinfra:shieldedNodes", "jaxinfra:releaseChannel", "jaxinfra:systemPool",
             "jaxinfra:createBuckets")
_EXISTING_ONLY = ("jaxinfra:kubeconfig", "jaxinfra:context")

NETWORK_POLICIES = ("dataplaneV2", "calico", "none")
#: GKE's release channels (pulumi-gcp `ClusterReleaseChannelArgs.channel`); UNSPECIFIED: none.
RELEASE_CHANNELS = ("RAPID", "REGULAR", "STABLE", "EXTENDED", "UNSPECIFIED")
#: `jaxinfra:shadow`: the kinds of shadow `jaxinfra.shadow` renders.
SHADOWS = ("cpu",)
_REGION = r"[a-z]+-[a-z]+[0-9]+"
_ZONE = _REGION + r"-[a-z]"


def is_zone(location: str | None) -> bool:
    return location is not None and re.fullmatch(_ZONE, location) is not None


def region_of(location: str) -> str:
    """`us-central1` of `us-central1-a` (and of itself)."""
    return location.rsplit("-", 1)[0] if is_zone(location) else location


@dataclass(frozen=True)
class Settings:
    """The program's configuration, checked; the defaults are the documented ones (KEYS)."""

    stack: Path
    provider: str
    project: str | None = None
    location: str | None = None
    zone: str | None = None  # gcp:zone
    cluster_name: str | None = None
    existing_cluster: bool = False
    node_locations: tuple[str, ...] = ()
    deletion_protection: bool = False
    network_policy: str = "dataplaneV2"
    workload_identity: bool = True
    node_service_account: str | None = None  # None: jaxinfra creates one; "default": Compute Engine's
    shielded_nodes: bool = True
    release_channel: str = "REGULAR"
    system_pool: str | None = DEFAULT_CPU_MACHINE_TYPE  # the system pool's machine type; None: no system pool
    install_controllers: bool = True
    kubeconfig: str | None = None
    context: str | None = None
    shadow: str | None = None  # "cpu": deploy the stack's CPU shadow
    create_buckets: bool = True

    @property
    def accelerator_zone(self) -> str | None:
        """The one zone of the TPU and GPU pools: a single nodeLocations entry, a zonal location, or gcp:zone."""
        if len(self.node_locations) == 1:
            return self.node_locations[0]
        return self.location if is_zone(self.location) else self.zone


def _bool(key: str, value: Any, problems: list[Problem], default: bool = False) -> bool:
    if value is None or isinstance(value, bool):
        return default if value is None else value
    if str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    problems.append(Problem(key, value, "not a boolean", "use true or false"))
    return default


def _choice(key: str, value: Any, allowed: Sequence[str], default: Any, problems: list[Problem]) -> Any:
    if value is None:
        return default
    if value not in allowed:
        problems.append(Problem(key, value, "not one of the choices", f"use one of {', '.join(allowed)}"))
        return default
    return str(value)


def _zones(key: str, value: Any, problems: list[Problem]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = [z.strip() for z in value.split(",") if z.strip()]
    if not isinstance(value, list) or not all(isinstance(z, str) and re.fullmatch(_ZONE, z) for z in value):
        problems.append(Problem(key, value, "not a list of zones", "e.g. `pulumi config set --path 'jaxinfra:nodeLocations[0]' us-east5-a`"))
        return ()
    return tuple(value)


def _location(config: Callable[[str], Any], node_locations: tuple[str, ...], problems: list[Problem]) -> str | None:
    """The cluster's location (provider gke), with the zones of nodeLocations in its region."""
    key = next((k for k in ("jaxinfra:location", "gcp:zone", "gcp:region") if config(k) is not None), None)
    if key is None:
        problems.append(Problem("jaxinfra:location", None, "missing (provider gke), and neither gcp:zone nor gcp:region is set",
                                "`pulumi config set jaxinfra:location <region or zone>`, e.g. us-east5-a"))
        return None
    location = str(config(key))
    if not re.fullmatch(f"{_REGION}(-[a-z])?", location):
        problems.append(Problem(key, location, "not a GCP region or zone", "e.g. us-central1 (a region) or us-central1-a (a zone)"))
        return location
    outside = [z for z in node_locations if region_of(z) != region_of(location)]
    if outside:
        problems.append(Problem("jaxinfra:nodeLocations", list(node_locations), f"{', '.join(outside)} not in region {region_of(location)} of the cluster",
                                f"use zones of {region_of(location)}, e.g. {region_of(location)}-a"))
    return location


_SERVICE_ACCOUNT = r"[^@\s]+@[-a-z0-9.]+\.gserviceaccount\.com"
_MACHINE_TYPE = r"[a-z][a-z0-9]*-[-a-z0-9]+"


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

    node_locations = _zones("jaxinfra:nodeLocations", get("jaxinfra:nodeLocations"), problems)
    project = location = None
    if provider == "gke":
        project = get("gcp:project")
        if project is None:
            problems.append(Problem("gcp:project", None, "missing (provider gke)", "`pulumi config set gcp:project <project>`"))
        location = _location(get, node_locations, problems)
    cluster_name = get("jaxinfra:clusterName")
    if cluster_name is not None and not re.fullmatch(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", str(cluster_name)):
        problems.append(Problem("jaxinfra:clusterName", cluster_name, "not a GKE cluster name",
                                "use at most 40 lower-case letters, digits and '-', starting with a letter"))
    account = get("jaxinfra:nodeServiceAccount")
    if account not in (None, "default") and not re.fullmatch(_SERVICE_ACCOUNT, str(account)):
        problems.append(Problem("jaxinfra:nodeServiceAccount", account, "not a service account email",
                                "give <name>@<project>.iam.gserviceaccount.com, `default`, or unset it for a dedicated one"))
    existing_cluster = _bool("jaxinfra:existingCluster", get("jaxinfra:existingCluster"), problems)
    system_pool = get("jaxinfra:systemPool") or (DEFAULT_CPU_MACHINE_TYPE if provider == "gke" and not existing_cluster else None)
    if system_pool == "none":
        system_pool = None
    elif system_pool is not None and not re.fullmatch(_MACHINE_TYPE, str(system_pool)):
        problems.append(Problem("jaxinfra:systemPool", system_pool, "not a machine type", f"e.g. {DEFAULT_CPU_MACHINE_TYPE}, or none"))
    settings = Settings(
        stack=path, provider=str(provider), project=project, location=location, zone=get("gcp:zone"),
        cluster_name=cluster_name, existing_cluster=existing_cluster, node_locations=node_locations,
        deletion_protection=_bool("jaxinfra:deletionProtection", get("jaxinfra:deletionProtection"), problems),
        network_policy=_choice("jaxinfra:networkPolicy", get("jaxinfra:networkPolicy"), NETWORK_POLICIES, "dataplaneV2", problems),
        workload_identity=_bool("jaxinfra:workloadIdentity", get("jaxinfra:workloadIdentity"), problems, default=True),
        node_service_account=account,
        shielded_nodes=_bool("jaxinfra:shieldedNodes", get("jaxinfra:shieldedNodes"), problems, default=True),
        release_channel=_choice("jaxinfra:releaseChannel", get("jaxinfra:releaseChannel"), RELEASE_CHANNELS, "REGULAR", problems),
        system_pool=system_pool,
        install_controllers=_bool("jaxinfra:installControllers", get("jaxinfra:installControllers"), problems,
                                  default=provider == "gke"),
        kubeconfig=get("jaxinfra:kubeconfig"), context=get("jaxinfra:context"),
        shadow=_choice("jaxinfra:shadow", get("jaxinfra:shadow"), SHADOWS, None, problems),
        create_buckets=_bool("jaxinfra:createBuckets", get("jaxinfra:createBuckets"), problems, default=True),
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
    topology's hosts; GPU/CPU, one of the max `nodes` of its jobs. Unused pools get one slice/node.
    A CPU shadow (`Cluster(shadow=...)`) gets none of these but one CPU pool sized for it (`shadow_nodes`).

    `node_count` is per zone (pulumi-gcp `container.NodePool.node_count`: "the number of nodes per
    instance group", one instance group per zone; GKE docs, concepts/regional-clusters), so these
    counts are the hosts only in one zone: the accelerator pools' (`Settings.accelerator_zone`).
    """
    cp = cp or plan(cluster)
    if cp.shadow is not None:
        from jaxinfra.spec import NodePool

        pool = NodePool.model_validate({"name": SHADOW_POOL, "accelerator": {"kind": "cpu", "machine_type": SHADOW_MACHINE[0]}})
        return {SHADOW_POOL: [PoolSlice(pool, SHADOW_POOL, max(shadow_nodes(cp), 1))]}
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


def _gke_reserved(cores: int, memory: int) -> tuple[Decimal, Decimal]:
    """What GKE keeps of a node for itself (GKE docs, concepts/plan-node-sizes, "node allocatable"): CPU, 6% of the
    first core, 1% of the next, 0.5% of the next 2 and 0.25% of any above 4; memory, 25% of the first 4 GiB, 20% of
    the next 4, 10% of the next 8, 6% of the next 112 and 2% above 128, plus 100 MiB for the kubelet's eviction."""
    def tiers(amount: Decimal, steps: Sequence[tuple[Decimal, str]]) -> Decimal:
        total, left = Decimal(0), amount
        for size, share in steps:
            part = min(left, size)
            total, left = total + part * Decimal(share), left - part
        return total

    gib = Decimal(2**30)
    cpu = tiers(Decimal(cores), [(Decimal(1), "0.06"), (Decimal(1), "0.01"), (Decimal(2), "0.005"), (Decimal(cores), "0.0025")])
    mem = tiers(Decimal(memory), [(4 * gib, "0.25"), (4 * gib, "0.20"), (8 * gib, "0.10"), (112 * gib, "0.06"),
                                  (Decimal(memory), "0.02")]) + 100 * 2**20
    return cpu, mem


def shadow_pods_per_node(shadow: Any) -> int:
    """How many pods of a CPU shadow (each requesting `shadow.cpu`, `shadow.memory`) one shadow node holds: its
    allocatable, less GKE's share and room for GKE's DaemonSets, at most MAX_PODS_PER_NODE."""
    _, cores, memory = SHADOW_MACHINE
    reserved_cpu, reserved_memory = _gke_reserved(cores, memory)
    free = (cores - reserved_cpu - SHADOW_DAEMONS[0], memory - reserved_memory - SHADOW_DAEMONS[1])
    each = (scale(shadow.cpu, 1)[0], scale(shadow.memory, 1)[0])  # in cores and bytes
    return min([*(int(room // request) for room, request in zip(free, each) if request > 0), MAX_PODS_PER_NODE])


def shadow_nodes(cp: ClusterPlan) -> int:
    """Nodes of the shadow pool: every pod of every job at once (what `jaxinfra.shadow.requests` adds up), packed."""
    pods = sum(jp.processes for jp in cp.jobs)
    per_node = shadow_pods_per_node(cp.shadow)
    return math.ceil(pods / per_node) if per_node else 0


def workload_principal(project_number: str, project: str, namespace: str, service_account: str) -> str:
    """The IAM principal of a Kubernetes ServiceAccount under Workload Identity Federation for GKE (GKE docs,
    how-to/workload-identity: `principal://.../subject/ns/NAMESPACE/sa/KSA`): no Google service account to impersonate."""
    return (f"principal://iam.googleapis.com/projects/{project_number}/locations/global/workloadIdentityPools/"
            f"{project}.svc.id.goog/subject/ns/{namespace}/sa/{service_account}")


def gke_problems(cluster: Any, s: Settings) -> list[Problem]:
    """What GKE would refuse, or build wrong, for this stack and config: pool names over 40 characters
    (slice suffix included) or taken by the system pool, accelerator pools without one zone, shadow pods
    no shadow node can hold, and checkpoint buckets without Workload Identity."""
    out = []
    cp = plan(cluster)
    pools = node_pools(cluster, cp)
    for i, (name, slices) in enumerate(pools.items()):
        longest = max((ps.name for ps in slices), key=len)
        if len(longest) > MAX_POOL_NAME:
            out.append(Problem(f"node_pools[{i}].name", name, f"derived GKE node pool name {longest!r} is {len(longest)} characters, over {MAX_POOL_NAME}",
                               f"shorten the name by at least {len(longest) - MAX_POOL_NAME} characters"))
        if s.system_pool and SYSTEM_POOL in (ps.name for ps in slices):
            out.append(Problem(f"node_pools[{i}].name", name, f"{SYSTEM_POOL!r} is the name of jaxinfra's system pool",
                               "rename the node pool, or set jaxinfra:systemPool none"))
    accelerators = [name for name, slices in pools.items() if slices[0].row.kind != "cpu"]
    zone = s.accelerator_zone
    if accelerators and s.location and zone is None:
        # One zone: a multi-host TPU slice is one unit of interconnected VMs in one zone (cloud.google.com/tpu/docs/tpus-in-gke),
        # and node_count is per zone, so a regional pool would hold node_count nodes in every zone of the region.
        out.append(Problem("jaxinfra:nodeLocations", list(s.node_locations) or None,
                           f"accelerator node pools ({', '.join(accelerators)}) need one zone, and {s.location} is a region "
                           f"(node_count is per zone: each pool would get its hosts in every zone of {s.location})",
                           f"`pulumi config set --path 'jaxinfra:nodeLocations[0]' {region_of(s.location)}-<zone>` with a zone "
                           "that has the capacity, or a zonal jaxinfra:location"))
    elif accelerators and s.location and region_of(zone or "") != region_of(s.location):
        out.append(Problem("gcp:zone", zone, f"the accelerator pools' zone is not in region {region_of(s.location)} of the cluster",
                           f"set jaxinfra:nodeLocations to one zone of {region_of(s.location)}"))
    if cp.shadow is not None and not shadow_pods_per_node(cp.shadow):
        out.append(Problem("jaxinfra:shadow", s.shadow, f"a shadow pod requests {cp.shadow.cpu} CPU and {cp.shadow.memory}, more "
                           f"than one {SHADOW_MACHINE[0]} node of the shadow pool can give it",
                           "request less: Cluster(shadow=Shadow(cpu=..., memory=...))"))
    buckets = [f"{jp.namespace}/{jp.name}" for jp in cp.jobs if jp.checkpoint_bucket]
    if buckets and not s.workload_identity:
        out.append(Problem("jaxinfra:workloadIdentity", False, f"jobs {', '.join(buckets)} checkpoint to Cloud Storage through "
                           "GKE's Cloud Storage FUSE CSI driver, which authenticates their ServiceAccounts with Workload Identity",
                           "unset jaxinfra:workloadIdentity (true), or checkpoint to a PVC"))
    return out


def _base_node_config(s: Settings, account: pulumi.Input[str] | None, machine_type: str, secure_boot: bool) -> dict[str, Any]:
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
            enable_integrity_monitoring=True, enable_secure_boot=secure_boot)
    return kw


def _node_config(ps: PoolSlice, s: Settings, account: pulumi.Input[str] | None) -> gcp.container.NodePoolNodeConfigArgs:
    """A pool's machines. Secure boot only on CPU pools: GPU nodes load the NVIDIA driver as an out-of-tree
    kernel module (GKE docs, security/secure-modules-cos), and GKE documents secure boot for TPU VMs nowhere."""
    row, pool = ps.row, ps.pool
    machine_type = row.machine_type if row.kind != "cpu" else (pool.accelerator.machine_type or DEFAULT_CPU_MACHINE_TYPE)
    kw = _base_node_config(s, account, machine_type, secure_boot=row.kind == "cpu")
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
    ("v1", "PersistentVolumeClaim"): k8s.core.v1.PersistentVolumeClaim,
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
    """One job's objects (`render_job`): identity and DNS first, then the workload that needs them; an
    object of a custom kind after its controller (`serving`: kind -> the install it waits for)."""

    def __init__(self, name: str, jp: JobPlan, *, provider: pulumi.ProviderResource,
                 depends_on: Sequence[pulumi.Resource] = (), serving: Mapping[str, Sequence[pulumi.Resource]] | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("jaxinfra:index:JaxJob", name, None, opts)
        self.plan = jp
        self.manifests = render_job(jp)
        self.resources: list[pulumi.CustomResource] = []
        before: list[pulumi.Resource] = []
        for m in self.manifests:
            deps = [*depends_on, *(serving or {}).get(m["kind"], ()), *(before if m["kind"] in WORKLOAD_KINDS else [])]
            res = k8s_resource(m, pulumi.ResourceOptions(parent=self, provider=provider, depends_on=deps))
            self.resources.append(res)
            if m["kind"] not in WORKLOAD_KINDS:
                before.append(res)
        self.job_name = pulumi.Output.from_input(jp.name)
        self.coordinator_address = pulumi.Output.from_input(jp.coordinator_address)
        self.register_outputs({"job_name": self.job_name, "coordinator_address": self.coordinator_address})


class ControllerInstall(pulumi.ComponentResource):
    """One controller of `jaxinfra.controllers`: its Helm chart in its namespace, or its release manifests,
    through the provider-side components of pulumi-kubernetes (`helm.v4.Chart`, `kustomize.v2.Directory`:
    the provider fetches and renders them, and awaits their Deployments, so the webhooks answer before
    any object of theirs is created). Trainer also gets its `jax-distributed` runtime when a TrainJob names it."""

    def __init__(self, c: controllers.Controller, cp: ClusterPlan, *, provider: pulumi.ProviderResource,
                 depends_on: Sequence[pulumi.Resource], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("jaxinfra:index:Controller", c.name, None, opts)
        self.controller = c
        on = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=list(depends_on))
        if c.chart:
            ns = k8s.core.v1.Namespace(c.namespace, metadata={"name": c.namespace}, opts=on)
            self.install: pulumi.Resource = k8s.helm.v4.Chart(
                c.name, chart=c.chart, version=c.version, namespace=c.namespace, values=controllers.helm_values(c, cp),
                opts=pulumi.ResourceOptions.merge(on, pulumi.ResourceOptions(depends_on=[ns])))
        else:
            self.install = k8s.kustomize.v2.Directory(c.name, directory=c.directory, opts=on)
        self.resources = [self.install]
        if c is controllers.TRAINER and controllers.TRAINER_JAX_RUNTIME in controllers.referenced_runtimes(cp):
            self.resources.append(k8s.yaml.v2.ConfigFile(
                controllers.TRAINER_JAX_RUNTIME, file=controllers.TRAINER_JAX_RUNTIME_FILE,
                opts=pulumi.ResourceOptions.merge(on, pulumi.ResourceOptions(depends_on=[self.install]))))
        self.register_outputs({"version": c.tag})


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


def node_account_id(gke_name: str) -> str:
    """The dedicated node service account's id: 6 to 30 characters, as IAM requires."""
    return f"{gke_name[:24].rstrip('-')}-nodes"


def _cluster_security(s: Settings) -> dict[str, Any]:
    """A created cluster's security settings (each a config key to opt out).

    - NetworkPolicy enforcement: "Kubernetes network policy is always on in clusters with GKE
      Dataplane V2" (GKE docs, concepts/dataplane-v2: `datapath_provider = ADVANCED_DATAPATH`, set at
      creation only); calico is the legacy network policy add-on plus enforcement (how-to/network-policy).
    - Workload Identity: the pool `<project>.svc.id.goog` (how-to/workload-identity).
    - Shielded GKE Nodes and a release channel (how-to/hardening-your-cluster; concepts/release-channels).
    """
    kw: dict[str, Any] = {"enable_shielded_nodes": s.shielded_nodes,
                          "release_channel": gcp.container.ClusterReleaseChannelArgs(channel=s.release_channel)}
    if s.workload_identity:
        kw["workload_identity_config"] = gcp.container.ClusterWorkloadIdentityConfigArgs(workload_pool=f"{s.project}.svc.id.goog")
    if s.network_policy == "dataplaneV2":
        kw["datapath_provider"] = "ADVANCED_DATAPATH"
    elif s.network_policy == "calico":
        kw["network_policy"] = gcp.container.ClusterNetworkPolicyArgs(enabled=True, provider="CALICO")
    return kw


def _addons(s: Settings, fuse: bool) -> gcp.container.ClusterAddonsConfigArgs | None:
    """A created cluster's add-ons: the network policy add-on for calico (how-to/network-policy), and GKE's Cloud Storage
    FUSE CSI driver when a job checkpoints to a bucket (off by default on Standard clusters: `addonsConfig.
    gcsFuseCsiDriverConfig.enabled`, how-to/cloud-storage-fuse-csi-driver-setup)."""
    kw: dict[str, Any] = {}
    if s.network_policy == "calico":
        kw["network_policy_config"] = gcp.container.ClusterAddonsConfigNetworkPolicyConfigArgs(disabled=False)
    if fuse:
        kw["gcs_fuse_csi_driver_config"] = gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(enabled=True)
    return gcp.container.ClusterAddonsConfigArgs(**kw) if kw else None


def existing_cluster_gaps(found: Any, s: Settings, network_policies: bool, fuse: bool = False) -> list[str]:
    """What an existing GKE cluster lacks of what the config asks for (`getCluster`'s result); one line each."""
    name, where = found.name, f"--location {s.location} --project {s.project}"
    out = []
    enforced = found.datapath_provider == "ADVANCED_DATAPATH" or any(p.enabled for p in found.network_policies or ())
    if network_policies and s.network_policy != "none" and not enforced:
        out.append(f"GKE cluster {name} enforces no NetworkPolicy (neither Dataplane V2 nor the network policy add-on): the jobs' "
                   f"NetworkPolicies are ignored. Enable it (`gcloud container clusters update {name} {where} "
                   "--update-addons=NetworkPolicy=ENABLED`, then `--enable-network-policy`) or set jaxinfra:networkPolicy none")
    if s.workload_identity and not any(c.workload_pool for c in found.workload_identity_configs or ()):
        out.append(f"GKE cluster {name} has no Workload Identity, which node pools with GKE_METADATA need: "
                   f"`gcloud container clusters update {name} {where} --workload-pool={s.project}.svc.id.goog`, "
                   "or set jaxinfra:workloadIdentity false")
    if s.shielded_nodes and not found.enable_shielded_nodes:
        out.append(f"GKE cluster {name} has no Shielded GKE Nodes: `gcloud container clusters update {name} {where} "
                   "--enable-shielded-nodes`, or set jaxinfra:shieldedNodes false")
    if fuse and not any(c.enabled for a in found.addons_configs or () for c in a.gcs_fuse_csi_driver_configs or ()):
        out.append(f"GKE cluster {name} has no Cloud Storage FUSE CSI driver, which the jobs' checkpoint buckets need: "
                   f"`gcloud container clusters update {name} {where} --update-addons GcsFuseCsiDriver=ENABLED`")
    return out


class Cluster(pulumi.ComponentResource):
    """A cluster's node pools (provider gke), a Kubernetes provider, the controllers, the Namespaces, the Kueue
    queues, and a `JaxJob` per job."""

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
        self.bucket_access: dict[str, gcp.storage.BucketIAMMember] = {}  # each job's grant on its bucket, by namespace/name
        child = pulumi.ResourceOptions(parent=self)
        if settings.provider == "gke":
            self.k8s_provider = self._gke(cluster, cp, settings, child)
            self._checkpoint_buckets(cp, settings, child)
        else:
            self.kubeconfig = pulumi.Output.secret(settings.kubeconfig) if settings.kubeconfig else None
            self.k8s_provider = k8s.Provider(f"{cluster.name}-k8s", kubeconfig=self.kubeconfig, context=settings.context,
                                             opts=child)
        on_k8s = pulumi.ResourceOptions(parent=self, provider=self.k8s_provider)
        # The controllers: after the nodes they run on, before every object of theirs.
        self.controllers: dict[str, ControllerInstall] = {}
        if settings.install_controllers:
            nodes = [*([self.gke_cluster] if self.gke_cluster else []), *(p for ps in self.node_pools.values() for p in ps),
                     *([self.system_pool] if self.system_pool else [])]
            for c in controllers.needed(cp):
                first = [self.controllers[n].install for n in c.after if n in self.controllers]
                self.controllers[c.name] = ControllerInstall(c, cp, provider=self.k8s_provider, depends_on=[*nodes, *first],
                                                             opts=child)
        serving = {kind: ci.resources for ci in self.controllers.values() for kind in ci.controller.kinds}
        self.namespaces = {ns: k8s_resource(render_namespace(ns, cp.pod_security), on_k8s) for ns in cp.namespaces}
        # Kueue (Cluster(kueue=True)): flavors, then the ClusterQueues naming them, then the LocalQueues the
        # workloads name; a workload whose LocalQueue is missing would wait, suspended, for nothing.
        self.queues: list[pulumi.CustomResource] = []
        for m in kueue_objects(cp.queues):
            ns = m["metadata"].get("namespace")
            deps = [*serving.get(m["kind"], ()), *self.queues, *([self.namespaces[ns]] if ns in self.namespaces else [])]
            self.queues.append(k8s_resource(m, pulumi.ResourceOptions.merge(on_k8s, pulumi.ResourceOptions(depends_on=deps))))
        self.jobs: dict[str, JaxJob] = {}
        for jp in cp.jobs:
            key = f"{jp.namespace}/{jp.name}"
            deps = [*([self.namespaces[jp.namespace]] if jp.namespace in self.namespaces else []),
                    *self.node_pools.get(SHADOW_POOL if cp.shadow else jp.pool.name, []), *self.queues,
                    *([self.bucket_access[key]] if key in self.bucket_access else [])]
            self.jobs[key] = JaxJob(key, jp, provider=self.k8s_provider, depends_on=deps, serving=serving, opts=child)
        for line in prerequisites(cp, settings):
            pulumi.log.warn(line, resource=self)
        self.register_outputs({"kubeconfig": self.kubeconfig})

    def _gke(self, cluster: Any, cp: ClusterPlan, s: Settings, child: pulumi.ResourceOptions) -> k8s.Provider:
        gke_name = s.cluster_name or cluster.name
        fuse = any(jp.checkpoint_bucket for jp in cp.jobs)  # GKE's Cloud Storage FUSE CSI driver for the checkpoint buckets
        account, grants = self._node_account(gke_name, s, child)
        granted = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=grants))  # nodes boot with their roles
        if s.existing_cluster:
            found = gcp.container.get_cluster_output(name=gke_name, location=s.location, project=s.project,
                                                     opts=pulumi.InvokeOptions(parent=self))
            network_policies = any(jp.job.network_policy for jp in cp.jobs)
            found.apply(lambda c: [pulumi.log.warn(line, resource=self) for line in existing_cluster_gaps(c, s, network_policies, fuse)])
            cluster_ref: Any = gke_name
            endpoint, ca = found.endpoint, found.master_auths.apply(lambda auths: auths[0].cluster_ca_certificate)
        else:
            # The default pool GKE creates (and jaxinfra then removes) runs as the node account too.
            default_pool = (gcp.container.ClusterNodeConfigArgs(service_account=account, oauth_scopes=[CLOUD_PLATFORM_SCOPE])
                            if account is not None else None)
            gke = gcp.container.Cluster(
                gke_name, name=gke_name, project=s.project, location=s.location,
                remove_default_node_pool=True, initial_node_count=1, node_config=default_pool,
                deletion_protection=s.deletion_protection, **_cluster_security(s),
                addons_config=_addons(s, fuse), opts=granted)
            self.gke_cluster = gke
            cluster_ref = gke.name
            endpoint, ca = gke.endpoint, gke.master_auth.apply(lambda auth: auth.cluster_ca_certificate)
        for pool_name, slices in node_pools(cluster, cp).items():
            self.node_pools[pool_name] = [self._node_pool(ps, cluster_ref, s, account, granted) for ps in slices]
        if s.system_pool:
            self.system_pool = self._system_pool(cluster_ref, s, account, granted)
        context = f"gke_{s.project}_{s.location}_{gke_name}"  # gcloud's context name
        self.kubeconfig = pulumi.Output.secret(pulumi.Output.all(endpoint, ca).apply(lambda a: _kubeconfig(context, a[0], a[1])))
        return k8s.Provider(f"{cluster.name}-k8s", kubeconfig=self.kubeconfig, opts=child)

    def _checkpoint_buckets(self, cp: ClusterPlan, s: Settings, child: pulumi.ResourceOptions) -> None:
        """The buckets the jobs checkpoint to (unless `jaxinfra:createBuckets` is false) and each job's access to its own.

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
        number = gcp.organizations.get_project_output(project_id=s.project, opts=pulumi.InvokeOptions(parent=self)).number
        if s.create_buckets:
            for name in sorted({str(jp.checkpoint_bucket) for jp in jobs}):
                self.buckets[name] = gcp.storage.Bucket(
                    name, name=name, project=s.project, location=region_of(str(s.location)).upper(),
                    uniform_bucket_level_access=True,
                    hierarchical_namespace=gcp.storage.BucketHierarchicalNamespaceArgs(enabled=True),
                    opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(retain_on_delete=True)))
        after = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.gke_cluster] if self.gke_cluster else []))
        for jp in jobs:
            bucket = str(jp.checkpoint_bucket)
            member = number.apply(lambda n, jp=jp: workload_principal(str(n), str(s.project), jp.namespace, jp.name))
            self.bucket_access[f"{jp.namespace}/{jp.name}"] = gcp.storage.BucketIAMMember(
                f"{bucket}/{jp.namespace}/{jp.name}", bucket=self.buckets[bucket].name if bucket in self.buckets else bucket,
                role=BUCKET_ROLE, member=member, opts=after)

    def _node_account(self, gke_name: str, s: Settings,
                      child: pulumi.ResourceOptions) -> tuple[pulumi.Input[str] | None, list[pulumi.Resource]]:
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
        account = gcp.serviceaccount.Account(account_id, account_id=account_id, project=s.project,
                                             display_name=f"GKE nodes of {gke_name} (jaxinfra)", opts=child)
        self.node_account = account.email
        grants = [gcp.projects.IAMMember(f"{account_id}-{role.rpartition('/')[2]}", project=str(s.project), role=role,
                                         member=account.member, opts=child) for role in NODE_ROLES]
        return account.email, list(grants)

    def _node_pool(self, ps: PoolSlice, cluster_ref: Any, s: Settings, account: pulumi.Input[str] | None,
                   opts: pulumi.ResourceOptions) -> gcp.container.NodePool:
        row = ps.row
        placement = (gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT", tpu_topology=row.topology)
                     if row.kind == "tpu" and row.multi_host else None)
        zones = [s.accelerator_zone] if row.kind != "cpu" else list(s.node_locations)  # gke_problems: the zone is set
        return gcp.container.NodePool(
            ps.name, name=ps.name, cluster=cluster_ref, project=s.project, location=s.location,
            node_locations=zones or None, node_count=ps.node_count,
            node_config=_node_config(ps, s, account), placement_policy=placement,
            # A named pool cannot coexist with its replacement: delete first.
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(delete_before_replace=True)))

    def _system_pool(self, cluster_ref: Any, s: Settings, account: pulumi.Input[str] | None,
                     opts: pulumi.ResourceOptions) -> gcp.container.NodePool:
        """Untainted CPU nodes for the controllers and kube-system: GKE taints TPU and GPU nodes
        (`google.com/tpu`, `nvidia.com/gpu`), and the default pool is removed. xpk keeps such a CPU pool,
        autoscaled, in the accelerators' zone (src/xpk/commands/cluster.py); so does this one when there is one."""
        zones = [s.accelerator_zone] if s.accelerator_zone else list(s.node_locations)
        low, high = SYSTEM_POOL_NODES
        return gcp.container.NodePool(
            SYSTEM_POOL, name=SYSTEM_POOL, cluster=cluster_ref, project=s.project, location=s.location,
            node_locations=zones or None, initial_node_count=low,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(min_node_count=low, max_node_count=high),
            node_config=gcp.container.NodePoolNodeConfigArgs(**_base_node_config(s, account, str(s.system_pool), secure_boot=True)),
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(delete_before_replace=True)))


def prerequisites(cp: ClusterPlan, s: Settings) -> list[str]:
    """What the cluster must already have that this program does not give it; one line each."""
    out = []
    need = controllers.needed(cp)
    if need and not s.install_controllers:
        out.append(f"jaxinfra:installControllers is false: the cluster must already run {controllers.describe(need)} "
                   "(the versions jaxinfra validates against), or the jobs' objects are refused or never run")
    runtimes = [r for r in controllers.referenced_runtimes(cp)
                if not (s.install_controllers and r == controllers.TRAINER_JAX_RUNTIME)]
    if runtimes:
        out.append(f"the TrainJobs name ClusterTrainingRuntime {', '.join(runtimes)}: it must exist in the cluster")
    for jp in cp.jobs:
        if jp.checkpoint_bucket and s.provider == "existing":
            out.append(f"job {jp.namespace}/{jp.name} checkpoints to gs://{jp.checkpoint_bucket}: the cluster needs GKE's Cloud "
                       "Storage FUSE CSI driver and Workload Identity, and the bucket its ServiceAccount's access: `gcloud "
                       f"storage buckets add-iam-policy-binding gs://{jp.checkpoint_bucket} --role={BUCKET_ROLE} --member="
                       f"{workload_principal('PROJECT_NUMBER', 'PROJECT_ID', jp.namespace, jp.name)}`")
    if any(jp.job.network_policy for jp in cp.jobs):
        if s.provider == "existing":
            out.append("the jobs' NetworkPolicies take effect only where the cluster enforces NetworkPolicy "
                       "(on GKE: Dataplane V2 or the network policy add-on)")
        elif s.network_policy == "none" and not s.existing_cluster:
            out.append("jaxinfra:networkPolicy is none: the cluster enforces no NetworkPolicy, and the jobs' are ignored")
    return out


# --- the program ----------------------------------------------------------------------------


def controller_problems(cluster: Any) -> list[Problem]:
    """Jobs in a namespace that a controller jaxinfra installs owns (both would create it)."""
    owned = {c.namespace: c.name for c in controllers.needed(plan(cluster))}
    return [Problem(f"jobs[{i}].namespace", job.namespace, f"the namespace of the {owned[job.namespace]} controller jaxinfra installs",
                    "use another namespace, or set jaxinfra:installControllers false and install the controllers yourself")
            for i, job in enumerate(cluster.jobs) if job.namespace in owned]


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
            stack_path = PROJECT_ROOT / stack_path
    else:
        stack_path = settings.stack
    if stack_path is not None and stack_path.suffix == ".py" and stack_path.is_file():
        try:
            cluster = stack.load(stack_path)
            if settings is not None and settings.shadow:  # the stack's CPU shadow, as `jaxinfra synth --shadow cpu` renders it
                cluster = shadow(cluster)
        except JaxinfraError as err:
            cluster = None
            problems += [Problem(f"{config.get('jaxinfra:stack')}: {p.path}", p.value, p.message, p.fix) for p in err.problems]
    if cluster is not None and settings is not None:
        problems += gke_problems(cluster, settings) if settings.provider == "gke" else []
        problems += controller_problems(cluster) if settings.install_controllers else []
    if problems:
        raise pulumi.RunError(str(ConfigError(problems)))
    assert settings is not None and cluster is not None

    c = Cluster(cluster.name, cluster, settings)
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
