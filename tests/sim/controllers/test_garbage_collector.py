"""ownerReferences to owners the cluster does not hold, as kube-controller-manager's garbage collector treats them
(kubernetes pkg/controller/garbagecollector/garbagecollector.go attemptToDeleteItem, isDangling): an object whose
references are all dangling (no such owner, or one with another uid) is deleted, and a reference the collector
cannot resolve (a kind the cluster does not serve, a namespaced owner of a cluster-scoped object) leaves the object
as it is. A manifest cannot know the uid the API server gives an object when it creates it, so an applied object's
ownerReferences always dangle: `jaxinfra validate` notes what the collector will do, and `jaxinfra simulate` does it
(the object is gone before the controllers act; a workload so deleted never runs, an input problem)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jaxinfra.admission import Request, admit
from jaxinfra.admission.owners import orphans
from jaxinfra.admission.store import Store
from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.controllers import drafts
from jaxinfra_sim.core.inputs import Objects
from tests.support.admitted import stored
from tests.support.jobsets import indexed_job

pytestmark = pytest.mark.unit

UID = "3f6a1c52-7b8e-4e0f-9a51-2c1d0e9b7a64"  # as `kubectl get -o yaml` shows one (another cluster's)


def owned(obj: dict[str, Any], api_version: str, kind: str, name: str, uid: str = UID) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}]
    return out


CONFIG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "train-config"}, "data": {"STEPS": "10"}}
POD = {
    "restartPolicy": "Never",
    "containers": [
        {
            "name": "train",
            "image": "python:3.11",
            "command": ["python3", "-c", "print('ok')"],
            "env": [{"name": "STEPS", "valueFrom": {"configMapKeyRef": {"name": "train-config", "key": "STEPS"}}}],
        }
    ],
}
JOB = indexed_job("train", POD, 2)


def verdicts(*docs: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    """Each orphan among `docs` (as stored): whether the collector deletes it, and why."""
    return {o.name: (o.deleted, "; ".join(o.why)) for o in orphans(Store(stored(list(docs))))}


def test_an_owner_no_input_creates_is_absent_and_the_dependent_deleted() -> None:
    found = verdicts(owned(CONFIG, "apps/v1", "Deployment", "web"), JOB)
    assert list(found) == ["ConfigMap/default/train-config"]
    deleted, why = found["ConfigMap/default/train-config"]
    assert deleted and f"Deployment default/web (apps/v1, uid {UID}): the cluster has no such object" in why


def test_an_owner_among_the_inputs_has_another_uid_than_any_manifest_can_name() -> None:
    deleted, why = verdicts(CONFIG, owned(JOB, "v1", "ConfigMap", "train-config"))["Job/default/train"]
    assert deleted and "the inputs create one, with a uid the API server gives it, not this one" in why


def test_a_reference_the_collector_cannot_resolve_leaves_the_object() -> None:
    unserved = owned(CONFIG, "example.com/v1", "Widget", "w")
    cluster_scoped = owned(
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 10},
        "v1",
        "ConfigMap",
        "train-config",
    )
    both = copy.deepcopy(unserved)  # one reference unresolvable, one dangling: the attempt fails, nothing deleted
    both["metadata"]["name"] = "both"
    both["metadata"]["ownerReferences"].append({"apiVersion": "v1", "kind": "Secret", "name": "gone", "uid": UID})
    found = verdicts(unserved, cluster_scoped, both)
    assert found["ConfigMap/default/train-config"] == (
        False,
        f"ownerReferences[0] names Widget default/w (example.com/v1, uid {UID}), a kind the cluster does not serve, "
        "so it cannot be resolved",
    )
    assert not found["PriorityClass/high"][0] and "OwnerRefInvalidNamespace" in found["PriorityClass/high"][1]
    assert not found["ConfigMap/default/both"][0]


def test_validate_notes_what_the_collector_does() -> None:
    out = admit([Request("in.yaml", i, d) for i, d in enumerate([owned(CONFIG, "apps/v1", "Deployment", "web"), JOB])])
    assert out.problems == [] and len(out.stored) == 2  # the API server stores both
    [note] = [n for n in out.notes if "garbage collector" in n]
    assert note.startswith("ConfigMap/default/train-config: the garbage collector deletes it once it is stored")
    assert "Deployment default/web" in note and "leave metadata.ownerReferences out" in note


def test_a_workload_the_collector_deletes_never_runs() -> None:
    cluster = emulate(stored([CONFIG, owned(JOB, "jobset.x-k8s.io/v1alpha2", "JobSet", "train")]))
    assert cluster.workloads == ()
    [problem] = cluster.problems
    assert problem.path == "Job/default/train metadata.ownerReferences" and problem.value == [UID]
    assert "deletes the workload" in problem.message and "never runs" in problem.message


def test_the_pods_no_longer_find_an_object_the_collector_deleted() -> None:
    manifests = stored([owned(CONFIG, "apps/v1", "Deployment", "web"), JOB])
    [workload] = emulate(manifests).workloads
    assert any("ConfigMap 'train-config'" in p.message for p in workload.problems), workload.problems
    objects = Objects(store=Store(manifests))
    drafts(manifests, objects)
    assert objects.store.get("ConfigMap", "default", "train-config") is None and objects.config_maps == {}


def test_objects_without_dangling_owners_are_untouched() -> None:
    left = emulate(stored([owned(CONFIG, "example.com/v1", "Widget", "w"), JOB]))  # the collector leaves it
    plain = emulate(stored([CONFIG, JOB]))
    assert left.problems == plain.problems == ()
    assert [w.problems for w in left.workloads] == [w.problems for w in plain.workloads]
    assert not any("train-config" in p.message for w in left.workloads for p in w.problems)
