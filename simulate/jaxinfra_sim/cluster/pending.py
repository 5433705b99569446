"""Why would it pend: `jaxinfra explain` on hand-written manifests. Each workload of one cluster (every YAML file of
the command line applied together, as `jaxinfra simulate` applies them: `sources.py`) goes through the same
emulation the simulator runs before any pod starts (the controllers, the API server's front door on what they
create, Kueue: `control_plane.emulate`, `scheduler.admit`), so explain and simulate cannot disagree about what holds a
workload: a missing LocalQueue, ClusterQueue or WorkloadPriorityClass, an inactive ClusterQueue, quota short of all
its pods at once (its cohort's lendable quota included), a topology no flavor can take, the ProvisioningRequest
checks it waits for, and what the API server would refuse of its pods. Nothing runs: the verdict is at design time,
and the rehearsal of a wait (`--provision`) is `jaxinfra simulate`'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from jaxinfra.errors import Problem
from jaxinfra.upstream import QUEUE_LABEL
from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.cluster.sources import Source
from jaxinfra_sim.core.model import Admission, Hold
from jaxinfra_sim.jax import processes


@dataclass(frozen=True)
class Pending:
    """One workload at design time: Kueue's decision (None: not queued to Kueue) and every other problem that would
    keep it from running or completing, each in its file."""

    workload: str
    file: str
    queued: Admission | None
    problems: tuple[Problem, ...]
    group: str = ""  # its JAX group: processes, pods, processes per pod, the pods beside it (`processes.described`)

    @property
    def holds(self) -> bool:
        """Whether something would keep it from ever running (a provisioning check only delays it)."""
        return (self.queued is not None and not self.queued.admitted) or bool(self.problems)


def pending(source: Source) -> list[Pending]:
    """Every workload of the cluster, in manifest order, with what would hold it."""
    cluster = emulate(source.manifests, check_all=False)
    out = []
    for w in cluster.workloads:
        queued = w.queued
        kueue_path = f"{w.id} metadata.labels[{QUEUE_LABEL}]"
        others = tuple(source.where(p) for p in w.problems if not (queued is not None and p.path == kueue_path))
        out.append(Pending(w.id, source.file_of(w.id), queued, others, processes.described(w)))
    return out


def lines(p: Pending) -> Iterator[str]:
    """What a person reads about one workload: its JAX group, Kueue's verdict and its fix, then the other problems."""
    q = p.queued
    if p.group:
        yield f"  {p.group}"
    if q is None:
        yield f"  not queued to Kueue (no {QUEUE_LABEL} label): its pods are created at once"
    elif not q.admitted:
        yield f"  held by Kueue ({q.held or Hold.QUEUE}): {q.note}"
        yield f"  fix: {q.fix}"
    elif q.held is Hold.CHECK:
        yield f"  {q.note}"
        checks = ", ".join(q.provisioning)
        yield (
            f"  waits for capacity: until GKE provisions it (AdmissionCheck {checks}); rehearse the wait with "
            f"`jaxinfra simulate --provision {q.provisioning[0]}@SECONDS`, capacity that never comes with "
            f"`--provision {q.provisioning[0]}@never`"
        )
    else:
        yield f"  {q.note}"
    for problem in p.problems:
        yield f"  would also stop it: {problem.path} = {problem.value}: {problem.message}"
        if problem.fix:
            yield f"  fix: {problem.fix}"
    if not p.holds:
        yield "  nothing here holds it" + (" beyond its provisioning wait" if q is not None and q.provisioning else "")
