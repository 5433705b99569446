"""PodSpec, PodTemplateSpec and Pod, as the API server's validation step checks them: containers (ports, env,
resources), restart and DNS policies, names the spec refers to, tolerations; volumes are `volumes.py`'s.

Emulated from pkg/apis/core/validation/validation.go @000f26050b9b (kubernetes/kubernetes; the commit is the stored
version read): ValidatePodSpec, ValidatePodTemplateSpec, validateContainers, validateInitContainers,
validateContainerCommon, validateContainerPorts, AccumulateUniqueHostPorts, ValidateEnv, validateEnvVarValueFrom,
ValidateEnvFrom, validateResourceRequirements, validateContainerResourceName, ValidateResourceQuantityValue,
validateRestartPolicy, validateDNSPolicy, validatePodDNSConfig (dnsPolicy None), ValidateTolerations,
validateContainerOnlyForPod; pkg/apis/core/helper/helpers.go (IsNativeResource, IsExtendedResourceName,
IsOvercommitAllowed); the Pod warnings from pkg/api/pod/warnings.go (a negative terminationGracePeriodSeconds is
accepted, with a warning, and treated as 1) and pkg/registry/core/pod/strategy.go @008b3652959c (WarningsOnCreate: a
Pod name that is no DNS label).

Knowingly not emulated: probes, lifecycle handlers, securityContext, affinity, topologySpreadConstraints, hugepage
divisibility. Quantities print as written, not in Go's canonical form.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from jaxinfra import quantity
from jaxinfra.admission.decoded import as_int, as_list, as_map, as_str, entries
from jaxinfra.admission.store import Finding, Path
from jaxinfra.admission.validation.messages import (
    Raw,
    distinct,
    duplicate_value,
    forbidden,
    invalid_each,
    invalid_value,
    not_supported,
    required_value,
)
from jaxinfra.admission.validation.meta import NAME_FIX, name_errors, validate_annotations, validate_labels
from jaxinfra.admission.validation.names import (
    LABEL,
    PORT_RANGE,
    SUBDOMAIN,
    config_map_key,
    dns1123_label,
    dns1123_subdomain,
    env_var_name,
    label_value,
    port_name,
    qualified_name,
)
from jaxinfra.admission.validation.volumes import (
    validate_field_ref,
    validate_mounts,
    validate_resource_ref,
    validate_volumes,
)

_ENV_FIELD_PATHS = (
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
)


PROTOCOLS = ("SCTP", "TCP", "UDP")


def _ports(ports: Any, at: Path) -> list[Finding]:
    """validateContainerPorts (protocol defaults to TCP)."""
    out: list[Finding] = []
    names: set[str] = set()
    for i, port in entries(ports):
        where = at + (i,)
        name = as_str(port.get("name"))
        if name:
            if errs := port_name(name):
                out += invalid_each(
                    where + ("name",),
                    name,
                    errs,
                    "use at most 15 lowercase letters, digits and single '-', with at least one letter",
                )
            elif name in names:
                out.append(duplicate_value(where + ("name",), name, "give each port its own name"))
            names.add(name)
        number = as_int(port.get("containerPort"))
        if not number:
            out.append(required_value(where + ("containerPort",), "set the port the container listens on"))
        elif not 1 <= number <= 65535:
            out.append(invalid_value(where + ("containerPort",), number, PORT_RANGE, "use a port from 1 to 65535"))
        host = as_int(port.get("hostPort"))
        if host and not 1 <= host <= 65535:
            out.append(invalid_value(where + ("hostPort",), host, PORT_RANGE, "use a port from 1 to 65535"))
        protocol = port.get("protocol", "TCP")
        if isinstance(protocol, str) and protocol not in PROTOCOLS:
            out.append(not_supported(where + ("protocol",), protocol, PROTOCOLS, "use TCP, UDP or SCTP"))
    return out


def _host_ports(containers: Iterable[tuple[int, Mapping]], at: Path, seen: set[str]) -> list[Finding]:
    """AccumulateUniqueHostPorts: one protocol/hostIP/hostPort per pod."""
    out: list[Finding] = []
    for i, container in containers:
        for j, port in entries(container.get("ports")):
            host = as_int(port.get("hostPort"))
            if not host:
                continue
            key = f"{as_str(port.get('protocol')) or 'TCP'}/{as_str(port.get('hostIP'))}/{host}"
            if key in seen:
                out.append(duplicate_value(at + (i, "ports", j, "hostPort"), key, "use another hostPort"))
            seen.add(key)
    return out


def _env(env: Any, at: Path) -> list[Finding]:
    """ValidateEnv and validateEnvVarValueFrom."""
    out: list[Finding] = []
    for i, var in entries(env):
        where = at + (i,)
        name = as_str(var.get("name"))
        if not name:
            out.append(required_value(where + ("name",), "name the variable"))
        else:
            out += invalid_each(where + ("name",), name, env_var_name(name), "use printable ASCII without '='")
        source = var.get("valueFrom")
        if not isinstance(source, Mapping):
            continue
        src_at = where + ("valueFrom",)
        kinds = [
            k
            for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
            if isinstance(source.get(k), Mapping)
        ]
        for kind in kinds:
            ref = source[kind]
            if kind == "fieldRef":
                out += validate_field_ref(ref, src_at + (kind,), _ENV_FIELD_PATHS)
            elif kind == "resourceFieldRef":
                out += validate_resource_ref(ref, src_at + (kind,), volume=False)
            else:
                ref_name = as_str(ref.get("name"))
                out += invalid_each(
                    src_at + (kind, "name"),
                    ref_name,
                    dns1123_subdomain(ref_name),
                    f"name the {'ConfigMap' if kind == 'configMapKeyRef' else 'Secret'}",
                )
                key = as_str(ref.get("key"))
                if not key:
                    out.append(required_value(src_at + (kind, "key"), "name the key to read"))
                else:
                    out += invalid_each(src_at + (kind, "key"), key, config_map_key(key), "use a valid key")
        if not kinds:
            out.append(
                invalid_value(
                    src_at,
                    "",
                    "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
                    "set one source, or use value",
                )
            )
        elif as_str(var.get("value")):
            out.append(
                invalid_value(
                    src_at, "", "may not be specified when `value` is not empty", "keep either value or valueFrom"
                )
            )
        elif len(kinds) > 1:
            out.append(
                invalid_value(src_at, "", "may not have more than one field specified at a time", "keep one source")
            )
    return out


def _env_from(env_from: Any, at: Path) -> list[Finding]:
    """ValidateEnvFrom (a missing source is reported on the list, as upstream does)."""
    out: list[Finding] = []
    for i, entry in entries(env_from):
        prefix = as_str(entry.get("prefix"))
        if prefix:
            out += invalid_each(at + (i, "prefix"), prefix, env_var_name(prefix), "use printable ASCII without '='")
        kinds = [k for k in ("configMapRef", "secretRef") if isinstance(entry.get(k), Mapping)]
        for kind in kinds:
            name = as_str(entry[kind].get("name"))
            if not name:
                out.append(required_value(at + (i, kind, "name"), "name the object to read"))
            else:
                out += invalid_each(
                    at + (i, kind, "name"), name, name_errors(SUBDOMAIN, name, prefix=True), NAME_FIX[SUBDOMAIN]
                )
        if not kinds:
            out.append(invalid_value(at, "", "must specify one of: `configMapRef` or `secretRef`", "set one source"))
        elif len(kinds) > 1:
            out.append(invalid_value(at, "", "may not have more than one field specified at a time", "keep one source"))
    return out


# -- resources: helper/helpers.go IsNativeResource, IsExtendedResourceName, IsOvercommitAllowed

_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_STANDARD_RESOURCES = frozenset(_CONTAINER_RESOURCES) | {
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
}


def _hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def _native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _extended(name: str) -> bool:
    return not _native(name) and not name.startswith("requests.") and not qualified_name("requests." + name)


def _resource_name(name: str, at: Path) -> list[Finding]:
    """validateContainerResourceName."""
    out = invalid_each(at, name, qualified_name(name), "use cpu, memory, ephemeral-storage or a vendor/resource name")
    if out:
        return out
    if "/" not in name:
        if name not in _STANDARD_RESOURCES and not _hugepages(name):
            out.append(
                invalid_value(
                    at,
                    name,
                    "must be a standard resource type or fully qualified",
                    "use cpu, memory, ephemeral-storage or a vendor/resource name such as nvidia.com/gpu",
                )
            )
        if name not in _CONTAINER_RESOURCES and not _hugepages(name):
            out.append(
                invalid_value(
                    at,
                    name,
                    "must be a standard resource for containers",
                    "use cpu, memory, ephemeral-storage or hugepages-<size>",
                )
            )
    elif not _native(name) and not _extended(name):
        out.append(
            invalid_value(
                at,
                name,
                "doesn't follow extended resource name standard",
                "use a vendor domain and a name: example.com/device",
            )
        )
    return out


def _milli_value(amount: Fraction) -> int:
    """Quantity.MilliValue() of a non-negative quantity: rounded up, saturated at int64 (apimachinery
    pkg/api/resource/math.go @ 13ab804c6d76), so ValidateResourceQuantityValue's `MilliValue() % 1000 != 0` refuses
    an extended resource of 2^63 / 1000 or more as "must be an integer" (`google.com/tpu: 1e5000`)."""
    return min(-(-amount.numerator * 1000 // amount.denominator), 2**63 - 1)


def _resources(resources: Any, at: Path) -> list[Finding]:
    """validateResourceRequirements: names, quantities (non-negative; extended resources whole), requests <=
    limits, and requests == limits (limits required) for what cannot be overcommitted."""
    res = as_map(resources)
    out: list[Finding] = []
    parsed: dict[str, dict[str, Fraction]] = {"limits": {}, "requests": {}}
    cpu_or_memory = hugepages = False
    for part in ("limits", "requests"):
        for name, value in as_map(res.get(part)).items():
            name = str(name)
            where = at + (part, name)
            out += _resource_name(name, where)
            amount = quantity.parse(value)
            if amount is None:
                out.append(
                    invalid_value(
                        where,
                        value,
                        quantity.MESSAGE,
                        "write a quantity such as 500m, 2 or 16Gi (kilo is a lowercase k)",
                    )
                )
                continue
            parsed[part][name] = amount
            if amount < 0:
                out.append(
                    invalid_value(where, str(value), "must be greater than or equal to 0", "use a non-negative amount")
                )
            elif _extended(name) and _milli_value(amount) % 1000:
                out.append(invalid_value(where, Raw(value), "must be an integer", f"request whole {name} devices"))
            cpu_or_memory |= name in ("cpu", "memory")
            hugepages |= _hugepages(name)
            if part != "requests":
                continue
            overcommit = _native(name) and not _hugepages(name)
            limit = parsed["limits"].get(name)
            written = as_map(res.get("limits")).get(name)
            if limit is not None:
                if amount != limit and not overcommit:
                    out.append(
                        invalid_value(
                            at + ("requests",),
                            str(value),
                            f"must be equal to {name} limit of {written}",
                            f"set the {name} request equal to its limit (or drop the request)",
                        )
                    )
                elif amount > limit:
                    out.append(
                        invalid_value(
                            at + ("requests",),
                            str(value),
                            f"must be less than or equal to {name} limit of {written}",
                            f"lower the {name} request or raise its limit",
                        )
                    )
            elif not overcommit and name not in as_map(res.get("limits")):
                out.append(
                    required_value(
                        at + ("limits",),
                        f"set limits.{name} equal to the request (or set only the limit: the request defaults to it)",
                        "Limit must be set for non overcommitable resources",
                    )
                )
    if hugepages and not cpu_or_memory:
        out.append(forbidden(at, "HugePages require cpu or memory", "request cpu or memory too"))
    return out


def _container(container: Mapping, volumes: Mapping[str, Mapping], at: Path) -> list[Finding]:
    """validateContainerCommon."""
    out: list[Finding] = []
    name = as_str(container.get("name"))
    if not name:
        out.append(required_value(at + ("name",), "name the container"))
    else:
        out += invalid_each(at + ("name",), name, dns1123_label(name), NAME_FIX[LABEL])
    if not as_str(container.get("image")):
        out.append(required_value(at + ("image",), "set the container image, e.g. python:3.11"))
    policy = container.get("terminationMessagePolicy")
    if isinstance(policy, str) and policy not in ("File", "FallbackToLogsOnError"):
        out.append(
            not_supported(
                at + ("terminationMessagePolicy",),
                policy,
                ("File", "FallbackToLogsOnError"),
                "use File or FallbackToLogsOnError",
            )
        )
    out += _ports(container.get("ports"), at + ("ports",))
    out += _env(container.get("env"), at + ("env",))
    out += _env_from(container.get("envFrom"), at + ("envFrom",))
    out += validate_mounts(container, volumes, at + ("volumeMounts",))
    pull = container.get("imagePullPolicy")
    if isinstance(pull, str) and pull not in ("Always", "IfNotPresent", "Never"):
        out.append(
            not_supported(
                at + ("imagePullPolicy",),
                pull,
                ("Always", "IfNotPresent", "Never"),
                "use Always, IfNotPresent or Never",
            )
        )
    out += _resources(container.get("resources"), at + ("resources",))
    return out


_HOOKS = ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe")


def _containers(spec: Mapping, volumes: Mapping[str, Mapping], at: Path) -> list[Finding]:
    """validateContainers and validateInitContainers: names unique across both lists."""
    out: list[Finding] = []
    containers = list(entries(spec.get("containers")))
    if not containers:
        out.append(required_value(at + ("containers",), "list at least one container"))
    names: set[str] = set()
    for i, c in containers:
        where = at + ("containers", i)
        out += _container(c, volumes, where)
        if as_str(c.get("name")) in names:
            out.append(duplicate_value(where + ("name",), as_str(c.get("name")), "give each container its own name"))
        names.add(as_str(c.get("name")))
        if "restartPolicy" in c:
            out.append(
                forbidden(
                    where + ("restartPolicy",),
                    "may not be set for non-init containers",
                    "drop it, or move the container to initContainers as a sidecar",
                )
            )
    out += _host_ports(containers, at + ("containers",), set())
    for i, c in entries(spec.get("initContainers")):
        where = at + ("initContainers", i)
        out += _container(c, volumes, where)
        policy = c.get("restartPolicy")
        if isinstance(policy, str) and policy != "Always":
            out.append(
                not_supported(where + ("restartPolicy",), policy, ("Always",), "use Always (a sidecar) or drop it")
            )
        name = as_str(c.get("name"))
        if name in names:
            out.append(duplicate_value(where + ("name",), name, "give each container, init or not, its own name"))
        elif name:
            names.add(name)
        out += _host_ports([(i, c)], at + ("initContainers",), set())
        if policy != "Always":
            out += [
                forbidden(
                    where + (hook,),
                    "may not be set for init containers without restartPolicy=Always",
                    "drop it, or make the init container a sidecar (restartPolicy: Always)",
                )
                for hook in _HOOKS
                if c.get(hook) is not None
            ]
    return out


def _tolerations(tolerations: Any, at: Path) -> list[Finding]:
    """ValidateTolerations."""
    out: list[Finding] = []
    for i, t in entries(tolerations):
        where = at + (i,)
        key, op, effect = as_str(t.get("key")), as_str(t.get("operator")), as_str(t.get("effect"))
        if key:
            out += invalid_each(where + ("key",), key, qualified_name(key), "use the taint's key")
        if not key and op != "Exists":
            out.append(
                invalid_value(
                    where + ("operator",),
                    op,
                    'operator must be Exists when `key` is empty, which means "match all values and all keys"',
                    "set the key, or use operator: Exists",
                )
            )
        if t.get("tolerationSeconds") is not None and effect != "NoExecute":
            out.append(
                invalid_value(
                    where + ("effect",),
                    effect,
                    "effect must be 'NoExecute' when `tolerationSeconds` is set",
                    "use effect: NoExecute or drop tolerationSeconds",
                )
            )
        value = as_str(t.get("value"))
        if op in ("Equal", ""):
            if errs := label_value(value):
                out.append(invalid_value(where + ("operator",), value, ";".join(errs), "use the taint's value"))
        elif op == "Exists":
            if value:
                out.append(
                    invalid_value(
                        where + ("operator",),
                        value,
                        "value must be empty when `operator` is 'Exists'",
                        "drop the value",
                    )
                )
        else:
            out.append(not_supported(where + ("operator",), op, ("Equal", "Exists"), "use Equal or Exists"))
        if effect and effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            out.append(
                not_supported(
                    where + ("effect",),
                    effect,
                    ("NoSchedule", "PreferNoSchedule", "NoExecute"),
                    "use NoSchedule, PreferNoSchedule or NoExecute",
                )
            )
    return out


_RESTART = ("Always", "OnFailure", "Never")
_DNS = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")


def pod_spec(spec: Mapping, at: Path) -> list[Finding]:
    """ValidatePodSpec: volumes, containers, restartPolicy (default Always), dnsPolicy (default ClusterFirst),
    nodeSelector, names it refers to, activeDeadlineSeconds, hostname/subdomain, tolerations; a negative
    terminationGracePeriodSeconds is a warning (the API server treats it as 1)."""
    spec = as_map(spec)
    volumes, out = validate_volumes(spec.get("volumes"), at + ("volumes",))
    out += _containers(spec, volumes, at)
    restart = spec.get("restartPolicy", "Always")
    if isinstance(restart, str) and restart not in _RESTART:
        out.append(
            required_value(at + ("restartPolicy",), "use Always, OnFailure or Never")
            if not restart
            else not_supported(at + ("restartPolicy",), restart, _RESTART, "use Always, OnFailure or Never")
        )
    dns = spec.get("dnsPolicy", "ClusterFirst")
    if isinstance(dns, str) and dns not in _DNS:
        out.append(
            required_value(at + ("dnsPolicy",), "use ClusterFirst")
            if not dns
            else not_supported(at + ("dnsPolicy",), dns, _DNS, "use ClusterFirst (the default)")
        )
    out += validate_labels(spec.get("nodeSelector"), at + ("nodeSelector",))
    if dns == "None":
        config = spec.get("dnsConfig")
        if not isinstance(config, Mapping):
            out.append(
                required_value(
                    at + ("dnsConfig",),
                    "give dnsConfig.nameservers, or use dnsPolicy: ClusterFirst",
                    "must provide `dnsConfig` when `dnsPolicy` is None",
                )
            )
        elif not as_list(config.get("nameservers")):
            out.append(
                required_value(
                    at + ("dnsConfig", "nameservers"),
                    "list at least one nameserver",
                    "must provide at least one DNS nameserver when `dnsPolicy` is None",
                )
            )
    for key, rule in (("serviceAccountName", SUBDOMAIN), ("nodeName", SUBDOMAIN)):
        value = as_str(spec.get(key))
        if value:
            out += invalid_each(at + (key,), value, name_errors(rule, value), NAME_FIX[rule])
    deadline = as_int(spec.get("activeDeadlineSeconds"))
    if deadline is not None and not 1 <= deadline <= 2**31 - 1:
        out.append(
            invalid_value(
                at + ("activeDeadlineSeconds",),
                deadline,
                "must be between 1 and 2147483647, inclusive",
                "use a positive number of seconds",
            )
        )
    for key in ("hostname", "subdomain"):
        value = as_str(spec.get(key))
        if value:
            out += invalid_each(at + (key,), value, dns1123_label(value), NAME_FIX[LABEL])
    out += _tolerations(spec.get("tolerations"), at + ("tolerations",))
    priority = as_str(spec.get("priorityClassName"))
    if priority:
        out += invalid_each(at + ("priorityClassName",), priority, dns1123_subdomain(priority), NAME_FIX[SUBDOMAIN])
    grace = as_int(spec.get("terminationGracePeriodSeconds"))
    if grace is not None and grace < 0:
        out.append(
            Finding(
                at + ("terminationGracePeriodSeconds",),
                grace,
                "must be >= 0; negative values are invalid and will be treated as 1",
                "use 0 or more seconds",
                warning=True,
            )
        )
    return out


def pod_template(template: Mapping, at: Path) -> list[Finding]:
    """ValidatePodTemplateSpec: the template's labels and annotations (upstream names them `<at>.labels`), its pod
    spec, and no ephemeral containers."""
    template = as_map(template)
    meta = as_map(template.get("metadata"))
    out = validate_labels(meta.get("labels"), at + ("labels",))
    out += validate_annotations(meta.get("annotations"), at + ("annotations",))
    spec = as_map(template.get("spec"))
    out += pod_spec(spec, at + ("spec",))
    if as_list(spec.get("ephemeralContainers")):
        out.append(
            forbidden(
                at + ("spec", "ephemeralContainers"),
                "ephemeral containers not allowed in pod template",
                "drop ephemeralContainers: they are added to running pods only",
            )
        )
    return distinct(out)


def validate_pod(obj: Mapping) -> list[Finding]:
    """ValidatePodCreate: the spec, images without surrounding blanks, and the name warning of WarningsOnCreate."""
    spec = as_map(obj.get("spec"))
    out = pod_spec(spec, ("spec",))
    for part in ("containers", "initContainers"):
        for i, c in entries(spec.get(part)):
            image = as_str(c.get("image"))
            if image != image.strip():
                out.append(
                    invalid_value(
                        ("spec", part, i, "image"),
                        image,
                        "must not have leading or trailing whitespace",
                        "trim the image reference",
                    )
                )
    name = as_str(as_map(obj.get("metadata")).get("name"))
    if name and (errs := dns1123_label(name)) and not dns1123_subdomain(name):
        out.append(
            Finding(
                ("metadata", "name"),
                name,
                "this is used in the Pod's hostname, which can result in "
                f"surprising behavior; a DNS label is recommended: [{' '.join(errs)}]",
                "use a DNS label: no dots, at most 63 characters",
                warning=True,
            )
        )
    return out
