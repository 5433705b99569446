"""TPU's implicit multi-host (#57): on a multi-host slice, and across the slices of a multislice JobSet, a program that
never calls `jax.distributed.initialize()` still sees every chip, as libtpu joins the hosts from the env GKE gives the
pods (simulate/jaxinfra_sim/platform/gke_tpu.py, `join_slice`). The JobSets are in the style of GKE's multislice
sample (GoogleCloudPlatform/cluster-toolkit@01a7a3ed, community/examples/gke-tpu-v6/tpu-multislice.yaml: bash running
`python -c 'import jax; print("Global device count:", jax.device_count())'`, no initialize), sized small: 2 slices of
v5e 2x4 (2 hosts x 4 chips: a multi-host slice, GKE's "Plan TPUs"), 16 chips, 4 pods under --run-command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.sim.runtime.test_images import home  # noqa: F401  (a fixture: the image run's scratch HOME)
from tests.sim.runtime.test_sandbox import simulate as simulate_as
from tests.support import images, unprivileged
from tests.support.cli import simulate_cli

pytestmark = pytest.mark.simulator

IMAGE = "us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu:latest"


def jobset(slices: int = 2, hosts: int = 2, topology: str = "2x4") -> dict[str, Any]:
    """`slices` v5e slices of `hosts` hosts x 4 chips; its container's command bash, its args to set (`container`)."""
    return yaml.safe_load(
        f"""
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: v5e
  annotations:
    alpha.jobset.sigs.k8s.io/exclusive-topology: cloud.google.com/gke-nodepool
spec:
  failurePolicy:
    maxRestarts: 0
  replicatedJobs:
  - name: slice
    replicas: {slices}
    template:
      spec:
        parallelism: {hosts}
        completions: {hosts}
        backoffLimit: 0
        template:
          spec:
            nodeSelector:
              cloud.google.com/gke-tpu-accelerator: tpu-v5-lite-podslice
              cloud.google.com/gke-tpu-topology: {topology}
            containers:
            - name: jax-tpu
              image: {IMAGE}
              command: [bash, -c]
              resources:
                limits:
                  google.com/tpu: 4
"""
    )


def container(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]


def run(tmp: Path, program: str, *args: str, **shape: Any) -> tuple[int, dict[str, Any], dict[str, list[str]], str]:
    """Simulate the JobSet (`shape`: `jobset`'s) running `program` under --run-command, its output on stderr (the
    report keeps each pod's stderr tail): status, report, each pod's stderr lines by hostname, output."""
    doc = jobset(**shape)
    container(doc)["args"] = [f"{{\n{program}\n}} >&2"]
    path = tmp / "jobset.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    rc, report, out = simulate_cli(
        str(path), "--run-command", "--init-timeout", "60", "--grace-cap", "1", *args, tmp=tmp
    )
    said = {p["hostname"]: p["stderr_tail"] for w in report["workloads"] for p in w["attempts"][0]["pods"]}
    return rc, report, said, out


COUNT = """python3 -c '
import jax
print("Global device count:", jax.device_count())
print("process", jax.process_index(), "of", jax.process_count(), "initialized:", jax.distributed.is_initialized())
'"""


def test_a_program_that_never_initializes_sees_every_slice(tmp_path: Path) -> None:
    """GKE: each pod of the multislice sample prints the job's chips (2 x 16 = 32 there; 2 x 8 = 16 here), the ranks
    slice-major as JAX's TPU detection orders them; `jax.distributed.is_initialized()` stays False (libtpu's group is
    not JAX's distributed client). The workload succeeds."""
    rc, report, said, out = run(tmp_path, COUNT)
    assert rc == 0 and report["workloads"][0]["verdict"] == "succeeded", out
    assert sorted(said) == ["v5e-slice-0-0", "v5e-slice-0-1", "v5e-slice-1-0", "v5e-slice-1-1"]
    for host, lines in said.items():
        rank = 2 * int(host[-3]) + int(host[-1])
        assert "Global device count: 16" in lines, lines
        assert f"process {rank} of 4 initialized: False" in lines, lines


def test_a_program_that_initializes_itself_is_unchanged(tmp_path: Path) -> None:
    """The implicit group never doubles the program's own: in one container a first program counts without
    initializing, then one calls the bare `jax.distributed.initialize()` (JAX's TPU detection, as in JobSet's
    site/static/examples/tpu-multislice/v6e-jax-workload.yaml, kubernetes-sigs/jobset@08dfbdf), then one passes the
    coordinator, count and rank itself: each sees the 16 chips, the last two as JAX's initialized client."""
    explicit = """python3 -c '
import jax, os
jax.distributed.initialize(
    os.environ["MEGASCALE_COORDINATOR_ADDRESS"] + ":8482", 4,
    2 * int(os.environ["MEGASCALE_SLICE_ID"]) + int(os.environ["TPU_WORKER_ID"]))
print("explicit:", jax.device_count(), jax.distributed.is_initialized())
'"""
    bare = """python3 -c '
import jax
jax.distributed.initialize()
print("bare:", jax.device_count(), jax.process_count())
'"""
    rc, _, said, out = run(tmp_path, f"set -e\n{COUNT}\n{bare}\n{explicit}")
    assert rc == 0, out
    for lines in said.values():
        assert "Global device count: 16" in lines and "bare: 16 4" in lines and "explicit: 16 True" in lines, lines


def test_a_program_that_assumes_one_process_fails_as_on_a_slice(tmp_path: Path) -> None:
    """A program written for one host (`assert jax.process_count() == 1`) fails on a multi-host slice: GKE's pods of
    the sample are one process of 8, so the assertion raises, the Job's backoffLimit 0 fails it and the JobSet with
    maxRestarts 0 fails. Here too (each pod alone, as before, would have passed)."""
    rc, report, said, out = run(
        tmp_path, """python3 -c 'import jax; assert jax.process_count() == 1, jax.process_count()'"""
    )
    [w] = report["workloads"]
    assert rc == 1 and w["verdict"] == "failed", out
    assert any("AssertionError: 4" in line for lines in said.values() for line in lines), said


def test_initialize_after_the_backend_started_fails_as_on_a_tpu(tmp_path: Path) -> None:
    """jax/_src/distributed.py `initialize` (jax 0.10.2) refuses once a backend is up: on a TPU the backend (libtpu's
    group) started at `jax.devices()`, so the later `jax.distributed.initialize()` raises RuntimeError and the pod
    fails. The same here, where the group formed at `jax.devices()`."""
    late = """python3 -c 'import jax; jax.devices(); jax.distributed.initialize()'"""
    rc, report, said, out = run(tmp_path, late)
    assert rc == 1 and report["workloads"][0]["verdict"] == "failed", out
    assert any("must be called before any JAX calls" in line for lines in said.values() for line in lines), said


def test_a_single_host_slice_stays_alone(tmp_path: Path) -> None:
    """v5e 2x2 is one host of 4 chips (GKE: a single-host slice, no TPU_WORKER_HOSTNAMES): the program sees its 4 and
    is process 0 of 1, here as on GKE."""
    rc, _, said, out = run(tmp_path, COUNT, slices=1, hosts=1, topology="2x2")
    assert rc == 0, out
    [lines] = said.values()
    assert "Global device count: 4" in lines and "process 0 of 1 initialized: False" in lines, lines


def test_an_image_given_whole_gets_a_note_instead_of_a_silent_count(home: Path) -> None:  # noqa: F811
    """An image given whole (`--image IMAGE=LAYOUT`) runs its own Python, where the simulator cannot stand in for
    libtpu without putting this machine's files into the image's root: the report says what differs from GKE (the
    pod's 4 devices here, the job's 16 there), once per image."""
    layout = home / "layout"
    images.layout(layout, images.Spec([images.busybox_layer()], cmd=["true"]))
    doc = jobset()
    container(doc)["command"] = ["sh", "-c", "true"]
    env = unprivileged.cache_env(home, True)
    rc, report, out = simulate_as(home, [doc], "--image", f"{IMAGE}={layout}", env=env)
    assert rc == 0, out
    said = [n for n in report["notes"] if "the TPU platform is not emulated" in n]
    assert said == [
        f"JobSet/default/v5e: image {IMAGE} runs its own Python, where the TPU platform is not emulated: a program in "
        "it that does not call jax.distributed.initialize() sees its pod's 4 devices here, 16 on GKE (libtpu joins "
        "the 4 hosts), and a bare jax.distributed.initialize() finds no TPU VM; give the image as a folder "
        "(--image IMAGE=DIR) to run the program under the emulated platform, or pass the coordinator, count and rank "
        "to initialize"
    ], report["notes"]
