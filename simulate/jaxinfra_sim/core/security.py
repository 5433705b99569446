"""A container's securityContext as the kubelet and the container runtime apply it: who the process is
(uid, gid, groups), which capabilities it holds, whether it may gain more, and whether its root
filesystem is writable.

Sources:
- kubernetes pkg/kubelet/kuberuntime/security_context.go (`determineEffectiveSecurityContext`: the
  container's runAsUser/runAsGroup/runAsNonRoot win over the pod's; fsGroup and supplementalGroups
  are the pod's and join the process's groups) and security_context_others.go (`verifyRunAsNonRoot`:
  the kubelet refuses a container that would run as uid 0 under runAsNonRoot, and the pod shows
  CreateContainerConfigError);
- containerd pkg/oci/spec.go (`defaultUnixCaps`: the 14 capabilities of a root container) and
  internal/cri/opts/spec_linux_opts.go (`WithCapabilities`: add "ALL", then drop "ALL", then each
  add, then each drop; names without the CAP_ prefix; `privileged` grants every capability) and
  the kubelet's `NoNewPrivs = !allowPrivilegeEscalation`;
- the kernel's execve(2) capability rules (capabilities(7)): a non-root process without file
  capabilities or ambient ones ends with no effective or permitted capabilities, whatever its
  bounding set holds; a root process gets its bounding set.

Without runAsGroup the gid is 0: containerd's WithUserID looks the uid up in the image's /etc/passwd
and falls back to group 0. What the image says (its USER) is not known here: a container with no runAsUser runs as
uid 0, as most images do, except under runAsNonRoot, where it runs as uid 65534 and a note says the image's
USER decides on a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jaxinfra.errors import Problem

CAPABILITIES: dict[str, int] = {
    "CHOWN": 0,
    "DAC_OVERRIDE": 1,
    "DAC_READ_SEARCH": 2,
    "FOWNER": 3,
    "FSETID": 4,
    "KILL": 5,
    "SETGID": 6,
    "SETUID": 7,
    "SETPCAP": 8,
    "LINUX_IMMUTABLE": 9,
    "NET_BIND_SERVICE": 10,
    "NET_BROADCAST": 11,
    "NET_ADMIN": 12,
    "NET_RAW": 13,
    "IPC_LOCK": 14,
    "IPC_OWNER": 15,
    "SYS_MODULE": 16,
    "SYS_RAWIO": 17,
    "SYS_CHROOT": 18,
    "SYS_PTRACE": 19,
    "SYS_PACCT": 20,
    "SYS_ADMIN": 21,
    "SYS_BOOT": 22,
    "SYS_NICE": 23,
    "SYS_RESOURCE": 24,
    "SYS_TIME": 25,
    "SYS_TTY_CONFIG": 26,
    "MKNOD": 27,
    "LEASE": 28,
    "AUDIT_WRITE": 29,
    "AUDIT_CONTROL": 30,
    "SETFCAP": 31,
    "MAC_OVERRIDE": 32,
    "MAC_ADMIN": 33,
    "SYSLOG": 34,
    "WAKE_ALARM": 35,
    "BLOCK_SUSPEND": 36,
    "AUDIT_READ": 37,
    "PERFMON": 38,
    "BPF": 39,
    "CHECKPOINT_RESTORE": 40,
}
"""Linux capability numbers (include/uapi/linux/capability.h), by the name Kubernetes uses."""

DEFAULT_CAPS: tuple[str, ...] = (
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
)
"""containerd's defaultUnixCaps: the bounding set of every container that is not privileged."""

IMAGE_UID = 0
"""The uid a container without runAsUser runs as: its image's USER, unknown here, taken as root."""
NON_ROOT_UID = 65534
"""The uid standing in for an image's non-root USER when runAsNonRoot is set and runAsUser is not."""


@dataclass(frozen=True)
class Security:
    """Who a container's process is and what it may do, resolved from the pod's and the container's securityContext."""

    uid: int = IMAGE_UID
    gid: int = IMAGE_UID
    groups: tuple[int, ...] = ()  # fsGroup, then supplementalGroups: the process's supplementary groups
    fs_group: int | None = None  # the group that owns the pod's writable volumes (setgid)
    bounding: tuple[str, ...] = DEFAULT_CAPS
    no_new_privs: bool = False  # allowPrivilegeEscalation: false
    read_only_root: bool = False  # readOnlyRootFilesystem
    privileged: bool = False
    seccomp: str | None = None  # seccompProfile.type (the container's, else the pod's): `seccomp.profile`
    notes: tuple[str, ...] = field(default=(), compare=False)
    image_user: bool = field(default=False, compare=False)  # no runAsUser: an image's User decides (`oci_image`)
    image_group: bool = field(default=False, compare=False)  # no runAsGroup: an image's User's group decides
    non_root: bool = field(default=False, compare=False)  # runAsNonRoot: an image's User is checked (`oci_image`)

    @property
    def effective(self) -> tuple[str, ...]:
        """The capabilities its process holds once started: the bounding set for root, none otherwise (execve)."""
        return self.bounding if self.uid == 0 else ()

    @staticmethod
    def mask(names: tuple[str, ...]) -> int:
        bits = 0
        for name in names:
            bits |= 1 << CAPABILITIES[name]
        return bits

    def as_dict(self) -> dict[str, object]:
        return {
            "uid": self.uid,
            "gid": self.gid,
            "groups": list(self.groups),
            "capabilities": list(self.effective),
            "bounding": list(self.bounding),
            "no_new_privs": self.no_new_privs,
            "read_only_root_filesystem": self.read_only_root,
            "privileged": self.privileged,
        }


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _capabilities(caps: Mapping, privileged: bool) -> tuple[str, ...]:
    """containerd's WithCapabilities order: add ALL, drop ALL, each add, each drop."""
    if privileged:
        return tuple(CAPABILITIES)
    add = [str(c).upper().removeprefix("CAP_") for c in caps.get("add") or []]
    drop = [str(c).upper().removeprefix("CAP_") for c in caps.get("drop") or []]
    held = set(DEFAULT_CAPS)
    if "ALL" in add:
        held = set(CAPABILITIES)
    if "ALL" in drop:
        held = set()
    held |= {c for c in add if c in CAPABILITIES}
    held -= set(drop)
    return tuple(name for name in CAPABILITIES if name in held)


def resolve(where: str, pod_spec: Mapping, container: Mapping, problems: list[tuple[str, Problem]]) -> Security:
    """The container's Security; a container the kubelet would refuse to start is a problem of the pod."""
    pod_sc = pod_spec.get("securityContext") or {}
    sc = container.get("securityContext") or {}
    pod_sc = pod_sc if isinstance(pod_sc, Mapping) else {}
    sc = sc if isinstance(sc, Mapping) else {}

    def pick(key: str) -> Any:
        """The container's setting, else the pod's: the container's securityContext wins where it sets one."""
        return sc[key] if sc.get(key) is not None else pod_sc.get(key)

    notes = []
    uid, gid, non_root = _int(pick("runAsUser")), _int(pick("runAsGroup")), bool(pick("runAsNonRoot"))
    if non_root and uid == 0:
        problems.append(
            (
                "security|non-root",
                Problem(
                    f"{where} container {container.get('name', '')} securityContext.runAsUser",
                    0,
                    "CreateContainerConfigError: container's runAsUser breaks non-root policy "
                    "(the kubelet refuses to start it)",
                    "set runAsUser to a non-zero uid, or drop runAsNonRoot",
                ),
            )
        )
    if uid is None:
        uid = NON_ROOT_UID if non_root else IMAGE_UID
        notes.append(
            f"no runAsUser: runs as uid {uid}; on a cluster the image's USER decides"
            + (" (the kubelet refuses a root USER under runAsNonRoot)" if non_root else "")
        )
    fs_group = _int(pod_sc.get("fsGroup"))
    groups = tuple(
        dict.fromkeys(
            g for g in [fs_group, *[_int(x) for x in pod_sc.get("supplementalGroups") or []]] if g is not None
        )
    )
    privileged = sc.get("privileged") is True
    caps = sc.get("capabilities")
    profile = pick("seccompProfile")
    kind = profile.get("type") if isinstance(profile, Mapping) and isinstance(profile.get("type"), str) else None
    if kind == "Localhost":
        notes.append(
            "seccompProfile Localhost: the node's profile file is not here; the container runs unconfined "
            "but for the machine's boundary filter (no AF_VSOCK)"
        )
    return Security(
        uid=uid,
        gid=gid or 0,
        groups=groups,
        fs_group=fs_group,
        bounding=_capabilities(caps if isinstance(caps, Mapping) else {}, privileged),
        no_new_privs=sc.get("allowPrivilegeEscalation") is False,
        read_only_root=sc.get("readOnlyRootFilesystem") is True,
        privileged=privileged,
        seccomp=kind,
        notes=tuple(notes),
        image_user=_int(pick("runAsUser")) is None,
        image_group=gid is None,
        non_root=non_root,
    )
