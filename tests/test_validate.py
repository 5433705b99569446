"""Behavioural tests of strict manifest validation (jaxinfra.validate)."""

from __future__ import annotations

import subprocess
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxinfra.admission import schema as front_door_schema
from jaxinfra.errors import ManifestError
from jaxinfra.schemas import operators
from jaxinfra.validate import K8S_VERSION, validate_files, validate_objects
from jaxinfra.yamlio import load

pytestmark = pytest.mark.unit


def jobset(name: str = "train") -> dict[str, Any]:
    """A minimal JobSet: one replicatedJob, an Indexed Job, a pod with one container."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "jaxinfra"}},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "completionMode": "Indexed",
                            "completions": 4,
                            "parallelism": 4,
                            "backoffLimit": 0,
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [{"name": "jax", "image": "python:3.11-slim"}],
                                }
                            },
                        }
                    },
                }
            ]
        },
    }


def job() -> dict[str, Any]:
    """An Indexed batch/v1 Job with podFailurePolicy and podReplacementPolicy: Failed."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train-workers", "namespace": "ml"},
        "spec": {
            "completionMode": "Indexed",
            "completions": 2,
            "parallelism": 2,
            "backoffLimit": 0,
            "podReplacementPolicy": "Failed",
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "FailJob",
                        "onExitCodes": {"containerName": "jax", "operator": "In", "values": [42]},
                    },
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                ]
            },
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "subdomain": "train",
                    "containers": [
                        {
                            "name": "jax",
                            "image": "python:3.11-slim",
                            "ports": [{"containerPort": 8476, "name": "coord"}],
                            "resources": {"limits": {"memory": "1Gi", "cpu": 1}},
                        }
                    ],
                }
            },
        },
    }


def service() -> dict[str, Any]:
    """A headless Service for the workers' stable DNS names."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "train"},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {"job-name": "train-workers"},
            "ports": [{"name": "coord", "port": 8476, "targetPort": 8476}],
        },
    }


def service_account() -> dict[str, Any]:
    metadata = {"name": "trainer", "namespace": "ml"}
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata}


def paths(problems: list) -> list[str]:
    return [p.where for p in problems]


# --- valid manifests -------------------------------------------------------------------------


@pytest.mark.parametrize("make", [jobset, job, service, service_account])
def test_valid_objects_have_no_problems(make) -> None:
    assert validate_objects([make()]) == []


def test_k8s_version_has_the_job_fields_jaxinfra_renders() -> None:
    assert K8S_VERSION.count(".") == 1
    assert validate_objects([job()]) == []  # uses podFailurePolicy and podReplacementPolicy
    indexed = job()
    indexed["spec"] |= {"backoffLimitPerIndex": 1, "maxFailedIndexes": 1}
    assert validate_objects([indexed]) == []


@pytest.mark.parametrize("port", ["coord", 8476])
def test_service_target_port_is_int_or_string(port: int | str) -> None:
    obj = service()
    obj["spec"]["ports"][0]["targetPort"] = port
    assert validate_objects([obj]) == []


@pytest.mark.parametrize("quantity", ["1Gi", 1, "500m", 0.5])
def test_builtin_quantities_accept_strings_and_numbers(quantity: int | float | str) -> None:
    obj = job()
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": quantity}}
    assert validate_objects([obj]) == []


@pytest.mark.parametrize("quantity", ["1Gi", 1, "500m"])
def test_crd_quantities_are_int_or_string(quantity: int | str) -> None:
    obj = jobset()
    jobset_container(obj)["resources"] = {"limits": {"memory": quantity, "google.com/tpu": 4}}
    assert validate_objects([obj]) == []


def test_crd_int_or_string_rejects_a_float_like_the_api_server() -> None:
    obj = jobset()
    jobset_container(obj)["resources"] = {"limits": {"cpu": 0.5}}
    [problem] = validate_objects([obj])
    assert problem.where.endswith("containers[0].resources.limits.cpu")
    assert "integer or string" in problem.fix


@pytest.mark.parametrize(
    ("completions", "why"),
    [
        (1e308, "is not of type 'integer'"),  # no whole number kubectl would write: "cannot unmarshal number 1e+308"
        (2.5, "is not of type 'integer'"),
        (3_000_000_000, "is not a 'int32'"),  # past Go's int32: refused at decoding
    ],
)
def test_an_integer_field_takes_what_the_api_server_decodes_into_its_go_type(completions: float, why: str) -> None:
    obj = job()
    obj["spec"]["completions"] = completions
    problems = validate_objects([obj])
    assert problems and all(p.where.endswith("spec.completions") for p in problems), problems
    assert any(why in p.message for p in problems), problems


def test_a_jobset_replica_count_past_int32_is_refused_as_its_webhook_decodes_it() -> None:
    obj = jobset()
    obj["spec"]["replicatedJobs"][0]["replicas"] = 3_000_000_000
    [problem] = validate_objects([obj])
    assert problem.where.endswith("replicatedJobs[0].replicas") and "is not a 'int32'" in problem.message


def test_a_whole_float_is_the_integer_kubectl_sends() -> None:
    obj = job()
    obj["spec"]["completions"] = 2.0  # YAML 2.0: kubectl's YAML-to-JSON writes it as 2
    assert validate_objects([obj]) == []
    obj["spec"]["completions"] = 2**31 - 1
    assert validate_objects([obj]) == []


def test_real_upstream_runtime_is_valid() -> None:
    """Trainer's own jax-distributed runtime shape, trimmed: empty `jax: {}` and template labels."""
    node = jobset()["spec"]["replicatedJobs"][0] | {"name": "node"}
    del node["replicas"]
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "jax", "labels": {"trainer.kubeflow.org/framework": "jax"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "jax": {}},
            "template": {"spec": {"replicatedJobs": [node]}},
        },
    }
    assert validate_objects([runtime]) == []
    runtime["spec"]["mlPolicy"]["jax"] = {"coordinatorPort": 1234}  # `jax: {}` keeps no fields
    [problem] = validate_objects([runtime])
    assert problem.where == "<memory>#0 ClusterTrainingRuntime/jax spec.mlPolicy.jax.coordinatorPort"


# --- problems ---------------------------------------------------------------------------------


def test_unknown_field_deep_in_a_jobset_is_located() -> None:
    obj = jobset()
    obj["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelizm"] = 4
    [problem] = validate_objects([obj], source="out/dev.yaml")
    assert problem.where == ("out/dev.yaml#0 JobSet/train spec.replicatedJobs[0].template.spec.parallelizm")
    assert problem.value == 4
    assert "unknown field" in problem.message
    assert problem.fix.startswith("remove it or check its spelling")
    assert "'parallelism'" in problem.fix and "allowed:" in problem.fix


def test_unknown_field_in_a_job_pod_spec_is_an_error() -> None:
    obj = job()
    obj["spec"]["template"]["spec"]["hostnme"] = "worker"
    [problem] = validate_objects([obj])
    assert problem.where == "<memory>#0 Job/train-workers spec.template.spec.hostnme"
    assert "'hostname'" in problem.fix


def test_unknown_metadata_field_of_a_custom_object_is_an_error() -> None:
    obj = jobset()
    obj["metadata"]["lables"] = {"a": "b"}
    obj["metadata"]["annotations"] = {"n": 1}
    assert paths(validate_objects([obj])) == [
        "<memory>#0 JobSet/train metadata.annotations.n",
        "<memory>#0 JobSet/train metadata.lables",
    ]


def test_wrong_type_is_reported() -> None:
    obj = jobset()
    obj["spec"]["replicatedJobs"][0]["replicas"] = "two"
    [problem] = validate_objects([obj])
    assert problem.where == "<memory>#0 JobSet/train spec.replicatedJobs[0].replicas"
    assert problem.value == "two"
    assert "integer" in problem.message and "integer" in problem.fix


def test_missing_required_field_names_the_field() -> None:
    obj = job()
    del obj["spec"]["template"]["spec"]["containers"][0]["name"]
    problems = validate_objects([obj])
    assert [(p.where, p.message) for p in problems if p.where.endswith("containers[0].name")] == [
        ("<memory>#0 Job/train-workers spec.template.spec.containers[0].name", "Required value")
    ]


def test_every_problem_in_every_document_is_reported_in_a_stable_order() -> None:
    bad_job = job()
    bad_job["spec"]["parallelism"] = "four"
    bad_job["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "coord"
    bad_service = service()
    bad_service["spec"]["clusterIp"] = "None"
    objects = [bad_job, service_account(), bad_service]
    problems = validate_objects(objects)
    assert paths(problems) == [
        "<memory>#0 Job/train-workers spec.parallelism",
        "<memory>#0 Job/train-workers spec.template.spec.containers[0].ports[0].containerPort",
        "<memory>#2 Service/train spec.clusterIp",
    ]
    assert validate_objects(objects) == problems


def test_list_indices_sort_numerically() -> None:
    obj = job()
    containers = obj["spec"]["template"]["spec"]["containers"]
    containers.extend({"name": f"c{i}", "image": "i"} for i in range(11))
    containers[10]["imagee"] = "x"
    containers[2]["imagee"] = "x"
    assert [p.where.split(" ")[-1] for p in validate_objects([obj])] == [
        "spec.template.spec.containers[2].imagee",
        "spec.template.spec.containers[10].imagee",
    ]


def test_a_kind_of_an_unknown_group_is_stored_with_a_note() -> None:
    """As a cluster with that CRD installed would; jaxinfra cannot check it, and says so."""
    from jaxinfra.admission import Request, admit

    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    result = admit([Request("w.yaml", 0, obj)])
    assert result.problems == [] and [o["kind"] for _, o in result.stored] == ["Widget"]
    assert result.notes[0].startswith("Widget (example.com/v1) stored as is, not validated or emulated")


def test_a_kind_of_a_known_group_that_it_does_not_serve_names_what_is_supported() -> None:
    [problem] = validate_objects([{"apiVersion": "batch/v1", "kind": "Widget", "metadata": {"name": "w"}}])
    assert problem.where == "<memory>#0 Widget/w kind" and "no matches for kind 'Widget'" in problem.message
    assert problem.fix == (
        "jaxinfra validates built-in kinds and: JobSet, JAXJob, TrainJob, ClusterTrainingRuntime, "
        "TrainingRuntime, ClusterQueue, LocalQueue, ResourceFlavor, Topology, AdmissionCheck, "
        "ProvisioningRequestConfig, WorkloadPriorityClass, Cohort, MultiKueueConfig, MultiKueueCluster, Workload, "
        "Network, GKENetworkParamSet, PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob, LeaderWorkerSet, "
        "DisaggregatedSet, DisaggregatedSetRoleScaler, RayCluster, RayJob, RayService, RayCronJob"
    )


def test_a_schema_for_a_sub_object_is_not_a_kind() -> None:
    affinity = {"apiVersion": "v1", "kind": "Affinity", "metadata": {"name": "a"}}
    [problem] = validate_objects([affinity])
    assert problem.where.endswith(" kind")


def test_custom_kind_with_a_wrong_api_version_suggests_the_served_one() -> None:
    for api_version in ("jobset.x-k8s.io/v1alpha1", "jobset.k8s.io/v1alpha2"):
        obj = jobset() | {"apiVersion": api_version}
        [problem] = validate_objects([obj])
        assert problem.fix == "use apiVersion jobset.x-k8s.io/v1alpha2"


def test_missing_api_version_and_kind() -> None:
    problems = validate_objects([{"metadata": {"name": "x"}}])
    assert paths(problems) == ["<memory>#0 ?/x apiVersion", "<memory>#0 ?/x kind"]


def test_jobset_children_names_must_fit_in_63_characters() -> None:
    """JobSet's webhook: the Job and Pod names derived from the JobSet's must be DNS-1035 labels of at most 63
    characters (a custom object's own name may be a 253-character subdomain)."""
    assert validate_objects([jobset("a" * 40)]) == []
    problems = validate_objects([jobset("a" * 64)])
    assert [p.where for p in problems] == [f"<memory>#0 JobSet/{'a' * 64} spec.replicatedJobs[0].name"] * 2
    assert "job names generated for this JobSet will exceed 63 characters" in problems[0].message
    problems = validate_objects([jobset("a" * 55)])  # a valid label, but its Jobs' names (and so its Pods') are not
    assert [p.where for p in problems] == [f"<memory>#0 JobSet/{'a' * 55} spec.replicatedJobs[0].name"] * 2
    assert "job names generated" in problems[0].message
    [problem] = validate_objects([jobset("a" * 48)])  # Job names fit; Pod names (+"-3-abcde") don't
    assert "pod names generated" in problem.message
    problems = validate_objects([jobset("0train")])  # DNS-1035: children must start with a letter
    assert problems and all(
        p.where.endswith("spec.replicatedJobs[0].name") and "DNS-1035" in p.message for p in problems
    )


def test_custom_object_name_is_required_and_a_subdomain() -> None:
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {},
        "spec": {"clusterQueue": "cq"},
    }
    assert paths(validate_objects([queue])) == ["<memory>#0 LocalQueue/? metadata.name"]
    queue["metadata"]["name"] = "Team_A"
    assert paths(validate_objects([queue])) == ["<memory>#0 LocalQueue/Team_A metadata.name"]
    queue["metadata"]["name"] = "team-a.queue"
    assert validate_objects([queue]) == []


def test_non_mapping_object_is_a_problem() -> None:
    [problem] = validate_objects([["not", "an", "object"]])
    assert problem.where == "<memory>#0"


def test_long_values_are_truncated() -> None:
    obj = job()
    obj["spec"]["template"]["spec"]["containerz"] = [{"name": "x" * 500}]
    [problem] = validate_objects([obj])
    assert isinstance(problem.value, str) and len(problem.value) <= 80


# --- files --------------------------------------------------------------------------------------


def test_files_report_every_document_with_its_position(tmp_path: Path) -> None:
    bad = job()
    bad["spec"]["parallelism"] = "two"
    path = tmp_path / "dev.yaml"
    path.write_text(yaml.safe_dump_all([service_account(), None, bad, "just a string"]))
    problems = validate_files([path])
    assert paths(problems) == [f"{path}#2 Job/train-workers spec.parallelism", f"{path}#3"]


def test_invalid_yaml_is_a_problem_naming_the_file(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(service()))
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: [oops\n")
    problems = validate_files([good, broken, tmp_path / "missing.yaml"])
    assert paths(problems) == [str(broken), str(tmp_path / "missing.yaml")]
    assert "line" in problems[0].message


# --- machinery ----------------------------------------------------------------------------------


def test_crd_index_matches_the_bundled_files() -> None:
    """Every bundled file is indexed once, under the group and kind it declares; each other operator's file serves
    exactly the versions `operators.KINDS` says (they pick the operator a simulation names), and MPIJob's two files
    serve one version each, the Training Operator's v1 and the MPI Operator's v2beta1."""
    bundled = {f.name for f in files("jaxinfra.schemas").iterdir() if f.name.endswith(".yaml")}
    indexed = [name for names in front_door_schema._CRD_FILES.values() for name in names]
    assert sorted(indexed) == sorted(bundled)
    served: dict[str, tuple[str, ...]] = {}
    for (group, kind), names in front_door_schema._CRD_FILES.items():
        for name in names:
            [crd] = load((files("jaxinfra.schemas") / name).read_text(encoding="utf-8"))  # libyaml: the files are large
            assert (crd["spec"]["group"], crd["spec"]["names"]["kind"]) == (group, kind)
            served[name] = tuple(v["name"] for v in crd["spec"]["versions"] if v.get("served"))
    for other in operators.KINDS:
        assert served[other.file] == other.versions, other.file
    assert front_door_schema._CRD_FILES["kubeflow.org", "MPIJob"] == (
        "kubeflow.org_mpijobs.yaml",
        "kubeflow.org_mpijobs_v2beta1.yaml",
    )
    assert (
        operators.serving("kubeflow.org/v1", "MPIJob").operator,
        operators.serving("kubeflow.org/v2beta1", "MPIJob").operator,
    ) == (operators.TRAINING_OPERATOR, operators.MPI_OPERATOR)


def test_strict_transform() -> None:
    schema = {
        "type": "object",
        "properties": {
            "open": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"a": {"type": "string"}},
            },
            "empty": {"type": "object"},
            "map": {"type": "object", "additionalProperties": {"properties": {"b": {}}}},
            "port": {"x-kubernetes-int-or-string": True},
        },
    }
    strict = front_door_schema._strict(schema)
    assert strict["additionalProperties"] is False
    assert "additionalProperties" not in strict["properties"]["open"]
    assert strict["properties"]["empty"]["additionalProperties"] is False
    assert strict["properties"]["map"]["additionalProperties"]["additionalProperties"] is False
    assert strict["properties"]["port"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert "additionalProperties" not in schema  # the cached CRD is not modified


@pytest.mark.simulator
def test_import_is_cheap() -> None:
    heavy = "{'jsonschema', 'kubernetes_validate', 'yaml'}"
    code = f"import sys, jaxinfra.validate; print(sorted({heavy} & set(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    out = run.stdout
    assert out.strip() == "[]"


def test_missing_optional_dependencies_raise_a_manifest_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # makes `import jsonschema` fail
    with pytest.raises(ManifestError) as raised:
        validate_objects([service()])
    [problem] = raised.value.problems
    assert problem.fix == "pip install 'jaxinfra[validate]'"


def jobset_container(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
