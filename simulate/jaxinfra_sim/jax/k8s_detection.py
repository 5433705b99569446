"""JAX's Kubernetes detection, as the simulator checks it before any pod runs: when it finds a pod's rank, count
and coordinator, and why not.

jax-ml/jax v0.10.2, jax/_src/clusters/cluster.py (`ClusterEnv.auto_detect_unset_distributed_params`) and
jax/_src/clusters/k8s_cluster.py (`K8sCluster`). Whenever `jax.distributed.initialize()` is left an argument to find
(the probe passes none where the env names no rank), JAX asks its detectors in import order (OmpiCluster,
SlurmCluster, GkeTpuCluster, GceTpuCluster, then K8sCluster; Mpi4pyCluster only on request) and takes the first whose
`is_env_present()` holds. K8sCluster's:
- is_env_present: KUBERNETES_SERVICE_HOST is set and `import kubernetes` works (else a warning and False), then
  `kubernetes.config.load_incluster_config()`, which raises ConfigException ("Service token file does not exist.")
  without the ServiceAccount token volume: initialize() fails there, it does not fall through;
- _pod / _job: lists the pods of its namespace by status.podIP, then gets the Job its `job-name` label names, as the
  pod's ServiceAccount (a 403 without RBAC for both);
- get_coordinator_address: the pod's controller must be a Job; `<job>-0.<jobset name>` when the Job carries
  the jobset.sigs.k8s.io/jobset-name label, else `<job>-0.<pod's spec.subdomain>` (none: RuntimeError); the port is
  JAX_COORDINATOR_PORT, else 55527 (JAX_COORDINATOR_ADDRESS, read first by distributed.py, wins over both);
- get_process_count: the Job's spec.parallelism; get_process_id: JOB_COMPLETION_INDEX (an Indexed Job; absent:
  RuntimeError asking for completionMode: Indexed).
So the group JAX forms this way is one Job's pods: each child Job of a JobSet is a group of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jaxinfra.upstream import JOB_COMPLETION_INDEX, JOB_NAME_LABEL, JOB_NAME_LEGACY_LABEL, JOBSET_NAME_LABEL
from jaxinfra_sim.core import model

K8S_DETECTOR = "K8sCluster"
K8S_COORDINATOR_PORT = 55527
"""K8sCluster._coordinator_port (jax-ml/jax v0.10.2, jax/_src/clusters/k8s_cluster.py)."""
K8S_DETECTED = "JAX's Kubernetes detection (K8sCluster)"
"""How the probe and the notes name where a rank came from when K8sCluster supplied it."""
_SLURM_ENV = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID")
_OMPI_ENV = "OMPI_MCA_orte_hnp_uri"


@dataclass(frozen=True)
class Unmet:
    """A condition of JAX's K8sCluster that a pod does not meet: what fails there, and how to meet it."""

    condition: str
    fix: str  # what makes K8sCluster work; "" where only the env contract can


def k8s_job(pod: model.Pod) -> str | None:
    """The Job K8sCluster reads for this pod: the one its `job-name` label names (None: no Job controls it)."""
    return pod.labels.get(JOB_NAME_LEGACY_LABEL) or pod.labels.get(JOB_NAME_LABEL)


@dataclass(frozen=True)
class Coordinator:
    """The coordinator address K8sCluster names: its host, as written (host:port), and the port (None: not a port)."""

    host: str
    raw: str
    port: int | None


def k8s_coordinator(pod: model.Pod, env: Mapping[str, str] | None = None) -> Coordinator | None:
    """The coordinator K8sCluster names for this pod: `<job>-0.<jobset>` or `<job>-0.<subdomain>`, port
    JAX_COORDINATOR_PORT or 55527; None where it names none (no Job, or a plain Job's pod without a subdomain)."""
    env = pod.env if env is None else env
    job = k8s_job(pod)
    group = pod.labels.get(JOBSET_NAME_LABEL) or pod.subdomain
    if job is None or not group:
        return None
    host, raw_port = f"{job}-0.{group}", env.get("JAX_COORDINATOR_PORT") or str(K8S_COORDINATOR_PORT)
    port = int(raw_port) if raw_port.isdigit() and 0 < int(raw_port) < 65536 else None
    return Coordinator(host, f"{host}:{raw_port}", port)


def k8s_unmet(pod: model.Pod, env: Mapping[str, str] | None = None, k8s_client: bool = True) -> Unmet | None:
    """Why JAX's K8sCluster would not find this pod's rank, count and coordinator (jax-ml/jax v0.10.2, see above),
    RBAC aside (`k8s_access.K8sAccess` decides that from the inputs); None where it would. `env`: the process's,
    default the pod's; `k8s_client`: the image's Python can import `kubernetes` (Options.k8s_client)."""
    env = pod.env if env is None else env
    if _OMPI_ENV in env or all(v in env for v in _SLURM_ENV):
        return Unmet(
            f"JAX's {'OmpiCluster' if _OMPI_ENV in env else 'SlurmCluster'} detector comes first and finds its env",
            "",
        )
    if pod.accelerator == "tpu" and ("TPU_PROCESS_ADDRESSES" in env or "TPU_WORKER_HOSTNAMES" in env):
        return Unmet(
            "JAX's GkeTpuCluster detector comes first (TPU_WORKER_HOSTNAMES is set) and needs TPU_WORKER_ID",
            "",
        )
    if "KUBERNETES_SERVICE_HOST" not in env:
        return Unmet("KUBERNETES_SERVICE_HOST is unset", "leave the kubelet's KUBERNETES_SERVICE_HOST in the env")
    if not k8s_client:
        return Unmet(
            "the image's Python cannot import `kubernetes` (--no-k8s-client), so K8sCluster.is_env_present() is false",
            "install JAX with its k8s extra in the image (pip install 'jax[k8s]'; the simulator's --k8s-client)",
        )
    if not pod.token:
        return Unmet(
            "no ServiceAccount token is mounted (automountServiceAccountToken: false), so the kubernetes client's "
            "load_incluster_config() raises ConfigException ('Service token file does not exist.')",
            "set automountServiceAccountToken: true in the pod template (a Role that may list pods and get jobs "
            "bound to its ServiceAccount)",
        )
    if k8s_job(pod) is None:
        return Unmet(
            "no Job controls the pod (K8sCluster supports only pods of a Job or a JobSet's child Job)",
            "",
        )
    if JOB_COMPLETION_INDEX not in env:
        return Unmet(
            "the Job is not Indexed, so JOB_COMPLETION_INDEX, which K8sCluster takes as the rank, is unset",
            "set completionMode: Indexed on the Job",
        )
    if "JAX_COORDINATOR_ADDRESS" not in env and k8s_coordinator(pod, env) is None:
        return Unmet(
            "the pod has no subdomain, so K8sCluster cannot name the coordinator <job>-0.<subdomain>",
            "add a headless Service (clusterIP: None, publishNotReadyAddresses: true) selecting the Job's pods and "
            "set spec.template.spec.subdomain to its name",
        )
    return None


def k8s_detects(pod: model.Pod, env: Mapping[str, str], k8s_client: bool = True) -> bool:
    """Whether `jax.distributed.initialize()` as the probe calls it, in a process with `env`, gets its rank from
    JAX's K8sCluster: no contract env names the rank (`probe.init_kwargs` then leaves detection on) and K8sCluster's
    conditions hold (RBAC aside: a workload whose pods may not read the API is refused before it starts)."""
    return "JAX_PROCESS_ID" not in env and "PROCESS_ID" not in env and k8s_unmet(pod, env, k8s_client) is None
