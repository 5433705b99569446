"""A pod's containers, as the API server's validation step checks them: names, images, ports and host ports, env and
envFrom, resources (`resources.py`), volume mounts, and which fields only some kinds of container may set.

Emulated from pkg/apis/core/validation/validation.go @000f26050b9b (kubernetes/kubernetes; the commit is the stored
version read): validateContainers, validateInitContainers,
validateContainerCommon, validateContainerPorts, AccumulateUniqueHostPorts, ValidateEnv, validateEnvVarValueFrom,
ValidateEnvFrom, validateContainerOnlyForPod. Knowingly not emulated: probes, lifecycle handlers, securityContext.
"""

from collections.abc import Iterable, Mapping
from typing import Any

from jaxinfra.admission.decoded import as_int, as_str, entries
from jaxinfra.admission.store import Finding, Path
from jaxinfra.admission.validation.messages import (
    duplicate_value,
    forbidden,
    invalid_each,
    invalid_value,
    not_supported,
    required_value,
)
from jaxinfra.admission.validation.meta import NAME_FIX, name_errors
from jaxinfra.admission.validation.names import (
    LABEL,
    PORT_RANGE,
    SUBDOMAIN,
    config_map_key,
    dns1123_label,
    dns1123_subdomain,
    env_var_name,
    port_name,
)
from jaxinfra.admission.validation.resources import resources
from jaxinfra.admission.validation.volumes import (
    validate_field_ref,
    validate_mounts,
    validate_resource_ref,
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
    out += resources(container.get("resources"), at + ("resources",))
    return out


_HOOKS = ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe")


def containers(spec: Mapping, volumes: Mapping[str, Mapping], at: Path) -> list[Finding]:
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
