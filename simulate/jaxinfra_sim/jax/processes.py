"""Which of a workload's pods are JAX processes, decided from the pods themselves, and whether a JAX pod's command may
compute the contract its env lacks.

A JobSet may run, beside its JAX workers, pods that never run JAX: an inference gateway, a vLLM server, a data loader,
a metrics Job. They are no process of JAX's group: the group's size, ranks and rank 0 are the JAX pods' alone, and the
contract is not theirs to meet (`contract.Checker` checks the JAX pods only). Under the probe they run as a stand-in
that stays up until it is stopped, as a server does; under `--run-command` their own command runs. On a cluster such
a Job never completes, so its author's JobSet `successPolicy` targets the workers (`operator: All`,
`targetReplicatedJobs`), and once it is met the JobSet controller deletes the Jobs still running
(kubernetes-sigs/jobset @ 08dfbdfd pkg/controllers/jobset_controller.go `executeSuccessPolicy`, then `Reconcile`
deleting a finished JobSet's active Jobs; `controllers.running.Running.complete` plays it): without one, the webhook's
default `All` of every replicatedJob never completes, here as there.

The rule (`decide`): each pod's strongest evidence (`Evidence`, strongest first):

1. CONTRACT: its env names the JAX contract: JAX_COORDINATOR_ADDRESS, JAX_PROCESS_ID or JAX_NUM_PROCESSES, which
   `jax.distributed.initialize()` reads (jax-ml/jax v0.10.2 jax/_src/distributed.py `State.initialize`), or the
   Training Operator v1's COORDINATOR_ADDRESS, PROCESS_ID or NUM_PROCESSES (`env.v1_coordinator`, `env.rank_of`);
2. DETECTOR: its env is what one of JAX's cluster detectors reads (jax/_src/clusters/): GKE's TPU env
   (TPU_WORKER_ID, TPU_WORKER_HOSTNAMES, TPU_PROCESS_ADDRESSES: cloud_tpu_cluster.py `GkeTpuCluster`), libtpu's
   multislice MEGASCALE_COORDINATOR_ADDRESS, Open MPI's (ompi_cluster.py, OMPI_MCA_orte_hnp_uri) or Slurm's
   (slurm_cluster.py, SLURM_JOB_ID). K8sCluster's (KUBERNETES_SERVICE_HOST) is every pod's: it says nothing;
3. COMMAND: its command or args name JAX: `import jax`, a jax-named program or module (`jax-nccl-test`, `nsys-jax`,
   `-m jax_smoke`), a JAX framework (MaxText, Pax and Praxis, T5X, AXLearn), or the contract's arguments
   (`--coordinator_address`, `--process_id`, `--num_processes` and their spellings: `CONTRACT_ARGUMENTS`);
4. ACCELERATOR: it requests google.com/tpu or nvidia.com/gpu (`Pod.accelerator`): weaker, since a vLLM server does
   too;
5. NONE.

The JAX pods are those with evidence 1-3 where any pod has one; else those with an accelerator where any has one;
else every pod: where no pod says what it is, each is taken for a JAX process, the simulator's behaviour before this
rule (the probe stands in for every pod's program). Where the rule leaves some pods out, a note names them and why
(and says so where the accelerators alone decided).

A JAX pod may hold several processes (a launcher starting one per GPU; two TPU containers each holding half the
host's chips: `launchers`): `ranked` gives each JAX pod its processes and its first rank, which the group's size and
ranks follow (`model.Workload.process_count`, `rank_of`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import IntEnum, StrEnum
from pathlib import Path

from jaxinfra_sim.core import model
from jaxinfra_sim.jax import launchers
from jaxinfra_sim.jax.env import reads_env

CONTRACT_ENV = (
    "JAX_COORDINATOR_ADDRESS",
    "JAX_PROCESS_ID",
    "JAX_NUM_PROCESSES",
    "COORDINATOR_ADDRESS",
    "PROCESS_ID",
    "NUM_PROCESSES",
)
"""The env of the JAX contract (JAX's own, the Training Operator v1's): a pod with any of it is a JAX process."""
DETECTOR_ENV = (
    "TPU_WORKER_ID",
    "TPU_WORKER_HOSTNAMES",
    "TPU_PROCESS_ADDRESSES",
    "MEGASCALE_COORDINATOR_ADDRESS",
    "OMPI_MCA_orte_hnp_uri",
    "SLURM_JOB_ID",
)
"""The env JAX's cluster detectors read (GkeTpuCluster, libtpu's multislice, OmpiCluster, SlurmCluster)."""
_JAX_NAMES = re.compile(r"(?i)(?<![a-z])(?:jax|maxtext|paxml|praxis|t5x|axlearn)")
_CONTRACT_NAMES = r"(?:coordinator[_-]?(?:address|addr|ip)|process[_-]?(?:id|index|count)|num[_-]?processes)"
CONTRACT_ARGUMENTS = re.compile(
    rf"(?i)(?:(?<![\w-])--?(?:jax[_-])?{_CONTRACT_NAMES}(?=[=\s]|$)|(?<![\w.]){_CONTRACT_NAMES}\s*=(?!=))"
)
"""The contract as a program's arguments: a flag (`--coordinator-address=...`, `--process_id N`: JAX-Toolbox's
`jax-nccl-test --coordinator-address --process-count --process-id`) or a keyword argument of
`jax.distributed.initialize(coordinator_address=, num_processes=, process_id=)` (jax/_src/distributed.py); not a call
such as `jax.process_index()`."""
COMPUTED_BY_COMMAND = "the contract is computed by the command; `--run-command` (with `--image`) checks it"
"""Why the probe gives no verdict on a workload whose JAX pods' commands may compute the contract (`computes`): what a
script computes is known only once it runs, and a cluster runs it."""
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash"})
LAUNCHERS = frozenset({"mpirun", "mpiexec", "srun"})
"""Programs that start the JAX processes and set the env JAX's OmpiCluster or SlurmCluster detector reads
(jax/_src/clusters/ompi_cluster.py, slurm_cluster.py), which the manifest does not hold."""


class Evidence(IntEnum):
    """What shows a pod is a JAX process, strongest first (the module's rule)."""

    CONTRACT = 1
    DETECTOR = 2
    COMMAND = 3
    ACCELERATOR = 4
    NONE = 5

    @property
    def definite(self) -> bool:
        """The pod itself says it runs JAX (its env or its command), not only that it could (an accelerator)."""
        return self <= Evidence.COMMAND

    @property
    def words(self) -> str:
        return _WORDS[self]


_WORDS = {
    Evidence.CONTRACT: "the JAX contract's env",
    Evidence.DETECTOR: "the env JAX's cluster detectors read",
    Evidence.COMMAND: "a command that names JAX",
    Evidence.ACCELERATOR: "an accelerator alone",
    Evidence.NONE: "no sign of JAX",
}


class Computed(StrEnum):
    """How a JAX pod's command may compute the contract its env lacks (`computes`)."""

    SCRIPT = "a shell script"  # sh -c '...' (not an entrypoint wrapper, whose env the probe reads: `Pod.wrapper`)
    LAUNCHER = "a launcher"  # mpirun, mpiexec, srun, a *.sh program
    ARGUMENTS = "arguments naming the contract"  # --coordinator_address, --process_id, ... (`CONTRACT_ARGUMENTS`)


def _argv(pod: model.Pod) -> tuple[str, ...]:
    return (*pod.command, *pod.args)


def evidence(pod: model.Pod) -> Evidence:
    """The pod's strongest evidence of being a JAX process (the module's rule)."""
    if any(name in pod.env for name in CONTRACT_ENV):
        return Evidence.CONTRACT
    if any(name in pod.env for name in DETECTOR_ENV):
        return Evidence.DETECTOR
    if any(_JAX_NAMES.search(part) or CONTRACT_ARGUMENTS.search(part) for part in _argv(pod)):
        return Evidence.COMMAND
    if pod.accelerator in ("tpu", "gpu"):
        return Evidence.ACCELERATOR
    return Evidence.NONE


def computes(pod: model.Pod) -> Computed | None:
    """How the pod's command may compute the JAX contract its env lacks, or None where it cannot: then what the env
    says is what JAX gets. An entrypoint wrapper (`Pod.wrapper`) is not such a script: the probe reads the env it
    exports (`Pod.exports`)."""
    argv = _argv(pod)
    if not argv:
        return None
    program = Path(argv[0]).name
    if program in SHELLS and len(argv) > 1 and pod.wrapper is None and not _leaves_it_to_jax(pod):
        return Computed.SCRIPT
    if program in LAUNCHERS or program.endswith(".sh"):
        return Computed.LAUNCHER
    if any(CONTRACT_ARGUMENTS.search(part) for part in argv):
        return Computed.ARGUMENTS
    return None


def _leaves_it_to_jax(pod: model.Pod) -> bool:
    """A script that runs a bare `jax.distributed.initialize()` (`env.reads_env`) and names no part of the contract
    (no contract variable or argument, no detector env): what the env holds is what JAX gets, so its lack is a
    problem, not a question (xpk's `bash -c "python -c '... jax.distributed.initialize() ...'"`)."""
    text = " ".join(_argv(pod))
    names = (*CONTRACT_ENV, *DETECTOR_ENV)
    return reads_env(pod) and not CONTRACT_ARGUMENTS.search(text) and not any(n in text for n in names)


@dataclass(frozen=True)
class Group:
    """Which of a workload's pods are its JAX processes: `others` (their positions in the workload) are not; `note`
    names them and why (and says so where the accelerators alone decided); None where every pod is one."""

    others: frozenset[int] = frozenset()
    note: str | None = None


def decide(wl_id: str, pods: Sequence[model.Pod]) -> Group:
    """The JAX pods of a workload by the module's rule; every pod where none says what it is."""
    found = [evidence(p) for p in pods]
    strongest = min(found, default=Evidence.NONE)
    jax = (lambda e: e.definite) if strongest.definite else (lambda e: e == Evidence.ACCELERATOR)
    others = frozenset(p.global_index for p, e in zip(pods, found, strict=True) if not jax(e))
    if strongest == Evidence.NONE or not others:  # one kind of pod: each is a JAX process, as before
        return Group()
    taken = " or ".join(e.words for e in sorted({e for e in found if jax(e)}))
    shows = " or ".join(e.words for e in sorted({e for e in found if not jax(e)}))
    named = _by_job(pods, others)
    note = (
        f"{wl_id}: {len(pods) - len(others)} of its {len(pods)} pods are JAX processes ({taken}); the others, "
        f"{named}, are taken for pods that do not run JAX: they show {shows}. They are no part of JAX's group (its "
        "size, ranks and rank 0) and meet no contract; the probe runs a stand-in in each that stays up until it is "
        "stopped (--run-command runs their own command)"
    )
    if not strongest.definite:
        note += "; assumed from the accelerators alone: set the contract's env on the JAX pods to make it certain"
    return Group(others, note)


def ranked(wl_id: str, pods: Sequence[model.Pod], others: frozenset[int]) -> tuple[list[model.Pod], str | None]:
    """The pods with their JAX processes: each JAX pod's (`launchers.processes`, where it holds several) and its first
    rank, the processes of the JAX pods before it; the others as they are. And a note on what a launcher was read to
    start, or assumed to. Pods of one Job share their template, so each Job's first pod is read for all of them."""
    found: dict[str, model.Processes] = {}
    for pod in pods:
        if pod.global_index not in others and (pod.job or pod.hostname) not in found:
            found[pod.job or pod.hostname] = launchers.processes(pod)
    several = [f for f in found.values() if f.count > 1]
    assumed = [f for f in found.values() if f.assumed]
    note = None
    if several or assumed:
        said = several[0] if several else assumed[0]
        note = f"{wl_id}: each pod of its JAX Jobs holds {said.describe()}" + (
            "; the probe runs that many JAX processes in each, ranked pod by pod (rank = the pod's first + the "
            "process's local index), the coordinator rank 0's"
            if several
            else "; how many it starts is not in the manifest: --run-command runs it"
        )
    out, rank = [], 0
    for pod in pods:
        if pod.global_index in others:
            out.append(pod)
            continue
        launch = found[pod.job or pod.hostname]
        out.append(replace(pod, processes=launch if launch.count > 1 else None, rank=rank))
        rank += launch.count
    return out, note


def described(w: model.Workload) -> str:
    """Its JAX group in one line, as `explain` says it: how many processes, in how many pods, each pod's (and where
    that came from), and the pods beside the group."""
    pods = len(w.group)
    line = (
        f"JAX group: {w.process_count} process{'es' if w.process_count != 1 else ''} in {pods} pod{'s' * (pods != 1)}"
    )
    several = next((p.processes for p in w.group if p.processes is not None), None)
    line += f", each pod {several.describe()}" if several is not None else ", one per pod"
    if w.others:
        line += f"; not JAX: {_by_job(w.pods, w.others)}"
    return line


def _by_job(pods: Sequence[model.Pod], others: frozenset[int]) -> str:
    """The pods at `others` by their Job (a pod no Job made by its hostname): `rollout (1 pod), eval (2 pods)`."""
    jobs = Counter(p.job or p.hostname for p in pods if p.global_index in others)
    return ", ".join(f"{job} ({n} pod{'s' * (n != 1)})" for job, n in jobs.items())
