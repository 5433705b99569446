"""The backend protocol: everything that differs between the workload kinds a job renders as, in one place.

A backend is one object (one module of this package each); the core reads its properties and calls its
methods and never asks which backend it has (docs/backends.md). Its methods receive the plan and, to render,
the shared pod parts (`Parts`, built by `jaxinfra.render.common`), so this package imports neither at run
time: it sits just above `names`, and spec, plan and render build on it. `JobNames` lives here because a
job's pod names are its backend's (the spec checks them before a plan exists).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from jaxinfra.names import (
    BY_DOWNWARD_API,
    BY_JAXINFRA,
    COMPLETION_INDEX,
    COORDINATOR_ADDRESS,
    JOBSET_JOB_INDEX,
    JOBSET_REPLICAS,
    MEGASCALE_COORDINATOR,
    MEGASCALE_NUM_SLICES,
    MEGASCALE_SLICE_ID,
    NUM_PROCESSES,
    PROCESS_ID,
)

if TYPE_CHECKING:
    from jaxinfra.errors import Problem
    from jaxinfra.plan import JobPlan
    from jaxinfra.spec import JaxJob, NodePool

Manifest = dict[str, Any]
#: Env var name -> (its value at one rank, who sets it): what `JobPlan.env_sources` returns and `explain` prints.
EnvSources = dict[str, tuple[str, str]]


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
    """One workload kind: its names, its env sources, its spec rules, its objects, and what it needs in the cluster."""

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

    def coordinator_env(self, jp: JobPlan, rank: int) -> EnvSources:
        """The coordinator, process count and rank as rank `rank` receives them, and who sets each."""
        ...

    def written_coordinator_env(self, jp: JobPlan) -> list[dict[str, Any]]:
        """The coordinator, count and rank as jaxinfra writes them into the pod template (none where an operator
        injects them)."""
        ...

    def problems(self, at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
        """What this kind cannot express of a job on its pool (`jaxinfra.spec.rules`), at spec path `at`."""
        ...

    def render(self, jp: JobPlan, parts: Parts) -> list[Manifest]:
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


def field_ref(path: str) -> dict[str, Any]:
    """An env var's value from the downward API."""
    return {"valueFrom": {"fieldRef": {"fieldPath": path}}}


def jaxinfra_coordinator(jp: JobPlan, rank: int) -> EnvSources:
    """jaxinfra's own contract (docs/design.md, "jaxinfra's own contract"): the coordinator and count written out,
    the rank from the pod's completion index, or across slices JAX's own rule over the slice's labels."""
    slice_index, host = divmod(rank, jp.hosts_per_slice)
    env = {
        COORDINATOR_ADDRESS: (jp.coordinator_address, BY_JAXINFRA),
        NUM_PROCESSES: (str(jp.processes), BY_JAXINFRA),
    }
    if jp.multi_slice:
        env |= {
            MEGASCALE_COORDINATOR: (jp.coordinator_host, BY_JAXINFRA),
            MEGASCALE_NUM_SLICES: (str(jp.slices), BY_DOWNWARD_API),
            MEGASCALE_SLICE_ID: (str(slice_index), BY_DOWNWARD_API),
        }
    else:
        env[PROCESS_ID] = (str(host), BY_DOWNWARD_API)
    return env


def jaxinfra_coordinator_env(jp: JobPlan) -> list[dict[str, Any]]:
    """`jaxinfra_coordinator` as the pod template writes it: values, and the downward API where the value is the
    pod's."""
    env: list[dict[str, Any]] = [
        {"name": COORDINATOR_ADDRESS, "value": jp.coordinator_address},
        {"name": NUM_PROCESSES, "value": str(jp.processes)},
    ]
    if jp.multi_slice:
        # JAX derives the rank itself: TPU_WORKER_ID (from the platform) + slice id x hosts.
        env += [
            {"name": MEGASCALE_COORDINATOR, "value": jp.coordinator_host},
            {"name": MEGASCALE_NUM_SLICES, **field_ref(f"metadata.labels['{JOBSET_REPLICAS}']")},
            {"name": MEGASCALE_SLICE_ID, **field_ref(f"metadata.labels['{JOBSET_JOB_INDEX}']")},
        ]
    else:
        env.append({"name": PROCESS_ID, **field_ref(f"metadata.annotations['{COMPLETION_INDEX}']")})
    return env


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

    def coordinator_env(self, jp: JobPlan, rank: int) -> EnvSources:
        return jaxinfra_coordinator(jp, rank)

    def written_coordinator_env(self, jp: JobPlan) -> list[dict[str, Any]]:
        return jaxinfra_coordinator_env(jp)

    def problems(self, at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
        return []


def tpu_multi_slice(job: JaxJob, pool: NodePool) -> bool:
    """A multi-slice TPU job, which a kind without one Job per slice cannot express (no MEGASCALE_SLICE_ID)."""
    return pool.accelerator.row.kind == "tpu" and job.num_slices > 1
