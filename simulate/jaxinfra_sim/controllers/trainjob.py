"""The Kubeflow Trainer v2 for a TrainJob: the TrainJob plus its (Cluster)TrainingRuntime become
the JobSet `<trainjob>` the Trainer would create, which the JobSet controller then runs. Only the
runtime's `trainer` step (the replicatedJob labelled `trainer.kubeflow.org/trainjob-ancestor-step:
trainer`) is simulated; initializer steps are left out.

Source: kubeflow/trainer @ 8c0f5059 (the TrainJob CRD's commit): pkg/runtime/framework/plugins/
jax/jax.go (EnforceMLPolicy), jobset/jobset.go (syncPodNetwork, syncParallelCount, Build),
jobset/builder.go (Trainer), pkg/runtime/core/trainingruntime.go (newRuntimeInfo, runtimePatches),
clustertrainingruntime.go, pkg/apply/apply.go (upsert = replace by name in place, else append),
pkg/constants/constants.go, manifests/base/runtimes/jax_distributed.yaml; pkg/controller/trainjob_controller.go
(reconcileObjects: the JobSet server-side applied, a refusal the TrainJobResourcesCreationFailed event).

The JobSet is created through the API server's front door (`jaxinfra.admission.admit_created`), as the Trainer's
apply is on a cluster: the JobSet CRD's schema and defaults, JobSet's webhooks, the admission plugins; its child
Jobs then pass the front door as every JobSet's do (`jobset`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from jaxinfra.admission import admit_created
from jaxinfra.errors import Problem, Unserved
from jaxinfra.upstream import (
    COMPLETION_INDEX,
    JOBSET_API,
    TRAINER_ANCESTOR,
    TRAINER_ANCESTOR_LABEL,
    TRAINER_API_GROUP,
    TRAINER_NODE,
    TRAINER_PORT,
)
from jaxinfra_sim.apiserver.api_errors import api_error
from jaxinfra_sim.controllers.base import Draft
from jaxinfra_sim.controllers.jobset import jobset
from jaxinfra_sim.core import model
from jaxinfra_sim.core.events import Reason
from jaxinfra_sim.core.inputs import UPSTREAM_RUNTIME, Objects, meta, namespace_of, oid, to_int

_UNSUPPORTED_POLICIES = ("torch", "mpi", "xgboost", "flux")
_JOBSET_WEBHOOK = "vjobset.kb.io"
"""JobSet's validating webhook, as its configuration names it (kubernetes-sigs/jobset
config/components/webhook/manifests.yaml): the name the API server's denial quotes."""
_MESSAGE_MAX = 950
"""How much of the API server's error the Trainer's event quotes (trainjob_controller.go Reconcile: `%.950v`, then
` ...` when cut)."""


def _upsert(items: list[Any], item: Mapping[str, Any], key: str = "name") -> None:
    """Trainer's apply.Upsert*: replace the entry with the same key in place, else append."""
    for i, existing in enumerate(items):
        if existing.get(key) == item.get(key):
            items[i] = item
            return
    items.append(item)


def _strategic_merge(base: Any, patch: Any) -> Any:
    """A strategic merge patch as far as runtimePatches use it: maps merge recursively (null deletes), lists of
    named objects (replicatedJobs, containers, env, volumes) merge by name, other lists are replaced."""
    if isinstance(base, Mapping) and isinstance(patch, Mapping):
        out = dict(base)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = _strategic_merge(base.get(k), v)
        return out
    if (
        isinstance(base, list)
        and isinstance(patch, list)
        and all(isinstance(x, Mapping) and "name" in x for x in base + patch)
    ):
        items = list(base)
        for item in patch:
            i = next((i for i, x in enumerate(items) if x["name"] == item["name"]), None)
            if i is None:
                items.append(item)
            else:
                items[i] = _strategic_merge(items[i], item)
        return items
    return copy.deepcopy(patch)


def trainjob(obj: Mapping[str, Any], objects: Objects) -> Draft | Problem:
    """A Trainer v2 TrainJob: the JobSet `<trainjob>` the Trainer builds from its runtime, run by the JobSet
    emulation."""
    spec, name, ns = obj.get("spec") or {}, meta(obj).get("name", ""), namespace_of(obj)
    ref = spec.get("runtimeRef") or {}
    kind, runtime_name = ref.get("kind") or "ClusterTrainingRuntime", ref.get("name", "")  # CRD default kind
    where = f"{oid(obj)} spec.runtimeRef"
    if (
        kind not in ("ClusterTrainingRuntime", "TrainingRuntime")
        or (ref.get("apiGroup") or TRAINER_API_GROUP) != TRAINER_API_GROUP
    ):
        return Problem(
            where,
            ref,
            f"runtimeRef must name a ClusterTrainingRuntime or TrainingRuntime of trainer.kubeflow.org, not {kind}",
            "set runtimeRef.kind: ClusterTrainingRuntime (or TrainingRuntime)",
        )
    runtime = objects.runtime(kind, ns, runtime_name)
    if runtime is None:
        scope = f" in namespace '{ns}'" if kind == "TrainingRuntime" else ""
        known = sorted(
            {n for (k, k_ns, n) in objects.runtimes if k == kind and k_ns == (ns if kind == "TrainingRuntime" else "")}
            | ({UPSTREAM_RUNTIME} if kind == "ClusterTrainingRuntime" else set())
        )
        said = (  # the Trainer's own message
            "not found ClusterTrainingRuntime specified in TrainJob"
            if scope == ""
            else "TrainingRuntime specified in TrainJob is not found"
        )
        return Problem(
            where,
            runtime_name,
            f"{kind} '{runtime_name}'{scope} is neither in the manifests nor one of the Trainer's built-in runtimes "
            f"('{UPSTREAM_RUNTIME}', ...): "
            f"the Trainer creates nothing for this TrainJob ({said})",
            f"reference one of {known}, or add the {kind} to the manifests",
        )
    ml = (runtime.get("spec") or {}).get("mlPolicy") or {}
    other = [p for p in _UNSUPPORTED_POLICIES if p in ml]
    if other:  # the Trainer's other plugins are not emulated: the TrainJob starts no pod here (`Draft.unserved`)
        made = _build(obj, runtime, ml, objects)
        unserved = Unserved(
            where,
            f"{kind} {runtime_name} (mlPolicy.{other[0]})",
            f"mlPolicy.{other[0]} is not a JAX runtime: the Trainer would run this TrainJob with its {other[0]} "
            "plugin, which the simulator does not emulate (it emulates the JAX plugin, and runtimes with no ML "
            "policy), so no verdict on its pods would be the cluster's (nothing started)",
            "reference a runtime with mlPolicy.jax (e.g. the upstream 'jax-distributed') or none, or leave this "
            "TrainJob out of the simulation's inputs",
        )
        if isinstance(made, Problem):  # its runtime's shape is wrong too: no pods for Kueue to count
            made = Draft("TrainJob", ns, name, [], model.RestartPolicy("jobset"))
        made.problems, made.jax_problems, made.unserved = [], [], unserved  # the runtime first: nothing else counts
        return made
    return _build(obj, runtime, ml, objects)


def _build(
    obj: Mapping[str, Any], runtime: Mapping[str, Any], ml: Mapping[str, Any], objects: Objects
) -> Draft | Problem:
    """The JobSet the Trainer builds for TrainJob `obj` from `runtime` (its mlPolicy `ml`), handed to the JobSet
    emulation; the JAX plugin's env only where the runtime's policy is JAX."""
    spec, name, ns = obj.get("spec") or {}, meta(obj).get("name", ""), namespace_of(obj)
    rt_spec = runtime.get("spec") or {}
    rt_where = f"{oid(runtime)} spec"
    template = copy.deepcopy(dict(rt_spec.get("template") or {}))
    rt_meta = dict(template.get("metadata") or {})
    js_spec = dict(template.get("spec") or {})
    for patch in spec.get("runtimePatches") or []:  # newRuntimeInfo: labels/annotations, then the spec
        patched = ((patch or {}).get("trainingRuntimeSpec") or {}).get("template") or {}
        for part in ("labels", "annotations"):
            rt_meta[part] = {**(rt_meta.get(part) or {}), **((patched.get("metadata") or {}).get(part) or {})}
        if patched.get("spec"):
            order = [r.get("name") for r in js_spec.get("replicatedJobs") or []]
            js_spec = _strategic_merge(js_spec, patched["spec"])
            js_spec["replicatedJobs"] = sorted(
                js_spec.get("replicatedJobs") or [],
                key=lambda r: order.index(r.get("name")) if r.get("name") in order else len(order),
            )
    trainer = spec.get("trainer") or {}
    trainer_jobs = [
        r
        for r in js_spec.get("replicatedJobs") or []
        if (meta(r.get("template") or {}).get("labels") or {}).get(TRAINER_ANCESTOR_LABEL) == TRAINER_ANCESTOR
    ]
    if not trainer_jobs:
        return Problem(
            f"{rt_where}.template.spec.replicatedJobs",
            [r.get("name") for r in js_spec.get("replicatedJobs") or []],
            f"no replicatedJob is labelled {TRAINER_ANCESTOR_LABEL}: {TRAINER_ANCESTOR}, "
            "so the Trainer applies nothing of the TrainJob",
            f"label the training replicatedJob's template {TRAINER_ANCESTOR_LABEL}: {TRAINER_ANCESTOR}",
        )
    problems: list[Problem] = []
    count = to_int(trainer.get("numNodes"), to_int(ml.get("numNodes"), 1) if ml else 1)
    for rjob in trainer_jobs:
        rjob["replicas"] = 1  # builder.Trainer: one Job per trainer step
        job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
        job_spec["parallelism"] = job_spec["completions"] = count  # syncParallelCount
        pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
        node = next((c for c in pod_spec.get("containers") or [] if c.get("name") == TRAINER_NODE), None)
        if node is None:
            problems.append(
                Problem(
                    f"{rt_where}.template.spec.replicatedJobs[{rjob.get('name')}] containers",
                    [c.get("name") for c in pod_spec.get("containers") or []],
                    f"no container named '{TRAINER_NODE}': the Trainer applies the TrainJob's image, command, env, "
                    "resources and the JAX env only to that container",
                    f"name the training container '{TRAINER_NODE}'",
                )
            )
            continue
        if trainer.get("resourcesPerNode"):  # newRuntimeInfo: merged per resource name
            res, extra = node.setdefault("resources", {}), trainer["resourcesPerNode"]
            for part in ("limits", "requests"):
                if extra.get(part):
                    res[part] = {**(res.get(part) or {}), **extra[part]}
        env = node.setdefault("env", [])
        if "jax" in ml:  # JAX plugin: EnforceMLPolicy
            for item in (
                {"name": "JAX_NUM_PROCESSES", "value": str(count)},
                {
                    "name": "JAX_PROCESS_ID",
                    "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}},
                },
                {"name": "JAX_COORDINATOR_ADDRESS", "value": f"{name}-{TRAINER_NODE}-0-0.{name}:{TRAINER_PORT}"},
            ):
                _upsert(env, item)
            ports = node.setdefault("ports", [])
            if not any(p.get("containerPort") == TRAINER_PORT for p in ports):
                ports.append({"containerPort": TRAINER_PORT})
        for key in ("image", "command", "args"):  # builder.Trainer
            if trainer.get(key) is not None:
                node[key] = copy.deepcopy(trainer[key])
        for item in trainer.get("env") or []:
            _upsert(env, copy.deepcopy(item))
    built = {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": rt_meta.get("labels") or {},
            "annotations": rt_meta.get("annotations") or {},
        },
        "spec": {**js_spec, "replicatedJobs": trainer_jobs},
    }
    [(stored, findings)] = admit_created([built], objects.store, "the Trainer controller")
    if stored is None:  # the TrainJob is stored, its JobSet never is: the workload exists and never runs
        return Draft("TrainJob", ns, name, [], model.RestartPolicy("jobset"), problems=[_refused(obj, built, findings)])
    made = jobset(stored, objects)
    if isinstance(made, Problem):
        return made
    made.kind = "TrainJob"
    made.problems[:0] = problems
    return made


def _refused(obj: Mapping[str, Any], built: Mapping[str, Any], findings: list[Any]) -> Problem:
    """The TrainJob whose JobSet the API server refuses: the Trainer server-side applies the JobSet it builds, so it
    passes the JobSet CRD's schema, JobSet's webhooks and the admission plugins; a refusal is the Trainer's Warning
    event `TrainJobResourcesCreationFailed` (reason Reconciling) on the TrainJob, "TrainJob resources reconciliation
    failed: <the API server's error>", and the reconcile is retried with nothing created, so the TrainJob never runs
    (kubeflow/trainer@8c0f5059 pkg/controller/trainjob_controller.go Reconcile, reconcileObjects)."""
    refused = [f for f in findings if not f.warning]
    name = str(meta(built).get("name", ""))
    said = api_error("jobsets.jobset.x-k8s.io", "JobSet.jobset.x-k8s.io", name, refused, _JOBSET_WEBHOOK)
    quoted = said[:_MESSAGE_MAX] + (" ..." if len(said) > _MESSAGE_MAX else "")
    return Problem(
        oid(obj),
        f"JobSet {namespace_of(obj)}/{name}",
        "the API server refuses the JobSet the Trainer builds for this TrainJob (event "
        f"{Reason.TRAINJOB_RESOURCES_CREATION_FAILED}: TrainJob resources reconciliation failed: {quoted}), so the "
        "TrainJob never runs",
        refused[0].fix if refused else "",
    )
