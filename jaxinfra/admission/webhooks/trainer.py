"""Kubeflow Trainer's validating admission webhooks: the TrainJob validator (`trainjob_validate`) and the
TrainingRuntime and ClusterTrainingRuntime validators (`runtime_validate`). Trainer's defaulter changes nothing
jaxinfra renders: the runtimeRef apiGroup/kind defaults are the CRD schema's (`structural`), not a webhook's.

Assumed configuration: Trainer's default manifests and feature gates at the commit read.

Source: kubeflow/trainer 8c0f5059bd51ec3ba6d6a6a7b2e1471de7bc13b3: pkg/webhooks/trainjob_webhook.go (the runtime
must be registered), pkg/runtime/core/trainingruntime.go and clustertrainingruntime.go (ValidateObjects: the
referenced runtime must exist; deprecation warning), pkg/webhooks/trainingruntime_webhook.go and
clustertrainingruntime_webhook.go (ancestor replicatedJobs), pkg/constants/constants.go,
manifests/base/webhook/patch_validating.yaml (the runtimes' objectSelector).

Knowingly not emulated: Trainer's runtimePatches `time` stamp (the wall clock) and its runtime plugins' custom
validation; update-time rules.
"""

from __future__ import annotations

from collections.abc import Mapping

from jaxinfra.admission.decoded import as_list, as_map, as_str, dig
from jaxinfra.admission.goformat import go_repr
from jaxinfra.admission.store import Finding, Path, Store, meta, namespace_of
from jaxinfra.admission.webhooks.shared import CLUSTER_TRAINING_RUNTIME, invalid_text, labels_of
from jaxinfra.upstream import INSTALLED_RUNTIMES, TRAINER_ANCESTOR, TRAINER_ANCESTOR_LABEL, TRAINER_NODE

_RUNTIMES = {
    "TrainingRuntime.trainer.kubeflow.org": "TrainingRuntime",
    "ClusterTrainingRuntime.trainer.kubeflow.org": "ClusterTrainingRuntime",
}
_SUPPORT_LABEL = "trainer.kubeflow.org/support"
_DEPRECATION_POLICY = "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
_ANCESTOR_CONTAINERS = {
    TRAINER_ANCESTOR: TRAINER_NODE,
    "model-initializer": "model-initializer",
    "dataset-initializer": "dataset-initializer",
}


def trainer_selects(obj: Mapping) -> bool:
    """The runtimes' validating webhooks skip objects labelled trainer.kubeflow.org/webhook-validation: disabled."""
    return labels_of(obj).get("trainer.kubeflow.org/webhook-validation") != "disabled"


def _deprecated(runtime: Mapping) -> bool:
    return labels_of(runtime).get(_SUPPORT_LABEL) == "deprecated"


def trainjob_validate(obj: Mapping, store: Store) -> list[Finding]:
    """Trainer's TrainJob validator: the runtimeRef's kind must be a registered runtime, and that runtime must exist
    (a ClusterTrainingRuntime by name, a TrainingRuntime in the TrainJob's namespace)."""
    ref = dig(obj, "spec", "runtimeRef")
    group, kind, name = as_str(ref.get("apiGroup")), as_str(ref.get("kind")), as_str(ref.get("name"))
    key = f"{kind}.{group}" if group else kind
    if key not in _RUNTIMES:
        return [
            Finding(
                ("spec", "runtimeRef"),
                dict(ref),
                f"unsupported runtime: {key}",
                "use kind ClusterTrainingRuntime or TrainingRuntime of apiGroup trainer.kubeflow.org",
            )
        ]
    cluster = _RUNTIMES[key] == "ClusterTrainingRuntime"
    runtime = store.get(_RUNTIMES[key], "" if cluster else namespace_of(obj), name)
    if runtime is None and not (cluster and name in INSTALLED_RUNTIMES):
        plural = "clustertrainingruntimes" if cluster else "trainingruntimes"
        shown = f"v1alpha1.RuntimeRef{{Name:{go_repr(name)}, APIGroup:{go_repr(group)}, Kind:{go_repr(kind)}}}"
        detail = (
            f"{plural}.trainer.kubeflow.org {go_repr(name)} not found: specified "
            f"{'clusterTrainingRuntime' if cluster else 'trainingRuntime'} must be created before the TrainJob "
            "is created"
        )
        where = f"apply the {_RUNTIMES[key]} {name!r} before the TrainJob" + ("" if cluster else " in its namespace")
        return [
            Finding(
                ("spec", "RuntimeRef" if cluster else "runtimeRef"),
                dict(ref),
                f"Invalid value: {shown}: {detail}",
                where,
            )
        ]
    if cluster and runtime is not None and _deprecated(runtime):
        return [
            Finding(
                ("spec", "runtimeRef", "name"),
                name,
                f'Referenced ClusterTrainingRuntime "{name}" is '
                "deprecated and will be removed in a future release of Kubeflow Trainer. See runtime "
                f"deprecation policy: {_DEPRECATION_POLICY}",
                "move to a supported runtime",
                warning=True,
            )
        ]
    return []


def runtime_validate(obj: Mapping, group_kind: tuple[str, str]) -> list[Finding]:
    """The (Cluster)TrainingRuntime validators: a replicatedJob labelled as a TrainJob step (trainer, model- or
    dataset-initializer) has 1 replica and the container that step needs (node, or the initializer's name)."""
    out: list[Finding] = []
    if group_kind == CLUSTER_TRAINING_RUNTIME and _deprecated(obj):
        name = as_str(meta(obj).get("name"))
        out.append(
            Finding(
                ("metadata", "labels", _SUPPORT_LABEL),
                "deprecated",
                f'ClusterTrainingRuntime "{name}" is '
                "deprecated and will be removed in a future release of Kubeflow Trainer. See runtime "
                f"deprecation policy: {_DEPRECATION_POLICY}",
                "move TrainJobs to a supported runtime",
                warning=True,
            )
        )
    for i, rjob in enumerate(as_list(dig(obj, "spec", "template", "spec").get("replicatedJobs"))):
        at: Path = ("spec", "template", "spec", "replicatedJobs", i)
        ancestor = as_map(dig(rjob, "template", "metadata").get("labels")).get(TRAINER_ANCESTOR_LABEL)
        if ancestor not in _ANCESTOR_CONTAINERS:
            continue
        replicas = as_map(rjob).get("replicas", 1)
        if replicas != 1:
            out.append(
                Finding(
                    (*at, "replicas"),
                    replicas,
                    invalid_text(replicas, "always must be 1"),
                    "set replicas: 1 (scale with the Job's parallelism instead)",
                )
            )
        pod = dig(rjob, "template", "spec", "template", "spec")
        wanted = _ANCESTOR_CONTAINERS[ancestor]
        if not any(as_map(c).get("name") == wanted for c in as_list(pod.get("containers"))):
            out.append(
                Finding(
                    (*at, "template", "spec", "template", "spec", "containers"),
                    wanted,
                    f"Invalid value: []v1.Container{{...}}: must contain the required container for the "
                    f"ancestor: {ancestor}",
                    f"name the step's container {wanted!r}",
                )
            )
    return out
