"""What the webhook modules share: the (group, kind) pairs they match, the accessors that read and write an object
as a Go struct would, and how a field error prints.

Source: kubernetes/kubernetes staging/src/k8s.io/apimachinery/pkg/util/validation/field/errors.go (014a908cc415:
how a field error prints, `invalid_text`).

Messages are the webhooks' own; an error a webhook returns without a field path (JobSet's fmt.Errorf, printed by
the API server as `<nil>: Internal error: ...`) keeps its text and is placed at the field it concerns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jaxinfra.admission.decoded import as_map, is_int
from jaxinfra.admission.goformat import go_repr
from jaxinfra.admission.store import meta
from jaxinfra.upstream import JOBSET_API_GROUP, KUBEFLOW_API_GROUP, TRAINER_API_GROUP

JOBSET = (JOBSET_API_GROUP, "JobSet")
JOB = ("batch", "Job")
JAXJOB = (KUBEFLOW_API_GROUP, "JAXJob")
TRAINJOB = (TRAINER_API_GROUP, "TrainJob")
TRAINING_RUNTIME = (TRAINER_API_GROUP, "TrainingRuntime")
CLUSTER_TRAINING_RUNTIME = (TRAINER_API_GROUP, "ClusterTrainingRuntime")


def group_kind_of(obj: Mapping) -> tuple[str, str]:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return "", ""
    return api_version.rpartition("/")[0], kind


def child_of(parent: Any, key: str) -> dict | None:
    """parent[key] as a dict to write into, made when absent or null (as a Go struct field is always there)."""
    if not isinstance(parent, dict):
        return None
    if parent.get(key) is None:
        parent[key] = {}
    value = parent[key]
    return value if isinstance(value, dict) else None


def int_or(value: Any, default: int) -> int:
    return value if is_int(value) else default


def labels_of(obj: Mapping) -> Mapping:
    return as_map(meta(obj).get("labels"))


def annotations_of(obj: Mapping) -> Mapping:
    return as_map(meta(obj).get("annotations"))


def invalid_text(value: Any, detail: str) -> str:
    """field.Invalid's text: `Invalid value: <value as Go prints it>: <detail>`."""
    return f"Invalid value: {'null' if value is None else go_repr(value)}: {detail}"
