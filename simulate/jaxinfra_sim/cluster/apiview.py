"""What the API server holds once the controllers have acted: the inputs as stored, plus what the
controllers created — a JobSet's child Jobs, every pod (owned by its Job, or by the operator's
workload), the headless Services a controller makes — shaped as the API returns them, so that
in-cluster clients (JAX's `K8sCluster`, the `kubernetes` client) read what they would read on a
cluster: `metadata.ownerReferences` with `controller: true`, labels and annotations,
`spec.hostname` / `spec.subdomain` / `spec.nodeName`, `status.podIP` and `status.phase`.

Built only for simulations whose pods can reach the API server (`emulate(..., api_objects=True)`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

from jaxinfra.quantity import canonical
from jaxinfra.upstream import BATCH_API, JOB_UID_LABEL, JOBSET_KEY_PREFIX
from jaxinfra_sim.controllers import job as job_controller
from jaxinfra_sim.controllers.base import ChildJob, Draft
from jaxinfra_sim.core import model
from jaxinfra_sim.core.inputs import Service, fake_uid, meta, namespace_of

CREATED_AT = "2026-01-01T00:00:00Z"
"""A fixed creation time: the objects are reproducible, and no client here reads the clock from them."""


def _quantities(spec: dict) -> dict:
    """A pod spec of a built-in object (a Pod, a Job's template) with its quantities as the API server serves them:
    each a canonical string (`jaxinfra.quantity.canonical`, apimachinery's `Quantity.MarshalJSON`), as the object is
    decoded into Go's types and encoded again; a custom resource (a JobSet) keeps what it was given. The `kubernetes`
    client that JAX's `K8sCluster` uses refuses a number where the API has a string (`limits.cpu: 1`), so a pod
    listing in the number's form fails where a cluster's succeeds (issue #39: JAX's examples/k8s/example.yaml)."""

    def each(values: object) -> object:
        if not isinstance(values, Mapping):
            return values
        return {k: c if (c := canonical(v)) is not None else v for k, v in values.items()}

    def requirements(resources: object) -> None:  # a container's or the pod's resources: requests and limits
        if isinstance(resources, dict):
            resources.update({part: each(resources[part]) for part in ("requests", "limits") if part in resources})

    for key in ("containers", "initContainers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            requirements(container.get("resources") if isinstance(container, dict) else None)
    requirements(spec.get("resources"))
    if "overhead" in spec:
        spec["overhead"] = each(spec["overhead"])
    for volume in spec.get("volumes") or []:
        empty_dir = volume.get("emptyDir") if isinstance(volume, dict) else None
        if isinstance(empty_dir, dict) and (c := canonical(empty_dir.get("sizeLimit"))) is not None:
            empty_dir["sizeLimit"] = c
    return spec


def _owned(ref: Mapping[str, str]) -> list[dict]:
    return [{**ref, "controller": True, "blockOwnerDeletion": True}]


def _service(svc: Service) -> dict:
    spec: dict = {
        "clusterIP": "None" if svc.headless else "",
        "publishNotReadyAddresses": svc.publish_not_ready,
        "ports": [{"port": p, "targetPort": t, "protocol": "TCP"} for p, t in svc.ports],
    }
    if svc.selector:
        spec["selector"] = dict(svc.selector)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": svc.name, "namespace": svc.namespace, "creationTimestamp": CREATED_AT},
        "spec": spec,
    }


def _stored_job(obj: Mapping, job: ChildJob) -> dict:
    """An Indexed Job of the inputs as the API server stores it: with its uid, the selector it generates
    (`controller-uid`), those labels added to its pod template, and, when it has none of its own, the template's
    labels on the Job (kubectl get job -o yaml in the Kubernetes docs' Job page shows them; JAX's K8sCluster reads
    them)."""
    stored = copy.deepcopy(dict(obj))
    md, spec = stored.setdefault("metadata", {}), stored.setdefault("spec", {})
    selector = job_controller.selector_labels(job)
    template_md = spec.setdefault("template", {}).setdefault("metadata", {})
    template_md["labels"] = {**(template_md.get("labels") or {}), **selector}
    if isinstance(spec["template"].get("spec"), dict):
        _quantities(spec["template"]["spec"])
    md.update(uid=job.uid, creationTimestamp=CREATED_AT)
    md["labels"] = md.get("labels") or dict(template_md["labels"])
    spec.setdefault("selector", {"matchLabels": {JOB_UID_LABEL: job.uid}})
    stored["status"] = {"active": job.parallelism, "startTime": CREATED_AT}
    return stored


def _job(draft: Draft, job: ChildJob) -> dict:
    """A child Job as its controller (JobSet) creates it: the stamp's labels on the Job, the template's spec."""
    labels = {k: v for k, v in job.pod_labels.items() if k.startswith(JOBSET_KEY_PREFIX)}
    return {
        "apiVersion": BATCH_API,
        "kind": "Job",
        "metadata": {
            "name": job.name,
            "namespace": draft.namespace,
            "uid": job.uid,
            "labels": labels,
            "annotations": {k: v for k, v in job.pod_annotations.items() if k in labels},
            "ownerReferences": _owned(draft.owner),
            "creationTimestamp": CREATED_AT,
        },
        "spec": {
            "parallelism": job.parallelism,
            "completions": job.completions,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": dict(job.pod_labels), "annotations": dict(job.pod_annotations)},
                "spec": _quantities(copy.deepcopy(dict(job.pod_spec))),
            },
        },
        "status": {"active": job.parallelism, "startTime": CREATED_AT},
    }


def _pod(draft: Draft, job: ChildJob, pod: model.Pod) -> dict:
    """A running pod as the API reports it."""
    owner = (
        draft.owner
        if job.operator is not None
        else {"apiVersion": BATCH_API, "kind": "Job", "name": job.name, "uid": job.uid}
    )
    spec = _quantities(copy.deepcopy(dict(job.pod_spec)))
    spec.update(nodeName=pod.node, serviceAccountName=pod.service_account, hostname=pod.hostname)
    if pod.subdomain:
        spec["subdomain"] = pod.subdomain
    ready = [
        {"type": t, "status": "True", "lastTransitionTime": CREATED_AT}
        for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "uid": fake_uid("Pod", pod.namespace, pod.name),
            "labels": dict(pod.labels),
            "annotations": dict(pod.annotations),
            "ownerReferences": _owned(owner),
            "creationTimestamp": CREATED_AT,
        },
        "spec": spec,
        "status": {
            "phase": "Running",
            "podIP": pod.ip,
            "podIPs": [{"ip": pod.ip}],
            "hostIP": pod.ip,
            "hostIPs": [{"ip": pod.ip}],
            "startTime": CREATED_AT,
            "conditions": ready,
        },
    }


def api_objects(
    manifests: Sequence[Mapping],
    drafts: Sequence[Draft],
    placed: Sequence[Sequence[tuple[ChildJob, model.Pod]]],
    stored_services: set[tuple[str, str]],
) -> tuple[dict, ...]:
    """Every object the API server holds: the inputs, then per workload what its controllers created."""
    jobs: dict[tuple[str, str | None], ChildJob] = {
        (d.namespace, d.name): d.jobs[0] for d in drafts if d.owner.get("kind") == "Job"
    }
    out = [
        _stored_job(m, jobs[(namespace_of(m), meta(m).get("name"))])
        if (m.get("apiVersion"), m.get("kind")) == (BATCH_API, "Job") and (namespace_of(m), meta(m).get("name")) in jobs
        else copy.deepcopy(dict(m))
        for m in manifests
        if isinstance(m, Mapping) and m.get("kind")
    ]
    for draft, pods in zip(drafts, placed):
        out += [_service(s) for s in draft.services if (s.namespace, s.name) not in stored_services]
        if draft.owner.get("kind") != "Job" and draft.jobs and draft.jobs[0].operator is None:
            out += [_job(draft, job) for job in draft.jobs]
        out += [_pod(draft, job, pod) for job, pod in pods]
    return tuple(out)
