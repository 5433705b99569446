"""Custom resources' structural pruning and defaulting, and the controllers' admission webhooks
(jaxinfra.admission.structural, jaxinfra.admission.webhooks): each rule with an object it accepts and one it refuses,
with the verdict a cluster running JobSet, Kueue and Kubeflow Trainer gives."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from jaxinfra.admission import structural, webhooks
from jaxinfra.admission.schema import crd_schema
from jaxinfra.admission.store import Finding, Store

pytestmark = pytest.mark.unit

# In the style of JobSet's examples (examples/simple, examples/failure-policy): rules without names, a pod template
# without restartPolicy, nulls where a templating tool leaves them.
JOBSET = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: failurepolicy
  annotations: null
spec:
  failurePolicy:
    maxRestarts: 3
    rules:
    - action: FailJobSet
      onJobFailureReasons:
      - PodFailurePolicy
    - action: RestartJobSetAndIgnoreMaxRestarts
      targetReplicatedJobs:
      - workers
  replicatedJobs:
  - name: workers
    template:
      metadata:
        annotations: null
      spec:
        parallelism: 4
        completions: 4
        backoffLimit: 0
        template:
          spec:
            nodeSelector: null
            containers:
            - name: jax
              image: python:3.11-slim
              env: null
              command: [python, -c, "import jax; print(jax.devices())"]
"""


def jobset(name: str = "failurepolicy", **spec: Any) -> dict[str, Any]:
    obj = yaml.safe_load(JOBSET)
    obj["metadata"]["name"] = name
    obj["spec"].update(spec)
    return obj


def schema(obj: dict[str, Any]) -> Any:
    group, _, version = obj["apiVersion"].rpartition("/")
    found = crd_schema(group, obj["kind"], version)
    assert found is not None
    return found


def admit(obj: dict[str, Any], store: Store | None = None) -> list[Finding]:
    """The API server's custom-resource steps this module covers: prune and default, mutate, then validate."""
    store = store or Store()
    if obj["kind"] not in ("Job",):
        structural.prune_and_default(obj, schema(obj))
    webhooks.mutate(obj, store)
    if obj["kind"] not in ("Job",):
        assert structural.list_findings(obj, schema(obj)) == []
    return webhooks.validate(obj, store)


def messages(findings: list[Finding]) -> list[str]:
    return [f.message for f in findings]


def pod_spec(obj: dict[str, Any], i: int = 0) -> dict[str, Any]:
    return obj["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["spec"]


# --- structural: nulls and defaults --------------------------------------------------------------------------------


def test_nulls_of_non_nullable_fields_are_pruned() -> None:
    obj = jobset()
    structural.prune_and_default(obj, schema(obj))
    assert "annotations" not in obj["metadata"]
    assert "annotations" not in obj["spec"]["replicatedJobs"][0]["template"]["metadata"]
    assert "nodeSelector" not in pod_spec(obj)
    assert "env" not in pod_spec(obj)["containers"][0]
    assert admit(obj) == []


def test_schema_defaults_are_applied_where_missing() -> None:
    obj = jobset()
    structural.prune_and_default(obj, schema(obj))
    rjob = obj["spec"]["replicatedJobs"][0]
    assert rjob["replicas"] == 1 and rjob["groupName"] == "default"
    assert obj["spec"]["failurePolicy"]["restartStrategy"] == "Recreate"
    explicit = jobset()
    explicit["spec"]["replicatedJobs"][0]["replicas"] = 3
    structural.prune_and_default(explicit, schema(explicit))
    assert explicit["spec"]["replicatedJobs"][0]["replicas"] == 3


def test_a_null_with_a_default_is_defaulted_a_nullable_null_is_kept() -> None:
    node = {
        "type": "object",
        "properties": {
            "kept": {"type": "string", "nullable": True},
            "defaulted": {"type": "string", "default": "x"},
            "dropped": {"type": "string"},
            "items": {"type": "array", "items": {"type": "string"}},
            "extra": {"type": "object", "additionalProperties": {"type": "integer", "default": 7}},
        },
    }
    obj = {"kept": None, "defaulted": None, "dropped": None, "items": ["a", None], "extra": {"k": None}, "other": None}
    structural.prune_and_default(obj, node)
    # `other` is unknown to the schema: left for strict validation to report, not pruned
    assert obj == {"kept": None, "defaulted": "x", "items": ["a", None], "extra": {"k": 7}, "other": None}


def test_cluster_queue_defaults_include_defaults_inside_defaults() -> None:
    queue = yaml.safe_load("""
    apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata:
      name: cluster-queue
    spec:
      namespaceSelector: {}
      resourceGroups:
      - coveredResources: [cpu, memory]
        flavors:
        - name: default-flavor
          resources:
          - name: cpu
            nominalQuota: 9
          - name: memory
            nominalQuota: 36Gi
    """)
    structural.prune_and_default(queue, schema(queue))
    spec = queue["spec"]
    assert spec["queueingStrategy"] == "BestEffortFIFO"
    assert spec["stopPolicy"] == "None"
    assert spec["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    assert spec["preemption"]["borrowWithinCohort"] == {"policy": "Never"}
    other = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "b"}, "spec": {}}
    structural.prune_and_default(other, schema(other))
    spec["flavorFungibility"]["whenCanBorrow"] = "TryNextFlavor"  # a deep copy: the next object's default holds
    again = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "c"}, "spec": {}}
    structural.prune_and_default(again, schema(again))
    assert again["spec"]["flavorFungibility"]["whenCanBorrow"] == "MayStopSearch"
    queue["spec"]["queueingStrategy"] = "StrictFIFO"
    structural.prune_and_default(queue, schema(queue))
    assert queue["spec"]["queueingStrategy"] == "StrictFIFO"


def test_trainjob_without_runtime_ref_kind_and_api_group_gets_them() -> None:
    train = yaml.safe_load("""
    apiVersion: trainer.kubeflow.org/v1alpha1
    kind: TrainJob
    metadata:
      name: pytorch-simple
    spec:
      runtimeRef:
        name: torch-distributed
    """)
    structural.prune_and_default(train, schema(train))
    assert train["spec"]["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    assert train["spec"]["suspend"] is False
    namespaced = copy.deepcopy(train)
    namespaced["spec"]["runtimeRef"] = {"name": "torch", "kind": "TrainingRuntime"}
    structural.prune_and_default(namespaced, schema(namespaced))
    assert namespaced["spec"]["runtimeRef"]["kind"] == "TrainingRuntime"


def test_duplicate_replicated_job_names_are_refused_by_the_list_map() -> None:
    obj = jobset()
    obj["spec"]["replicatedJobs"].append(copy.deepcopy(obj["spec"]["replicatedJobs"][0]))
    structural.prune_and_default(obj, schema(obj))
    [finding] = structural.list_findings(obj, schema(obj))
    assert finding.at == ("spec", "replicatedJobs", 1)
    assert finding.message == 'Duplicate value: map[string]interface {}{"name":"workers"}'
    obj["spec"]["replicatedJobs"][1]["name"] = "ps"
    assert structural.list_findings(obj, schema(obj)) == []


def test_list_map_keys_are_compared_after_defaulting() -> None:
    obj = jobset()
    pod_spec(obj)["containers"][0]["ports"] = [{"containerPort": 8476}, {"containerPort": 8476, "protocol": "TCP"}]
    structural.prune_and_default(obj, schema(obj))  # the first gets protocol: TCP, so the two collide
    [finding] = structural.list_findings(obj, schema(obj))
    assert finding.at[-2:] == ("ports", 1)
    assert finding.message == 'Duplicate value: map[string]interface {}{"containerPort":8476, "protocol":"TCP"}'
    pod_spec(obj)["containers"][0]["ports"][1]["protocol"] = "UDP"
    assert structural.list_findings(obj, schema(obj)) == []


# --- JobSet: defaulting --------------------------------------------------------------------------------------------


def test_jobset_webhook_names_rules_and_defaults_the_pod_template() -> None:
    obj = jobset()
    assert admit(obj) == []
    spec = obj["spec"]
    assert [r["name"] for r in spec["failurePolicy"]["rules"]] == ["failurePolicyRule0", "failurePolicyRule1"]
    assert pod_spec(obj)["restartPolicy"] == "OnFailure"
    assert spec["replicatedJobs"][0]["template"]["spec"]["completionMode"] == "Indexed"
    assert spec["successPolicy"] == {"operator": "All"}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}


def test_jobset_webhook_keeps_what_is_set() -> None:
    obj = jobset(network={"enableDNSHostnames": False})
    obj["spec"]["failurePolicy"]["rules"][0]["name"] = "fail_on_policy"
    pod_spec(obj)["restartPolicy"] = "Never"
    obj["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] = "NonIndexed"
    assert admit(obj) == []
    assert [r["name"] for r in obj["spec"]["failurePolicy"]["rules"]] == ["fail_on_policy", "failurePolicyRule1"]
    assert pod_spec(obj)["restartPolicy"] == "Never"
    assert obj["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] == "NonIndexed"
    assert obj["spec"]["network"] == {"enableDNSHostnames": False, "publishNotReadyAddresses": True}


# --- JobSet: validation --------------------------------------------------------------------------------------------


def test_jobset_named_with_capitals_is_refused() -> None:
    findings = admit(jobset("Train"))  # the Job name, then the Pod name (reported with the Job's, as upstream)
    assert [f.at for f in findings] == [("spec", "replicatedJobs", 0, "name")] * 2
    for finding in findings:
        assert finding.message.startswith(
            'Invalid value: "Train-workers-0": a DNS-1035 label must consist of lower '
            "case alphanumeric characters or '-', start with an alphabetic character"
        )
    assert admit(jobset("train")) == []


def test_child_job_and_pod_names_must_fit_in_63_characters() -> None:
    assert admit(jobset("a" * 40)) == []
    job, pod = admit(jobset("a" * 55))  # a valid name, but `<name>-workers-0` is 65 characters
    assert job.at == pod.at == ("spec", "replicatedJobs", 0, "name")
    assert job.message == (
        f'Invalid value: "{"a" * 55}-workers-0": JobSet name is too long, job names generated '
        "for this JobSet will exceed 63 characters"
    )
    assert pod.message.endswith("pod names generated for this JobSet will exceed 63 characters")
    [finding] = admit(jobset("a" * 48))  # the Job fits; `<job>-3-abcde` does not
    assert "pod names generated for this JobSet will exceed 63 characters" in finding.message
    long_rjob = jobset()
    long_rjob["spec"]["replicatedJobs"][0]["name"] = "w" * 50
    assert "job names generated" in admit(long_rjob)[0].message


def test_failure_policy_rule_targets_must_exist() -> None:
    obj = jobset()
    obj["spec"]["failurePolicy"]["rules"][1]["targetReplicatedJobs"] = ["leader"]
    [finding] = admit(obj)
    assert finding.at == ("spec", "failurePolicy", "rules", 1, "targetReplicatedJobs")
    assert (
        finding.message == "invalid replicatedJob name 'leader' in failure policy does not appear in "
        ".spec.ReplicatedJobs"
    )


def test_failure_policy_rule_names_unique_and_well_formed() -> None:
    obj = jobset()
    for rule in obj["spec"]["failurePolicy"]["rules"]:
        rule["name"] = "retry"
    assert messages(admit(obj)) == [
        "rule names are not unique, rules with indices [0 1] all have the same name 'retry'"
    ]
    obj = jobset()
    obj["spec"]["failurePolicy"]["rules"][0]["name"] = "1-retry"
    [finding] = admit(obj)
    assert finding.message.startswith(
        "invalid failure policy rule name '1-retry', a failure policy rule name must start with an alphabetic character"
    )


def test_failure_policy_reasons_and_gated_actions() -> None:
    obj = jobset()
    obj["spec"]["failurePolicy"]["rules"][0]["onJobFailureReasons"] = ["OOMKilled"]
    assert messages(admit(obj)) == [
        "invalid job failure reason 'OOMKilled' in failure policy is not a recognized job failure reason"
    ]
    obj = jobset()
    obj["spec"]["failurePolicy"]["rules"][1]["action"] = "RestartJob"  # the RestartJob gate is off by default
    [finding] = admit(obj)
    assert "RestartJob feature gate is disabled" in finding.message


def test_success_policy_targets_must_exist() -> None:
    assert admit(jobset(successPolicy={"operator": "Any", "targetReplicatedJobs": ["workers"]})) == []
    [finding] = admit(jobset(successPolicy={"operator": "All", "targetReplicatedJobs": ["driver"]}))
    assert finding.message == "invalid replicatedJob name 'driver' does not appear in .spec.ReplicatedJobs"


def test_depends_on_only_earlier_replicated_jobs() -> None:
    obj = jobset()
    driver = copy.deepcopy(obj["spec"]["replicatedJobs"][0]) | {"name": "driver"}
    obj["spec"]["replicatedJobs"].insert(0, driver)
    obj["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "driver", "status": "Ready"}]
    assert admit(copy.deepcopy(obj)) == []
    obj["spec"]["replicatedJobs"][0]["dependsOn"] = [{"name": "workers", "status": "Complete"}]
    assert messages(admit(obj)) == [
        "DependsOn can't be set for the first ReplicatedJob",
        "replicatedJob: driver cannot depend on replicatedJob: workers",
    ]


def test_coordinator_must_name_an_existing_pod() -> None:
    assert admit(jobset(coordinator={"replicatedJob": "workers", "jobIndex": 0, "podIndex": 3})) == []
    [finding] = admit(jobset(coordinator={"replicatedJob": "leader"}))
    assert finding.message == "coordinator replicatedJob leader does not exist"
    [finding] = admit(jobset(coordinator={"replicatedJob": "workers", "podIndex": 4}))
    assert finding.message == "coordinator pod index 4 is invalid for replicatedJob workers job index 0"


def test_subdomain_and_managed_by() -> None:
    assert admit(jobset(network={"subdomain": "svc"}, managedBy="kueue.x-k8s.io/multikueue")) == []
    findings = admit(jobset(network={"subdomain": "my.svc"}))
    assert findings[0].at == ("spec", "network", "subdomain")
    assert "a DNS-1035 label must consist of" in findings[0].message
    [finding] = admit(jobset(managedBy="multikueue"))
    assert finding.message == 'Invalid value: "multikueue": must be a domain-prefixed path (such as "acme.io/foo")'


def test_volume_claim_policy_needs_a_mount_and_a_short_name() -> None:
    claim = {
        "templates": [
            {
                "metadata": {"name": "ckpt"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }
        ]
    }
    obj = jobset(volumeClaimPolicies=[claim])
    pod_spec(obj)["containers"][0]["volumeMounts"] = [{"name": "ckpt", "mountPath": "/checkpoints"}]
    assert admit(obj) == []
    assert obj["spec"]["volumeClaimPolicies"][0]["retentionPolicy"] == {"whenDeleted": "Delete"}
    unmounted = jobset(volumeClaimPolicies=[copy.deepcopy(claim)])
    [finding] = admit(unmounted)
    assert (
        "replicatedJob containers don't have a matching volumeMount: ckpt from VolumeClaimPolicies" in finding.message
    )


# --- Kueue ---------------------------------------------------------------------------------------------------------

JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  generateName: sample-job-
  namespace: team-a
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  parallelism: 3
  completions: 3
  suspend: false
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: ["entrypoint-tester", "hello", "world"]
"""


def job(**labels: str) -> dict[str, Any]:
    obj = yaml.safe_load(JOB)
    obj["metadata"]["labels"] = labels if labels else obj["metadata"]["labels"]
    return obj


def test_job_with_a_queue_name_is_suspended() -> None:
    obj = job()
    assert admit(obj) == []
    assert obj["spec"]["suspend"] is True
    unqueued = job(app="x")
    admit(unqueued)
    assert unqueued["spec"]["suspend"] is False  # manageJobsWithoutQueueName is false by default


def test_kueue_webhooks_skip_its_own_and_the_system_namespace() -> None:
    obj = job()
    obj["metadata"]["namespace"] = "kube-system"
    assert admit(obj) == []
    assert obj["spec"]["suspend"] is False


def test_default_local_queue_is_applied() -> None:
    store = Store(
        [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "default", "namespace": "team-a"},
                "spec": {"clusterQueue": "cq"},
            }
        ]
    )
    obj = job(app="x")
    admit(obj, store)
    assert obj["metadata"]["labels"] == {"app": "x", "kueue.x-k8s.io/queue-name": "default"}
    assert obj["spec"]["suspend"] is True
    elsewhere = job(app="x")
    elsewhere["metadata"]["namespace"] = "team-b"
    admit(elsewhere, store)
    assert "kueue.x-k8s.io/queue-name" not in elsewhere["metadata"]["labels"]


def test_queue_name_must_be_a_subdomain() -> None:
    [finding] = admit(job(**{"kueue.x-k8s.io/queue-name": "queue_name"}))
    assert finding.at == ("metadata", "labels", "kueue.x-k8s.io/queue-name")
    assert finding.message.startswith('Invalid value: "queue_name": a lowercase RFC 1123 subdomain must consist of')


def test_max_exec_time_label_must_be_positive() -> None:
    labels = {"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/max-exec-time-seconds": "600"}
    assert admit(job(**labels)) == []
    labels["kueue.x-k8s.io/max-exec-time-seconds"] = "0"
    assert messages(admit(job(**labels))) == ["Invalid value: 0: should be greater than 0"]
    labels["kueue.x-k8s.io/max-exec-time-seconds"] = "10m"
    assert messages(admit(job(**labels))) == ['Invalid value: "10m": strconv.Atoi: parsing "10m": invalid syntax']


def test_job_partial_admission_annotation_bounds() -> None:
    obj = job()
    obj["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "2"}
    assert admit(obj) == []
    obj = job()
    obj["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "3"}
    assert messages(admit(obj)) == ["Invalid value: 3: should be between 0 and 2"]


RACK = "cloud.provider.com/topology-rack"  # the levels of Kueue's TAS samples (site/static/examples/tas)
BLOCK = "cloud.provider.com/topology-block"


def test_kueue_admits_one_topology_request_per_template() -> None:
    """kueue pkg/controller/jobframework/tas_validation.go ValidateTASPodSetRequest, in the style of Kueue's
    sample-job-required.yaml and sample-jobset-tas-sliced.yaml."""
    obj = job()
    obj["spec"]["template"]["metadata"] = {"annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}}
    assert admit(obj) == []
    sliced = jobset()
    pod_template = sliced["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod_template["metadata"] = {
        "annotations": {"kueue.x-k8s.io/podset-slice-required-topology": RACK, "kueue.x-k8s.io/podset-slice-size": "2"}
    }
    assert admit(sliced) == []


def test_kueue_refuses_two_topology_requests_and_a_bad_level() -> None:
    obj = job()
    obj["spec"]["template"]["metadata"] = {
        "annotations": {
            "kueue.x-k8s.io/podset-required-topology": RACK,
            "kueue.x-k8s.io/podset-preferred-topology": "cloud.provider.com/topology block",
        }
    }
    found = admit(obj)
    assert [f.at for f in found] == [
        ("spec", "template", "metadata", "annotations"),
        ("spec", "template", "metadata", "annotations", "kueue.x-k8s.io/podset-preferred-topology"),
    ]
    assert found[0].message == (
        'Invalid value: must not contain more than one topology annotation: ["kueue.x-k8s.io/podset-required-topology",'
        ' "kueue.x-k8s.io/podset-preferred-topology", "kueue.x-k8s.io/podset-unconstrained-topology"]'
    )
    assert found[1].message.startswith('Invalid value: "cloud.provider.com/topology block": name part must consist of')


def test_kueue_refuses_a_slice_without_its_size_or_larger_than_the_podset() -> None:
    sliced = jobset()  # one replicatedJob of 4 pods
    annotations = {"kueue.x-k8s.io/podset-slice-required-topology": RACK}
    pod_template = sliced["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod_template["metadata"] = {"annotations": annotations}
    assert messages(admit(copy.deepcopy(sliced))) == [
        "Required value: must be set when 'kueue.x-k8s.io/podset-slice-required-topology' is specified"
    ]
    annotations["kueue.x-k8s.io/podset-slice-size"] = "8"
    assert messages(admit(copy.deepcopy(sliced))) == ['Invalid value: "8": must not be greater than pod set count 4']
    annotations["kueue.x-k8s.io/podset-slice-size"] = "0"
    assert messages(admit(copy.deepcopy(sliced))) == ['Invalid value: "0": must be greater than or equal to 1']
    del annotations["kueue.x-k8s.io/podset-slice-required-topology"]
    annotations["kueue.x-k8s.io/podset-slice-size"] = "2"
    annotations["kueue.x-k8s.io/podset-group-name"] = "42"
    assert messages(admit(copy.deepcopy(sliced))) == [
        'Invalid value: "42": must not be a number',
        "Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-size' is specified",
        "Forbidden: may not be set when neither 'kueue.x-k8s.io/podset-preferred-topology' nor "
        "'kueue.x-k8s.io/podset-required-topology' is specified",
        "Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-required-topology' is not specified",
    ]


def test_jobset_with_a_queue_name_is_defaulted_by_jobset_then_suspended_by_kueue() -> None:
    obj = jobset()
    obj["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "user-queue"}
    assert admit(obj) == []
    assert obj["spec"]["suspend"] is True
    assert pod_spec(obj)["restartPolicy"] == "OnFailure"
    plain = jobset()
    admit(plain)
    assert "suspend" not in plain["spec"]


def test_child_job_of_a_queued_jobset_is_not_suspended_again() -> None:
    parent = jobset()
    parent["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "user-queue"}
    store = Store([parent])
    child = job(**{"kueue.x-k8s.io/queue-name": "user-queue"})
    child["metadata"]["namespace"] = "default"
    child["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "failurepolicy",
            "uid": "1",
            "controller": True,
        }
    ]
    admit(child, store)
    assert child["spec"]["suspend"] is False


def test_multikueue_cluster_queue_sets_managed_by() -> None:
    store = Store(
        [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "user-queue", "namespace": "default"},
                "spec": {"clusterQueue": "cluster-queue"},
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": "cluster-queue"},
                "spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "sample-multikueue"}]}},
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "AdmissionCheck",
                "metadata": {"name": "sample-multikueue"},
                "spec": {"controllerName": "kueue.x-k8s.io/multikueue"},
            },
        ]
    )
    obj = jobset()
    obj["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "user-queue"}
    assert admit(obj, store) == []
    assert obj["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    local = jobset()
    local["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "other-queue"}
    admit(local, store)
    assert "managedBy" not in local["spec"]


def test_elastic_annotation_only_on_batch_jobs() -> None:
    obj = jobset()
    obj["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    assert messages(admit(obj)) == [
        'Forbidden: elastic job is not supported for "jobset.x-k8s.io/v1alpha2, Kind=JobSet"'
    ]
    queued = job()
    queued["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    assert admit(queued) == []
    assert queued["spec"]["template"]["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/elastic-job"}]


def test_jaxjob_meets_no_kueue_webhook() -> None:
    jaxjob = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "JAXJob",
        "metadata": {"name": "jax-simple", "labels": {"kueue.x-k8s.io/queue-name": "Bad_Queue"}},
        "spec": {"jaxReplicaSpecs": {}},
    }
    before = copy.deepcopy(jaxjob)
    webhooks.mutate(jaxjob, Store())
    assert jaxjob == before and webhooks.validate(jaxjob, Store()) == []


# --- Kubeflow Training Operator v1: JAXJob --------------------------------------------------------------------------

# In the style of the Training Operator's cpu-demo JAXJob (kubeflow/training-operator release-1.9 examples/jax): two
# Workers, restarted OnFailure, a container `jax` running the image's train.py.
JAXJOB = """
apiVersion: kubeflow.org/v1
kind: JAXJob
metadata:
  name: jax-cpu-demo
  namespace: default
spec:
  jaxReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: jax
            image: registry.example.com/jax-cpu-demo:1.0
            command: [python3, train.py]
"""


def jaxjob() -> dict[str, Any]:
    obj = yaml.safe_load(JAXJOB)
    structural.prune_and_default(obj, schema(obj))
    return obj


def test_the_jaxjob_webhook_admits_workers_with_a_jax_container() -> None:
    assert admit(jaxjob()) == []


def test_the_jaxjob_webhook_refuses_what_the_training_operator_refuses() -> None:
    """kubeflow/training-operator release-1.9 pkg/webhooks/jax/jaxjob_webhook.go validateJAXJob: a name that is not a
    DNS-1035 label, a replica type other than Worker, a container without an image, none named `jax`."""
    bad = jaxjob()
    bad["metadata"]["name"] = "jax.cpu-demo"
    bad["spec"]["jaxReplicaSpecs"]["Master"] = bad["spec"]["jaxReplicaSpecs"].pop("Worker")
    container = bad["spec"]["jaxReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    container["name"], container["image"] = "trainer", ""
    found = admit(bad)
    assert [f.at for f in found] == [
        ("metadata", "name"),
        ("spec", "jaxReplicaSpecs", "Master"),
        ("spec", "jaxReplicaSpecs", "Master", "template", "spec", "containers", 0, "image"),
        ("spec", "jaxReplicaSpecs", "Master", "template", "spec", "containers"),
    ]
    assert messages(found) == [
        'Invalid value: "jax.cpu-demo": should match: a DNS-1035 label must consist of lower case alphanumeric '
        "characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. "
        "'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        'Unsupported value: "Master": supported values: "Worker"',
        "Required value: must be required",
        "Required value: must have at least one container with name jax",
    ]


def test_the_jaxjob_webhook_needs_the_replica_specs_and_their_containers() -> None:
    obj = jaxjob()
    obj["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"] = []
    assert messages(webhooks.validate(obj, Store())) == [
        "Required value: must be specified",
        "Required value: must have at least one container with name jax",
    ]
    del obj["spec"]["jaxReplicaSpecs"]
    assert messages(webhooks.validate(obj, Store())) == ["Required value: must be required"]


# --- Kubeflow Trainer ----------------------------------------------------------------------------------------------

RUNTIME = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: jax-distributed
  labels:
    trainer.kubeflow.org/framework: jax
spec:
  mlPolicy:
    numNodes: 1
    jax: {}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata:
            labels:
              trainer.kubeflow.org/trainjob-ancestor-step: trainer
          spec:
            template:
              spec:
                containers:
                - name: node
                  image: ghcr.io/kubeflow/trainer/jax-runtime
"""


def trainjob(**ref: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "jax-mnist", "namespace": "default"},
        "spec": {"runtimeRef": {"name": "jax-distributed", **ref}, "trainer": {"numNodes": 2}},
    }


def runtime() -> dict[str, Any]:
    obj = yaml.safe_load(RUNTIME)
    structural.prune_and_default(obj, schema(obj))
    return obj


def test_trainjob_runtime_must_exist_first() -> None:
    assert admit(trainjob(), Store([runtime()])) == []
    assert admit(trainjob()) == []  # jax-distributed is installed with the Trainer: a cluster has it
    # and so are the other built-in runtimes, applied with it (kubeflow/trainer manifests/overlays/runtimes)
    assert admit(trainjob(name="torch-distributed")) == admit(trainjob(name="torchtune-qwen2.5-1.5b")) == []
    [finding] = admit(trainjob(name="jax-custom"))
    assert finding.at == ("spec", "RuntimeRef")
    assert (
        'clustertrainingruntimes.trainer.kubeflow.org "jax-custom" not found: specified '
        "clusterTrainingRuntime must be created before the TrainJob is created" in finding.message
    )
    [finding] = admit(trainjob(kind="TrainingRuntime"), Store([runtime()]))  # a namespaced one: not the cluster's
    assert finding.at == ("spec", "runtimeRef")
    assert "specified trainingRuntime must be created before the TrainJob is created" in finding.message
    [finding] = admit(trainjob(kind="JAXJob"))
    assert finding.message == "unsupported runtime: JAXJob.trainer.kubeflow.org"


def test_deprecated_runtime_warns() -> None:
    old = runtime()
    old["metadata"]["labels"]["trainer.kubeflow.org/support"] = "deprecated"
    [finding] = admit(trainjob(), Store([old]))
    assert finding.warning and 'Referenced ClusterTrainingRuntime "jax-distributed" is deprecated' in finding.message


def test_queued_trainjob_is_suspended_and_gets_kueues_runtime_patch() -> None:
    obj = trainjob()
    obj["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "user-queue"}
    assert admit(obj, Store([runtime()])) == []
    assert obj["spec"]["suspend"] is True
    assert obj["spec"]["runtimePatches"] == [
        {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"spec": {}}}}
    ]
    plain = trainjob()
    admit(plain, Store([runtime()]))
    assert plain["spec"]["suspend"] is False


def test_runtime_trainer_step_needs_one_replica_and_a_node_container() -> None:
    assert webhooks.validate(runtime(), Store()) == []
    bad = runtime()
    rjob = bad["spec"]["template"]["spec"]["replicatedJobs"][0]
    rjob["replicas"] = 2
    rjob["template"]["spec"]["template"]["spec"]["containers"][0]["name"] = "trainer"
    assert messages(webhooks.validate(bad, Store())) == [
        "Invalid value: 2: always must be 1",
        "Invalid value: []v1.Container{...}: must contain the required container for the ancestor: trainer",
    ]
    bad["metadata"]["labels"]["trainer.kubeflow.org/webhook-validation"] = "disabled"
    assert webhooks.validate(bad, Store()) == []


@pytest.mark.parametrize("odd", [None, [], "x", {"spec": None}, {"spec": {"replicatedJobs": [None, 3, {"name": 5}]}}])
def test_odd_shapes_never_raise(odd: Any) -> None:
    for kind in ("JobSet", "TrainJob", "ClusterTrainingRuntime"):
        obj: Any = {
            "apiVersion": "jobset.x-k8s.io/v1alpha2" if kind == "JobSet" else "trainer.kubeflow.org/v1alpha1",
            "kind": kind,
            "metadata": {"name": "x"},
        }
        if isinstance(odd, dict):
            obj.update(copy.deepcopy(odd))
        else:
            obj["spec"] = odd
        structural.prune_and_default(obj, schema(obj))
        structural.list_findings(obj, schema(obj))
        webhooks.mutate(obj, Store())
        assert isinstance(webhooks.validate(obj, Store()), list)


@pytest.mark.parametrize(
    "spec",
    [
        None,
        "x",
        {"jaxReplicaSpecs": None},
        {"jaxReplicaSpecs": [1]},
        {"jaxReplicaSpecs": {"Worker": None}},
        {"jaxReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [None, 3, {"name": 5}]}}}}},
    ],
)
def test_the_jaxjob_webhook_never_raises_on_odd_shapes(spec: Any) -> None:
    obj = {"apiVersion": "kubeflow.org/v1", "kind": "JAXJob", "metadata": {"name": 7}, "spec": spec}
    assert all(not f.warning for f in webhooks.validate(obj, Store()))


# --- Kueue's ClusterQueue and Cohort webhooks: borrowing and lending limits ----------------------------------------


def _queue(kind: str, spec: dict[str, Any], **limits: Any) -> dict[str, Any]:
    """A ClusterQueue or Cohort in the style of Kueue's docs (concepts/cluster_queue, "LendingLimit"): 4 cpu of
    default-flavor, with these limits."""
    resource = {"name": "cpu", "nominalQuota": 4, **limits}
    groups = [{"coveredResources": ["cpu"], "flavors": [{"name": "default-flavor", "resources": [resource]}]}]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": kind,
        "metadata": {"name": "team-a"},
        "spec": {**spec, "resourceGroups": groups},
    }


@pytest.mark.parametrize(
    ("kind", "spec", "limits", "said"),
    [
        ("ClusterQueue", {"cohortName": "team-ab"}, {"borrowingLimit": 2, "lendingLimit": 4}, []),
        ("ClusterQueue", {"cohort": "team-ab"}, {"lendingLimit": 0}, []),  # v1beta1's spelling converts
        (
            "ClusterQueue",
            {},
            {"borrowingLimit": 2},
            ['borrowingLimit: Invalid value: "2": must be nil when cohort is empty'],
        ),
        (
            "ClusterQueue",
            {"cohortName": "team-ab"},
            {"lendingLimit": 5},
            ['lendingLimit: Invalid value: "5": must be less than or equal to the nominalQuota'],
        ),
        ("Cohort", {"parentName": "org"}, {"lendingLimit": 5}, []),  # a Cohort may lend past its own nominal quota
        ("Cohort", {}, {"borrowingLimit": 1}, ['borrowingLimit: Invalid value: "1": must be nil when parent is empty']),
    ],
)
def test_kueue_refuses_limits_without_a_cohort_and_lending_past_the_nominal_quota(
    kind: str, spec: dict[str, Any], limits: dict[str, Any], said: list[str]
) -> None:
    """kubernetes-sigs/kueue v0.19.2 pkg/webhooks/clusterqueue_webhook.go validateLimit and validateLendingLimit, and
    cohort_webhook.go (hasParent from parentName, no nominal bound)."""
    findings = webhooks.validate(_queue(kind, spec, **limits), Store([]))
    assert [f"{f.at[-1]}: {f.message}" for f in findings] == said, findings
    assert all(f.step == "webhook" and f.fix for f in findings)
