"""Service, ConfigMap, Secret, Namespace and PriorityClass, as the API server's validation step checks them.

Emulated from kubernetes/kubernetes pkg/apis/core/validation/validation.go @000f26050b9b (the commit is the stored
version read): ValidateService, validateServicePort, ValidateConfigMap, ValidateSecret, ValidateNamespace; and
pkg/apis/scheduling/validation/validation.go ValidatePriorityClass.

Knowingly not emulated: Service IP families / traffic policies / session affinity, Secret payload formats (only the
required keys per type).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jaxinfra.admission import gobase64
from jaxinfra.admission.decoded import as_int, as_list, as_map, as_str, entries
from jaxinfra.admission.store import Finding, Path
from jaxinfra.admission.validation.containers import PROTOCOLS
from jaxinfra.admission.validation.messages import (
    Raw,
    duplicate_value,
    forbidden,
    invalid_each,
    invalid_value,
    not_supported,
    required_value,
    string_map,
    too_long,
)
from jaxinfra.admission.validation.meta import NAME_FIX, kube_finalizer, validate_labels
from jaxinfra.admission.validation.names import (
    LABEL,
    PORT_RANGE,
    byte_size,
    config_map_key,
    dns1123_label,
    dns1123_subdomain,
    port_name,
)
from jaxinfra.upstream import SYSTEM_PRIORITY_CLASSES

MAX_SECRET_BYTES = 1024 * 1024
_SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")


def validate_service(obj: Mapping) -> list[Finding]:
    """ValidateService: ports (required unless headless or ExternalName; names, numbers, protocols, uniqueness),
    the selector, the type and externalName."""
    spec = as_map(obj.get("spec"))
    at: Path = ("spec",)
    out: list[Finding] = []
    kind = spec.get("type", "ClusterIP")
    ips = [ip for ip in as_list(spec.get("clusterIPs")) if isinstance(ip, str)]
    headless = spec.get("clusterIP") == "None" or (ips[:1] == ["None"])
    ports = list(entries(spec.get("ports")))
    if not ports and not headless and kind != "ExternalName":
        out.append(required_value(at + ("ports",), "list the ports the Service exposes"))
    if kind == "ExternalName":
        cname = as_str(spec.get("externalName")).removesuffix(".")
        if cname:
            out += invalid_each(at + ("externalName",), cname, dns1123_subdomain(cname), "use a DNS name")
        else:
            out.append(required_value(at + ("externalName",), "set the DNS name the Service aliases"))
    names: set[str] = set()
    for i, port in ports:
        where = at + ("ports", i)
        name = as_str(port.get("name"))
        if len(ports) > 1 and not name:
            out.append(required_value(where + ("name",), "name every port of a multi-port Service"))
        elif name:
            out += invalid_each(where + ("name",), name, dns1123_label(name), NAME_FIX[LABEL])
            if name in names:
                out.append(duplicate_value(where + ("name",), name, "give each port its own name"))
            names.add(name)
        number = as_int(port.get("port")) or 0
        if not 1 <= number <= 65535:
            out.append(invalid_value(where + ("port",), number, PORT_RANGE, "use a port from 1 to 65535"))
        protocol = port.get("protocol", "TCP")
        if isinstance(protocol, str) and protocol not in PROTOCOLS:
            out.append(not_supported(where + ("protocol",), protocol, PROTOCOLS, "use TCP, UDP or SCTP"))
        target = port.get("targetPort")
        if isinstance(target, str):
            out += invalid_each(
                where + ("targetPort",), target, port_name(target), "name a container port, or give a number"
            )
        elif (target_port := as_int(target)) and not 1 <= target_port <= 65535:  # 0 is defaulted to the port
            out.append(invalid_value(where + ("targetPort",), target, PORT_RANGE, "use a port from 1 to 65535"))
    if isinstance(spec.get("selector"), Mapping):
        out += validate_labels(spec["selector"], at + ("selector",))
    if isinstance(kind, str) and kind not in _SERVICE_TYPES:
        out.append(not_supported(at + ("type",), kind, _SERVICE_TYPES, "use ClusterIP (the default)"))
    if kind == "ClusterIP":
        out += [
            forbidden(
                at + ("ports", i, "nodePort"),
                "may not be used when `type` is 'ClusterIP'",
                "drop nodePort, or use type: NodePort",
            )
            for i, p in ports
            if as_int(p.get("nodePort"))
        ]
    seen: set[tuple[str, int]] = set()
    for i, port in ports:
        key = (as_str(port.get("protocol")) or "TCP", as_int(port.get("port")) or 0)
        if key in seen:
            out.append(
                duplicate_value(at + ("ports", i), Raw(f"{{{key[1]} {key[0]}}}"), "expose each port once per protocol")
            )
        seen.add(key)
    return out


def _decoded_size(value: Any) -> int:
    """A []byte value's size: its bytes as decoding read them (`gobase64`, line breaks skipped); decoding refuses the
    object where they cannot be read, so the text's own length stands in only for a caller that skipped it."""
    if not isinstance(value, str):
        return 0
    try:
        return len(gobase64.decode(value))
    except gobase64.IllegalBase64:
        return len(value)


def validate_config_map(obj: Mapping) -> list[Finding]:
    """ValidateConfigMap: keys of data and binaryData, no key in both, 1 MiB in all."""
    data, binary = as_map(obj.get("data")), as_map(obj.get("binaryData"))
    out: list[Finding] = []
    fix = "use letters, digits, '-', '_' and '.' (not '.', '..' or a leading '..'); items[].path names the file"
    for key in data:
        out += invalid_each(("data", str(key)), str(key), config_map_key(str(key)), fix)
        if key in binary:
            out.append(
                invalid_value(
                    ("data", str(key)),
                    str(key),
                    "duplicate of key present in binaryData",
                    "keep the key in one of data and binaryData",
                )
            )
    for key in binary:
        out += invalid_each(("binaryData", str(key)), str(key), config_map_key(str(key)), fix)
    total = sum(byte_size(v) for v in data.values() if isinstance(v, str)) + sum(map(_decoded_size, binary.values()))
    if total > MAX_SECRET_BYTES:
        out.append(too_long((), MAX_SECRET_BYTES, "keep a ConfigMap under 1 MiB: mount large files from a volume"))
    return out


_SECRET_KEYS = {  # type -> the keys it requires (ValidateSecret)
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
}


def validate_secret(obj: Mapping) -> list[Finding]:
    """ValidateSecret: keys (stringData is merged into data first), 1 MiB, the keys each type requires."""
    data = {str(k): _decoded_size(v) for k, v in as_map(obj.get("data")).items()}
    data.update({str(k): byte_size(v) for k, v in as_map(obj.get("stringData")).items() if isinstance(v, str)})
    out: list[Finding] = []
    for key in data:
        out += invalid_each(
            ("data", key),
            key,
            config_map_key(key),
            "use letters, digits, '-', '_' and '.' (not '.', '..' or a leading '..')",
        )
    if sum(data.values()) > MAX_SECRET_BYTES:
        out.append(too_long(("data",), MAX_SECRET_BYTES, "keep a Secret under 1 MiB"))
    kind = obj.get("type")
    if kind == "kubernetes.io/service-account-token":
        if not as_str(
            string_map(as_map(obj.get("metadata")).get("annotations")).get("kubernetes.io/service-account.name")
        ):
            out.append(
                required_value(
                    ("metadata", "annotations", "kubernetes.io/service-account.name"),
                    "name the ServiceAccount in the annotation kubernetes.io/service-account.name",
                )
            )
    elif kind == "kubernetes.io/basic-auth":
        if "username" not in data and "password" not in data:
            out += [required_value(("data", k), "set username or password") for k in ("username", "password")]
    elif kind == "kubernetes.io/ssh-auth":
        if not data.get("ssh-privatekey"):
            out.append(required_value(("data", "ssh-privatekey"), "set the private key"))
    elif isinstance(kind, str) and kind in _SECRET_KEYS:
        out += [required_value(("data", k), f"set data[{k}]") for k in _SECRET_KEYS[kind] if k not in data]
    return out


def validate_namespace(obj: Mapping) -> list[Finding]:
    """ValidateNamespace's spec: its finalizers are standard or qualified names."""
    finalizers = as_list(as_map(obj.get("spec")).get("finalizers"))
    return [
        f
        for i, name in enumerate(finalizers)
        if isinstance(name, str)
        for f in kube_finalizer(name, ("spec", "finalizers", i))
    ]


_SYSTEM_PREFIX = "system-"
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000


def validate_priority_class(obj: Mapping) -> list[Finding]:
    """ValidatePriorityClass (kubernetes pkg/apis/scheduling/validation/validation.go; IsKnownSystemPriorityClass in
    pkg/apis/scheduling/v1/helpers.go): a `system-` name only for the two system classes, as they are; another class
    at most 1000000000; a preemptionPolicy PreemptLowerPriority or Never."""
    name, value = as_str(as_map(obj.get("metadata")).get("name")), obj.get("value")
    out: list[Finding] = []
    if name.startswith(_SYSTEM_PREFIX):
        if name not in SYSTEM_PRIORITY_CLASSES:
            error = f"{name} is not a known system priority class"
        elif value != SYSTEM_PRIORITY_CLASSES[name]:
            error = f"value of {name} PriorityClass must be {SYSTEM_PRIORITY_CLASSES[name]}"
        elif obj.get("globalDefault") is True:
            error = f"globalDefault of {name} PriorityClass must be false"
        else:
            error = ""
        if error:
            out.append(
                forbidden(
                    ("metadata", "name"),
                    f"priority class names with '{_SYSTEM_PREFIX}' prefix are reserved for system use only. error: "
                    + error,
                    "name the class without the 'system-' prefix",
                    name,
                )
            )
    elif isinstance(value, int) and not isinstance(value, bool) and value > HIGHEST_USER_DEFINABLE_PRIORITY:
        out.append(
            forbidden(
                ("value",),
                f"maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}",
                f"use a value of at most {HIGHEST_USER_DEFINABLE_PRIORITY}",
                value,
            )
        )
    policy = obj.get("preemptionPolicy")
    if policy == "":
        out.append(required_value(("preemptionPolicy",), "use PreemptLowerPriority or Never"))
    elif isinstance(policy, str) and policy not in ("PreemptLowerPriority", "Never"):
        out.append(
            not_supported(
                ("preemptionPolicy",), policy, ["PreemptLowerPriority", "Never"], "use PreemptLowerPriority or Never"
            )
        )
    return out
