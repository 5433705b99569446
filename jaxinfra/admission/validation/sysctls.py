"""A pod's sysctls, as the API server's validation step checks them, and which kernel namespace each one lives in
(what the kubelet's own check reads too: `simulate/jaxinfra_sim/kubelet/sysctls.py` imports it from here).

Emulated from kubernetes/kubernetes (the commits are the stored versions read):
- pkg/apis/core/validation/validation.go @000f26050b9b: IsValidSysctlName (at most `MAX_LENGTH` characters, segments
  of `SEGMENT` joined by '.' or '/'), validateSysctls (a name is required, valid and not given twice; unless the
  update keeps what the old pod had, ValidateHostSysctl: a network sysctl "may not be specified when 'hostNetwork' is
  true", an IPC one "when 'hostIPC' is true"), and validatePodSpecSecurityContext's "ShareProcessNamespace and HostPID
  cannot both be enabled". The internal PodSecurityContext holds hostNetwork, hostPID, hostIPC and
  shareProcessNamespace, so their errors are reported under `spec.securityContext`.
- staging/src/k8s.io/component-helpers/node/util/sysctl/namespace.go @e0a566e7 (GetNamespace, namespaceOf: the IPC
  ones by name, kernel.sem, kernel.shm*, kernel.msg*, and by prefix fs.mqueue.*; the network ones, net.*) and
  sysctl.go @2e090810 (NormalizeName: a name whose first separator is '/' has its '.' and '/' swapped).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum

from jaxinfra.admission.decoded import as_str, entries
from jaxinfra.admission.store import Finding, Path
from jaxinfra.admission.validation.messages import duplicate_value, invalid_value, required_value

SEGMENT = "[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
"""SysctlSegmentFmt: one part of a sysctl's name."""
PATTERN = f"^({SEGMENT}[\\./])*{SEGMENT}$"
"""sysctlContainSlashRegexp, as the API server prints it in its message."""
MAX_LENGTH = 253
"""SysctlMaxLength."""
_NAME = re.compile(PATTERN)


class Namespace(StrEnum):
    """The kernel namespace a sysctl is set in (component-helpers' Namespace, spelled as it is there)."""

    IPC = "IPC"
    NET = "Net"


_BY_NAME = {
    "kernel.sem": Namespace.IPC,
    "kernel.shmall": Namespace.IPC,
    "kernel.shmmax": Namespace.IPC,
    "kernel.shmmni": Namespace.IPC,
    "kernel.shm_rmid_forced": Namespace.IPC,
    "kernel.shm": Namespace.IPC,
    "kernel.msgmax": Namespace.IPC,
    "kernel.msgmnb": Namespace.IPC,
    "kernel.msgmni": Namespace.IPC,
    "kernel.msg": Namespace.IPC,
}
_BY_PREFIX = {"net": Namespace.NET, "fs.mqueue": Namespace.IPC}


def normalize(name: str) -> str:
    """NormalizeName: `net/ipv4/conf/eth0.100/rp_filter` -> `net.ipv4.conf.eth0/100.rp_filter`; a name whose first
    separator is a '.' stays as it is."""
    first = next((ch for ch in name if ch in "./"), ".")
    return name if first == "." else name.translate(str.maketrans("./", "/."))


def namespace_of(name: str) -> Namespace | None:
    """GetNamespace: the namespace of a sysctl (or of a pattern's part before its '*'), None where it is not known to
    be namespaced (a node-level setting)."""
    name = normalize(name).split("*", 1)[0]
    if name in _BY_NAME:
        return _BY_NAME[name]
    return next((ns for prefix, ns in _BY_PREFIX.items() if name.startswith(prefix + ".")), None)


def valid_name(name: str) -> bool:
    """IsValidSysctlName."""
    return len(name) <= MAX_LENGTH and _NAME.fullmatch(name) is not None


def validate_pod_security_context(spec: Mapping, at: Path) -> list[Finding]:
    """What validatePodSpecSecurityContext says of a PodSpec's shareProcessNamespace and sysctls (`at`: the PodSpec's
    path; the errors are under its securityContext)."""
    sc_at = at + ("securityContext",)
    out = []
    if spec.get("shareProcessNamespace") is True and spec.get("hostPID") is True:
        out.append(
            invalid_value(
                sc_at + ("shareProcessNamespace",),
                True,
                "ShareProcessNamespace and HostPID cannot both be enabled",
                "drop hostPID: shareProcessNamespace alone lets the pod's containers see each other's processes",
            )
        )
    sc = spec.get("securityContext")
    seen: set[str] = set()
    for i, sysctl in entries(sc.get("sysctls") if isinstance(sc, Mapping) else None):
        where = sc_at + ("sysctls", i, "name")
        name = as_str(sysctl.get("name"))
        if not name:
            out.append(required_value(where, "name the kernel setting, e.g. net.ipv4.ip_local_port_range"))
        elif not valid_name(name):
            out.append(
                invalid_value(
                    where,
                    name,
                    f"must have at most {MAX_LENGTH} characters and match regex {PATTERN}",
                    "write the sysctl's name as sysctl(8) does: lowercase parts joined by '.'",
                )
            )
        elif name in seen:
            out.append(duplicate_value(where, name, "set each sysctl once"))
        out += _host_sysctl(name, spec, where)
        seen.add(name)
    return out


def _host_sysctl(name: str, spec: Mapping, where: Path) -> list[Finding]:
    """ValidateHostSysctl: a namespaced sysctl of a namespace the pod shares with its node."""
    ns = namespace_of(name)
    if spec.get("hostNetwork") is True and ns is Namespace.NET:
        field, fix = "hostNetwork", "drop hostNetwork, or the network sysctl: it would be the node's own"
    elif spec.get("hostIPC") is True and ns is Namespace.IPC:
        field, fix = "hostIPC", "drop hostIPC, or the IPC sysctl: it would be the node's own"
    else:
        return []
    return [invalid_value(where, name, f"may not be specified when '{field}' is true", fix)]
