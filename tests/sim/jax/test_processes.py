"""Which pods are JAX processes, and a contract the command computes (issue #57, items 3 and 1), as the emulation
decides them before anything runs (`jaxinfra_sim.jax.processes`, `contract.Checker.undetermined`).

The manifests are written in the style of upstream examples, not copied: a JobSet whose rollout server (a vLLM
OpenAI server, as NVIDIA/JAX-Toolbox's .github/gke-workflow/jax-vllm-offloading `rollout.yml` runs one next to a JAX
`trainer.yml`) or gateway runs beside JAX workers that carry the env contract (the Kubernetes docs' Indexed Job env,
JobSet's docs' leader/worker shape with `successPolicy` targeting the workers); and an Indexed Job whose shell script
computes the coordinator and rank from the Job's own env, as JAX-Toolbox's .github/eks-workflow-files/job.yml does
(`--coordinator-address ${JOB_NAME}-0.${SERVICE_NAME}:3389 --process-count=2 --process-id=$JOB_COMPLETION_INDEX`).
The verdict a cluster gives each is in each test's docstring.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import yaml

from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.core import model
from jaxinfra_sim.core.results import Report, Verdict, WorkloadResult
from jaxinfra_sim.jax.processes import COMPUTED_BY_COMMAND, Computed, Evidence, computes, evidence
from tests.support.paths import MANIFESTS
from tests.support.problems import problems_of

pytestmark = pytest.mark.unit

RL = (MANIFESTS / "jobset_server_beside_jax_workers.yaml").read_text()
COMPUTED = (MANIFESTS / "indexed_job_contract_in_script.yaml").read_text()


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def only(manifests: list[dict[str, Any]], check_all: bool = True) -> model.Workload:
    [workload] = emulate(manifests, check_all=check_all).workloads
    return workload


def rjob_pod(manifests: list[dict[str, Any]], name: str) -> dict[str, Any]:
    jobset = manifests[-1]
    rjob = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == name)
    return rjob["template"]["spec"]["template"]["spec"]


def env_of(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    return pod_spec["containers"][0].setdefault("env", [])


def set_env(pod_spec: dict[str, Any], name: str, value: str) -> None:
    env = env_of(pod_spec)
    env[:] = [e for e in env if e["name"] != name] + [{"name": name, "value": value}]


# --- item 3: JAX pods and other pods ------------------------------------------------------------------------------
def test_a_server_beside_the_jax_workers_is_no_part_of_the_group() -> None:
    """On a cluster the vLLM server serves and the two workers form JAX's group of 2 (their env says so); the JobSet
    completes once the workers have (successPolicy All of [workers]). No contract problem: the group is the workers',
    rank 0 rl-workers-0-0, and the server is a pod of its own."""
    w = only(docs(RL))
    assert problems_of(emulate(docs(RL))) == []
    assert [p.hostname for p in w.pods] == ["rl-rollout-0-0", "rl-workers-0-0", "rl-workers-0-1"]
    assert w.others == frozenset({0}) and [p.hostname for p in w.group] == ["rl-workers-0-0", "rl-workers-0-1"]
    assert [w.rank_of(p) for p in w.group] == [0, 1]
    assert (w.groups, w.hosts_per_group) == (1, 2)  # the probe's mesh: the workers' Job alone
    [note] = [n for n in w.notes if "not run JAX" in n]
    assert "2 of its 3 pods are JAX processes (the JAX contract's env)" in note and "rl-rollout-0 (1 pod)" in note


def test_a_broken_contract_among_the_workers_still_fails_and_counts_only_them() -> None:
    """The workers' JAX_NUM_PROCESSES says 3 while 2 workers run: on a cluster JAX's group waits for a third process
    that never comes, and the workers fail at their init timeout. The count is checked against the JAX pods (2), not
    every pod of the JobSet (3), and the server is named in no problem."""
    manifests = docs(RL)
    set_env(rjob_pod(manifests, "workers"), "JAX_NUM_PROCESSES", "3")
    [problem] = problems_of(emulate(manifests))
    assert "the process count is 3 but the workload has 2 pods" in problem.message
    assert "rl-rollout" not in str(problem)


def test_a_coordinator_on_the_server_is_not_rank_0() -> None:
    """A coordinator address naming the server's pod: on a cluster nothing listens there for JAX, and the workers fail
    at their init timeout. Rank 0 is the workers' first pod."""
    manifests = docs(RL)
    set_env(rjob_pod(manifests, "workers"), "JAX_COORDINATOR_ADDRESS", "rl-rollout-0-0.rl:1234")
    [problem] = problems_of(emulate(manifests))
    assert (
        "resolves to pod rl-rollout-0-0" in problem.message and "not to rank 0 (pod rl-workers-0-0)" in problem.message
    )


def test_a_gpu_server_is_weaker_evidence_than_the_workers_env() -> None:
    """A vLLM server requests a GPU as the workers do; only the workers' env names JAX's contract, so only they are
    the group (on a cluster vLLM never joins JAX's coordinator)."""
    manifests = docs(RL)
    for name in ("rollout", "workers"):
        rjob_pod(manifests, name)["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    w = only(manifests)
    assert w.others == frozenset({0}) and problems_of(emulate(manifests)) == []
    assert [evidence(p) for p in w.pods] == [Evidence.ACCELERATOR, Evidence.CONTRACT, Evidence.CONTRACT]
    assert "they show an accelerator alone" in " ".join(w.notes)


def test_accelerators_alone_decide_with_a_note_saying_so() -> None:
    """Workers with GPUs and no contract env (JAX's detection or the program finds the rank) beside a CPU gateway:
    the GPU pods are taken for the JAX processes, and the note says it was assumed."""
    manifests = docs(RL)
    workers = rjob_pod(manifests, "workers")
    workers["containers"][0]["env"] = []
    workers["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    rjob_pod(manifests, "rollout")["containers"][0]["command"] = ["envoy", "-c", "/etc/envoy/envoy.yaml"]
    w = only(manifests)
    assert w.others == frozenset({0})
    assert "assumed from the accelerators alone" in " ".join(w.notes)


def test_pods_that_say_nothing_are_each_a_jax_process_as_before() -> None:
    """Neither pod names JAX, a detector's env or an accelerator: every pod is taken for a JAX process, as the
    simulator always has, so a missing contract is still reported (on a cluster a JAX program there finds no
    coordinator)."""
    manifests = docs(RL)
    env_of(rjob_pod(manifests, "workers"))[:] = []
    rjob_pod(manifests, "workers")["containers"][0]["command"] = ["python3", "-m", "train"]
    w = only(manifests)
    assert w.others == frozenset() and w.group == w.pods
    assert any("no coordinator address" in p.message for p in w.problems)


def test_the_command_alone_shows_a_jax_process() -> None:
    """A jax-named program, or a Python importing jax, is a JAX process however it gets its contract."""
    manifests = docs(RL)
    workers = rjob_pod(manifests, "workers")
    workers["containers"][0]["env"] = []
    workers["containers"][0]["command"] = ["python3", "-c", "import jax; jax.distributed.initialize()"]
    w = only(manifests)
    assert [evidence(p) for p in w.pods] == [Evidence.NONE, Evidence.COMMAND, Evidence.COMMAND]
    assert w.others == frozenset({0})


# --- item 1: the contract in the command --------------------------------------------------------------------------
def test_a_script_that_computes_the_contract_is_undetermined_under_the_probe() -> None:
    """JAX-Toolbox's CI runs this Job green on its cluster: the script passes the coordinator, count and rank as
    flags. The probe cannot know what the script computes, so it claims neither a pass nor the cluster's failure."""
    w = only(docs(COMPUTED))
    assert w.problems == ()
    assert w.undetermined is not None and w.undetermined.startswith(COMPUTED_BY_COMMAND)
    assert "JAX_COORDINATOR_ADDRESS and JAX_PROCESS_ID" in w.undetermined and "a shell script" in w.undetermined


def test_under_run_command_the_script_is_run_not_judged() -> None:
    """--run-command runs the script: nothing is left undetermined (its own run is the verdict)."""
    assert only(docs(COMPUTED), check_all=False).undetermined is None


def test_what_is_statically_wrong_still_fails() -> None:
    """A rank that IS in the env, the same on both pods: on a cluster the coordinator sees task 0 twice and the group
    never forms, whatever the script computes for the coordinator."""
    manifests = docs(COMPUTED)
    manifests[1]["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "JAX_PROCESS_ID", "value": "0"})
    w = only(manifests)
    assert any("rank 0 is used by 2 pods" in p.message for p in w.problems)


def test_a_coordinator_in_the_env_that_does_not_resolve_still_fails() -> None:
    """The env names a Service that does not exist; the script computes only the rank. On a cluster the name does
    not resolve and JAX's client fails at its init timeout."""
    manifests = docs(COMPUTED)
    container = manifests[1]["spec"]["template"]["spec"]["containers"][0]
    container["env"].append({"name": "JAX_COORDINATOR_ADDRESS", "value": "nccl-test-0.nobody:3389"})
    w = only(manifests)
    assert any("does not resolve" in p.message for p in w.problems)


def test_how_a_command_computes_it() -> None:
    """A shell script, a launcher, a program's contract arguments; not an entrypoint wrapper (the probe reads the env
    it exports), not a script whose only JAX is a bare `jax.distributed.initialize()` (JAX reads the env, and so
    its lack is the cluster's failure), not a call such as `jax.process_index()`."""
    w = only(docs(COMPUTED))
    pod = w.pods[0]

    def with_argv(*argv: str) -> model.Pod:
        return replace(pod, command=argv, args=())

    assert computes(pod) == Computed.SCRIPT
    assert computes(with_argv("mpirun", "-np", "2", "python3", "train.py")) == Computed.LAUNCHER
    assert computes(with_argv("/opt/launch/test-maxtext.sh", "--nodes", "2")) == Computed.LAUNCHER
    assert computes(with_argv("python3", "train.py", "--coordinator_address", "h:1", "--process_id", "0")) == (
        Computed.ARGUMENTS
    )
    assert computes(with_argv("sh", "-c", 'export A=1; exec "$@"', "sh", "python3", "train.py")) is None
    assert computes(with_argv("bash", "-c", "python -c 'import jax; jax.distributed.initialize()'")) is None
    assert computes(with_argv("python3", "-c", "import jax; print(jax.process_index(), jax.process_count())")) is None


@pytest.mark.parametrize(
    ("beside", "undetermined"),
    [(Verdict.SUCCEEDED, True), (Verdict.UNDETERMINED, True), (Verdict.FAILED, False), (Verdict.NOT_FINISHED, False)],
)
def test_undetermined_is_the_simulations_status_only_where_nothing_else_kept_it_from_passing(
    beside: Verdict, undetermined: bool
) -> None:
    """Beside a workload that passed, the simulation is undetermined (exit 4); beside one that failed or did not
    finish, it has failed (exit 1), whatever the probe could not tell."""
    [w] = emulate(docs(COMPUTED)).workloads
    report = Report(
        [WorkloadResult("a.yaml", w, verdict=Verdict.UNDETERMINED), WorkloadResult("b.yaml", w, verdict=beside)]
    )
    assert not report.ok
    assert bool(report.undetermined) is undetermined
    assert report.as_dict()["undetermined"] is undetermined
