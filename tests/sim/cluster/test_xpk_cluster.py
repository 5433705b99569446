"""xpk's cluster objects (issue #42's acceptance): what `xpk cluster create` applies for Kueue validates, and xpk's GPU
JobSet runs with it. The manifests are written here in the style xpk renders (AI-Hypercomputer/xpk @367c8382
src/xpk/core/kueue_manager.py, src/xpk/templates/kueue_config.yaml.j2 and kueue_gke_default_topology.yaml.j2): for an
A3 High cluster with flex-start (tests/manifests/xpk_cluster_gpu_a3high.yaml: the Topology gke-default, a flavor naming
it, the dws-prov ProvisioningRequest AdmissionCheck and its dws-config) and for two v6e 4x4 slices
(tests/manifests/xpk_cluster_tpu.yaml: no check, no Topology). Applied after the JobSet's own file, xpk's cluster
objects win (kubectl apply: the later apply), so the JobSet waits for the provisioning check as on xpk's cluster,
carrying the podset-preferred-topology annotation xpk adds where GPU TAS is possible (xpk
src/xpk/commands/workload.py, `is_GPU_TAS_possible` in src/xpk/commands/common.py: A3 High with flex-start)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxinfra_sim.cluster.control_plane import emulate
from tests.support.admitted import stored
from tests.support.cli import simulate_cli
from tests.support.paths import MANIFESTS
from tests.support.problems import problems_of
from tests.test_front_door import validate_cli

pytestmark = pytest.mark.simulator

GPU_CLUSTER = MANIFESTS / "xpk_cluster_gpu_a3high.yaml"
TPU_CLUSTER = MANIFESTS / "xpk_cluster_tpu.yaml"
A3_HIGH = MANIFESTS / "jobset_gpu_a3high_xpk_style.yaml"
TPU_JOBSET = MANIFESTS / "jobset_tpu_multislice_platform_env.yaml"
FAST = ("--run-command", "--init-timeout", "60", "--grace-cap", "1")
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _write(tmp: Path, name: str, docs: list[dict[str, Any]]) -> Path:
    path = tmp / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


#: What the test adds to the JobSet's program: the psum over every device of the group (2 processes x 8), and the
#: cross-process collectives of JAX's CPU backend that stand in for NCCL here (a no-op for GPUs).
PSUM = """
total = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")(jax.numpy.ones(jax.local_device_count()))
assert float(total[0]) == 16.0, total
"""


def _xpk_flex_jobset(tmp: Path) -> Path:
    """xpk's A3 High JobSet as `xpk workload create` renders it on a flex-start cluster: its pod template annotated
    with the preferred topology kubernetes.io/hostname; its program also checks psum over the 16 devices."""
    docs = _docs(A3_HIGH)
    [js] = [d for d in docs if d["kind"] == "JobSet"]
    template = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    template["metadata"]["annotations"][PREFERRED] = "kubernetes.io/hostname"
    [container] = template["spec"]["containers"]
    program = container["args"][0].replace(
        "import jax\n", 'import jax\n\njax.config.update("jax_cpu_collectives_implementation", "gloo")\n', 1
    )
    container["args"] = [program.replace("jax.distributed.shutdown()", PSUM.lstrip() + "jax.distributed.shutdown()")]
    assert "psum" in container["args"][0] and "gloo" in container["args"][0]
    return _write(tmp, "a3high_flex.yaml", docs)


@pytest.mark.parametrize("cluster", [GPU_CLUSTER, TPU_CLUSTER], ids=["a3-high-flex", "tpu-v6e"])
def test_xpks_cluster_objects_validate(cluster: Path, tmp_path: Path) -> None:
    rc, out = validate_cli(cluster)
    assert rc == 0 and "valid" in out, out
    broken = _docs(cluster)
    [flavor] = [d for d in broken if d["kind"] == "ResourceFlavor"]
    flavor["spec"]["nodeLabel"] = flavor["spec"].pop("nodeLabels")  # a misspelt field: the CRD is strict
    rc, out = validate_cli(_write(tmp_path, "broken.yaml", broken))
    assert rc == 2 and "nodeLabel" in out, out


def test_xpks_gpu_jobset_runs_on_xpks_flex_cluster_once_its_provisioning_check_is_ready(tmp_path: Path) -> None:
    """2 nodes x 8 GPUs: each of the 2 processes sees all 16 devices and psum over them is 16; Kueue holds the JobSet,
    its quota reserved in xpk's flavor, until dws-prov is Ready (--provision dws-prov@1)."""
    jobset = _xpk_flex_jobset(tmp_path)
    rc, report, out = simulate_cli(str(jobset), str(GPU_CLUSTER), *FAST, "--provision", "dws-prov@1", tmp=tmp_path)
    [w] = report["workloads"]
    assert (rc, w["verdict"], w["held"]["seconds"], w["held"]["pending"]) == (0, "succeeded", 1.0, None), out
    pods = w["attempts"][0]["pods"]
    # each process joined the group of 2, saw 16 devices and summed 16 with psum (its program asserts both), exit 0
    assert sorted((p["rank"], p["exit_code"]) for p in pods) == [(0, 0), (1, 0)], pods
    notes = " | ".join(w["notes"])
    assert (
        "Kueue reserves its quota in ClusterQueue cluster-queue via LocalQueue default/multislice-queue "
        "(1xh100-80gb-8: nvidia.com/gpu 16 of 16) and admits it once its ProvisioningRequest AdmissionCheck(s) "
        "dws-prov are Ready"
    ) in notes, notes
    assert f"{PREFERRED}: kubernetes.io/hostname is not played here" in notes, notes
    assert w["held"]["note"].endswith(
        "until its ProvisioningRequest AdmissionCheck(s) were Ready: dws-prov after 1 s (--provision)"
    ), w["held"]


def test_capacity_that_never_arrives_leaves_xpks_gpu_jobset_pending(tmp_path: Path) -> None:
    rc, report, out = simulate_cli(
        str(_xpk_flex_jobset(tmp_path)), str(GPU_CLUSTER), *FAST, "--provision", "dws-prov@never", tmp=tmp_path
    )
    [w] = report["workloads"]
    assert (rc, w["verdict"], w["attempts"], w["held"]["pending"]) == (1, "not finished", [], "dws-prov"), out
    assert w["reason"].startswith("held by Kueue: AdmissionCheck dws-prov stays Pending"), w["reason"]


def test_without_xpks_topology_the_flex_jobset_never_runs() -> None:
    """xpk's flavor names gke-default: without that Topology applied its ClusterQueue is inactive (kueue v0.19.2
    pkg/cache/scheduler/clusterqueue.go inactiveReason: TopologyNotFound), and the workload stays suspended."""
    docs = [d for d in _docs(GPU_CLUSTER) if d["kind"] != "Topology"]
    jobset = _docs(A3_HIGH)
    [js] = [d for d in jobset if d["kind"] == "JobSet"]
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"][PREFERRED] = (
        "kubernetes.io/hostname"
    )
    [problem] = problems_of(emulate([*jobset, *docs], check_all=False))
    assert (
        'is inactive (TopologyNotFound): Can\'t admit new workloads: there is no Topology "gke-default" for TAS '
        'flavor "1xh100-80gb-8".'
    ) in problem.message, problem


def test_a_queued_tpu_jobset_fits_xpks_two_slices_and_a_third_slice_does_not() -> None:
    """The TPU cluster's flavor selects v6e 4x4 slices with the chips of two: a 2-slice JobSet queued to
    multislice-queue is admitted, a 3-slice one stays suspended for quota."""
    jobset = _docs(TPU_JOBSET)
    [js] = [d for d in jobset if d["kind"] == "JobSet"]
    js["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "multislice-queue"
    cluster = _docs(TPU_CLUSTER)
    [w] = emulate(stored([*jobset, *cluster]), check_all=False).workloads
    assert w.problems == () and w.provisioning == (), w.problems
    assert any("(2xv6e-16: google.com/tpu 32 of 32)" in n for n in w.notes), w.notes
    three = copy.deepcopy(jobset)
    [js] = [d for d in three if d["kind"] == "JobSet"]
    js["spec"]["replicatedJobs"][0]["replicas"] = 3
    [problem] = problems_of(emulate(stored([*three, *cluster]), check_all=False))
    assert (  # Kueue's ExceedsMaxQuota (kueue v0.19.2 flavorassigner.go fitsResourceQuota)
        "insufficient quota for google.com/tpu in flavor 2xv6e-16, previously considered podsets requests (0) + "
        "current podset request (48) > maximum capacity (32)"
    ) in problem.message, problem
