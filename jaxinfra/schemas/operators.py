"""Other operators' kinds: workloads a cluster serves once their operator is installed, which jaxinfra neither renders
nor emulates, and validates against the operator's published CRD (bundled beside this module, cited in README.md).

One table (`KINDS`: kind -> CRD file, versions, operator, repository, release), read by the API server's front door
(`jaxinfra.admission.schema` checks an object of these kinds against its CRD) and by the simulator
(`jaxinfra_sim.controllers.unserved_kind`: "served by <operator> (<repository> <release>), not emulated").

MPIJob has two CRDs, one name: the Training Operator serves `kubeflow.org/v1` (kubeflow/trainer @v1.9.4 README.md: it
"implements the V1 API version of MPI Operator", and points to the MPI Operator for V2), the MPI Operator
`kubeflow.org/v2beta1` (kubeflow/mpi-operator @v0.8.0 manifests/base/kubeflow.org_mpijobs.yaml serves that version
only). Both CRDs are named `mpijobs.kubeflow.org`, so a cluster holds one of them, and which one is not in the
manifests: each version is checked against its own operator's CRD, and the operator named is that version's.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxinfra import releases
from jaxinfra.upstream import KUBEFLOW_API_GROUP


@dataclass(frozen=True, slots=True)
class Operator:
    """An operator's release whose CRDs are bundled: its name in prose, its GitHub repository, its release tag."""

    name: str
    repo: str
    release: str

    def __str__(self) -> str:
        """`the MPI Operator (kubeflow/mpi-operator v0.8.0)`."""
        return f"{self.name} ({self.repo} {self.release})"

    @property
    def short(self) -> str:
        """`mpi-operator v0.8.0`: its repository's name and release, as the front door's notes name what a cluster
        must run."""
        return f"{self.repo.rpartition('/')[2]} {self.release}"


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of another operator: its API group, the versions its bundled CRD serves, the file, who serves it, and
    whether its controller runs pods for it (a scale target such as DisaggregatedSetRoleScaler runs none)."""

    group: str
    kind: str
    versions: tuple[str, ...]
    file: str
    operator: Operator
    pods: bool = True


#: The Kubeflow Training Operator v1: the release `pulumi up` installs for JAXJobs (`jaxinfra.releases`), whose
#: manifests/base/crds install these CRDs beside JAXJob's (MXJob was removed in v1.9.0, kubeflow/trainer#2150).
TRAINING_OPERATOR = Operator("the Kubeflow Training Operator", "kubeflow/trainer", releases.TRAINING_OPERATOR.tag)
#: The MPI Operator (its deploy/v2beta1/mpi-operator.yaml installs the CRD of manifests/base, with labels added).
MPI_OPERATOR = Operator("the MPI Operator", "kubeflow/mpi-operator", "v0.8.0")
#: The LeaderWorkerSet controller; one manager (cmd/main.go) serves DisaggregatedSet too, and config/crd installs all
#: three CRDs.
LWS = Operator("the LeaderWorkerSet controller", "kubernetes-sigs/lws", "v0.10.0")
#: KubeRay's operator (ray-operator/config/crd/bases; its Helm chart's crds/ holds the same four). Its RayCronJob
#: controller is behind the alpha feature gate RayCronJob (ray-operator/pkg/features/features.go, off by default); the
#: CRD is installed either way.
KUBERAY = Operator("the KubeRay operator", "ray-project/kuberay", "v1.7.0")

KINDS: tuple[Kind, ...] = (
    Kind(KUBEFLOW_API_GROUP, "PyTorchJob", ("v1",), "kubeflow.org_pytorchjobs.yaml", TRAINING_OPERATOR),
    Kind(KUBEFLOW_API_GROUP, "TFJob", ("v1",), "kubeflow.org_tfjobs.yaml", TRAINING_OPERATOR),
    Kind(KUBEFLOW_API_GROUP, "MPIJob", ("v1",), "kubeflow.org_mpijobs.yaml", TRAINING_OPERATOR),
    Kind(KUBEFLOW_API_GROUP, "XGBoostJob", ("v1",), "kubeflow.org_xgboostjobs.yaml", TRAINING_OPERATOR),
    Kind(KUBEFLOW_API_GROUP, "PaddleJob", ("v1",), "kubeflow.org_paddlejobs.yaml", TRAINING_OPERATOR),
    Kind(KUBEFLOW_API_GROUP, "MPIJob", ("v2beta1",), "kubeflow.org_mpijobs_v2beta1.yaml", MPI_OPERATOR),
    Kind("leaderworkerset.x-k8s.io", "LeaderWorkerSet", ("v1",), "leaderworkerset.x-k8s.io_leaderworkersets.yaml", LWS),
    # each role a LeaderWorkerSet its controller creates (api/disaggregatedset/v1)
    Kind(
        "disaggregatedset.x-k8s.io",
        "DisaggregatedSet",
        ("v1",),
        "disaggregatedset.x-k8s.io_disaggregatedsets.yaml",
        LWS,
    ),
    Kind(
        "disaggregatedset.x-k8s.io",
        "DisaggregatedSetRoleScaler",
        ("v1",),
        "disaggregatedset.x-k8s.io_disaggregatedsetrolescalers.yaml",
        LWS,
        pods=False,  # a role's scale subresource for an autoscaler: it runs nothing itself
    ),
    Kind("ray.io", "RayCluster", ("v1", "v1alpha1"), "ray.io_rayclusters.yaml", KUBERAY),  # v1alpha1: deprecated
    Kind("ray.io", "RayJob", ("v1", "v1alpha1"), "ray.io_rayjobs.yaml", KUBERAY),
    Kind("ray.io", "RayService", ("v1", "v1alpha1"), "ray.io_rayservices.yaml", KUBERAY),
    Kind("ray.io", "RayCronJob", ("v1",), "ray.io_raycronjobs.yaml", KUBERAY),  # its RayJobs run the pods
)
"""Every bundled CRD of another operator, in the order the front door's unknown-kind hint lists them."""


def serving(api_version: str, kind: str) -> Kind | None:
    """The bundled CRD that serves an apiVersion and kind, else None (a version none of them serves, or another
    kind)."""
    group, _, version = api_version.rpartition("/")
    return next((k for k in KINDS if (k.group, k.kind) == (group, kind) and version in k.versions), None)
