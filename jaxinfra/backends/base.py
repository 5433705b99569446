"""The backend protocol: everything that differs between the workload kinds a job renders as, in one place.

A backend is one object (one module of this package each); the core reads its properties and calls its
methods and never asks which backend it has (docs/backends.md). Its methods receive the plan, the job and its pool
as the small protocols below (what a backend reads of `JobPlan`, `JaxJob` and `NodePool`, which satisfy them without
inheriting) and, to render, the shared pod parts (`Parts`, built by `jaxinfra.render.common`), so this package
imports nothing above it, not even for types: it sits just above `names`, and spec, plan and render build on it.
`JobNames` lives here because a job's pod names are its backend's (the spec checks them before a plan exists), and
`EnvVar` because the backend states the env contract's coordinator, count and rank.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from jaxinfra.names import (
    BY_DOWNWARD_API,
    BY_JAXINFRA,
    COORDINATOR_ADDRESS,
    MEGASCALE_COORDINATOR,
    MEGASCALE_NUM_SLICES,
    MEGASCALE_SLICE_ID,
    NUM_PROCESSES,
    PROCESS_ID,
)
from jaxinfra.upstream import COMPLETION_INDEX, JOBSET_JOB_INDEX, JOBSET_REPLICAS

if TYPE_CHECKING:
    from jaxinfra.errors import Problem

Manifest = dict[str, Any]


@dataclass(frozen=True)
class EnvVar:
    """One variable of the env contract (docs/design.md, "Who sets what"): its value at each global rank, who puts it in
    front of the rank (a `BY_*` of `jaxinfra.names`), and how the pod template writes it, as Kubernetes' EnvVar does:
    a literal `value`, a `field_path` of the downward API, or neither where a controller, the operator or the platform
    injects it (or a shell computes it before the command)."""

    name: str
    at: Callable[[int], str]  # global rank -> its value
    by: str
    value: str | None = None
    field_path: str | None = None

    @classmethod
    def literal(cls, name: str, value: str) -> EnvVar:
        """A value jaxinfra writes, the same at every rank."""
        return cls(name, constant(value), BY_JAXINFRA, value=value)

    @classmethod
    def downward(cls, name: str, field_path: str, at: Callable[[int], str]) -> EnvVar:
        """A value the pod template takes from the pod itself (the downward API)."""
        return cls(name, at, BY_DOWNWARD_API, field_path=field_path)

    @classmethod
    def completion_index(cls, name: str, hosts_per_slice: int) -> EnvVar:
        """The pod's completion index in its Indexed Job (its host within its slice), from the downward API."""
        return cls.downward(name, f"metadata.annotations['{COMPLETION_INDEX}']", host_index(hosts_per_slice))

    @property
    def entry(self) -> dict[str, Any] | None:
        """Its entry in the pod template's env; None where it is not written there."""
        if self.field_path is not None:
            return {"name": self.name, "valueFrom": {"fieldRef": {"fieldPath": self.field_path}}}
        return None if self.value is None else {"name": self.name, "value": self.value}


def constant(value: str) -> Callable[[int], str]:
    """The same value at every rank."""
    return lambda rank: value


def host_index(hosts_per_slice: int) -> Callable[[int], str]:
    """A rank's host within its slice: its pod's completion index in its Indexed Job."""
    return lambda rank: str(rank % hosts_per_slice)


# What a backend reads of a job plan, a job and its pool: the core's types satisfy these structurally.


class CatalogRow(Protocol):
    """An accelerator's catalog row (`jaxinfra.catalog.Accelerator`)."""

    @property
    def kind(self) -> str: ...

    @property
    def family(self) -> str: ...

    @property
    def topology(self) -> str | None: ...

    @property
    def multi_host(self) -> bool: ...


class AcceleratorSpec(Protocol):
    """A node pool's accelerator (`TPU`, `GPU`, `CPU` of `jaxinfra.spec`)."""

    @property
    def row(self) -> CatalogRow: ...


class PoolSpec(Protocol):
    """A node pool (`jaxinfra.spec.NodePool`)."""

    @property
    def name(self) -> str: ...

    @property
    def accelerator(self) -> AcceleratorSpec: ...

    @property
    def spot(self) -> bool: ...


class JobSpec(Protocol):
    """A job (`jaxinfra.spec.JaxJob`)."""

    @property
    def backend(self) -> str: ...

    @property
    def image(self) -> str: ...

    @property
    def args(self) -> Sequence[str]: ...

    @property
    def env(self) -> Mapping[str, object]: ...

    @property
    def coordinator_port(self) -> int: ...

    @property
    def runtime(self) -> str | None: ...

    @property
    def max_restarts(self) -> int: ...

    @property
    def num_slices(self) -> int: ...

    @property
    def model_fields_set(self) -> Collection[str]:
        """The fields the user set."""
        ...


class Plan(Protocol):
    """A job's plan (`jaxinfra.plan.JobPlan`)."""

    @property
    def job(self) -> JobSpec: ...

    @property
    def labels(self) -> dict[str, str]: ...

    @property
    def slices(self) -> int: ...

    @property
    def hosts_per_slice(self) -> int: ...

    @property
    def processes(self) -> int: ...

    @property
    def multi_slice(self) -> bool: ...

    @property
    def exclusive_placement(self) -> bool: ...

    @property
    def command(self) -> Sequence[str] | None: ...

    @property
    def replicated_job(self) -> str | None: ...

    @property
    def service(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def coordinator_host(self) -> str: ...

    @property
    def coordinator_address(self) -> str: ...

    @property
    def runtime(self) -> str: ...

    @property
    def renders_runtime(self) -> bool: ...


class Parts(Protocol):
    """The pod parts every backend shares, as `jaxinfra.render` hands them to `Backend.render` (render/common.py)."""

    def pod_template(self, restart_policy: str = "Never", **spec_extra: Any) -> dict[str, Any]:
        """The one pod template (container, env contract, placement, the job's customizations and patches)."""
        ...

    def metadata(self, name: str | None = None) -> dict[str, Any]:
        """Name (the job's unless given), namespace, labels and the user's annotations of a job's object."""
        ...

    def workload_metadata(self, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The workload's metadata: `metadata`, its Kueue queue label and what a shadow stands in for."""
        ...

    def contract_env(self) -> list[dict[str, Any]]:
        """The env jaxinfra writes: the contract's part that is jaxinfra's, then the user's."""
        ...

    def resources(self) -> dict[str, Any]:
        """The training container's requests and limits."""
        ...


@runtime_checkable
class Backend(Protocol):
    """One workload kind: its names, its rows of the env contract, its spec rules, its objects, and what it needs in
    the cluster."""

    @property
    def name(self) -> str:
        """The spec's value (`JaxJob.backend`, `--backend`): `jobset`."""
        ...

    @property
    def title(self) -> str:
        """The workload kind in words, as the topology picture titles it: `Indexed Job`."""
        ...

    @property
    def summary(self) -> str:
        """Where the kind comes from, in words, as the spec's description lists it: `Kubeflow Trainer v2 TrainJob`."""
        ...

    @property
    def api_version(self) -> str:
        """The workload's apiVersion."""
        ...

    @property
    def kind(self) -> str:
        """The workload's kind: Pulumi replaces it on a spec change, and `diff` says so."""
        ...

    @property
    def kueue_framework(self) -> str:
        """Its Kueue integration (charts/kueue/values.yaml, `integrations.frameworks`)."""
        ...

    @property
    def controllers(self) -> tuple[str, ...]:
        """The controllers (`jaxinfra.releases` names) its objects need in the cluster."""
        ...

    @property
    def container(self) -> str:
        """The training container's name."""
        ...

    @property
    def port_name(self) -> str:
        """The name of the coordinator's container port."""
        ...

    @property
    def fixed_port(self) -> int | None:
        """The coordinator port the controller fixes; None: the job's `coordinator_port`."""
        ...

    @property
    def name_label(self) -> str:
        """The label its controller sets on every pod to the workload's name (what a headless Service selects)."""
        ...

    @property
    def owns_dns(self) -> bool:
        """Whether jaxinfra renders the headless Service (not where the operator or a JobSet makes the DNS)."""
        ...

    @property
    def indexed_pods(self) -> bool:
        """Whether the pods are an Indexed Job's: the Job controller sets JOB_COMPLETION_INDEX, and GKE injects its
        TPU env only into such pods of a multi-host slice."""
        ...

    @property
    def runtimes(self) -> bool:
        """Whether the workload runs on a training runtime (`JaxJob.runtime`: the one jaxinfra renders, or a
        ClusterTrainingRuntime of that name)."""
        ...

    @property
    def writes_container(self) -> bool:
        """Whether jaxinfra writes the training container's command, args, env and port into the pod template
        (not where the controller fills them in from the workload)."""
        ...

    @property
    def dns1035(self) -> str | None:
        """Who derives DNS-1035 names (which start with a letter) from the job's name, as a sentence's start;
        None: nothing does."""
        ...

    @property
    def rank_rule(self) -> str:
        """How a single-slice rank is set, in words (`explain`)."""
        ...

    def replicated_job(self, tpu: bool) -> str | None:
        """The replicated Job of the JobSet the pods belong to; None without one."""
        ...

    def hostname(self, names: JobNames, rank: int) -> str:
        """Pod hostname of global rank `rank`, as the controller names it."""
        ...

    def coordinator_host(self, names: JobNames) -> str:
        """Rank 0's DNS name inside the namespace."""
        ...

    def derived_names(self, names: JobNames) -> dict[str, str]:
        """The longest value of every name derived from the job's name that must fit a DNS label (63)."""
        ...

    def group(self, names: JobNames, slice_index: int) -> str:
        """A slice's own object, in words (the topology picture): `Job train-slice-0`."""
        ...

    def dns_service(self, names: JobNames) -> str:
        """The Service that gives the pods DNS, in words (the topology picture)."""
        ...

    def coordinator_env(self, jp: Plan) -> tuple[EnvVar, ...]:
        """The coordinator, process count and rank: the env contract's first rows (`JobPlan.contract`), each with its
        value per rank, who sets it and how the pod template writes it (not at all where an operator injects it)."""
        ...

    def problems(self, at: str, job: JobSpec, pool: PoolSpec) -> list[Problem]:
        """What this kind cannot express of a job on its pool (`jaxinfra.spec.rules`), at spec path `at`."""
        ...

    def render(self, jp: Plan, parts: Parts) -> list[Manifest]:
        """Its own objects, the workload last, from the shared pod parts."""
        ...


@dataclass(frozen=True)
class JobNames:
    """A job's shape (slices x hosts) and the names its controllers derive from it (docs/design.md, "Indices, labels
    and names"): the shape is the spec's, the names its backend's."""

    name: str
    backend: Backend
    tpu: bool
    slices: int  # groups of hosts: TPU slices, else 1 (GPU/CPU nodes form one group)
    hosts_per_slice: int

    @classmethod
    def of(
        cls, name: str, backend: Backend, kind: str, slices: int | None, nodes: int | None, topology_hosts: int
    ) -> JobNames:
        """From the spec's values: a TPU job's hosts come from its topology, a GPU/CPU job's from `nodes`."""
        tpu = kind == "tpu"
        return cls(name, backend, tpu, (slices or 1) if tpu else 1, topology_hosts if tpu else nodes or 1)

    @property
    def processes(self) -> int:
        return self.slices * self.hosts_per_slice

    @property
    def replicated_job(self) -> str | None:
        return self.backend.replicated_job(self.tpu)

    @property
    def service(self) -> str:
        """The headless Service / subdomain (JobSet's default subdomain is the JobSet's name)."""
        return self.name

    def child_job(self, slice_index: int | str) -> str:
        """The batch Job that holds a slice's pods: the JobSet's child, else the one Job (JAXJob: none at all)."""
        return f"{self.name}-{self.replicated_job}-{slice_index}" if self.replicated_job else self.name

    def worker_hostnames(self, slice_index: int | str) -> str:
        """A slice's `<hostname>.<subdomain>` in host order, as TPU_WORKER_HOSTNAMES lists them (`slice_index` may be
        a `$(VAR)` reference that Kubernetes expands per pod)."""
        return ",".join(f"{self.child_job(slice_index)}-{h}.{self.service}" for h in range(self.hosts_per_slice))

    def hostname(self, rank: int) -> str:
        return self.backend.hostname(self, rank)

    @property
    def coordinator_host(self) -> str:
        return self.backend.coordinator_host(self)

    def derived(self) -> dict[str, str]:
        return self.backend.derived_names(self)


# What the backends whose pods are Indexed Jobs share (JobSet's children, a Job, Trainer's JobSet).


def indexed_hostname(names: JobNames, rank: int) -> str:
    """`<child Job>-<index>`: the hostname the Job controller gives an Indexed Job's pod."""
    slice_index, host = divmod(rank, names.hosts_per_slice)
    return f"{names.child_job(slice_index)}-{host}"


def subdomain_host(names: JobNames) -> str:
    """`<hostname>.<subdomain>` of rank 0."""
    return f"{names.hostname(0)}.{names.service}"


def indexed_names(names: JobNames, pod_suffix: bool) -> dict[str, str]:
    """An Indexed Job's derived names; `pod_suffix`: JobSet's webhook also fits the pod name with a 5-character
    suffix."""
    last = names.hostname(names.processes - 1)
    out = {"pod hostname": last, "Job name label": names.child_job(names.slices - 1)}
    if pod_suffix:
        out["pod name"] = f"{last}-xxxxx"
    return out


def jaxinfra_coordinator(jp: Plan) -> tuple[EnvVar, ...]:
    """jaxinfra's own contract (docs/design.md, "jaxinfra's own contract"): the coordinator and count written out,
    the rank from the pod's completion index, or across slices JAX's own rule over the slice's labels (it derives the
    rank itself: TPU_WORKER_ID, from the platform, + slice id x hosts)."""
    hosts = jp.hosts_per_slice
    head = EnvVar.literal(COORDINATOR_ADDRESS, jp.coordinator_address), EnvVar.literal(NUM_PROCESSES, str(jp.processes))
    if not jp.multi_slice:
        return (*head, EnvVar.completion_index(PROCESS_ID, hosts))
    return (
        *head,
        EnvVar.literal(MEGASCALE_COORDINATOR, jp.coordinator_host),
        EnvVar.downward(MEGASCALE_NUM_SLICES, f"metadata.labels['{JOBSET_REPLICAS}']", constant(str(jp.slices))),
        EnvVar.downward(MEGASCALE_SLICE_ID, f"metadata.labels['{JOBSET_JOB_INDEX}']", lambda rank: str(rank // hosts)),
    )


class IndexedPods:
    """The part of `Backend` that the kinds whose pods are an Indexed Job's share (JobSet's children, a Job, Trainer's
    JobSet): the Job controller's hostnames, rank 0 behind the headless subdomain, one Job per group, jaxinfra's own
    contract, nothing the spec cannot express. Such a backend subclasses it and overrides what differs."""

    indexed_pods = True
    #: Whether JobSet's webhook also fits the pod name with a 5-character suffix (`derived_names`).
    pod_suffix = True

    def hostname(self, names: JobNames, rank: int) -> str:
        return indexed_hostname(names, rank)

    def coordinator_host(self, names: JobNames) -> str:
        return subdomain_host(names)

    def derived_names(self, names: JobNames) -> dict[str, str]:
        return indexed_names(names, pod_suffix=self.pod_suffix)

    def group(self, names: JobNames, slice_index: int) -> str:
        return f"Job {names.child_job(slice_index)}"

    def dns_service(self, names: JobNames) -> str:
        return f"{names.service} (headless)"

    def coordinator_env(self, jp: Plan) -> tuple[EnvVar, ...]:
        return jaxinfra_coordinator(jp)

    def problems(self, at: str, job: JobSpec, pool: PoolSpec) -> list[Problem]:
        return []


def tpu_multi_slice(job: JobSpec, pool: PoolSpec) -> bool:
    """A multi-slice TPU job, which a kind without one Job per slice cannot express (no MEGASCALE_SLICE_ID)."""
    return pool.accelerator.row.kind == "tpu" and job.num_slices > 1
