"""Built-in defaulting: what the API server writes into a built-in object after decoding it and before any admission
plugin sees it (pkg/apis/*/v1/defaults.go, run by the generated walkers that visit every nested struct). The later
steps -- webhooks, validation, quota, the simulator's controllers -- must see what a real cluster stores: a Job's
completions and backoffLimit, a container's pull policy, a Service port's targetPort.

Go decodes into typed structs, so "unset" has two meanings, kept in the tables below: a pointer field (`_PTR`) is
unset when missing or null; a plain field (`_PLAIN`) also when it holds its type's zero value ("" or 0), which is why
a probe's `periodSeconds: 0` becomes 10. A plain nested struct on the walker's path (a Job's spec.template.spec)
exists in Go even when the JSON lacks it, so it is created here when defaults land in it; a value of another JSON
type is left alone (the schema step reports it). Every rule only fills what is unset, so applying twice changes
nothing.

Upstream sources (facts carried over, no code):
- kubernetes/kubernetes pkg/apis/batch/v1/defaults.go: SetDefaults_Job, SetDefaults_CronJob,
  SetDefaults_PodFailurePolicyOnPodConditionsPattern -- the master revision in the reference index (ptr.To form,
  with manualSelector and the per-pattern defaulter; the index names no commit for it), compared with 045bbb192caa
  3d04b3aaa5b20fd9989ce11996fa (before backoffLimitPerIndex/podReplacementPolicy/manualSelector existed).
- kubernetes/kubernetes pkg/apis/batch/v1/zz_generated.defaults.go @ 01bfd658f45d5f4cc422f1852882393f720d3f6d:
  a Job's template gets the PodSpec, container, volume and probe defaulters but not SetDefaults_Pod.
- kubernetes/kubernetes pkg/apis/core/v1/defaults.go @ 023f88a32c95647b94e47df54948a0af9517dd0c: Pod, PodSpec,
  Container, Probe, HTTPGetAction, Volume (emptyDir, image volume pullPolicy), the volume sources' defaultMode 0644,
  HostPath type "", ServiceAccountToken expiry 3600, ObjectFieldSelector apiVersion v1, Service, Secret, Namespace,
  NamespaceStatus, PersistentVolume(Claim)(Spec), LimitRangeItem, ResourceList (round up to milli).
- kubernetes/kubernetes pkg/apis/core/v1/zz_generated.defaults.go @ 90be1318f6e5135e1ec1c2b183e79ad6a608f135: the
  declarative (+default) ones -- container and Service port protocol TCP, grpc probe service "", iSCSI interface,
  RBD pool/user/keyring -- and which lists each walker rounds.
- kubernetes/kubernetes pkg/api/v1/service/util.go ExternallyAccessible (LoadBalancer, NodePort, or ClusterIP with
  externalIPs), which gates externalTrafficPolicy.
- kubernetes/kubernetes pkg/apis/rbac/v1/defaults.go @ 7c30c06e721d89056db323a3857a6b89990adf03 and
  pkg/apis/networking/v1/defaults.go @ 030880a5dc5449403c6d1f0aa146a7dc21d6c6dc.
- kubernetes/kubernetes pkg/util/parsers/parsers.go ParseImageName (@ 346ddc52c2ac002882015cdfa6fd7335ff5638fb;
  master parses with ParseNormalizedNamed): no tag and no digest reads as "latest", a digest alone has no tag, an
  unparsable reference has no tag (so IfNotPresent).
- distribution/reference @ 0965666a6ade2e06035fe352e38344be1e68951a regexp.go, normalize.go, reference.go (the
  reference grammar, docker.io/library/ normalisation, lowercase rule, 255-character path limit) and
  opencontainers/go-digest Algorithm.Validate (sha256/384/512, lowercase hex of the exact length).
- kubernetes/kubernetes pkg/features/kube_features.go (master, versioned gates): JobPodReplacementPolicy beta-on
  1.29, GA locked on 1.34, so podReplacementPolicy is always defaulted; JobBackoffLimitPerIndex GA 1.33;
  ImageVolume beta, on by default from 1.35; PodLevelResources beta, on from 1.34.

Knowingly not emulated: PodLevelResources' pod-level requests/limits defaulting (defaultPodRequests/Limits,
hugepages); the registry strategies' PrepareForCreate (status resets, Job selector and controller-uid labels, pod
QoS, Namespace finalizers, Service clusterIP/ipFamilies allocation); serialisation artefacts (`resources: {}`,
ConfigMap `data: {}` is omitted again on output) and quantity canonicalisation of values that need no rounding; the
apps/v1, Endpoints, Node and in-tree AzureDisk/ScaleIO defaulters; kinds other than the ones `apply` dispatches.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from typing import Any

from jaxinfra.admission.decoded import is_int
from jaxinfra.admission.store import meta
from jaxinfra.quantity import parse, suffix_of
from jaxinfra.upstream import BATCH_API, NAMESPACE_NAME_LABEL, NETWORKING_API, RBAC_API, RBAC_API_GROUP

__all__ = ["apply", "job_spec", "pod_spec"]

_PTR, _PLAIN = True, False
Table = Mapping[str, tuple[Any, bool]]
"""field -> (default, pointer?): a pointer field is unset only when missing/null, a plain one also at its zero."""

MAX_INT32 = 2**31 - 1

# --- plain defaults, as data -------------------------------------------------------------------------------------

_POD_SPEC: Table = {
    "dnsPolicy": ("ClusterFirst", _PLAIN),
    "restartPolicy": ("Always", _PLAIN),
    "securityContext": ({}, _PTR),
    "terminationGracePeriodSeconds": (30, _PTR),
    "schedulerName": ("default-scheduler", _PLAIN),
}
_POD_ONLY: Table = {"enableServiceLinks": (True, _PTR)}  # SetDefaults_Pod: Pods, not templates
_CONTAINER: Table = {
    "terminationMessagePath": ("/dev/termination-log", _PLAIN),
    "terminationMessagePolicy": ("File", _PLAIN),
}
_PORT: Table = {"protocol": ("TCP", _PLAIN)}
_PROBE: Table = {
    "timeoutSeconds": (1, _PLAIN),
    "periodSeconds": (10, _PLAIN),
    "successThreshold": (1, _PLAIN),
    "failureThreshold": (3, _PLAIN),
}
_HTTP_GET: Table = {"path": ("/", _PLAIN), "scheme": ("HTTP", _PLAIN)}
_GRPC: Table = {"service": ("", _PTR)}
_FIELD_REF: Table = {"apiVersion": ("v1", _PLAIN)}
_MODE_0644: Table = {"defaultMode": (0o644, _PTR)}
_VOLUME_SOURCES: Mapping[str, Table] = {
    "hostPath": {"type": ("", _PTR)},
    "secret": _MODE_0644,
    "configMap": _MODE_0644,
    "downwardAPI": _MODE_0644,
    "projected": _MODE_0644,
    "iscsi": {"iscsiInterface": ("default", _PLAIN)},
    "rbd": {"pool": ("rbd", _PLAIN), "user": ("admin", _PLAIN), "keyring": ("/etc/ceph/keyring", _PLAIN)},
}
_TOKEN_PROJECTION: Table = {"expirationSeconds": (3600, _PTR)}
_CLAIM_SPEC: Table = {"volumeMode": ("Filesystem", _PTR)}
_CLAIM_STATUS: Table = {"phase": ("Pending", _PLAIN)}
_VOLUME_SPEC: Table = {"persistentVolumeReclaimPolicy": ("Retain", _PLAIN), "volumeMode": ("Filesystem", _PTR)}
_JOB_SPEC: Table = {
    "completionMode": ("NonIndexed", _PTR),
    "suspend": (False, _PTR),
    "manualSelector": (False, _PTR),
}
_CONDITION_PATTERN: Table = {"status": ("True", _PLAIN)}
_CRON_JOB_SPEC: Table = {
    "concurrencyPolicy": ("Allow", _PLAIN),
    "suspend": (False, _PTR),
    "successfulJobsHistoryLimit": (3, _PTR),
    "failedJobsHistoryLimit": (1, _PTR),
}
_SERVICE_SPEC: Table = {"sessionAffinity": ("None", _PLAIN), "type": ("ClusterIP", _PLAIN)}
_CLIENT_IP_TIMEOUT = 10800  # DefaultClientIPServiceAffinitySeconds: three hours
_SECRET: Table = {"type": ("Opaque", _PLAIN)}
_NAMESPACE_STATUS: Table = {"phase": ("Active", _PLAIN)}
_ROLE_REF: Table = {"apiGroup": (RBAC_API_GROUP, _PLAIN)}
_SUBJECT_GROUP = {"User": RBAC_API_GROUP, "Group": RBAC_API_GROUP}  # a ServiceAccount subject's group stays ""
_POLICY_PORT: Table = {"protocol": ("TCP", _PTR)}
_LIMIT_RANGE_COPIES = (("max", "default"), ("default", "defaultRequest"), ("min", "defaultRequest"))
_LIMIT_RANGE_LISTS = ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


# --- walking JSON as Go's typed structs ---------------------------------------------------------------------------


def _unset(have: Any, default: Any, pointer: bool) -> bool:
    if have is None:
        return True
    return not pointer and type(have) is type(default) and have == type(default)()


def _fill(obj: dict | None, table: Table) -> None:
    if obj is None:
        return
    for key, (default, pointer) in table.items():
        if _unset(obj.get(key), default, pointer):
            obj[key] = copy.deepcopy(default)


def _struct(parent: dict | None, key: str) -> dict | None:
    """A plain (non-pointer) nested struct: Go always has it, so it is created when missing or null."""
    if parent is None:
        return None
    if parent.get(key) is None:
        parent[key] = {}
    value = parent[key]
    return value if isinstance(value, dict) else None


def _pointer(parent: dict | None, key: str) -> dict | None:
    """A pointer struct (or a map): only there when the object has it."""
    value = parent.get(key) if parent is not None else None
    return value if isinstance(value, dict) else None


def _items(parent: dict | None, key: str) -> Iterator[dict]:
    value = parent.get(key) if parent is not None else None
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, dict))


# --- image references (distribution/reference's grammar, as ParseNormalizedNamed applies it) ---------------------

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[(?:[a-fA-F0-9:]+)\])(?::[0-9]+)?"
_REFERENCE = re.compile(
    rf"((?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*)(?::([\w][\w.-]{{0,127}}))?"
    r"(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?",
    re.ASCII,
)
_IDENTIFIER = re.compile(r"[a-f0-9]{64}")
_DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}  # the algorithms the API server links in
_PATH_MAX = 255


def _normalized(image: str) -> str:
    """The reference with docker.io/ and library/ added where the familiar form leaves them out."""
    first, slash, rest = image.partition("/")
    if not slash:
        return "docker.io/library/" + image
    if first == "localhost" or any(c in first for c in ".:") or first.lower() != first:
        domain, remote = ("docker.io" if first == "index.docker.io" else first), rest
    else:
        domain, remote = "docker.io", image
    if domain == "docker.io" and "/" not in remote:
        remote = "library/" + remote
    return f"{domain}/{remote}"


def _image_tag(image: str) -> str:
    """The tag ParseImageName reads: "latest" when there is neither tag nor digest, "" for a digest alone or for
    a reference that does not parse."""
    if _IDENTIFIER.fullmatch(image):
        return ""
    normalized = _normalized(image)
    remote = normalized.partition("/")[2].partition(":")[0]
    if remote.lower() != remote:
        return ""
    match = _REFERENCE.fullmatch(normalized)
    if match is None or len(match.group(1).partition("/")[2]) > _PATH_MAX:
        return ""
    _, tag, digest = match.groups()
    if digest:
        algorithm, _, hex_part = digest.partition(":")
        if _DIGEST_HEX.get(algorithm) != len(hex_part) or not re.fullmatch(r"[a-f0-9]+", hex_part):
            return ""
    return tag or ("" if digest else "latest")


def _pull_policy(image: str) -> str:
    return "Always" if _image_tag(image) == "latest" else "IfNotPresent"


# --- quantities ---------------------------------------------------------------------------------------------------

_SI = {-3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def _milli_ceiling(value: Fraction, written: Any) -> str:
    """A value rounded up (away from zero) to whole milli-units, written as the API server writes it."""
    n = math.ceil(abs(value) * 1000) * (1 if value > 0 else -1)
    exponent = -3
    while n % 1000 == 0 and exponent < 18:
        n //= 1000
        exponent += 3
    if suffix_of(written)[:1] in ("e", "E"):
        return f"{n}e{exponent}" if exponent else str(n)
    return f"{n}{_SI[exponent]}"


def _round_resources(resources: Any) -> None:
    """SetDefaults_ResourceList: quantities finer than a milli-unit round up to one (cpu 100u becomes 1m)."""
    if not isinstance(resources, dict):
        return
    for key, written in resources.items():
        value = parse(written)
        if value is not None and (value * 1000).denominator != 1:
            resources[key] = _milli_ceiling(value, written)


def _requirements(obj: dict | None, key: str = "resources") -> None:
    reqs = _pointer(obj, key)
    _round_resources(reqs and reqs.get("limits"))
    _round_resources(reqs and reqs.get("requests"))


# --- pods ---------------------------------------------------------------------------------------------------------


def _container(container: dict) -> None:
    policy = container.get("imagePullPolicy")
    image = container.get("image")
    image = "" if image is None else image
    if policy in (None, "") and isinstance(image, str):
        container["imagePullPolicy"] = _pull_policy(image)
    _fill(container, _CONTAINER)
    for port in _items(container, "ports"):
        _fill(port, _PORT)
    for env in _items(container, "env"):
        _fill(_pointer(_pointer(env, "valueFrom"), "fieldRef"), _FIELD_REF)
    _requirements(container)
    for key in _PROBES:
        probe = _pointer(container, key)
        _fill(probe, _PROBE)
        _fill(_pointer(probe, "httpGet"), _HTTP_GET)
        _fill(_pointer(probe, "grpc"), _GRPC)
    lifecycle = _pointer(container, "lifecycle")
    for hook in ("postStart", "preStop"):
        _fill(_pointer(_pointer(lifecycle, hook), "httpGet"), _HTTP_GET)


def _downward_items(source: dict | None) -> None:
    for item in _items(source, "items"):
        _fill(_pointer(item, "fieldRef"), _FIELD_REF)


def _claim_spec(spec: dict | None) -> None:
    _fill(spec, _CLAIM_SPEC)
    _requirements(spec)


def _volume(volume: dict) -> None:
    if all(value is None for key, value in volume.items() if key != "name"):
        volume["emptyDir"] = {}
    for key, table in _VOLUME_SOURCES.items():
        _fill(_pointer(volume, key), table)
    _downward_items(_pointer(volume, "downwardAPI"))
    for source in _items(_pointer(volume, "projected"), "sources"):
        _downward_items(_pointer(source, "downwardAPI"))
        _fill(_pointer(source, "serviceAccountToken"), _TOKEN_PROJECTION)
    image = _pointer(volume, "image")
    if image is not None and image.get("pullPolicy") in (None, ""):
        reference = "" if image.get("reference") is None else image["reference"]
        if isinstance(reference, str):
            image["pullPolicy"] = _pull_policy(reference)
    template = _pointer(_pointer(volume, "ephemeral"), "volumeClaimTemplate")
    if template is not None:
        _claim_spec(_struct(template, "spec"))


def requests_from_limits(spec: dict) -> None:
    """SetDefaults_Pod's resources: a container's limit without a request makes that request (a Pod only, not a
    template; admission's LimitRanger reads the result)."""
    for key in ("initContainers", "containers"):
        for container in _items(spec, key):
            reqs = _pointer(container, "resources")
            limits = _pointer(reqs, "limits")
            if reqs is None or not limits:
                continue
            if reqs.get("requests") is None:
                reqs["requests"] = {}
            if isinstance(reqs["requests"], dict):
                for name, value in limits.items():
                    reqs["requests"].setdefault(name, copy.deepcopy(value))


def _pod_only(spec: dict) -> None:
    """SetDefaults_Pod: what a Pod gets and a pod template does not."""
    requests_from_limits(spec)
    _fill(spec, _POD_ONLY)
    if spec.get("hostNetwork") is True:
        for key in ("initContainers", "containers"):
            for container in _items(spec, key):
                for port in _items(container, "ports"):
                    if _unset(port.get("hostPort"), 0, _PLAIN) and is_int(port.get("containerPort")):
                        port["hostPort"] = port["containerPort"]


def pod_spec(spec: dict, *, pod: bool = False) -> None:
    """Default a PodSpec in place as the API server does inside any object that holds one (a Job's template, a
    PodTemplate); `pod=True` adds what only a Pod object gets (requests from limits, enableServiceLinks, host ports
    under hostNetwork), for a controller emulation that creates Pods from a template."""
    if not isinstance(spec, dict):
        return
    if pod:
        _pod_only(spec)
    _fill(spec, _POD_SPEC)
    for volume in _items(spec, "volumes"):
        _volume(volume)
    for key in _CONTAINER_LISTS:
        for container in _items(spec, key):
            _container(container)
    _round_resources(spec.get("overhead"))
    _requirements(spec)


def _template_spec(template: dict | None) -> None:
    spec = _struct(template, "spec")
    if spec is not None:
        pod_spec(spec)


# --- workloads ----------------------------------------------------------------------------------------------------


def _pod_failure_policy(spec: dict) -> None:
    for rule in _items(_pointer(spec, "podFailurePolicy"), "rules"):
        for pattern in _items(rule, "onPodConditions"):
            _fill(pattern, _CONDITION_PATTERN)


def job_spec(spec: dict) -> None:
    """Default a JobSpec in place (SetDefaults_Job's spec part, then the pod template's PodSpec), as the API server
    does to a Job a controller such as JobSet creates from its template."""
    if not isinstance(spec, dict):
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else 6
    _fill(spec, _JOB_SPEC)
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = "Failed" if spec.get("podFailurePolicy") is not None else "TerminatingOrFailed"
    _pod_failure_policy(spec)
    _template_spec(_struct(spec, "template"))


def _job(obj: dict) -> None:
    spec = _struct(obj, "spec")
    template = _pointer(spec, "template")
    labels = _pointer(_pointer(template, "metadata"), "labels")
    metadata = _struct(obj, "metadata") if labels else None
    if labels and metadata is not None and not metadata.get("labels"):
        metadata["labels"] = dict(labels)  # a copy: the stored Job and its template do not share one map
    if spec is not None:
        job_spec(spec)


def _cron_job(obj: dict) -> None:
    spec = _struct(obj, "spec")
    _fill(spec, _CRON_JOB_SPEC)
    job = _struct(_struct(spec, "jobTemplate"), "spec")
    if job is not None:
        _pod_failure_policy(job)
        _template_spec(_struct(job, "template"))


def _pod(obj: dict) -> None:
    spec = _struct(obj, "spec")
    if spec is not None:
        pod_spec(spec, pod=True)


def _pod_template(obj: dict) -> None:
    _template_spec(_struct(obj, "template"))


# --- services, config, storage, access ----------------------------------------------------------------------------


def _service(obj: dict) -> None:
    spec = _struct(obj, "spec")
    if spec is None:
        return
    _fill(spec, _SERVICE_SPEC)
    affinity, kind = spec["sessionAffinity"], spec["type"]
    if affinity == "None":
        spec.pop("sessionAffinityConfig", None)
    elif affinity == "ClientIP":
        client_ip = _pointer(_pointer(spec, "sessionAffinityConfig"), "clientIP")
        if client_ip is None or client_ip.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": _CLIENT_IP_TIMEOUT}}
    for port in _items(spec, "ports"):
        _fill(port, _PORT)
        target = port.get("targetPort")
        if (target is None or target == "" or (is_int(target) and target == 0)) and is_int(port.get("port")):
            port["targetPort"] = port["port"]
    external_ips = spec.get("externalIPs")
    exposed = kind in ("LoadBalancer", "NodePort") or (
        kind == "ClusterIP" and isinstance(external_ips, list) and len(external_ips) > 0
    )
    if exposed and spec.get("externalTrafficPolicy") in (None, ""):
        spec["externalTrafficPolicy"] = "Cluster"
    if spec.get("internalTrafficPolicy") is None and kind in ("NodePort", "LoadBalancer", "ClusterIP"):
        spec["internalTrafficPolicy"] = "Cluster"
    if kind == "LoadBalancer":
        if spec.get("allocateLoadBalancerNodePorts") is None:
            spec["allocateLoadBalancerNodePorts"] = True
        for ingress in _items(_pointer(_pointer(obj, "status"), "loadBalancer"), "ingress"):
            if ingress.get("ip") not in (None, "") and ingress.get("ipMode") is None:
                ingress["ipMode"] = "VIP"


def _secret(obj: dict) -> None:
    _fill(obj, _SECRET)


def _namespace(obj: dict) -> None:
    name = meta(obj).get("name")
    if isinstance(name, str) and name:
        labels = _struct(_struct(obj, "metadata"), "labels")
        if labels is not None:
            labels[NAMESPACE_NAME_LABEL] = name
    _fill(_struct(obj, "status"), _NAMESPACE_STATUS)


def _claim(obj: dict) -> None:
    _claim_spec(_struct(obj, "spec"))
    _fill(_struct(obj, "status"), _CLAIM_STATUS)


def _persistent_volume(obj: dict) -> None:
    spec = _struct(obj, "spec")
    _fill(spec, _VOLUME_SPEC)
    _round_resources(spec and spec.get("capacity"))
    for key in ("hostPath", "iscsi", "rbd"):
        _fill(_pointer(spec, key), _VOLUME_SOURCES[key])
    _fill(_struct(obj, "status"), _CLAIM_STATUS)


def _limit_range(obj: dict) -> None:
    for item in _items(_pointer(obj, "spec"), "limits"):
        if item.get("type") == "Container":
            for source, target in _LIMIT_RANGE_COPIES:
                values = _pointer(item, source)
                if not values:
                    continue
                if item.get(target) is None:
                    item[target] = {}
                if isinstance(item[target], dict):
                    for name, value in values.items():
                        item[target].setdefault(name, copy.deepcopy(value))
        for key in _LIMIT_RANGE_LISTS:
            _round_resources(item.get(key))


def _resource_quota(obj: dict) -> None:
    _round_resources((_pointer(obj, "spec") or {}).get("hard"))


def _role_binding(obj: dict) -> None:
    _fill(_struct(obj, "roleRef"), _ROLE_REF)
    for subject in _items(obj, "subjects"):
        kind = subject.get("kind")
        if subject.get("apiGroup") in (None, "") and isinstance(kind, str) and kind in _SUBJECT_GROUP:
            subject["apiGroup"] = _SUBJECT_GROUP[kind]


def _network_policy(obj: dict) -> None:
    spec = _struct(obj, "spec")
    if spec is None:
        return
    if spec.get("policyTypes") in (None, []):
        egress = spec.get("egress")
        spec["policyTypes"] = ["Ingress"] + (["Egress"] if isinstance(egress, list) and egress else [])
    for direction in ("ingress", "egress"):
        for rule in _items(spec, direction):
            for port in _items(rule, "ports"):
                _fill(port, _POLICY_PORT)


_BY_KIND: Mapping[tuple[str, str], Callable[[dict], None]] = {
    (BATCH_API, "Job"): _job,
    (BATCH_API, "CronJob"): _cron_job,
    ("v1", "Pod"): _pod,
    ("v1", "PodTemplate"): _pod_template,
    ("v1", "Service"): _service,
    ("v1", "Secret"): _secret,
    ("v1", "Namespace"): _namespace,
    ("v1", "PersistentVolumeClaim"): _claim,
    ("v1", "PersistentVolume"): _persistent_volume,
    ("v1", "LimitRange"): _limit_range,
    ("v1", "ResourceQuota"): _resource_quota,
    (RBAC_API, "RoleBinding"): _role_binding,
    (RBAC_API, "ClusterRoleBinding"): _role_binding,
    (NETWORKING_API, "NetworkPolicy"): _network_policy,
}
"""(apiVersion, kind) -> its defaulter. v1 ServiceAccount, ConfigMap, Role and ClusterRole have none that shows."""


def apply(obj: dict) -> None:
    """Default one built-in object in place, by its apiVersion and kind; any other object is left as it is."""
    if not isinstance(obj, dict):
        return
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if isinstance(api_version, str) and isinstance(kind, str):
        defaulter = _BY_KIND.get((api_version, kind))
        if defaulter is not None:
            defaulter(obj)
