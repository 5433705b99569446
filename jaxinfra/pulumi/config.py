"""The Pulumi program's configuration: every key it reads (`KEYS`), checked into `Settings`.

Read and checked before any resource is declared, so that one `ConfigError` lists every problem; the
defaults are the documented ones, here and nowhere else. No Pulumi SDK at import: only `pulumi_config`
reads the running stack, lazily.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxinfra.errors import JaxinfraError, Problem

PROVIDERS = ("gke", "existing")
#: Machine type of a CPU pool that names none (`CPU(machine_type=...)`).
DEFAULT_CPU_MACHINE_TYPE = "e2-standard-4"

PROJECT_FILE = "Pulumi.yaml"


def project_root() -> Path:
    """Where relative `jaxinfra:stack` paths start: the Pulumi project's folder, that of Pulumi.yaml, in the user's
    repository (never this library's). The engine tells the program (`pulumi.get_root_directory`); without it (mocks,
    an older engine) the nearest folder holding Pulumi.yaml from the working directory, which Pulumi sets to the
    project's; else the working directory itself."""
    try:
        from pulumi import get_root_directory

        told = get_root_directory()
    except (ImportError, AttributeError):
        told = None
    if told and (Path(told) / PROJECT_FILE).is_file():  # under mocks it is a placeholder ("root_directory")
        return Path(told)
    here = Path.cwd()
    return next((folder for folder in (here, *here.parents) if (folder / PROJECT_FILE).is_file()), here)


class ConfigError(JaxinfraError):
    """The Pulumi stack configuration is invalid."""

    kind = "invalid Pulumi config"


#: Every config key the program reads, with what it means (the table of docs/pulumi.md; a test keeps them equal).
KEYS: dict[str, str] = {
    "jaxinfra:stack": "required: path of the stack file (.py), relative to the folder of Pulumi.yaml",
    "jaxinfra:provider": (
        "required: gke (create node pools, and the cluster unless existingCluster) or existing (any cluster, by "
        "kubeconfig/context)"
    ),
    "jaxinfra:installControllers": (
        "both: install the controllers the stack's objects need, at the versions jaxinfra.releases pins (default true "
        "with gke, false with existing)"
    ),
    "jaxinfra:shadow": (
        "both: cpu to deploy the stack's CPU shadow (jaxinfra.shadow) instead of its jobs: no accelerator pools, and "
        "with gke one CPU node pool `shadow` sized for every pod's requests (default: unset, the jobs as declared)"
    ),
    "gcp:project": "gke: the GCP project",
    "gcp:zone": (
        "gke: the location when jaxinfra:location is unset; with a regional location, the zone of the accelerator pools"
    ),
    "gcp:region": "gke: the location when neither jaxinfra:location nor gcp:zone is set",
    "jaxinfra:location": "gke: region or zone of the cluster (default: gcp:zone, else gcp:region)",
    "jaxinfra:nodeLocations": (
        "gke: zones of the node pools, a list (default: the cluster's); with one zone, the accelerator pools' zone"
    ),
    "jaxinfra:clusterName": "gke: the GKE cluster's name (default: the stack's Cluster name)",
    "jaxinfra:existingCluster": (
        "gke: true to add node pools to an existing cluster named clusterName instead of creating one (default false)"
    ),
    "jaxinfra:deletionProtection": (
        "gke: GKE deletion protection of a created cluster (default false, so `pulumi destroy` works)"
    ),
    "jaxinfra:networkPolicy": (
        "gke: NetworkPolicy enforcement of a created cluster: dataplaneV2 (default), calico (the network policy "
        "add-on) or none; with existingCluster, what the cluster is checked for"
    ),
    "jaxinfra:workloadIdentity": (
        "gke: Workload Identity: the pool <project>.svc.id.goog on a created cluster, GKE_METADATA on the node pools "
        "(default true)"
    ),
    "jaxinfra:nodeServiceAccount": (
        "gke: the node pools' service account: unset, a dedicated one with the least-privilege roles; an email, that "
        "account; default, Compute Engine's default account"
    ),
    "jaxinfra:shieldedNodes": (
        "gke: Shielded GKE Nodes on a created cluster, integrity monitoring on every node pool and secure boot on CPU "
        "pools (default true)"
    ),
    "jaxinfra:releaseChannel": (
        "gke: release channel of a created cluster: RAPID, REGULAR (default), STABLE, EXTENDED or UNSPECIFIED (none)"
    ),
    "jaxinfra:systemPool": (
        "gke: machine type of the autoscaled `system` node pool (1 to 3 nodes per zone) for the controllers and "
        "kube-system, or none (default e2-standard-4; none with existingCluster)"
    ),
    "jaxinfra:createBuckets": (
        "gke: create the Cloud Storage buckets the jobs checkpoint to (in the cluster's region, uniform access, "
        "hierarchical namespace, kept by `pulumi destroy`); false: they exist, and only the jobs' access is granted "
        "(default true)"
    ),
    "jaxinfra:kubeconfig": "existing: kubeconfig path or contents (default: $KUBECONFIG / ~/.kube/config)",
    "jaxinfra:context": "existing: kubeconfig context (default: the current context)",
}
_GKE_ONLY = (
    "jaxinfra:location",
    "jaxinfra:nodeLocations",
    "jaxinfra:clusterName",
    "jaxinfra:existingCluster",
    "jaxinfra:deletionProtection",
    "jaxinfra:networkPolicy",
    "jaxinfra:workloadIdentity",
    "jaxinfra:nodeServiceAccount",
    "jaxinfra:shieldedNodes",
    "jaxinfra:releaseChannel",
    "jaxinfra:systemPool",
    "jaxinfra:createBuckets",
)
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
        problems.append(
            Problem(
                key,
                value,
                "not a list of zones",
                "e.g. `pulumi config set --path 'jaxinfra:nodeLocations[0]' us-east5-a`",
            )
        )
        return ()
    return tuple(value)


def _location(config: Callable[[str], Any], node_locations: tuple[str, ...], problems: list[Problem]) -> str | None:
    """The cluster's location (provider gke), with the zones of nodeLocations in its region."""
    key = next((k for k in ("jaxinfra:location", "gcp:zone", "gcp:region") if config(k) is not None), None)
    if key is None:
        problems.append(
            Problem(
                "jaxinfra:location",
                None,
                "missing (provider gke), and neither gcp:zone nor gcp:region is set",
                "`pulumi config set jaxinfra:location <region or zone>`, e.g. us-east5-a",
            )
        )
        return None
    location = str(config(key))
    if not re.fullmatch(f"{_REGION}(-[a-z])?", location):
        problems.append(
            Problem(key, location, "not a GCP region or zone", "e.g. us-central1 (a region) or us-central1-a (a zone)")
        )
        return location
    outside = [z for z in node_locations if region_of(z) != region_of(location)]
    if outside:
        problems.append(
            Problem(
                "jaxinfra:nodeLocations",
                list(node_locations),
                f"{', '.join(outside)} not in region {region_of(location)} of the cluster",
                f"use zones of {region_of(location)}, e.g. {region_of(location)}-a",
            )
        )
    return location


_SERVICE_ACCOUNT = r"[^@\s]+@[-a-z0-9.]+\.gserviceaccount\.com"
_MACHINE_TYPE = r"[a-z][a-z0-9]*-[-a-z0-9]+"


def read_settings(config: Mapping[str, Any], root: Path | None = None) -> Settings:
    """Check the stack configuration (`namespace:key` -> value); every problem in one `ConfigError`. `root`: where a
    relative `jaxinfra:stack` starts (default: `project_root()`)."""
    import difflib

    root = project_root() if root is None else root

    problems: list[Problem] = []
    for key in sorted(k for k in config if k.startswith("jaxinfra:") and k not in KEYS):
        close = difflib.get_close_matches(key, list(KEYS), n=1)
        problems.append(
            Problem(
                key,
                config[key],
                "unknown config key",
                f"did you mean {close[0]}?"
                if close
                else f"use one of {', '.join(k for k in KEYS if k.startswith('jaxinfra:'))}",
            )
        )
    get = lambda key: config.get(key) if config.get(key) not in ("", None) else None  # noqa: E731

    stack = get("jaxinfra:stack")
    path = Path(str(stack)) if stack else Path()
    if stack is None:
        problems.append(
            Problem("jaxinfra:stack", None, "missing", "`pulumi config set jaxinfra:stack stacks/<name>.py`")
        )
    else:
        path = path if path.is_absolute() else root / path
        if path.suffix != ".py" or not path.is_file():
            problems.append(
                Problem(
                    "jaxinfra:stack",
                    stack,
                    f"no stack file at {path}",
                    "give the path of a .py stack file, relative to Pulumi.yaml",
                )
            )

    provider = get("jaxinfra:provider")
    if provider not in PROVIDERS:
        problems.append(
            Problem(
                "jaxinfra:provider",
                provider,
                "missing" if provider is None else "unknown provider",
                f"use one of {', '.join(PROVIDERS)}",
            )
        )
    other = {"gke": _EXISTING_ONLY, "existing": _GKE_ONLY}.get(str(provider), ())
    for key in other:
        if get(key) is not None:
            problems.append(
                Problem(key, get(key), f"not used with provider {provider}", "remove it, or change jaxinfra:provider")
            )

    node_locations = _zones("jaxinfra:nodeLocations", get("jaxinfra:nodeLocations"), problems)
    project = location = None
    if provider == "gke":
        project = get("gcp:project")
        if project is None:
            problems.append(
                Problem("gcp:project", None, "missing (provider gke)", "`pulumi config set gcp:project <project>`")
            )
        location = _location(get, node_locations, problems)
    cluster_name = get("jaxinfra:clusterName")
    if cluster_name is not None and not re.fullmatch(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", str(cluster_name)):
        problems.append(
            Problem(
                "jaxinfra:clusterName",
                cluster_name,
                "not a GKE cluster name",
                "use at most 40 lower-case letters, digits and '-', starting with a letter",
            )
        )
    account = get("jaxinfra:nodeServiceAccount")
    if account not in (None, "default") and not re.fullmatch(_SERVICE_ACCOUNT, str(account)):
        problems.append(
            Problem(
                "jaxinfra:nodeServiceAccount",
                account,
                "not a service account email",
                "give <name>@<project>.iam.gserviceaccount.com, `default`, or unset it for a dedicated one",
            )
        )
    existing_cluster = _bool("jaxinfra:existingCluster", get("jaxinfra:existingCluster"), problems)
    system_pool = get("jaxinfra:systemPool") or (
        DEFAULT_CPU_MACHINE_TYPE if provider == "gke" and not existing_cluster else None
    )
    if system_pool == "none":
        system_pool = None
    elif system_pool is not None and not re.fullmatch(_MACHINE_TYPE, str(system_pool)):
        problems.append(
            Problem(
                "jaxinfra:systemPool", system_pool, "not a machine type", f"e.g. {DEFAULT_CPU_MACHINE_TYPE}, or none"
            )
        )
    settings = Settings(
        stack=path,
        provider=str(provider),
        project=project,
        location=location,
        zone=get("gcp:zone"),
        cluster_name=cluster_name,
        existing_cluster=existing_cluster,
        node_locations=node_locations,
        deletion_protection=_bool("jaxinfra:deletionProtection", get("jaxinfra:deletionProtection"), problems),
        network_policy=_choice(
            "jaxinfra:networkPolicy", get("jaxinfra:networkPolicy"), NETWORK_POLICIES, "dataplaneV2", problems
        ),
        workload_identity=_bool("jaxinfra:workloadIdentity", get("jaxinfra:workloadIdentity"), problems, default=True),
        node_service_account=account,
        shielded_nodes=_bool("jaxinfra:shieldedNodes", get("jaxinfra:shieldedNodes"), problems, default=True),
        release_channel=_choice(
            "jaxinfra:releaseChannel", get("jaxinfra:releaseChannel"), RELEASE_CHANNELS, "REGULAR", problems
        ),
        system_pool=system_pool,
        install_controllers=_bool(
            "jaxinfra:installControllers", get("jaxinfra:installControllers"), problems, default=provider == "gke"
        ),
        kubeconfig=get("jaxinfra:kubeconfig"),
        context=get("jaxinfra:context"),
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
