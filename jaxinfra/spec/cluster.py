"""The root of a stack, `Cluster`: the one place the whole tree is validated, in one pass."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from jaxinfra.errors import SpecError
from jaxinfra.spec.base import dns_label, raw
from jaxinfra.spec.jobs import JaxJob, NodePool, Shadow
from jaxinfra.spec.problems import problems_of
from jaxinfra.spec.rules import cross_object_problems


class Cluster(BaseModel):
    """The root of a stack: node pools and the jobs that run on them, validated as a whole."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Cluster name (DNS-1123 label); also the output file's name.")
    node_pools: tuple[NodePool, ...] = Field(description="Accelerator node pools.")
    jobs: tuple[JaxJob, ...] = Field((), description="JAX jobs.")
    pod_security: Literal["restricted", "baseline", "privileged"] | None = Field(
        "restricted",
        description="Pod Security level enforced on the namespaces jaxinfra creates (label "
        "pod-security.kubernetes.io/enforce); None: no label. A job that needs an exception (host_network, privileged) "
        "in such a namespace is a spec problem. Namespaces jaxinfra does not create (default) are left alone.",
    )
    kueue: bool = Field(
        False,
        description="Gate the jobs with Kueue: per node pool a ResourceFlavor and a ClusterQueue "
        "(quota = the pool's capacity for its largest job), a LocalQueue per namespace, and the "
        "kueue.x-k8s.io/queue-name label on each workload. Needs Kueue installed.",
    )
    shadow: Shadow | None = Field(
        None,
        description="Render every job as a CPU shadow (Shadow()) for a cluster without "
        "accelerators; None: the jobs as declared.",
    )

    _name = field_validator("name")(lambda v: dns_label(v, 40))

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**raw(data))
        except ValidationError as err:
            raise SpecError(problems_of(err)) from None
        if problems := cross_object_problems(self):
            raise SpecError(problems)

    def pool(self, name: str) -> NodePool:
        return next(p for p in self.node_pools if p.name == name)

    def with_changes(self, **changes: Any) -> Cluster:
        """The same cluster with `changes` to its fields, revalidated as a whole."""
        return Cluster(**{**{name: getattr(self, name) for name in type(self).model_fields}, **changes})

    def with_backend(self, backend: str) -> Cluster:
        """The same cluster with every job on `backend` (the CLI's `--backend`), revalidated."""
        return self.with_changes(jobs=[{**raw(j), "backend": backend} for j in self.jobs])
