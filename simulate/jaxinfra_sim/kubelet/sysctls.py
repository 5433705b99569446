"""A pod's sysctls as the kubelet treats them: its admit handler refuses a pod that sets any sysctl beyond the safe
set (this node allows no unsafe one: no --allowed-unsafe-sysctls), and the safe ones are set in the pod's own
namespaces, never the machine's.

Sources (kubernetes/kubernetes; the commits are the stored versions read):
- pkg/kubelet/sysctl/safe_sysctls.go @b0cb9cc1 `safeSysctls`, `getSafeSysctlAllowlist`: the safe set, some of it only
  from the kernel version that namespaced it (`SAFE`; the node's kernel is this machine's, `os.uname`), read as
  k8s.io/apimachinery's version.ParseGeneric reads it (`kernel_version`); a kernel version that cannot be read keeps
  only the unconditional ones;
- pkg/kubelet/sysctl/allowlist.go @11de9543 `patternAllowlist.validateSysctl` and `Admit`: each of the pod's sysctls,
  its name normalized, must be on the list, and a network one is refused where the pod shares its node's network, an
  IPC one its node's IPC namespace; the first that is not allowed rejects the pod, reason `REASON`, message
  "forbidden sysctl: ..." (the namespace named as component-helpers @e0a566e7 names it, "IPC" or "Net", which the
  allowlist's later form reads through utilsysctl.NormalizeName and IPCNamespace);
- pkg/kubelet/kubelet.go @000d9543 `rejectPod`: the pod ends Failed with that reason, its message "Pod was rejected:
  " + the handler's, and a Warning event says the same (`pod_workers` records both).

Where they are set, as containerd sets a pod's sysctls in its sandbox (internal/cri/server/podsandbox/
sandbox_run_linux.go sandboxContainerSpec: the pause container's `linux.sysctl`, which runc writes once in the pod's
namespaces): the network ones in the pod's network namespace by its own process before the runtime starts
(`apply`: runc refuses a net.* sysctl in the namespace it runs in, "not allowed in host network namespace"), the IPC
ones by runc, in the IPC namespace of the container or pause that makes it (`podsandbox`).
"""

from __future__ import annotations

import errno
import functools
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from jaxinfra.admission.goformat import go_quote
from jaxinfra.admission.validation.sysctls import Namespace, namespace_of, normalize
from jaxinfra_sim.core import model
from jaxinfra_sim.core.events import Reason

SAFE: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("kernel.shm_rmid_forced", ()),
    ("net.ipv4.ip_local_port_range", ()),
    ("net.ipv4.tcp_syncookies", ()),
    ("net.ipv4.ping_group_range", ()),
    ("net.ipv4.ip_unprivileged_port_start", ()),
    ("net.ipv4.ip_local_reserved_ports", (3, 16)),
    ("net.ipv4.tcp_keepalive_time", (4, 5)),
    ("net.ipv4.tcp_fin_timeout", (4, 6)),
    ("net.ipv4.tcp_keepalive_intvl", (4, 5)),
    ("net.ipv4.tcp_keepalive_probes", (4, 5)),
    ("net.ipv4.tcp_rmem", ()),
    ("net.ipv4.tcp_wmem", ()),
)
"""The kubelet's safe sysctls, each with the kernel version that namespaced it (() for every kernel): namespaced in
the pod, and with no effect on any other pod of the node (pkg/util/kernel/constants.go names the versions)."""
REASON = Reason.SYSCTL_FORBIDDEN
"""The reason of a pod the kubelet rejects for its sysctls (allowlist.go ForbiddenReason)."""
REJECTED = "Pod was rejected: "
"""What the kubelet's status message puts before its admit handler's (kubelet.go rejectPod)."""

_VERSION = re.compile(r"v?([0-9]+(?:\.[0-9]+)*)(.*)")


def kernel_version(release: str) -> tuple[int, ...] | None:
    """version.ParseGeneric: the leading numbers of `release` (at least two of them), None where it has fewer."""
    found = _VERSION.fullmatch(release.strip())
    if found is None or "." not in found.group(1):
        return None
    return tuple(int(part) for part in found.group(1).split("."))


def allowlist(release: str) -> frozenset[str]:
    """The safe sysctls on a node whose kernel release is `release`."""
    version = kernel_version(release)
    return frozenset(name for name, since in SAFE if not since or (version is not None and version >= since))


@functools.cache
def node_allowlist() -> frozenset[str]:
    """The safe sysctls on this machine, the simulated node's kernel."""
    return allowlist(os.uname().release)


def forbidden(name: str, allowed: frozenset[str], host_network: bool, host_ipc: bool) -> str | None:
    """validateSysctl: why a sysctl is not allowed on this node (None: it is)."""
    name = normalize(name)
    if name not in allowed:
        return f"{go_quote(name)} not allowlisted"
    ns = namespace_of(name)
    if (ns is Namespace.NET and host_network) or (ns is Namespace.IPC and host_ipc):
        return f"{go_quote(name)} not allowed with host {ns} enabled"
    return None


def admit(pod: model.Pod, allowed: frozenset[str] | None = None) -> str | None:
    """The kubelet's sysctl admit handler (`Admit`): its message for a pod it rejects, None for one it admits."""
    allowed = node_allowlist() if allowed is None else allowed
    for name, _ in pod.namespaces.sysctls:
        why = forbidden(name, allowed, pod.host_network, pod.namespaces.host_ipc)
        if why is not None:
            return f"forbidden sysctl: {why}"
    return None


def of(sysctls: Iterable[tuple[str, str]], ns: Namespace) -> dict[str, str]:
    """The sysctls of namespace `ns` among an admitted pod's, by their normalized names (a name set twice: its last
    value, as a map keeps it)."""
    return {normalize(name): value for name, value in sysctls if namespace_of(name) is ns}


def path(name: str) -> Path:
    """The file of a normalized sysctl name under /proc/sys (a '/' inside a part is a '.' in the file's name)."""
    return Path("/proc/sys", *(part.replace("/", ".") for part in name.split(".")))


def apply(sysctls: Mapping[str, str]) -> None:
    """In a pod's process that has joined the pod's own network namespace (and never elsewhere: /proc/sys/net is the
    caller's namespace's): write its network sysctls there, as runc writes a sandbox's. Raises OSError naming the
    sysctl the kernel refused (its value)."""
    for name, value in sysctls.items():
        if namespace_of(name) is not Namespace.NET or name not in node_allowlist():
            raise OSError(errno.EPERM, f"sysctl {name!r} is not a safe network sysctl")
        try:
            path(name).write_text(value)
        except OSError as err:
            raise OSError(err.errno, f"write sysctl key {name}: {err.strerror or err}") from None
