"""Built-in defaulting (jaxinfra/admission/defaults.py): each object as a user or a controller writes it, and what
the API server stores after pkg/apis/*/v1 defaulting -- the default where the field is unset, the value kept where
it is set."""

from __future__ import annotations

import copy
import textwrap
from typing import Any

import pytest
import yaml

from jaxinfra.admission import defaults

pytestmark = pytest.mark.unit

DIGEST = "sha256:" + "4b" * 32


def load(text: str) -> dict[str, Any]:
    return yaml.safe_load(textwrap.dedent(text))


def defaulted(text: str) -> dict[str, Any]:
    obj = load(text)
    defaults.apply(obj)
    return obj


def job(template_spec: str = "restartPolicy: Never", spec: str = "", labels: str = "") -> dict[str, Any]:
    """A Job in the style of the Kubernetes docs' `pi` example (no completions, no parallelism), with `spec` and
    `template_spec` (YAML) merged into its spec and its pod template's spec, defaulted."""
    obj = load("""
        apiVersion: batch/v1
        kind: Job
        metadata:
          name: digits
        spec:
          template:
            spec:
              containers:
              - name: digits
                image: perl:5.40.0
                command: ["perl", "-Mbignum=bpi", "-wle", "print bpi(500)"]
        """)
    obj["spec"].update(load(spec) or {})
    obj["spec"]["template"]["spec"].update(load(template_spec) or {})
    if labels:
        obj["spec"]["template"]["metadata"] = {"labels": load(labels)}
    defaults.apply(obj)
    return obj


# --- Job ---------------------------------------------------------------------------------------------------------


def test_docs_style_job_gets_the_job_defaults_and_keeps_its_restart_policy() -> None:
    obj = job()
    spec = obj["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert spec["completionMode"] == "NonIndexed"
    assert spec["suspend"] is False and spec["manualSelector"] is False
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    assert "labels" not in obj["metadata"]  # the template has no labels to copy


def test_job_template_without_restart_policy_gets_always() -> None:
    assert job(template_spec="")["spec"]["template"]["spec"]["restartPolicy"] == "Always"


def test_job_values_that_are_set_are_kept() -> None:
    spec = job(
        spec="""
        completions: 8
        parallelism: 4
        backoffLimit: 4
        completionMode: Indexed
        suspend: true
        podReplacementPolicy: Failed
        """
    )["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (8, 4, 4)
    assert (spec["completionMode"], spec["suspend"], spec["podReplacementPolicy"]) == ("Indexed", True, "Failed")


def test_work_queue_job_keeps_completions_unset_and_completions_only_gets_parallelism_one() -> None:
    queue = job(spec="parallelism: 3")["spec"]
    assert "completions" not in queue and queue["parallelism"] == 3
    fixed = job(spec="completions: 5")["spec"]
    assert (fixed["completions"], fixed["parallelism"]) == (5, 1)
    zero = job(spec="parallelism: 0")["spec"]  # an explicit 0 is set, not unset (a pointer in Go)
    assert zero["parallelism"] == 0 and "completions" not in zero


def test_backoff_limit_per_index_makes_backoff_limit_max_int32() -> None:
    per_index = job(
        spec="""
        completions: 4
        parallelism: 4
        completionMode: Indexed
        backoffLimitPerIndex: 1
        """
    )["spec"]
    assert per_index["backoffLimit"] == 2147483647
    both = job(
        spec="""
        completionMode: Indexed
        completions: 4
        backoffLimitPerIndex: 1
        backoffLimit: 10
        """
    )["spec"]
    assert both["backoffLimit"] == 10


def test_pod_failure_policy_makes_replacement_failed_and_condition_status_true() -> None:
    spec = job(
        spec="""
        podFailurePolicy:
          rules:
          - action: Ignore
            onPodConditions:
            - type: DisruptionTarget
          - action: FailJob
            onPodConditions:
            - type: ConfigIssue
              status: "False"
          - action: FailJob
            onExitCodes: {operator: In, values: [42]}
        """
    )["spec"]
    assert spec["podReplacementPolicy"] == "Failed"
    rules = spec["podFailurePolicy"]["rules"]
    assert rules[0]["onPodConditions"][0]["status"] == "True"
    assert rules[1]["onPodConditions"][0]["status"] == "False"
    assert "onPodConditions" not in rules[2]


def test_job_labels_come_from_the_template_only_when_the_job_has_none() -> None:
    copied = job(labels="{app: digits, tier: batch}")
    assert copied["metadata"]["labels"] == {"app": "digits", "tier": "batch"}
    copied["metadata"]["labels"]["extra"] = "x"
    assert "extra" not in copied["spec"]["template"]["metadata"]["labels"]  # a copy, not the same map
    own = load("""
        apiVersion: batch/v1
        kind: Job
        metadata: {name: own, labels: {team: research}}
        spec:
          template:
            metadata: {labels: {app: digits}}
            spec: {restartPolicy: Never, containers: [{name: c, image: busybox:1.36}]}
        """)
    defaults.apply(own)
    assert own["metadata"]["labels"] == {"team": "research"}


def test_job_template_gets_pod_spec_defaults_but_not_the_pod_only_ones() -> None:
    obj = job(
        template_spec="""
          restartPolicy: OnFailure
          dnsPolicy: Default
        """
    )
    spec = obj["spec"]["template"]["spec"]
    assert spec["dnsPolicy"] == "Default"
    assert spec["schedulerName"] == "default-scheduler" and spec["terminationGracePeriodSeconds"] == 30
    assert spec["securityContext"] == {}
    assert "enableServiceLinks" not in spec  # SetDefaults_Pod runs on Pods, not templates
    container = spec["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert (container["terminationMessagePath"], container["terminationMessagePolicy"]) == (
        "/dev/termination-log",
        "File",
    )


def test_job_without_a_template_gets_one_with_the_pod_spec_defaults() -> None:
    obj = defaulted("""
        apiVersion: batch/v1
        kind: Job
        metadata: {name: bare}
        spec: {}
        """)
    assert obj["spec"]["template"]["spec"]["restartPolicy"] == "Always"  # what Job validation then refuses


def test_cron_job_defaults_and_its_job_template() -> None:
    obj = defaulted("""
        apiVersion: batch/v1
        kind: CronJob
        metadata: {name: nightly-eval}
        spec:
          schedule: "0 3 * * *"
          successfulJobsHistoryLimit: 1
          jobTemplate:
            spec:
              template:
                spec:
                  restartPolicy: OnFailure
                  containers: [{name: eval, image: "ghcr.io/example/eval"}]
        """)
    spec = obj["spec"]
    assert (spec["concurrencyPolicy"], spec["suspend"]) == ("Allow", False)
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (1, 1)
    job_spec = spec["jobTemplate"]["spec"]
    assert "backoffLimit" not in job_spec  # SetDefaults_Job runs on the Job the CronJob controller creates
    assert job_spec["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"


# --- image pull policy -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("python:latest", "Always"),
        ("python", "Always"),  # untagged reads as :latest
        ("us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu", "Always"),
        ("localhost:5000/trainer", "Always"),
        ("python:3.12-slim", "IfNotPresent"),
        ("us-docker.pkg.dev/project/repo/jax:0.4.35", "IfNotPresent"),
        (f"ghcr.io/example/trainer@{DIGEST}", "IfNotPresent"),  # a digest counts as a tag
        (f"ghcr.io/example/trainer:latest@{DIGEST}", "Always"),  # ... unless the tag beside it is latest
        ("ghcr.io/example/trainer@sha256:abc", "IfNotPresent"),  # a digest too short: the reference does not parse
        ("Python", "IfNotPresent"),  # uppercase repository: does not parse, so no tag
        ("", "IfNotPresent"),
        ("4b" * 32, "IfNotPresent"),  # a bare image ID
    ],
)
def test_image_pull_policy_by_tag(image: str, policy: str) -> None:
    spec = {"containers": [{"name": "c", "image": image}]}
    defaults.pod_spec(spec)
    assert spec["containers"][0]["imagePullPolicy"] == policy


@pytest.mark.parametrize("given", ["Never", "Always", "IfNotPresent"])
def test_image_pull_policy_that_is_set_is_kept(given: str) -> None:
    spec = {
        "containers": [
            {"name": "c", "image": "python:latest", "imagePullPolicy": given},
            {"name": "d", "image": "python:3.12", "imagePullPolicy": given},
        ]
    }
    defaults.pod_spec(spec)
    assert [c["imagePullPolicy"] for c in spec["containers"]] == [given, given]


def test_init_and_image_volume_pull_policies() -> None:
    spec = {
        "initContainers": [{"name": "fetch", "image": "busybox"}],
        "containers": [{"name": "c", "image": "busybox:1.36"}],
        "volumes": [
            {"name": "weights", "image": {"reference": "registry.example/weights:v3"}},
            {"name": "tools", "image": {"reference": "registry.example/tools"}},
        ],
    }
    defaults.pod_spec(spec)
    assert spec["initContainers"][0]["imagePullPolicy"] == "Always"
    assert [v["image"]["pullPolicy"] for v in spec["volumes"]] == ["IfNotPresent", "Always"]


# --- Pod and PodSpec ---------------------------------------------------------------------------------------------


def test_pod_gets_pod_only_defaults() -> None:
    pod = defaulted("""
        apiVersion: v1
        kind: Pod
        metadata: {name: tpu-worker}
        spec:
          hostNetwork: true
          containers:
          - name: worker
            image: us-docker.pkg.dev/project/repo/jax:0.4.35
            ports: [{containerPort: 8471}, {containerPort: 8080, hostPort: 9090}]
            resources:
              limits: {google.com/tpu: 4, memory: 200Gi}
              requests: {memory: 100Gi}
        """)
    spec = pod["spec"]
    assert spec["enableServiceLinks"] is True
    resources = spec["containers"][0]["resources"]
    assert resources["requests"] == {"memory": "100Gi", "google.com/tpu": 4}  # missing requests from limits
    ports = spec["containers"][0]["ports"]
    assert [(p["hostPort"], p["protocol"]) for p in ports] == [(8471, "TCP"), (9090, "TCP")]
    assert spec["restartPolicy"] == "Always" and spec["dnsPolicy"] == "ClusterFirst"


def test_pod_without_host_network_gets_no_host_ports_and_keeps_enable_service_links() -> None:
    spec = {
        "enableServiceLinks": False,
        "containers": [{"name": "c", "image": "x:1", "ports": [{"containerPort": 80}]}],
    }
    defaults.pod_spec(spec, pod=True)
    assert spec["enableServiceLinks"] is False
    assert "hostPort" not in spec["containers"][0]["ports"][0]


def test_pod_spec_defaults_keep_values_that_are_set() -> None:
    spec = {
        "restartPolicy": "Never",
        "dnsPolicy": "None",
        "schedulerName": "kueue-scheduler",
        "terminationGracePeriodSeconds": 0,
        "securityContext": {"runAsUser": 1000},
        "containers": [{"name": "c", "image": "x:1", "terminationMessagePolicy": "FallbackToLogsOnError"}],
    }
    defaults.pod_spec(spec)
    assert (spec["restartPolicy"], spec["dnsPolicy"], spec["schedulerName"]) == ("Never", "None", "kueue-scheduler")
    assert spec["terminationGracePeriodSeconds"] == 0  # a pointer in Go: 0 is a value
    assert spec["securityContext"] == {"runAsUser": 1000}
    assert spec["containers"][0]["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_probe_defaults_and_zero_counts_as_unset() -> None:
    spec = {
        "containers": [
            {
                "name": "server",
                "image": "x:1",
                "livenessProbe": {"httpGet": {"port": 8080}, "periodSeconds": 0},
                "readinessProbe": {"grpc": {"port": 9000}, "timeoutSeconds": 5, "failureThreshold": 10},
                "startupProbe": {"tcpSocket": {"port": 8080}},
                "lifecycle": {"preStop": {"httpGet": {"port": 8080, "path": "/drain"}}},
            }
        ]
    }
    defaults.pod_spec(spec)
    container = spec["containers"][0]
    live, ready, start = container["livenessProbe"], container["readinessProbe"], container["startupProbe"]
    assert (live["timeoutSeconds"], live["periodSeconds"], live["successThreshold"], live["failureThreshold"]) == (
        1,
        10,
        1,
        3,
    )
    assert live["httpGet"] == {"port": 8080, "path": "/", "scheme": "HTTP"}
    assert (ready["timeoutSeconds"], ready["failureThreshold"], ready["grpc"]["service"]) == (5, 10, "")
    assert start["periodSeconds"] == 10
    assert container["lifecycle"]["preStop"]["httpGet"] == {"port": 8080, "path": "/drain", "scheme": "HTTP"}


def test_env_field_ref_api_version_and_container_port_protocol() -> None:
    spec = {
        "containers": [
            {
                "name": "c",
                "image": "x:1",
                "env": [
                    {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "IDX", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                    {"name": "PLAIN", "value": "1"},
                ],
                "ports": [{"containerPort": 8476, "protocol": "UDP"}, {"containerPort": 8471}],
            }
        ]
    }
    defaults.pod_spec(spec)
    env = spec["containers"][0]["env"]
    assert [e.get("valueFrom", {}).get("fieldRef", {}).get("apiVersion") for e in env] == ["v1", "v1", None]
    assert [p["protocol"] for p in spec["containers"][0]["ports"]] == ["UDP", "TCP"]


def test_volume_defaults() -> None:
    spec = {
        "containers": [],
        "volumes": [
            {"name": "scratch"},
            {"name": "creds", "secret": {"secretName": "gcs-key"}},
            {"name": "cfg", "configMap": {"name": "train-config", "defaultMode": 0o755}},
            {
                "name": "info",
                "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]},
            },
            {
                "name": "token",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"audience": "storage", "path": "token"}},
                        {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
                    ]
                },
            },
            {"name": "host", "hostPath": {"path": "/dev/vfio"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
            {
                "name": "ckpt",
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "100Gi"}}}
                    }
                },
            },
        ],
    }
    defaults.pod_spec(spec)
    scratch, creds, cfg, info, token, host, dshm, ckpt = spec["volumes"]
    assert scratch == {"name": "scratch", "emptyDir": {}}
    assert creds["secret"]["defaultMode"] == 420 and cfg["configMap"]["defaultMode"] == 0o755
    assert info["downwardAPI"]["defaultMode"] == 420
    assert info["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"] == "v1"
    sources = token["projected"]["sources"]
    assert token["projected"]["defaultMode"] == 420 and sources[0]["serviceAccountToken"]["expirationSeconds"] == 3600
    assert sources[1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"] == "v1"
    assert host["hostPath"]["type"] == ""
    assert dshm == {"name": "dshm", "emptyDir": {"medium": "Memory"}}
    assert ckpt["ephemeral"]["volumeClaimTemplate"]["spec"]["volumeMode"] == "Filesystem"


def test_resource_quantities_round_up_to_milli_units() -> None:
    spec = {
        "containers": [
            {
                "name": "c",
                "image": "x:1",
                "resources": {
                    "requests": {"cpu": "100u", "memory": "1.5Gi", "example.com/dev": "0.0005"},
                    "limits": {"cpu": "0.9999", "memory": "2Gi"},
                },
            }
        ],
        "overhead": {"cpu": "250m"},
    }
    defaults.pod_spec(spec)
    resources = spec["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "1m", "memory": "1.5Gi", "example.com/dev": "1m"}
    assert resources["limits"] == {"cpu": "1", "memory": "2Gi"}
    assert spec["overhead"] == {"cpu": "250m"}


# --- Service and the other kinds ---------------------------------------------------------------------------------


def test_headless_service_in_the_jobset_style() -> None:
    svc = defaulted("""
        apiVersion: v1
        kind: Service
        metadata: {name: trainer}
        spec:
          clusterIP: None
          selector: {jobset.sigs.k8s.io/jobset-name: trainer}
          ports:
          - {name: coordinator, port: 8476}
          - {name: named, port: 8080, targetPort: http}
          - {name: udp, port: 9999, protocol: UDP, targetPort: 0}
        """)
    spec = svc["spec"]
    assert (spec["type"], spec["sessionAffinity"], spec["internalTrafficPolicy"]) == ("ClusterIP", "None", "Cluster")
    assert "externalTrafficPolicy" not in spec and "allocateLoadBalancerNodePorts" not in spec
    assert [(p["protocol"], p["targetPort"]) for p in spec["ports"]] == [("TCP", 8476), ("TCP", "http"), ("UDP", 9999)]


def test_exposed_services_get_external_traffic_policy() -> None:
    def service(spec: dict) -> dict:
        obj = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": spec}
        defaults.apply(obj)
        return obj["spec"]

    node_port = service({"type": "NodePort", "ports": [{"port": 80}]})
    assert node_port["externalTrafficPolicy"] == "Cluster" and "allocateLoadBalancerNodePorts" not in node_port
    lb = service({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 443}]})
    assert (lb["externalTrafficPolicy"], lb["allocateLoadBalancerNodePorts"]) == ("Local", True)
    external_ips = service({"externalIPs": ["203.0.113.7"], "ports": [{"port": 80}]})
    assert external_ips["externalTrafficPolicy"] == "Cluster"
    name = service({"type": "ExternalName", "externalName": "storage.example.com"})
    assert "internalTrafficPolicy" not in name and "externalTrafficPolicy" not in name


def test_session_affinity_config() -> None:
    def spec_of(spec: dict) -> dict:
        obj = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": spec}
        defaults.apply(obj)
        return obj["spec"]

    client_ip = spec_of({"sessionAffinity": "ClientIP", "ports": [{"port": 80}]})
    assert client_ip["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}
    kept = spec_of({"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}})
    assert kept["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 60}}
    dropped = spec_of({"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}})
    assert "sessionAffinityConfig" not in dropped  # None affinity takes no config


def test_secret_namespace_and_claim() -> None:
    secret = defaulted("{apiVersion: v1, kind: Secret, metadata: {name: hf-token}, stringData: {token: x}}")
    assert secret["type"] == "Opaque"
    tls = defaulted("{apiVersion: v1, kind: Secret, metadata: {name: t}, type: kubernetes.io/tls}")
    assert tls["type"] == "kubernetes.io/tls"
    ns = defaulted("{apiVersion: v1, kind: Namespace, metadata: {name: research, labels: {team: ml}}}")
    assert ns["metadata"]["labels"] == {"team": "ml", "kubernetes.io/metadata.name": "research"}
    assert ns["status"] == {"phase": "Active"}
    spoofed = defaulted("""
        {apiVersion: v1, kind: Namespace, metadata: {name: research, labels: {kubernetes.io/metadata.name: prod}}}
        """)
    assert spoofed["metadata"]["labels"]["kubernetes.io/metadata.name"] == "research"  # always the name
    claim = defaulted("""
        apiVersion: v1
        kind: PersistentVolumeClaim
        metadata: {name: checkpoints}
        spec:
          accessModes: [ReadWriteMany]
          resources: {requests: {storage: 1Ti}}
        """)
    assert claim["spec"]["volumeMode"] == "Filesystem" and claim["status"] == {"phase": "Pending"}
    block = defaulted("{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: b}, spec: {volumeMode: Block}}")
    assert block["spec"]["volumeMode"] == "Block"


def test_role_binding_groups() -> None:
    binding = defaulted("""
        apiVersion: rbac.authorization.k8s.io/v1
        kind: RoleBinding
        metadata: {name: trainer, namespace: research}
        roleRef: {kind: Role, name: trainer}
        subjects:
        - {kind: ServiceAccount, name: trainer, namespace: research}
        - {kind: User, name: alice@example.com}
        - {kind: Group, name: ml-team, apiGroup: example.com}
        """)
    assert binding["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io"
    assert [s.get("apiGroup") for s in binding["subjects"]] == [None, "rbac.authorization.k8s.io", "example.com"]


def test_network_policy_types_and_port_protocol() -> None:
    ingress_only = defaulted("""
        apiVersion: networking.k8s.io/v1
        kind: NetworkPolicy
        metadata: {name: workers}
        spec:
          podSelector: {}
          ingress: [{ports: [{port: 8476}, {port: 53, protocol: UDP}]}]
        """)
    assert ingress_only["spec"]["policyTypes"] == ["Ingress"]
    assert [p["protocol"] for p in ingress_only["spec"]["ingress"][0]["ports"]] == ["TCP", "UDP"]
    both = defaulted("""
        {apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: n},
         spec: {podSelector: {}, egress: [{}]}}
        """)
    assert both["spec"]["policyTypes"] == ["Ingress", "Egress"]
    given = defaulted("""
        {apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: n},
         spec: {podSelector: {}, policyTypes: [Egress], egress: [{}]}}
        """)
    assert given["spec"]["policyTypes"] == ["Egress"]


def test_limit_range_fills_default_and_default_request() -> None:
    limit_range = defaulted("""
        apiVersion: v1
        kind: LimitRange
        metadata: {name: cpu-mem}
        spec:
          limits:
          - type: Container
            max: {cpu: "8", memory: 64Gi}
            min: {cpu: 100m}
            default: {memory: 16Gi}
          - type: Pod
            max: {cpu: "16"}
        """)
    container, pod = limit_range["spec"]["limits"]
    assert container["default"] == {"memory": "16Gi", "cpu": "8"}
    assert container["defaultRequest"] == {"memory": "16Gi", "cpu": "8"}  # from default, before min
    assert "default" not in pod


# --- bare specs, idempotence, other kinds, odd input --------------------------------------------------------------


def test_job_spec_for_a_controller_created_job() -> None:
    """A JobSet replicatedJob's template as the JobSet controller sends it: only then does the API server default
    it."""
    spec = load("""
        parallelism: 4
        completions: 4
        completionMode: Indexed
        template:
          spec:
            restartPolicy: Never
            containers: [{name: jax, image: "us-docker.pkg.dev/project/repo/jax:0.4.35"}]
        """)
    defaults.job_spec(spec)
    assert (spec["backoffLimit"], spec["suspend"], spec["podReplacementPolicy"]) == (6, False, "TerminatingOrFailed")
    assert spec["template"]["spec"]["schedulerName"] == "default-scheduler"


IDEMPOTENT = [
    """
    apiVersion: batch/v1
    kind: Job
    metadata: {name: j}
    spec:
      backoffLimitPerIndex: 2
      completionMode: Indexed
      completions: 2
      podFailurePolicy: {rules: [{action: Ignore, onPodConditions: [{type: DisruptionTarget}]}]}
      template:
        metadata: {labels: {app: j}}
        spec:
          containers:
          - name: c
            image: python
            resources: {limits: {cpu: 10u}}
            livenessProbe: {httpGet: {port: 80}}
          volumes: [{name: v}, {name: s, secret: {secretName: x}}]
    """,
    """
    {apiVersion: v1, kind: Pod, metadata: {name: p},
     spec: {hostNetwork: true, containers: [{name: c, image: x, ports: [{containerPort: 1}],
                                            resources: {limits: {memory: 1Gi}}}]}}
    """,
    "{apiVersion: v1, kind: Service, metadata: {name: s}, spec: {sessionAffinity: ClientIP, ports: [{port: 1}]}}",
    "{apiVersion: v1, kind: Namespace, metadata: {name: n}}",
    """
    {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, metadata: {name: b},
     roleRef: {kind: ClusterRole, name: view}, subjects: [{kind: Group, name: g}]}
    """,
    """
    {apiVersion: v1, kind: LimitRange, metadata: {name: l},
     spec: {limits: [{type: Container, max: {cpu: 1}, min: {cpu: 1u}}]}}
    """,
]


@pytest.mark.parametrize("text", IDEMPOTENT)
def test_applying_twice_changes_nothing(text: str) -> None:
    once = defaulted(text)
    twice = copy.deepcopy(once)
    defaults.apply(twice)
    assert twice == once and once != load(text)


@pytest.mark.parametrize(
    "text",
    [
        """
    apiVersion: jobset.x-k8s.io/v1alpha2
    kind: JobSet
    metadata: {name: trainer}
    spec:
      replicatedJobs:
      - name: workers
        template: {spec: {template: {spec: {containers: [{name: c, image: python}]}}}}
    """,
        "{apiVersion: batch/v1beta1, kind: Job, metadata: {name: old}, spec: {template: {spec: {}}}}",
        "{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}",
        "{apiVersion: v1, kind: ServiceAccount, metadata: {name: trainer}}",
        "{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: r}, rules: []}",
        "{apiVersion: [v1], kind: Pod, metadata: {name: p}}",
        "{kind: Pod, metadata: {name: p}}",
    ],
)
def test_objects_of_other_kinds_are_unchanged(text: str) -> None:
    assert defaulted(text) == load(text)


@pytest.mark.parametrize(
    "obj",
    [
        {"apiVersion": "batch/v1", "kind": "Job", "spec": ["not", "a", "map"]},
        {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {"containers": "c", "volumes": [1]}}}},
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "spec": {"containers": [{"image": 7, "ports": "80", "resources": {"limits": [1]}}]},
        },
        {"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": "http", "targetPort": None}], "type": []}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": 3, "labels": "x"}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "roleRef": "x",
            "subjects": [{"kind": []}],
        },
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "x"}, "default": "y"}]},
        },
        "not an object",
    ],
)
def test_odd_values_are_skipped_without_raising(obj: Any) -> None:
    before = copy.deepcopy(obj)
    defaults.apply(obj)
    if not isinstance(obj, dict):
        assert obj == before


def test_odd_values_are_left_as_they_are() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {"containers": [{"name": "c", "image": 7}], "restartPolicy": 5, "securityContext": "x"},
    }
    defaults.apply(pod)
    spec = pod["spec"]
    assert (spec["restartPolicy"], spec["securityContext"]) == (5, "x")
    assert "imagePullPolicy" not in spec["containers"][0]
    assert spec["containers"][0]["terminationMessagePath"] == "/dev/termination-log"
