"""What a simulation finds, as typed records: each workload's verdict and its attempts (`WorkloadResult`), and the
whole run's (`Report`). The cluster writes them (`cluster.attempts`, `cluster.engine`); the report reads them
(`report`), and Kueue's quota while workloads run side by side (`kueue.quotas`): none of them imports the other for
these types."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from jaxinfra.errors import Problem, Refused, Unserved
from jaxinfra_sim.core import model
from jaxinfra_sim.core.podrun import Attempt

if TYPE_CHECKING:
    from jaxinfra_sim.kueue import scheduler


class Verdict(StrEnum):
    """A workload's verdict: `pending` until it is decided; `not finished` for one still running (or about to
    restart) at --timeout, or one that would wait (suspended): neither a success nor a failure its controller would
    report; `undetermined` under the probe for one whose commands may compute the contract its env lacks
    (`model.Workload.undetermined`): only running them tells, so none of its pods is run. The simulation passes only
    when every workload `succeeded`: nothing else proved the job ends well."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    NOT_FINISHED = "not finished"
    UNDETERMINED = "undetermined"


@dataclass
class WorkloadResult:
    source: str  # the file (or stack) its workload object came from
    workload: model.Workload
    attempts: list[Attempt] = field(default_factory=list)
    verdict: Verdict = Verdict.PENDING
    reason: str | None = None
    recreated: int = 0  # times its pods were recreated (new names and IPs); in-place restarts keep them
    replacements: int = 0  # pods its Jobs created in place of failed ones while the others ran on
    manifests: Sequence[Mapping[str, Any]] = field(default=(), repr=False, compare=False)  # its cluster's objects
    held: scheduler.Provisioned | None = None  # what Kueue's ProvisioningRequest checks held it for, before it ran
    waiting_for: str | None = None  # what it waited for before it started: room on this machine, Kueue's quota
    waited: float = 0.0  # how long it waited for it, seconds

    @property
    def restarts(self) -> int:
        """How often its controllers started pods again: whole attempts, and pods its Jobs replaced within one."""
        return max(len(self.attempts) - 1, 0) + sum(len(a.replaced) for a in self.attempts)

    @property
    def waited_note(self) -> str | None:
        """What it waited for before it started, and how long (None: it started at once)."""
        if self.waiting_for is None:
            return None
        return f"waited {self.waited:.1f} s before it started, for {self.waiting_for}"

    def as_dict(self) -> dict[str, Any]:
        w = self.workload
        return {
            "source": self.source,
            "id": w.id,
            "kind": w.kind,
            "namespace": w.namespace,
            "name": w.name,
            "pods": len(w.pods),
            "other_pods": [p.hostname for p in w.pods if p.global_index in w.others],  # not JAX processes
            "verdict": self.verdict,
            "reason": self.reason,
            "restarts": self.restarts,
            "problems": [problem_dict(p) for p in w.problems],
            "notes": list(w.notes),
            "waited": None if self.waiting_for is None else {"seconds": round(self.waited, 3), "for": self.waiting_for},
            "held": None
            if self.held is None
            else {"seconds": self.held.seconds, "pending": self.held.pending, "note": self.held.note},
            "attempts": [
                {
                    "index": a.index,
                    "ok": a.ok,
                    "reason": a.reason,
                    "seconds": round(a.seconds, 3),
                    "began": None if a.began is None else round(a.began, 3),
                    "backoff_s": a.backoff,
                    "then": a.restart.words if a.restart is not None else None,
                    "memory_peak": a.memory_peak,
                    "pods": [r.as_dict() for r in a.pods],
                    "replaced": [r.as_dict() for r in a.replaced],
                    "events": [e.as_dict() for e in sorted(a.events, key=lambda e: e.at)],
                }
                for a in self.attempts
            ],
        }


def problem_dict(p: Problem) -> dict[str, Any]:
    return {
        "where": p.where,
        "file": p.file,
        "document": p.document,
        "path": p.path,
        "value": repr(p.value),
        "message": p.message,
        "fix": p.fix,
    }


@dataclass
class Report:
    results: list[WorkloadResult]
    problems: tuple[Problem, ...] = ()
    seconds: float = 0.0
    api_log: list[str] = field(default_factory=list)  # the API server's request log, when the simulation had one
    notes: list[str] = field(
        default_factory=list
    )  # what the run cannot tell (a CPU shadow's limits), objects applied twice
    inputs: dict[str, list[str]] = field(
        default_factory=dict
    )  # per file (or stack), the objects the clusters hold from it
    machine: str | None = None  # this machine gave out while a workload ran (its verdict ended the simulation)
    unchecked_images: list[str] = field(
        default_factory=list
    )  # under --run-command, the images not given whole (--image): their containers ran this machine's programs

    @property
    def ok(self) -> bool:
        return not self.problems and bool(self.results) and all(r.verdict == Verdict.SUCCEEDED for r in self.results)

    @property
    def undetermined(self) -> list[WorkloadResult]:
        """The workloads whose verdict the probe cannot give, where nothing else kept the simulation from passing:
        none failed or is unfinished, and no problem stands (else the simulation has failed, whatever they are)."""
        if self.problems or any(r.verdict not in (Verdict.SUCCEEDED, Verdict.UNDETERMINED) for r in self.results):
            return []
        return [r for r in self.results if r.verdict == Verdict.UNDETERMINED]

    @property
    def refused(self) -> list[Problem]:
        """What the API server refuses, among every problem: then nothing runs."""
        return [
            p
            for p in (*self.problems, *(q for r in self.results for q in r.workload.problems))
            if isinstance(p, Refused)
        ]

    @property
    def unserved(self) -> list[Problem]:
        """What the simulator does not serve (`errors.Unserved`: a kind it does not run), among every problem: then
        nothing runs, and the command stops on its input."""
        return [
            p
            for p in (*self.problems, *(q for r in self.results for q in r.workload.problems))
            if isinstance(p, Unserved)
        ]

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "undetermined": bool(self.undetermined),  # not ok, yet nothing failed: what only --run-command can tell
            "seconds": round(self.seconds, 3),
            "problems": [problem_dict(p) for p in self.problems],
            "api_server": self.api_log,
            "notes": self.notes,
            "machine": self.machine,
            "unchecked_images": self.unchecked_images,
            "inputs": self.inputs,
            "workloads": [r.as_dict() for r in self.results],
        }
