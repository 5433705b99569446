"""Pod Security's checks (upstream's policy/ package): one function per check revision, the `CHECKS` table, and
their evaluation at a level and version (`violations`).

Upstream, read at kubernetes/pod-security-admission (the published copy of kubernetes/kubernetes
staging/src/k8s.io/pod-security-admission) commit 8f84a87c7f617f64a4ddc1aea24aeeb7a2e07cb8:
- policy/registry.go: the checks of a level at a version -- a check's newest revision whose minimum version is at most
  the version asked; "latest" and any version past the newest revision read as that newest version; restricted is
  its own checks plus the baseline checks its revisions at that version do not override; evaluation order is the
  baseline IDs sorted, then the restricted IDs sorted (bytewise). `CHECKS` below is written in that order.
- policy/checks.go: a result is "reason (detail)", or "reason" without detail; results are joined with ", ".
- policy/helpers.go, policy/visitor.go: joinQuote, pluralize, the hostUsers=false relaxation; containers are visited
  init containers, then containers, then ephemeral containers.
- policy/check_*.go: every check (ID, level, revisions, messages), one function each below.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from jaxinfra.admission.decoded import as_map, as_str
from jaxinfra.admission.goformat import go_quote
from jaxinfra.admission.pod_security.levels import (
    BASELINE,
    PRIVILEGED,
    RESTRICTED,
    Version,
    parse_level,
    parse_version,
    version_text,
)

# --- Go's text helpers ---------------------------------------------------------------------------------------------


def _join_quote(items: Iterable[str]) -> str:
    items = list(items)
    return '"' + '", "'.join(items) + '"' if items else ""


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _named(singular: str, plural: str, names: list[str]) -> str:
    """`container "a"` / `containers "a", "b"`."""
    return f"{_plural(singular, plural, len(names))} {_join_quote(names)}"


# --- reading a pod spec the way Go decodes it (absent, null and a wrong type all read as unset) -------------------


def is_set(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """A pointer-to-struct field is set: present as an object (JSON null decodes to nil)."""
    return isinstance(value, Mapping)


def _items(value: Any) -> list[Any]:
    """A list field's items; anything else (absent, null, mistyped) reads as no items."""
    return value if isinstance(value, list) else []


def _strings(value: Any) -> list[str]:
    return [v for v in _items(value) if isinstance(v, str)]


def _containers(spec: Mapping) -> list[Mapping]:
    """visitContainers: init containers, containers, then ephemeral containers."""
    return [
        c
        for key in ("initContainers", "containers", "ephemeralContainers")
        for c in _items(spec.get(key))
        if isinstance(c, Mapping)
    ]


def _name(container: Mapping) -> str:
    return as_str(container.get("name"))


def _sc(obj: Mapping) -> Mapping | None:
    """A pod's or container's securityContext, None when unset."""
    sc = obj.get("securityContext")
    return sc if isinstance(sc, Mapping) else None


def _windows(spec: Mapping) -> bool:
    return as_map(spec.get("os")).get("name") == "windows"


def _user_namespace(spec: Mapping) -> bool:
    """relaxPolicyForUserNamespacePod: hostUsers explicitly false."""
    return spec.get("hostUsers") is False


def _setters(pod_bad: bool, containers: list[str]) -> list[str]:
    """The "pod" and/or `container(s) "..."` that set a forbidden value."""
    return (["pod"] if pod_bad else []) + ([_named("container", "containers", containers)] if containers else [])


Result = tuple[str, str] | None
"""A failed check's (reason, detail), or None when the pod passes it."""
CheckFn = Callable[[Mapping, Mapping], Result]


# --- the checks (policy/check_*.go), baseline IDs sorted, then restricted IDs sorted ------------------------------

_APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def _app_armor_profile(pod_meta: Mapping, spec: Mapping) -> Result:
    """appArmorProfile 1.0: profile types other than RuntimeDefault/Localhost, or beta annotations with other values."""

    def bad(sc: Mapping | None) -> str | None:
        profile = as_map(sc).get("appArmorProfile")
        kind = as_str(profile.get("type")) if is_set(profile) else None
        return kind if kind is not None and kind not in ("RuntimeDefault", "Localhost") else None

    pod_value = bad(_sc(spec))
    values = {pod_value} if pod_value is not None else set()
    containers = []
    for c in _containers(spec):
        if (value := bad(_sc(c))) is not None:
            containers.append(_name(c))
            values.add(value)
    setters = _setters(pod_value is not None, containers)
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
        setters.append(_plural("annotation", "annotations", len(annotations)))
    if not setters:
        return None
    return (
        _plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(bad_values)),
        f"{' and '.join(setters)} must not set AppArmor profile type to {_join_quote(bad_values)}",
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
    for c in _containers(spec):
        extra = [
            cap
            for cap in _strings(as_map(as_map(_sc(c)).get("capabilities")).get("add"))
            if cap not in _DEFAULT_CAPABILITIES
        ]
        if extra:
            containers.append(_name(c))
            caps.update(extra)
    if not containers:
        return None
    return (
        "non-default capabilities",
        f"{_named('container', 'containers', containers)} must not include "
        f"{_join_quote(sorted(caps))} in securityContext.capabilities.add",
    )


def _host_namespaces(pod_meta: Mapping, spec: Mapping) -> Result:
    """hostNamespaces 1.0: hostNetwork, hostPID, hostIPC."""
    shared = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key) is True]
    return ("host namespaces", ", ".join(shared)) if shared else None


def _host_path_volumes(pod_meta: Mapping, spec: Mapping) -> Result:
    """hostPathVolumes 1.0: any hostPath volume."""
    names = [as_str(v.get("name")) for v in _volumes(spec) if is_set(v.get("hostPath"))]
    return ("hostPath volumes", _named("volume", "volumes", names)) if names else None


def _volumes(spec: Mapping) -> list[Mapping]:
    volumes = spec.get("volumes")
    return [v for v in _items(volumes) if isinstance(v, Mapping)]


def _host_ports(pod_meta: Mapping, spec: Mapping) -> Result:
    """hostPorts 1.0: a non-zero hostPort on any container port."""
    containers: list[str] = []
    ports: set[str] = set()
    for c in _containers(spec):
        used = [
            p.get("hostPort")
            for p in _items(c.get("ports"))
            if isinstance(p, Mapping) and type(p.get("hostPort")) is int and p.get("hostPort") != 0
        ]
        if used:
            containers.append(_name(c))
            ports.update(str(p) for p in used)
    if not containers:
        return None
    return (
        "hostPort",
        f"{_named('container', 'containers', containers)} {_plural('uses', 'use', len(containers))} "
        f"{_plural('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}",
    )


def _handler_hosts(handler: Any) -> list[str]:
    """The non-empty httpGet/tcpSocket hosts of one probe or lifecycle handler."""
    h = as_map(handler)
    return [host for key in ("httpGet", "tcpSocket") if (host := as_str(as_map(h.get(key)).get("host")))]


def _host_probes_and_host_lifecycle(pod_meta: Mapping, spec: Mapping) -> Result:
    """hostProbesAndHostLifecycle 1.34: a host in a probe's or lifecycle handler's httpGet/tcpSocket."""
    containers, hosts = set(), set()
    for c in _containers(spec):
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
            containers.add(_name(c))
            hosts.update(found)
    if not containers:
        return None
    return (
        "probe or lifecycle host",
        f"{_named('container', 'containers', sorted(containers))} {_plural('uses', 'use', len(containers))} "
        f"{_named('probe or lifecycle host', 'probe or lifecycle hosts', sorted(hosts))}",
    )


def _privileged(pod_meta: Mapping, spec: Mapping) -> Result:
    """privileged 1.0: securityContext.privileged=true."""
    names = [_name(c) for c in _containers(spec) if as_map(_sc(c)).get("privileged") is True]
    if not names:
        return None
    return "privileged", f"{_named('container', 'containers', names)} must not set securityContext.privileged=true"


def _proc_mount(pod_meta: Mapping, spec: Mapping) -> Result:
    """procMount 1.0 (and procMount_restricted 1.35): securityContext.procMount other than Default."""
    containers, kinds = [], set()
    for c in _containers(spec):
        sc = as_map(_sc(c))
        if isinstance(sc.get("procMount"), str) and sc["procMount"] != "Default":
            containers.append(_name(c))
            kinds.add(sc["procMount"])
    if not containers:
        return None
    return (
        "procMount",
        f"{_named('container', 'containers', containers)} must not set securityContext.procMount "
        f"to {_join_quote(sorted(kinds))}",
    )


def _proc_mount_1_35(pod_meta: Mapping, spec: Mapping) -> Result:
    """procMount 1.35: any procMount in a user namespace (hostUsers: false)."""
    return None if _user_namespace(spec) else _proc_mount(pod_meta, spec)


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

        pod_bad = bad(_sc(spec))
        setters = _setters(pod_bad, [_name(c) for c in _containers(spec) if bad(_sc(c))])
        if not setters:
            return None
        data = (
            ([_named("type", "types", sorted(bad_types))] if bad_types else [])
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
    keys = [_SECCOMP_POD_ANNOTATION] + [_SECCOMP_CONTAINER_ANNOTATION + _name(c) for c in _containers(spec)]
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
        f"forbidden {_plural('annotation', 'annotations', len(forbidden))} {', '.join(sorted(forbidden))}",
    )


def _seccomp_type(sc: Mapping | None) -> str | None:
    """The seccompProfile.type a securityContext sets ("" when the profile is set without a type), None if unset."""
    profile = as_map(sc).get("seccompProfile")
    return as_str(profile.get("type")) if is_set(profile) else None


def _seccomp(required: bool) -> CheckFn:
    """seccompProfile_baseline 1.19 (required=False: only explicit bad types) and seccompProfile_restricted 1.19
    (required=True: also every container must be covered by a valid pod or container profile)."""

    def check(pod_meta: Mapping, spec: Mapping) -> Result:
        pod_type = _seccomp_type(_sc(spec))
        pod_bad = pod_type is not None and pod_type not in _SECCOMP_TYPES
        values = {pod_type} if pod_type is not None and pod_bad else set()
        explicit, implicit = [], []
        for c in _containers(spec):
            kind = _seccomp_type(_sc(c))
            if kind is None:
                if pod_type not in _SECCOMP_TYPES:
                    implicit.append(_name(c))
            elif kind not in _SECCOMP_TYPES:
                explicit.append(_name(c))
                values.add(kind)
        if setters := _setters(pod_bad, explicit):
            return (
                "seccompProfile",
                f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
                f"{_join_quote(sorted(values))}",
            )
        if required and implicit:
            return (
                "seccompProfile",
                f"pod or {_named('container', 'containers', implicit)} must set "
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
        sysctls = as_map(_sc(spec)).get("sysctls")
        names = [as_str(s.get("name")) for s in _items(sysctls) if isinstance(s, Mapping)]
        forbidden = [n for n in names if n not in allowed]
        return ("forbidden sysctls", ", ".join(forbidden)) if forbidden else None

    return check


def _windows_host_process(pod_meta: Mapping, spec: Mapping) -> Result:
    """windowsHostProcess 1.0: securityContext.windowsOptions.hostProcess=true on the pod or a container."""

    def bad(sc: Mapping | None) -> bool:
        return as_map(as_map(sc).get("windowsOptions")).get("hostProcess") is True

    setters = _setters(bad(_sc(spec)), [_name(c) for c in _containers(spec) if bad(_sc(c))])
    if not setters:
        return None
    return "hostProcess", f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true"


def _not_windows(check: CheckFn) -> CheckFn:
    """The 1.25 revision of a restricted check: a pod with spec.os.name=windows passes it."""
    return lambda pod_meta, spec: None if _windows(spec) else check(pod_meta, spec)


def _not_user_namespace(check: CheckFn) -> CheckFn:
    """The 1.35 revision of a restricted check: a pod with hostUsers: false passes it."""
    return lambda pod_meta, spec: None if _user_namespace(spec) else check(pod_meta, spec)


def _allow_privilege_escalation(pod_meta: Mapping, spec: Mapping) -> Result:
    """allowPrivilegeEscalation 1.8: every container must set it to false."""
    names = [_name(c) for c in _containers(spec) if as_map(_sc(c)).get("allowPrivilegeEscalation") is not False]
    if not names:
        return None
    return (
        "allowPrivilegeEscalation != false",
        f"{_named('container', 'containers', names)} must set securityContext.allowPrivilegeEscalation=false",
    )


def _capabilities_restricted(pod_meta: Mapping, spec: Mapping) -> Result:
    """capabilities_restricted 1.22: every container drops ALL and adds nothing but NET_BIND_SERVICE."""
    missing, adding, caps = [], [], set()
    for c in _containers(spec):
        capabilities = as_map(_sc(c)).get("capabilities")
        if not is_set(capabilities):
            missing.append(_name(c))
            continue
        if "ALL" not in _strings(capabilities.get("drop")):
            missing.append(_name(c))
        extra = [cap for cap in _strings(capabilities.get("add")) if cap != "NET_BIND_SERVICE"]
        if extra:
            adding.append(_name(c))
            caps.update(extra)
    details = (
        [f'{_named("container", "containers", missing)} must set securityContext.capabilities.drop=["ALL"]']
        if missing
        else []
    ) + (
        [
            f"{_named('container', 'containers', adding)} must not include {_join_quote(sorted(caps))} in "
            "securityContext.capabilities.add"
        ]
        if adding
        else []
    )
    return ("unrestricted capabilities", "; ".join(details)) if details else None


_ALLOWED_VOLUMES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
_RESTRICTED_VOLUMES = (
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
)


def _restricted_volumes(pod_meta: Mapping, spec: Mapping) -> Result:
    """restrictedVolumes 1.0: volume sources other than the nine allowed ones (an unrecognised one is "unknown")."""
    names, kinds = [], set()
    for v in _volumes(spec):
        if any(is_set(v.get(key)) for key in _ALLOWED_VOLUMES):
            continue
        names.append(as_str(v.get("name")))
        kinds.add(next((key for key in _RESTRICTED_VOLUMES if is_set(v.get(key))), "unknown"))
    if not names:
        return None
    return (
        "restricted volume types",
        f"{_named('volume', 'volumes', names)} {_plural('uses', 'use', len(names))} "
        f"{_named('restricted volume type', 'restricted volume types', sorted(kinds))}",
    )


def _run_as_non_root(pod_meta: Mapping, spec: Mapping) -> Result:
    """runAsNonRoot 1.0: runAsNonRoot=true on the pod or every container, and false nowhere."""
    pod_value = as_map(_sc(spec)).get("runAsNonRoot")
    explicit, implicit = [], []
    for c in _containers(spec):
        value = as_map(_sc(c)).get("runAsNonRoot")
        if isinstance(value, bool):
            if not value:
                explicit.append(_name(c))
        elif pod_value is not True:
            implicit.append(_name(c))
    if setters := _setters(pod_value is False, explicit):
        return "runAsNonRoot != true", f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false"
    if implicit:
        return (
            "runAsNonRoot != true",
            f"pod or {_named('container', 'containers', implicit)} must set securityContext.runAsNonRoot=true",
        )
    return None


def _run_as_user(pod_meta: Mapping, spec: Mapping) -> Result:
    """runAsUser 1.23: runAsUser=0 on the pod or a container."""

    def root(sc: Mapping | None) -> bool:
        value = as_map(sc).get("runAsUser")
        return type(value) is int and value == 0

    setters = _setters(root(_sc(spec)), [_name(c) for c in _containers(spec) if root(_sc(c))])
    return ("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0") if setters else None


@dataclass(frozen=True)
class Revision:
    """One revision of a check: from which policy version it applies, and the baseline checks it replaces."""

    since: Version
    check: CheckFn
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class Check:
    """One upstream check: its ID, level, revisions (oldest first), and how to satisfy it (our words)."""

    id: str
    level: str
    revisions: tuple[Revision, ...]
    fix: str


CHECKS: tuple[Check, ...] = (
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
        (Revision((1, 0), _proc_mount), Revision((1, 35), _proc_mount_1_35)),
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
        (Revision((1, 0), _seccomp_annotations), Revision((1, 19), _seccomp(required=False))),
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
    Check(
        "allowPrivilegeEscalation",
        RESTRICTED,
        (Revision((1, 8), _allow_privilege_escalation), Revision((1, 25), _not_windows(_allow_privilege_escalation))),
        "set securityContext.allowPrivilegeEscalation: false on every container",
    ),
    Check(
        "capabilities_restricted",
        RESTRICTED,
        (
            Revision((1, 22), _capabilities_restricted, ("capabilities_baseline",)),
            Revision((1, 25), _not_windows(_capabilities_restricted), ("capabilities_baseline",)),
        ),
        'set securityContext.capabilities.drop: ["ALL"] on every container and add at most NET_BIND_SERVICE',
    ),
    Check(
        "procMount_restricted",
        RESTRICTED,
        (Revision((1, 35), _proc_mount, ("procMount",)),),
        "leave securityContext.procMount unset or Default",
    ),
    Check(
        "restrictedVolumes",
        RESTRICTED,
        (Revision((1, 0), _restricted_volumes, ("hostPathVolumes",)),),
        "use only " + ", ".join(_ALLOWED_VOLUMES) + " volumes",
    ),
    Check(
        "runAsNonRoot",
        RESTRICTED,
        (Revision((1, 0), _run_as_non_root), Revision((1, 35), _not_user_namespace(_run_as_non_root))),
        "set securityContext.runAsNonRoot: true on the pod (and false on no container)",
    ),
    Check(
        "runAsUser",
        RESTRICTED,
        (Revision((1, 23), _run_as_user), Revision((1, 35), _not_user_namespace(_run_as_user))),
        "set runAsUser to a non-zero UID (or leave it unset with a non-root image)",
    ),
    Check(
        "seccompProfile_restricted",
        RESTRICTED,
        (
            Revision((1, 19), _seccomp(required=True), ("seccompProfile_baseline",)),
            Revision((1, 25), _not_windows(_seccomp(required=True)), ("seccompProfile_baseline",)),
        ),
        "set securityContext.seccompProfile.type: RuntimeDefault on the pod",
    ),
)
"""Every check, in the order upstream evaluates them (baseline IDs sorted, then restricted IDs sorted)."""

NEWEST: Version = max(r.since for c in CHECKS for r in c.revisions)
"""The newest policy version with a revision: "latest", and any later version, evaluate as this one."""


@functools.cache
def _active(level: str, version: Version | None) -> tuple[tuple[Check, CheckFn], ...]:
    """checkRegistry.EvaluatePod's list: the checks of `level` at `version`, each at its revision for that version."""
    if level == PRIVILEGED:
        return ()
    at = NEWEST if version is None or version > NEWEST else version
    current = [
        (c, revs[-1])
        for c in CHECKS
        if (c.level == BASELINE or level == RESTRICTED) and (revs := [r for r in c.revisions if r.since <= at])
    ]
    overridden = {o for _, r in current for o in r.overrides}
    return tuple((c, r.check) for c, r in current if c.id not in overridden)


def failed_checks(
    level: str, version: str, pod_meta: Mapping, pod_spec: Mapping
) -> tuple[str, str, list[tuple[Check, str]]]:
    """The parsed level, version text, and each failed check with its "reason (detail)"."""
    lvl, ver = parse_level(level)[0], parse_version(version)[0]
    pod_meta, pod_spec = as_map(pod_meta), as_map(pod_spec)
    failed = []
    for check, fn in _active(lvl, ver):
        if (result := fn(pod_meta, pod_spec)) is not None:
            reason, detail = result
            failed.append((check, f"{reason} ({detail})" if detail else reason))
    return lvl, version_text(ver), failed


def violations(level: str, version: str, pod_meta: Mapping, pod_spec: Mapping) -> list[str]:
    """The forbidden reasons of a pod (its metadata and spec) at `level`:`version`, in upstream's order, each as
    "reason (detail)". A level upstream cannot parse is evaluated as restricted, a version as latest."""
    return [text for _, text in failed_checks(level, version, pod_meta, pod_spec)[2]]
