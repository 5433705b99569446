"""The CPU shadow (`jaxinfra synth --shadow cpu`): every example stack's job with its processes, names,
Services, restart rules and queues, on CPU pods; strictly valid, snapshotted, and simulated."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jaxinfra import CPU, TPU, Cluster, JaxJob, NodePool, Shadow, SpecError, manifests, stack
from jaxinfra import names as N
from jaxinfra import upstream as U
from jaxinfra.plan import BY_EXPANSION, BY_SHADOW_SHELL, plan
from jaxinfra.shadow import CANNOT, PROVES, facts, notes, requests, shadow
from jaxinfra.validate import validate_objects
from jaxinfra.yamlio import dump, load
from jaxinfra_sim.cluster.control_plane import emulate
from tests.support.paths import ROOT, STACKS
from tests.support.stacks import PAIR_IDS, PAIRS, load_stack

pytestmark = pytest.mark.unit

V5P_4X4X8 = ROOT / "benchmarks" / "stacks" / "v5p_4x4x8.py"
WORKLOADS = {"JobSet", "Job", "JAXJob", "TrainJob"}
ACCELERATOR_KEYS = {
    "google.com/tpu",
    "nvidia.com/gpu",
    "nodeSelector",
    "tolerations",
    "hostNetwork",
    "privileged",
    U.EXCLUSIVE_TOPOLOGY,
}


def keys(node: Any) -> set[str]:
    """Every mapping key anywhere in a manifest tree."""
    if isinstance(node, dict):
        return set(node) | {k for v in node.values() for k in keys(v)}
    if isinstance(node, list):
        return {k for v in node for k in keys(v)}
    return set()


def restart_rules(objects: list[dict[str, Any]]) -> list[Any]:
    """What decides restarts, per workload: JobSet failurePolicy and its Jobs' backoffLimit, an Indexed Job's
    budget and policies, a JAXJob's runPolicy and restartPolicy, and the TrainingRuntime's JobSet policy."""
    out = []
    for o in objects:
        spec = o.get("spec", {})
        if o["kind"] == "JobSet":
            out.append((spec["failurePolicy"], [r["template"]["spec"]["backoffLimit"] for r in spec["replicatedJobs"]]))
        elif o["kind"] == "Job":
            out.append((spec["backoffLimit"], spec["podFailurePolicy"], spec["podReplacementPolicy"]))
        elif o["kind"] == "JAXJob":
            out.append((spec["runPolicy"], spec["jaxReplicaSpecs"]["Worker"]["restartPolicy"]))
        elif o["kind"] == "TrainingRuntime":
            out.append(spec["template"]["spec"]["failurePolicy"])
    return out


def pods(objects: list[dict[str, Any]]) -> list[Any]:
    return [p for w in emulate(objects).workloads for p in w.pods]


@pytest.mark.parametrize(("path", "backend"), PAIRS, ids=PAIR_IDS)
def test_shadow_keeps_the_job_and_drops_the_accelerator(path: Path, backend: str) -> None:
    original = load_stack(path, backend)
    before, after = manifests(original), manifests(shadow(original))
    assert validate_objects(after, source=f"shadow of {path.stem}.{backend}") == []
    # the same objects (kinds, names, namespaces), Services, restart rules and Kueue queues; only the GPU networks
    # (GKE multi-networking) are dropped, with the GPUDirect parts of the pods, and a flex-start pool's provisioning
    # check (the shadow's CPU nodes exist) and a topology request's Topology (CPU nodes carry no block labels)
    assert [(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in after] == [
        (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))
        for o in before
        if not o["apiVersion"].startswith("networking.gke.io/")
        and o["kind"] not in ("AdmissionCheck", "ProvisioningRequestConfig", "Topology")
    ]
    assert not any("admissionChecksStrategy" in o["spec"] for o in after if o["kind"] == "ClusterQueue")
    text = json.dumps(after)
    assert "networking.gke.io/" not in text and "devices.gke.io/" not in text and "hostPath" not in text
    assert [o for o in after if o["kind"] == "Service"] == [o for o in before if o["kind"] == "Service"]
    assert restart_rules(after) == restart_rules(before)
    assert [o["metadata"]["labels"].get(U.QUEUE_LABEL) for o in after if o["kind"] in WORKLOADS] == [
        o["metadata"]["labels"].get(U.QUEUE_LABEL) for o in before if o["kind"] in WORKLOADS
    ]
    # no accelerator resource, selector, toleration or placement left; the workload says what it shadows
    assert not keys(after) & ACCELERATOR_KEYS
    [workload] = [o for o in after if o["kind"] in WORKLOADS]
    assert workload["metadata"]["annotations"][N.SHADOW_OF].endswith("on CPU nodes")
    # the same pods, as the controllers create them: names, hostnames, ranks; a CPU device per chip
    old, new = pods(before), pods(after)
    assert [(p.name, p.hostname, p.global_index) for p in new] == [(p.name, p.hostname, p.global_index) for p in old]
    assert [p.accelerator for p in new] == ["cpu"] * len(old)
    assert [p.devices for p in new] == [p.devices for p in old]
    assert all(p.env[N.NUM_CPU_DEVICES] == str(q.devices) for p, q in zip(new, old))


def test_shadow_pods_get_the_tpu_platform_env_and_the_contract_as_explained() -> None:
    """GKE injects TPU_WORKER_ID / TPU_WORKER_HOSTNAMES into a multi-host slice's pods: the shadow writes
    them out per slice, every hostname resolves, and each rank's env is what `explain` shows."""
    for path in (ROOT / "stacks/tpu_v5e_2x4.py", ROOT / "stacks/tpu_v5p_2x2x4_x2.py"):
        cluster = shadow(stack.load(path))
        [jp] = plan(cluster).jobs
        c = emulate(manifests(cluster), check_all=False)
        [w] = c.workloads
        assert c.problems == () and w.problems == ()
        for pod in w.pods:
            slice_index, host = divmod(pod.global_index, jp.hosts_per_slice)
            hostnames = pod.env[N.TPU_WORKER_HOSTNAMES].split(",")
            assert pod.env[N.TPU_WORKER_ID] == str(host)
            assert hostnames == [
                f"{jp.hostname(slice_index * jp.hosts_per_slice + h)}.{jp.service}" for h in range(jp.hosts_per_slice)
            ]
            assert all(any(fqdn.startswith(f"{name}.{pod.namespace}.svc.") for fqdn in c.hosts) for name in hostnames)
            expected = {k: v for k, (v, by) in jp.env_sources(pod.global_index).items() if by != BY_SHADOW_SHELL}
            assert {k: pod.env.get(k) for k in expected} == expected, pod.hostname
        if jp.multi_slice:  # the rank comes from the command's shell, and explain says so
            assert jp.env_sources(5)[N.PROCESS_ID] == ("5", BY_SHADOW_SHELL)
            assert jp.env_sources(5)[N.TPU_WORKER_HOSTNAMES][1] == BY_EXPANSION
            assert w.pods[0].command[:2] == ("/bin/sh", "-c") and w.pods[0].command[-3:] == ("python", "-m", "train")
        else:
            assert w.pods[1].env[N.PROCESS_ID] == "1"


@pytest.mark.parametrize("path", STACKS, ids=[p.stem for p in STACKS])
def test_shadow_snapshot(path: Path, yaml_snapshot: Any) -> None:
    assert dump(manifests(shadow(stack.load(path)))) == yaml_snapshot(name=f"shadow.{path.stem}")


def test_shadow_is_deterministic_and_leaves_the_original_alone() -> None:
    path = ROOT / "stacks/tpu_v5p_2x2x4_x2.py"
    original = stack.load(path)
    assert dump(manifests(shadow(original))) == dump(manifests(shadow(stack.load(path))))
    assert original.shadow is None and dump(manifests(original)) == dump(manifests(stack.load(path)))


def test_shadow_requests_are_configurable_and_validated() -> None:
    cluster = Cluster(
        name="c",
        node_pools=[NodePool("p", TPU("v5e", "2x4"))],
        jobs=[JaxJob("j", image="i", node_pool="p", resources={"requests": {"cpu": "100", "memory": "400Gi"}})],
        shadow=Shadow(cpu="1"),
    )
    [pod_spec] = [o for o in manifests(cluster) if o["kind"] == "JobSet"]
    container = pod_spec["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"requests": {"cpu": "1", "memory": Shadow().memory}}  # the job's own are gone
    changed = shadow(cluster, memory="2Gi").shadow
    assert changed is not None and (changed.cpu, changed.memory) == ("1", "2Gi")  # the stack's cpu stays
    assert requests(plan(shadow(cluster, memory="2Gi"))) == {"cpu": "2", "memory": "4Gi"}  # 2 pods
    with pytest.raises(SpecError) as err:
        shadow(cluster, cpu="lots", memory="1G1")
    assert [p.path for p in err.value.problems] == ["shadow.cpu", "shadow.memory"]


def test_shadow_requests_add_up_across_jobs_in_base_units() -> None:
    cluster = shadow(
        Cluster(
            name="c",
            node_pools=[NodePool("p", CPU())],
            jobs=[JaxJob("a", image="i", node_pool="p", nodes=3), JaxJob("b", image="i", node_pool="p", nodes=7)],
        ),
        cpu="150m",
    )
    assert requests(plan(cluster)) == {"cpu": "1.5", "memory": str(10 * 256 * 2**20)}


def test_multi_slice_shadow_needs_the_command() -> None:
    with pytest.raises(SpecError) as err:
        Cluster(
            name="c",
            node_pools=[NodePool("p", TPU("v5p", "2x2x2"))],
            shadow=Shadow(),
            jobs=[JaxJob("j", image="i", node_pool="p", slices=2)],
        )
    [problem] = err.value.problems
    assert problem.path == "jobs[0].command" and "MEGASCALE_SLICE_ID" in problem.message and "command=" in problem.fix


def test_kueue_queues_of_a_shadow_count_cpu_and_memory_on_any_node() -> None:
    cluster = shadow(
        Cluster(
            name="c",
            kueue=True,
            node_pools=[NodePool("p", TPU("v5p", "2x2x4"), spot=True)],
            jobs=[JaxJob("j", image="i", command=["python"], node_pool="p", slices=2)],
        )
    )
    objects = {o["kind"]: o for o in manifests(cluster)}
    assert objects["ResourceFlavor"]["spec"] == {}
    [group] = objects["ClusterQueue"]["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory"]
    assert group["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": "800m"},
        {"name": "memory", "nominalQuota": "2048Mi"},
    ]
    assert objects["JobSet"]["metadata"]["labels"][U.QUEUE_LABEL] == "p"
    assert validate_objects(list(objects.values()), source="kueue shadow") == []


def test_what_the_shadow_proves_is_said_in_explain_and_for_reports() -> None:
    cluster = shadow(stack.load(ROOT / "stacks/tpu_v5p_2x2x4_x2.py"))
    [jp] = plan(cluster).jobs
    said = dict(facts(jp))
    assert said["shadow"] == "TPU v5p-2x2x4 (pool v5p-2x2x4) x 2 slices: 8 processes x 4 devices, on CPU nodes"
    assert "MEGASCALE_SLICE_ID x 4" in said["shadow rank"]
    assert said["shadow proves"] == "; ".join(PROVES) and said["shadow cannot prove"] == "; ".join(CANNOT)
    assert facts(plan(stack.load(ROOT / "stacks/tpu_v5p_2x2x4_x2.py")).jobs[0]) == []
    [line] = notes(manifests(cluster))
    assert line.startswith("JobSet ml/train is a CPU shadow of TPU v5p-2x2x4") and "ICI/DCN" in line
    assert notes(manifests(stack.load(ROOT / "stacks/tpu_v5p_2x2x4_x2.py"))) == []


@pytest.mark.simulator
def test_synth_shadow_cli(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "jaxinfra", "synth", *args], capture_output=True, text=True, cwd=ROOT, timeout=60
        )

    r = run("stacks", "--shadow", "cpu", "--shadow-memory", "1Gi", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    written = load((tmp_path / "tpu-v5e.yaml").read_text())
    assert written == manifests(shadow(stack.load(ROOT / "stacks/tpu_v5e_2x4.py"), memory="1Gi"))
    for args, needle in (
        (("--shadow", "gpu"), "--shadow = 'gpu': unknown shadow"),
        (("--shadow-cpu", "1"), "--shadow-cpu = '1': only applies to a shadow"),
        (("--shadow", "cpu", "--shadow-cpu", "x"), "shadow.cpu = 'x': not a Kubernetes quantity"),
    ):
        r = run("stacks/cpu_dev.py", "--stdout", *args)
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.adapters  # cdk8s starts jsii's Node process (a unit test would pass only after another test started it)
def test_cdk8s_chart_of_a_shadow_equals_its_manifests() -> None:
    pytest.importorskip("cdk8s")
    from cdk8s import App, Testing

    from jaxinfra.cdk8s import JaxinfraChart

    cluster = shadow(stack.load(ROOT / "stacks/tpu_v5p_2x2x4_x2.py"))
    assert Testing.synth(JaxinfraChart(App(), "shadow", cluster)) == manifests(cluster)
    moved = shadow(stack.load(ROOT / "stacks/cpu_dev.py"))  # jobs in `default` move into the chart's namespace
    chart = JaxinfraChart(App(), "moved", moved, namespace="research")
    assert chart.cluster.shadow is not None and chart.jobs["train"].plan.shadow is not None
    assert Testing.synth(chart) == manifests(chart.cluster)


# --- simulated -------------------------------------------------------------------------------------------------


def simulate(files: list[Path], tmp: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    report = tmp / "report.json"
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "simulate", *map(str, files), *extra, "--no-logs", "--json", str(report)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=400,
    )
    return r.returncode, json.loads(report.read_text()) if report.exists() else {}, r.stderr


@pytest.mark.simulator
def test_shadows_pass_the_simulator(tmp_path: Path) -> None:
    """Every single-slice shadow, the v5p 4x4x8 one at 32 processes x 4 devices included; each file its own
    invocation, since each is a cluster of its own (their JobSets share a name)."""
    pytest.importorskip("jax")
    paths = [p for p in STACKS if p.stem != "tpu_v5p_2x2x4_x2"] + [V5P_4X4X8]
    workloads = []
    for path in paths:
        (tmp_path / path.stem).mkdir()
        file = tmp_path / path.stem / f"{path.stem}.yaml"
        file.write_text(dump(manifests(shadow(stack.load(path)))))
        rc, report, err = simulate([file], tmp_path / path.stem)
        assert rc == 0, err[-3000:]
        workloads += report["workloads"]
    assert [(w["verdict"], w["pods"]) for w in workloads] == [
        ("succeeded", plan(stack.load(p)).jobs[0].processes) for p in paths
    ]
    [big] = [w for w in workloads if w["pods"] == 32]
    assert all(p["checks_passed"] for p in big["attempts"][0]["pods"])


#: The env contract's initialization (docs/env-contract.md), verbatim, then what the shadow must give it.
README_INIT = re.search(
    r"initializes with:\n\n```python\n(.*?)```", (ROOT / "docs/env-contract.md").read_text(), re.S
).group(1)
SCRIPT = (
    README_INIT
    + """
import socket
from jax.experimental import multihost_utils
import numpy as np
ranks = multihost_utils.process_allgather(np.array([jax.process_index()]))
hosts = os.environ["TPU_WORKER_HOSTNAMES"].split(",")
assert sorted(ranks.ravel().tolist()) == list(range(4)) and jax.device_count() == 16, (ranks, jax.device_count())
assert jax.process_index() == int(os.environ["TPU_WORKER_ID"]) + 2 * int(os.environ["MEGASCALE_SLICE_ID"])
assert hosts[int(os.environ["TPU_WORKER_ID"])].split(".")[0] == socket.gethostname(), (hosts, socket.gethostname())
jax.distributed.shutdown()
"""
)


@pytest.mark.simulator
def test_multi_slice_shadow_runs_the_readme_script_unchanged(tmp_path: Path) -> None:
    """Two v5p 2x2x2 slices: the shell gives each pod its global rank, and the contract's script initializes
    4 processes x 4 CPU devices from the env alone."""
    pytest.importorskip("jax")
    cluster = shadow(
        Cluster(
            name="ms",
            node_pools=[NodePool("v5p", TPU("v5p", "2x2x2"))],
            jobs=[
                JaxJob(
                    "train",
                    image="python:3.11",
                    command=["python", "-c", SCRIPT],
                    node_pool="v5p",
                    slices=2,
                    init_timeout_seconds=60,
                )
            ],
        )
    )
    yaml = tmp_path / "ms.yaml"
    yaml.write_text(dump(manifests(cluster)))
    rc, report, err = simulate([yaml], tmp_path, "--run-command")
    assert rc == 0, err[-3000:]
    [w] = report["workloads"]
    assert w["verdict"] == "succeeded" and [p["rank"] for p in w["attempts"][0]["pods"]] == [0, 1, 2, 3]


@pytest.mark.simulator
def test_multi_slice_shadow_passes_the_built_in_probe(tmp_path: Path) -> None:
    """The probe stands in for the program the shadow's entrypoint wrapper execs: it runs with the rank the
    wrapper's shell computed, and the probe's rank check holds it to the pod's place in the JobSet."""
    docs = manifests(shadow(stack.load(ROOT / "stacks/tpu_v5p_2x2x4_x2.py")))
    assert [p for w in emulate(docs).workloads for p in w.problems] == []
    yaml = tmp_path / "ms.yaml"
    yaml.write_text(dump(docs))
    rc, report, err = simulate([yaml], tmp_path)
    assert rc == 0, err[-3000:]
    [w] = report["workloads"]
    assert all(p["checks"]["rank"]["ok"] for p in w["attempts"][0]["pods"]) and len(w["attempts"][0]["pods"]) == 8


@pytest.mark.simulator
def test_a_wrapper_that_computes_a_wrong_rank_fails_the_probe(tmp_path: Path) -> None:
    docs = manifests(shadow(stack.load(ROOT / "stacks/tpu_v5p_2x2x4_x2.py")))
    yaml = tmp_path / "wrong.yaml"
    yaml.write_text(
        dump(docs).replace("MEGASCALE_SLICE_ID * 4 + TPU_WORKER_ID", "TPU_WORKER_ID * 2 + MEGASCALE_SLICE_ID")
    )
    rc, report, _ = simulate([yaml], tmp_path, "--init-timeout", "10")
    assert rc == 1 and report["workloads"][0]["verdict"] == "failed"
