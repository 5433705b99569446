"""Objects and pod parts every backend shares: Namespace, ServiceAccount, RBAC, NetworkPolicy, headless Service, pod template."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jaxinfra import catalog
from jaxinfra import names as N
from jaxinfra.plan import BY_JAXINFRA, JobPlan, pod_requests

if TYPE_CHECKING:
    from jaxinfra.spec import NodePool

Manifest = dict[str, Any]

SHM_VOLUME = "dshm"


def metadata(jp: JobPlan, name: str | None = None, **extra: Any) -> dict[str, Any]:
    """Explicit name, namespace, labels and the user's annotations on every object."""
    meta: dict[str, Any] = {"name": name or jp.name, "namespace": jp.namespace, "labels": dict(jp.labels)}
    annotations = {**jp.job.annotations, **extra.pop("annotations", {})}
    if annotations:
        meta["annotations"] = annotations
    return meta


def workload_metadata(jp: JobPlan, **extra: Any) -> dict[str, Any]:
    """A workload's metadata: Kueue finds its LocalQueue from a label on the workload itself; a shadow
    says what it stands in for."""
    if jp.shadow_of is not None:
        extra["annotations"] = {**extra.get("annotations", {}), N.SHADOW_OF: jp.shadow_of}
    meta = metadata(jp, **extra)
    if jp.queue is not None:
        meta["labels"][N.QUEUE_LABEL] = jp.queue
    return meta


def namespace(name: str, pod_security: str | None = None) -> Manifest:
    """A namespace jaxinfra creates; Pod Security admission enforces `pod_security` on it."""
    labels = {N.MANAGED_BY: "jaxinfra"}
    if pod_security:
        labels[N.POD_SECURITY_ENFORCE] = pod_security
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def service_account(jp: JobPlan) -> Manifest:
    """The job's own identity; its token is mounted by the pod only when the pod uses the API."""
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(jp),
            "automountServiceAccountToken": False}


def role(jp: JobPlan) -> Manifest:
    """What JAX's Kubernetes auto-detection reads, in the job's namespace only: get/list/watch, no wildcards."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": metadata(jp),
            "rules": [{k: list(v) for k, v in rule.items()} for rule in N.API_RULES]}


def role_binding(jp: JobPlan) -> Manifest:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": metadata(jp),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": jp.name},
            "subjects": [{"kind": "ServiceAccount", "name": jp.name, "namespace": jp.namespace}]}


def network_policy(jp: JobPlan) -> Manifest:
    """Only the job's own pods may connect to its pods, on any port: the coordinator's and the
    collectives' (gloo / NCCL / DCN use ephemeral ports). Egress is not restricted."""
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": metadata(jp),
        "spec": {
            "podSelector": {"matchLabels": dict(jp.pod_labels)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": dict(jp.pod_labels)}}]}],
        },
    }


def headless_service(jp: JobPlan) -> Manifest:
    """Gives every pod `<hostname>.<service>` in DNS, before readiness (DESIGN §5.1)."""
    return {
        "apiVersion": "v1", "kind": "Service", "metadata": metadata(jp, jp.service),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": jp.selector,
            "ports": [{"name": N.PORT_NAME, "port": jp.port, "targetPort": jp.port, "protocol": "TCP"}],
        },
    }


def _field(path: str) -> dict[str, Any]:
    return {"valueFrom": {"fieldRef": {"fieldPath": path}}}


def contract_env(jp: JobPlan) -> list[dict[str, Any]]:
    """The env contract of DESIGN §3, in an order where later values may use $(EARLIER).

    For jaxjob and trainjob the operator injects the coordinator, count and rank itself
    (`JobPlan.env_sources`); jaxinfra writes only what they do not: the init timeout, the CPU
    device count, and the user's env.
    """
    if jp.backend in ("jaxjob", "trainjob"):
        platform = shadow_tpu_env(jp)
        written = {e["name"] for e in platform}
        own = [{"name": name, "value": value} for name, (value, by) in jp.env_sources(0).items()
               if by == BY_JAXINFRA and name not in written]
        return own + platform + user_env(jp)
    env: list[dict[str, Any]] = [
        {"name": N.COORDINATOR_ADDRESS, "value": jp.coordinator_address},
        {"name": N.NUM_PROCESSES, "value": str(jp.processes)},
    ]
    if jp.multi_slice:
        # JAX derives the rank itself: TPU_WORKER_ID (from the platform) + slice id x hosts.
        env += [
            {"name": N.MEGASCALE_COORDINATOR, "value": jp.coordinator_host},
            {"name": N.MEGASCALE_NUM_SLICES, **_field(f"metadata.labels['{N.JOBSET_REPLICAS}']")},
            {"name": N.MEGASCALE_SLICE_ID, **_field(f"metadata.labels['{N.JOBSET_JOB_INDEX}']")},
        ]
    else:
        env.append({"name": N.PROCESS_ID, **_field(f"metadata.annotations['{N.COMPLETION_INDEX}']")})
    env.append({"name": N.INIT_TIMEOUT, "value": str(jp.job.init_timeout_seconds)})
    if jp.runs_on == "cpu":
        env.append({"name": N.NUM_CPU_DEVICES, "value": str(jp.devices_per_process)})
    return env + shadow_tpu_env(jp) + user_env(jp)


def shadow_tpu_env(jp: JobPlan) -> list[dict[str, Any]]:
    """A shadow's stand-in for what GKE's TPU webhook injects into a multi-host slice's pods: the worker's index
    in its slice, and its slice's hostnames (for multi-slice, `$(MEGASCALE_SLICE_ID)` names the pod's slice)."""
    if jp.shadow is None or not jp.tpu_platform_env:
        return []
    hostnames = jp.names.worker_hostnames(f"$({N.MEGASCALE_SLICE_ID})" if jp.multi_slice else 0)
    return [{"name": N.TPU_WORKER_ID, **_field(f"metadata.annotations['{N.COMPLETION_INDEX}']")},
            {"name": N.TPU_WORKER_HOSTNAMES, "value": hostnames}]


def user_env(jp: JobPlan) -> list[dict[str, Any]]:
    """The user's env: literals as values, references as `valueFrom` (secrets never inline)."""
    out: list[dict[str, Any]] = []
    for name, value in jp.job.env.items():
        if isinstance(value, str):
            out.append({"name": name, "value": value})
            continue
        ref: dict[str, Any] = {"name": value.name, "key": value.key}
        if value.optional:
            ref["optional"] = True
        out.append({"name": name, "valueFrom": {"secretKeyRef" if value.kind == "secret" else "configMapKeyRef": ref}})
    return out


def pod_security_context(jp: JobPlan) -> dict[str, Any]:
    """Pod-level part of Pod Security `restricted`: non-root with a numeric user, RuntimeDefault seccomp."""
    j = jp.job
    return {"runAsNonRoot": True, "runAsUser": j.run_as_user, "runAsGroup": j.run_as_group, "fsGroup": j.fs_group,
            "seccompProfile": {"type": "RuntimeDefault"}}


def container_security_context(jp: JobPlan) -> dict[str, Any]:
    """Container part: no privilege escalation, every capability dropped; or the `privileged` exception
    (the API rejects allowPrivilegeEscalation: false together with privileged: true)."""
    if jp.privileged:
        return {"privileged": True}
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def resources(jp: JobPlan) -> dict[str, Any]:
    """The job's requests and limits plus its accelerator's; a shadow's, its small CPU and memory requests only."""
    if jp.shadow is not None:
        return {"requests": {k: str(v) for k, v in pod_requests(jp).items()}}
    requests = {k: str(v) for k, v in jp.job.resources.requests.items()}
    limits = {k: str(v) for k, v in jp.job.resources.limits.items()}
    if jp.accel.resource:
        requests[jp.accel.resource] = limits[jp.accel.resource] = str(jp.accel.chips_per_host)
    return {k: v for k, v in (("requests", requests), ("limits", limits)) if v}


def pool_placement(pool: NodePool) -> tuple[dict[str, str], list[dict[str, str]]]:
    """A pool's node labels to select and the tolerations its pods need, from the catalog row (and Spot)."""
    a = pool.accelerator.row
    selector: dict[str, str] = {}
    tolerations: list[dict[str, str]] = []
    if a.kind == "tpu":
        selector = {catalog.TPU_ACCELERATOR_LABEL: a.gke_accelerator or "", catalog.TPU_TOPOLOGY_LABEL: a.topology or ""}
    elif a.kind == "gpu":
        selector = {catalog.GPU_ACCELERATOR_LABEL: a.gke_accelerator or ""}
    if a.resource:
        tolerations.append({"key": a.resource, "operator": "Exists", "effect": "NoSchedule"})
    if pool.spot:
        selector["cloud.google.com/gke-spot"] = "true"
        tolerations.append({"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"})
    return selector, tolerations


def _placement(jp: JobPlan) -> dict[str, Any]:
    """Node selectors and tolerations of the job's pool (none for a shadow: any CPU node will do)."""
    if jp.shadow is not None:
        return {}
    selector, tolerations = pool_placement(jp.pool)
    out: dict[str, Any] = {}
    if selector:
        out["nodeSelector"] = selector
    if tolerations:
        out["tolerations"] = tolerations
    return out


def pod_template(jp: JobPlan, restart_policy: str = "Never", **spec_extra: Any) -> dict[str, Any]:
    """One JAX process per pod: the container, its env contract and its placement.

    For trainjob this is the TrainingRuntime's pod: Trainer fills in the container's command,
    args and env (the TrainJob's plus its JAX plugin's) and port 29500 itself, so none is set here.
    """
    container: dict[str, Any] = {"name": jp.container, "image": jp.job.image,
                                 "securityContext": container_security_context(jp)}
    if jp.backend != "trainjob":
        container["env"] = contract_env(jp)
        container["ports"] = [{"name": jp.port_name, "containerPort": jp.port, "protocol": "TCP"}]
    if jp.command is not None and jp.backend != "trainjob":  # trainjob: the TrainJob's command wins
        container["command"] = list(jp.command)
    if jp.job.args and jp.backend != "trainjob":
        container["args"] = list(jp.job.args)
    if res := resources(jp):
        container["resources"] = res
    spec: dict[str, Any] = {
        "restartPolicy": restart_policy,
        "serviceAccountName": jp.name,
        "automountServiceAccountToken": jp.job.kubernetes_api,
        "securityContext": pod_security_context(jp),
        "containers": [container],
        **_placement(jp),
        **spec_extra,
    }
    if jp.host_network:  # an explained exception (JobPlan.pod_security_exceptions)
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"  # else host-network pods get the node's DNS, not the cluster's
    if jp.runs_on == "gpu":
        container["volumeMounts"] = [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}]
        spec["volumes"] = [{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": jp.job.shm_size}}]
    meta: dict[str, Any] = {"labels": dict(jp.labels)}
    if jp.job.annotations:
        meta["annotations"] = dict(jp.job.annotations)
    return {"metadata": meta, "spec": spec}
