"""GKE's TPU platform, emulated on the CPU: what GKE adds to the pods of a TPU slice, and what a
TPU VM gives JAX, so that JAX's own TPU detection runs unchanged.

1. The env GKE's TPU webhook injects into the pods of a multi-host slice (`pod_env`).
2. The TPU VM itself (`install`, run inside a TPU pod's process before `jax.distributed.initialize()`):
   JAX's detector (jax/_src/clusters/cloud_tpu_cluster.py, GkeTpuCluster) finds the coordinator and
   rank from TPU_WORKER_HOSTNAMES, TPU_WORKER_ID and MEGASCALE_* — provided it runs on a TPU VM and
   can read the VM's `tpu-env` metadata. Here the pod runs on the CPU, so we state those two platform
   facts and let JAX's unchanged detection do the rest (through image.shape, in every TPU pod).
3. libtpu's own group (`join_slice`, under --run-command): the slice's (and a multislice job's) hosts see each
   other's chips even where the program never calls `jax.distributed.initialize()`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from jaxinfra.upstream import JOBSET_NAME_LABEL, JOBSET_REPLICAS, JOBSET_RJOB
from jaxinfra_sim.controllers.base import ChildJob
from jaxinfra_sim.core import model
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
    community/examples/gke-tpu-v6/tpu-multislice.yaml, "Global device count: 32" for 2 x 16 chips, no initialize) and
    JobSet's (kubernetes-sigs/jobset@08dfbdf site/static/examples/tpu-multislice/v6e-jax-workload.yaml, a bare
    initialize, "Total Global TPU Devices: 32" in its task page). So the platform supplies the
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


def join_slice() -> None:
    """In a --run-command TPU pod's Python, after `install`: the group libtpu forms, for a program that never calls
    `jax.distributed.initialize()`.

    On a multi-host slice such a program still sees every chip of the job: GKE's multislice sample runs
    `python -c 'import jax; print("Global device count:", jax.device_count())'` on 2 slices x 4 hosts of v6e 4x4 with
    no initialize (GoogleCloudPlatform/cluster-toolkit@01a7a3ed, community/examples/gke-tpu-v6/tpu-multislice.yaml,
    "based on" cloud.google.com/kubernetes-engine/docs/how-to/tpu-multislice, which prints 32), opening libtpu's own
    ports (8471, 8080, 8431) rather than JAX's coordinator's. JAX does not form that group (jax-ml/jax jax-v0.10.2,
    990e6a0b: jax/_src/cloud_tpu_init.py `cloud_tpu_init` only sets env and `jax_platforms`; jax/_src/xla_bridge.py
    `make_tpu_client` hands libtpu `distributed.global_state.client`, None without initialize, and
    `tpu_client_timer_callback` warns "Did you run your code on all TPU hosts?" while libtpu waits for the others):
    libtpu does, from the env GKE gives the slice's pods (TPU_WORKER_ID, TPU_WORKER_HOSTNAMES; MEGASCALE_* across
    slices: `pod_env`). libtpu is closed, so the group here is JAX's own, from that env as JAX's TPU detection reads
    it (jax/_src/clusters/cloud_tpu_cluster.py, `BaseTpuCluster` and `GkeTpuCluster`: the coordinator the first worker
    of the first slice, the count hosts x slices, the rank slice-major), formed when the CPU backend (the TPU one's
    stand-in) first starts and only where the program did not initialize: its own `jax.distributed.initialize()`,
    bare or with arguments, runs as before, and one called after the backend started fails as on a TPU ("must be
    called before any JAX calls", jax/_src/distributed.py `initialize`). The group stays out of
    `distributed.global_state` but while the CPU client is made, so `jax.distributed.is_initialized()` stays False as
    on a cluster and what needs JAX's own client still says so (jax/experimental/array_serialization/serialization.py,
    `AsyncManager`: `_DISTRIBUTED_SYSTEM_MSG` when process_count() > 1 without it). A pod of one host, or outside a
    slice (no TPU_WORKER_HOSTNAMES), stays alone. The service listens on the port the kubelet bound for this pod's
    coordinator (`kubelet.container.process_env`: JAX's TPU default 8482 unless the env names one); the wait is
    initialize's default, 300 s."""
    import atexit

    from jax._src import distributed, xla_bridge
    from jax._src.clusters import cloud_tpu_cluster

    from jaxinfra_sim.jax.timeouts import JAX_INIT_TIMEOUT

    tpu = cloud_tpu_cluster.GkeTpuCluster
    registration = xla_bridge._backend_factories["cpu"]
    make = registration.factory

    def factory() -> object:
        if distributed.global_state.client is not None or not tpu.is_env_present() or tpu.get_process_count() < 2:
            return make()
        port = (
            os.environ.get("JAX_COORDINATOR_BIND_ADDRESS", "").rpartition(":")[2] or cloud_tpu_cluster.coordinator_port
        )
        group = distributed.State()
        group.initialize(
            tpu.get_coordinator_address(JAX_INIT_TIMEOUT, port),
            tpu.get_process_count(),
            tpu.get_process_id(),
            cluster_detection_method="deactivate",
            initialization_timeout=JAX_INIT_TIMEOUT,
        )
        atexit.register(group.shutdown)
        program, distributed.global_state = distributed.global_state, group
        try:
            return make()
        finally:
            distributed.global_state = program

    xla_bridge.register_backend_factory(
        "cpu", factory, priority=registration.priority, fail_quietly=registration.fail_quietly
    )


def slice_processes(env: Mapping[str, str]) -> int:
    """The processes of the group a pod's TPU env names: the hosts of its slice times the slices, as JAX's TPU
    detection counts them (jax-ml/jax jax-v0.10.2, jax/_src/clusters/cloud_tpu_cluster.py,
    `BaseTpuCluster.get_process_count`, GkeTpuCluster's worker list: TPU_PROCESS_ADDRESSES, else TPU_WORKER_HOSTNAMES);
    1 outside a multi-host slice."""
    workers = env.get("TPU_PROCESS_ADDRESSES", env.get("TPU_WORKER_HOSTNAMES"))
    return 1 if workers is None else len(workers.split(",")) * max(to_int(env.get("MEGASCALE_NUM_SLICES"), 1), 1)


def whole_image_notes(w: model.Workload, given_whole: Callable[[str], bool]) -> list[str]:
    """Under --run-command, the images given whole (`given_whole`) of `w`'s multi-host TPU pods: their own Python runs,
    where nothing of the simulator's stands in for the TPU VM or libtpu (`install`, `join_slice` run only in this
    machine's Python, and putting them in would put this machine's files into the image's root). So a program that
    does not initialize sees its own pod's devices, and a bare `jax.distributed.initialize()` finds no TPU VM; on
    GKE, libtpu, in the image, joins the slice. One note per image."""
    pods = [p for p in w.pods if p.accelerator == "tpu" and slice_processes(p.env) > 1 and given_whole(p.image)]
    notes = []
    for image in sorted({p.image for p in pods}):
        pod = next(p for p in pods if p.image == image)
        processes = slice_processes(pod.env)
        notes.append(
            f"{w.id}: image {image} runs its own Python, where the TPU platform is not emulated: a program in it that "
            f"does not call jax.distributed.initialize() sees its pod's {pod.devices} devices here, "
            f"{pod.devices * processes} on GKE (libtpu joins the {processes} hosts), and a bare "
            "jax.distributed.initialize() finds no TPU VM; give the image as a folder (--image IMAGE=DIR) to run the "
            "program under the emulated platform, or pass the coordinator, count and rank to initialize"
        )
    return notes


def is_marked(env: Mapping[str, str]) -> bool:
    return bool(env.get(MARKER))
