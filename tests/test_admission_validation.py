"""The API server's validation step (jaxinfra.admission.validation): each rule passes a valid manifest and refuses
an invalid one with the message a real cluster prints after the field path."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from jaxinfra import quantity
from jaxinfra.admission import defaults
from jaxinfra.admission import validation as v
from jaxinfra.admission.store import Finding

pytestmark = pytest.mark.unit

# A Job in the style of the Kubernetes docs' pi example (computes digits, never restarts).
PI = """
apiVersion: batch/v1
kind: Job
metadata:
  name: pi
spec:
  backoffLimit: 4
  template:
    spec:
      containers:
      - name: pi
        image: perl:5.34.0
        command: ["perl", "-Mbignum=bpi", "-wle", "print bpi(1000)"]
      restartPolicy: Never
"""

# An Indexed Job in the style of JobSet's and xpk's TPU workers.
WORKERS = """
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: research
  labels: {kueue.x-k8s.io/queue-name: tpu-queue}
spec:
  completionMode: Indexed
  completions: 4
  parallelism: 4
  backoffLimit: 0
  template:
    metadata:
      annotations: {example.com/owner: ml-team}
    spec:
      restartPolicy: Never
      nodeSelector: {cloud.google.com/gke-tpu-topology: 2x2x4}
      tolerations:
      - {key: google.com/tpu, operator: Exists, effect: NoSchedule}
      volumes:
      - {name: scratch, emptyDir: {medium: Memory, sizeLimit: 1Gi}}
      - name: config
        configMap:
          name: train-config
          items: [{key: train.yaml, path: conf/train.yaml}]
      containers:
      - name: jax
        image: us-docker.pkg.dev/cloud-tpu-images/jax:latest
        ports: [{containerPort: 8471, name: tpu}, {containerPort: 8080, name: metrics}]
        env:
        - {name: JAX_PLATFORMS, value: tpu}
        - name: WORKER_ID
          valueFrom: {fieldRef: {fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
        resources:
          requests: {cpu: "8", memory: 32Gi, google.com/tpu: 4}
          limits: {memory: 32Gi, google.com/tpu: 4}
        volumeMounts:
        - {name: scratch, mountPath: /scratch}
        - {name: config, mountPath: /etc/train, readOnly: true}
"""


def load(text: str, **edits: Any) -> dict:
    """The manifest with dotted-path edits applied: load(PI, **{"spec.completions": 3})."""
    obj = yaml.safe_load(text)
    for dotted, value in edits.items():
        node = obj
        *parents, last = dotted.split(".")
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        if isinstance(node, list):
            node[int(last)] = value
        elif value is DROP:
            node.pop(last, None)
        else:
            node[last] = value
    return obj


DROP = object()
POD = ("spec", "template", "spec")
C0 = POD + ("containers", 0)


def refusals(obj: dict) -> list[Finding]:
    return [f for f in v.validate(obj) if not f.warning]


def only(obj: dict) -> Finding:
    [finding] = refusals(obj)
    assert finding.fix
    return finding


def messages(obj: dict) -> dict[tuple, str]:
    return {f.at: f.message for f in refusals(obj)}


# --- the manifests the docs and the renderers write pass --------------------------------------------------------


@pytest.mark.parametrize("text", [PI, WORKERS])
def test_valid_jobs_pass(text: str) -> None:
    assert v.validate(load(text)) == []


def test_restart_policy_always_is_refused_for_a_job() -> None:
    expected = 'Required value: valid values: "OnFailure", "Never"'
    assert only(load(PI, **{"spec.template.spec.restartPolicy": "Always"})).message == expected
    dropped = only(load(PI, **{"spec.template.spec.restartPolicy": DROP}))  # the PodSpec default is Always
    assert (dropped.at, dropped.message) == (POD + ("restartPolicy",), expected)
    assert refusals(load(PI, **{"spec.template.spec.restartPolicy": "OnFailure"})) == []


def test_a_pod_failure_policy_needs_restart_policy_never() -> None:
    policy = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}
    assert refusals(load(PI, **{"spec.podFailurePolicy": policy})) == []
    found = only(load(PI, **{"spec.podFailurePolicy": policy, "spec.template.spec.restartPolicy": "OnFailure"}))
    assert found.message == 'Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is specified'


# --- names, labels, annotations -------------------------------------------------------------------------------


def test_the_upstream_message_for_an_uppercase_name() -> None:
    found = only(load(PI, **{"metadata.name": "Train"}))
    assert found.at == ("metadata", "name") and found.value == "Train"
    assert found.message == (
        'Invalid value: "Train": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '
        "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
        r"validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    )


@pytest.mark.parametrize("name", ["Train", "tráin", "a" * 300, "team/train", "train-", ""])
def test_bad_object_names_are_refused(name: str) -> None:
    found = messages(load(PI, **{"metadata.name": name}))
    assert ("metadata", "name") in found
    if len(name) > 253:
        assert "must be no more than 253 characters" in found[("metadata", "name")]
    if not name:
        assert found[("metadata", "name")] == "Required value: name or generateName is required"


def test_a_generate_name_may_end_in_a_dash() -> None:
    assert refusals(load(PI, **{"metadata.name": DROP, "metadata.generateName": "pi-"})) == []
    found = messages(load(PI, **{"metadata.name": DROP, "metadata.generateName": "Pi-"}))
    assert ("metadata", "generateName") in found and ("metadata", "name") in found


def test_names_by_kind() -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "1train"},
        "spec": {"selector": {"app": "train"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    found = only(service)
    assert found.message.startswith('Invalid value: "1train": a DNS-1035 label must consist of lower case')
    assert refusals({**service, "metadata": {"name": "train"}}) == []
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml.research"}}
    assert only(namespace).message == 'Invalid value: "ml.research": must not contain dots'
    assert refusals({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ml.research"}}) == []
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "My.JobSet"}}
    assert "a lowercase RFC 1123 subdomain" in only(jobset).message
    assert refusals({**jobset, "metadata": {"name": "my.jobset"}}) == []


def priority_class(name: str, value: int) -> dict[str, Any]:
    """In the style of the Kubernetes docs' PriorityClass example (concepts/scheduling-eviction/pod-priority-preemption:
    high-priority, value 1000000)."""
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def test_a_user_priority_class_up_to_one_billion_is_admitted() -> None:
    assert refusals(priority_class("high-priority", 1000000)) == []
    assert refusals(priority_class("top", 1000000000) | {"preemptionPolicy": "Never"}) == []
    assert refusals(priority_class("system-node-critical", 2000001000)) == []  # the system class as it is


def test_a_priority_class_is_refused_as_kubernetes_refuses_it() -> None:
    """kubernetes pkg/apis/scheduling/validation/validation.go ValidatePriorityClass."""
    assert only(priority_class("too-high", 2000000000)).message == (
        "Forbidden: maximum allowed value of a user defined priority is 1000000000"
    )
    found = only(priority_class("system-mine", 1000))
    assert found.at == ("metadata", "name") and found.message == (
        "Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: "
        "system-mine is not a known system priority class"
    )
    assert only(priority_class("system-cluster-critical", 1000)).message.endswith(
        "error: value of system-cluster-critical PriorityClass must be 2000000000"
    )
    assert only(priority_class("batch", 10) | {"preemptionPolicy": "Sometimes"}).message == (
        'Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"'
    )


def limit_range(**item: dict[str, str]) -> dict[str, Any]:
    """In the style of the Kubernetes docs' per-container LimitRange (limit-mem-cpu-per-container), defaulted as the
    API server stores it before validating (a Container item's default from max, defaultRequest from default)."""
    obj = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limit-mem-cpu-per-container"}}
    obj["spec"] = {"limits": [{"type": "Container", **item}]}
    defaults.apply(obj)
    return obj


def test_a_limit_range_whose_bounds_are_in_order_is_admitted() -> None:
    bounds = {
        "max": {"cpu": "800m", "memory": "1Gi"},
        "min": {"cpu": "100m", "memory": "99Mi"},
        "default": {"cpu": "700m", "memory": "900Mi"},
        "defaultRequest": {"cpu": "110m", "memory": "111Mi"},
    }
    assert refusals(limit_range(**bounds)) == []
    assert refusals(limit_range(max={"memory": "1Gi"}, min={"memory": "500Mi"})) == []  # defaults from max


def test_a_limit_range_whose_bounds_cross_is_refused() -> None:
    """kubernetes pkg/apis/core/validation/validation.go ValidateLimitRange."""
    found = refusals(limit_range(max={"memory": "1Gi"}, default={"memory": "2Gi"}))
    assert [(f.at, f.message) for f in found] == [
        (
            ("spec", "limits", 0, "defaultRequest", "memory"),
            "Invalid value: 2Gi: default request value 2Gi is greater than max value 1Gi",
        ),
        (
            ("spec", "limits", 0, "default", "memory"),
            "Invalid value: 2Gi: default value 2Gi is greater than max value 1Gi",
        ),
    ]
    assert only(limit_range(maxLimitRequestRatio={"memory": "0.5"})).message == (
        "Invalid value: 500m: ratio 500m is less than 1"
    )
    crossed = limit_range(min={"cpu": "800m"}, max={"cpu": "200m"}, default={"cpu": "500m"})
    assert [f.message.partition(": ")[2].partition(": ")[2] for f in refusals(crossed)] == [
        "min value 800m is greater than max value 200m",
        "min value 800m is greater than default request value 500m",
        "default request value 500m is greater than max value 200m",
        "min value 800m is greater than default value 500m",
        "default value 500m is greater than max value 200m",
    ]


def resource_quota(hard: dict[str, str], *scopes: str) -> dict[str, Any]:
    """In the style of the Kubernetes docs' quota examples (policy/quota.yaml, quota-objects.yaml)."""
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "pods-high"}}
    obj["spec"] = {"hard": hard}
    if scopes:
        obj["spec"]["scopes"] = list(scopes)
    return obj


def test_a_resource_quota_whose_scopes_fit_its_resources_is_admitted() -> None:
    assert refusals(resource_quota({"pods": "10"}, "BestEffort")) == []
    assert refusals(resource_quota({"cpu": "1000", "memory": "200Gi", "pods": "10"}, "NotBestEffort")) == []
    selector = resource_quota({"cpu": "1000", "memory": "200Gi", "pods": "10"})
    selector["spec"]["scopeSelector"] = {
        "matchExpressions": [{"operator": "In", "scopeName": "PriorityClass", "values": ["high"]}]
    }
    assert refusals(selector) == []


def test_a_resource_quota_whose_scope_cannot_count_its_resources_is_refused() -> None:
    """kubernetes pkg/apis/core/validation/validation.go validateResourceQuotaScopes: a BestEffort pod has no
    requests, so a BestEffort quota counts pods only."""
    found = only(resource_quota({"cpu": "1", "pods": "10"}, "BestEffort"))
    assert found.at == ("spec", "scopes") and found.message == (
        'Invalid value: ["BestEffort"]: unsupported scope applied to resource'
    )
    assert only(resource_quota({"pods": "10"}, "Terminating", "NotTerminating")).message.endswith("conflicting scopes")
    selector = resource_quota({"services": "2"})
    selector["spec"]["scopeSelector"] = {
        "matchExpressions": [{"operator": "In", "scopeName": "PriorityClass", "values": ["high"]}]
    }
    found = only(selector)
    assert found.at == ("spec", "scopeSelector", "matchExpressions")
    assert found.message.endswith("unsupported scope applied to resource")


@pytest.mark.parametrize(
    ("expression", "at", "message"),
    [
        (
            {"operator": "In", "scopeName": "Terminating", "values": ["x"]},
            "operator",
            "Invalid value: \"In\": must be 'Exist' when scope is any of ResourceQuotaScopeTerminating",
        ),
        (
            {"operator": "In", "scopeName": "PriorityClass"},
            "values",
            "Required value: must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
        ),
        (
            {"operator": "Exists", "scopeName": "PriorityClass", "values": ["high"]},
            "values",
            "Invalid value: [\"high\"]: must be no value when `operator` is 'Exist' or 'DoesNotExist'",
        ),
        (
            {"operator": "Equals", "scopeName": "PriorityClass", "values": ["high"]},
            "operator",
            'Invalid value: "Equals": not a valid selector operator',
        ),
    ],
)
def test_a_quota_scope_selector_s_operator_and_values_are_checked(
    expression: dict[str, Any], at: str, message: str
) -> None:
    """kubernetes pkg/apis/core/validation/validation.go validateScopedResourceSelectorRequirement; the docs' quota
    for high-priority pods (`operator: In`, `values: [high]`, admitted above) is the passing case."""
    selector = resource_quota({"pods": "10"})
    selector["spec"]["scopeSelector"] = {"matchExpressions": [expression]}
    found = only(selector)
    assert found.at == ("spec", "scopeSelector", "matchExpressions", at)
    assert found.message.startswith(message)


def budget(**spec: object) -> dict[str, Any]:
    """In the style of the Kubernetes docs' zookeeper-pod-disruption-budget examples."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "trainers"},
        "spec": {**spec, "selector": {"matchLabels": {"app": "trainer"}}},
    }


def test_a_disruption_budget_has_one_of_min_available_and_max_unavailable() -> None:
    """kubernetes pkg/apis/policy/validation/validation.go ValidatePodDisruptionBudgetSpec."""
    assert refusals(budget(minAvailable=2)) == [] and refusals(budget(maxUnavailable="25%")) == []
    found = only(budget(minAvailable=2, maxUnavailable=1))
    assert found.at == ("spec",) and found.message.endswith("minAvailable and maxUnavailable cannot be both set")
    assert only(budget(minAvailable=-1)).message.endswith("must be greater than or equal to 0")
    assert only(budget(maxUnavailable="150%")).message.endswith("must not be greater than 100%")
    assert only(budget(minAvailable="half")).at == ("spec", "minAvailable")


def test_a_namespaced_object_s_namespace_is_a_dns_label() -> None:
    assert ("metadata", "namespace") in messages(load(PI, **{"metadata.namespace": "ML"}))
    cluster_scoped = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "namespace": "IGNORED"}}
    assert refusals(cluster_scoped) == []  # the API server clears it


def test_label_values_and_keys() -> None:
    assert refusals(load(PI, **{"metadata.labels": {"app.kubernetes.io/name": "x" * 63}})) == []
    found = only(load(PI, **{"metadata.labels": {"team": "x" * 64}}))
    assert (found.at, found.message) == (
        ("metadata", "labels"),
        f'Invalid value: "{"x" * 64}": must be no more than 63 characters',
    )
    found = only(load(PI, **{"metadata.labels": {"example.com/a/b": "x"}}))
    assert found.message.startswith('Invalid value: "example.com/a/b": a valid label key must consist of alphanumeric')
    assert "(e.g. 'MyName',  or 'my.name',  or '123-abc'" in found.message  # upstream's spacing
    assert "prefix part" in only(load(PI, **{"metadata.labels": {"Example.com/a": "x"}})).message


def test_annotations_are_limited_to_256_kib_in_all() -> None:
    key = "example.com/notes"
    fits = {key: "x" * (256 * 1024 - len(key))}
    assert refusals(load(PI, **{"metadata.annotations": fits})) == []
    found = only(load(PI, **{"metadata.annotations": {key: fits[key] + "x"}}))
    assert (found.at, found.message) == (("metadata", "annotations"), "Too long: must have at most 262144 bytes")
    assert "annotations" in only(load(PI, **{"spec.template.metadata": {"annotations": {"a": "b" * 262144}}})).at


def test_finalizers_of_built_in_kinds_are_standard_or_qualified() -> None:
    assert refusals(load(PI, **{"metadata.finalizers": ["example.com/cleanup", "orphan"]})) == []
    assert "neither a standard finalizer name" in only(load(PI, **{"metadata.finalizers": ["cleanup"]})).message


# --- containers ---------------------------------------------------------------------------------------------


def test_containers_are_required_and_need_an_image() -> None:
    found = only(load(PI, **{"spec.template.spec.containers": []}))
    assert (found.at, found.message) == (POD + ("containers",), "Required value")
    found = only(load(PI, **{"spec.template.spec.containers.0.image": DROP}))
    assert (found.at, found.message) == (C0 + ("image",), "Required value")


def test_container_names_are_unique_across_init_and_regular_containers() -> None:
    pi = {"name": "pi", "image": "perl:5.34.0"}
    found = only(load(PI, **{"spec.template.spec.containers": [pi, dict(pi)]}))
    assert (found.at, found.message) == (POD + ("containers", 1, "name"), 'Duplicate value: "pi"')
    found = only(load(PI, **{"spec.template.spec.initContainers": [pi]}))
    assert found.at == POD + ("initContainers", 0, "name")
    assert "RFC 1123 label" in only(load(PI, **{"spec.template.spec.containers.0.name": "Pi"})).message


def test_ports() -> None:
    found = messages(
        load(
            PI,
            **{
                "spec.template.spec.containers.0.ports": [
                    {"containerPort": 0},
                    {"containerPort": 70000, "name": "metrics"},
                    {"containerPort": 80, "name": "metrics"},
                    {"containerPort": 81, "protocol": "HTTP"},
                ]
            },
        )
    )
    assert found == {
        C0 + ("ports", 0, "containerPort"): "Required value",
        C0 + ("ports", 1, "containerPort"): "Invalid value: 70000: must be between 1 and 65535, inclusive",
        C0 + ("ports", 2, "name"): 'Duplicate value: "metrics"',
        C0 + ("ports", 3, "protocol"): 'Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"',
    }


def test_environment_variable_names_follow_the_relaxed_rule() -> None:
    assert v.RELAXED_ENV_VAR_NAMES  # the gate is GA and locked on
    fine = [{"name": n, "value": "1"} for n in ("JAX_PLATFORMS", "1st.var-x", "with space")]
    assert refusals(load(PI, **{"spec.template.spec.containers.0.env": fine})) == []
    found = only(load(PI, **{"spec.template.spec.containers.0.env": [{"name": "A=B", "value": "1"}]}))
    assert found.message.endswith("must consist only of printable ASCII characters other than '='")
    assert v.env_var_name("1st", relaxed=False)  # the strict rule, without the gate


def test_env_value_from_takes_exactly_one_source() -> None:
    env = [{"name": "X", "valueFrom": {}}]
    assert "must specify one of" in only(load(PI, **{"spec.template.spec.containers.0.env": env})).message
    env = [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeNames"}}}]
    assert "field label not supported" in only(load(PI, **{"spec.template.spec.containers.0.env": env})).message


# --- resources ----------------------------------------------------------------------------------------------


def test_a_quantity_that_does_not_parse() -> None:
    found = only(load(PI, **{"spec.template.spec.containers.0.resources": {"requests": {"cpu": "1K"}}}))
    assert found.at == C0 + ("resources", "requests", "cpu")
    assert found.message == f'Invalid value: "1K": {quantity.MESSAGE}'


def test_requests_may_not_exceed_limits() -> None:
    fits = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1024Mi"}}
    assert refusals(load(PI, **{"spec.template.spec.containers.0.resources": fits})) == []
    found = only(
        load(PI, **{"spec.template.spec.containers.0.resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}})
    )
    assert (found.at, found.message) == (
        C0 + ("resources", "requests"),
        'Invalid value: "2": must be less than or equal to cpu limit of 1',
    )


@pytest.mark.parametrize("gpu", ["nvidia.com/gpu", "google.com/tpu"])
def test_extended_resources_are_whole_and_not_overcommitted(gpu: str) -> None:
    def res(resources: dict) -> dict:
        return load(PI, **{"spec.template.spec.containers.0.resources": resources})

    assert refusals(res({"requests": {gpu: 4}, "limits": {gpu: 4}})) == []
    assert refusals(res({"limits": {gpu: "4"}})) == []
    found = only(res({"requests": {gpu: 1}}))
    assert (found.at, found.message) == (
        C0 + ("resources", "limits"),
        "Required value: Limit must be set for non overcommitable resources",
    )
    assert (
        only(res({"requests": {gpu: 1}, "limits": {gpu: 2}})).message
        == f'Invalid value: "1": must be equal to {gpu} limit of 2'
    )
    assert only(res({"limits": {gpu: "1500m"}})).message == "Invalid value: 1500m: must be an integer"


def test_resource_names() -> None:
    found = refusals(load(PI, **{"spec.template.spec.containers.0.resources": {"limits": {"gpu": 1}}}))
    assert {f.at for f in found} == {C0 + ("resources", "limits", "gpu")}
    assert {f.message for f in found} == {
        'Invalid value: "gpu": must be a standard resource type or fully qualified',
        'Invalid value: "gpu": must be a standard resource for containers',
    }
    negative = only(load(PI, **{"spec.template.spec.containers.0.resources": {"limits": {"memory": "-1Gi"}}}))
    assert negative.message == 'Invalid value: "-1Gi": must be greater than or equal to 0'


# --- volumes and mounts -------------------------------------------------------------------------------------


def test_a_volume_mount_must_name_a_volume() -> None:
    found = only(load(WORKERS, **{"spec.template.spec.containers.0.volumeMounts.1.name": "configs"}))
    assert (found.at, found.message) == (C0 + ("volumeMounts", 1, "name"), 'Not found: "configs"')


def test_volumes_have_unique_label_names_and_exactly_one_source() -> None:
    found = messages(
        load(
            PI,
            **{
                "spec.template.spec.volumes": [
                    {"name": "data", "emptyDir": {}},
                    {"name": "data", "emptyDir": {}},
                    {"name": "both", "emptyDir": {}, "persistentVolumeClaim": {"claimName": "ckpt"}},
                    {"name": "none"},
                    {"name": "Scratch", "emptyDir": {}},
                ]
            },
        )
    )
    volumes = POD + ("volumes",)
    assert found[volumes + (1, "name")] == 'Duplicate value: "data"'
    assert found[volumes + (2, "persistentVolumeClaim")] == "Forbidden: may not specify more than 1 volume type"
    assert found[volumes + (3,)] == "Required value: must specify a volume type"
    assert "RFC 1123 label" in found[volumes + (4, "name")]


def test_item_paths_keys_and_sub_paths() -> None:
    found = messages(
        load(
            WORKERS,
            **{
                "spec.template.spec.volumes.1.configMap.items": [
                    {"key": "a", "path": "/etc/a"},
                    {"key": "", "path": "..b"},
                ],
                "spec.template.spec.containers.0.volumeMounts.0.subPath": "../up",
            },
        )
    )
    items = POD + ("volumes", 1, "configMap", "items")
    assert found[items + (0, "path")] == 'Invalid value: "/etc/a": must be a relative path'
    assert found[items + (1, "key")] == "Required value"
    assert found[items + (1, "path")] == "Invalid value: \"..b\": must not start with '..'"
    assert found[C0 + ("volumeMounts", "subPath")] == "Invalid value: \"../up\": must not contain '..'"


def test_mount_paths_are_required_and_unique() -> None:
    found = messages(
        load(
            WORKERS,
            **{
                "spec.template.spec.containers.0.volumeMounts.1.mountPath": "/scratch",
                "spec.template.spec.containers.0.volumeMounts.0.mountPath": DROP,
            },
        )
    )
    assert found[C0 + ("volumeMounts", 0, "mountPath")] == "Required value"
    assert set(found) == {C0 + ("volumeMounts", 0, "mountPath")}
    found = only(load(WORKERS, **{"spec.template.spec.containers.0.volumeMounts.1.mountPath": "/scratch"}))
    assert found.message == 'Invalid value: "/scratch": must be unique'


def test_shared_rules_are_the_api_server_s() -> None:
    assert v.local_non_reserved_path("..data") == ["must not start with '..'"]
    assert v.local_non_reserved_path("../x") == ["must not contain '..'"]
    assert v.local_descending_path("/../x") == ["must be a relative path", "must not contain '..'"]
    assert v.config_map_key("..") == ["must not be '..'"] and v.config_map_key("game.properties") == []
    assert v.dns1123_label("a" * 64) == ["must be no more than 63 characters"]


# --- pod-level fields ---------------------------------------------------------------------------------------


def test_pod_level_policies_and_deadlines() -> None:
    assert (
        'supported values: "ClusterFirstWithHostNet", "ClusterFirst"'
        in only(load(PI, **{"spec.template.spec.dnsPolicy": "Cluster"})).message
    )
    assert (
        only(load(PI, **{"spec.template.spec.activeDeadlineSeconds": 0})).message
        == "Invalid value: 0: must be between 1 and 2147483647, inclusive"
    )
    assert "dnsConfig" in only(load(PI, **{"spec.template.spec.dnsPolicy": "None"})).message
    bad = [{"operator": "Equal", "value": "x"}]
    assert "operator must be Exists" in only(load(PI, **{"spec.template.spec.tolerations": bad})).message


def test_a_negative_grace_period_is_a_warning() -> None:
    findings = v.validate(load(PI, **{"spec.template.spec.terminationGracePeriodSeconds": -1}))
    assert [(f.at, f.warning) for f in findings] == [(POD + ("terminationGracePeriodSeconds",), True)]
    assert findings[0].message == "must be >= 0; negative values are invalid and will be treated as 1"


def test_a_pod() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "debug"},
        "spec": {"containers": [{"name": "shell", "image": " busybox"}]},
    }
    assert only(pod).message == 'Invalid value: " busybox": must not have leading or trailing whitespace'
    pod["spec"]["containers"][0]["image"] = "busybox"
    assert v.validate(pod) == []
    dotted = v.validate({**pod, "metadata": {"name": "debug.pod"}})
    assert [f.warning for f in dotted] == [True] and "a DNS label is recommended" in dotted[0].message


# --- batch/v1 Job ---------------------------------------------------------------------------------------------


def test_counts_are_not_negative() -> None:
    found = only(load(PI, **{"spec.completions": -3}))
    assert found.at == ("spec", "completions")
    assert found.message == "Invalid value: -3: must be greater than or equal to 0"
    assert only(load(PI, **{"spec.ttlSecondsAfterFinished": -1})).at == ("spec", "ttlSecondsAfterFinished")
    assert only(load(PI, **{"spec.activeDeadlineSeconds": -1})).at == ("spec", "activeDeadlineSeconds")


def test_indexed_jobs_run_at_most_100000_pods_at_a_time() -> None:
    def indexed(n: int, parallelism: int) -> dict:
        return load(WORKERS, **{"spec.completions": n, "spec.parallelism": parallelism})

    assert refusals(indexed(100_000, 100_000)) == []
    found = only(indexed(1_000_000, 1_000_000))
    assert (found.at, found.message) == (
        ("spec", "parallelism"),
        "Invalid value: 1000000: must be less than or equal to 100000 when completion mode is Indexed",
    )
    assert refusals(indexed(1_000_000, 1000)) == []  # completions alone are not capped upstream


def test_a_job_name_must_fit_the_job_name_label_of_its_pods() -> None:
    found = only(load(PI, **{"metadata.name": "p" * 64}))
    assert (found.at, found.message) == (
        ("spec", "template", "labels"),
        f'Invalid value: "{"p" * 64}": must be no more than 63 characters',
    )
    assert (
        refusals(
            load(
                PI,
                **{
                    "metadata.name": "p" * 64,
                    "spec.manualSelector": True,
                    "spec.selector": {"matchLabels": {"app": "pi"}},
                    "spec.template.metadata": {"labels": {"app": "pi"}},
                },
            )
        )
        == []
    )


def test_indexed_jobs_need_completions_and_a_hostname_per_index() -> None:
    found = only(load(WORKERS, **{"spec.completions": DROP}))
    assert (found.at, found.message) == (("spec", "completions"), "Required value: when completion mode is Indexed")
    found = only(load(WORKERS, **{"metadata.name": "t" * 60, "spec.completions": 1000, "spec.parallelism": 4}))
    assert found.message.endswith(f"will not able to create pod with invalid DNS label: {'t' * 60}-999")


def test_backoff_limit_per_index() -> None:
    per_index = {"spec.backoffLimitPerIndex": 1, "spec.completions": 200_000, "spec.parallelism": 20_000}
    found = messages(load(WORKERS, **per_index))
    assert found == {
        ("spec", "maxFailedIndexes"): "Required value: must be specified when completions is above 100000",
        ("spec", "parallelism"): "Invalid value: 20000: must be less than or equal to 10000 when "
        "completions are above 100000 and used with backoff limit per index",
    }
    assert refusals(load(WORKERS, **{**per_index, "spec.maxFailedIndexes": 10, "spec.parallelism": 100})) == []
    assert (
        only(load(PI, **{"spec.backoffLimitPerIndex": 1})).message
        == "Invalid value: 1: requires indexed completion mode"
    )
    assert ("spec", "backoffLimitPerIndex") in messages(load(WORKERS, **{"spec.maxFailedIndexes": 1}))


def test_pod_failure_policy_rules() -> None:
    rules = [
        {"action": "FailIndex", "onExitCodes": {"containerName": "jax", "operator": "In", "values": [0, 3, 2]}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
    ]
    found = messages(load(WORKERS, **{"spec.podFailurePolicy": {"rules": rules}}))
    rule = ("spec", "podFailurePolicy", "rules")
    assert found == {
        rule + (0, "action"): 'Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set',
        rule + (0, "onExitCodes", "values", 0): "Invalid value: 0: must not be 0 for the In operator",
        rule + (0, "onExitCodes", "values"): "Invalid value: [0, 3, 2]: must be ordered",
        rule + (1, "onPodConditions", 0, "status"): 'Required value: valid values: ["False" "True" "Unknown"]',
    }
    rules[0]["onExitCodes"] = {"containerName": "trainer", "operator": "In", "values": [42]}
    assert (
        "must be one of the container"
        in only(
            load(WORKERS, **{"spec.podFailurePolicy": {"rules": rules[:1]}, "spec.backoffLimitPerIndex": 1})
        ).message
    )


def test_selectors_are_generated_unless_manual() -> None:
    selector = {"matchLabels": {"app": "pi"}}
    found = messages(load(PI, **{"spec.selector": selector}))
    assert found[("spec", "selector")] == 'Invalid value: {"matchLabels": {"app": "pi"}}: `selector` not auto-generated'
    assert found[("spec", "template", "metadata", "labels")].endswith("`selector` does not match template `labels`")
    assert len(found) == 2
    manual = load(PI, **{"spec.selector": selector, "spec.manualSelector": True})
    assert only(manual).message.endswith("`selector` does not match template `labels`")
    manual["spec"]["template"]["metadata"] = {"labels": {"app": "pi"}}
    assert refusals(manual) == []
    assert only(load(PI, **{"spec.manualSelector": True})).at == ("spec", "selector")
    assert only(load(PI, **{"spec.template.metadata": {"labels": {"job-name": "tau"}}})).message.endswith(
        "must be 'pi'"
    )


# --- Service, ConfigMap, Secret -----------------------------------------------------------------------------


def test_service_ports() -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "coordinator"},
        "spec": {"clusterIP": "None", "selector": {"job-name": "train"}, "ports": []},
    }
    assert refusals(service) == []  # headless: no ports needed
    service["spec"] = {"ports": [{"port": 8471}, {"port": 8471, "name": "grpc"}]}
    found = messages(service)
    assert found[("spec", "ports", 0, "name")] == "Required value"
    assert found[("spec", "ports", 1)] == "Duplicate value: {8471 TCP}"
    assert messages({**service, "spec": {}}) == {("spec", "ports"): "Required value"}


def test_config_map_and_secret_keys() -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "train-config"},
        "data": {"train.yaml": "steps: 10", "../escape": "x"},
    }
    assert [(f.at, f.message.split(": ")[-1][:30]) for f in refusals(cm)] == [
        (("data", "../escape"), "a valid config key must consis"),
        (("data", "../escape"), "must not start with '..'"),
    ]
    assert refusals({**cm, "data": {"train.yaml": "x"}, "binaryData": {"train.yaml": "eA=="}})[0].message.endswith(
        "duplicate of key present in binaryData"
    )
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token"}, "stringData": {"token": "x"}}
    assert refusals(secret) == []
    assert only({**secret, "stringData": {"hf token": "x"}}).at == ("data", "hf token")
    tls = {**secret, "type": "kubernetes.io/tls", "stringData": {"tls.crt": "x"}}
    assert only(tls).at == ("data", "tls.key")


# --- the public pieces the webhooks step uses, and robustness ---------------------------------------------------


def test_pod_template_and_object_meta_are_public() -> None:
    template = yaml.safe_load(PI)["spec"]["template"]
    at = ("spec", "replicatedJobs", 0, "template", "spec", "template")
    assert v.pod_template(template, at) == []
    template["spec"]["containers"][0]["image"] = ""
    assert [f.at for f in v.pod_template(template, at)] == [at + ("spec", "containers", 0, "image")]
    assert [f.at for f in v.object_meta({"name": "Train"}, v.DNS1035)] == [("metadata", "name")]
    assert v.object_meta({"name": "train"}, v.LABEL) == []


def test_values_print_as_go_prints_them() -> None:
    found = messages(load(PI, **{"metadata.name": 'a"\nb'}))
    assert found[("metadata", "name")].startswith(r'Invalid value: "a\"\nb": ')


odd = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


@given(odd, odd)
def test_never_raises_on_odd_input(spec: Any, meta: Any) -> None:
    found = v.pod_template({"spec": {"containers": spec, "volumes": spec}}, ())
    for kind, api in (("Job", "batch/v1"), ("Pod", "v1"), ("Service", "v1"), ("Secret", "v1"), ("X", "a.io/v1")):
        found += v.validate({"apiVersion": api, "kind": kind, "metadata": meta, "spec": spec, "data": spec})
    assert all(isinstance(f, Finding) and f.message and f.fix and isinstance(f.at, tuple) for f in found)


def test_every_rule_of_the_worker_job_gives_a_message_and_a_fix() -> None:
    broken = load(
        WORKERS,
        **{
            "spec.template.spec.containers.0.volumeMounts.0.name": "nope",
            "spec.template.spec.containers.0.resources.limits": {"google.com/tpu": 2},
            "spec.template.spec.containers.0.ports.0.containerPort": 0,
            "spec.template.spec.volumes.1.configMap.items.0.path": "../x",
        },
    )
    found = refusals(broken)  # config's item path; the port; the mount (and the volume it lost); the TPU request
    assert [f.at[-1] for f in found] == ["path", "containerPort", "name", "name", "requests"]
    assert all(f.fix and f.message for f in found)
