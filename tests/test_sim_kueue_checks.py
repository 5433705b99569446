"""Kueue's admission checks, as far as the simulator plays them (issue #42's first steps): the objects of Kueue's whole
API validate against its published CRDs (AdmissionCheck, ProvisioningRequestConfig, ...); a ClusterQueue naming an
AdmissionCheck that does not exist is inactive, as Kueue makes it (pkg/cache/clusterqueue.go: AdmissionCheckNotFound),
so a workload queued to it never runs; one whose checks exist runs, with a note that on a cluster it waits for each
check first. Manifests in the style of GKE's DWS (queued provisioning) guide, written here."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxinfra_sim.emulation import emulate
from tests.support.problems import problems_of
from tests.test_sim_fidelity import queued

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


def test_a_workload_whose_checks_exist_runs_with_a_note_that_it_waits_for_them_on_a_cluster() -> None:
    [workload] = emulate(_checked(queued(), with_checks=True), check_all=False).workloads
    assert workload.problems == ()
    [note] = workload.notes
    assert note.startswith("admitted by Kueue to ClusterQueue cluster-queue") and (
        "AdmissionCheck(s) dws-prov are not played here: on a cluster the workload waits until each is Ready" in note
    ), note
