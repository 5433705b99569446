"""LimitRanger, Priority and ResourceQuota on the pods controllers create and on object counts: each rule passes
what a cluster admits and refuses, with the API server's words, what it refuses."""

from __future__ import annotations

import copy

import pytest
import yaml

from jaxinfra.admission import defaults
from jaxinfra.admission.plugins import Usage, admit_object, admit_pod
from jaxinfra.admission.store import Store

pytestmark = pytest.mark.unit

JOB = yaml.safe_load("""
apiVersion: batch/v1
kind: Job
metadata:
  name: llama-finetune
  namespace: team-a
spec:
  completions: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: trainer
        image: us-docker.pkg.dev/jax/trainer:latest
        command: ["python", "train.py"]
""")


def pod_of(job: dict, index: int = 0, **spec: object) -> dict:
    """The pod the Job controller creates from the template (with extra spec fields for the case at hand)."""
    template = copy.deepcopy(job["spec"]["template"])
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{job['metadata']['name']}-{index}", "namespace": job["metadata"]["namespace"]},
        "spec": template["spec"],
    }
    pod["spec"].update(copy.deepcopy(spec))
    return pod


def with_resources(pod: dict, requests: dict | None = None, limits: dict | None = None) -> dict:
    resources = pod["spec"]["containers"][0].setdefault("resources", {})
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return pod


def docs(text: str) -> list[dict]:
    """The objects as the API server stores them: defaulted (a LimitRange's default from its max, say)."""
    objs = [d for d in yaml.safe_load_all(text) if d]
    for obj in objs:
        defaults.apply(obj)
    return objs


HIGH = docs("""
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: high
value: 1000000
globalDefault: false
description: "Training runs that may preempt batch work."
""")


# --- Priority -----------------------------------------------------------------------------------------------------


def test_unknown_priority_class_is_refused_and_charges_nothing() -> None:
    usage = Usage()
    quota = docs("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: pods, namespace: team-a}
spec: {hard: {pods: "10"}}
""")
    store = Store(quota)
    found = admit_pod(pod_of(JOB, priorityClassName="high"), store, usage)
    assert [(f.at, f.value, f.message) for f in found] == [
        (("spec", "priorityClassName"), "high", "no PriorityClass with name high was found")
    ]
    assert usage.used(quota[0]) == {"pods": "0"}


def test_priority_class_among_the_inputs_sets_priority_and_policy() -> None:
    pod = pod_of(JOB, priorityClassName="high")
    assert admit_pod(pod, Store(HIGH), Usage()) == []
    assert (pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]) == (1000000, "PreemptLowerPriority")
    never = docs("""
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high-nonpreempting}
value: 1000000
preemptionPolicy: Never
""")
    pod = pod_of(JOB, priorityClassName="high-nonpreempting")
    assert admit_pod(pod, Store(never), Usage()) == []
    assert pod["spec"]["preemptionPolicy"] == "Never"


@pytest.mark.parametrize(
    ("name", "value"), [("system-cluster-critical", 2000000000), ("system-node-critical", 2000001000)]
)
def test_system_classes_need_no_object(name: str, value: int) -> None:
    pod = pod_of(JOB, priorityClassName=name)
    assert admit_pod(pod, Store(), Usage()) == []
    assert pod["spec"]["priority"] == value


def test_global_default_applies_to_pods_without_a_class_lowest_value_first() -> None:
    defaults = docs("""
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: batch-default}
value: 1000
globalDefault: true
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: raced-default}
value: 5000
globalDefault: true
""")
    pod = pod_of(JOB)
    assert admit_pod(pod, Store(HIGH + defaults), Usage()) == []
    assert (pod["spec"]["priorityClassName"], pod["spec"]["priority"]) == ("batch-default", 1000)
    named = pod_of(JOB, priorityClassName="high")
    assert admit_pod(named, Store(HIGH + defaults), Usage()) == []
    assert named["spec"]["priority"] == 1000000


def test_spec_priority_must_match_the_class() -> None:
    assert admit_pod(pod_of(JOB, priorityClassName="high", priority=1000000), Store(HIGH), Usage()) == []
    found = admit_pod(pod_of(JOB, priorityClassName="high", priority=7), Store(HIGH), Usage())
    assert [(f.at, f.message) for f in found] == [
        (
            ("spec", "priority"),
            (
                "the integer value of priority (7) must not be provided in pod spec; priority admission controller "
                "computed 1000000 from the given PriorityClass name"
            ),
        )
    ]


def test_spec_preemption_policy_must_match_the_class() -> None:
    matching = pod_of(JOB, priorityClassName="high", preemptionPolicy="PreemptLowerPriority")
    assert admit_pod(matching, Store(HIGH), Usage()) == []
    found = admit_pod(pod_of(JOB, priorityClassName="high", preemptionPolicy="Never"), Store(HIGH), Usage())
    assert [f.message for f in found] == [
        "the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission "
        "controller computed PreemptLowerPriority from the given PriorityClass name"
    ]


def test_only_one_global_default_priority_class() -> None:
    first = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "standard"},
        "value": 100,
        "globalDefault": True,
    }
    second = {**first, "metadata": {"name": "also-default"}}
    assert admit_object(first, Store(HIGH), Usage()) == []
    found = admit_object(second, Store([*HIGH, first]), Usage())
    assert [(f.at, f.message) for f in found] == [
        (("globalDefault",), "PriorityClass standard is already marked as default. Only one default can exist")
    ]
    assert admit_object({**second, "globalDefault": False}, Store([first]), Usage()) == []


def test_without_plugin_objects_a_pod_passes_untouched_but_for_priority() -> None:
    pod = with_resources(pod_of(JOB), requests={"cpu": "500m"}, limits={"memory": "1Gi"})
    before = copy.deepcopy(pod)
    assert admit_pod(pod, Store([JOB]), Usage()) == []
    before["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1Gi"  # SetDefaults_Pod
    before["spec"].update(priority=0, preemptionPolicy="PreemptLowerPriority")
    assert pod == before
    bare = pod_of(JOB)
    assert admit_pod(bare, Store(), Usage()) == []
    assert "resources" not in bare["spec"]["containers"][0] and "annotations" not in bare["metadata"]


# --- LimitRanger --------------------------------------------------------------------------------------------------

CPU_LIMITS = docs("""
apiVersion: v1
kind: LimitRange
metadata:
  name: cpu-resource-constraint
  namespace: team-a
spec:
  limits:
  - type: Container
    default:
      cpu: 500m
    defaultRequest:
      cpu: 250m
    max:
      cpu: "2"
    min:
      cpu: 100m
""")


def test_limit_range_default_fills_a_container_without_resources() -> None:
    pod = pod_of(JOB, initContainers=[{"name": "fetch", "image": "busybox"}])
    assert admit_pod(pod, Store(CPU_LIMITS), Usage()) == []
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "500m"}, "requests": {"cpu": "250m"}}
    assert pod["spec"]["initContainers"][0]["resources"] == {"limits": {"cpu": "500m"}, "requests": {"cpu": "250m"}}
    assert pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu limit for container trainer; cpu request for container trainer; "
        "cpu limit for init container fetch; cpu request for init container fetch"
    )


def test_a_limit_without_request_gives_the_request_not_the_limit_range_default() -> None:
    pod = with_resources(pod_of(JOB), limits={"cpu": "1"})
    assert admit_pod(pod, Store(CPU_LIMITS), Usage()) == []
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}


def test_limit_range_max_refuses_a_bigger_limit() -> None:
    assert admit_pod(with_resources(pod_of(JOB), limits={"cpu": "2"}), Store(CPU_LIMITS), Usage()) == []
    found = admit_pod(with_resources(pod_of(JOB), limits={"cpu": "4"}), Store(CPU_LIMITS), Usage())
    assert [(f.at, f.message) for f in found] == [
        (
            ("spec", "containers", 0, "resources", "limits", "cpu"),
            "maximum cpu usage per Container is 2, but limit is 4",
        )
    ]
    over_request = with_resources(pod_of(JOB), requests={"cpu": "3"}, limits={"cpu": "2"})
    assert [f.message for f in admit_pod(over_request, Store(CPU_LIMITS), Usage())] == [
        "maximum cpu usage per Container is 2, but request is 3"
    ]


def test_limit_range_min_and_ratio() -> None:
    ranges = docs("""
apiVersion: v1
kind: LimitRange
metadata: {name: mem-min-max-demo-lr, namespace: team-a}
spec:
  limits:
  - type: Container
    min: {memory: 256Mi}
    maxLimitRequestRatio: {memory: "2"}
""")
    ok = with_resources(pod_of(JOB), requests={"memory": "512Mi"}, limits={"memory": "1Gi"})
    assert admit_pod(ok, Store(ranges), Usage()) == []
    low = with_resources(pod_of(JOB), requests={"memory": "128Mi"}, limits={"memory": "1Gi"})
    assert [f.message for f in admit_pod(low, Store(ranges), Usage())] == [
        "minimum memory usage per Container is 256Mi, but request is 128Mi",
        "memory max limit to request ratio per Container is 2, but provided ratio is 8.000000",
    ]


def test_limit_range_of_type_pod_sums_the_containers() -> None:
    ranges = docs("""
apiVersion: v1
kind: LimitRange
metadata: {name: pod-max, namespace: team-a}
spec:
  limits:
  - type: Pod
    max: {nvidia.com/gpu: "8"}
""")
    sidecar = {"name": "logger", "image": "fluent-bit", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    fits = with_resources(
        pod_of(JOB, containers=[*JOB["spec"]["template"]["spec"]["containers"], sidecar]),
        limits={"nvidia.com/gpu": "7"},
    )
    assert admit_pod(fits, Store(ranges), Usage()) == []
    over = with_resources(
        pod_of(JOB, containers=[*JOB["spec"]["template"]["spec"]["containers"], sidecar]),
        limits={"nvidia.com/gpu": "8"},
    )
    assert [f.message for f in admit_pod(over, Store(ranges), Usage())] == [
        "maximum nvidia.com/gpu usage per Pod is 8, but limit is 9"
    ]


def test_limit_range_in_another_namespace_does_not_apply() -> None:
    elsewhere = copy.deepcopy(CPU_LIMITS)
    elsewhere[0]["metadata"]["namespace"] = "team-b"
    pod = with_resources(pod_of(JOB), limits={"cpu": "4"})
    assert admit_pod(pod, Store(elsewhere), Usage()) == []
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "4"}


def test_limit_range_on_claims() -> None:
    ranges = docs("""
apiVersion: v1
kind: LimitRange
metadata: {name: storagelimits, namespace: team-a}
spec:
  limits:
  - type: PersistentVolumeClaim
    max: {storage: 2Gi}
    min: {storage: 1Gi}
""")
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "ckpt", "namespace": "team-a"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}},
    }
    assert admit_object(claim, Store(ranges), Usage()) == []
    claim["spec"]["resources"]["requests"]["storage"] = "5Gi"
    assert [f.message for f in admit_object(claim, Store(ranges), Usage())] == [
        "maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 5Gi"
    ]


# --- ResourceQuota ------------------------------------------------------------------------------------------------

GPU_QUOTA = docs("""
apiVersion: v1
kind: ResourceQuota
metadata:
  name: gpu-quota
  namespace: team-a
spec:
  hard:
    requests.nvidia.com/gpu: 8
""")


def gpu_pod(index: int) -> dict:
    return with_resources(pod_of(JOB, index), limits={"nvidia.com/gpu": 1})


def test_gpu_quota_admits_eight_pods_and_refuses_the_ninth() -> None:
    store, usage = Store(GPU_QUOTA), Usage()
    assert [admit_pod(gpu_pod(i), store, usage) for i in range(8)] == [[]] * 8
    found = admit_pod(gpu_pod(8), store, usage)
    assert [f.message for f in found] == [
        "exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=8, "
        "limited: requests.nvidia.com/gpu=8"
    ]
    assert usage.used(GPU_QUOTA[0]) == {"requests.nvidia.com/gpu": "8"}
    usage.release(gpu_pod(3))
    assert admit_pod(gpu_pod(8), store, usage) == []


def test_a_finished_pod_gives_back_compute_but_not_its_object_count() -> None:
    quota = docs("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: pods-and-gpus, namespace: team-a}
spec: {hard: {pods: "1", count/pods: "2", requests.nvidia.com/gpu: "1"}}
""")
    store, usage = Store(quota), Usage()
    assert admit_pod(gpu_pod(0), store, usage) == []
    assert [f.message for f in admit_pod(gpu_pod(1), store, usage)] == [
        "exceeded quota: pods-and-gpus, requested: pods=1,requests.nvidia.com/gpu=1, used: "
        "pods=1,requests.nvidia.com/gpu=1, limited: pods=1,requests.nvidia.com/gpu=1"
    ]
    usage.finish(gpu_pod(0))
    assert usage.used(quota[0]) == {"count/pods": "1", "pods": "0", "requests.nvidia.com/gpu": "0"}
    assert admit_pod(gpu_pod(1), store, usage) == []


def test_cpu_quota_refuses_a_pod_without_cpu_request_unless_a_limit_range_fills_it() -> None:
    quota = docs("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: compute-resources, namespace: team-a}
spec:
  hard:
    requests.cpu: "4"
    limits.memory: 8Gi
""")
    found = admit_pod(pod_of(JOB), Store(quota), Usage())
    assert [(f.at, f.message) for f in found] == [
        (
            ("spec", "containers", 0, "resources", "limits"),
            ("failed quota: compute-resources: must specify limits.memory for: trainer; requests.cpu for: trainer"),
        )
    ]
    stated = with_resources(pod_of(JOB), requests={"cpu": "1"}, limits={"memory": "2Gi"})
    assert admit_pod(stated, Store(quota), Usage()) == []
    memory_default = docs("""
apiVersion: v1
kind: LimitRange
metadata: {name: mem-limit-range, namespace: team-a}
spec:
  limits:
  - type: Container
    default: {memory: 512Mi}
""")
    assert admit_pod(pod_of(JOB), Store(quota + memory_default + CPU_LIMITS), Usage()) == []


def test_gpu_quota_does_not_require_a_gpu_request() -> None:
    assert admit_pod(pod_of(JOB), Store(GPU_QUOTA), Usage()) == []


def test_quota_used_adds_up_as_the_api_server_prints_it() -> None:
    quota = docs("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: compute, namespace: team-a}
spec: {hard: {requests.cpu: "2", requests.memory: 2Gi}}
""")
    store, usage = Store(quota), Usage()
    for i, memory in enumerate(["1Gi", "512Mi"]):
        assert admit_pod(with_resources(pod_of(JOB, i), requests={"cpu": "0.5", "memory": memory}), store, usage) == []
    assert usage.used(quota[0]) == {"requests.cpu": "1", "requests.memory": "1536Mi"}
    found = admit_pod(with_resources(pod_of(JOB, 2), requests={"cpu": "1500m", "memory": "1Mi"}), store, usage)
    assert [f.message for f in found] == [
        "exceeded quota: compute, requested: requests.cpu=1500m, used: requests.cpu=1, limited: requests.cpu=2"
    ]


def test_quota_admitted_after_the_pods_still_counts_them() -> None:
    usage = Usage()
    for i in range(8):
        assert admit_pod(gpu_pod(i), Store(), usage) == []
    assert usage.used(GPU_QUOTA[0]) == {"requests.nvidia.com/gpu": "8"}
    assert admit_pod(gpu_pod(8), Store(GPU_QUOTA), usage) != []


def test_usage_stays_right_across_many_pods_releases_and_restarts() -> None:
    quota = docs("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: gpus, namespace: team-a}
spec: {hard: {requests.nvidia.com/gpu: "1024", count/pods: "2000"}}
""")
    store, usage = Store(quota), Usage()
    assert all(admit_pod(gpu_pod(i), store, usage) == [] for i in range(1024))
    assert admit_pod(gpu_pod(1024), store, usage) != []
    for i in range(0, 1024, 2):  # a gang restart deletes half the pods and creates them again
        usage.release(gpu_pod(i))
    assert usage.used(quota[0]) == {"count/pods": "512", "requests.nvidia.com/gpu": "512"}
    assert all(admit_pod(gpu_pod(i), store, usage) == [] for i in range(0, 1024, 2))
    assert usage.used(quota[0]) == {"count/pods": "1024", "requests.nvidia.com/gpu": "1024"}


def test_quota_in_another_namespace_does_not_apply() -> None:
    store, usage = Store(GPU_QUOTA), Usage()
    other = {**JOB, "metadata": {**JOB["metadata"], "namespace": "team-b"}}
    for i in range(9):
        pod = with_resources(pod_of(other, i), limits={"nvidia.com/gpu": 1})
        assert admit_pod(pod, store, usage) == []


def test_priority_class_scope_counts_only_that_class() -> None:
    quota = docs("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: pods-high, namespace: team-a}
spec:
  hard: {pods: "1"}
  scopeSelector:
    matchExpressions:
    - operator: In
      scopeName: PriorityClass
      values: ["high"]
""")
    store, usage = Store(HIGH + quota), Usage()
    assert admit_pod(pod_of(JOB, 0), store, usage) == []
    assert admit_pod(pod_of(JOB, 1), store, usage) == []
    assert admit_pod(pod_of(JOB, 2, priorityClassName="high"), store, usage) == []
    assert [f.message for f in admit_pod(pod_of(JOB, 3, priorityClassName="high"), store, usage)] == [
        "exceeded quota: pods-high, requested: pods=1, used: pods=1, limited: pods=1"
    ]


def test_best_effort_and_terminating_scopes() -> None:
    quota = docs("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: best-effort, namespace: team-a}
spec:
  hard: {pods: "1"}
  scopes: [BestEffort, NotTerminating]
""")
    store, usage = Store(quota), Usage()
    assert admit_pod(pod_of(JOB, 0), store, usage) == []
    assert admit_pod(pod_of(JOB, 1), store, usage) != []
    assert admit_pod(pod_of(JOB, 2, activeDeadlineSeconds=600), store, usage) == []
    assert admit_pod(with_resources(pod_of(JOB, 3), requests={"cpu": "1"}), store, usage) == []


def test_count_jobs_quota_refuses_a_second_job() -> None:
    quota = docs("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: object-counts, namespace: team-a}
spec:
  hard:
    count/jobs.batch: "1"
""")
    store, usage = Store(quota), Usage()
    assert admit_object(JOB, store, usage) == []
    second = {**JOB, "metadata": {"name": "llama-eval", "namespace": "team-a"}}
    assert [f.message for f in admit_object(second, store, usage)] == [
        "exceeded quota: object-counts, requested: count/jobs.batch=1, used: count/jobs.batch=1, "
        "limited: count/jobs.batch=1"
    ]
    assert admit_pod(pod_of(JOB), store, usage) == []


def test_object_counts_for_services_configmaps_and_custom_resources() -> None:
    inputs = docs("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: object-counts, namespace: team-a}
spec:
  hard:
    configmaps: "1"
    services.loadbalancers: "0"
    count/jobsets.jobset.x-k8s.io: "1"
""")
    store, usage = Store(inputs), Usage()
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hosts", "namespace": "team-a"}}
    assert admit_object(config, store, usage) == []
    assert [
        f.message for f in admit_object({**config, "metadata": {"name": "b", "namespace": "team-a"}}, store, usage)
    ] == ["exceeded quota: object-counts, requested: configmaps=1, used: configmaps=1, limited: configmaps=1"]
    headless = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "workers", "namespace": "team-a"},
        "spec": {"clusterIP": "None", "ports": [{"port": 8471}]},
    }
    assert admit_object(headless, store, usage) == []
    public = {
        **headless,
        "metadata": {"name": "tensorboard", "namespace": "team-a"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 6006}]},
    }
    assert [f.message for f in admit_object(public, store, usage)] == [
        "exceeded quota: object-counts, requested: services.loadbalancers=1, used: services.loadbalancers=0, "
        "limited: services.loadbalancers=0"
    ]
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "multislice", "namespace": "team-a"},
        "spec": {},
    }
    assert admit_object(jobset, store, usage) == []
    assert admit_object({**jobset, "metadata": {"name": "second", "namespace": "team-a"}}, store, usage) != []
    assert usage.used(inputs[0]) == {
        "configmaps": "1",
        "count/jobsets.jobset.x-k8s.io": "1",
        "services.loadbalancers": "0",
    }


def test_claims_are_charged_to_their_storage_class() -> None:
    quota = docs("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: storage, namespace: team-a}
spec:
  hard:
    premium-rwo.storageclass.storage.k8s.io/requests.storage: 100Gi
""")
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "ckpt", "namespace": "team-a"},
        "spec": {"storageClassName": "premium-rwo", "resources": {"requests": {"storage": "80Gi"}}},
    }
    store, usage = Store(quota), Usage()
    assert admit_object(claim, store, usage) == []
    other_class = {
        **claim,
        "metadata": {"name": "scratch", "namespace": "team-a"},
        "spec": {"storageClassName": "standard", "resources": {"requests": {"storage": "80Gi"}}},
    }
    assert admit_object(other_class, store, usage) == []
    found = admit_object({**claim, "metadata": {"name": "ckpt-2", "namespace": "team-a"}}, store, usage)
    assert [f.message for f in found] == [
        "exceeded quota: storage, requested: premium-rwo.storageclass.storage.k8s.io/requests.storage=80Gi, "
        "used: premium-rwo.storageclass.storage.k8s.io/requests.storage=80Gi, "
        "limited: premium-rwo.storageclass.storage.k8s.io/requests.storage=100Gi"
    ]


def test_a_refusing_limit_range_stops_before_the_quota_charges() -> None:
    quota = docs("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: compute, namespace: team-a}
spec: {hard: {requests.cpu: "8"}}
""")
    usage = Usage()
    found = admit_pod(with_resources(pod_of(JOB), limits={"cpu": "4"}), Store(quota + CPU_LIMITS), usage)
    assert found and all(f.message.startswith("maximum cpu") for f in found)
    assert usage.used(quota[0]) == {"requests.cpu": "0"}


def test_odd_values_are_skipped_not_raised() -> None:
    quota = docs("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: odd, namespace: team-a}
spec: {hard: {requests.cpu: "lots", pods: "2"}, scopes: "BestEffort"}
""")
    pod = pod_of(
        JOB,
        containers=["not-a-container", {"name": "x", "resources": {"limits": {"cpu": True}}}],
        priorityClassName=3,
        priority="high",
    )
    assert [f.message for f in admit_pod(pod, Store(quota + CPU_LIMITS), Usage())] == [
        "minimum cpu usage per Container is 100m.  No request is specified",
        "maximum cpu usage per Container is 2.  No limit is specified",
    ]
    assert pod["spec"]["priority"] == 0
    assert admit_object({"kind": "ConfigMap", "metadata": "odd"}, Store(quota), Usage()) == []
    huge = with_resources(pod_of(JOB), requests={"cpu": "1e5000"})
    found = admit_pod(
        huge,
        Store(
            docs("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: cpu, namespace: team-a}
spec: {hard: {cpu: "4"}}
""")
        ),
        Usage(),
    )
    assert len(found) == 1 and found[0].message.startswith("exceeded quota: cpu, requested: cpu=1000")
    assert found[0].message.endswith("e4952e18, used: cpu=0, limited: cpu=4")


def test_cpu_quota_names_the_containers_without_a_cpu_request() -> None:
    quota = docs("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: cpu-quota, namespace: team-a}
spec: {hard: {cpu: "4"}}
""")
    sidecar = {"name": "proxy", "image": "envoy", "resources": {"requests": {"cpu": "100m"}}}
    pod = pod_of(
        JOB,
        containers=[*JOB["spec"]["template"]["spec"]["containers"], sidecar],
        initContainers=[{"name": "fetch", "image": "busybox"}],
    )
    assert [f.message for f in admit_pod(pod, Store(quota), Usage())] == [
        "failed quota: cpu-quota: must specify cpu for: fetch,trainer"
    ]
