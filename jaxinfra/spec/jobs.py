"""Node pools, the JAX jobs that run on them (backend, resources, env, security, checkpoints) and their CPU shadow.

Each object validates its own fields; rules that relate a job to its pool or to other jobs live in
`jaxinfra.spec.rules`, where the whole cluster is known.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from jaxinfra import backends
from jaxinfra.names import CONTRACT_ENV, OWN_LABELS
from jaxinfra.quantity import is_quantity
from jaxinfra.spec.accelerators import Accelerator
from jaxinfra.spec.base import (
    DNS_SUBDOMAIN,
    LABEL_KEY_FIX,
    LABEL_VALUE_FIX,
    TAG,
    Spec,
    dns_label,
    label_key_problem,
    label_value_ok,
)
from jaxinfra.spec.checkpoints import Checkpoints
from jaxinfra.spec.env import EnvValue, credential_literal
from jaxinfra.spec.extras import (
    Toleration,
    node_selector_entries,
    object_patch_kinds,
    patch_operation,
    priority_class_name,
)
from jaxinfra.spec.problems import problem

#: Workload backends that render today (`jaxinfra.backends`, in its order); the first is the default.
BACKENDS: tuple[str, ...] = backends.NAMES
if TYPE_CHECKING:
    Backend = str
else:
    Backend = Literal[BACKENDS]  # a new backend module adds a choice

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
#: A reservation as GKE's node pools take it (how-to/consuming-reservations): its name (a Compute Engine resource name,
#: RFC 1035), `projects/PROJECT/reservations/NAME` for one shared by another project, and either followed by
#: `/reservationBlocks/BLOCK` (and `/reservationSubBlocks/SUB_BLOCK`) to target a block of it.
_NAME = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
_RESERVATION = re.compile(
    rf"^(projects/[a-z][-a-z0-9.:]{{4,60}}[a-z0-9]/reservations/)?{_NAME}"
    rf"(/reservationBlocks/{_NAME}(/reservationSubBlocks/{_NAME})?)?$"
)

#: How a node pool's nodes are obtained (`NodePool.capacity`); the first is the default.
CAPACITIES = ("on-demand", "spot", "reservation", "flex-start")
if TYPE_CHECKING:
    Capacity = str
else:
    Capacity = Literal[CAPACITIES]
#: The NodePool fields that each choose a capacity other than on-demand; at most one is set.
CAPACITY_FIELDS = ("spot", "reservation", "flex_start")


class NodePool(Spec):
    """A group of identical nodes; for TPU, one node pool per slice is provisioned from it."""

    _positional = ("name", "accelerator")
    name: str = Field(description="Node pool name (DNS-1123 label, at most 40 characters as on GKE).")
    accelerator: Accelerator = Field(
        description="What each node carries: TPU(...) (one node pool per slice), GPU(...) or CPU(...)."
    )
    spot: bool = Field(False, description="Capacity from Spot VMs: pods select and tolerate cloud.google.com/gke-spot.")
    reservation: str | None = Field(
        None,
        description="Capacity from this Compute Engine reservation (specific reservation affinity): its name, "
        "projects/PROJECT/reservations/NAME for one shared with this project, either followed by "
        "/reservationBlocks/BLOCK for one of its blocks; it must hold every node of the pool (a TPU slice pool: the "
        "whole slice).",
    )
    flex_start: bool = Field(
        False,
        description="Capacity from flex-start with queued provisioning (GKE's Dynamic Workload Scheduler): the pool "
        "has no node until Kueue's ProvisioningRequest obtains every node a job needs at once (a TPU slice pool: its "
        "whole slice), and gives them back when the job ends. GPU and TPU pools, Cluster(kueue=True). None of spot, "
        "reservation, flex_start: on-demand VMs.",
    )

    _name = field_validator("name")(lambda v: dns_label(v, 40))

    @field_validator("reservation")
    @classmethod
    def _reservation(cls, v: str | None) -> str | None:
        if v is not None and not _RESERVATION.match(v):
            raise problem(
                "not a Compute Engine reservation",
                "use the reservation's name (lower-case letters, digits and '-', starting with a letter, at most 63), "
                "projects/PROJECT/reservations/NAME for a shared one, then /reservationBlocks/BLOCK for a block",
            )
        return v

    @model_validator(mode="after")
    def _one_capacity(self) -> NodePool:
        """One way to obtain the pool's nodes, as xpk takes one of --on-demand, --reservation, --spot and --flex
        (AI-Hypercomputer/xpk @ 446cfe17 src/xpk/core/capacity.py `get_capacity_type`)."""
        chosen = [f for f in CAPACITY_FIELDS if getattr(self, f)]
        if len(chosen) > 1:
            raise problem(
                f"{' and '.join(chosen)} are each a way to obtain the pool's nodes; a node pool has one",
                "keep one of spot=True, reservation='NAME' or flex_start=True (none of them: on-demand)",
                chosen[-1],
            )
        return self

    @property
    def capacity(self) -> Capacity:
        """How the pool's nodes are obtained: its one capacity field, else on-demand (the default)."""
        if self.flex_start:
            return "flex-start"
        if self.reservation is not None:
            return "reservation"
        return "spot" if self.spot else "on-demand"


class Resources(Spec):
    """Extra container resources; the accelerator's own resource is added from the catalog."""

    requests: dict[str, str | int] = Field(default_factory=dict, description="e.g. {'cpu': '8', 'memory': '64Gi'}.")
    limits: dict[str, str | int] = Field(default_factory=dict, description="Limits; requests default to them.")

    @field_validator("requests", "limits")
    @classmethod
    def _quantities(cls, v: dict[str, str | int]) -> dict[str, str | int]:
        for name, q in v.items():
            if isinstance(q, bool) or not is_quantity(q):
                raise problem(
                    f"{name}: {q!r} is not a Kubernetes quantity", "write it like '8', '500m' or '64Gi'", name
                )
        return v


#: Names of jaxinfra's own training container (`node` for trainjob: Trainer finds it by that name); a sidecar may
#: take none of them, so that switching the backend never makes a valid job invalid.
MAIN_CONTAINERS = tuple(dict.fromkeys(b.container for b in backends.BACKENDS.values()))
#: One RFC 6902 operation, checked for form before it reaches the renderer.
PatchOperation = Annotated[dict[str, Any], BeforeValidator(patch_operation)]


class Sidecar(Spec):
    """A native sidecar (an init container with restartPolicy Always; Kubernetes 1.29+, stable in 1.33): started
    before the training container, running beside it, stopped after it, so the Job still completes when it exits."""

    _positional = ("name", "image")
    name: str = Field(description="Container name (DNS-1123 label); not 'jax' or 'node', jaxinfra's own container.")
    image: str = Field(min_length=1, description="Container image.")
    command: tuple[str, ...] | None = Field(None, description="Container command; None keeps the image's entrypoint.")
    args: tuple[str, ...] = Field((), description="Container args.")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Env as literal strings only; a value from a Secret "
        "goes in with a pod patch (credentials are never inline).",
    )
    resources: Resources = Field(default_factory=Resources, description="Container requests and limits.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        dns_label(v)
        if v in MAIN_CONTAINERS:
            raise problem(
                f"{v!r} is the name of jaxinfra's training container ('jax', or 'node' for trainjob)",
                "give the sidecar another name",
            )
        return v

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, v: Any) -> Any:
        for name, value in v.items() if isinstance(v, dict) else ():
            if not isinstance(value, str):
                raise problem(
                    "a sidecar's env takes literal strings only",
                    "use a string, or add {'name': ..., 'valueFrom': ...} to the sidecar with a pod patch "
                    "(path '/spec/initContainers/<i>/env/-')",
                    name,
                )
            if not _ENV_NAME.match(name):
                raise problem(
                    f"{name!r} is not a valid env var name",
                    "use letters, digits, '_', '-' or '.', not starting with a digit",
                    name,
                )
            if why := credential_literal(name, value):
                raise problem(
                    f"{why}: secrets never go inline into manifests",
                    "store it in a Secret and add it to the sidecar with a pod patch: {'op': 'add', 'path': "
                    "'/spec/initContainers/<i>/env/-', 'value': {'name': ..., 'valueFrom': {'secretKeyRef': "
                    "{'name': ..., 'key': ...}}}}",
                    name,
                )
        return v


class JaxJob(Spec):
    """A multi-host JAX training job: one process per host (TPU VM or GPU/CPU node)."""

    _positional = ("name",)
    name: str = Field(description="Job name; names the workload, Service and pods (DNS-1123 label).")
    namespace: str = Field("default", description="Namespace of every object of the job.")
    image: str = Field(min_length=1, description="Container image.")
    command: tuple[str, ...] | None = Field(None, description="Container command; None keeps the image's entrypoint.")
    args: tuple[str, ...] = Field((), description="Container args.")
    env: dict[str, EnvValue] = Field(
        default_factory=dict,
        description="Extra env: a literal string (may reference the "
        "contract as $(JAX_PROCESS_ID)), SecretRef(name, key) or ConfigMapRef(name, key). "
        "Credentials must be SecretRefs: a literal that looks like one is rejected.",
    )
    node_pool: str = Field(description="Name of the node pool the job runs on.")
    slices: int | None = Field(None, gt=0, description="TPU slices (multi-slice over DCN); default 1. TPU pools only.")
    nodes: int | None = Field(None, gt=0, description="GPU/CPU nodes, one process each; default 1. GPU/CPU pools only.")
    coordinator_port: int = Field(
        8482, ge=1, le=65535, description="JAX coordinator port (8482 is JAX's own TPU default)."
    )
    backend: Backend = Field(
        BACKENDS[0],
        description="Workload kind: "
        + backends.words(f"{b.name} ({b.summary})" for b in backends.BACKENDS.values())
        + f"; default {BACKENDS[0]}.",
    )
    runtime: str | None = Field(
        None,
        description="trainjob only. None: jaxinfra renders a TrainingRuntime named after the "
        "job, with mlPolicy.jax and the pool's placement; a name (e.g. 'jax-distributed'): reference "
        "that ClusterTrainingRuntime and render none (CPU pools only: it has no TPU/GPU placement).",
    )
    max_restarts: int = Field(0, ge=0, le=1000, description="Whole-group restarts before the job fails.")
    init_timeout_seconds: int = Field(
        300, gt=0, le=86400, description="JAX rendezvous timeout (JAX_INITIALIZATION_TIMEOUT)."
    )
    resources: Resources = Field(default_factory=Resources, description="Extra container resources.")
    shm_size: str = Field("16Gi", description="Size limit of the memory-backed /dev/shm of GPU pods (NCCL).")
    labels: dict[str, str] = Field(default_factory=dict, description="Extra labels on every object and pod.")
    run_as_user: int = Field(
        1000,
        ge=1,
        le=2147483647,
        description="UID of the container process (pod securityContext "
        "runAsUser). Pods run as non-root (Pod Security `restricted`); many images (python:3.11-slim, "
        "most JAX images) default to root, and the kubelet refuses runAsNonRoot with a root image "
        "unless a numeric non-root user is set, hence 1000. Use the image's own user if it has one.",
    )
    run_as_group: int = Field(1000, ge=1, le=2147483647, description="GID of the container process (runAsGroup).")
    fs_group: int = Field(
        1000,
        ge=1,
        le=2147483647,
        description="Group that owns mounted volumes (fsGroup), so the non-root user can write them.",
    )
    privileged: bool = Field(
        False,
        description="Run the container privileged: an exception to Pod Security `restricted` "
        "(and baseline), only for platforms that require it (e.g. TPU device access on old GKE "
        "versions). Off: jaxinfra never sets it by default.",
    )
    host_network: bool = Field(
        False,
        description="Run the pods in the node's network namespace (hostNetwork, with "
        "dnsPolicy ClusterFirstWithHostNet so cluster DNS still resolves). GKE's multi-slice TPU "
        "examples set it for DCN throughput; it is an exception to Pod Security `restricted`, and "
        "NetworkPolicies do not apply to host-network pods. Off by default.",
    )
    kubernetes_api: bool = Field(
        False,
        description="The pods use the Kubernetes API (JAX's Kubernetes cluster "
        "auto-detection): a Role with get/list/watch on pods, services and batch jobs in the "
        "job's namespace, a RoleBinding to the job's ServiceAccount, and its token mounted. "
        "Off: no Role, no token.",
    )
    network_policy: bool = Field(
        True,
        description="Render a NetworkPolicy: only the job's own pods may connect to its "
        "pods (coordinator and collective ports); egress is left to the user.",
    )
    annotations: dict[str, str] = Field(default_factory=dict, description="Extra annotations on every object and pod.")
    checkpoints: Checkpoints = Field(
        None,
        description="Where checkpoints live, outliving the pods: GCSBucket(name) "
        "or PVC(name) / PVC(size=...), mounted read-write at /checkpoints in every pod "
        "and named by JAXINFRA_CHECKPOINT_DIR. None: no storage, no variable.",
    )
    priority_class: str | None = Field(
        None,
        description="PriorityClass of the pods (priorityClassName); it must exist "
        "in the cluster. None: the cluster's default priority.",
    )
    queue_priority: int | None = Field(
        None,
        ge=0,
        le=1_000_000_000,
        description="Kueue only (Cluster(kueue=True)): the workload's priority in its queue, as a "
        "WorkloadPriorityClass `<cluster>-priority-<value>` that jaxinfra renders and the workload names (label "
        "kueue.x-k8s.io/priority-class): Kueue admits higher first and may preempt lower for it. Apart from the pods' "
        "scheduling priority (priority_class). None: Kueue takes the pods' priority, else 0.",
    )
    topology: Literal["block", "subblock", "host"] | None = Field(
        None,
        description="Kueue Topology-Aware Scheduling (Cluster(kueue=True), GPU pools): place every pod of the job "
        "within one GKE block, sub-block or host (the nodes' cloud.google.com/gce-topology-* labels, which GKE sets on "
        "the VMs it places in blocks: A4X, A4 and A3 Ultra among them); preferred unless topology_required. jaxinfra "
        "renders the Topology and names it on the pool's ResourceFlavor. None: no placement request.",
    )
    topology_required: bool = Field(
        False,
        description="With topology: Kueue admits the job only where one domain holds all its pods "
        "(podset-required-topology); False: as close as it can (podset-preferred-topology).",
    )
    tolerations: tuple[Toleration, ...] = Field(
        (), description="Tolerations added after the ones jaxinfra renders for the pool (TPU/GPU taints, Spot)."
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict,
        description="Node labels the pods select, beside the "
        "pool's; the pool's own keys (accelerator, topology, Spot) are not allowed "
        "here. A CPU shadow drops them with the pool's.",
    )
    sidecars: tuple[Sidecar, ...] = Field(
        (),
        description="Native sidecars (initContainers with restartPolicy Always, "
        "Kubernetes 1.29+) in every pod, in this order.",
    )
    pod_patches: tuple[PatchOperation, ...] = Field(
        (),
        description="RFC 6902 JSON Patch operations applied, in "
        "order and after everything else, to the pod template (the object "
        "with metadata and spec that every backend embeds), so one patch "
        "serves every backend. An operation that does not apply is a spec "
        "problem.",
    )
    object_patches: dict[str, tuple[PatchOperation, ...]] = Field(
        default_factory=dict,
        description="RFC 6902 JSON Patch operations per kind of object the job renders (JobSet, Service, "
        "ServiceAccount, NetworkPolicy, ...: one object of each kind per job), applied in order after everything "
        "else, pod patches included: the escape hatch for a field jaxinfra does not model. A kind the job does not "
        "render, or an operation that does not apply, is a spec problem.",
    )

    _names = field_validator("name", "namespace")(lambda v: dns_label(v))
    _priority_class = field_validator("priority_class")(priority_class_name)
    _node_selector = field_validator("node_selector")(node_selector_entries)
    _object_patches = field_validator("object_patches")(object_patch_kinds)

    @field_validator("sidecars")
    @classmethod
    def _sidecar_names(cls, v: tuple[Sidecar, ...]) -> tuple[Sidecar, ...]:
        names = [s.name for s in v]
        if dup := next((n for i, n in enumerate(names) if n in names[:i]), None):
            raise problem(f"two sidecars are named {dup!r}", "give each sidecar its own name")
        return v

    @field_validator("runtime")
    @classmethod
    def _runtime_name(cls, v: str | None) -> str | None:
        if v is not None and (len(v) > 253 or not DNS_SUBDOMAIN.match(v)):
            raise problem(
                "not a valid ClusterTrainingRuntime name", "use a DNS-1123 subdomain such as 'jax-distributed'"
            )
        return v

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name, value in v.items():
            if not _ENV_NAME.match(name):
                raise problem(
                    f"{name!r} is not a valid env var name",
                    "use letters, digits, '_', '-' or '.', not starting with a digit",
                    name,
                )
            if name in CONTRACT_ENV:
                raise problem(
                    f"{name} is set by jaxinfra's env contract",
                    "remove it; set coordinator_port, init_timeout_seconds or the pool instead",
                    name,
                )
            if isinstance(value, str) and (why := credential_literal(name, value)):
                raise problem(
                    f"{why}: secrets never go inline into manifests",
                    f"store it in a Secret (kubectl create secret generic NAME --from-literal=KEY=...) and use "
                    f"env={{{name!r}: SecretRef('NAME', 'KEY')}}",
                    name,
                )
        return v

    @field_validator("labels", "annotations")
    @classmethod
    def _metadata(cls, v: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        for key, value in v.items():
            if why := label_key_problem(key):
                raise problem(why, LABEL_KEY_FIX, key)
            if info.field_name == "labels" and key in OWN_LABELS:
                raise problem(f"{key} is set by jaxinfra", "remove it", key)
            if info.field_name == "labels" and not label_value_ok(value):
                raise problem(f"label value {value!r} is not valid", LABEL_VALUE_FIX, key)
        return v

    @field_validator("shm_size")
    @classmethod
    def _shm(cls, v: str) -> str:
        if not is_quantity(v):
            raise problem("not a Kubernetes quantity", "write it like '16Gi'")
        return v

    @model_validator(mode="after")
    def _dns1035_name(self) -> JaxJob:
        derives = backends.get(self.backend).dns1035
        if derives is not None and not self.name[0].isalpha():
            raise problem(
                f"{derives} DNS-1035 names from it, which start with a letter",
                "start the name with a letter",
                "name",
            )
        return self

    @model_validator(mode="after")
    def _customized_upstream(self) -> JaxJob:
        """A referenced ClusterTrainingRuntime has no pod template of jaxinfra's: its customizations would vanish."""
        if self.upstream_runtime and (fields := self.customizations):
            raise problem(
                f"ClusterTrainingRuntime {self.runtime!r} is not jaxinfra's: jaxinfra renders no pod "
                f"template to apply {', '.join(fields)} to",
                f"remove runtime (jaxinfra's TrainingRuntime takes them), or remove {', '.join(fields)}",
                fields[0],
            )
        return self

    @property
    def customizations(self) -> tuple[str, ...]:
        """The pod customization fields this job sets (priority_class, tolerations, ...), in declaration order."""
        fields = ("priority_class", "tolerations", "node_selector", "sidecars", "pod_patches")
        return tuple(f for f in fields if getattr(self, f))

    @property
    def upstream_runtime(self) -> bool:
        """A TrainJob on a ClusterTrainingRuntime that jaxinfra does not render: its pod template is not jaxinfra's."""
        return backends.get(self.backend).runtimes and self.runtime is not None

    @property
    def num_slices(self) -> int:
        return self.slices or 1

    @property
    def num_nodes(self) -> int:
        return self.nodes or 1


class Shadow(Spec):
    """A CPU shadow of every job, for a real cluster without accelerators (`jaxinfra synth --shadow cpu`).

    The same processes, names, Services, restart rules and queues; each process on a CPU pod with
    as many JAX CPU devices as it would have chips, and the env the accelerator platform would inject
    written out (`jaxinfra.shadow` says what a shadow proves and what it cannot).
    """

    kind: Literal["cpu"] = Field("cpu", description=TAG)
    cpu: str = Field(
        "100m",
        description="CPU request of each process (no limit): the collectives of a small program "
        "need little; raise it for the real training step.",
    )
    memory: str = Field(
        "256Mi",
        description="Memory request of each process (no limit): JAX's CPU runtime with a "
        "small program (a probe process peaked at ~215 MiB); raise it for a real model.",
    )

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, v: str) -> str:
        if not is_quantity(v):
            raise problem("not a Kubernetes quantity", "write it like '100m', '1' or '256Mi'")
        return v
