"""Pod Security's baseline checks (upstream's policy/check_*.go of level baseline, kubernetes/pod-security-admission
commit 8f84a87c7f617f64a4ddc1aea24aeeb7a2e07cb8): one function per check revision, and `BASELINE_CHECKS`, in
upstream's evaluation order (IDs sorted bytewise).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jaxinfra.admission.decoded import as_map, as_str
from jaxinfra.admission.goformat import go_quote
from jaxinfra.admission.pod_security.levels import BASELINE
from jaxinfra.admission.pod_security.podspec import (
    Check,
    CheckFn,
    Result,
    Revision,
    container_name,
    containers_of,
    in_user_namespace,
    is_set,
    items_of,
    join_quote,
    named,
    pluralize,
    security_context,
    setters_of,
    strings_of,
)

# --- the checks (policy/check_*.go), baseline IDs sorted, then restricted IDs sorted ------------------------------

_APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def _app_armor_profile(pod_meta: Mapping, spec: Mapping) -> Result:
    """appArmorProfile 1.0: profile types other than RuntimeDefault/Localhost, or beta annotations with other values."""

    def bad(sc: Mapping | None) -> str | None:
        profile = as_map(sc).get("appArmorProfile")
        kind = as_str(profile.get("type")) if is_set(profile) else None
        return kind if kind is not None and kind not in ("RuntimeDefault", "Localhost") else None

    pod_value = bad(security_context(spec))
    values = {pod_value} if pod_value is not None else set()
    containers = []
    for c in containers_of(spec):
        if (value := bad(security_context(c))) is not None:
            containers.append(container_name(c))
            values.add(value)
    setters = setters_of(pod_value is not None, containers)
    annotations = sorted(
        f"{k}={go_quote(v)}"
        for k, v in as_map(pod_meta.get("annotations")).items()
        if isinstance(k, str)
        and k.startswith(_APPARMOR_ANNOTATION)
        and isinstance(v, str)
        and not (v == "" or v == "runtime/default" or v.startswith("localhost/"))
    )
    bad_values = sorted(values) + annotations
    if annotations:
        setters.append(pluralize("annotation", "annotations", len(annotations)))
    if not setters:
        return None
    return (
        pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", len(bad_values)),
        f"{' and '.join(setters)} must not set AppArmor profile type to {join_quote(bad_values)}",
    )


_DEFAULT_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)


def _capabilities_baseline(pod_meta: Mapping, spec: Mapping) -> Result:
    """capabilities_baseline 1.0: capabilities.add beyond the container runtime's default set."""
    containers, caps = [], set()
    for c in containers_of(spec):
        extra = [
            cap
            for cap in strings_of(as_map(as_map(security_context(c)).get("capabilities")).get("add"))
            if cap not in _DEFAULT_CAPABILITIES
        ]
        if extra:
            containers.append(container_name(c))
            caps.update(extra)
    if not containers:
        return None
    return (
        "non-default capabilities",
        f"{named('container', 'containers', containers)} must not include "
        f"{join_quote(sorted(caps))} in securityContext.capabilities.add",
    )


def _host_namespaces(pod_meta: Mapping, spec: Mapping) -> Result:
    """hostNamespaces 1.0: hostNetwork, hostPID, hostIPC."""
    shared = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key) is True]
    return ("host namespaces", ", ".join(shared)) if shared else None


def _host_path_volumes(pod_meta: Mapping, spec: Mapping) -> Result:
    """hostPathVolumes 1.0: any hostPath volume."""
    names = [as_str(v.get("name")) for v in volumes_of(spec) if is_set(v.get("hostPath"))]
    return ("hostPath volumes", named("volume", "volumes", names)) if names else None


def volumes_of(spec: Mapping) -> list[Mapping]:
    volumes = spec.get("volumes")
    return [v for v in items_of(volumes) if isinstance(v, Mapping)]


def _host_ports(pod_meta: Mapping, spec: Mapping) -> Result:
    """hostPorts 1.0: a non-zero hostPort on any container port."""
    containers: list[str] = []
    ports: set[str] = set()
    for c in containers_of(spec):
        used = [
            p.get("hostPort")
            for p in items_of(c.get("ports"))
            if isinstance(p, Mapping) and type(p.get("hostPort")) is int and p.get("hostPort") != 0
        ]
        if used:
            containers.append(container_name(c))
            ports.update(str(p) for p in used)
    if not containers:
        return None
    return (
        "hostPort",
        f"{named('container', 'containers', containers)} {pluralize('uses', 'use', len(containers))} "
        f"{pluralize('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}",
    )


def _handler_hosts(handler: Any) -> list[str]:
    """The non-empty httpGet/tcpSocket hosts of one probe or lifecycle handler."""
    h = as_map(handler)
    return [host for key in ("httpGet", "tcpSocket") if (host := as_str(as_map(h.get(key)).get("host")))]


def _host_probes_and_host_lifecycle(pod_meta: Mapping, spec: Mapping) -> Result:
    """hostProbesAndHostLifecycle 1.34: a host in a probe's or lifecycle handler's httpGet/tcpSocket."""
    containers, hosts = set(), set()
    for c in containers_of(spec):
        lifecycle = as_map(c.get("lifecycle"))
        found = [
            host
            for handler in (
                c.get("livenessProbe"),
                c.get("readinessProbe"),
                c.get("startupProbe"),
                lifecycle.get("postStart"),
                lifecycle.get("preStop"),
            )
            for host in _handler_hosts(handler)
        ]
        if found:
            containers.add(container_name(c))
            hosts.update(found)
    if not containers:
        return None
    return (
        "probe or lifecycle host",
        f"{named('container', 'containers', sorted(containers))} {pluralize('uses', 'use', len(containers))} "
        f"{named('probe or lifecycle host', 'probe or lifecycle hosts', sorted(hosts))}",
    )


def _privileged(pod_meta: Mapping, spec: Mapping) -> Result:
    """privileged 1.0: securityContext.privileged=true."""
    names = [container_name(c) for c in containers_of(spec) if as_map(security_context(c)).get("privileged") is True]
    if not names:
        return None
    return "privileged", f"{named('container', 'containers', names)} must not set securityContext.privileged=true"


def proc_mount(pod_meta: Mapping, spec: Mapping) -> Result:
    """procMount 1.0 (and procMount_restricted 1.35): securityContext.procMount other than Default."""
    containers, kinds = [], set()
    for c in containers_of(spec):
        sc = as_map(security_context(c))
        if isinstance(sc.get("procMount"), str) and sc["procMount"] != "Default":
            containers.append(container_name(c))
            kinds.add(sc["procMount"])
    if not containers:
        return None
    return (
        "procMount",
        f"{named('container', 'containers', containers)} must not set securityContext.procMount "
        f"to {join_quote(sorted(kinds))}",
    )


def _proc_mount_1_35(pod_meta: Mapping, spec: Mapping) -> Result:
    """procMount 1.35: any procMount in a user namespace (hostUsers: false)."""
    return None if in_user_namespace(spec) else proc_mount(pod_meta, spec)


_SELINUX_TYPES_1_0 = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})
_SELINUX_TYPES_1_31 = _SELINUX_TYPES_1_0 | {"container_engine_t"}


def _se_linux_options(allowed: frozenset[str]) -> CheckFn:
    """seLinuxOptions 1.0 / 1.31: a type outside `allowed`, or any user or role."""

    def check(pod_meta: Mapping, spec: Mapping) -> Result:
        bad_types: set[str] = set()
        user = role = False

        def bad(sc: Mapping | None) -> bool:
            nonlocal user, role
            opts = as_map(sc).get("seLinuxOptions")
            if not is_set(opts):
                return False
            kind = as_str(opts.get("type"))
            has_user, has_role = bool(as_str(opts.get("user"))), bool(as_str(opts.get("role")))
            if kind not in allowed:
                bad_types.add(kind)
            user, role = user or has_user, role or has_role
            return kind not in allowed or has_user or has_role

        pod_bad = bad(security_context(spec))
        setters = setters_of(pod_bad, [container_name(c) for c in containers_of(spec) if bad(security_context(c))])
        if not setters:
            return None
        data = (
            ([named("type", "types", sorted(bad_types))] if bad_types else [])
            + (["user may not be set"] if user else [])
            + (["role may not be set"] if role else [])
        )
        return (
            "seLinuxOptions",
            f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}",
        )

    return check


_SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
_SECCOMP_CONTAINER_ANNOTATION = "container.seccomp.security.alpha.kubernetes.io/"
_SECCOMP_TYPES = ("RuntimeDefault", "Localhost")


def _seccomp_annotations(pod_meta: Mapping, spec: Mapping) -> Result:
    """seccompProfile_baseline 1.0: the alpha annotations with a value other than runtime/default, docker/default or
    localhost/*."""
    annotations = as_map(pod_meta.get("annotations"))
    keys = [_SECCOMP_POD_ANNOTATION] + [_SECCOMP_CONTAINER_ANNOTATION + container_name(c) for c in containers_of(spec)]
    forbidden = {
        f"{k}={go_quote(v)}"
        for k in keys
        if isinstance(v := annotations.get(k), str)
        and not (v in ("runtime/default", "docker/default") or v.startswith("localhost/"))
    }
    if not forbidden:
        return None
    return (
        "seccompProfile",
        f"forbidden {pluralize('annotation', 'annotations', len(forbidden))} {', '.join(sorted(forbidden))}",
    )


def _seccomp_type(sc: Mapping | None) -> str | None:
    """The seccompProfile.type a securityContext sets ("" when the profile is set without a type), None if unset."""
    profile = as_map(sc).get("seccompProfile")
    return as_str(profile.get("type")) if is_set(profile) else None


def seccomp(required: bool) -> CheckFn:
    """seccompProfile_baseline 1.19 (required=False: only explicit bad types) and seccompProfile_restricted 1.19
    (required=True: also every container must be covered by a valid pod or container profile)."""

    def check(pod_meta: Mapping, spec: Mapping) -> Result:
        pod_type = _seccomp_type(security_context(spec))
        pod_bad = pod_type is not None and pod_type not in _SECCOMP_TYPES
        values = {pod_type} if pod_type is not None and pod_bad else set()
        explicit, implicit = [], []
        for c in containers_of(spec):
            kind = _seccomp_type(security_context(c))
            if kind is None:
                if pod_type not in _SECCOMP_TYPES:
                    implicit.append(container_name(c))
            elif kind not in _SECCOMP_TYPES:
                explicit.append(container_name(c))
                values.add(kind)
        if setters := setters_of(pod_bad, explicit):
            return (
                "seccompProfile",
                f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
                f"{join_quote(sorted(values))}",
            )
        if required and implicit:
            return (
                "seccompProfile",
                f"pod or {named('container', 'containers', implicit)} must set "
                'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"',
            )
        return None

    return check


_SAFE_SYSCTLS_1_0 = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    }
)
_SAFE_SYSCTLS_1_27 = _SAFE_SYSCTLS_1_0 | {"net.ipv4.ip_local_reserved_ports"}
_SAFE_SYSCTLS_1_29 = _SAFE_SYSCTLS_1_27 | {
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
_SAFE_SYSCTLS_1_32 = _SAFE_SYSCTLS_1_29 | {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}
_SAFE_SYSCTLS_1_37 = _SAFE_SYSCTLS_1_32 | {"net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"}


def _sysctls(allowed: frozenset[str]) -> CheckFn:
    """sysctls 1.0 / 1.27 / 1.29 / 1.32 / 1.37: pod sysctls outside that version's safe set, in the pod's order."""

    def check(pod_meta: Mapping, spec: Mapping) -> Result:
        sysctls = as_map(security_context(spec)).get("sysctls")
        names = [as_str(s.get("name")) for s in items_of(sysctls) if isinstance(s, Mapping)]
        forbidden = [n for n in names if n not in allowed]
        return ("forbidden sysctls", ", ".join(forbidden)) if forbidden else None

    return check


def _windows_host_process(pod_meta: Mapping, spec: Mapping) -> Result:
    """windowsHostProcess 1.0: securityContext.windowsOptions.hostProcess=true on the pod or a container."""

    def bad(sc: Mapping | None) -> bool:
        return as_map(as_map(sc).get("windowsOptions")).get("hostProcess") is True

    setters = setters_of(
        bad(security_context(spec)), [container_name(c) for c in containers_of(spec) if bad(security_context(c))]
    )
    if not setters:
        return None
    return "hostProcess", f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true"


BASELINE_CHECKS: tuple[Check, ...] = (
    Check(
        "appArmorProfile",
        BASELINE,
        (Revision((1, 0), _app_armor_profile),),
        "use AppArmor profile type RuntimeDefault or Localhost, or leave it unset",
    ),
    Check(
        "capabilities_baseline",
        BASELINE,
        (Revision((1, 0), _capabilities_baseline),),
        "add only capabilities of the runtime's default set (NET_RAW and SYS_ADMIN are not)",
    ),
    Check(
        "hostNamespaces",
        BASELINE,
        (Revision((1, 0), _host_namespaces),),
        "remove hostNetwork, hostPID and hostIPC (or run in a namespace whose level allows them)",
    ),
    Check(
        "hostPathVolumes",
        BASELINE,
        (Revision((1, 0), _host_path_volumes),),
        "replace hostPath volumes with a PersistentVolumeClaim, emptyDir, configMap or secret",
    ),
    Check(
        "hostPorts",
        BASELINE,
        (Revision((1, 0), _host_ports),),
        "remove hostPort from the container ports (reach the pod through a Service)",
    ),
    Check(
        "hostProbesAndHostLifecycle",
        BASELINE,
        (Revision((1, 34), _host_probes_and_host_lifecycle),),
        "leave host unset in probes and lifecycle handlers (the pod's IP is used)",
    ),
    Check(
        "privileged",
        BASELINE,
        (Revision((1, 0), _privileged),),
        "remove securityContext.privileged: true (or run in a namespace labelled privileged)",
    ),
    Check(
        "procMount",
        BASELINE,
        (Revision((1, 0), proc_mount), Revision((1, 35), _proc_mount_1_35)),
        "leave securityContext.procMount unset or Default",
    ),
    Check(
        "seLinuxOptions",
        BASELINE,
        (
            Revision((1, 0), _se_linux_options(_SELINUX_TYPES_1_0)),
            Revision((1, 31), _se_linux_options(_SELINUX_TYPES_1_31)),
        ),
        "leave seLinuxOptions user and role unset and its type unset or a container_* type",
    ),
    Check(
        "seccompProfile_baseline",
        BASELINE,
        (Revision((1, 0), _seccomp_annotations), Revision((1, 19), seccomp(required=False))),
        "set seccompProfile type RuntimeDefault or Localhost, or leave it unset",
    ),
    Check(
        "sysctls",
        BASELINE,
        (
            Revision((1, 0), _sysctls(_SAFE_SYSCTLS_1_0)),
            Revision((1, 27), _sysctls(_SAFE_SYSCTLS_1_27)),
            Revision((1, 29), _sysctls(_SAFE_SYSCTLS_1_29)),
            Revision((1, 32), _sysctls(_SAFE_SYSCTLS_1_32)),
            Revision((1, 37), _sysctls(_SAFE_SYSCTLS_1_37)),
        ),
        "set only the safe, namespaced sysctls (such as net.ipv4.ip_local_port_range)",
    ),
    Check(
        "windowsHostProcess",
        BASELINE,
        (Revision((1, 0), _windows_host_process),),
        "remove securityContext.windowsOptions.hostProcess: true",
    ),
)
