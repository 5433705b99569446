"""GKE's TPU platform, emulated on the CPU: what GKE adds to the pods of a TPU slice, and what a
TPU VM gives JAX, so that JAX's own TPU detection runs unchanged.

1. The env GKE's TPU webhook injects into the pods of a multi-host slice (`pod_env`).
2. The TPU VM itself (`install`, run inside a TPU pod's process before `jax.distributed.initialize()`):
   JAX's detector (jax/_src/clusters/cloud_tpu_cluster.py, GkeTpuCluster) finds the coordinator and
   rank from TPU_WORKER_HOSTNAMES, TPU_WORKER_ID and MEGASCALE_* — provided it runs on a TPU VM and
   can read the VM's `tpu-env` metadata. Here the pod runs on the CPU, so we state those two platform
   facts and let JAX's unchanged detection do the rest (through image.shape, in every TPU pod).
"""

from __future__ import annotations

from collections.abc import Mapping

from jaxinfra.upstream import JOBSET_NAME_LABEL, JOBSET_REPLICAS, JOBSET_RJOB
from jaxinfra_sim.controllers.base import ChildJob
from jaxinfra_sim.core.inputs import to_int

#: Set by the runner in the env of pods that request google.com/tpu.
MARKER = "JAXINFRA_SIMULATED_TPU_VM"


def pod_env(job: ChildJob, index: int) -> dict[str, str]:
    """The env GKE's TPU platform injects into the index-th pod of `job`, placed before the container's own env
    (so `$(TPU_WORKER_ID)` expands and user values win).

    A multi-host slice: a pod of an Indexed Job with a subdomain and parallelism > 1 that requests
    google.com/tpu. TPU_WORKER_ID = its index, TPU_WORKER_HOSTNAMES = every pod of that Job (slice), ordered by
    TPU_WORKER_ID: GKE docs "Deploy TPU workloads in GKE Standard", as quoted in
    github.com/abatilo/gke-tpu-env-injector. Each child Job of a JobSet is one slice, so these are per slice.
    The entry format `<hostname>.<subdomain>` and TPU_SKIP_MDS_QUERY=true (JAX's GceTpuCluster then skips the
    metadata server) are this simulator's reading of that contract.

    Multi-slice: a JobSet whose replicatedJob has several such Jobs (replicas > 1) runs on GKE with no
    MEGASCALE_* in the manifest and sees every slice's devices: GKE's own multislice example
    (cloud.google.com/kubernetes-engine/docs/how-to/tpu-multislice, copied in GoogleCloudPlatform/cluster-toolkit
    community/examples/gke-tpu-v6/tpu-multislice.yaml) and JobSet's (site/static/examples/tpu-multislice/
    v6e-jax-workload.yaml, "Global device count: 32" for 2 x 16 chips). So the platform supplies the
    multislice variables. GKE's webhook is not public; the values emulated are the ones users otherwise wire
    by hand from JobSet's labels (kubernetes-sigs/jobset#787): MEGASCALE_NUM_SLICES = the replicatedJob's
    replicas, MEGASCALE_SLICE_ID = the job index, MEGASCALE_COORDINATOR_ADDRESS = the first pod of the first
    slice, `<jobset>-<replicatedJob>-0-0.<subdomain>`.
    """
    if job.accelerator[0] != "tpu" or not job.subdomain or job.parallelism <= 1 or job.operator is not None:
        return {}
    env = {"TPU_WORKER_ID": str(index), "TPU_WORKER_HOSTNAMES": job.worker_hostnames, "TPU_SKIP_MDS_QUERY": "true"}
    labels = job.pod_labels
    slices = to_int(labels.get(JOBSET_REPLICAS), 1)
    if JOBSET_NAME_LABEL in labels and slices > 1:
        env |= {
            "MEGASCALE_COORDINATOR_ADDRESS": (
                f"{labels[JOBSET_NAME_LABEL]}-{labels.get(JOBSET_RJOB, '')}-0-0.{job.subdomain}"
            ),
            "MEGASCALE_NUM_SLICES": str(slices),
            "MEGASCALE_SLICE_ID": str(job.job_index),
        }
    return env


def install() -> None:
    """Run inside a pod's process after importing jax, before `jax.distributed.initialize()`."""
    from jax._src.clusters import cloud_tpu_cluster

    cloud_tpu_cluster.running_in_cloud_tpu_vm = True  # the pod runs on a TPU VM
    # A TPU VM's `tpu-env` metadata holds no key the env lacks (single slice: no MEGASCALE_*).
    cloud_tpu_cluster.get_tpu_env_value_from_metadata = lambda key: None


def is_marked(env: Mapping[str, str]) -> bool:
    return bool(env.get(MARKER))
