"""What a TPU VM gives JAX, emulated on the CPU, so a bare `jax.distributed.initialize()` works.

On GKE, JAX's own detector (jax/_src/clusters/cloud_tpu_cluster.py, GkeTpuCluster) finds the
coordinator and rank from TPU_WORKER_HOSTNAMES, TPU_WORKER_ID and MEGASCALE_* — provided it
runs on a TPU VM and can read the VM's `tpu-env` metadata. Here the pod runs on the CPU, so we
state those two platform facts and let JAX's unchanged detection do the rest.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Set by the runner in the env of pods that request google.com/tpu.
MARKER = "JAXINFRA_SIMULATED_TPU_VM"


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
    from jaxinfra.simulate.tpu_platform import install
    install()
'''


def sitecustomize_dir(folder: Path) -> Path:
    """A folder to put first on PYTHONPATH of command-mode TPU pods."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return folder


def is_marked() -> bool:
    return bool(os.environ.get(MARKER))
