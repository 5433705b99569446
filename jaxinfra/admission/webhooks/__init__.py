"""The admission webhooks that the controllers jaxinfra installs register for the kinds it renders: what each
mutating webhook changes (`mutate`) and what each validating webhook refuses (`validate`), on create.

Order (`mutate`): the API server calls mutating webhook configurations sorted by name, each once (none of these sets
reinvocationPolicy): `defaulter.trainer.kubeflow.org` (Trainer), `jobset-mutating-webhook-configuration` (JobSet),
`kueue-mutating-webhook-configuration` (Kueue). So a JobSet is defaulted by JobSet, then by Kueue; a TrainJob by
Trainer, then by Kueue. Validating webhooks see the result; when several refuse, each refusal is a finding.

Modules, one per controller whose webhooks they emulate (each names its assumed configuration and sources):
- `jobset`: JobSet's Default and ValidateCreate.
- `kueue`: Kueue's job-framework webhooks (Job, JobSet, TrainJob): default queue, priority, suspend, managedBy;
  ValidateJobOnCreate and the Job webhook's annotation rules.
- `kueue_queues`: Kueue's ClusterQueue and Cohort validators, as far as cohorts go (borrowing and lending limits).
- `trainer`: Kubeflow Trainer's TrainJob and (Cluster)TrainingRuntime validators.
- `jaxjob`: the Training Operator v1's JAXJob validator (name, replica type, containers, images, the `jax` one).
- `shared`: the (group, kind) pairs, Go-struct accessors and the field-error text the three share.

Knowingly not emulated: update-time rules of every webhook (and what each module lists).
"""

from __future__ import annotations

from collections.abc import Mapping

from jaxinfra.admission.store import Finding, Store
from jaxinfra.admission.webhooks.jaxjob import jaxjob_validate
from jaxinfra.admission.webhooks.jobset import jobset_default, jobset_validate
from jaxinfra.admission.webhooks.kueue import KUEUE_KINDS, kueue_default, kueue_selects, kueue_validate
from jaxinfra.admission.webhooks.kueue_queues import QUOTA_KINDS, quota_validate
from jaxinfra.admission.webhooks.shared import (
    CLUSTER_TRAINING_RUNTIME,
    JAXJOB,
    JOBSET,
    TRAINING_RUNTIME,
    TRAINJOB,
    group_kind_of,
)
from jaxinfra.admission.webhooks.trainer import runtime_validate, trainer_selects, trainjob_validate

__all__ = ["jobset_default", "mutate", "validate"]


def mutate(obj: dict, store: Store) -> None:
    """Apply, in place, the mutating webhooks that match `obj` (a create), in the API server's order."""
    group_kind = group_kind_of(obj)
    if group_kind == JOBSET:
        jobset_default(obj)
    if group_kind in KUEUE_KINDS and kueue_selects(obj):
        kueue_default(obj, store, group_kind)


def validate(obj: Mapping, store: Store) -> list[Finding]:
    """What the validating webhooks that match `obj` (a create) refuse or warn about."""
    group_kind = group_kind_of(obj)
    findings: list[Finding] = []
    if group_kind == JOBSET:
        findings += jobset_validate(obj, store)
    elif group_kind == TRAINJOB:
        findings += trainjob_validate(obj, store)
    elif group_kind == JAXJOB:
        findings += jaxjob_validate(obj)
    elif group_kind in (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME) and trainer_selects(obj):
        findings += runtime_validate(obj, group_kind)
    if group_kind in KUEUE_KINDS and kueue_selects(obj):
        findings += kueue_validate(obj, group_kind)
    if group_kind in QUOTA_KINDS:
        findings += quota_validate(obj, group_kind)
    return findings
