"""What every workload controller hands on: the Indexed Jobs it creates (or the pods an operator
creates itself, with no Job), with their pod templates already stamped, and its failure rules."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from jaxinfra.errors import Problem
from jaxinfra_sim.core import model
from jaxinfra_sim.core.inputs import Service, accelerator, meta, to_int
from jaxinfra_sim.jax.timeouts import INIT_TIMEOUT, JAX_INIT_TIMEOUT, jax_init_timeout

SUPPORTED = (
    "JobSet (jobset.x-k8s.io/v1alpha2), Indexed Job (batch/v1 with completionMode: Indexed), "
    "JAXJob (kubeflow.org/v1) and TrainJob (trainer.kubeflow.org/v1alpha1)"
)
"""The workload kinds the controllers emulate, as problems name them."""


@dataclass(frozen=True)
class ChildJob:
    """One Indexed Job as its controller creates it: pod template metadata already stamped."""

    name: str
    uid: str
    job_index: int  # JobSet job-index; 0 for a plain Job
    completions: int
    parallelism: int
    pod_labels: Mapping[str, str]
    pod_annotations: Mapping[str, str]
    pod_spec: Mapping[str, Any]
    subdomain: str | None
    backoff_limit_per_index: bool
    operator: OperatorPods | None = None  # set: an operator creates these pods itself, with no Job (JAXJob)
    container_name: str | None = None  # the container that runs JAX; None: the first
    indexed: bool = True  # completionMode Indexed: each pod has its index (label, annotation, env) and hostname

    @cached_property
    def container(self) -> Mapping[str, Any]:
        """The container that runs JAX: the named one (JAXJob: `jax`), else the first."""
        containers = self.pod_spec.get("containers") or [{}]
        return next((c for c in containers if c.get("name") == self.container_name), containers[0])

    @cached_property
    def accelerator(self) -> tuple[str, Any]:
        """("tpu" | "gpu" | "cpu", chips per host) of the JAX container: the same for every pod of the Job."""
        return accelerator(self.container)

    @cached_property
    def worker_hostnames(self) -> str:
        """`<hostname>.<subdomain>` of every pod of this Job in index order (built once per Job, not per pod)."""
        return ",".join(f"{self.name}-{i}.{self.subdomain}" for i in range(self.completions))


@dataclass(frozen=True)
class Identity:
    """Who a pod is, as the controller that creates it decides: its names, its metadata, and the env
    entries it appends after the container's own."""

    name: str
    hostname: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    appended: Sequence[Mapping[str, Any]]
    generate_name: str | None = None  # the Job controller's generateName (`<job>-<index>-`); None: named exactly


@dataclass(frozen=True)
class OperatorPods:
    """Pods an operator creates one by one (no Job controller): `<ChildJob.name>-<index>`, with per-index labels
    and the env it appends to every container."""

    labels: Callable[[int], Mapping[str, str]]
    env: Callable[[int], Sequence[Mapping[str, Any]]]

    def identity(self, job: ChildJob, index: int) -> Identity:
        """The operator names the pod exactly; the kubelet makes the pod name its hostname unless spec.hostname is
        set."""
        name = f"{job.name}-{index}"
        return Identity(
            name,
            job.pod_spec.get("hostname") or name,
            {**job.pod_labels, **self.labels(index)},
            dict(job.pod_annotations),
            self.env(index),
        )


@dataclass
class Draft:
    """What a workload kind's controller makes of one manifest, before pods exist."""

    kind: str
    namespace: str
    name: str
    jobs: list[ChildJob]
    restart: model.RestartPolicy
    services: list[Service] = field(default_factory=list)  # Services its controller creates if absent
    problems: list[Problem] = field(default_factory=list)
    owner: Mapping[str, str] = field(
        default_factory=dict
    )  # the workload object's reference: apiVersion, kind, name, uid
    labels: Mapping[str, str] = field(default_factory=dict)  # the workload object's own labels (Kueue's queue-name)
    success: tuple[model.Success, ...] = ()  # complete before every pod has succeeded, once one is met
    suspended: str | None = None  # the workload object's suspend field, where it is true ("spec.suspend")
    gates: tuple[model.Gate, ...] = ()  # pods its controller creates only later (a JobSet's dependsOn, InOrder)
    claims: tuple[tuple[str, str], ...] = ()  # (namespace, name) of the PVCs its controller creates
    jax_problems: list[Problem] = field(default_factory=list)  # what keeps its pods from being one JAX group: a
    # problem under the probe, a note under --run-command (the containers' own programs may not be JAX)
    min_parallelism: int | None = None  # a batch Job's kueue.x-k8s.io/job-min-parallelism: Kueue may admit fewer pods
    unserved: Problem | None = None  # set: what it runs is not emulated (a TrainJob's non-JAX runtime); it starts no
    # pod here, and this is its problem unless a verdict the cluster gives first (Kueue, suspension) comes before

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


def positions(jobs: Sequence[ChildJob]) -> list[tuple[ChildJob, tuple[int, ...]]]:
    """Each child Job with its pods' positions in the workload: placed Job by Job, in `jobs` order."""
    out, start = [], 0
    for job in jobs:
        out.append((job, tuple(range(start, start + job.completions))))
        start += job.completions
    return out


def reference(obj: Mapping[str, Any], uid: str) -> dict[str, str]:
    """An ownerReference's identifying fields for `obj` (its controller sets `controller: true`)."""
    return {
        "apiVersion": str(obj.get("apiVersion", "")),
        "kind": str(obj.get("kind", "")),
        "name": str(meta(obj).get("name", "")),
        "uid": uid,
    }


def counts(job_spec: Mapping[str, Any], where: str, indexed: bool = True) -> tuple[int, int, list[Problem]]:
    """(completions, parallelism, jax_problems) of a Job as stored: the front door has defaulted both (to 1 where
    neither is set, kubernetes pkg/apis/batch/v1/defaults.go SetDefaults_Job) and refused an Indexed Job without
    completions (pkg/apis/batch/validation/validation.go), so neither is checked again here; a NonIndexed Job without
    completions counts 1. `jax_problems` keep the pods from being one JAX group (`Draft`)."""
    parallelism = to_int(job_spec.get("parallelism"), 1)
    completions = to_int(job_spec.get("completions"), parallelism if indexed else 1)
    jax_problems: list[Problem] = []
    if parallelism < completions:
        jax_problems.append(
            Problem(
                f"{where} parallelism",
                parallelism,
                f"parallelism < completions ({completions}): only {parallelism} pods run at once, but JAX needs all "
                f"{completions} processes running together, so the group never initializes",
                f"set parallelism: {completions}",
            )
        )
    return completions, parallelism, jax_problems


def init_timeout_problems(draft: Draft) -> list[Problem]:
    """JAX_INITIALIZATION_TIMEOUT written into a JAX container's env (its last entry of that name, which the kubelet
    keeps) as a value a program following the env contract cannot hand JAX (`inputs.jax_init_timeout`): under the
    built-in probe, which reads it as such a program does, its pods would fail at start. One problem per container
    and value; a value from a ConfigMap or Secret is read when the pod starts."""
    out: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    for job in draft.jobs:
        container = job.container
        entries = [e for e in container.get("env") or () if isinstance(e, Mapping) and e.get("name") == INIT_TIMEOUT]
        last: Mapping[str, Any] = entries[-1] if entries else {}
        value, name = last.get("value"), str(container.get("name", ""))
        if not isinstance(value, str) or (not value and last.get("valueFrom")):  # unset, or read from its source
            continue
        if jax_init_timeout(value) is not None or (name, value) in seen:
            continue
        seen.add((name, value))
        out.append(
            Problem(
                f"{draft.id} pods of {job.name} container {name} env {INIT_TIMEOUT}",
                value,
                "not a whole number of seconds JAX can take: the env contract's programs (and the built-in probe) "
                f"call jax.distributed.initialize(initialization_timeout=int(os.environ[{INIT_TIMEOUT!r}])) "
                "(docs/env-contract.md), where int() refuses it or jaxlib's client, which takes a 32-bit int, does; "
                "JAX itself reads no such variable",
                f'set it to a whole number of seconds, such as "{JAX_INIT_TIMEOUT}" (JAX\'s default)',
            )
        )
    return out


def restart_policy(job_spec: Mapping[str, Any]) -> model.RestartPolicy:
    """A Job's failure semantics (controllers/job_failure.py): backoffLimit defaults to 6 (the Job API's default), or
    to unlimited (None) under backoffLimitPerIndex. Pods with restartPolicy OnFailure (the JobSet webhook's default)
    restart their container in place (same pod, name and IP)."""
    per_index = job_spec.get("backoffLimitPerIndex")
    default = None if per_index is not None else 6
    limit = job_spec.get("backoffLimit")
    return model.RestartPolicy(
        kind="job",
        backoff_limit=int(limit) if limit is not None else default,
        backoff_limit_per_index=per_index,
        max_failed_indexes=job_spec.get("maxFailedIndexes"),
        pod_failure_rules=tuple((job_spec.get("podFailurePolicy") or {}).get("rules") or ()),
        in_place=((job_spec.get("template") or {}).get("spec") or {}).get("restartPolicy") in ("OnFailure", "Always"),
        active_deadline=to_int(job_spec.get("activeDeadlineSeconds"), 0) or None,
    )
