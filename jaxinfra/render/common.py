"""Objects and pod parts every backend shares: Namespace, ServiceAccount, RBAC, NetworkPolicy, checkpoint claim,
headless Service, pod template; `SharedParts` hands the pod parts to a backend's own objects (`Backend.render`)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jaxinfra import names as N
from jaxinfra import upstream as U
from jaxinfra.errors import Problem, SpecError
from jaxinfra.plan import JobPlan, pod_requests
from jaxinfra.render import gpudirect

if TYPE_CHECKING:
    from jaxinfra.spec import NodePool, Sidecar, Toleration

Manifest = dict[str, Any]

SHM_VOLUME = "dshm"
#: What multi-host checkpointing needs of a claim: every pod, on its own node, writes its shards at once.
CHECKPOINT_ACCESS = "ReadWriteMany"
#: Cloud Storage FUSE mount options. `uid`/`gid`: a pod that sets runAsUser must name its user (the driver's
#: docs/authentication.md; fsGroup supplies the group, file and directory modes through the driver's fsGroup
#: delegation, pkg/csi_driver/utils.go). `rename-dir-limit`: orbax commits a checkpoint on a local path by renaming
#: its temporary directory, which gcsfuse refuses on a flat bucket unless the directory has fewer descendants than
#: this (0 by default); 200000 is what gcsfuse's own `aiml-checkpointing` profile sets. A hierarchical-namespace bucket
#: (what the Pulumi component creates) renames folders atomically and ignores it.
GCSFUSE_RENAME_DIR_LIMIT = 200000


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
        meta["labels"][U.QUEUE_LABEL] = jp.queue
        if jp.job.queue_priority is not None:
            meta["labels"][U.PRIORITY_LABEL] = N.workload_priority_class(jp.cluster, jp.job.queue_priority)
    return meta


def namespace(name: str, pod_security: str | None = None) -> Manifest:
    """A namespace jaxinfra creates; Pod Security admission enforces `pod_security` on it."""
    labels = {N.MANAGED_BY: "jaxinfra"}
    if pod_security:
        labels[U.POD_SECURITY_ENFORCE] = pod_security
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def service_account(jp: JobPlan) -> Manifest:
    """The job's own identity; its token is mounted by the pod only when the pod uses the API."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(jp),
        "automountServiceAccountToken": False,
    }


def role(jp: JobPlan) -> Manifest:
    """What JAX's Kubernetes auto-detection reads, in the job's namespace only: get/list/watch, no wildcards."""
    return {
        "apiVersion": U.RBAC_API,
        "kind": "Role",
        "metadata": metadata(jp),
        "rules": [{k: list(v) for k, v in rule.items()} for rule in N.API_RULES],
    }


def role_binding(jp: JobPlan) -> Manifest:
    return {
        "apiVersion": U.RBAC_API,
        "kind": "RoleBinding",
        "metadata": metadata(jp),
        "roleRef": {"apiGroup": U.RBAC_API_GROUP, "kind": "Role", "name": jp.name},
        "subjects": [{"kind": "ServiceAccount", "name": jp.name, "namespace": jp.namespace}],
    }


def network_policy(jp: JobPlan) -> Manifest:
    """Only the job's own pods may connect to its pods, on any port: the coordinator's and the
    collectives' (gloo / NCCL / DCN use ephemeral ports). Egress is not restricted."""
    return {
        "apiVersion": U.NETWORKING_API,
        "kind": "NetworkPolicy",
        "metadata": metadata(jp),
        "spec": {
            "podSelector": {"matchLabels": dict(jp.pod_labels)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": dict(jp.pod_labels)}}]}],
        },
    }


def checkpoint_claim(jp: JobPlan) -> Manifest:
    """The claim of `PVC(size=...)`: ReadWriteMany, so every pod mounts it at once, each on its own node."""
    storage = jp.job.checkpoints
    assert storage is not None and storage.kind == "pvc" and storage.size is not None
    spec: dict[str, Any] = {"accessModes": [CHECKPOINT_ACCESS], "resources": {"requests": {"storage": storage.size}}}
    if storage.storage_class:
        spec["storageClassName"] = storage.storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(jp, jp.checkpoint_claim),
        "spec": spec,
    }


def checkpoint_volume(jp: JobPlan) -> dict[str, Any]:
    """The pod's volume for the checkpoints: the claim, or the bucket through GKE's Cloud Storage FUSE CSI driver (a CSI
    ephemeral volume, which Pod Security `restricted` allows; the driver's sidecar meets `restricted` too,
    gcs-fuse-csi-driver pkg/webhook/sidecar_spec.go GetSecurityContext). A host-network pod opts in to the driver's
    token server for its ServiceAccount (`hostNetworkPodKSA`, driver v1.17.2+, GKE 1.29+: docs/authentication.md)."""
    if jp.checkpoint_bucket is None:
        return {"name": N.CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": jp.checkpoint_claim}}
    options = f"uid={jp.job.run_as_user},gid={jp.job.fs_group},rename-dir-limit={GCSFUSE_RENAME_DIR_LIMIT}"
    attributes = {"bucketName": jp.checkpoint_bucket, "mountOptions": options}
    if jp.host_network:
        attributes["hostNetworkPodKSA"] = "true"
    return {"name": N.CHECKPOINT_VOLUME, "csi": {"driver": U.GCSFUSE_DRIVER, "volumeAttributes": attributes}}


def headless_service(jp: JobPlan) -> Manifest:
    """Gives every pod `<hostname>.<service>` in DNS, before readiness (docs/design.md, "DNS before readiness")."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(jp, jp.service),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": jp.selector,
            "ports": [{"name": N.PORT_NAME, "port": jp.port, "targetPort": jp.port, "protocol": "TCP"}],
        },
    }


def contract_env(jp: JobPlan) -> list[dict[str, Any]]:
    """The env jaxinfra writes (docs/design.md, "jaxinfra's own contract"), in an order where later values may use
    $(EARLIER): the contract's variables that the pod template writes (`JobPlan.contract`; none of those the operator,
    a controller or the platform injects), then the user's env."""
    return [entry for var in jp.contract if (entry := var.entry) is not None] + user_env(jp)


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
    return {
        "runAsNonRoot": True,
        "runAsUser": j.run_as_user,
        "runAsGroup": j.run_as_group,
        "fsGroup": j.fs_group,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def restricted_container() -> dict[str, Any]:
    """A container's part of Pod Security `restricted`: no privilege escalation, every capability dropped."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def container_security_context(jp: JobPlan) -> dict[str, Any]:
    """Container part: `restricted_container`; or the `privileged` exception (the API rejects
    allowPrivilegeEscalation: false together with privileged: true)."""
    return {"privileged": True} if jp.privileged else restricted_container()


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
    """A pool's node labels to select and the tolerations its pods need, from the catalog row and its capacity: Spot
    VMs and flex-start nodes each carry a label and a taint of their own (`upstream.SPOT_LABEL`, `QUEUED_LABEL`)."""
    a = pool.accelerator.row
    selector: dict[str, str] = {}
    tolerations: list[dict[str, str]] = []
    if a.kind == "tpu":
        selector = {
            U.TPU_ACCELERATOR_LABEL: a.gke_accelerator or "",
            U.TPU_TOPOLOGY_LABEL: a.topology or "",
        }
    elif a.kind == "gpu":
        selector = {U.GPU_ACCELERATOR_LABEL: a.gke_accelerator or ""}
    if a.resource:
        tolerations.append({"key": a.resource, "operator": "Exists", "effect": "NoSchedule"})
    capacity_label = {"spot": U.SPOT_LABEL, "flex-start": U.QUEUED_LABEL}.get(pool.capacity)
    if capacity_label is not None:
        selector[capacity_label] = "true"
        tolerations.append({"key": capacity_label, "operator": "Equal", "value": "true", "effect": "NoSchedule"})
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

    Where the backend's controller fills in the container's command, args, env and port itself
    (`Backend.writes_container`; Trainer, from the TrainJob: its JAX plugin's env and port 29500), none is set here.
    """
    container: dict[str, Any] = {
        "name": jp.container,
        "image": jp.job.image,
        "securityContext": container_security_context(jp),
    }
    if jp.backend.writes_container:
        container["env"] = contract_env(jp)
        container["ports"] = [{"name": jp.port_name, "containerPort": jp.port, "protocol": "TCP"}]
        if jp.command is not None:
            container["command"] = list(jp.command)
        if jp.job.args:
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
    mounts, volumes = [], []
    if jp.runs_on == "gpu":
        mounts.append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
        volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": jp.job.shm_size}})
    if jp.job.checkpoints is not None:
        mounts.append({"name": N.CHECKPOINT_VOLUME, "mountPath": N.CHECKPOINT_DIR})
        volumes.append(checkpoint_volume(jp))
    if volumes:
        container["volumeMounts"], spec["volumes"] = mounts, volumes
    meta: dict[str, Any] = {"labels": dict(jp.labels)}
    annotations = dict(jp.job.annotations)
    if jp.checkpoint_bucket is not None:
        annotations[U.GCSFUSE_ANNOTATION] = "true"  # GKE's webhook injects the driver's sidecar into such pods only
    if (stack := jp.gpudirect) is not None:
        gpudirect.decorate(stack, spec, container, annotations)
    if jp.queue is not None and jp.shadow is None and (level := jp.job.topology) is not None:
        request = U.TOPOLOGY_REQUIRED if jp.job.topology_required else U.TOPOLOGY_PREFERRED
        annotations[request] = U.GKE_TOPOLOGY_LEVELS[level]  # Kueue's TAS: every pod within one such domain
    if annotations:
        meta["annotations"] = annotations
    return customize(jp, {"metadata": meta, "spec": spec})


def toleration(t: Toleration) -> dict[str, Any]:
    """A toleration as the API writes it: empty key, value and effect left out (they mean 'any')."""
    out: dict[str, Any] = {"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect}
    out = {k: v for k, v in out.items() if v}
    if t.toleration_seconds is not None:
        out["tolerationSeconds"] = t.toleration_seconds
    return out


def sidecar(s: Sidecar) -> dict[str, Any]:
    """A native sidecar: an init container with restartPolicy Always, restricted like the training container (Pod
    Security `restricted` checks init containers too) and never privileged: the exception is for the accelerator."""
    c: dict[str, Any] = {
        "name": s.name,
        "image": s.image,
        "restartPolicy": "Always",
        "securityContext": restricted_container(),
    }
    if s.command is not None:
        c["command"] = list(s.command)
    if s.args:
        c["args"] = list(s.args)
    if s.env:
        c["env"] = [{"name": k, "value": v} for k, v in s.env.items()]
    res = {
        k: {n: str(q) for n, q in v.items()}
        for k, v in (("requests", s.resources.requests), ("limits", s.resources.limits))
        if v
    }
    if res:
        c["resources"] = res
    return c


def customize(jp: JobPlan, template: dict[str, Any]) -> dict[str, Any]:
    """The job's own additions to its pod template (`JaxJob.priority_class` ... `pod_patches`), applied last in the one
    function every backend's pod template comes from, so each backend gets the same pod. Nothing is added for a job
    without them (its manifests stay byte-identical). A CPU shadow drops the node selector with the pool's (CPU nodes
    need not carry those labels); tolerations only allow nodes, so they stay."""
    j, spec = jp.job, template["spec"]
    if j.priority_class:
        spec["priorityClassName"] = j.priority_class
    if j.node_selector and jp.shadow is None:
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **j.node_selector}  # no shared key: `node_selector`
    if j.tolerations:
        spec["tolerations"] = [*spec.get("tolerations", []), *map(toleration, j.tolerations)]
    if j.sidecars:  # after the platform's (a GPUDirect daemon)
        spec["initContainers"] = [*spec.get("initContainers", []), *map(sidecar, j.sidecars)]
    if not j.pod_patches:
        return template
    target = f"backend {jp.backend.name}'s pod template" + (" (a CPU shadow)" if jp.shadow is not None else "")
    return patched(
        template,
        j.pod_patches,
        f"job {jp.namespace}/{jp.name}: pod_patches",
        target,
        "the pod template",
        " (/metadata/..., /spec/...), the same object in every backend",
    )


def object_patched(jp: JobPlan, objects: list[Manifest]) -> list[Manifest]:
    """The job's objects with its `object_patches` applied, each kind's to its one object; a kind the job does not
    render is a `SpecError` naming the ones it does (every such kind at once)."""
    kinds = [m["kind"] for m in objects]
    where = f"job {jp.namespace}/{jp.name}: object_patches"
    if unknown := [k for k in jp.job.object_patches if k not in kinds]:
        raise SpecError(
            [
                Problem(
                    f"{where}[{k!r}]",
                    k,
                    f"the job renders no {k} (backend {jp.backend.name} renders {', '.join(sorted(set(kinds)))})",
                    "patch one of the kinds it renders (see `jaxinfra synth`), or remove the entry",
                )
                for k in unknown
            ]
        )
    return [
        patched(
            m, ops, f"{where}[{m['kind']!r}]", f"its {m['kind']} {m['metadata']['name']}", f"the {m['kind']} object"
        )
        if (ops := jp.job.object_patches.get(m["kind"]))
        else m
        for m in objects
    ]


def _patch_fix(kind: str, op: Mapping[str, Any], root: str, start: str) -> str:
    if kind == "test":
        return f"{root} holds another value there (see `jaxinfra synth`): update the test's value, or drop the test"
    if kind == "invalid":
        return "write an RFC 6902 operation that fits the target: a list index is a number or '-' (add only)"
    where = (
        "'add' needs the parent to exist: add the whole map or list one level up first; " if op["op"] == "add" else ""
    )
    return f"{where}paths start at {root}{start}; check the path against {root} `jaxinfra synth` writes"


def _missing(doc: Any, pointer: str, whole: bool, root: str) -> str | None:
    """Where `pointer` leaves `doc`, in a few words (jsonpointer's own message prints the whole document); only its
    parent must exist when not `whole` (add). None: it resolves, so the operation failed for another reason."""
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]
    node, at = doc, ""
    for t in tokens if whole else tokens[:-1]:
        where = at or root
        if isinstance(node, dict):
            if t not in node:
                return f"{where} has no {t!r} (it has {', '.join(map(repr, node)) or 'nothing'})"
            node = node[t]
        elif isinstance(node, list):
            if not t.isdigit() or int(t) >= len(node):
                return f"{where} is a list of {len(node)}, with no item {t!r}"
            node = node[int(t)]
        else:
            return f"{where} is {node!r}, neither a map nor a list"
        at += "/" + t.replace("~", "~0").replace("/", "~1")
    return None


def patched(
    doc: dict[str, Any], ops: Sequence[Mapping[str, Any]], field: str, target: str, root: str, start: str = ""
) -> dict[str, Any]:
    """`doc` with `ops` applied in order. The first one that does not apply is a `SpecError` at `field`[i] on
    `target` (the ones after it were written against its result, so they are not tried), never a traceback. `root`
    names the patched object in the messages, `start` adds where its paths start."""
    import jsonpatch
    import jsonpointer

    for i, op in enumerate(ops):
        try:  # on copies (of the document: a failed operation leaves it as it was; of the operation: the rendered
            # manifest never shares a value with the spec)
            doc = jsonpatch.JsonPatch([copy.deepcopy(op)]).apply(doc, in_place=False)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError, KeyError, IndexError) as err:
            kind = (
                "test"
                if isinstance(err, jsonpatch.JsonPatchTestFailed)
                else "invalid"
                if isinstance(err, jsonpatch.InvalidJsonPatch)
                else "path"
            )
            name = op["op"]
            why = (
                (_missing(doc, op["from"], True, root) if "from" in op else None)
                or _missing(doc, op["path"], name in ("remove", "replace", "test"), root)
                or str(err)
            )
            if kind == "test" and why == str(err):
                why = f"it holds {jsonpointer.resolve_pointer(doc, op['path'])!r}, not {op['value']!r}"
            what = f"{name} {op['from']!r} to {op['path']!r}" if "from" in op else f"{name} {op['path']!r}"
            raise SpecError(
                [Problem(f"{field}[{i}]", op, f"{what} on {target}: {why}", _patch_fix(kind, op, root, start))]
            ) from None
    return doc


@dataclass(frozen=True)
class SharedParts:
    """The pod parts of one job as a backend builds its objects from them (`jaxinfra.backends.Parts`)."""

    jp: JobPlan

    def pod_template(self, restart_policy: str = "Never", **spec_extra: Any) -> dict[str, Any]:
        return pod_template(self.jp, restart_policy, **spec_extra)

    def metadata(self, name: str | None = None) -> dict[str, Any]:
        return metadata(self.jp, name)

    def workload_metadata(self, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
        return workload_metadata(self.jp, annotations=dict(annotations or {}))

    def contract_env(self) -> list[dict[str, Any]]:
        return contract_env(self.jp)

    def resources(self) -> dict[str, Any]:
        return resources(self.jp)
