"""The workload kinds a job renders as (`JaxJob.backend`), one module each, and their registry.

Each module defines one object that implements `Backend` (backends/base.py); everything else reads this
registry: the spec's choices and rules, the plan's names and env, render's workload, explain, the controllers to
install, Pulumi's and `diff`'s workload kinds, the CLI's `--backend` (docs/backends.md). Like kubeflow/sdk's
trainer backends (one facade, one implementation per backend chosen once) and kubernetes-sigs/jobset's dispatch
tables: nothing outside this package asks which backend it has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from jaxinfra.backends import jaxjob, job, jobset, trainjob
from jaxinfra.backends.base import Backend, EnvVar, JobNames, Manifest, Parts

__all__ = ["BACKENDS", "NAMES", "Backend", "EnvVar", "JobNames", "Manifest", "Parts", "get", "words"]

#: Every backend by name, in the order the spec, the CLI and the docs list them; the first is the default.
BACKENDS: Mapping[str, Backend] = MappingProxyType(
    {b.name: b for b in (jobset.BACKEND, job.BACKEND, jaxjob.BACKEND, trainjob.BACKEND)}
)
#: Their names: the spec's `Backend` choices.
NAMES: tuple[str, ...] = tuple(BACKENDS)


def get(name: str) -> Backend:
    """The backend of a (validated) `JaxJob.backend`."""
    return BACKENDS[name]


def words(items: Iterable[str]) -> str:
    """`a, b, c or d`: a list of choices in a sentence."""
    *head, last = items
    return f"{', '.join(head)} or {last}" if head else last
