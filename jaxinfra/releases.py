"""The controllers a plan's objects need in the cluster, each pinned to one version: the one place that names them.

A JobSet, a JAXJob, a TrainJob or a Kueue queue is inert without its controller (and is refused
without its CRD). Each version below is the release whose CRDs match the schemas jaxinfra validates
against (jaxinfra/schemas/README.md names the commits; a test keeps that table and these versions
in step). Compared field by field, descriptions aside (2026-08 snapshots of the upstream repos):

- JobSet v0.12.0 (kubernetes-sigs/jobset): identical but for `minimum: 0` on
  `replicatedJobs[].replicas`, added on main after the release (#1279).
- Kueue v0.19.2 (kubernetes-sigs/kueue): ClusterQueue and LocalQueue identical; ResourceFlavor
  and Topology differ only in update-time CEL immutability rules.
- Training Operator v1.9.4 (kubeflow/trainer, release-1.9): the JAXJob CRD is byte-identical.
- Trainer v2.3.0 (kubeflow/trainer): TrainJob and the runtimes identical but for validations main
  added later (`numNodes` minimum, `numProcPerNode` rules).

This module is data and a selection rule (each backend names the controllers it needs and its Kueue
integration, `jaxinfra.backends`); the Pulumi adapter installs what `needed` returns, after the node pools
and before every object of theirs. Likewise `installers`: the node installers of the cluster's GPUDirect stacks
(the NCCL plugins, the NRI device injector), whose manifests `jaxinfra.gpudirect` pins at one
container-engine-accelerators commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jaxinfra.upstream import JOBSET_API_GROUP, KUBEFLOW_API_GROUP, KUEUE_API_GROUP, KUEUE_SYSTEM, TRAINER_API_GROUP
from jaxinfra.upstream import (  # TRAINER_JAX_RUNTIME: one name, read here by the Pulumi adapter
    TRAINER_JAX_RUNTIME as TRAINER_JAX_RUNTIME,
)

if TYPE_CHECKING:  # the selection reads a plan; the data (read by the API server's front door) needs none
    from jaxinfra import gpudirect
    from jaxinfra.plan import ClusterPlan


@dataclass(frozen=True)
class Controller:
    """One controller release: where it comes from, where it runs, which kinds it serves."""

    name: str
    version: str  # without the "v": the Helm chart version; the git tag is `tag`
    namespace: str
    group: str  # the API group of its CRDs
    kinds: frozenset[str]  # objects of these kinds are created only once it runs
    chart: str | None = None  # an OCI Helm chart, installed at `version`
    kustomization: str | None = None  # release manifests: a kustomize directory at "{tag}" (namespace included)
    after: tuple[str, ...] = field(default=())  # controllers installed first, when installed at all

    @property
    def tag(self) -> str:
        return f"v{self.version}"

    @property
    def directory(self) -> str | None:
        """The kustomize directory at this version."""
        return self.kustomization.format(tag=self.tag) if self.kustomization else None


#: JobSet: the chart its install guide names (site/content/en/docs/installation, charts/jobset/README.md),
#: namespace `jobset-system`. The published chart's image is registry.k8s.io/jobset/jobset:<tag>
#: (hack/helm-chart-package.sh rewrites values.yaml for promoted tags).
JOBSET = Controller(
    "jobset",
    "0.12.0",
    "jobset-system",
    JOBSET_API_GROUP,
    frozenset({"JobSet"}),
    chart="oci://registry.k8s.io/jobset/charts/jobset",
)

#: Kubeflow Training Operator v1 (JAXJob): no Helm chart; its install guide applies the kustomize overlay
#: manifests/overlays/standalone, which creates the `kubeflow` namespace itself.
TRAINING_OPERATOR = Controller(
    "training-operator",
    "1.9.4",
    "kubeflow",
    KUBEFLOW_API_GROUP,
    frozenset({"JAXJob"}),
    kustomization="https://github.com/kubeflow/trainer/tree/{tag}/manifests/overlays/standalone",
)

#: Kubeflow Trainer v2 (TrainJob): charts/kubeflow-trainer, namespace `kubeflow-system`. The chart
#: depends on JobSet 0.12.0 (Chart.yaml, `jobset.install`); jaxinfra installs that same JobSet itself.
TRAINER = Controller(
    "trainer",
    "2.3.0",
    "kubeflow-system",
    TRAINER_API_GROUP,
    frozenset({"TrainJob", "TrainingRuntime", "ClusterTrainingRuntime"}),
    chart="oci://ghcr.io/kubeflow/charts/kubeflow-trainer",
    after=("jobset",),
)

#: Kueue: charts/kueue, namespace `kueue-system` (charts/kueue/README.md). Installed last, so that the
#: integrations it enables find their CRDs when it starts.
KUEUE = Controller(
    "kueue",
    "0.19.2",
    KUEUE_SYSTEM,
    KUEUE_API_GROUP,
    frozenset(
        {
            "ResourceFlavor",
            "ClusterQueue",
            "LocalQueue",
            "ProvisioningRequestConfig",
            "AdmissionCheck",
            "WorkloadPriorityClass",
            "Topology",
        }
    ),
    chart="oci://registry.k8s.io/kueue/charts/kueue",
    after=("jobset", "training-operator", "trainer"),
)

#: Every controller, in install order.
CONTROLLERS = (JOBSET, TRAINING_OPERATOR, TRAINER, KUEUE)

#: Trainer's own ClusterTrainingRuntime for JAX (manifests/base/runtimes/jax_distributed.yaml; its name is
#: `jaxinfra.upstream.TRAINER_JAX_RUNTIME`), installed when a TrainJob names it; Trainer's chart installs
#: its runtimes only through a Helm hook.
TRAINER_JAX_RUNTIME_FILE = (
    f"https://raw.githubusercontent.com/kubeflow/trainer/{TRAINER.tag}/manifests/base/runtimes/jax_distributed.yaml"
)


def needed(cp: ClusterPlan) -> tuple[Controller, ...]:
    """The controllers the plan's objects need, in install order: its backends' (`Backend.controllers`; a TrainJob
    runs as a JobSet: JobSet too), and Kueue for its queues."""
    names = {name for jp in cp.jobs for name in jp.backend.controllers} | ({KUEUE.name} if cp.queues else set())
    return tuple(c for c in CONTROLLERS if c.name in names)


def installers(cp: ClusterPlan) -> tuple[gpudirect.Installer, ...]:
    """The DaemonSets the GPUDirect pools' nodes need, in the stacks' order, each once: TCPX and TCPXO both list the NRI
    device injector (`gpudirect.Stack.installers`; xpk @ 367c8382 src/xpk/core/system_characteristics.py and
    core/cluster.py name the same manifests)."""
    return tuple(dict.fromkeys(i for stack in cp.gpudirect for i in stack.installers))


def referenced_runtimes(cp: ClusterPlan) -> tuple[str, ...]:
    """The ClusterTrainingRuntimes the plan's TrainJobs name (those jaxinfra does not render)."""
    return tuple(sorted({jp.runtime for jp in cp.jobs if jp.job.upstream_runtime}))


def helm_values(c: Controller, cp: ClusterPlan) -> dict[str, Any]:
    """The chart values jaxinfra sets; everything else stays the chart's default."""
    if c is TRAINER:  # one JobSet install, jaxinfra's (values.yaml: "must be false if JobSet is installed")
        return {"jobset": {"install": False}}
    if c is KUEUE:
        # The chart renders its ConfigMap and its webhooks from this document (templates/manager/manager-config.yaml,
        # templates/webhook/manifests.yaml); every field left out takes the default of apis/config/v1beta2/defaults.go.
        frameworks = sorted({jp.backend.kueue_framework for jp in cp.jobs})  # each backend's integration
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "integrations": {"frameworks": frameworks},
        }
        import yaml

        return {"managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(config, sort_keys=True)}}
    return {}


def describe(controllers: tuple[Controller, ...]) -> str:
    """`jobset v0.12.0, kueue v0.19.2`: what a user must run when jaxinfra does not install them."""
    return ", ".join(f"{c.name} {c.tag}" for c in controllers)
