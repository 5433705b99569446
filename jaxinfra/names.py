"""Every name jaxinfra writes or derives: the env contract and who sets each variable, its labels, upstream keys.

The lowest layer of the core (it imports nothing of jaxinfra): the spec checks user input against
these names, and the backends (`jaxinfra.backends`, just above) derive a job's pod names from them, so
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
#: Set by the Job controller in every pod of an Indexed Job (JobSet's children too).
JOB_COMPLETION_INDEX = "JOB_COMPLETION_INDEX"

#: A job's checkpoint storage (`JaxJob.checkpoints`): mounted at one path in the JAX container, which the program
#: reads from this variable (the SETTINGS of jaxinfra/templates/train/train.py); jaxinfra sets it only when the job
#: names its storage.
CHECKPOINT_ENV = "JAXINFRA_CHECKPOINT_DIR"
CHECKPOINT_DIR = "/checkpoints"
CHECKPOINT_VOLUME = "checkpoints"
#: GKE's Cloud Storage FUSE CSI driver (cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/
#: cloud-storage-fuse-csi-driver): a `csi` volume with this driver and `volumeAttributes.bucketName`, and the pod
#: annotation that makes GKE's webhook inject the driver's sidecar.
GCSFUSE_DRIVER = "gcsfuse.csi.storage.gke.io"
GCSFUSE_ANNOTATION = "gke-gcsfuse/volumes"

CONTAINER = "jax"
PORT_NAME = "coordinator"
MAX_NAME = 63

#: Training Operator v1 (kubeflow/training-operator pkg/apis/kubeflow.org/v1/jax_types.go,
#: pkg/controller.v1/jax/envvar.go): it reads the coordinator port from the container named
#: `jax`, port named `jaxjob-port` (6666 only when absent), and injects these env vars itself.
JAXJOB_CONTAINER = "jax"
JAXJOB_PORT_NAME = "jaxjob-port"
JAXJOB_REPLICA = "Worker"
OPERATOR_ENV = ("COORDINATOR_ADDRESS", "COORDINATOR_PORT", "NUM_PROCESSES", "PROCESS_ID", "PYTHONUNBUFFERED")
#: Trainer v2 (kubeflow/trainer pkg/constants/constants.go, plugins/jax/jax.go): the trainer
#: replicatedJob and container are both `node`, found by the ancestor label; the JAX plugin
#: fixes the coordinator port at 29500 and injects JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES
#: and JAX_PROCESS_ID.
TRAINER_NODE = "node"
TRAINER_PORT = 29500
TRAINER_ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_ANCESTOR = "trainer"
TRAINER_ENV = (COORDINATOR_ADDRESS, NUM_PROCESSES, PROCESS_ID)
#: Kueue reads the LocalQueue of every integration (JobSet, Job, JAXJob, TrainJob) from this
#: label on the workload's own metadata (kueue pkg/controller/jobframework QueueNameForObject).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_API = "kueue.x-k8s.io/v1beta2"  # the storage version of the bundled CRDs; v1beta1 is deprecated

#: Labels jaxinfra owns on every object; user labels may not override them.
MANAGED_BY = "app.kubernetes.io/managed-by"
APP_NAME = "app.kubernetes.io/name"
PART_OF = "app.kubernetes.io/part-of"
OWN_LABELS = frozenset({MANAGED_BY, APP_NAME, PART_OF})

#: Upstream label and annotation keys the controllers set (docs/design.md, "Indices, labels and names").
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JAXJOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOBSET_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"

#: On every workload of a CPU shadow: what it shadows (`jaxinfra.shadow`).
SHADOW_OF = "jaxinfra.dev/shadow-of"

#: Pod Security admission (kubernetes.io/docs/concepts/security/pod-security-admission).
POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"
#: What JAX's Kubernetes auto-detection reads (docs/design.md, "Least-privilege API access"): exactly these, no
#: wildcards.
API_RULES: tuple[dict[str, list[str]], ...] = (
    {"apiGroups": [""], "resources": ["pods", "services"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
)

#: Namespaces every cluster has: jaxinfra never renders (or labels) them.
BUILTIN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


def checkpoint_claim(job: str) -> str:
    """The PersistentVolumeClaim jaxinfra renders for a job's checkpoints when `PVC(size=...)` names none."""
    return f"{job}-{CHECKPOINT_VOLUME}"


def queue_name(cluster: str, pool: str) -> str:
    """The Kueue ResourceFlavor and ClusterQueue of a node pool (cluster-scoped, so the cluster's name first)."""
    return f"{cluster}-{pool}"
