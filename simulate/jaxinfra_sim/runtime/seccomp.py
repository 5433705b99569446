"""The `RuntimeDefault` seccomp profile, as containerd applies it to a container whose securityContext (or pod's)
asks for it (`seccompProfile: {type: RuntimeDefault}`), for runc's `config.json`.

containerd's default profile is moby's (moby/profiles @ 02e898b1 `seccomp/default.json`, from which containerd's
`contrib/seccomp` is generated): an allowlist, every other call failing with EPERM. Written here the other way round,
as the calls it leaves out (on x86_64 and aarch64: what a JAX program, a shell or Python may call stays allowed), so
that a call this kernel has and the list does not name is allowed rather than refused by a stale copy:
- never allowed: the kernel keyring, kexec, `pivot_root`, swap, `userfaultfd`, old and obsolete calls;
- allowed only with a capability in the container's bounding set, as the profile's `includes.caps` say: `CAP_SYS_ADMIN`
  (mount, namespaces, `bpf`, `perf_event_open`...), `CAP_DAC_READ_SEARCH` (`open_by_handle_at`, the "shocker"
  escape), `CAP_SYS_BOOT`, `CAP_SYS_MODULE`, `CAP_SYS_PACCT`, `CAP_SYS_PTRACE` (`kcmp`, `pidfd_getfd`; `ptrace` and
  `process_vm_*` are allowed on kernels from 4.8), `CAP_SYS_RAWIO`, `CAP_SYS_TIME`, `CAP_SYS_TTY_CONFIG`,
  `CAP_SYS_NICE` (NUMA policy), `CAP_SYSLOG`, `CAP_BPF`, `CAP_PERFMON`;
- `clone` with a namespace flag only with `CAP_SYS_ADMIN`; `clone3` answers ENOSYS without it, so that libc falls
  back to `clone`, which can be checked.

Not carried over: the profile's argument filters on `socket` (some address families) and `personality` (some
personas), which a training program does not meet. A `privileged` container runs unconfined, as containerd runs it
(`WithoutSeccomp` for privileged), and so does one that asks for nothing or `Unconfined` (the kubelet's default
without `--seccomp-default`). `Localhost` profiles name a file on the node, which this machine does not have: the
report says so and the container runs unconfined.
"""

from __future__ import annotations

from typing import Any

NEVER = (
    "add_key",
    "create_module",
    "get_kernel_syms",
    "kexec_file_load",
    "kexec_load",
    "keyctl",
    "nfsservctl",
    "pivot_root",
    "query_module",
    "request_key",
    "swapoff",
    "swapon",
    "_sysctl",
    "sysfs",
    "uselib",
    "userfaultfd",
    "ustat",
    "vm86",
    "vm86old",
)
"""Calls moby's default profile never allows (in neither its allowlist nor a capability's)."""

BY_CAPABILITY = {
    "SYS_ADMIN": (
        "bpf",
        "fanotify_init",
        "fsconfig",
        "fsmount",
        "fsopen",
        "fspick",
        "lookup_dcookie",
        "lsm_get_self_attr",
        "lsm_list_modules",
        "lsm_set_self_attr",
        "mount",
        "mount_setattr",
        "move_mount",
        "open_tree",
        "perf_event_open",
        "quotactl",
        "quotactl_fd",
        "setdomainname",
        "sethostname",
        "setns",
        "syslog",
        "umount",
        "umount2",
        "unshare",
    ),
    "DAC_READ_SEARCH": ("open_by_handle_at",),
    "SYS_BOOT": ("reboot",),
    "SYS_CHROOT": ("chroot",),
    "SYS_MODULE": ("delete_module", "finit_module", "init_module"),
    "SYS_PACCT": ("acct",),
    "SYS_PTRACE": ("kcmp", "pidfd_getfd", "process_madvise"),
    "SYS_RAWIO": ("ioperm", "iopl"),
    "SYS_TIME": ("clock_settime", "clock_settime64", "settimeofday", "stime"),
    "SYS_TTY_CONFIG": ("vhangup",),
    "SYS_NICE": ("get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node"),
    "SYSLOG": ("syslog",),
    "BPF": ("bpf",),
    "PERFMON": ("perf_event_open",),
}
"""Calls moby's default profile allows only to a container whose bounding set holds the capability (its
`includes.caps`; a call under two capabilities is allowed by either)."""

NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
"""clone(2)'s CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID and NEWNET: refused without CAP_SYS_ADMIN."""

EPERM, ENOSYS = 1, 38
ARCHITECTURES = ("SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM")


def profile(kind: str | None, privileged: bool, capabilities: tuple[str, ...]) -> dict[str, Any] | None:
    """The OCI `linux.seccomp` for a container whose seccompProfile type is `kind` (None: none set), or None where
    it runs unconfined."""
    if kind != "RuntimeDefault" or privileged:
        return None
    held = set(capabilities)
    allowed = {name for cap, names in BY_CAPABILITY.items() if cap in held for name in names}
    denied = sorted(({*NEVER} | {n for names in BY_CAPABILITY.values() for n in names}) - allowed)
    rules: list[dict[str, Any]] = [{"names": denied, "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM}]
    if "SYS_ADMIN" not in held:
        rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS})
        for flag in NAMESPACE_FLAGS:
            rules.append(
                {
                    "names": ["clone"],
                    "action": "SCMP_ACT_ERRNO",
                    "errnoRet": EPERM,
                    "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}],
                }
            )
    return {"defaultAction": "SCMP_ACT_ALLOW", "architectures": list(ARCHITECTURES), "syscalls": rules}
