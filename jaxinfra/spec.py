"""The user-facing declarative model: a `Cluster` of `NodePool`s and `JaxJob`s.

Every default lives here, documented on its field. Validation is deferred to the root: leaf
objects (`TPU(...)`, `JaxJob(...)`) only record what they were given, and `Cluster(...)`
validates the whole tree in one pass, so one `SpecError` lists every problem with its path
(`jobs[0].coordinator_port`) instead of stopping at the first constructor that fails.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, PrivateAttr, Tag, ValidationError
from pydantic import ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from jaxinfra import catalog
from jaxinfra.errors import CatalogError, Problem, SpecError
from jaxinfra.names import (BUILTIN_NAMESPACES, CHECKPOINT_ENV, CONTRACT_ENV, MAX_NAME, OPERATOR_ENV, OWN_LABELS, QUEUE_LABEL,
                            TRAINER_PORT, JobNames, checkpoint_claim, queue_name)

#: Workload backends that render today; the first is the default.
BACKENDS: tuple[str, ...] = ("jobset", "job", "jaxjob", "trainjob")
Backend = Literal["jobset", "job", "jaxjob", "trainjob"]

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_QUANTITY = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+|[KMGTPE]i?|[munkMGTPE])?$")


def problem(message: str, fix: str, field: str | None = None) -> PydanticCustomError:
    """A validation error that carries its fix (and optionally a sub-field) to `SpecError`."""
    return PydanticCustomError("jaxinfra", message, {"fix": fix, "field": field or ""})


def dns_label(value: str, max_len: int = 63) -> str:
    """Kubernetes names that become DNS labels: lower-case alphanumerics and '-'."""
    if len(value) > max_len or not _DNS_LABEL.match(value):
        raise problem(
            f"not a DNS-1123 label of at most {max_len} characters",
            "use lower-case letters, digits and '-', starting and ending alphanumeric",
        )
    return value


class Spec(BaseModel):
    """Base of every spec object: frozen, no unknown fields, validated by the root.

    Calling a spec class records its input (`__init__`); the root `Cluster` validates the
    whole tree later. Pydantic builds validated objects with `__new__` alone, never through
    `__init__`, as long as `__pydantic_custom_init__` is false (BaseModel's documented class
    attribute, which `__pydantic_init_subclass__` resets because this `__init__` only serves the
    user's call), so validated objects are ordinary models. `defer_build`: only the root's
    validator is compiled (with these inlined), which keeps the CLI's start-up short.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    _positional: ClassVar[tuple[str, ...]] = ()
    _input: dict[str, Any] | None = PrivateAttr(default=None)

    def __init__(self, /, *args: Any, **data: Any) -> None:
        positional = type(self)._positional
        if len(args) > len(positional):
            raise TypeError(f"{type(self).__name__}() takes at most {len(positional)} positional arguments")
        data.update(zip(positional, args))
        shell = type(self).model_construct(**data)  # fields as given, defaults filled in, nothing checked
        shell._input = data
        self.__setstate__(shell.__getstate__())

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.__pydantic_custom_init__ = False


def raw(value: Any) -> Any:
    """The unvalidated input tree: what the user passed, for one validation pass at the root."""
    if isinstance(value, Spec):
        if value._input is None:  # already validated (reused from another cluster)
            data = {k: getattr(value, k) for k in value.model_fields_set}
        else:
            data = dict(value._input)
        if "kind" in type(value).model_fields:
            data.setdefault("kind", type(value).model_fields["kind"].default)
        return {k: raw(v) for k, v in data.items()}
    if isinstance(value, (list, tuple)):
        return [raw(v) for v in value]
    if isinstance(value, dict):
        return {k: raw(v) for k, v in value.items()}
    return value


def _catalog_problem(err: CatalogError, field: str | None = None) -> PydanticCustomError:
    """The catalog's problem, located at `field` (or the catalog's own field name)."""
    p = err.problems[0]
    return problem(p.message, p.fix, field or p.path)


# --- accelerators ---------------------------------------------------------------------------


class TPU(Spec):
    """A TPU slice type: `TPU("v5p", "2x2x4")` or by alias, `TPU("v5p-32")`."""

    _positional = ("generation", "topology")
    kind: Literal["tpu"] = "tpu"
    generation: str = Field(description="TPU generation: v4, v5e, v5p, v6e, tpu7x (or an alias such as v5p-32).")
    topology: str | None = Field(None, description="Chip topology, e.g. 2x2x4; omit when `generation` is an alias.")

    @model_validator(mode="after")
    def _in_catalog(self) -> TPU:
        try:
            row = catalog.resolve(self.generation) if self.topology is None else catalog.tpu(self.generation, self.topology)
        except CatalogError as err:
            raise _catalog_problem(err, "generation" if self.topology is None else None) from None
        if row.kind != "tpu":
            raise problem(f"{row.name} is a {row.kind}, not a TPU", f"use {row.kind.upper()}(...)", "generation")
        if (row.family, row.topology) != (self.generation, self.topology):
            return TPU.model_validate({"generation": row.family, "topology": row.topology})
        return self

    @property
    def row(self) -> catalog.Accelerator:
        return catalog.tpu(self.generation, self.topology or "")


class GPU(Spec):
    """GPU nodes: `GPU("h100-80gb", 8)` is a node with 8 H100 80 GB GPUs."""

    _positional = ("type", "count")
    kind: Literal["gpu"] = "gpu"
    type: str = Field(description="GPU type, e.g. l4, a100-40gb, a100-80gb, h100-80gb, h100-mega-80gb, h200-141gb, b200.")
    count: int = Field(gt=0, description="GPUs per node (one JAX process per node uses all of them).")

    @model_validator(mode="after")
    def _in_catalog(self) -> GPU:
        try:
            row = catalog.gpu(self.type, self.count)
        except CatalogError as err:
            raise _catalog_problem(err) from None
        if row.family != self.type:
            return GPU.model_validate({"type": row.family, "count": self.count})
        return self

    @property
    def row(self) -> catalog.Accelerator:
        return catalog.gpu(self.type, self.count)


class CPU(Spec):
    """CPU-only nodes: each JAX process gets `devices` CPU devices (`JAX_NUM_CPU_DEVICES`)."""

    _positional = ("devices",)
    kind: Literal["cpu"] = "cpu"
    devices: int = Field(1, gt=0, le=1024, description="JAX CPU devices per process.")
    machine_type: str | None = Field(None, description="Optional machine type for a provisioned node pool.")

    @property
    def row(self) -> catalog.Accelerator:
        return catalog.cpu()


def _kind(value: Any) -> str | None:
    """A tagged union member's tag: its `kind`, as an object or as the user's dict."""
    return value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)


def tagged(members: dict[str, Any], what: str, fix: str, tag: Any = _kind) -> Any:
    """A union of `members` (tag -> type) told apart by `tag(value)`; any other value is one problem, `not <what>`.

    Optional members are a tag of their own (`None`: "none"): `X | None` of such a union cannot be built, since its
    error context is a dict, which typing cannot hash.
    """
    return Annotated[Union[tuple(Annotated[t, Tag(k)] for k, t in members.items())],  # type: ignore[misc]
                     Discriminator(tag, custom_error_type="jaxinfra", custom_error_message=f"not {what}",
                                   custom_error_context={"fix": fix, "field": ""})]


Accelerator = tagged({"tpu": TPU, "gpu": GPU, "cpu": CPU}, "an accelerator", "use TPU(...), GPU(...) or CPU(...)")


# --- node pools and jobs --------------------------------------------------------------------


class NodePool(Spec):
    """A group of identical nodes; for TPU, one node pool per slice is provisioned from it."""

    _positional = ("name", "accelerator")
    name: str = Field(description="Node pool name (DNS-1123 label, at most 40 characters as on GKE).")
    accelerator: Accelerator
    spot: bool = Field(False, description="Use Spot VMs: pods select and tolerate cloud.google.com/gke-spot.")
    reservation: str | None = Field(None, description="Name of a capacity reservation to consume.")

    _name = field_validator("name")(lambda v: dns_label(v, 40))


class Resources(Spec):
    """Extra container resources; the accelerator's own resource is added from the catalog."""

    requests: dict[str, str | int] = Field(default_factory=dict, description="e.g. {'cpu': '8', 'memory': '64Gi'}.")
    limits: dict[str, str | int] = Field(default_factory=dict, description="Limits; requests default to them.")

    @field_validator("requests", "limits")
    @classmethod
    def _quantities(cls, v: dict[str, str | int]) -> dict[str, str | int]:
        for name, q in v.items():
            if isinstance(q, bool) or not _QUANTITY.match(str(q)):
                raise problem(f"{name}: {q!r} is not a Kubernetes quantity", "write it like '8', '500m' or '64Gi'", name)
        return v


class _KeyRef(Spec):
    """An env value read from a key of an object in the job's namespace (never an inline literal)."""

    _positional = ("name", "key")
    _what: ClassVar[str]
    name: str = Field(description="The object's name (in the job's namespace).")
    key: str = Field(min_length=1, description="Key in the object's data.")
    optional: bool = Field(False, description="Start the pod even if the object or key is missing.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _subdomain(v, cls._what)


class SecretRef(_KeyRef):
    """A key of a Secret: `SecretRef("wandb", "api-key")`."""

    _what = "Secret"
    kind: Literal["secret"] = "secret"


class ConfigMapRef(_KeyRef):
    """A key of a ConfigMap: `ConfigMapRef("settings", "mode")`."""

    _what = "ConfigMap"
    kind: Literal["configmap"] = "configmap"


def _subdomain(v: str, what: str) -> str:
    if len(v) > 253 or not _DNS_SUBDOMAIN.match(v):
        raise problem(f"not a valid {what} name", "use a DNS-1123 subdomain: lower-case letters, digits, '-' and '.'")
    return v


EnvValue = tagged({"literal": str, "secret": SecretRef, "configmap": ConfigMapRef}, "an env value",
                  "use a string, SecretRef(name, key) or ConfigMapRef(name, key)",
                  tag=lambda value: "literal" if isinstance(value, str) else _kind(value))

#: Parts of an env var name (split at '_', '.', '-') that say its value is a credential.
_CREDENTIAL_WORDS = frozenset({"PASSWORD", "PASSWD", "SECRET", "TOKEN", "APIKEY", "CREDENTIAL", "CREDENTIALS", "PASSPHRASE"})
_CREDENTIAL_PAIRS = ("API_KEY", "ACCESS_KEY", "PRIVATE_KEY", "SECRET_KEY", "AUTH_KEY")
#: Well-known credential formats (value, whatever the name).
_CREDENTIAL_FORMATS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an AWS access key id", re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a PEM private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("a GitHub token", re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("an OpenAI-style secret key", re.compile(r"\bsk-[A-Za-z0-9_-]{32,}")),
)
_REF_ONLY = re.compile(r"^(\$\([A-Za-z_][A-Za-z0-9_.-]*\))+$")
_TOKENISH = re.compile(r"^[A-Za-z0-9+/=_-]{32,}$")


def _entropy(text: str) -> float:
    import math
    from collections import Counter

    return -sum(n / len(text) * math.log2(n / len(text)) for n in Counter(text).values())


def credential_literal(name: str, value: str) -> str | None:
    """Why a literal env value looks like a credential, or None.

    By name: a part PASSWORD, SECRET, TOKEN, APIKEY, CREDENTIAL(S)... or API_KEY, ACCESS_KEY,
    PRIVATE_KEY... (TOKENIZERS_PARALLELISM or MAX_TOKENS are not). By value: a well-known key
    format, or a long (>= 32) random-looking string (upper, lower and digits, >= 4.5 bits of
    entropy per character: hex digests and paths stay below). Empty values and values made
    only of `$(VAR)` references are not literals.
    """
    if not value or _REF_ONLY.match(value):
        return None
    upper = name.upper()
    if set(re.split(r"[_.-]", upper)) & _CREDENTIAL_WORDS or any(pair in upper for pair in _CREDENTIAL_PAIRS):
        return f"{name} names a credential and its value is a literal"
    for what, pattern in _CREDENTIAL_FORMATS:
        if pattern.search(value):
            return f"the value of {name} looks like {what}"
    if (_TOKENISH.match(value) and _entropy(value) >= 4.5
            and all(re.search(c, value) for c in ("[a-z]", "[A-Z]", "[0-9]"))):
        return f"the value of {name} looks like a random secret (long, high-entropy)"
    return None


# --- checkpoint storage ---------------------------------------------------------------------

#: Cloud Storage bucket names (cloud.google.com/storage/docs/buckets#naming): 3-63 characters of lower-case letters,
#: digits, '-', '_' and '.', starting and ending with a letter or digit (up to 222 with dots, each part at most 63);
#: not starting with "goog" nor containing "google".
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]*[a-z0-9]$")


class GCSBucket(Spec):
    """Checkpoints in a Cloud Storage bucket, mounted with GKE's Cloud Storage FUSE CSI driver: `GCSBucket("my-ckpt")`.

    The pods need GKE's FUSE driver (the cluster add-on) and Workload Identity: the job's Kubernetes
    ServiceAccount is granted the bucket (the Pulumi component creates the bucket, the grant and the add-on).
    """

    _positional = ("bucket",)
    kind: Literal["gcs"] = "gcs"
    bucket: str = Field(description="Bucket name (globally unique). Mounted read-write at /checkpoints in every pod.")

    @field_validator("bucket")
    @classmethod
    def _bucket_name(cls, v: str) -> str:
        parts = v.split(".")
        if (not _BUCKET.match(v) or len(v) < 3 or len(v) > (222 if "." in v else 63) or any(not 0 < len(p) <= 63 for p in parts)
                or v.startswith("goog") or "google" in v):
            raise problem("not a Cloud Storage bucket name", "use 3-63 lower-case letters, digits, '-' and '_', starting and "
                          "ending with a letter or digit, without 'goog' at the start or 'google' anywhere")
        return v


class PVC(Spec):
    """Checkpoints on a PersistentVolumeClaim: an existing claim, `PVC("ckpt")`, or one jaxinfra renders,
    `PVC(size="100Gi")` (named `<job>-checkpoints` unless named).

    Every pod of the job mounts it read-write at once, across nodes: a rendered claim asks for ReadWriteMany, and its
    storage class must provide that (on GKE, Filestore's `standard-rwx`); an existing claim must have it too.
    """

    _positional = ("name",)
    kind: Literal["pvc"] = "pvc"
    name: str | None = Field(None, description="The claim's name; with `size` unset, an existing claim in the job's "
                             "namespace. None: jaxinfra renders `<job>-checkpoints` (needs `size`).")
    size: str | None = Field(None, description="Render the claim with this storage request (e.g. '100Gi'); None: use "
                             "the existing claim `name`.")
    storage_class: str | None = Field(None, description="storageClassName of a rendered claim; None: the cluster's default "
                                      "class, which must offer ReadWriteMany.")

    @field_validator("name", "storage_class")
    @classmethod
    def _names(cls, v: str | None, info: ValidationInfo) -> str | None:
        return None if v is None else _subdomain(v, "PersistentVolumeClaim" if info.field_name == "name" else "StorageClass")

    @field_validator("size")
    @classmethod
    def _size(cls, v: str | None) -> str | None:
        if v is not None and not _QUANTITY.match(v):
            raise problem("not a Kubernetes quantity", "write it like '100Gi'")
        return v

    @model_validator(mode="after")
    def _existing_or_rendered(self) -> PVC:
        if self.size is None and self.name is None:
            raise problem("names no claim and renders none", "give the name of an existing claim, PVC('ckpt'), or a size "
                          "for jaxinfra to render one, PVC(size='100Gi')")
        if self.size is None and self.storage_class is not None:
            raise problem("a storage class is for a claim jaxinfra renders", "add size=..., or remove storage_class (the "
                          "existing claim has its own)", "storage_class")
        return self

    @property
    def rendered(self) -> bool:
        """Whether jaxinfra renders the claim (else it exists already)."""
        return self.size is not None


Checkpoints = tagged({"gcs": GCSBucket, "pvc": PVC, "none": None}, "checkpoint storage",
                     "use GCSBucket(name) or PVC(name) / PVC(size=...)", tag=lambda value: "none" if value is None else _kind(value))


class JaxJob(Spec):
    """A multi-host JAX training job: one process per host (TPU VM or GPU/CPU node)."""

    _positional = ("name",)
    name: str = Field(description="Job name; names the workload, Service and pods (DNS-1123 label).")
    namespace: str = Field("default", description="Namespace of every object of the job.")
    image: str = Field(min_length=1, description="Container image.")
    command: tuple[str, ...] | None = Field(None, description="Container command; None keeps the image's entrypoint.")
    args: tuple[str, ...] = Field((), description="Container args.")
    env: dict[str, EnvValue] = Field(default_factory=dict, description="Extra env: a literal string (may reference the "
                                     "contract as $(JAX_PROCESS_ID)), SecretRef(name, key) or ConfigMapRef(name, key). "
                                     "Credentials must be SecretRefs: a literal that looks like one is rejected.")
    node_pool: str = Field(description="Name of the node pool the job runs on.")
    slices: int | None = Field(None, gt=0, description="TPU slices (multi-slice over DCN); default 1. TPU pools only.")
    nodes: int | None = Field(None, gt=0, description="GPU/CPU nodes, one process each; default 1. GPU/CPU pools only.")
    coordinator_port: int = Field(8482, ge=1, le=65535, description="JAX coordinator port (8482 is JAX's own TPU default).")
    backend: Backend = Field("jobset", description="Workload kind: jobset (JobSet), job (Indexed Job), jaxjob (Kubeflow "
                             "Training Operator v1 JAXJob) or trainjob (Kubeflow Trainer v2 TrainJob).")
    runtime: str | None = Field(None, description="trainjob only. None: jaxinfra renders a TrainingRuntime named after the "
                                "job, with mlPolicy.jax and the pool's placement; a name (e.g. 'jax-distributed'): reference "
                                "that ClusterTrainingRuntime and render none (CPU pools only: it has no TPU/GPU placement).")
    max_restarts: int = Field(0, ge=0, le=1000, description="Whole-group restarts before the job fails.")
    init_timeout_seconds: int = Field(300, gt=0, le=86400, description="JAX rendezvous timeout (JAX_INITIALIZATION_TIMEOUT).")
    resources: Resources = Field(default_factory=Resources, description="Extra container resources.")
    shm_size: str = Field("16Gi", description="Size limit of the memory-backed /dev/shm of GPU pods (NCCL).")
    labels: dict[str, str] = Field(default_factory=dict, description="Extra labels on every object and pod.")
    run_as_user: int = Field(1000, ge=1, le=2147483647, description="UID of the container process (pod securityContext "
                             "runAsUser). Pods run as non-root (Pod Security `restricted`); many images (python:3.11-slim, "
                             "most JAX images) default to root, and the kubelet refuses runAsNonRoot with a root image "
                             "unless a numeric non-root user is set, hence 1000. Use the image's own user if it has one.")
    run_as_group: int = Field(1000, ge=1, le=2147483647, description="GID of the container process (runAsGroup).")
    fs_group: int = Field(1000, ge=1, le=2147483647, description="Group that owns mounted volumes (fsGroup), so the "
                          "non-root user can write them.")
    privileged: bool = Field(False, description="Run the container privileged: an exception to Pod Security `restricted` "
                             "(and baseline), only for platforms that require it (e.g. TPU device access on old GKE "
                             "versions). Off: jaxinfra never sets it by default.")
    host_network: bool = Field(False, description="Run the pods in the node's network namespace (hostNetwork, with "
                               "dnsPolicy ClusterFirstWithHostNet so cluster DNS still resolves). GKE's multi-slice TPU "
                               "examples set it for DCN throughput; it is an exception to Pod Security `restricted`, and "
                               "NetworkPolicies do not apply to host-network pods. Off by default.")
    kubernetes_api: bool = Field(False, description="The pods use the Kubernetes API (JAX's Kubernetes cluster "
                                 "auto-detection): a Role with get/list/watch on pods, services and batch jobs in the "
                                 "job's namespace, a RoleBinding to the job's ServiceAccount, and its token mounted. "
                                 "Off: no Role, no token.")
    network_policy: bool = Field(True, description="Render a NetworkPolicy: only the job's own pods may connect to its "
                                 "pods (coordinator and collective ports); egress is left to the user.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Extra annotations on every object and pod.")
    checkpoints: Checkpoints = Field(None, description="Where checkpoints live, outliving the pods: GCSBucket(name) "
                                            "or PVC(name) / PVC(size=...), mounted read-write at /checkpoints in every pod "
                                            "and named by JAXINFRA_CHECKPOINT_DIR. None: no storage, no variable.")

    _names = field_validator("name", "namespace")(lambda v: dns_label(v))

    @field_validator("runtime")
    @classmethod
    def _runtime_name(cls, v: str | None) -> str | None:
        if v is not None and (len(v) > 253 or not _DNS_SUBDOMAIN.match(v)):
            raise problem("not a valid ClusterTrainingRuntime name", "use a DNS-1123 subdomain such as 'jax-distributed'")
        return v

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name, value in v.items():
            if not _ENV_NAME.match(name):
                raise problem(f"{name!r} is not a valid env var name", "use letters, digits, '_', '-' or '.', not starting with a digit", name)
            if name in CONTRACT_ENV:
                raise problem(f"{name} is set by jaxinfra's env contract", "remove it; set coordinator_port, init_timeout_seconds or the pool instead", name)
            if isinstance(value, str) and (why := credential_literal(name, value)):
                raise problem(f"{why}: secrets never go inline into manifests",
                              f"store it in a Secret (kubectl create secret generic NAME --from-literal=KEY=...) and use "
                              f"env={{{name!r}: SecretRef('NAME', 'KEY')}}", name)
        return v

    @field_validator("labels", "annotations")
    @classmethod
    def _metadata(cls, v: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        for key, value in v.items():
            prefix, _, name = key.rpartition("/")
            if len(name) > 63 or not _LABEL_NAME.match(name) or (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))):
                raise problem(f"{key!r} is not a valid key", "use [prefix/]name with a DNS prefix and a name of at most 63 alphanumerics, '-', '_', '.'", key)
            if info.field_name == "labels" and key in OWN_LABELS:
                raise problem(f"{key} is set by jaxinfra", "remove it", key)
            if info.field_name == "labels" and (len(value) > 63 or (value and not _LABEL_NAME.match(value))):
                raise problem(f"label value {value!r} is not valid", "use at most 63 alphanumerics, '-', '_', '.', starting and ending alphanumeric", key)
        return v

    @field_validator("shm_size")
    @classmethod
    def _shm(cls, v: str) -> str:
        if not _QUANTITY.match(v):
            raise problem("not a Kubernetes quantity", "write it like '16Gi'")
        return v

    @model_validator(mode="after")
    def _jobset_name(self) -> JaxJob:
        if self.backend != "job" and not self.name[0].isalpha():
            derives = {"jobset": "JobSet derives", "jaxjob": "the Training Operator derives Service", "trainjob": "TrainJob and its JobSet derive"}
            raise problem(f"{derives[self.backend]} DNS-1035 names from it, which start with a letter", "start the name with a letter", "name")
        return self

    @property
    def upstream_runtime(self) -> bool:
        """A TrainJob on a ClusterTrainingRuntime that jaxinfra does not render: its pod template is not jaxinfra's."""
        return self.backend == "trainjob" and self.runtime is not None

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

    kind: Literal["cpu"] = "cpu"
    cpu: str = Field("100m", description="CPU request of each process (no limit): the collectives of a small program "
                     "need little; raise it for the real training step.")
    memory: str = Field("256Mi", description="Memory request of each process (no limit): JAX's CPU runtime with a "
                        "small program (a probe process peaked at ~215 MiB); raise it for a real model.")

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, v: str) -> str:
        if not _QUANTITY.match(v):
            raise problem("not a Kubernetes quantity", "write it like '100m', '1' or '256Mi'")
        return v


class Cluster(BaseModel):
    """The root of a stack: node pools and the jobs that run on them, validated as a whole."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Cluster name (DNS-1123 label); also the output file's name.")
    node_pools: tuple[NodePool, ...] = Field(description="Accelerator node pools.")
    jobs: tuple[JaxJob, ...] = Field((), description="JAX jobs.")
    pod_security: Literal["restricted", "baseline", "privileged"] | None = Field(
        "restricted", description="Pod Security level enforced on the namespaces jaxinfra creates (label "
        "pod-security.kubernetes.io/enforce); None: no label. A job that needs an exception (host_network, privileged) "
        "in such a namespace is a spec problem. Namespaces jaxinfra does not create (default) are left alone.")
    kueue: bool = Field(False, description="Gate the jobs with Kueue: per node pool a ResourceFlavor and a ClusterQueue "
                        "(quota = the pool's capacity for its largest job), a LocalQueue per namespace, and the "
                        "kueue.x-k8s.io/queue-name label on each workload. Needs Kueue installed.")
    shadow: Shadow | None = Field(None, description="Render every job as a CPU shadow (Shadow()) for a cluster without "
                                  "accelerators; None: the jobs as declared.")

    _name = field_validator("name")(lambda v: dns_label(v, 40))

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**raw(data))
        except ValidationError as err:
            raise SpecError(_problems(err)) from None
        if problems := _cross_object_problems(self):
            raise SpecError(problems)

    def pool(self, name: str) -> NodePool:
        return next(p for p in self.node_pools if p.name == name)

    def with_changes(self, **changes: Any) -> Cluster:
        """The same cluster with `changes` to its fields, revalidated as a whole."""
        return Cluster(**{**{name: getattr(self, name) for name in type(self).model_fields}, **changes})

    def with_backend(self, backend: str) -> Cluster:
        """The same cluster with every job on `backend` (the CLI's `--backend`), revalidated."""
        return self.with_changes(jobs=[{**raw(j), "backend": backend} for j in self.jobs])


# --- rules that span objects -----------------------------------------------------------------


def _cross_object_problems(cluster: Cluster) -> list[Problem]:
    """Rules that span objects (references, counts, backends, derived names); all reported."""
    out: list[Problem] = []
    pools = {p.name: p for p in cluster.node_pools}
    if not cluster.node_pools:
        out.append(Problem("node_pools", [], "a cluster needs at least one node pool", "add NodePool(name, TPU(...) | GPU(...) | CPU(...))"))
    seen_pools: set[str] = set()
    for i, pool in enumerate(cluster.node_pools):
        if pool.name in seen_pools:
            out.append(Problem(f"node_pools[{i}].name", pool.name, "duplicate node pool name", "give each pool its own name"))
        seen_pools.add(pool.name)
    seen_jobs: set[tuple[str, str]] = set()
    claims: dict[tuple[str, str], str] = {}  # rendered checkpoint claims: (namespace, name) -> the job that renders it
    for i, job in enumerate(cluster.jobs):
        at = f"jobs[{i}]"
        if (job.namespace, job.name) in seen_jobs:
            out.append(Problem(f"{at}.name", job.name, f"duplicate job name in namespace {job.namespace}", "rename one of the jobs"))
        seen_jobs.add((job.namespace, job.name))
        out.extend(_checkpoint_problems(at, job, claims))
        pool = pools.get(job.node_pool)
        if pool is None:
            import difflib

            close = difflib.get_close_matches(job.node_pool, list(pools), n=3) or sorted(pools)
            out.append(Problem(f"{at}.node_pool", job.node_pool, "no node pool has this name", f"use one of {', '.join(close)}"))
            continue
        out.extend(_job_problems(at, job, pool))
        out.extend(_backend_problems(at, job, pool))
        if cluster.kueue:
            out.extend(_kueue_job_problems(at, job, pool))
        out.extend(_name_problems(at, job, pool))
        out.extend(_pod_security_problems(at, cluster, job))
        if cluster.shadow is not None:
            out.extend(_shadow_problems(at, job, pool))
    if cluster.kueue:
        for i, pool in enumerate(cluster.node_pools):
            name = queue_name(cluster.name, pool.name)
            if len(name) > MAX_NAME:
                out.append(Problem(f"node_pools[{i}].name", pool.name,
                                   f"Kueue ResourceFlavor and ClusterQueue {name!r} is {len(name)} characters, over {MAX_NAME}",
                                   f"shorten the cluster or pool name by at least {len(name) - MAX_NAME} characters"))
    return out


def _job_problems(at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
    row = pool.accelerator.row
    out = []
    if row.kind == "tpu":
        if job.nodes is not None:
            out.append(Problem(f"{at}.nodes", job.nodes, f"a TPU job's hosts come from the topology ({row.topology}: {row.hosts})",
                               "remove `nodes`; use `slices` for more TPU slices"))
        if job.num_slices > 1 and not row.multi_host:
            out.append(Problem(f"{at}.slices", job.slices, f"{row.family} {row.topology} is single-host, multi-slice needs a multi-host topology",
                               "use slices=1 or a multi-host topology"))
        if job.num_slices > 1 and job.backend == "job":
            out.append(Problem(f"{at}.backend", job.backend, "an Indexed Job cannot express multi-slice (MEGASCALE_SLICE_ID needs one Job per slice)",
                               "use backend='jobset'"))
    elif job.slices is not None:
        out.append(Problem(f"{at}.slices", job.slices, f"slices are for TPU pools; {pool.name} is {row.kind}", "use `nodes` instead"))
    for section in ("requests", "limits"):
        if row.resource and row.resource in getattr(job.resources, section):
            out.append(Problem(f"{at}.resources.{section}.{row.resource}", getattr(job.resources, section)[row.resource],
                               "set from the node pool's accelerator", "remove it; change the node pool instead"))
    return out


def _backend_problems(at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
    """What the Kubeflow operators cannot express (upstream facts in the constants above)."""
    row = pool.accelerator.row
    out = []
    if job.backend == "jaxjob" and row.kind == "tpu" and job.num_slices > 1:
        out.append(Problem(f"{at}.backend", job.backend,
                           "the Training Operator creates plain pods: no JobSet labels for MEGASCALE_SLICE_ID, so multi-slice cannot be expressed",
                           "use backend='jobset'"))
    elif job.backend == "jaxjob" and row.kind == "tpu" and row.multi_host:
        out.append(Problem(f"{at}.backend", job.backend,
                           f"the Training Operator creates plain pods, and GKE injects TPU_WORKER_ID / TPU_WORKER_HOSTNAMES only into "
                           f"Indexed Job pods: the hosts of a multi-host slice ({row.family} {row.topology}) could not form the slice",
                           "use backend='jobset' (or 'trainjob', or a single-host topology)"))
    if job.backend == "trainjob" and row.kind == "tpu" and job.num_slices > 1:
        out.append(Problem(f"{at}.backend", job.backend,
                           "Trainer v2 runs one replica of its `node` replicatedJob (kubeflow/trainer#2318): no per-slice Job index "
                           "for MEGASCALE_SLICE_ID, so multi-slice cannot be expressed",
                           "use backend='jobset'"))
    if job.backend == "jaxjob":
        for name in sorted(set(job.env) & set(OPERATOR_ENV)):
            out.append(Problem(f"{at}.env.{name}", job.env[name], "set by the Training Operator for backend='jaxjob'", "remove it"))
    if job.backend == "trainjob" and "coordinator_port" in job.model_fields_set and job.coordinator_port != TRAINER_PORT:
        out.append(Problem(f"{at}.coordinator_port", job.coordinator_port,
                           f"Trainer's JAX plugin fixes the coordinator port at {TRAINER_PORT}", "remove coordinator_port"))
    if job.runtime is not None and job.backend != "trainjob":
        out.append(Problem(f"{at}.runtime", job.runtime, "a training runtime is for backend='trainjob' only",
                           "remove runtime, or use backend='trainjob'"))
    elif job.runtime is not None:
        lacks = [what for what, needed in (("node selectors and tolerations for TPU", row.kind == "tpu"),
                                           ("GPU node selectors, tolerations and /dev/shm", row.kind == "gpu"),
                                           ("Spot node selectors and tolerations", pool.spot)) if needed]
        if lacks:
            out.append(Problem(f"{at}.runtime", job.runtime,
                               f"ClusterTrainingRuntime {job.runtime!r} is not jaxinfra's and lacks {', '.join(lacks)} of pool {pool.name}",
                               "remove runtime: jaxinfra then renders a TrainingRuntime with the pool's placement"))
    return out


def _checkpoint_problems(at: str, job: JaxJob, claims: dict[tuple[str, str], str]) -> list[Problem]:
    """Checkpoint storage that could not be mounted as declared, or whose path the user's env would contradict."""
    storage = job.checkpoints
    if storage is None:
        return []
    out = []
    if CHECKPOINT_ENV in job.env:
        out.append(Problem(f"{at}.env.{CHECKPOINT_ENV}", job.env[CHECKPOINT_ENV],
                           "set by jaxinfra to the mount path of the job's checkpoints", "remove it (or remove checkpoints)"))
    if job.upstream_runtime:
        out.append(Problem(f"{at}.checkpoints", storage.kind, f"ClusterTrainingRuntime {job.runtime!r} is not jaxinfra's: "
                           "it writes no pod template to mount the storage in",
                           "remove runtime (jaxinfra's TrainingRuntime mounts it), or remove checkpoints"))
    if isinstance(storage, PVC) and storage.rendered:
        name = storage.name or checkpoint_claim(job.name)
        if (job.namespace, name) in claims:
            out.append(Problem(f"{at}.checkpoints.name", name, f"job {claims[job.namespace, name]} already renders "
                               f"PersistentVolumeClaim {job.namespace}/{name}",
                               f"share it as an existing claim, PVC({name!r}), or give this one another name"))
        claims.setdefault((job.namespace, name), job.name)
    return out


def _kueue_job_problems(at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
    out = []
    if QUEUE_LABEL in job.labels:
        out.append(Problem(f"{at}.labels.{QUEUE_LABEL}", job.labels[QUEUE_LABEL], "set by jaxinfra when the cluster has kueue=True",
                           "remove it (the job goes to its node pool's LocalQueue)"))
    if pool.accelerator.row.kind == "cpu" and "cpu" not in {**job.resources.requests, **job.resources.limits}:
        out.append(Problem(f"{at}.resources", {}, "Kueue counts a CPU pool's quota in requested CPU, and this job requests none",
                           "request CPU, e.g. resources={'requests': {'cpu': '2'}}"))
    return out


def _pod_security_problems(at: str, cluster: Cluster, job: JaxJob) -> list[Problem]:
    """A job whose pods the Pod Security level of its (jaxinfra-created) namespace would reject."""
    level = cluster.pod_security
    if level in (None, "privileged") or job.namespace in BUILTIN_NAMESPACES:
        return []
    out = []
    for what, field in (("hostNetwork", "host_network"), ("privileged", "privileged")):
        if getattr(job, field):
            out.append(Problem(f"{at}.{field}", True,
                               f"namespace {job.namespace} is created with Pod Security enforce={level}, which rejects {what} pods",
                               f"set Cluster(pod_security='privileged') to allow it there, or remove {field}"))
    if job.upstream_runtime and level == "restricted":
        out.append(Problem(f"{at}.runtime", job.runtime,
                           f"ClusterTrainingRuntime {job.runtime!r} is not jaxinfra's: its pods are not known to meet the "
                           f"restricted Pod Security level enforced on namespace {job.namespace}",
                           "remove runtime (jaxinfra's TrainingRuntime meets restricted), or set Cluster(pod_security='baseline')"))
    return out


def _shadow_problems(at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
    """What a CPU shadow cannot express: a multi-slice rank is computed by a shell before the command."""
    if pool.accelerator.row.kind == "tpu" and job.num_slices > 1 and job.command is None:
        return [Problem(f"{at}.command", None,
                        "the CPU shadow of a multi-slice job computes JAX_PROCESS_ID (TPU_WORKER_ID + MEGASCALE_SLICE_ID x "
                        "hosts, which JAX derives itself only on a TPU VM) in a shell before the command, so it needs the command",
                        "set command to the image's entrypoint, e.g. command=['python', '-m', 'train']")]
    return []


def _name_problems(at: str, job: JaxJob, pool: NodePool) -> list[Problem]:
    """The job name is one root cause: report its longest derived name that is too long."""
    row = pool.accelerator.row
    names = JobNames.of(job.name, job.backend, row.kind, job.slices, job.nodes, row.hosts)
    what, value = max(names.derived().items(), key=lambda item: len(item[1]))
    if len(value) <= MAX_NAME:
        return []
    return [Problem(f"{at}.name", job.name, f"derived {what} {value!r} is {len(value)} characters, over {MAX_NAME}",
                    f"shorten the name by at least {len(value) - MAX_NAME} characters")]


# --- pydantic errors to Problems -------------------------------------------------------------

_FIXES: dict[str, str] = {
    "missing": "set it",
    "extra_forbidden": "remove it or check its spelling",
    "greater_than": "use a value greater than {gt}",
    "greater_than_equal": "use a value of at least {ge}",
    "less_than": "use a value less than {lt}",
    "less_than_equal": "use a value of at most {le}",
    "literal_error": "use one of {expected}",
    "too_short": "give at least {min_length}",
    "string_too_short": "give a non-empty string",
}


def path_of(loc: tuple[str | int, ...]) -> str:
    """('jobs', 0, 'port') -> 'jobs[0].port'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


UNION_TAGS = {"accelerator": (1, {"tpu", "gpu", "cpu"}), "env": (2, {"literal", "secret", "configmap"}),
              "checkpoints": (1, {"gcs", "pvc", "none"})}
"""Where pydantic puts a tagged union's tag in an error's location: (parts after the field, tags)."""


def _untagged(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """The location without the tags of tagged unions: `jobs[0].env.A.name`, not `...env.A.secret.name`
    (only at the tag's own position, so an env var named like a tag stays)."""
    return tuple(part for i, part in enumerate(loc)
                 if not any(i >= offset and loc[i - offset] == field and part in tags
                            for field, (offset, tags) in UNION_TAGS.items()))


def _problems(err: ValidationError) -> list[Problem]:
    problems = []
    for e in err.errors(include_url=False):
        ctx = e.get("ctx") or {}
        loc = _untagged(e["loc"])
        value = e.get("input")
        if field := ctx.get("field"):
            loc = (*loc, field)
            value = value.get(field, value) if isinstance(value, dict) else value
        fix = ctx.get("fix") or _FIXES.get(e["type"], "correct the type or value").format(**ctx)
        problems.append(Problem(path_of(loc) or "cluster", value, e["msg"], fix))
    return problems
