"""The API server's front door (`jaxinfra.admission`), end to end: what `jaxinfra validate` and `jaxinfra simulate`
say about manifests a cluster accepts and manifests it refuses, and that they say the same.

Manifests are written here in the style of upstream examples, not copied: xpk's rendered JobSets (failure-policy
rules without names, templated `null`s), JobSet's and the Kubernetes docs' Jobs (no completions, no parallelism),
xpk's ProvisioningRequestConfig (a kind no bundled CRD defines), a namespace enforcing Pod Security `restricted`, a
pod naming a PriorityClass, and the wrong-type manifests a template bug produces.
"""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxinfra.admission import Request, admit
from jaxinfra.errors import Refused
from jaxinfra.invocation import sources as _sources
from jaxinfra.validate import validate_files
from jaxinfra_sim.cluster import engine, sources
from jaxinfra_sim.core.results import Report
from tests.support.cli import simulate_cli
from tests.support.paths import ROOT

pytestmark = pytest.mark.simulator

PROBE = ["python3", "-c", "print('step ok')"]


def write(path: Path, docs: list[Any] | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(docs if isinstance(docs, str) else yaml.safe_dump_all(docs, sort_keys=False))
    return path


def plan(*paths: Path) -> Report:
    """What `jaxinfra simulate --run-command PATHS` finds before anything runs."""
    return engine._plan(_sources(list(paths), None), check_all=False)


def validate_cli(*paths: Path) -> tuple[int, str]:
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "validate", *map(str, paths)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    return r.returncode, r.stderr


def xpk_jobset(name: str = "xpk-train") -> dict[str, Any]:
    """A JobSet as xpk renders one for a CPU workload: unnamed failure-policy rules, the templated nulls."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "annotations": None, "labels": {"xpk.google.com/workload": name}},
        "spec": {
            "ttlSecondsAfterFinished": 43200,
            "failurePolicy": {
                "maxRestarts": 0,
                "rules": [{"action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}],
            },
            "replicatedJobs": [
                {
                    "name": "slice-job",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "backoffLimit": 0,
                            "podFailurePolicy": {
                                "rules": [
                                    {
                                        "action": "FailJob",
                                        "onExitCodes": {
                                            "containerName": "jax-cpu",
                                            "operator": "NotIn",
                                            "values": [42],
                                        },
                                    }
                                ]
                            },
                            "template": {
                                "metadata": {"annotations": None},
                                "spec": {
                                    "nodeSelector": None,
                                    "restartPolicy": "Never",
                                    "terminationGracePeriodSeconds": 30,
                                    "containers": [
                                        {
                                            "name": "jax-cpu",
                                            "image": "python:3.11",
                                            "env": None,
                                            "command": PROBE,
                                            "resources": {"limits": {"cpu": "500m"}},
                                        }
                                    ],
                                },
                            },
                        }
                    },
                }
            ],
        },
    }


def docs_job(name: str = "pi", **spec: Any) -> dict[str, Any]:
    """A Job as the Kubernetes docs write one: no completions, no parallelism, restartPolicy Never."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            **spec,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "pi", "image": "python:3.11", "command": PROBE}],
                }
            },
        },
    }


# --- a cluster accepts these ----------------------------------------------------------------------------------------


def test_an_xpk_jobset_with_unnamed_rules_and_nulls_validates_and_simulates(tmp_path: Path) -> None:
    path = write(tmp_path / "xpk.yaml", [xpk_jobset()])
    assert validate_files([path]) == []
    status, report, out = simulate_cli(str(path), "--run-command", tmp=tmp_path)
    assert status == 0, out
    [workload] = report["workloads"]
    assert workload["verdict"] == "succeeded" and workload["pods"] == 2


def test_what_is_stored_is_defaulted_and_mutated_as_the_api_server_does() -> None:
    result = admit([Request("xpk.yaml", 0, xpk_jobset()), Request("pi.yaml", 0, docs_job())])
    assert result.problems == []
    (_, jobset), (_, job) = result.stored
    assert "annotations" not in jobset["metadata"]  # a non-nullable null, pruned
    assert jobset["spec"]["failurePolicy"]["rules"][0]["name"] == "failurePolicyRule0"  # JobSet's webhook names rules
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 1  # SetDefaults_Job
    assert job["spec"]["backoffLimit"] == 6 and job["spec"]["completionMode"] == "NonIndexed"
    assert job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 30  # SetDefaults_PodSpec


def test_generate_name_gets_a_name_of_the_api_servers_alphabet() -> None:
    job = docs_job()
    del job["metadata"]["name"]
    job["metadata"]["generateName"] = "pi-"
    [(_, stored)] = admit([Request("pi.yaml", 0, job)]).stored
    name = stored["metadata"]["name"]
    assert name.startswith("pi-") and len(name) == 8 and set(name[3:]) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_an_unknown_kind_is_stored_with_a_note_and_the_workload_still_runs(tmp_path: Path) -> None:
    provisioning = {  # the cluster autoscaler's own kind (GKE serves it): no CRD of it is bundled here
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": "xpk-flex", "namespace": "default"},
        "spec": {"provisioningClassName": "queued-provisioning.gke.io", "podSets": []},
    }
    path = write(tmp_path / "xpk.yaml", [provisioning, xpk_jobset()])
    assert validate_files([path]) == []
    report = plan(path)
    assert report.problems == () and all(not r.workload.problems for r in report.results)
    assert any("ProvisioningRequest (autoscaling.x-k8s.io/v1beta1) stored as is" in n for n in report.notes)
    assert any("the cluster must run jobset" in n for n in report.notes)


def test_a_crd_among_the_inputs_validates_its_objects(tmp_path: Path) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "properties": {"size": {"type": "integer", "default": 3}}}
                            },
                        }
                    },
                }
            ],
        },
    }
    good = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}
    bad = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "v"}, "spec": {"size": "big"}}
    result = admit([Request("w.yaml", i, o) for i, o in enumerate([crd, good, bad])])
    assert [obj["spec"] for _, obj in result.stored[1:]] == [{"size": 3}]  # the CRD's default, applied
    [problem] = result.problems
    assert "w.yaml#2 Widget/v spec.size" in problem.where and "'big' is not of type 'integer'" in problem.message


# --- a cluster refuses these ----------------------------------------------------------------------------------------

WRONG_TYPES = {
    "containers-string": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": "oops"}}}},
    "env-strings": {
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i", "env": ["A=1"]}]}
            }
        }
    },
    "backoff-word": {"spec": {"backoffLimit": "six"}},
    "metadata-string": {"metadata": "x"},
    "spec-list": {"spec": [1, 2]},
    "name-number": {"metadata": {"name": 7}},
    "completions-string": {"spec": {"completions": "2"}},
    "completions-float": {"spec": {"completions": 2.5}},
    "completions-bool": {"spec": {"completions": True}},
    "completions-negative": {"spec": {"completions": -3}},
    "metadata-null": {"metadata": None},
    "containers-empty": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": []}}}},
    "name-uppercase": {"metadata": {"name": "Train"}},
    "name-long": {"metadata": {"name": "a" * 300}},
    "name-slash": {"metadata": {"name": "a/b"}},
    "restart-always": {
        "spec": {"template": {"spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "i"}]}}}
    },
    "indexed-huge": {"spec": {"completionMode": "Indexed", "completions": 1000000, "parallelism": 1000000}},
    "cpu-1K": {
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1K"}}}],
                }
            }
        }
    },
}


def _merge(base: Any, change: Any) -> Any:
    if isinstance(base, dict) and isinstance(change, dict):
        return {**base, **{k: _merge(base.get(k), v) for k, v in change.items()}}
    return change


@pytest.mark.parametrize("case", sorted(WRONG_TYPES))
def test_what_the_api_server_refuses_is_refused_before_anything_starts(case: str, tmp_path: Path) -> None:
    path = write(tmp_path / f"{case}.yaml", [_merge(docs_job(), WRONG_TYPES[case])])
    problems = validate_files([path])
    assert problems and all(isinstance(p, Refused) and "\n" not in str(p) for p in problems), problems
    assert [str(p) for p in plan(path).refused] == [str(p) for p in problems]  # one admission path: the same lines


def test_every_problem_at_once_and_exit_2_from_both_commands(tmp_path: Path) -> None:
    cases = ["containers-string", "backoff-word", "name-uppercase", "cpu-1K"]
    paths = [
        write(tmp_path / "in" / f"{c}.yaml", [_merge(docs_job(c.replace("-", "").lower()), WRONG_TYPES[c])])
        for c in cases
    ]
    status, err = validate_cli(tmp_path / "in")
    assert status == 2
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) >= len(cases) and all(any(p.name in e for e in errors) for p in paths)
    status, report, out = simulate_cli(str(tmp_path / "in"), "--run-command", tmp=tmp_path)
    assert status == 2 and report["ok"] is False and report["workloads"] == [], out
    assert sorted(line for line in out.splitlines() if line.startswith("error: ")) == sorted(errors)


def test_a_kind_a_known_group_does_not_serve_is_refused() -> None:
    typo = {**xpk_jobset(), "kind": "Jobset"}
    [problem] = admit([Request("js.yaml", 0, typo)]).problems
    assert "no matches for kind 'Jobset'" in problem.message


def test_a_job_whose_pods_violate_the_namespaces_pod_security_is_stored_with_a_warning_and_its_pods_refused(
    tmp_path: Path,
) -> None:
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "secure", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}},
    }
    job = _merge(
        docs_job(completionMode="Indexed", completions=2, parallelism=2), {"metadata": {"namespace": "secure"}}
    )
    setup, workload = write(tmp_path / "ns.yaml", [namespace]), write(tmp_path / "job.yaml", [job])
    status, err = validate_cli(setup, workload)
    assert status == 0 and 'would violate PodSecurity "restricted:latest"' in err
    [result] = plan(setup, workload).results
    [problem] = result.workload.problems
    assert "refuses to create the pods" in problem.message and "allowPrivilegeEscalation != false" in problem.message


def test_a_priority_class_no_cluster_has_refuses_the_pods_and_one_among_the_inputs_admits_them(tmp_path: Path) -> None:
    job = _merge(
        docs_job(completionMode="Indexed", completions=1),
        {"spec": {"template": {"spec": {"priorityClassName": "high"}}}},
    )
    workload = write(tmp_path / "job.yaml", [job])
    [result] = plan(workload).results
    assert any("no PriorityClass with name high was found" in p.message for p in result.workload.problems)
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000}
    [result] = plan(write(tmp_path / "priority.yaml", [high]), workload).results
    assert result.workload.problems == ()


# --- hostile input: never a traceback, bounded memory ---------------------------------------------------------------

MUTATIONS = st.sampled_from(["null", "delete", "string", "list", "huge", "negative", "path", "bool", "float", "object"])
VALUES = {
    "null": None,
    "string": "x/../../etc",
    "list": [1, "a"],
    "huge": 10**30,
    "negative": -(2**63),
    "path": "/etc/passwd",
    "bool": True,
    "float": 1e308,
    "object": {"a": {"b": None}},
}


def _paths(node: Any, at: tuple = ()) -> list[tuple]:
    out = [at]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*at, i))
    return out


def _mutate(obj: Any, at: tuple, how: str) -> Any:
    if not at:
        return None if how == "delete" else VALUES.get(how)
    head, rest = at[0], at[1:]
    copy = dict(obj) if isinstance(obj, dict) else list(obj)
    if not rest and how == "delete":
        del copy[head]
    else:
        copy[head] = _mutate(copy[head], rest, how)
    return copy


BASES = [xpk_jobset(), docs_job(completionMode="Indexed", completions=2, parallelism=2)]


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.sampled_from(range(len(BASES))), st.lists(st.tuples(st.integers(0, 10**6), MUTATIONS), min_size=1, max_size=4)
)
def test_mutated_manifests_give_a_verdict_one_line_per_problem_never_a_traceback(base: int, changes: list) -> None:
    obj: Any = BASES[base]
    for pick, how in changes:
        paths = _paths(obj)
        obj = _mutate(obj, paths[pick % len(paths)], how)
    tracemalloc.start()
    try:
        result = admit([Request("m.yaml", 0, obj)])
        report = engine._plan([sources.admitted("m.yaml", [Request("m.yaml", 0, obj)])], check_all=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert all("\n" not in str(p) for p in [*result.problems, *report.problems])
    assert [str(p) for p in report.refused] == [str(p) for p in result.problems]
    assert peak < 200 * 2**20
