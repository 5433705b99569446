"""Kubeflow's spmd-mnist JAXJob, run from its image (issue #41): a Training Operator v1 JAXJob in the style of the
example (kubeflow/trainer release-1.9 @ 289f1790 examples/jax/jax-dist-spmd-mnist: two workers, no `command`), its
image built offline as the example's Dockerfile builds it (tests/support/spmd_mnist/Dockerfile: the program in
/app, `WORKDIR /app`, `ENTRYPOINT ["python3", "spmd_mnist.py"]`; Python and JAX from this machine's packages), given
to `jaxinfra simulate --image` as an OCI image layout and as a `docker save` archive, as root and as uid 65534. The
program picks its own host device count through XLA_FLAGS, as the example does, and gets it: nothing of the
simulator's overrides it. One image per session (about 480 MB; unpacked once per cache, about 15 s): every test
here shares it and, per user, one unpack cache."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jaxinfra import yamlio
from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.core import inputs
from jaxinfra_sim.kubelet import container
from tests.sim.runtime.test_sandbox import MODES
from tests.support import images, unprivileged
from tests.support.paths import MANIFESTS, ROOT

pytestmark = pytest.mark.simulator  # .ci/run installs umoci, skopeo, runc: never skipped

MANIFEST = MANIFESTS / "jaxjob_spmd_mnist_image.yaml"
IMAGE = "registry.example/jaxjob-spmd-mnist:v1"
#: What the program sets its host device count to (spmd_mnist.py HOST_DEVICES, from the CPU count as upstream).
HOST_DEVICES = max(2, min(os.cpu_count() or 1, 4))
WORKERS = 2


@pytest.fixture(scope="module")
def built() -> Iterator[dict[str, Path]]:
    """The image as an OCI layout and as the archive `docker save` would write of it, readable by uid 65534."""
    folder = Path(tempfile.mkdtemp(prefix="jaxinfra-spmd-mnist-", dir="/tmp"))
    images.layout(folder / "layout", images.spmd_mnist_image())
    images.docker_archive(folder / "layout", folder / "spmd-mnist.tar", IMAGE)
    subprocess.run(["chmod", "-R", "a+rX", str(folder)], check=True)
    yield {"layout": folder / "layout", "archive": folder / "spmd-mnist.tar"}
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def homes() -> Iterator[Callable[[bool], Path]]:
    """A HOME per user for the whole module, so that each unpacks the image once into its cache."""
    made: dict[bool, Path] = {}

    def home(as_root: bool) -> Path:
        if as_root not in made:
            made[as_root] = unprivileged.scratch_home()
        return made[as_root]

    yield home
    for folder in made.values():
        subprocess.run(["rm", "-rf", str(folder), f"{folder}-root"], check=False)


def simulate(home: Path, objs: list[dict[str, object]], image: Path, as_root: bool) -> tuple[int, dict, str]:
    """`jaxinfra simulate --run-command` of `objs` with `--image IMAGE=image`, the pods' logs printed (as `kubectl
    logs` shows them): status, JSON report, output. Never a traceback."""
    manifest, report = home / "spmd-mnist.yaml", home / "report.json"
    manifest.write_text(yamlio.dump(objs), encoding="utf-8")
    argv = [sys.executable, "-m", "jaxinfra", "simulate", str(manifest), "--run-command", "--json", str(report)]
    argv += ["--timeout", "150", "--image", f"{IMAGE}={image}"]
    env = unprivileged.cache_env(home, as_root)
    r = unprivileged.run(argv, home, as_root=as_root, env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)
    out = r.stdout + r.stderr
    assert "Traceback" not in out and report.exists(), out
    data = json.loads(report.read_text())
    manifest.unlink()
    report.unlink()
    return r.returncode, data, out


def logs(out: str, pod: str) -> list[str]:
    """The lines pod `pod` wrote, from the simulator's log stream (`[pod] line`)."""
    prefix = f"[{pod}] "
    return [line[len(prefix) :] for line in out.splitlines() if line.startswith(prefix)]


def upstream_style() -> list[dict[str, object]]:
    return inputs.load_files([MANIFEST])


@pytest.mark.parametrize(
    ("kind", "as_root"),
    [("layout", True), ("layout", False), ("archive", True)],
    ids=["layout-root", "layout-unprivileged", "archive-root"],
)
def test_kubeflows_spmd_mnist_jaxjob_runs_from_its_image_with_its_own_host_device_count(
    built: dict[str, Path], homes: Callable[[bool], Path], kind: str, as_root: bool
) -> None:
    """The JAXJob passes as on a cluster: each worker runs the image's Entrypoint in its WorkingDir (/app), joins the
    other through the operator's env, and sees its own HOST_DEVICES devices, WORKERS x HOST_DEVICES in all; the loss
    falls over the steps and both workers print the same figures (one SPMD program). (The archive is converted to a
    layout before anything else happens: unprivileged, that conversion is test_sim_images' with a small image; here
    it would only add a second 480 MB unpack.)"""
    rc, report, out = simulate(homes(as_root), upstream_style(), built[kind], as_root)
    assert rc == 0, out
    [workload] = report["workloads"]
    assert (workload["id"], workload["verdict"]) == ("JAXJob/kubeflow/spmd-mnist", "succeeded"), out
    losses = {}
    for rank in range(WORKERS):
        lines = logs(out, f"spmd-mnist-worker-{rank}")
        assert f"JAX process {rank} of {WORKERS}" in lines, out
        assert f"JAX local device count:{HOST_DEVICES}" in lines, out
        assert f"JAX device count:{WORKERS * HOST_DEVICES}" in lines, out
        losses[rank] = [float(m[1]) for line in lines if (m := re.fullmatch(r"step \d+ loss ([0-9.]+)", line))]
        assert any(line.startswith("Test set accuracy") for line in lines), out
    assert len(losses[0]) == 8 and losses[0] == losses[1], losses
    assert losses[0][-1] < losses[0][0], losses


def test_the_jaxjobs_pods_get_nothing_that_overrides_the_programs_device_count() -> None:
    """The operator's env and the simulator's stand-ins (container.process_env, for a root that is the image's) give
    the upstream-style JAXJob's CPU pods no JAX_NUM_CPU_DEVICES and no XLA_FLAGS: the program's own choice is the only
    one, and the run above shows it held."""
    [workload] = emulate(upstream_style()).workloads
    for pod in workload.pods:
        env = container.process_env(pod, None, unpacked=True)
        assert {"COORDINATOR_ADDRESS", "COORDINATOR_PORT", "NUM_PROCESSES", "PROCESS_ID"} <= set(env), env
        assert not {"JAX_NUM_CPU_DEVICES", "XLA_FLAGS"} & set(env), env


@MODES
def test_a_working_dir_without_the_program_crash_loops_as_on_a_cluster(
    built: dict[str, Path], homes: Callable[[bool], Path], as_root: bool
) -> None:
    """A `workingDir` in the manifest replaces the image's WorkingDir, so the Entrypoint's relative `spmd_mnist.py`
    is looked for there: python3 exits 2 ("can't open file"), and under restartPolicy OnFailure with no backoffLimit
    the kubelet restarts it forever (CrashLoopBackOff): the simulation fails, saying so."""
    objs = upstream_style()
    objs[0]["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["workingDir"] = "/workspace"  # type: ignore[index]
    rc, report, out = simulate(homes(as_root), objs, built["layout"], as_root)
    assert rc == 1, out
    [workload] = report["workloads"]
    assert workload["verdict"] == "failed", out
    assert "python3: can't open file '/workspace/spmd_mnist.py': [Errno 2] No such file or directory" in out, out
    assert re.search(r"crash loop: container jax of pod spmd-mnist-worker-[01] exits 2 ", workload["reason"]), out
    assert "CrashLoopBackOff" in workload["reason"], workload["reason"]


#: A JAX program given as `command` (which replaces the image's Entrypoint): its own XLA_FLAGS, then one all-reduce.
OWN_COUNT = """
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=3"
import sys, jax, jax.numpy as jnp
total = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")(jnp.ones(jax.local_device_count()))
print(f"JAX={jax.device_count()} {float(total[0])} {sys.executable} {os.path.exists('/work')}", file=sys.stderr)
"""


@MODES
def test_a_command_replaces_the_entrypoint_and_runs_the_images_python(
    built: dict[str, Path], homes: Callable[[bool], Path], as_root: bool
) -> None:
    """A one-pod Job of the same image with `command`: the image's Python (not this machine's, whose folders are not
    in the container) runs the given program, not the Entrypoint's, with its own 3 host devices."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "own"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": IMAGE, "command": ["python3", "-c", OWN_COUNT]}],
                }
            },
        },
    }
    rc, report, out = simulate(homes(as_root), [job], built["layout"], as_root)
    assert rc == 0, out
    [pod] = report["workloads"][0]["attempts"][0]["pods"]
    assert "JAX=3 3.0 /usr/bin/python3 False" in pod["stderr_tail"], out
