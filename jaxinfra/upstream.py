"""Upstream's names, each spelled once: the API groups and versions, label and annotation keys, controller names,
namespaces and env vars that Kubernetes, GKE, JobSet, Kueue and Kubeflow define, and jaxinfra renders or reads.

The lowest layer (it imports nothing of jaxinfra): the spec, backends, plan, render, the Pulumi program, the
admission emulation and the simulator all take these names from here, so a name upstream changes is changed in one
place. jaxinfra's own names (its env contract, its labels, who sets what) are in `jaxinfra.names`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# --- Kubernetes (kubernetes/kubernetes) -------------------------------------------------------------------------------

#: API groups and versions of the built-in kinds jaxinfra renders or the API server emulation knows.
BATCH_API = "batch/v1"
RBAC_API_GROUP = "rbac.authorization.k8s.io"
RBAC_API = "rbac.authorization.k8s.io/v1"
NETWORKING_API = "networking.k8s.io/v1"

#: Namespaces every cluster has (staging/src/k8s.io/api/core/v1/types.go NamespaceDefault, NamespaceSystem,
#: NamespacePublic, NamespaceNodeLease): jaxinfra never renders (or labels) them.
KUBE_SYSTEM = "kube-system"
SYSTEM_NAMESPACES = frozenset({"default", KUBE_SYSTEM, "kube-public", "kube-node-lease"})
#: The label the API server puts on every namespace, with its name (core/v1 well_known_labels.go LabelMetadataName).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

#: The Job controller's and the Job API's keys (pkg/apis/batch/types.go; kubernetes.io/docs/reference/
#: labels-annotations-taints): the selector labels the API server puts on a Job's pod template (each also under its
#: legacy unprefixed name), an Indexed Job's completion index (a label and an annotation on each pod) and its
#: per-index failure count (job_controller.go, indexed_job_utils.go).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOB_NAME_LEGACY_LABEL = "job-name"
JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_UID_LEGACY_LABEL = "controller-uid"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
#: Set by the Job controller in every pod of an Indexed Job (JobSet's children too).
JOB_COMPLETION_INDEX = "JOB_COMPLETION_INDEX"
#: The Job controller's name, a Job's default `spec.managedBy` (batch/v1 JobControllerName).
JOB_CONTROLLER = "kubernetes.io/job-controller"

#: Pod Security admission (kubernetes.io/docs/concepts/security/pod-security-admission).
POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"

# --- GKE (cloud.google.com/kubernetes-engine/docs) --------------------------------------------------------------------

#: The extended resources of accelerator nodes (GKE's TPU and NVIDIA GPU device plugins).
TPU_RESOURCE = "google.com/tpu"
GPU_RESOURCE = "nvidia.com/gpu"
#: The node labels GKE sets on a node pool's nodes.
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
TPU_ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TPU_TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
GPU_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
#: The label (and taint) GKE puts on Spot VMs' nodes; a pool with `spot=True` selects and tolerates it.
SPOT_LABEL = "cloud.google.com/gke-spot"
#: The label of the nodes of a flex-start pool with queued provisioning, which its pods select, as xpk's workloads
#: do (AI-Hypercomputer/xpk @ 446cfe17 src/xpk/core/capacity.py get_capacity_node_selectors_from_capacity_type), and
#: the taint GKE gives them (NoSchedule, value "true"), which its pods tolerate.
QUEUED_LABEL = "cloud.google.com/gke-queued"
#: GKE's ProvisioningRequest class for flex-start with queued provisioning (GKE docs, how-to/provisioningrequest), and
#: the node label that names the request a node was provisioned for, whose value GKE reports in the request's
#: `status.provisioningClassDetails` under ResizeRequestName: Kueue's podSetUpdates pin the admitted pods to those
#: nodes (AI-Hypercomputer/xpk @ 9878d93a goldens/Basic_cluster_adapt.txt, its ProvisioningRequestConfig).
QUEUED_PROVISIONING_CLASS = "queued-provisioning.gke.io"
#: The node labels of GKE's physical topology on the VMs it places in blocks (A4X, A4 and A3 Ultra among them: AI
#: Hypercomputer docs, "Schedule GKE workloads with Topology Aware Scheduling"), from the widest to the narrowest,
#: then the node itself: the levels of the Kueue Topology xpk applies (`gke-default`).
GKE_TOPOLOGY_LEVELS = {
    "block": "cloud.google.com/gce-topology-block",
    "subblock": "cloud.google.com/gce-topology-subblock",
    "host": "cloud.google.com/gce-topology-host",
}
HOSTNAME_LABEL = "kubernetes.io/hostname"
PROVISIONING_REQUEST_LABEL = "autoscaling.gke.io/provisioning-request"
RESIZE_REQUEST_DETAIL = "ResizeRequestName"
#: GKE's Cloud Storage FUSE CSI driver (cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/
#: cloud-storage-fuse-csi-driver; GoogleCloudPlatform/gcs-fuse-csi-driver pkg/webhook/mutatingwebhook.go): a `csi`
#: volume with this driver and `volumeAttributes.bucketName`, and the pod annotation that makes GKE's webhook inject
#: the driver's sidecar.
GCSFUSE_DRIVER = "gcsfuse.csi.storage.gke.io"
GCSFUSE_ANNOTATION = "gke-gcsfuse/volumes"
#: GKE multi-networking's API (the Network and GKENetworkParamSet kinds of the GPUDirect stacks).
GKE_NETWORKING_API_GROUP = "networking.gke.io"
GKE_NETWORKING_API = "networking.gke.io/v1"

# --- JobSet (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go) ---------------------------------------------

JOBSET_API_GROUP = "jobset.x-k8s.io"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
#: JobSet's controller name, a JobSet's default `spec.managedBy`.
JOBSET_CONTROLLER = "jobset.sigs.k8s.io/jobset-controller"
#: The keys the JobSet controller stamps on child Jobs and their pods, as labels and as annotations
#: (pkg/controllers/jobset_controller.go labelAndAnnotateObject); all share this prefix.
JOBSET_KEY_PREFIX = "jobset.sigs.k8s.io/"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID = "jobset.sigs.k8s.io/jobset-uid"
JOBSET_RJOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
JOBSET_GLOBAL_REPLICAS = "jobset.sigs.k8s.io/global-replicas"
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOBSET_JOB_GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
JOBSET_JOB_KEY = "jobset.sigs.k8s.io/job-key"
JOBSET_RESTART = "jobset.sigs.k8s.io/restart-attempt"
JOBSET_GROUP_NAME = "jobset.sigs.k8s.io/group-name"
JOBSET_GROUP_REPLICAS = "jobset.sigs.k8s.io/group-replicas"
JOBSET_GROUP_INDEX = "jobset.sigs.k8s.io/job-group-index"
JOBSET_COORDINATOR = "jobset.sigs.k8s.io/coordinator"
JOBSET_PRIORITY = "jobset.sigs.k8s.io/priority"
#: Exclusive placement: one child Job per value of the named node label (a TPU slice's node pool).
EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
JOBSET_NODE_SELECTOR = "alpha.jobset.sigs.k8s.io/node-selector"

# --- Kueue (kubernetes-sigs/kueue pkg/controller/constants/constants.go) ---------------------------------------------

KUEUE_API_GROUP = "kueue.x-k8s.io"
KUEUE_API = "kueue.x-k8s.io/v1beta2"  # the storage version of the bundled CRDs; v1beta1 is deprecated
#: Kueue reads the LocalQueue of every integration (JobSet, Job, JAXJob, TrainJob) from this label on the workload's
#: own metadata (pkg/controller/jobframework QueueNameForObject).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
#: Partial admission of a batch Job: the fewest pods Kueue may admit it with (pkg/controller/jobs/job).
MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
#: Topology-Aware Scheduling: a pod template's request that all its pods land within one domain of this level (a node
#: label of the flavor's Topology), required or preferred (pkg/controller/constants; kueue.sigs.k8s.io docs, TAS).
TOPOLOGY_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
TOPOLOGY_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
#: MultiKueue's controller name (an AdmissionCheck's controllerName, a workload's managedBy).
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
#: The controller of Kueue's ProvisioningRequest admission checks (pkg/controller/admissionchecks/provisioning), whose
#: parameters are a ProvisioningRequestConfig.
PROVISIONING_REQUEST_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
#: Kueue's namespace (charts/kueue/README.md), which its webhooks' namespaceSelector leaves out.
KUEUE_SYSTEM = "kueue-system"

# --- Kubeflow Training Operator v1: JAXJob (kubeflow/training-operator pkg/apis/kubeflow.org/v1) ---------------------

KUBEFLOW_API_GROUP = "kubeflow.org"
JAXJOB_API = "kubeflow.org/v1"
#: The operator reads the coordinator port from the container named `jax`, port named `jaxjob-port` (6666 only when
#: absent) (jax_types.go, pkg/controller.v1/jax/envvar.go getPortFromJAXJob), and runs the `Worker` replicas.
JAXJOB_CONTAINER = "jax"
JAXJOB_PORT_NAME = "jaxjob-port"
JAXJOB_DEFAULT_PORT = 6666
JAXJOB_REPLICA = "Worker"
#: The env vars the operator appends to every container, in its order (envvar.go setPodEnv).
OPERATOR_ENV = ("PYTHONUNBUFFERED", "COORDINATOR_PORT", "COORDINATOR_ADDRESS", "NUM_PROCESSES", "PROCESS_ID")
#: Its controller name (jaxjob_controller.go controllerName) and the labels it puts on its pods (common_types.go).
JAXJOB_CONTROLLER = "jaxjob-controller"
JAXJOB_OPERATOR_LABEL = "training.kubeflow.org/operator-name"
JAXJOB_NAME_LABEL = "training.kubeflow.org/job-name"
JAXJOB_REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
JAXJOB_REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JAXJOB_ROLE_LABEL = "training.kubeflow.org/job-role"

# --- Kubeflow Trainer v2: TrainJob (kubeflow/trainer pkg/constants/constants.go, plugins/jax/jax.go) ------------------

TRAINER_API_GROUP = "trainer.kubeflow.org"
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
#: Trainer's controller name, a TrainJob's default `spec.managedBy`.
TRAINJOB_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"
#: The trainer replicatedJob and container are both `node`, found by the ancestor label's value `trainer`; the JAX
#: plugin fixes the coordinator port at 29500 (and injects JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and
#: JAX_PROCESS_ID).
TRAINER_ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_ANCESTOR = "trainer"
TRAINER_NODE = "node"
TRAINER_PORT = 29500

#: What every cluster has without the inputs: the system PriorityClasses and Kubeflow Trainer's built-in runtimes.
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
"""The PriorityClasses every cluster has (kubernetes pkg/apis/scheduling/types.go: SystemCriticalPriority, and 1000
more for the node-critical class)."""
TRAINER_JAX_RUNTIME = "jax-distributed"
INSTALLED_RUNTIMES: Mapping[str, str] = MappingProxyType(
    {
        "deepspeed-distributed": "mpi",
        "mlx-distributed": "mpi",
        "torch-distributed": "torch",
        TRAINER_JAX_RUNTIME: "jax",
        "xgboost-distributed": "xgboost",
        "torchtune-llama3.2-1b": "torch",
        "torchtune-llama3.2-3b": "torch",
        "torchtune-qwen2.5-1.5b": "torch",
    }
)
"""The Kubeflow Trainer's built-in ClusterTrainingRuntimes, by name, with the mlPolicy each has, so a cluster has them
without the inputs: its installation guide applies them together (kubeflow/trainer@8c0f5059
docs/operator-guides/installation.md: `kubectl apply -k manifests/overlays/runtimes`, whose
manifests/base/runtimes/kustomization.yaml lists these files), so a cluster with `jax-distributed` has the others."""
