"""Pod Security's restricted checks (upstream's policy/check_*.go of level restricted,
kubernetes/pod-security-admission commit 8f84a87c7f617f64a4ddc1aea24aeeb7a2e07cb8): one function per check revision,
and `RESTRICTED_CHECKS`, in upstream's evaluation order (IDs sorted bytewise); some revisions reuse a baseline
check's function (procMount, seccomp) and override that baseline check.
"""

from __future__ import annotations

from collections.abc import Mapping

from jaxinfra.admission.decoded import as_map, as_str
from jaxinfra.admission.pod_security.baseline import proc_mount, seccomp, volumes_of
from jaxinfra.admission.pod_security.levels import RESTRICTED
from jaxinfra.admission.pod_security.podspec import (
    Check,
    Result,
    Revision,
    container_name,
    containers_of,
    is_set,
    join_quote,
    named,
    not_user_namespace,
    not_windows,
    pluralize,
    security_context,
    setters_of,
    strings_of,
)


def _allow_privilege_escalation(pod_meta: Mapping, spec: Mapping) -> Result:
    """allowPrivilegeEscalation 1.8: every container must set it to false."""
    names = [
        container_name(c)
        for c in containers_of(spec)
        if as_map(security_context(c)).get("allowPrivilegeEscalation") is not False
    ]
    if not names:
        return None
    return (
        "allowPrivilegeEscalation != false",
        f"{named('container', 'containers', names)} must set securityContext.allowPrivilegeEscalation=false",
    )


def _capabilities_restricted(pod_meta: Mapping, spec: Mapping) -> Result:
    """capabilities_restricted 1.22: every container drops ALL and adds nothing but NET_BIND_SERVICE."""
    missing, adding, caps = [], [], set()
    for c in containers_of(spec):
        capabilities = as_map(security_context(c)).get("capabilities")
        if not is_set(capabilities):
            missing.append(container_name(c))
            continue
        if "ALL" not in strings_of(capabilities.get("drop")):
            missing.append(container_name(c))
        extra = [cap for cap in strings_of(capabilities.get("add")) if cap != "NET_BIND_SERVICE"]
        if extra:
            adding.append(container_name(c))
            caps.update(extra)
    details = (
        [f'{named("container", "containers", missing)} must set securityContext.capabilities.drop=["ALL"]']
        if missing
        else []
    ) + (
        [
            f"{named('container', 'containers', adding)} must not include {join_quote(sorted(caps))} in "
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
    for v in volumes_of(spec):
        if any(is_set(v.get(key)) for key in _ALLOWED_VOLUMES):
            continue
        names.append(as_str(v.get("name")))
        kinds.add(next((key for key in _RESTRICTED_VOLUMES if is_set(v.get(key))), "unknown"))
    if not names:
        return None
    return (
        "restricted volume types",
        f"{named('volume', 'volumes', names)} {pluralize('uses', 'use', len(names))} "
        f"{named('restricted volume type', 'restricted volume types', sorted(kinds))}",
    )


def _run_as_non_root(pod_meta: Mapping, spec: Mapping) -> Result:
    """runAsNonRoot 1.0: runAsNonRoot=true on the pod or every container, and false nowhere."""
    pod_value = as_map(security_context(spec)).get("runAsNonRoot")
    explicit, implicit = [], []
    for c in containers_of(spec):
        value = as_map(security_context(c)).get("runAsNonRoot")
        if isinstance(value, bool):
            if not value:
                explicit.append(container_name(c))
        elif pod_value is not True:
            implicit.append(container_name(c))
    if setters := setters_of(pod_value is False, explicit):
        return "runAsNonRoot != true", f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false"
    if implicit:
        return (
            "runAsNonRoot != true",
            f"pod or {named('container', 'containers', implicit)} must set securityContext.runAsNonRoot=true",
        )
    return None


def _run_as_user(pod_meta: Mapping, spec: Mapping) -> Result:
    """runAsUser 1.23: runAsUser=0 on the pod or a container."""

    def root(sc: Mapping | None) -> bool:
        value = as_map(sc).get("runAsUser")
        return type(value) is int and value == 0

    setters = setters_of(
        root(security_context(spec)), [container_name(c) for c in containers_of(spec) if root(security_context(c))]
    )
    return ("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0") if setters else None


RESTRICTED_CHECKS: tuple[Check, ...] = (
    Check(
        "allowPrivilegeEscalation",
        RESTRICTED,
        (Revision((1, 8), _allow_privilege_escalation), Revision((1, 25), not_windows(_allow_privilege_escalation))),
        "set securityContext.allowPrivilegeEscalation: false on every container",
    ),
    Check(
        "capabilities_restricted",
        RESTRICTED,
        (
            Revision((1, 22), _capabilities_restricted, ("capabilities_baseline",)),
            Revision((1, 25), not_windows(_capabilities_restricted), ("capabilities_baseline",)),
        ),
        'set securityContext.capabilities.drop: ["ALL"] on every container and add at most NET_BIND_SERVICE',
    ),
    Check(
        "procMount_restricted",
        RESTRICTED,
        (Revision((1, 35), proc_mount, ("procMount",)),),
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
        (Revision((1, 0), _run_as_non_root), Revision((1, 35), not_user_namespace(_run_as_non_root))),
        "set securityContext.runAsNonRoot: true on the pod (and false on no container)",
    ),
    Check(
        "runAsUser",
        RESTRICTED,
        (Revision((1, 23), _run_as_user), Revision((1, 35), not_user_namespace(_run_as_user))),
        "set runAsUser to a non-zero UID (or leave it unset with a non-root image)",
    ),
    Check(
        "seccompProfile_restricted",
        RESTRICTED,
        (
            Revision((1, 19), seccomp(required=True), ("seccompProfile_baseline",)),
            Revision((1, 25), not_windows(seccomp(required=True)), ("seccompProfile_baseline",)),
        ),
        "set securityContext.seccompProfile.type: RuntimeDefault on the pod",
    ),
)
