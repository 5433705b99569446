"""Every name jaxinfra writes or derives: the env contract and who sets each variable, its labels (upstream's names
are in `jaxinfra.upstream`).

With `jaxinfra.upstream`, the lowest layer of the core (it imports nothing of jaxinfra): the spec checks user
input against these names, and the backends (`jaxinfra.backends`, just above) derive a job's pod names from them, so
that the spec can check that every derived name fits a DNS label; the plan and render use them.
So data flows one way, spec -> plan -> render, and neither spec nor plan needs the other to know
what a pod will be called.
"""

from __future__ import annotations

#: The contract's env names (docs/design.md, "The env contracts"). User env may reference them but not set them.
COORDINATOR_ADDRESS = "JAX_COORDINATOR_ADDRESS"
NUM_PROCESSES = "JAX_NUM_PROCESSES"
PROCESS_ID = "JAX_PROCESS_ID"
INIT_TIMEOUT = "JAX_INITIALIZATION_TIMEOUT"
NUM_CPU_DEVICES = "JAX_NUM_CPU_DEVICES"
MEGASCALE_COORDINATOR = "MEGASCALE_COORDINATOR_ADDRESS"
MEGASCALE_NUM_SLICES = "MEGASCALE_NUM_SLICES"
MEGASCALE_SLICE_ID = "MEGASCALE_SLICE_ID"
TPU_WORKER_ID = "TPU_WORKER_ID"
TPU_WORKER_HOSTNAMES = "TPU_WORKER_HOSTNAMES"
CONTRACT_ENV = frozenset(
    {
        COORDINATOR_ADDRESS,
        NUM_PROCESSES,
        PROCESS_ID,
        INIT_TIMEOUT,
        NUM_CPU_DEVICES,
        MEGASCALE_COORDINATOR,
        MEGASCALE_NUM_SLICES,
        MEGASCALE_SLICE_ID,
        TPU_WORKER_ID,
        TPU_WORKER_HOSTNAMES,
    }
)
#: Who puts each env var in front of a rank (`JobPlan.env_sources`, `explain`).
BY_JAXINFRA = "jaxinfra"
BY_DOWNWARD_API = "Kubernetes (downward API)"
BY_JOB_CONTROLLER = "Job controller"
BY_OPERATOR = "Training Operator"
BY_TRAINER = "Trainer JAX plugin"
BY_GKE_TPU = "GKE (TPU platform)"
BY_EXPANSION = "Kubernetes ($(VAR) expansion)"
BY_SHADOW_SHELL = "jaxinfra (shell before the command)"

#: A job's checkpoint storage (`JaxJob.checkpoints`): mounted at one path in the JAX container, which the program
#: reads from this variable (the SETTINGS of jaxinfra/templates/train/train.py); jaxinfra sets it only when the job
#: names its storage.
CHECKPOINT_ENV = "JAXINFRA_CHECKPOINT_DIR"
CHECKPOINT_DIR = "/checkpoints"
CHECKPOINT_VOLUME = "checkpoints"

CONTAINER = "jax"
PORT_NAME = "coordinator"
MAX_NAME = 63

#: The env contract's variables that Trainer v2's JAX plugin injects itself (kubeflow/trainer plugins/jax/jax.go).
TRAINER_ENV = (COORDINATOR_ADDRESS, NUM_PROCESSES, PROCESS_ID)

#: Labels jaxinfra owns on every object; user labels may not override them.
MANAGED_BY = "app.kubernetes.io/managed-by"
APP_NAME = "app.kubernetes.io/name"
PART_OF = "app.kubernetes.io/part-of"
OWN_LABELS = frozenset({MANAGED_BY, APP_NAME, PART_OF})

#: On every workload of a CPU shadow: what it shadows (`jaxinfra.shadow`).
SHADOW_OF = "jaxinfra.dev/shadow-of"

#: What JAX's Kubernetes auto-detection reads (docs/design.md, "Least-privilege API access"): exactly these, no
#: wildcards.
API_RULES: tuple[dict[str, list[str]], ...] = (
    {"apiGroups": [""], "resources": ["pods", "services"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
)


def checkpoint_claim(job: str) -> str:
    """The PersistentVolumeClaim jaxinfra renders for a job's checkpoints when `PVC(size=...)` names none."""
    return f"{job}-{CHECKPOINT_VOLUME}"


def queue_name(cluster: str, pool: str) -> str:
    """The Kueue ResourceFlavor and ClusterQueue of a node pool (cluster-scoped, so the cluster's name first)."""
    return f"{cluster}-{pool}"


def gke_topology(cluster: str) -> str:
    """The Kueue Topology of GKE's node topology levels (cluster-scoped: the cluster's name first)."""
    return f"{cluster}-gke-topology"


def workload_priority_class(cluster: str, value: int) -> str:
    """The Kueue WorkloadPriorityClass of the jobs with `queue_priority=value` (cluster-scoped: the cluster's name
    first)."""
    return f"{cluster}-priority-{value}"


def provisioning_check(cluster: str, pool: str) -> str:
    """The Kueue AdmissionCheck and ProvisioningRequestConfig of a flex-start pool (both cluster-scoped)."""
    return f"{queue_name(cluster, pool)}-{PROVISIONING_SUFFIX}"


#: What `provisioning_check` adds to the pool's queue name.
PROVISIONING_SUFFIX = "flex-start"
