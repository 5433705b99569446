"""GKE's TPU platform, emulated on the CPU: what GKE adds to the pods of a TPU slice, and what a
TPU VM gives JAX, so that JAX's own TPU detection runs unchanged.

1. The env GKE's TPU webhook injects into the pods of a multi-host slice (`pod_env`).
2. The TPU VM itself (`install`, run inside a TPU pod's process before `jax.distributed.initialize()`):
   JAX's detector (jax/_src/clusters/cloud_tpu_cluster.py, GkeTpuCluster) finds the coordinator and
   rank from TPU_WORKER_HOSTNAMES, TPU_WORKER_ID and MEGASCALE_* — provided it runs on a TPU VM and
   can read the VM's `tpu-env` metadata. Here the pod runs on the CPU, so we state those two platform
   facts and let JAX's unchanged detection do the rest. Command-mode pods get it through a
   `sitecustomize` module (`sitecustomize_dir`); probe pods call `install` directly.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..controllers import ChildJob

JAX_DEFAULT_TPU_PORT = 8482
"""JAX's TPU coordinator port (jax/_src/clusters/cloud_tpu_cluster.py, coordinator_port)."""

#: Set by the runner in the env of pods that request google.com/tpu.
MARKER = "JAXINFRA_SIMULATED_TPU_VM"


def pod_env(job: ChildJob, index: int) -> dict[str, str]:
    """The env GKE's TPU webhook injects: only for a pod of an Indexed Job with a subdomain and parallelism > 1
    that requests google.com/tpu (a multi-host slice). Each child Job of a JobSet is one slice, so the hostnames
    list covers that Job only.

    Source: GKE docs "Deploy TPU workloads in GKE Standard" (TPU_WORKER_ID = index 0..pods-1; TPU_WORKER_HOSTNAMES =
    comma-separated, ordered by TPU_WORKER_ID; injected by a mutating webhook under exactly these conditions), as quoted
    in github.com/abatilo/gke-tpu-env-injector. The entry format `<hostname>.<subdomain>` (DNS names the headless
    Service makes resolvable) and TPU_SKIP_MDS_QUERY=true (JAX's GceTpuCluster then skips the metadata server) are
    this simulator's reading of that contract. Where the webhook places these entries is not documented; they are
    treated as defined before the container's own env, so `$(TPU_WORKER_ID)` expands and user values win.
    """
    if job.accelerator[0] != "tpu" or not job.subdomain or job.parallelism <= 1 or job.operator is not None:
        return {}
    return {"TPU_WORKER_ID": str(index), "TPU_WORKER_HOSTNAMES": job.worker_hostnames, "TPU_SKIP_MDS_QUERY": "true"}


def install() -> None:
    """Run inside a pod's process after importing jax, before `jax.distributed.initialize()`."""
    from jax._src.clusters import cloud_tpu_cluster

    cloud_tpu_cluster.running_in_cloud_tpu_vm = True  # the pod runs on a TPU VM
    # A TPU VM's `tpu-env` metadata holds no key the env lacks (single slice: no MEGASCALE_*).
    cloud_tpu_cluster.get_tpu_env_value_from_metadata = lambda key: None


SITECUSTOMIZE = f'''\
# Written by jaxinfra simulate: emulate the TPU VM for this pod's own command.
import os
if os.environ.get("{MARKER}"):
    from jaxinfra.simulate.platform.gke_tpu import install
    install()
'''


def sitecustomize_dir(folder: Path) -> Path:
    """A folder to put first on PYTHONPATH of command-mode TPU pods."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return folder


def is_marked() -> bool:
    return bool(os.environ.get(MARKER))
