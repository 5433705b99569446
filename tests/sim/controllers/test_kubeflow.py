"""Kubeflow operators in the simulator: Training Operator v1 JAXJob and Trainer v2 TrainJob.

Expected values come from upstream code, not from the implementation:
- v1: kubeflow/trainer @ ee38ae8a (= kubeflow/training-operator release-1.9) pkg/controller.v1/jax/envvar.go
  (env appended in the order PYTHONUNBUFFERED, COORDINATOR_PORT, COORDINATOR_ADDRESS, NUM_PROCESSES, PROCESS_ID),
  pkg/apis/kubeflow.org/v1 (jaxjob-port 6666 defaulted on container `jax`, restartPolicy Never, replicas 1),
  pkg/controller.v1/common (pod and Service `<job>-worker-<i>`, headless, selector labels), pkg/core/job.go.
- v2: kubeflow/trainer @ 8c0f5059 pkg/runtime/framework/plugins/jax/jax.go (JAX_NUM_PROCESSES, JAX_PROCESS_ID,
  JAX_COORDINATOR_ADDRESS=<tj>-node-0-0.<tj>:29500, upserted), plugins/jobset (JobSet <tj>, numNodes ->
  parallelism/completions, trainer image/command/args/env on container `node`),
  manifests/base/runtimes/jax_distributed.yaml.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from jaxinfra import yamlio
from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.controllers.jaxjob import jaxjob
from jaxinfra_sim.core import inputs, model
from jaxinfra_sim.core.inputs import load_files
from jaxinfra_sim.kubelet import kuberuntime
from tests.sim.cluster.test_simulate import only, simulate
from tests.support.paths import MANIFESTS, ROOT
from tests.support.problems import one_problem, problems_of

pytestmark = pytest.mark.simulator

JAXJOB_CPU = MANIFESTS / "jaxjob_cpu_v1_script.yaml"
JAXJOB_GPU = MANIFESTS / "jaxjob_gpu_v1_script.yaml"
TRAINJOB_UPSTREAM = MANIFESTS / "trainjob_upstream_runtime.yaml"
TRAINJOB_OWN = MANIFESTS / "trainjob_own_runtime_gpu.yaml"
V1_ENV = ["PYTHONUNBUFFERED", "COORDINATOR_PORT", "COORDINATOR_ADDRESS", "NUM_PROCESSES", "PROCESS_ID"]


def load(path: Path) -> list[dict[str, Any]]:
    return load_files([path])


def only_workload(c: model.EmulatedCluster) -> model.Workload:
    assert c.problems == () and len(c.workloads) == 1, c.problems
    return c.workloads[0]


def worker(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == "JAXJob")["spec"]["jaxReplicaSpecs"]["Worker"]


def jax_container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return worker(objs)["template"]["spec"]["containers"][0]


def trainjob(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == "TrainJob")


# --------------------------------------------------------------------------------------------
# (a) Training Operator v1 JAXJob: pods, Services, env, DNS, restart policy
# --------------------------------------------------------------------------------------------


def test_v1_pods_are_named_and_labelled_as_the_operator_creates_them() -> None:
    c = emulate(load(JAXJOB_CPU))
    w = only_workload(c)
    assert problems_of(c) == []
    assert (w.id, w.groups, w.hosts_per_group, w.chips_per_host) == ("JAXJob/kubeflow/jaxjob-simple", 1, 2, 2)
    assert [p.name for p in w.pods] == ["jaxjob-simple-worker-0", "jaxjob-simple-worker-1"]
    assert [p.hostname for p in w.pods] == [p.name for p in w.pods]  # no spec.hostname: the kubelet uses the pod name
    assert {p.subdomain for p in w.pods} == {None}
    assert [p.global_index for p in w.pods] == [0, 1]
    common = {
        "app": "jax-demo",
        "training.kubeflow.org/operator-name": "jaxjob-controller",
        "training.kubeflow.org/job-name": "jaxjob-simple",
        "training.kubeflow.org/replica-type": "worker",
    }
    assert w.pods[0].labels == {
        **common,
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/job-role": "master",
    }
    assert w.pods[1].labels == {**common, "training.kubeflow.org/replica-index": "1"}
    for p in w.pods:  # created directly by the operator: no Job, no JobSet
        assert not any(
            k.startswith(("batch.kubernetes.io/", "jobset.sigs.k8s.io/")) or k in ("job-name", "controller-uid")
            for k in p.labels
        )
        assert p.annotations == {}
        assert (p.container, p.accelerator, p.devices) == ("jax", "cpu", 2)
        assert p.container_ports == (6666,)  # webhook default: jaxjob-port 6666


BENEATH = ["HOSTNAME", *kuberuntime.service_env("10.244.0.1", 443)]
"""What the container runtime and the kubelet put in every container, beneath its own env."""


def own_env(pod: model.Pod) -> list[str]:
    """The container's env names in order, without what lies beneath it."""
    return [k for k in pod.env if k not in BENEATH]


def test_v1_env_is_appended_by_the_operator_in_upstream_order() -> None:
    w = only_workload(emulate(load(JAXJOB_CPU)))
    for i, p in enumerate(w.pods):
        assert list(p.env) == [*BENEATH, "JAX_NUM_CPU_DEVICES", *V1_ENV]  # the user's env first, then the operator's
        assert [p.env[k] for k in V1_ENV] == ["1", "6666", "jaxjob-simple-worker-0", "2", str(i)]
        assert "JAX_COORDINATOR_ADDRESS" not in p.env and "JAX_PROCESS_ID" not in p.env


def test_v1_one_headless_service_per_replica_resolves_the_coordinator_to_rank_zero() -> None:
    objs = load(JAXJOB_CPU)
    draft = jaxjob(objs[0], inputs.Objects())
    assert [s.name for s in draft.services] == ["jaxjob-simple-worker-0", "jaxjob-simple-worker-1"]
    svc = draft.services[1]
    assert (svc.namespace, svc.headless, svc.publish_not_ready, svc.ports) == ("kubeflow", True, False, ((6666, 6666),))
    assert svc.selector == {
        "training.kubeflow.org/operator-name": "jaxjob-controller",
        "training.kubeflow.org/job-name": "jaxjob-simple",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "1",
    }
    c = emulate(objs)
    w = only_workload(c)
    for i, p in enumerate(w.pods):
        for name in (
            f"jaxjob-simple-worker-{i}.kubeflow.svc.cluster.local",
            f"jaxjob-simple-worker-{i}.kubeflow",
            f"jaxjob-simple-worker-{i}",
        ):
            assert c.hosts[name] == p.ip
    assert c.hosts[w.pods[1].env["COORDINATOR_ADDRESS"]] == w.pods[0].ip


def test_v1_gpu_port_from_the_named_port_and_devices_from_the_gpu_limit() -> None:
    c = emulate(load(JAXJOB_GPU))
    w = only_workload(c)
    assert problems_of(c) == []
    assert [p.name for p in w.pods] == [f"llm-gpu-worker-{i}" for i in range(3)]
    assert {(p.accelerator, p.devices, p.container_ports) for p in w.pods} == {("gpu", 2, (1234,))}
    assert [(p.env["COORDINATOR_PORT"], p.env["NUM_PROCESSES"], p.env["PROCESS_ID"]) for p in w.pods] == [
        ("1234", "3", "0"),
        ("1234", "3", "1"),
        ("1234", "3", "2"),
    ]
    assert c.hosts["llm-gpu-worker-0.default.svc.cluster.local"] == w.pods[0].ip
    assert w.restart == model.RestartPolicy(kind="job", backoff_limit=0, operator="JAXJob")  # Never by default


def test_v1_operator_env_is_invisible_to_earlier_env_but_not_to_args() -> None:
    objs = load(JAXJOB_CPU)
    container = jax_container(objs)
    container["env"] += [
        {"name": "ADDR", "value": "$(COORDINATOR_ADDRESS):$(COORDINATOR_PORT)"},
        {"name": "PROCESS_ID", "value": "7"},
    ]  # the operator's own entry comes later and wins
    container["args"] = ["--coordinator=$(COORDINATOR_ADDRESS):$(COORDINATOR_PORT)", "--rank=$(PROCESS_ID)"]
    w = only_workload(emulate(objs))
    p = w.pods[1]
    assert p.env["ADDR"] == "$(COORDINATOR_ADDRESS):$(COORDINATOR_PORT)"
    assert p.env["PROCESS_ID"] == "1"
    assert p.args == ("--coordinator=jaxjob-simple-worker-0:6666", "--rank=1")


@pytest.mark.parametrize(
    ("restart_policy", "backoff_limit", "expected"),
    [
        (None, None, model.RestartPolicy(kind="job", backoff_limit=0, operator="JAXJob")),  # Never: the first fails
        ("Never", 5, model.RestartPolicy(kind="job", backoff_limit=0, operator="JAXJob")),  # backoffLimit not counted
        (
            "OnFailure",
            3,
            model.RestartPolicy(kind="job", backoff_limit=3, in_place=True, operator="JAXJob"),
        ),  # in place: fails when restarts sum to 3 (>= limit: job_failure.tolerated)
        (
            "OnFailure",
            0,
            model.RestartPolicy(kind="job", backoff_limit=0, in_place=True, operator="JAXJob"),
        ),  # 0: the first restart fails it
        (
            "Always",
            None,
            model.RestartPolicy(kind="job", backoff_limit=None, in_place=True, operator="JAXJob"),
        ),  # no backoffLimit: unlimited, in place
        (
            "ExitCode",
            2,
            model.RestartPolicy(
                kind="job",
                backoff_limit=2,
                pod_failure_rules=(
                    {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": list(range(128, 256))}},
                ),
                operator="JAXJob",
            ),
        ),
    ],
)
def test_v1_restart_policy(
    restart_policy: str | None, backoff_limit: int | None, expected: model.RestartPolicy
) -> None:
    objs = load(JAXJOB_CPU)
    worker(objs).pop("restartPolicy")
    objs[0]["spec"].pop("runPolicy")
    if restart_policy:
        worker(objs)["restartPolicy"] = restart_policy
    if backoff_limit is not None:
        objs[0]["spec"]["runPolicy"] = {"backoffLimit": backoff_limit}
    assert only_workload(emulate(objs)).restart == expected


def test_v1_replica_type_keys_are_case_insensitive_and_replicas_default_to_one() -> None:
    objs = load(JAXJOB_CPU)
    spec = objs[0]["spec"]["jaxReplicaSpecs"]
    spec["worker"] = spec.pop("Worker")
    spec["worker"].pop("replicas")
    w = only_workload(emulate(objs))
    assert [p.name for p in w.pods] == ["jaxjob-simple-worker-0"] and w.pods[0].env["NUM_PROCESSES"] == "1"


# --------------------------------------------------------------------------------------------
# (a) Trainer v2 TrainJob: the JobSet the Trainer builds, the JAX plugin's env
# --------------------------------------------------------------------------------------------


def test_v2_on_the_upstream_runtime_becomes_its_jobset() -> None:
    c = emulate(load(TRAINJOB_UPSTREAM))  # the runtime is not in the file: the packaged upstream one
    w = only_workload(c)
    assert problems_of(c) == []
    assert (w.id, w.groups, w.hosts_per_group, w.chips_per_host) == ("TrainJob/default/jax-mnist", 1, 2, 2)
    assert [p.hostname for p in w.pods] == ["jax-mnist-node-0-0", "jax-mnist-node-0-1"]
    assert {p.subdomain for p in w.pods} == {"jax-mnist"}
    p = w.pods[1]
    assert (
        p.labels["jobset.sigs.k8s.io/jobset-name"] == "jax-mnist"
        and p.labels["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
    )
    assert p.labels["batch.kubernetes.io/job-name"] == "jax-mnist-node-0"
    assert (p.container, p.image, p.command[0]) == ("node", "nvcr.io/nvidia/jax:25.10-py3", "python3")
    # The JAX plugin upserts its env into the runtime's container; the TrainJob's env comes after; then the Job
    # controller's.
    assert own_env(p) == [
        "JAX_NUM_PROCESSES",
        "JAX_PROCESS_ID",
        "JAX_COORDINATOR_ADDRESS",
        "JAX_NUM_CPU_DEVICES",
        "JOB_COMPLETION_INDEX",
    ]
    assert [w.pods[i].env["JAX_PROCESS_ID"] for i in (0, 1)] == ["0", "1"]
    assert (p.env["JAX_NUM_PROCESSES"], p.env["JAX_COORDINATOR_ADDRESS"]) == ("2", "jax-mnist-node-0-0.jax-mnist:29500")
    assert p.container_ports == (29500,)
    assert c.hosts["jax-mnist-node-0-0.jax-mnist.default.svc.cluster.local"] == w.pods[0].ip
    assert c.hosts["jax-mnist-node-0-0.jax-mnist"] == w.pods[0].ip
    # no failurePolicy upstream; the child Job: the Job API's backoffLimit, the JobSet webhook's restartPolicy
    assert w.restart == model.RestartPolicy(
        "jobset", max_restarts=0, child_jobs=(("node", model.RestartPolicy("job", backoff_limit=6, in_place=True)),)
    )


def test_v2_on_a_training_runtime_in_the_manifests() -> None:
    c = emulate(load(TRAINJOB_OWN))
    w = only_workload(c)
    assert problems_of(c) == []
    assert w.id == "TrainJob/research/llm" and [p.hostname for p in w.pods] == [f"llm-node-0-{i}" for i in range(3)]
    p = w.pods[2]
    assert (p.accelerator, p.devices) == ("gpu", 2)  # resourcesPerNode merged into the `node` container
    assert own_env(p)[:4] == [
        "XLA_PYTHON_CLIENT_MEM_FRACTION",
        "JAX_NUM_PROCESSES",
        "JAX_PROCESS_ID",
        "JAX_COORDINATOR_ADDRESS",
    ]
    assert (p.env["JAX_NUM_PROCESSES"], p.env["JAX_PROCESS_ID"], p.env["JAX_COORDINATOR_ADDRESS"]) == (
        "3",
        "2",
        "llm-node-0-0.llm:29500",
    )
    assert c.hosts["llm-node-0-0.llm.research.svc.cluster.local"] == w.pods[0].ip
    assert w.restart.kind == "jobset" and w.restart.max_restarts == 1  # the runtime's JobSet failurePolicy


def test_v2_env_is_upserted_after_the_plugin_env() -> None:
    objs = load(TRAINJOB_UPSTREAM)
    trainjob(objs)["spec"]["trainer"]["env"] += [
        {"name": "TAG", "value": "rank-$(JAX_PROCESS_ID)"},
        {"name": "JAX_NUM_PROCESSES", "value": "2"},
    ]
    p = only_workload(emulate(objs)).pods[1]
    assert p.env["TAG"] == "rank-1"  # unlike v1, the plugin's env is defined before the user's
    assert own_env(p).index("JAX_NUM_PROCESSES") == 0  # replaced in place, not appended


def test_v2_num_nodes_defaults_to_the_runtime_and_manifest_runtime_wins() -> None:
    objs = load(TRAINJOB_UPSTREAM)
    del trainjob(objs)["spec"]["trainer"]["numNodes"]
    runtime = copy.deepcopy(inputs.upstream_runtime())
    runtime["spec"]["mlPolicy"]["numNodes"] = 3
    w = only_workload(emulate([runtime, *objs]))
    assert len(w.pods) == 3 and w.pods[0].env["JAX_NUM_PROCESSES"] == "3"
    assert only_workload(emulate(objs)).pods[0].env["JAX_NUM_PROCESSES"] == "1"  # upstream numNodes: 1


def test_v2_runtime_patches_merge_by_name() -> None:
    objs = load(TRAINJOB_UPSTREAM)
    trainjob(objs)["spec"]["runtimePatches"] = [
        {
            "manager": "test",
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {
                                "name": "node",
                                "template": {
                                    "spec": {
                                        "template": {
                                            "spec": {
                                                "containers": [
                                                    {"name": "node", "env": [{"name": "FROM_PATCH", "value": "yes"}]}
                                                ]
                                            }
                                        }
                                    }
                                },
                            }
                        ]
                    }
                }
            },
        }
    ]
    p = only_workload(emulate(objs)).pods[0]
    assert p.env["FROM_PATCH"] == "yes" and p.image == "nvcr.io/nvidia/jax:25.10-py3"


def test_upstream_runtime_is_package_data_with_its_provenance() -> None:
    text = (ROOT / "simulate" / "jaxinfra_sim" / "core" / "jax_distributed_runtime.yaml").read_text()
    assert text.startswith("# Copyright The Kubeflow Authors.") and "8c0f5059bd51ec3ba6d6a6a7b2e1471de7bc13b3" in text
    [runtime] = yamlio.load(text)
    assert runtime == inputs.upstream_runtime()
    assert (runtime["kind"], runtime["metadata"]["name"], runtime["spec"]["mlPolicy"]) == (
        "ClusterTrainingRuntime",
        "jax-distributed",
        {"numNodes": 1, "jax": {}},
    )


# --------------------------------------------------------------------------------------------
# (d) Broken manifests: one precise problem each
# --------------------------------------------------------------------------------------------


def test_v1_without_a_jax_container_is_rejected() -> None:
    objs = load(JAXJOB_CPU)
    jax_container(objs)["name"] = "trainer"
    c = emulate(objs)
    assert c.workloads == ()
    problem = one_problem(c, "must have at least one container with name jax")
    assert problem.path == "JAXJob/kubeflow/jaxjob-simple spec.jaxReplicaSpecs.Worker.template.spec.containers"
    assert problem.fix == "name the container that runs JAX 'jax'"


def test_v1_with_another_replica_type_is_rejected() -> None:
    objs = load(JAXJOB_CPU)
    objs[0]["spec"]["jaxReplicaSpecs"]["Master"] = copy.deepcopy(worker(objs))
    assert "only the replica type Worker" in one_problem(emulate(objs), "Master").message


def test_v1_operator_env_referenced_from_env_stays_verbatim() -> None:
    objs = load(JAXJOB_CPU)
    jax_container(objs)["env"].append(
        {"name": "JAX_COORDINATOR_ADDRESS", "value": "$(COORDINATOR_ADDRESS):$(COORDINATOR_PORT)"}
    )
    problem = one_problem(emulate(objs), "must be host:port")
    assert problem.path == "JAXJob/kubeflow/jaxjob-simple pod jaxjob-simple-worker-0 env JAX_COORDINATOR_ADDRESS"
    assert "COORDINATOR_ADDRESS, COORDINATOR_PORT are appended by the Training Operator after yours" in problem.message
    assert "(and 1 more pod)" in problem.message and "command/args" in problem.fix


def test_v1_rank_from_env_reference_is_not_an_integer() -> None:
    objs = load(JAXJOB_CPU)
    jax_container(objs)["env"].append({"name": "JAX_PROCESS_ID", "value": "$(PROCESS_ID)"})
    problem = one_problem(emulate(objs), "not an integer")
    assert problem.value == "$(PROCESS_ID)" and "appended by the Training Operator" in problem.message


def test_v1_readiness_probe_delays_the_operators_service() -> None:
    objs = load(JAXJOB_CPU)
    jax_container(objs)["readinessProbe"] = {"tcpSocket": {"port": 6666}}
    problem = one_problem(emulate(objs), "readinessProbe")
    assert (
        "does not publish not-ready addresses" in problem.message
        and problem.fix == "remove the readinessProbe from container 'jax'"
    )


def test_v2_with_an_unknown_runtime() -> None:
    objs = load(TRAINJOB_UPSTREAM)
    trainjob(objs)["spec"]["runtimeRef"]["name"] = "jax-distributd"
    c = emulate(objs)
    assert c.workloads == ()
    problem = one_problem(c, "jax-distributd")
    assert problem.path == "TrainJob/default/jax-mnist spec.runtimeRef"
    assert (
        "ClusterTrainingRuntime 'jax-distributd' is neither in the manifests nor one of the Trainer's built-in "
        "runtimes ('jax-distributed', ...)" in problem.message
    )
    assert problem.fix == "reference one of ['jax-distributed'], or add the ClusterTrainingRuntime to the manifests"


def test_v2_training_runtime_is_namespaced() -> None:
    objs = load(TRAINJOB_OWN)
    trainjob(objs)["metadata"]["namespace"] = "other"
    problem = one_problem(emulate(objs), "TrainingRuntime 'jax-gpu' in namespace 'other'")
    assert "is not found" in problem.message


def test_v2_on_a_torch_runtime_is_not_a_jax_runtime() -> None:
    objs = load(TRAINJOB_OWN)
    objs[0]["spec"]["mlPolicy"] = {"numNodes": 1, "torch": {}}
    assert "mlPolicy.torch is not a JAX runtime" in one_problem(emulate(objs), "mlPolicy").message


def test_v2_runtime_without_node_container() -> None:
    objs = load(TRAINJOB_OWN)
    objs[0]["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0][
        "name"
    ] = "main"
    c = emulate(objs)
    assert "no container named 'node'" in one_problem(c, "no container named").message
    assert one_problem(c, "no coordinator address")  # and so no JAX env reaches the pods


# --------------------------------------------------------------------------------------------
# (b), (c), (d) end to end through the CLI: the scripts unchanged, the built-in probe, failures
# --------------------------------------------------------------------------------------------

RUNS = {
    # file: pod names in rank order
    "jaxjob_cpu_v1_script": ["jaxjob-simple-worker-0", "jaxjob-simple-worker-1"],
    "jaxjob_gpu_v1_script": ["llm-gpu-worker-0", "llm-gpu-worker-1", "llm-gpu-worker-2"],
    "trainjob_upstream_runtime": ["jax-mnist-node-0-0", "jax-mnist-node-0-1"],
    "trainjob_own_runtime_gpu": ["llm-node-0-0", "llm-node-0-1", "llm-node-0-2"],
}


def _id(name: str) -> str:
    """Test ids name the contract (v1 / v2), so `-k "not jaxjob and not trainjob"` (rendered stacks) keeps these."""
    return name.replace("jaxjob", "v1").replace("trainjob", "v2")


@pytest.mark.parametrize("name", list(RUNS), ids=_id)
def test_operator_style_scripts_run_unchanged(name: str, tmp_path: Path) -> None:
    rc, report, err = simulate(str(MANIFESTS / f"{name}.yaml"), "--run-command", tmp=tmp_path, timeout=120)
    assert rc == 0 and report["ok"], err
    w = only(report)
    assert (w["verdict"], w["restarts"]) == ("succeeded", 0)
    assert [(p["hostname"], p["rank"], p["exit_code"]) for p in w["attempts"][0]["pods"]] == [
        (h, i, 0) for i, h in enumerate(RUNS[name])
    ]


@pytest.mark.parametrize("name", ["jaxjob_gpu_v1_script", "trainjob_upstream_runtime"], ids=_id)
def test_builtin_probe_passes(name: str, tmp_path: Path) -> None:
    rc, report, err = simulate(str(MANIFESTS / f"{name}.yaml"), tmp=tmp_path, timeout=120)
    assert rc == 0, err
    pods = only(report)["attempts"][0]["pods"]
    assert [p["hostname"] for p in pods] == RUNS[name] and all(p["checks_passed"] for p in pods)


@pytest.mark.parametrize(
    ("restart_policy", "backoff_limit", "reason", "event"),
    [
        # restartPolicy Never: the operator's UpdateJobStatus fails it at the first failed Worker
        ("Never", None, "JAXJob jaxjob-simple is failed because 1 Worker replica(s) failed.", "Normal"),
        # OnFailure past runPolicy.backoffLimit: the common ReconcileJobs' words, about the job
        ("OnFailure", 0, "Job jaxjob-simple has failed because it has reached the specified backoff limit", "Normal"),
        # ExitCode with a non-retryable exit code: ReconcilePods fails it, a Warning
        ("ExitCode", 3, 'job "jaxjob-simple" is failing because "Worker" replica(s) failed.', "Warning"),
    ],
)
def test_v1_a_failed_jaxjob_gets_the_operators_condition_not_a_jobs(
    restart_policy: str, backoff_limit: int | None, reason: str, event: str, tmp_path: Path
) -> None:
    """A JAXJob has no batch Job: its Failed condition and event are the Training Operator's (reason JAXJobFailed,
    kubeflow/training-operator @ 078ec30f), in the words of the path that failed it; the same JAXJob passing is in
    test_builtin_probe_passes."""
    objs = load(JAXJOB_CPU)
    worker(objs)["restartPolicy"] = restart_policy
    objs[0]["spec"]["runPolicy"] = {} if backoff_limit is None else {"backoffLimit": backoff_limit}
    path = tmp_path / "jaxjob.yaml"
    path.write_text(yamlio.dump(objs))
    rc, report, err = simulate(str(path), "--fail", "jaxjob-simple-worker-1", tmp=tmp_path, timeout=120)
    w = only(report)
    assert rc == 1 and w["verdict"] == "failed", err
    assert f"(the JAXJob's Failed condition: JAXJobFailed, {reason!r})" in w["reason"]
    assert "the Job's Failed condition" not in w["reason"]
    failed = [e for a in w["attempts"] for e in a["events"] if e["reason"] == "JAXJobFailed"]
    assert [(e["type"], e["object"], e["message"]) for e in failed] == [
        (event, "JAXJob/kubeflow/jaxjob-simple", reason)
    ]


def test_v1_on_failure_restarts_within_its_backoff_limit(tmp_path: Path) -> None:
    # restartPolicy OnFailure, backoffLimit 3: the killed pod and the one ended with it count 2 < 3.
    objs = load(JAXJOB_CPU)
    objs[0]["spec"]["runPolicy"]["backoffLimit"] = 3
    path = tmp_path / "jaxjob.yaml"
    path.write_text(yamlio.dump(objs))
    rc, report, err = simulate(
        str(path), "--run-command", "--kill", "jaxjob-simple-worker-1@0.1", tmp=tmp_path, timeout=120
    )
    w = only(report)
    assert rc == 0 and (w["verdict"], w["restarts"]) == ("succeeded", 1), err
    assert "SIGKILL" in w["attempts"][0]["reason"]


def test_v2_a_pod_that_fails_once_restarts_in_place_and_the_trainjob_recovers(tmp_path: Path) -> None:
    """The upstream jax-distributed runtime sets neither restartPolicy nor backoffLimit: the JobSet webhook defaults
    the pods to OnFailure, the Job API the backoffLimit to 6. A killed container (and its peer, which fails with it)
    restarts in place, 2 restarts < 6, and the TrainJob succeeds; no JobSet restart, same pods."""
    rc, report, err = simulate(
        str(MANIFESTS / "trainjob_upstream_runtime.yaml"),
        "--run-command",
        "--kill",
        "jax-mnist-node-0-1@0.1",
        tmp=tmp_path,
        timeout=120,
    )
    w = only(report)
    assert rc == 0 and (w["verdict"], w["restarts"]) == ("succeeded", 1), err
    assert [a["backoff_s"] for a in w["attempts"]] == [0.0, 10.0]  # the kubelet's back-off: in place
    assert len({(p["name"], p["ip"]) for a in w["attempts"] for p in a["pods"]}) == 2


def test_v2_a_program_that_always_fails_ends_at_the_child_jobs_backoff_limit(tmp_path: Path) -> None:
    """Each attempt restarts both containers in place: the Job fails once their restartCounts reach 6, at the third
    failure of the pair (pastBackoffLimitOnFailure), and the JobSet, with no failurePolicy, fails with it."""
    objs = load(MANIFESTS / "trainjob_upstream_runtime.yaml")
    objs[0]["spec"]["trainer"]["args"] = ["raise SystemExit(3)"]
    path = tmp_path / "trainjob.yaml"
    path.write_text(yamlio.dump(objs))
    rc, report, err = simulate(str(path), "--run-command", tmp=tmp_path, timeout=120)
    w = only(report)
    assert rc == 1 and (w["verdict"], w["restarts"]) == ("failed", 2), err
    assert "backoffLimit (6) exceeded: 6 pod failures" in w["reason"]
    assert [a["backoff_s"] for a in w["attempts"]] == [0.0, 10.0, 20.0]


def test_broken_v2_fails_before_anything_runs(tmp_path: Path) -> None:
    objs = load(TRAINJOB_UPSTREAM)
    trainjob(objs)["spec"]["runtimeRef"]["name"] = "jax-distributd"
    path = tmp_path / "broken.yaml"
    path.write_text(yamlio.dump(objs))
    rc, report, _ = simulate(str(path), "--run-command", tmp=tmp_path)
    assert rc == 2 and report["workloads"] == []  # Trainer's webhook refuses the TrainJob when it is applied
    [problem] = report["problems"]
    assert 'clustertrainingruntimes.trainer.kubeflow.org "jax-distributd" not found' in problem["message"]


def test_broken_v1_fails_before_anything_runs(tmp_path: Path) -> None:
    objs = load(JAXJOB_CPU)
    jax_container(objs)["env"].append(
        {"name": "JAX_COORDINATOR_ADDRESS", "value": "$(COORDINATOR_ADDRESS):$(COORDINATOR_PORT)"}
    )
    path = tmp_path / "broken.yaml"
    path.write_text(yamlio.dump(objs))
    rc, report, _ = simulate(str(path), "--run-command", tmp=tmp_path)
    w = only(report)
    assert rc == 1 and w["verdict"] == "failed" and w["attempts"] == []
    assert any("appended by the Training Operator" in p["message"] for p in w["problems"])
