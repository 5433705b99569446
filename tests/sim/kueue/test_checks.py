"""Kueue's admission checks, as far as the simulator plays them (issue #42's first steps): the objects of Kueue's whole
API validate against its published CRDs (AdmissionCheck, ProvisioningRequestConfig, ...); a ClusterQueue naming an
AdmissionCheck that does not exist is inactive, as Kueue makes it (pkg/cache/clusterqueue.go: AdmissionCheckNotFound),
so a workload queued to it never runs, as when a ProvisioningRequest check names no ProvisioningRequestConfig; a
ProvisioningRequest check holds the workload, its quota reserved, until it is Ready: at once, after the delay
`--provision CHECK@SECONDS` rehearses, or never (`CHECK@never`: the workload stays pending). Manifests in the style of
GKE's DWS (queued provisioning) guide, written here."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.kueue.scheduler import provisioned
from tests.sim.cluster.test_fidelity import queued
from tests.support.paths import ROOT
from tests.support.problems import problems_of

pytestmark = pytest.mark.simulator

DWS = yaml.safe_load_all("""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ProvisioningRequestConfig
metadata: {name: dws-config}
spec:
  provisioningClassName: queued-provisioning.gke.io
  managedResources: [nvidia.com/gpu]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: dws-prov}
spec:
  controllerName: kueue.x-k8s.io/provisioning-request
  parameters:
    apiGroup: kueue.x-k8s.io
    kind: ProvisioningRequestConfig
    name: dws-config
""")
CHECKS = list(DWS)


def _checked(docs: list[dict[str, Any]], with_checks: bool) -> list[dict[str, Any]]:
    docs = copy.deepcopy(docs)
    [cq] = [d for d in docs if d["kind"] == "ClusterQueue"]
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "dws-prov"}]}  # v1beta2's only form
    return (CHECKS if with_checks else []) + docs


def test_kueues_admission_objects_validate_against_its_crds(tmp_path: Path) -> None:
    from tests.test_front_door import validate_cli

    path = tmp_path / "dws.yaml"
    path.write_text(yaml.safe_dump_all(_checked(queued(), with_checks=True), sort_keys=False))
    rc, out = validate_cli(str(path))
    assert rc == 0, out
    broken = copy.deepcopy(CHECKS)
    broken[0]["spec"]["provisioningClass"] = broken[0]["spec"].pop("provisioningClassName")  # a misspelt field
    path.write_text(yaml.safe_dump_all(broken, sort_keys=False))
    rc, out = validate_cli(str(path))
    assert rc == 2 and "provisioningClass" in out, out


def test_a_cluster_queue_naming_a_missing_admission_check_is_inactive_and_the_workload_never_runs() -> None:
    [problem] = problems_of(emulate(_checked(queued(), with_checks=False), check_all=False))
    assert problem.message == (
        "would stay suspended: ClusterQueue cluster-queue is inactive (AdmissionCheckNotFound): Can't admit new "
        "workloads: references missing AdmissionCheck(s): dws-prov."
    ), problem
    assert "add the AdmissionCheck dws-prov" in problem.fix


def test_a_workload_whose_provisioning_check_exists_has_its_quota_reserved_until_the_check_is_ready() -> None:
    [workload] = emulate(_checked(queued(), with_checks=True), check_all=False).workloads
    assert workload.problems == () and workload.provisioning == ("dws-prov",)
    [note] = workload.notes
    assert note.startswith("Kueue reserves its quota in ClusterQueue cluster-queue") and note.endswith(
        "admits it once its ProvisioningRequest AdmissionCheck(s) dws-prov are Ready"
    ), note


def test_a_provisioning_check_without_its_config_is_inactive_and_so_is_its_cluster_queue() -> None:
    docs = [d for d in _checked(queued(), with_checks=True) if d["kind"] != "ProvisioningRequestConfig"]
    [problem] = problems_of(emulate(docs, check_all=False))
    assert problem.message == (
        "would stay suspended: ClusterQueue cluster-queue is inactive (AdmissionCheckInactive): Can't admit new "
        "workloads: references inactive AdmissionCheck(s): dws-prov (dws-prov: BadParametersRef: "
        'provisioningrequestconfigs.kueue.x-k8s.io "dws-config" not found).'
    ), problem
    assert problem.fix.startswith("add the ProvisioningRequestConfig dws-config to the manifests"), problem.fix
    wrong = copy.deepcopy(_checked(queued(), with_checks=True))
    [check] = [d for d in wrong if d["kind"] == "AdmissionCheck"]
    check["spec"]["parameters"]["kind"] = "ConfigMap"
    [problem] = problems_of(emulate(wrong, check_all=False))
    assert "(dws-prov: BadParametersRef: bad parameters reference)." in problem.message, problem
    assert "kind: ProvisioningRequestConfig" in problem.fix, problem.fix
    other = copy.deepcopy(_checked(queued(), with_checks=True))  # another controller's check is not Kueue's to judge
    [check] = [d for d in other if d["kind"] == "AdmissionCheck"]
    check["spec"] = {"controllerName": "example.com/approval"}
    [workload] = emulate(other, check_all=False).workloads
    assert workload.problems == () and workload.provisioning == ()
    assert "AdmissionCheck(s) dws-prov are not played here" in workload.notes[0]


def test_provisioning_is_ready_at_once_after_a_rehearsed_delay_or_never() -> None:
    assert provisioned("JobSet/default/w", (), {}) is None
    at_once = provisioned("JobSet/default/w", ("dws-prov",), {})
    assert (at_once.seconds, at_once.pending) == (0.0, None)
    assert "dws-prov at once, as no --provision names it" in at_once.note
    late = provisioned("JobSet/default/w", ("dws-prov", "other"), {"dws-prov": 600.0})
    assert (late.seconds, late.pending) == (600.0, None)
    assert late.note.startswith("JobSet/default/w held by Kueue 600 s (simulated, not waited)"), late.note
    never = provisioned("JobSet/default/w", ("dws-prov",), {"dws-prov": None})
    assert never.pending == "dws-prov" and "stays Pending" in never.note


def test_a_rehearsed_provisioning_holds_the_workload_then_it_runs_and_capacity_that_never_comes_leaves_it_pending(
    tmp_path: Path,
) -> None:
    """On the flex-start stack: its pool's AdmissionCheck is Ready after a rehearsed delay (the job then runs and
    passes), never (the job pends: not finished, never started), and a --provision that names no check is refused."""
    from tests.support.cli import simulate_cli

    stack, check = str(ROOT / "stacks" / "gpu_h100_flex_2x8.py"), "gpu-h100-flex-h100-flex-start"
    rc, report, out = simulate_cli(stack, "--provision", f"{check}@never", tmp=tmp_path)
    [w] = report["workloads"]
    assert (rc, w["verdict"], w["attempts"], w["held"]["pending"]) == (1, "not finished", [], check), out
    assert w["reason"].startswith(f"held by Kueue: AdmissionCheck {check} stays Pending"), w["reason"]
    page = tmp_path / "report.html"
    rc, report, out = simulate_cli(stack, "--provision", f"{check}@900", "--html", str(page), tmp=tmp_path)
    [w] = report["workloads"]
    assert (rc, w["verdict"], w["held"]["seconds"]) == (0, "succeeded", 900.0), out
    assert "held: JobSet/default/train held by Kueue 900 s (simulated, not waited)" in out, out
    assert "held: JobSet/default/train held by Kueue 900 s" in page.read_text(), "the HTML report says it too"
    rc, report, out = simulate_cli(stack, "--provision", "x@soon", "--provision", "@3", tmp=tmp_path)
    assert rc == 2 and out.count("expected CHECK@SECONDS or CHECK@never") == 2, out
    rc, report, out = simulate_cli(stack, "--provision", "flex@9", tmp=tmp_path)
    assert rc == 1 and "--provision = 'flex': no workload here waits" in out and f"use one of {check}" in out, out


def test_a_workload_naming_a_missing_workload_priority_class_gets_no_workload_and_never_runs() -> None:
    docs = queued()
    docs[-1]["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "urgent"
    [problem] = problems_of(emulate(docs, check_all=False))
    assert problem.message == (
        "would stay suspended: WorkloadPriorityClass urgent (its kueue.x-k8s.io/priority-class label) does not exist, "
        "so Kueue creates no Workload for it"
    ), problem
    assert problem.fix.startswith("add the WorkloadPriorityClass urgent")
    priority = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "urgent"},
        "value": 1000,
    }
    [workload] = emulate([priority, *docs], check_all=False).workloads
    assert workload.problems == ()


def test_a_topology_request_is_checked_against_the_flavors_topology_and_noted_as_not_played() -> None:
    """Kueue passes over a flavor without a Topology, or whose Topology lacks the requested level (kueue
    tas_flavorassigner.go checkPodSetAndFlavorMatchForTAS): the workload never runs; where the flavor has it, the
    workload runs, with a note that the placement itself is not played."""
    docs = queued()
    template = docs[-1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    template.setdefault("metadata", {}).setdefault("annotations", {})["kueue.x-k8s.io/podset-required-topology"] = (
        "cloud.google.com/gce-topology-block"
    )
    [problem] = problems_of(emulate(docs, check_all=False))
    assert 'Flavor "default-flavor" does not support TopologyAwareScheduling' in problem.message, problem
    assert problem.fix.startswith("name a Topology with level cloud.google.com/gce-topology-block"), problem.fix
    [flavor] = [d for d in docs if d["kind"] == "ResourceFlavor"]
    flavor.setdefault("spec", {})["topologyName"] = "gke"
    [problem] = problems_of(emulate(docs, check_all=False))  # kueue v0.19.2 clusterqueue.go inactiveReason
    assert problem.message == (
        "would stay suspended: ClusterQueue cluster-queue is inactive (TopologyNotFound): Can't admit new workloads: "
        'there is no Topology "gke" for TAS flavor "default-flavor".'
    ), problem
    assert problem.fix == (
        "add the Topology gke to the manifests, or take topologyName out of ResourceFlavor default-flavor"
    ), problem.fix
    topology = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": "gke"},
        "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]},
    }
    [problem] = problems_of(emulate([topology, *docs], check_all=False))
    assert "does not contain the requested level (cloud.google.com/gce-topology-block)" in problem.message, problem
    topology["spec"]["levels"].insert(0, {"nodeLabel": "cloud.google.com/gce-topology-block"})
    [workload] = emulate([topology, *docs], check_all=False).workloads
    assert workload.problems == ()
    assert any(
        n.startswith(
            "its pods' topology request kueue.x-k8s.io/podset-required-topology: "
            "cloud.google.com/gce-topology-block is not played here"
        )
        and "only once one such domain has room for all its pods" in n
        for n in workload.notes
    ), workload.notes


def _flex_stack() -> list[dict[str, Any]]:
    """The flex-start stack's JobSet output as `jaxinfra synth` writes it (not its shadow): its pool's flavor names the
    Topology it renders, its pods prefer one GKE block."""
    from tests.support.stacks import rendered

    return copy.deepcopy(rendered(ROOT / "stacks" / "gpu_h100_flex_2x8.py", "jobset"))


def test_the_flex_stacks_topology_request_is_satisfied_by_its_pools_flavor() -> None:
    [workload] = emulate(_flex_stack(), check_all=False).workloads
    assert workload.problems == () and workload.provisioning == ("gpu-h100-flex-h100-flex-start",), workload.problems
    assert any(
        n.startswith(
            "its pods' topology request kueue.x-k8s.io/podset-preferred-topology: cloud.google.com/gce-topology-block "
            "is not played here"
        )
        for n in workload.notes
    ), workload.notes


def test_a_topology_the_pools_cannot_satisfy_leaves_the_flex_stacks_workload_pending() -> None:
    """As Kueue v0.19.2 decides: without the flavor's Topology its ClusterQueue is inactive (pkg/cache/scheduler/
    clusterqueue.go inactiveReason, TopologyNotFound); with a Topology that lacks the requested level the flavor is
    passed over (pkg/scheduler/flavorassigner/tas_flavorassigner.go checkPodSetAndFlavorMatchForTAS: "does not contain
    the requested level"), and no other flavor can take the pods."""
    docs = [d for d in _flex_stack() if d["kind"] != "Topology"]
    [problem] = problems_of(emulate(docs, check_all=False))
    assert problem.message == (
        "would stay suspended: ClusterQueue gpu-h100-flex-h100 is inactive (TopologyNotFound): Can't admit new "
        'workloads: there is no Topology "gpu-h100-flex-gke-topology" for TAS flavor "gpu-h100-flex-h100".'
    ), problem
    docs = _flex_stack()
    [topology] = [d for d in docs if d["kind"] == "Topology"]
    topology["spec"]["levels"] = [{"nodeLabel": "kubernetes.io/hostname"}]  # a Topology of nodes only: no blocks
    [problem] = problems_of(emulate(docs, check_all=False))
    assert (
        'Flavor "gpu-h100-flex-h100" does not contain the requested level (cloud.google.com/gce-topology-block)'
        in problem.message
    ), problem
    assert problem.fix.startswith("name a Topology with level cloud.google.com/gce-topology-block"), problem.fix


def test_a_tas_flavor_takes_no_workload_without_a_topology_request_beside_other_flavors() -> None:
    """Kueue implies TAS in a ClusterQueue of TAS flavors only; beside a flavor without a Topology, a TAS flavor
    "supports only TopologyAwareScheduling" and a workload without a request goes to the other flavor, or pends."""
    docs = queued()
    [flavor] = [d for d in docs if d["kind"] == "ResourceFlavor"]
    flavor.setdefault("spec", {})["topologyName"] = "gke"
    topology = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": "gke"},
        "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]},
    }
    [workload] = emulate([topology, *docs], check_all=False).workloads  # TAS-only: implied
    assert workload.problems == ()
    [cq] = [d for d in docs if d["kind"] == "ClusterQueue"]
    group = cq["spec"]["resourceGroups"][0]
    group["flavors"].insert(0, {**copy.deepcopy(group["flavors"][0]), "name": "plain-flavor"})
    group["flavors"][0]["resources"] = [{"name": "cpu", "nominalQuota": 0}, {"name": "memory", "nominalQuota": 0}]
    plain = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "plain-flavor"}}
    [problem] = problems_of(emulate([topology, plain, *docs], check_all=False))
    assert 'Flavor "default-flavor" supports only TopologyAwareScheduling' in problem.message, problem


def test_an_inactive_cluster_queue_names_every_reason_as_kueue_joins_them() -> None:
    """kueue v0.19.2 clusterqueue.go inactiveReason: the first reason is the condition's, the messages of all are
    joined in its order (stopped, missing flavors, missing checks, ...), and each fix is given; a stopPolicy of None
    keeps it active."""
    docs = _checked(queued(), with_checks=False)
    [cq] = [d for d in docs if d["kind"] == "ClusterQueue"]
    cq["spec"]["stopPolicy"] = "Hold"
    cq["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "gone-flavor"
    [problem] = problems_of(emulate(docs, check_all=False))
    assert problem.message == (
        "would stay suspended: ClusterQueue cluster-queue is inactive (Stopped): Can't admit new workloads: is "
        "stopped, references missing ResourceFlavor(s): gone-flavor, references missing AdmissionCheck(s): dws-prov."
    ), problem
    assert problem.fix.startswith(
        "set ClusterQueue cluster-queue's stopPolicy to None; add the ResourceFlavor gone-flavor to the manifests; "
        "add the AdmissionCheck dws-prov"
    ), problem.fix
    docs = _checked(queued(), with_checks=True)
    [cq] = [d for d in docs if d["kind"] == "ClusterQueue"]
    cq["spec"]["stopPolicy"] = "None"
    [workload] = emulate(docs, check_all=False).workloads
    assert workload.problems == ()
