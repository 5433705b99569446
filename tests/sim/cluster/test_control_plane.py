"""The controller/kubelet/DNS emulation: pods, env, DNS and contract problems from real manifests.

Expected values come from upstream behaviour (JobSet @ 08dfbdfd, the Kubernetes Job controller and
kubelet, JAX's TPU cluster detector), not from the implementation.
"""

from __future__ import annotations

import copy
import hashlib
import ipaddress
import re
import time
from pathlib import Path
from typing import Any

import pytest

from jaxinfra import manifests, stack, yamlio
from jaxinfra.errors import ManifestError, Unserved
from jaxinfra_sim import controllers
from jaxinfra_sim.cluster import control_plane
from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.core import model
from jaxinfra_sim.core.inputs import load_files
from jaxinfra_sim.kubelet.kuberuntime import expand
from tests.support.admitted import stored
from tests.support.paths import MANIFESTS, ROOT
from tests.support.problems import one_problem, problems_of
from tests.support.stacks import PAIR_IDS, PAIRS, rendered

pytestmark = pytest.mark.unit

# --------------------------------------------------------------------------------------------
# Hand-written manifests in the style of upstream examples
# --------------------------------------------------------------------------------------------

# (a) Multi-slice TPU JobSet wired as xpk does: MEGASCALE_* from fieldRefs, no JAX_* env at all.
MULTISLICE = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: multislice
  annotations:
    alpha.jobset.sigs.k8s.io/exclusive-topology: cloud.google.com/gke-nodepool
spec:
  failurePolicy:
    maxRestarts: 4
  replicatedJobs:
  - name: slice
    replicas: 2
    template:
      spec:
        parallelism: 2
        completions: 2
        backoffLimit: 0
        template:
          metadata:
            labels: {app: llm}
          spec:
            hostNetwork: true
            dnsPolicy: ClusterFirstWithHostNet
            nodeSelector:
              cloud.google.com/gke-tpu-accelerator: tpu-v5-lite-podslice
              cloud.google.com/gke-tpu-topology: 2x4
            containers:
            - name: jax-tpu
              image: python:3.11
              ports:
              - containerPort: 8471
              - containerPort: 8482
              command:
              - bash
              - -c
              - "python -c 'import jax; jax.distributed.initialize(); print(jax.device_count())'"
              env:
              - name: REPLICATED_JOB_NAME
                valueFrom:
                  fieldRef:
                    fieldPath: metadata.annotations['jobset.sigs.k8s.io/replicatedjob-name']
              - name: JOBSET_NAME
                valueFrom:
                  fieldRef:
                    fieldPath: metadata.annotations['jobset.sigs.k8s.io/jobset-name']
              - name: MEGASCALE_COORDINATOR_ADDRESS
                value: "$(JOBSET_NAME)-$(REPLICATED_JOB_NAME)-0-0.$(JOBSET_NAME)"
              - name: MEGASCALE_NUM_SLICES
                valueFrom:
                  fieldRef:
                    fieldPath: "metadata.labels['jobset.sigs.k8s.io/replicatedjob-replicas']"
              - name: MEGASCALE_SLICE_ID
                valueFrom:
                  fieldRef:
                    fieldPath: "metadata.labels['jobset.sigs.k8s.io/job-index']"
              - name: WORKER_TAG
                value: "slice$(MEGASCALE_SLICE_ID)-worker$(TPU_WORKER_ID)"
              resources:
                limits:
                  google.com/tpu: 4
"""

# (b) An Indexed Job with its own headless Service; the rank comes from $(JOB_COMPLETION_INDEX).
INDEXED = """
apiVersion: v1
kind: Service
metadata: {name: workers, namespace: research}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {job-name: train}
  ports: [{name: coordinator, port: 1234}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: research}
spec:
  completionMode: Indexed
  completions: 3
  parallelism: 3
  backoffLimitPerIndex: 1
  podFailurePolicy:
    rules:
    - action: FailIndex
      onExitCodes: {operator: In, values: [42]}
  template:
    spec:
      subdomain: workers
      restartPolicy: Never
      containers:
      - name: trainer
        image: python:3.12
        command: [python, train.py]
        args: ["--index=$(JOB_COMPLETION_INDEX)", "--literal=$$(JOB_COMPLETION_INDEX)", "--missing=$(NOT_DEFINED)"]
        ports: [{containerPort: 1234}]
        env:
        - name: JOB_COMPLETION_INDEX
          valueFrom:
            fieldRef:
              fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']
        - name: JAX_PROCESS_ID
          value: $(JOB_COMPLETION_INDEX)
        - name: JAX_NUM_PROCESSES
          value: "3"
        - name: JAX_COORDINATOR_ADDRESS
          value: train-0.workers:1234
        - name: JAX_NUM_CPU_DEVICES
          value: "2"
"""


def load(text: str) -> list[dict]:
    """The manifests as the API server stores them (`tests.support.admitted.stored`)."""
    return stored(yamlio.load(text))


def edit(text: str, old: str, new: str) -> str:
    """The manifest text with one exact change: each broken case differs from a working one by one line."""
    assert old in text, old
    return text.replace(old, new)


def only_workload(c: model.EmulatedCluster) -> model.Workload:
    assert len(c.workloads) == 1, c.problems
    return c.workloads[0]


# --------------------------------------------------------------------------------------------
# Real stacks: every rendered backend emulates cleanly, and the contract holds
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "backend"), PAIRS, ids=PAIR_IDS)
def test_rendered_stacks_emulate_without_problems(path: Path, backend: str) -> None:
    c = emulate(rendered(path, backend))
    assert problems_of(c) == []
    v1 = backend == "jaxjob"  # Training Operator v1 names its own contract
    for w in c.workloads:
        rank0 = w.pods[0]
        host = rank0.env["COORDINATOR_ADDRESS"] if v1 else rank0.env["JAX_COORDINATOR_ADDRESS"].rsplit(":", 1)[0]
        assert c.hosts[f"{host}.{w.namespace}"] == rank0.ip  # resolves to rank 0
        assert int(rank0.env["NUM_PROCESSES" if v1 else "JAX_NUM_PROCESSES"]) == len(w.pods)
        assert [p.global_index for p in w.pods] == list(range(len(w.pods)))
        assert len({p.ip for p in w.pods}) == len(w.pods)
        assert w.groups * w.hosts_per_group == len(w.pods)
        assert w.restart.kind == ("jobset" if backend in ("jobset", "trainjob") else "job")


def test_tpu_multislice_stack_pods_and_platform_env() -> None:
    c = emulate(manifests(stack.load(ROOT / "stacks/tpu_v5p_2x2x4_x2.py")))
    w = only_workload(c)
    assert (w.kind, w.groups, w.hosts_per_group, w.chips_per_host) == ("JobSet", 2, 4, 4)
    assert [p.hostname for p in w.pods] == [f"train-slice-{j}-{i}" for j in (0, 1) for i in range(4)]
    p = w.pods[5]  # slice 1, worker 1
    assert (p.job_index, p.completion_index, p.global_index, p.subdomain) == (1, 1, 5, "train")
    assert p.env["TPU_WORKER_ID"] == "1"
    assert p.env["TPU_WORKER_HOSTNAMES"] == ",".join(f"train-slice-1-{i}.train" for i in range(4))
    assert p.env["MEGASCALE_SLICE_ID"] == "1" and p.env["MEGASCALE_NUM_SLICES"] == "2"
    assert (p.accelerator, p.devices, p.container_ports) == ("tpu", 4, (8482,))
    assert w.restart == model.RestartPolicy(
        "jobset",
        max_restarts=3,
        failure_policy=True,
        child_jobs=(("slice", model.RestartPolicy("job", backoff_limit=0)),),
    )


def test_cpu_job_stack_labels_env_and_restart() -> None:
    c = emulate(manifests(stack.load(ROOT / "stacks/cpu_dev.py").with_backend("job")))
    w = only_workload(c)
    p = w.pods[1]
    assert (p.hostname, p.subdomain, p.accelerator, p.devices) == ("train-1", "train", "cpu", 2)
    assert p.labels["batch.kubernetes.io/job-name"] == p.labels["job-name"] == "train"
    assert p.labels["batch.kubernetes.io/controller-uid"] == p.labels["controller-uid"]
    assert (
        p.labels["batch.kubernetes.io/job-completion-index"]
        == p.annotations["batch.kubernetes.io/job-completion-index"]
        == "1"
    )
    assert p.env["JAX_PROCESS_ID"] == "1" and p.env["JOB_COMPLETION_INDEX"] == "1"
    assert "TPU_WORKER_ID" not in p.env
    assert not any(k.startswith("jobset.sigs.k8s.io/") for k in p.labels)
    assert w.restart.kind == "job" and w.restart.backoff_limit == 2  # max_restarts 1 x 2 pods
    assert w.restart.pod_failure_rules[0]["action"] == "Ignore"


def test_huge_stack_is_linear() -> None:
    """6,144 pods cost per pod what an 8-pod stack does (within 20x): nothing quadratic (the wall-clock target is
    benchmarks/simulate.py's)."""

    def best(ms: list[dict[str, Any]]) -> tuple[float, Any]:
        times, c = [], None
        for _ in range(3):
            start = time.perf_counter()
            c = emulate(ms)
            times.append(time.perf_counter() - start)
        return min(times), c

    small, c_small = best(manifests(stack.load(ROOT / "stacks/tpu_v5p_2x2x4_x2.py")))
    huge, c = best(manifests(stack.load(ROOT / "benchmarks/stacks/v5p_16x16x24_x4.py")))
    w = only_workload(c)
    assert len(w.pods) == 6144 and w.groups == 4 and w.hosts_per_group == 1536
    assert problems_of(c) == []
    assert len({p.ip for p in w.pods}) == 6144
    per_small, per_huge = small / len(only_workload(c_small).pods), huge / len(w.pods)
    assert per_huge < 20 * per_small, f"{per_huge * 1e6:.0f} us a pod at 6,144 pods, {per_small * 1e6:.0f} at 8"


# --------------------------------------------------------------------------------------------
# (a) multi-slice TPU JobSet: JobSet controller + GKE platform env + derived ranks
# --------------------------------------------------------------------------------------------


def test_multislice_pods_labels_and_annotations_follow_jobset() -> None:
    c = emulate(load(MULTISLICE))
    w = only_workload(c)
    assert problems_of(c) == []
    assert [p.hostname for p in w.pods] == [
        "multislice-slice-0-0",
        "multislice-slice-0-1",
        "multislice-slice-1-0",
        "multislice-slice-1-1",
    ]
    # Pod names are generateName `<job>-<index>-` plus 5 random characters; hostnames have no suffix.
    assert all(re.fullmatch(f"{p.hostname}-[bcdfghjklmnpqrstvwxz2456789]{{5}}", p.name) for p in w.pods), [
        p.name for p in w.pods
    ]
    assert len({p.name for p in w.pods}) == 4
    assert [p.name for p in w.pods] == [p.name for p in only_workload(emulate(load(MULTISLICE))).pods]  # reproducible
    assert not {p.name for p in w.pods} & {p.name for p in only_workload(emulate(load(MULTISLICE), recreated=1)).pods}
    assert {p.subdomain for p in w.pods} == {"multislice"}
    p = w.pods[3]
    jobset_keys = {
        "jobset.sigs.k8s.io/jobset-name": "multislice",
        "jobset.sigs.k8s.io/replicatedjob-name": "slice",
        "jobset.sigs.k8s.io/replicatedjob-replicas": "2",
        "jobset.sigs.k8s.io/global-replicas": "2",
        "jobset.sigs.k8s.io/job-index": "1",
        "jobset.sigs.k8s.io/job-global-index": "1",
        "jobset.sigs.k8s.io/restart-attempt": "0",
        "jobset.sigs.k8s.io/group-name": "default",
        "jobset.sigs.k8s.io/group-replicas": "2",
        "jobset.sigs.k8s.io/job-group-index": "1",
        "jobset.sigs.k8s.io/job-key": hashlib.sha1(b"default/multislice-slice-1").hexdigest(),
    }
    for key, value in jobset_keys.items():
        assert p.labels[key] == value and p.annotations[key] == value, key
    restarted = only_workload(emulate(load(MULTISLICE), restarts=2)).pods[3]
    assert (
        restarted.labels["jobset.sigs.k8s.io/restart-attempt"]
        == restarted.annotations["jobset.sigs.k8s.io/restart-attempt"]
        == "2"
    )
    assert p.labels["jobset.sigs.k8s.io/jobset-uid"] == p.annotations["jobset.sigs.k8s.io/jobset-uid"]
    assert p.labels["app"] == "llm"
    assert p.labels["batch.kubernetes.io/job-name"] == p.labels["job-name"] == "multislice-slice-1"
    assert (
        p.labels["batch.kubernetes.io/job-completion-index"]
        == p.annotations["batch.kubernetes.io/job-completion-index"]
        == "1"
    )
    assert p.labels["jobset.sigs.k8s.io/priority"] == "0"  # JobSet pod webhook, priority admission default
    assert "jobset.sigs.k8s.io/priority" not in p.annotations
    assert p.annotations["alpha.jobset.sigs.k8s.io/exclusive-topology"] == "cloud.google.com/gke-nodepool"
    assert "alpha.jobset.sigs.k8s.io/exclusive-topology" not in p.labels
    assert w.restart == model.RestartPolicy(
        "jobset",
        max_restarts=4,
        failure_policy=True,
        child_jobs=(("slice", model.RestartPolicy("job", backoff_limit=0, in_place=True)),),  # webhook: OnFailure
    )


def test_multislice_tpu_platform_env_and_derived_ranks() -> None:
    w = only_workload(emulate(load(MULTISLICE)))
    assert [p.env["TPU_WORKER_ID"] for p in w.pods] == ["0", "1", "0", "1"]
    assert w.pods[2].env["TPU_WORKER_HOSTNAMES"] == "multislice-slice-1-0.multislice,multislice-slice-1-1.multislice"
    assert w.pods[0].env["TPU_WORKER_HOSTNAMES"] == "multislice-slice-0-0.multislice,multislice-slice-0-1.multislice"
    assert all(p.env["TPU_SKIP_MDS_QUERY"] == "true" for p in w.pods)
    assert [p.env["MEGASCALE_SLICE_ID"] for p in w.pods] == ["0", "0", "1", "1"]
    assert {p.env["MEGASCALE_COORDINATOR_ADDRESS"] for p in w.pods} == {"multislice-slice-0-0.multislice"}
    # Platform env is visible to $(VAR) expansion, like controller env.
    assert [p.env["WORKER_TAG"] for p in w.pods] == [
        "slice0-worker0",
        "slice0-worker1",
        "slice1-worker0",
        "slice1-worker1",
    ]
    ranks = [int(p.env["TPU_WORKER_ID"]) + int(p.env["MEGASCALE_SLICE_ID"]) * 2 for p in w.pods]
    assert ranks == [0, 1, 2, 3]
    assert w.pods[0].command == (
        "bash",
        "-c",
        "python -c 'import jax; jax.distributed.initialize(); print(jax.device_count())'",
    )
    assert (w.chips_per_host, w.groups, w.hosts_per_group) == (4, 2, 2)


def test_multislice_dns_from_the_jobset_controllers_own_service() -> None:
    c = emulate(load(MULTISLICE))
    w = only_workload(c)
    ip = {p.hostname: p.ip for p in w.pods}
    for host, addr in ip.items():
        for name in (
            f"{host}.multislice.default.svc.cluster.local",
            f"{host}.multislice.default.svc",
            f"{host}.multislice.default",
            f"{host}.multislice",
        ):
            assert c.hosts[name] == addr
    assert c.hosts["multislice.default.svc.cluster.local"] == ip["multislice-slice-0-0"]
    assert list(c.hosts) == sorted(c.hosts)


def test_single_host_tpu_gets_no_platform_env() -> None:
    single = edit(edit(MULTISLICE, "parallelism: 2", "parallelism: 1"), "completions: 2", "completions: 1")
    w = only_workload(emulate(load(single)))
    assert all("TPU_WORKER_ID" not in p.env for p in w.pods)


def test_jobset_with_dns_hostnames_disabled_makes_no_service() -> None:
    text = edit(MULTISLICE, "  failurePolicy:", "  network:\n    enableDNSHostnames: false\n  failurePolicy:")
    c = emulate(load(text))
    w = only_workload(c)
    assert {p.subdomain for p in w.pods} == {None}
    assert [p.hostname for p in w.pods][0] == "multislice-slice-0-0"  # the Job controller still sets it
    assert all("TPU_WORKER_ID" not in p.env for p in w.pods)  # GKE injects only with a subdomain
    assert c.hosts == {}
    problem = one_problem(c, "no coordinator address")
    assert problem.path.startswith("JobSet/default/multislice pod multislice-slice-0-0 env JAX_COORDINATOR_ADDRESS")


def test_jobset_dns_disabled_names_the_root_cause() -> None:
    ms = [
        m for m in copy.deepcopy(manifests(stack.load(ROOT / "stacks/tpu_v5p_2x2x4_x2.py"))) if m["kind"] != "Service"
    ]
    next(m for m in ms if m["kind"] == "JobSet")["spec"]["network"]["enableDNSHostnames"] = False
    c = emulate(ms)
    problem = one_problem(c, "env JAX_COORDINATOR_ADDRESS", "does not resolve")
    assert "enableDNSHostnames: false" in problem.message and problem.fix == "set spec.network.enableDNSHostnames: true"
    assert "(and 7 more pods)" in problem.message
    assert "GKE injects the TPU env only" in one_problem(c, "rank env missing").message


def test_jobset_custom_subdomain_and_existing_service_wins() -> None:
    text = edit(
        MULTISLICE,
        "  failurePolicy:",
        "  network:\n    subdomain: mesh\n    publishNotReadyAddresses: false\n  failurePolicy:",
    )
    text = edit(text, "0-0.$(JOBSET_NAME)", "0-0.mesh")
    c = emulate(load(text))
    w = only_workload(c)
    assert {p.subdomain for p in w.pods} == {"mesh"}
    assert c.hosts["multislice-slice-0-0.mesh.default.svc.cluster.local"] == w.pods[0].ip
    assert problems_of(c) == []  # rank 0 has no readinessProbe: Ready, and named, once its container runs


# --------------------------------------------------------------------------------------------
# (b) Indexed Job with its own Service
# --------------------------------------------------------------------------------------------


def test_indexed_job_pods_env_and_dns() -> None:
    c = emulate(load(INDEXED))
    w = only_workload(c)
    assert problems_of(c) == []
    assert [p.hostname for p in w.pods] == ["train-0", "train-1", "train-2"]
    assert [p.env["JAX_PROCESS_ID"] for p in w.pods] == ["0", "1", "2"]
    assert all(
        p.annotations["batch.kubernetes.io/job-index-failure-count"] == "0" for p in w.pods
    )  # backoffLimitPerIndex
    assert c.hosts["train-0.workers.research.svc.cluster.local"] == w.pods[0].ip
    assert c.hosts["train-0.workers"] == w.pods[0].ip
    assert c.hosts["workers.research.svc.cluster.local"] == w.pods[0].ip
    assert (w.kind, w.groups, w.hosts_per_group, w.chips_per_host) == ("Job", 1, 3, 2)
    assert w.restart.backoff_limit == 2**31 - 1 and w.restart.backoff_limit_per_index == 1  # SetDefaults_Job
    assert w.restart.pod_failure_rules == ({"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [42]}},)


@pytest.mark.parametrize(
    "address",
    [
        "workers:1234",
        "workers.research:1234",
        "train-0.workers.research.svc.cluster.local:1234",
        "train-0.workers.research.svc.cluster.local.:1234",
    ],
)
def test_other_name_forms_resolve_to_rank_zero(address: str) -> None:
    assert problems_of(emulate(load(edit(INDEXED, "value: train-0.workers:1234", f"value: {address}")))) == []


def test_pod_name_is_not_an_address() -> None:
    """metadata.name carries the API server's random suffix: `<name>.<subdomain>` resolves on no
    cluster, so a coordinator address built from it is caught here too."""
    text = edit(
        INDEXED,
        "        - name: JAX_COORDINATOR_ADDRESS\n          value: train-0.workers:1234",
        "        - name: POD_NAME\n          valueFrom: {fieldRef: {fieldPath: metadata.name}}\n"
        "        - name: JAX_COORDINATOR_ADDRESS\n          value: $(POD_NAME).workers:1234",
    )
    c = emulate(load(text))
    assert any("does not resolve" in p.message for p in problems_of(c)), problems_of(c)


def test_command_and_args_expand_with_the_full_env() -> None:
    w = only_workload(emulate(load(INDEXED)))
    assert w.pods[2].command == ("python", "train.py")
    assert w.pods[2].args == ("--index=2", "--literal=$(JOB_COMPLETION_INDEX)", "--missing=$(NOT_DEFINED)")


def test_controller_appended_index_is_not_visible_to_earlier_env() -> None:
    # Without the explicit declaration, the Job controller appends JOB_COMPLETION_INDEX after the user's env,
    # so the kubelet leaves $(JOB_COMPLETION_INDEX) verbatim in JAX_PROCESS_ID; args still expand.
    text = edit(
        INDEXED,
        """        - name: JOB_COMPLETION_INDEX
          valueFrom:
            fieldRef:
              fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']
""",
        "",
    )
    c = emulate(load(text))
    w = only_workload(c)
    assert [p.env["JAX_PROCESS_ID"] for p in w.pods] == ["$(JOB_COMPLETION_INDEX)"] * 3
    assert [p.env["JOB_COMPLETION_INDEX"] for p in w.pods] == ["0", "1", "2"]
    assert list(w.pods[0].env)[-1] == "JOB_COMPLETION_INDEX"
    assert w.pods[1].args[0] == "--index=1"
    problem = one_problem(c, "not an integer")
    assert problem.path == "Job/research/train pod train-0 env JAX_PROCESS_ID"
    assert problem.value == "$(JOB_COMPLETION_INDEX)"
    assert "appended by the Job controller" in problem.message and "(and 2 more pods)" in problem.message
    assert "metadata.annotations['batch.kubernetes.io/job-completion-index']" in problem.fix


def test_hostname_is_set_even_without_subdomain() -> None:
    c = emulate(load(edit(INDEXED, "      subdomain: workers\n", "")))
    w = only_workload(c)
    assert [p.hostname for p in w.pods] == ["train-0", "train-1", "train-2"]
    assert {p.subdomain for p in w.pods} == {None}
    assert "train-0.workers" not in c.hosts


# --------------------------------------------------------------------------------------------
# $(VAR) expansion rules (kubelet, third_party/forked/golang/expansion)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(A)", "a"),
        ("x$(A)y$(B)z", "xaybz"),
        ("$$(A)", "$(A)"),  # escaped reference
        ("$$$(A)", "$a"),  # an escaped $ then a reference
        ("$$", "$"),
        ("$(UNDEFINED)", "$(UNDEFINED)"),
        ("$()", "$()"),
        ("$(A", "$(A"),  # unterminated
        ("a$b", "a$b"),  # $ not followed by ( or $
        ("end$", "end$"),
        ("$(A)$(A)", "aa"),
        ("no refs", "no refs"),
    ],
)
def test_expand(text: str, expected: str) -> None:
    assert expand(text, {"A": "a", "B": "b"}.get) == expected


def env_job(env_yaml: str, extra: str = "") -> str:
    """A 2-pod Indexed Job with the given container env entries (already indented)."""
    return f"""
apiVersion: v1
kind: Service
metadata: {{name: svc}}
spec: {{clusterIP: None, publishNotReadyAddresses: true, selector: {{batch.kubernetes.io/job-name: j}}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: runner}}
---
apiVersion: batch/v1
kind: Job
metadata: {{name: j}}
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  template:
    spec:
      subdomain: svc
      serviceAccountName: runner
      containers:
      - name: c
        image: i
        env:
        - {{name: JAX_COORDINATOR_ADDRESS, value: "j-0.svc:8482"}}
        - name: JAX_PROCESS_ID
          valueFrom: {{fieldRef: {{fieldPath: "metadata.labels['batch.kubernetes.io/job-completion-index']"}}}}
{env_yaml}{extra}"""


def test_env_expansion_is_order_dependent() -> None:
    w = only_workload(
        emulate(
            load(
                env_job("""\
        - {name: EARLY, value: "x$(LATER)"}
        - {name: LATER, value: "y"}
        - {name: AFTER, value: "$(LATER)$(EARLY)"}
        - {name: ESCAPED, value: "$$(LATER)"}
        - {name: UNKNOWN, value: "$(NOPE)"}
        - {name: LATER, value: "z"}
        - {name: SEES_REDEFINED, value: "$(LATER)"}
""")
            )
        )
    )
    env = w.pods[0].env
    assert env["EARLY"] == "x$(LATER)"
    assert env["AFTER"] == "yx$(LATER)"
    assert env["ESCAPED"] == "$(LATER)"
    assert env["UNKNOWN"] == "$(NOPE)"
    assert env["LATER"] == "z" and env["SEES_REDEFINED"] == "z"


def test_field_refs_resolve_per_pod() -> None:
    manifests_ = load(
        env_job("""\
        - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: NS, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
        - {name: UID, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}
        - {name: IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
        - {name: HOST_IP, valueFrom: {fieldRef: {fieldPath: status.hostIP}}}
        - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
        - {name: SA, valueFrom: {fieldRef: {fieldPath: spec.serviceAccountName}}}
        - {name: NO_LABEL, valueFrom: {fieldRef: {fieldPath: "metadata.labels['absent']"}}}
        - {name: ADDR, value: "$(IP):$(JAX_PROCESS_ID)"}
""")
    )
    c = emulate(manifests_, ip_block=5)
    w = only_workload(c)
    a, b = w.pods
    assert (a.ip, b.ip) == ("10.244.5.2", "10.244.5.3")
    assert (a.env["POD"], a.env["NS"], a.env["IP"], a.env["HOST_IP"]) == (a.name, "default", a.ip, a.ip)
    assert a.env["POD"].startswith("j-0-") and a.env["POD"] != a.hostname == "j-0"  # the name, not the hostname
    assert a.env["NODE"].startswith("sim-node-") and a.env["NODE"] != b.env["NODE"]
    assert a.env["SA"] == "runner" and a.env["NO_LABEL"] == ""
    assert a.env["UID"] != b.env["UID"]
    assert a.env["UID"] == emulate(manifests_).workloads[0].pods[0].env["UID"]  # deterministic
    assert b.env["ADDR"] == f"{b.ip}:1"


def test_config_maps_secrets_env_from_and_resource_refs() -> None:
    extra = """\
        - {name: FROM_CM, valueFrom: {configMapKeyRef: {name: cfg, key: mode}}}
        - {name: FROM_SECRET, valueFrom: {secretKeyRef: {name: creds, key: token}}}
        - {name: OPTIONAL_GONE, valueFrom: {configMapKeyRef: {name: nope, key: k, optional: true}}}
        - {name: CPU_MILLIS, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}
        - {name: MEM_MI, valueFrom: {resourceFieldRef: {resource: requests.memory, divisor: 1Mi}}}
        - {name: OVERRIDDEN, value: "env wins over envFrom"}
        envFrom:
        - configMapRef: {name: cfg}
          prefix: CFG_
        - secretRef: {name: creds}
        resources:
          limits: {cpu: "1500m"}
          requests: {memory: 2Gi}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {mode: fast, OVERRIDDEN: from-cm, "bad key": x}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
data: {token: c2VjcmV0}
stringData: {OVERRIDDEN: from-secret}
"""
    c = emulate(load(env_job(extra)))
    env = only_workload(c).pods[0].env
    assert problems_of(c) == []
    assert (env["FROM_CM"], env["FROM_SECRET"]) == ("fast", "secret")
    assert "OPTIONAL_GONE" not in env  # kubelet skips an optional, absent reference
    assert (env["CPU_MILLIS"], env["MEM_MI"]) == ("1500", "2048")
    assert env["CFG_mode"] == "fast" and "CFG_bad key" not in env
    assert env["token"] == "secret"
    assert env["OVERRIDDEN"] == "env wins over envFrom"


def test_missing_config_map_is_a_problem_unless_optional() -> None:
    c = emulate(load(env_job("        - {name: X, valueFrom: {configMapKeyRef: {name: gone, key: k}}}\n")))
    problem = one_problem(c, "ConfigMap 'gone'")
    assert problem.path == "Job/default/j pod j-0 env X" and "(and 1 more pod)" in problem.message
    assert "optional: true" in problem.fix


def test_non_string_env_value_is_a_problem() -> None:
    c = emulate(load(env_job("        - {name: JAX_NUM_PROCESSES, value: 2}\n")))
    assert only_workload(c).pods[0].env["JAX_NUM_PROCESSES"] == "2"
    assert 'quote it: value: "2"' in one_problem(c, "must be strings").fix


# --------------------------------------------------------------------------------------------
# Broken contracts: each yields one precise problem
# --------------------------------------------------------------------------------------------


def test_service_missing() -> None:
    text = INDEXED.split("---", 1)[1]
    problem = one_problem(emulate(load(text)), "does not resolve")
    assert problem.path == "Job/research/train pod train-0 env JAX_COORDINATOR_ADDRESS"
    assert problem.value == "train-0.workers:1234"
    assert "no Service named 'workers' in namespace 'research'" in problem.message
    assert "(and 2 more pods)" in problem.message
    assert "headless Service 'workers'" in problem.fix


def test_service_selector_not_matching() -> None:
    problem = one_problem(
        emulate(load(edit(INDEXED, "selector: {job-name: train}", "selector: {job-name: trainer}"))), "does not resolve"
    )
    assert "selector {'job-name': 'trainer'} does not select pod 'train-0'" in problem.message
    assert "job-name: 'trainer' vs pod's 'train'" in problem.message
    assert "batch.kubernetes.io/job-name: train" in problem.fix


def test_service_without_selector_selects_nothing() -> None:
    problem = one_problem(emulate(load(edit(INDEXED, "  selector: {job-name: train}\n", ""))), "does not resolve")
    assert "has no selector" in problem.message


def test_subdomain_unset() -> None:
    problem = one_problem(emulate(load(edit(INDEXED, "      subdomain: workers\n", ""))), "does not resolve")
    assert "pod 'train-0' has no subdomain" in problem.message
    assert problem.fix == "set spec.template.spec.subdomain: workers"


def test_subdomain_different_from_service() -> None:
    problem = one_problem(emulate(load(edit(INDEXED, "subdomain: workers", "subdomain: other"))), "does not resolve")
    assert "subdomain 'other', not 'workers'" in problem.message


def test_wrong_hostname() -> None:
    problem = one_problem(
        emulate(load(edit(INDEXED, "value: train-0.workers:1234", "value: train-7.workers:1234"))), "does not resolve"
    )
    assert "no pod in namespace 'research' has hostname 'train-7'" in problem.message
    assert "train-0.workers" in problem.fix


def test_coordinator_not_rank_zero() -> None:
    problem = one_problem(
        emulate(load(edit(INDEXED, "value: train-0.workers:1234", "value: train-1.workers:1234"))), "not to rank 0"
    )
    assert "resolves to pod train-1" in problem.message and problem.fix == "point it at rank 0: train-0.workers:1234"


def test_not_headless_service() -> None:
    problem = one_problem(emulate(load(edit(INDEXED, "  clusterIP: None\n", ""))), "does not resolve")
    assert "is not headless" in problem.message and problem.fix == "set clusterIP: None on Service 'workers'"


def test_a_service_that_publishes_only_ready_pods_names_rank_zero_once_its_containers_run() -> None:
    """Without a readinessProbe rank 0 is Ready once its container runs, and the others' lookups, retried until JAX's
    timeout, find it: GKE's multi-host TPU Job (kubernetes-engine-samples ai-ml/gke-tpu-dynamic-slicing) has a
    headless Service with no publishNotReadyAddresses."""
    assert (
        problems_of(emulate(load(edit(INDEXED, "publishNotReadyAddresses: true", "publishNotReadyAddresses: false"))))
        == []
    )


def test_a_service_that_publishes_only_ready_pods_waits_on_rank_zeros_readiness_probe() -> None:
    probe = "        readinessProbe: {tcpSocket: {port: 1234}}\n"
    text = edit(INDEXED, "publishNotReadyAddresses: true", "publishNotReadyAddresses: false")
    text = edit(text, "        ports: [{containerPort: 1234}]\n", "        ports: [{containerPort: 1234}]\n" + probe)
    problem = one_problem(emulate(load(text)), "passes its readinessProbe")
    assert problem.path == "Job/research/train pod train-0 container trainer readinessProbe"
    assert problem.fix == (
        "set publishNotReadyAddresses: true on the Service, or remove the readinessProbe from container 'trainer'"
    )


def test_a_process_connecting_to_another_port_than_rank_zeros_is_refused() -> None:
    """Each pod's address from its own index: rank 0 binds 1230, rank 1 connects to 1231, where nothing listens."""
    c = emulate(
        load(edit(INDEXED, "value: train-0.workers:1234", 'value: "train-0.workers:123$(JOB_COMPLETION_INDEX)"'))
    )
    problem = one_problem(c, "rank 0's coordinator listens on port 1230")
    assert problem.path == "Job/research/train pod train-1 env JAX_COORDINATOR_ADDRESS"
    assert "connects to port 1231, where nothing listens" in problem.message
    assert problem.fix == "give every pod the same coordinator port, 1230"


def test_a_coordinator_port_no_one_declares_is_a_note_as_on_a_cluster() -> None:
    """Every process connects to train-0.workers:9999 and rank 0 binds 9999: on a cluster that works, whatever the
    container's ports and the headless Service's say (kubernetes core/v1 Container.ports: "Not specifying a port
    here DOES NOT prevent that port from being exposed"; a headless Service's names are the pods' addresses, not
    proxied). They were two problems, the workload never started (issue #39: JAX's own
    examples/k8s/mnist-training/jobset.yaml declares 8471 and its coordinator listens on JAX's TPU default)."""
    c = emulate(load(edit(INDEXED, "value: train-0.workers:1234", "value: train-0.workers:9999")))
    assert problems_of(c) == []
    notes = only_workload(c).notes
    [container] = [n for n in notes if "does not declare" in n]
    assert "the coordinator listens on port 9999 (JAX_COORDINATOR_ADDRESS)" in container and "[1234]" in container
    [service] = [n for n in notes if "Service 'workers' declares ports [1234] but not the coordinator port 9999" in n]
    assert "headless" in service


# In the style of JAX's own examples/k8s/mnist-training (jobset.yaml and svc-acct.yaml): a one-slice TPU JobSet on the
# host network whose container declares a port of its own choosing, not JAX's TPU coordinator port, with the
# ServiceAccount and RBAC its README applies first. Names, image and counts are ours.
TPU_HOST_NETWORK_SA = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: digits-sa}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: digits-pods}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: digits-pods}
subjects: [{kind: ServiceAccount, name: digits-sa}]
roleRef: {kind: Role, name: digits-pods, apiGroup: rbac.authorization.k8s.io}
"""
TPU_HOST_NETWORK = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: digits}
spec:
  failurePolicy: {maxRestarts: 1}
  replicatedJobs:
  - name: slice
    replicas: 1
    template:
      spec:
        parallelism: 2
        completions: 2
        backoffLimit: 0
        template:
          spec:
            serviceAccountName: digits-sa
            hostNetwork: true
            dnsPolicy: ClusterFirstWithHostNet
            restartPolicy: Never
            nodeSelector:
              cloud.google.com/gke-tpu-accelerator: tpu-v5-lite-podslice
              cloud.google.com/gke-tpu-topology: 2x4
            containers:
            - name: train
              image: registry.example/digits:7
              args: ["--steps", "10"]
              ports: [{containerPort: 9000}]
              resources: {limits: {google.com/tpu: 4}}
              securityContext: {privileged: true}
"""


def test_a_tpu_slice_whose_container_declares_another_port_has_no_problem() -> None:
    """The coordinator is JAX's TPU default port, which the container does not declare: on GKE the slice forms all the
    same (a container's ports are informational), so the simulation runs; it was a problem and never started."""
    c = emulate(load(TPU_HOST_NETWORK_SA + "---" + TPU_HOST_NETWORK))
    assert problems_of(c) == []
    assert any(
        "(TPU_WORKER_HOSTNAMES), which rank 0's container train does not declare" in n for n in c.workloads[0].notes
    )


def test_the_same_slice_without_its_service_account_is_refused() -> None:
    """Its README's first step skipped: the pods name a ServiceAccount the cluster lacks, and the API server refuses
    them (plugin/pkg/admission/serviceaccount), so the slice never forms."""
    problem = one_problem(emulate(load(TPU_HOST_NETWORK)), 'serviceaccount "digits-sa" not found')
    assert "refuses to create the pods" in problem.message


def test_bind_address_port_mismatch() -> None:
    bind = '        - {name: JAX_COORDINATOR_BIND_ADDRESS, value: "[::]:4321"}\n'
    text = edit(INDEXED, "        - name: JAX_NUM_CPU_DEVICES", bind + "        - name: JAX_NUM_CPU_DEVICES")
    problem = one_problem(emulate(load(text)), "binds the coordinator on port 4321")
    assert problem.path.endswith("env JAX_COORDINATOR_BIND_ADDRESS")


def test_coordinator_address_without_port() -> None:
    problem = one_problem(
        emulate(load(edit(INDEXED, "value: train-0.workers:1234", "value: train-0.workers"))), "must be host:port"
    )
    assert problem.fix == "append the coordinator port, e.g. train-0.workers:8482"


def test_num_processes_differs_from_pods() -> None:
    problem = one_problem(emulate(load(edit(INDEXED, 'value: "3"', 'value: "4"'))), "process count")
    assert problem.path == "Job/research/train pod train-0 env JAX_NUM_PROCESSES"
    assert "the workload has 3 pods" in problem.message and problem.fix == "set JAX_NUM_PROCESSES to 3"


def test_rank_env_missing() -> None:
    text = edit(
        INDEXED,
        """        - name: JAX_PROCESS_ID
          value: $(JOB_COMPLETION_INDEX)
""",
        "",
    )
    problem = one_problem(emulate(load(text)), "rank env missing")
    assert problem.path == "Job/research/train pod train-0 env JAX_PROCESS_ID"
    assert "metadata.annotations['batch.kubernetes.io/job-completion-index']" in problem.fix


def test_duplicate_ranks_across_jobset_jobs() -> None:
    # JAX_PROCESS_ID = completion index repeats across the two child Jobs of a JobSet.
    text = edit(
        MULTISLICE,
        "              - name: WORKER_TAG",
        """\
              - name: JAX_PROCESS_ID
                valueFrom:
                  fieldRef:
                    fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']
              - name: WORKER_TAG""",
    )
    c = emulate(load(text))
    dup = one_problem(c, "rank 0 is used by 2 pods")
    assert dup.path == "JobSet/default/multislice env JAX_PROCESS_ID"
    assert "multislice-slice-0-0, multislice-slice-1-0" in dup.message
    assert "missing [2, 3]" in one_problem(c, "must cover 0..3").message


def test_parallelism_below_completions() -> None:
    c = emulate(load(edit(INDEXED, "  parallelism: 3\n", "")))
    problem = one_problem(c, "parallelism < completions")
    assert problem.path == "Job/research/train spec parallelism" and problem.value == 1
    assert problem.fix == "set parallelism: 3"
    assert len(only_workload(c).pods) == 3


def test_kinds_no_emulated_controller_runs_are_input_problems() -> None:
    """A Deployment is stored and run by its controller on a cluster; the simulator does not run it, which is an input
    problem (`Unserved`: exit 2, issue #39), not a note. A NonIndexed Job runs, but gives its pods no index, which the
    JAX contract needs: a problem under the probe, a note where the containers' own commands run."""
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "x"}}
    container = {"name": "main", "image": "busybox:1.36", "command": ["true"]}
    template = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    plain_job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "plain"},
        "spec": {"completions": 2, "template": template},
    }
    objects = [deployment, plain_job, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}]
    [probed] = emulate(objects).workloads
    first = probed.problems[0]
    assert first.path == "Job/default/plain" and "NonIndexed" in first.value and "completionMode: Indexed" in first.fix
    [run] = emulate(objects, check_all=False).workloads
    assert run.problems == () and "NonIndexed" in run.notes[0] and len(run.pods) == 2
    [unserved] = emulate(objects).problems
    assert isinstance(unserved, Unserved) and unserved.path == "Deployment/x/web"
    assert controllers.not_simulated(objects) == []


# --------------------------------------------------------------------------------------------
# Determinism, addresses, files
# --------------------------------------------------------------------------------------------


def test_emulation_is_deterministic() -> None:
    assert emulate(load(MULTISLICE)) == emulate(load(MULTISLICE))


def test_ip_scheme_is_distinct_and_stays_in_the_pod_cidr() -> None:
    ips = [control_plane._ip(0, k) for k in range(10_000)]
    assert len(set(ips)) == 10_000
    assert all(ipaddress.ip_address(ip) in ipaddress.ip_network("10.244.0.0/16") for ip in ips)
    assert "10.244.0.1" not in ips and ips[0] == "10.244.0.2" and ips[250] == "10.244.1.2"  # .1: the gateway
    assert not set(ips) & {control_plane._ip(40, k) for k in range(10_000)}
    with pytest.raises(ValueError, match="10.244.0.0/16"):
        control_plane._ip(255, 250)


def test_two_workloads_get_distinct_addresses_and_dns() -> None:
    c = emulate(load(MULTISLICE) + load(INDEXED))
    assert [w.id for w in c.workloads] == ["JobSet/default/multislice", "Job/research/train"]
    ips = [p.ip for w in c.workloads for p in w.pods]
    assert len(set(ips)) == 7
    assert problems_of(c) == []


def test_load_files(tmp_path: Path) -> None:
    good = tmp_path / "a.yaml"
    good.write_text(INDEXED)
    listed = tmp_path / "list.yaml"
    listed.write_text("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: x}}\n")
    assert [m["kind"] for m in load_files([good, str(listed)])] == ["Service", "Job", "Namespace"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [unclosed\n")
    with pytest.raises(ManifestError) as err:
        load_files([good, bad, tmp_path / "missing.yaml"])
    paths = [p.where for p in err.value.problems]
    assert len(paths) == 2 and paths[0].startswith(str(bad)) and paths[1] == str(tmp_path / "missing.yaml")
    assert "not valid YAML" in err.value.problems[0].message


@pytest.mark.parametrize(
    ("manifest", "path"),
    [
        ("jobset_multislice_bare_init.yaml", ("spec", "suspend")),
        ("indexed_job_own_service.yaml", ("spec", "suspend")),
        ("jaxjob_cpu_v1_script.yaml", ("spec", "runPolicy", "suspend")),
        ("trainjob_upstream_runtime.yaml", ("spec", "suspend")),
    ],
)
def test_each_kinds_suspend_field_suspends_the_workload(manifest: str, path: tuple[str, ...]) -> None:
    """Where each kind says it (JobSet, Job and TrainJob: spec.suspend; a v1 JAXJob: spec.runPolicy.suspend); false,
    or another kind's field, suspends nothing."""
    objs = load((MANIFESTS / manifest).read_text())
    workload = next(o for o in objs if o["kind"] in ("JobSet", "Job", "JAXJob", "TrainJob"))
    node = workload
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = False
    assert all(w.suspended is None for w in emulate(objs).workloads)
    node[path[-1]] = True
    [w] = [w for w in emulate(objs).workloads if w.kind == workload["kind"]]
    assert w.suspended == ".".join(path)
    if len(path) == 3:
        workload["spec"]["suspend"] = True  # a JobSet's field on a JAXJob means nothing to its operator
        del node[path[-1]]
        assert all(w.suspended is None for w in emulate(objs).workloads)
