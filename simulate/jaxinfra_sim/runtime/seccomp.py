"""Every container's seccomp filter, for runc's `config.json` (`linux.seccomp`): `RuntimeDefault` as containerd applies
it, and the machine's boundary, which every container gets whatever it asks for.

`RuntimeDefault` (`seccompProfile: {type: RuntimeDefault}`, what jaxinfra renders) is containerd's default profile:
the CRI plugin gives it (containerd @ 301026e5 `internal/cri/sputil/seccomp_linux.go` GenerateSeccompSpecOpts ->
`contrib/seccomp/seccomp.go` WithDefaultProfile -> `contrib/seccomp/seccomp_default.go` DefaultProfile). That one is
Go code, kept by hand in step with moby's published profile (once moby/moby's `profiles/seccomp`, now its own
repository), whose data is copied here unchanged as `seccomp_default.json`: moby/profiles @ 836ae4d3 (tag
seccomp/v0.2.3, what Docker v29.7.2 vendors) `seccomp/default.json`, sha256 `SHA256` (the tests check it: the file is
never edited by hand; to move on, copy a newer release's file and its hash). The two differ in `lsm_get_self_attr`,
`lsm_list_modules` and `lsm_set_self_attr`, which moby's allows only with CAP_SYS_ADMIN (moby/profiles 5bb2d1ae) and
containerd's to every container: here moby's, the stricter.

The profile becomes the OCI filter as moby's setupSeccomp makes it (moby/profiles @ 836ae4d3 `seccomp/seccomp_linux.go`
setupSeccomp, `kernel_linux.go` kernelGreaterEqualThan; `convert`): its defaultAction and defaultErrnoRet as they
are; the architectures of this machine's `archMap` entry with its sub-architectures; each group of calls left out when
its `excludes` match (this machine's arch listed, a listed capability in the container's *bounding* set, this kernel
at or above minKernel, compared as "kernel.major") or its `includes` do not (arch not listed, a listed capability
missing, kernel below minKernel); each kept group's `names`, `action`, `errnoRet` and `args`. So every call outside
the allowlist fails with EPERM (`io_uring_setup`, `keyctl`, ...); socket(2) of AF_ALG and AF_VSOCK and personality(2)
other than the five personas listed (ADDR_NO_RANDOMIZE for one) fall through to that EPERM; a call under a
capability (mount, unshare, bpf...) needs it in the bounding set; without CAP_SYS_ADMIN, clone's namespace flags are
refused and clone3 answers ENOSYS, so that libc falls back to clone.

A privileged container, and one that asks for `Unconfined` or nothing (the kubelet's default without
`--seccomp-default`), runs without the profile, as containerd runs it (GenerateSeccompSpecOpts). `Localhost` names a
file on the node, which this machine does not have: the container runs as `Unconfined` (`security.resolve` notes it).

The deviation, in every container's filter whatever its profile (`boundary`, `guard`): AF_VSOCK sockets are outside
every network namespace (this kernel's vsock is not namespaced: a process in a fresh network namespace binds and
listens on the VM's vsock ports, which the hypervisor reaches, and connects to the host's), so socket(2) and
socketpair(2) of AF_VSOCK fail with EPERM, the errno moby's profile gives them (`VSOCK`). A 32-bit x86 call reaches
socket(2) through socketcall(2) too (IA32 emulation takes `int $0x80` from any 64-bit process), whose address family
is behind a pointer seccomp cannot read, and libseccomp (2.5.4 here) derives an allowing socketcall(SYS_SOCKET) rule
from each socket(2) rule that allows: under RuntimeDefault socketcall(2) answers ENOSYS whole, as moby's profile had
it in seccomp/v0.2.2 and took back for its cost to old 32-bit programs (moby/profiles 7158007a, 3c283243); elsewhere
only its SYS_SOCKET and SYS_SOCKETPAIR fail, with EPERM (`MULTIPLEXED_CLOSED`, `MULTIPLEXED_OPEN`: other forms conflict
in libseccomp, EEXIST, or lose the 64-bit socket(2) rule). 32-bit programs that make their sockets with the direct
calls (Linux 4.3 on) are unaffected. runc adds no rule whose action is the default's (runc @ v1.1.5
`libcontainer/seccomp/seccomp_linux.go` matchCall), so a refusal the profile's default gives already is left to it.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

PUBLISHED = "seccomp_default.json"
"""moby's default profile, beside this module (moby/profiles @ 836ae4d3 `seccomp/default.json`, unchanged)."""
SHA256 = "536529b665dd0972c37bfb569f5d4ac8a53592e7b00752bc39ff063ca9864c74"
"""`PUBLISHED`'s sha256, as copied."""

ALLOW = "SCMP_ACT_ALLOW"
ERRNO = "SCMP_ACT_ERRNO"
REFUSING = frozenset({ERRNO, "SCMP_ACT_KILL", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_TRAP"})
"""Actions under which a call does not run; the others (ALLOW, LOG, TRACE, NOTIFY) let it run or hand it on."""
RUNC_ERRNO = errno.EPERM
"""The errno of SCMP_ACT_ERRNO without errnoRet (runc @ v1.1.5 `libcontainer/seccomp/seccomp_linux.go` actErrno)."""

MACHINES = {
    "x86_64": ("amd64", "SCMP_ARCH_X86_64"),
    "i386": ("x86", "SCMP_ARCH_X86"),
    "i686": ("x86", "SCMP_ARCH_X86"),
    "aarch64": ("arm64", "SCMP_ARCH_AARCH64"),
    "arm64": ("arm64", "SCMP_ARCH_AARCH64"),
    "armv7l": ("arm", "SCMP_ARCH_ARM"),
    "ppc64le": ("ppc64le", "SCMP_ARCH_PPC64LE"),
    "s390x": ("s390x", "SCMP_ARCH_S390X"),
    "riscv64": ("riscv64", "SCMP_ARCH_RISCV64"),
    "mips64": ("mips64", "SCMP_ARCH_MIPS64"),
}
"""uname's machine -> the arch as the profile's `arches` name it and its `archMap` key: moby's goToNative of the Go
arch, then nativeToSeccomp (moby/profiles @ 836ae4d3 `seccomp/seccomp_linux.go`)."""

AF_VSOCK = 40
"""linux/socket.h."""
SYS_SOCKET, SYS_SOCKETPAIR = 1, 8
"""socketcall(2)'s calls that make sockets (linux/net.h)."""


@dataclass(frozen=True)
class Refusal:
    """A call the machine's boundary refuses: `name` with `first` as its first argument (None: every call of it),
    failing with `errno`."""

    name: str
    errno: int
    first: int | None = None


VSOCK = (Refusal("socket", errno.EPERM, AF_VSOCK), Refusal("socketpair", errno.EPERM, AF_VSOCK))
"""AF_VSOCK sockets, which no network namespace holds: refused in every container, with EPERM."""
MULTIPLEXED_OPEN = (Refusal("socketcall", errno.EPERM, SYS_SOCKET), Refusal("socketcall", errno.EPERM, SYS_SOCKETPAIR))
"""Where the filter lets calls through by default: socketcall(2) making a socket, of whatever family (the same rules
libseccomp derives from `VSOCK`'s for 32-bit x86, written out)."""
MULTIPLEXED_CLOSED = (Refusal("socketcall", errno.ENOSYS),)
"""Where it refuses them by default (RuntimeDefault): socketcall(2) whole, with ENOSYS, as moby/profiles @ 7158007a
`seccomp/default.json` had it (seccomp/v0.2.2). Refusing only its SYS_SOCKET there conflicts with the rules libseccomp
derives from the profile's socket(2) rules (EEXIST from runc)."""


@dataclass(frozen=True)
class Host:
    """What the conversion reads of the machine: its arch as the profile names it (`MACHINES`), that arch's
    `archMap` key (None where the profile has none), and its kernel's (version, major revision)."""

    arch: str
    seccomp_arch: str | None
    kernel: tuple[int, int]


def kernel_version(text: str) -> tuple[int, int]:
    """A kernel release or a profile's minKernel as moby reads it, "%d.%d" and the rest ignored ("6.18.44-fc" ->
    (6, 18); moby/profiles @ 836ae4d3 `seccomp/kernel_linux.go` parseRelease)."""
    found = re.match(r"(\d+)\.(\d+)", text)
    if found is None:
        raise ValueError(f"kernel version {text!r}: expected <kernel>.<major>")
    return int(found[1]), int(found[2])


@functools.cache
def this_machine() -> Host:
    uname = os.uname()
    arch, key = MACHINES.get(uname.machine, (uname.machine, None))
    return Host(arch, key, kernel_version(uname.release))


@functools.cache
def _text() -> str:
    return resources.files(__package__).joinpath(PUBLISHED).read_text(encoding="utf-8")


def published() -> dict[str, Any]:
    """moby's default profile as published (a fresh copy: callers may change it)."""
    data: dict[str, Any] = json.loads(_text())
    return data


def architectures(profile: Mapping[str, Any], host: Host) -> list[str]:
    """The filter's architectures: the profile's own list (moby's has none), then this machine's `archMap` entry and
    its sub-architectures (none where it has no entry: libseccomp then takes the native one alone)."""
    own = list(profile.get("architectures") or ())
    for entry in profile.get("archMap") or ():
        if entry["architecture"] == host.seccomp_arch:
            return own + [entry["architecture"], *(entry.get("subArchitectures") or ())]
    return own


def applies(group: Mapping[str, Any], host: Host, bounding: Collection[str]) -> bool:
    """Whether setupSeccomp keeps a group of calls for this machine and a container of this bounding set
    (capabilities spelled CAP_*)."""
    excludes, includes = group.get("excludes") or {}, group.get("includes") or {}
    if host.arch in (excludes.get("arches") or ()):
        return False
    if any(cap in bounding for cap in excludes.get("caps") or ()):
        return False
    if excludes.get("minKernel") and host.kernel >= kernel_version(excludes["minKernel"]):
        return False
    if includes.get("arches") and host.arch not in includes["arches"]:
        return False
    if not all(cap in bounding for cap in includes.get("caps") or ()):
        return False
    return not (includes.get("minKernel") and host.kernel < kernel_version(includes["minKernel"]))


def convert(profile: Mapping[str, Any], host: Host, bounding: Collection[str]) -> dict[str, Any]:
    """A profile in moby's form as the OCI `linux.seccomp` for this machine and a container of this bounding set."""
    out = {key: value for key, value in profile.items() if key not in ("archMap", "architectures", "syscalls")}
    out["architectures"] = architectures(profile, host)
    out["syscalls"] = []
    for group in profile.get("syscalls") or ():
        if not applies(group, host, bounding):
            continue
        rule: dict[str, Any] = {"names": list(group.get("names") or [group["name"]]), "action": group["action"]}
        if group.get("errnoRet") is not None:
            rule["errnoRet"] = group["errnoRet"]
        if group.get("args"):
            rule["args"] = [dict(arg) for arg in group["args"]]
        out["syscalls"].append(rule)
    return out


def admits(arg: Mapping[str, Any], value: int) -> bool:
    """Whether an argument condition holds for `value` (libseccomp's comparisons)."""
    op, operand = arg["op"], arg["value"]
    if op == "SCMP_CMP_MASKED_EQ":
        return value & operand == arg.get("valueTwo", 0)
    compare = {
        "SCMP_CMP_NE": value != operand,
        "SCMP_CMP_LT": value < operand,
        "SCMP_CMP_LE": value <= operand,
        "SCMP_CMP_EQ": value == operand,
        "SCMP_CMP_GE": value >= operand,
        "SCMP_CMP_GT": value > operand,
    }
    return compare[op]


def _first(op: str, value: int) -> list[dict[str, Any]]:
    return [{"index": 0, "value": value, "op": op}]


def _narrowed(rule: Mapping[str, Any], refusal: Refusal) -> list[dict[str, Any]]:
    """`rule` with `refusal.name` no longer let through where the boundary refuses it."""
    if rule["action"] in REFUSING or refusal.name not in rule["names"]:
        return [dict(rule)]
    rest = [{**rule, "names": [n for n in rule["names"] if n != refusal.name]}] if len(rule["names"]) > 1 else []
    if refusal.first is None:
        return rest
    first = [arg for arg in rule.get("args") or () if arg["index"] == 0]
    if first:  # runc makes conditions on one argument rules of their own (matchCall): each must refuse the value
        if any(admits(arg, refusal.first) for arg in first):
            raise ValueError(f"seccomp rule {dict(rule)} lets {refusal.name}({refusal.first}) through")
        return [dict(rule)]
    args = list(rule.get("args") or ())  # ranges on either side of the value, one condition each
    return rest + [
        {**rule, "names": [refusal.name], "args": args + _first(op, refusal.first)}
        for op in ("SCMP_CMP_LT", "SCMP_CMP_GT")
    ]


def boundary(seccomp: Mapping[str, Any]) -> tuple[Refusal, ...]:
    """What the machine's boundary refuses in a filter of this default action."""
    return VSOCK + (MULTIPLEXED_CLOSED if seccomp["defaultAction"] in REFUSING else MULTIPLEXED_OPEN)


def guard(seccomp: Mapping[str, Any]) -> dict[str, Any]:
    """An OCI `linux.seccomp` with the machine's boundary added (`boundary`): no rule lets a refused call through,
    and each refusal is a rule of its own, first, unless the default action gives it already (runc would skip it)."""
    rules = [dict(rule) for rule in seccomp.get("syscalls") or ()]
    default_errno = seccomp.get("defaultErrnoRet", RUNC_ERRNO) if seccomp["defaultAction"] == ERRNO else None
    refusals = []
    for refusal in boundary(seccomp):
        rules = [narrowed for rule in rules for narrowed in _narrowed(rule, refusal)]
        if refusal.errno != default_errno:
            refusal_rule: dict[str, Any] = {"names": [refusal.name], "action": ERRNO, "errnoRet": refusal.errno}
            if refusal.first is not None:
                refusal_rule["args"] = _first("SCMP_CMP_EQ", refusal.first)
            refusals.append(refusal_rule)
    return {**seccomp, "syscalls": refusals + rules}


def profile(
    kind: str | None, privileged: bool, capabilities: tuple[str, ...], host: Host | None = None
) -> dict[str, Any]:
    """The OCI `linux.seccomp` of a container whose seccompProfile type is `kind` (None: none set) and whose bounding
    set is `capabilities` (without CAP_), on `host` (this machine): RuntimeDefault's, else the boundary alone."""
    host = host or this_machine()
    moby = published()
    if kind == "RuntimeDefault" and not privileged:
        return guard(convert(moby, host, {f"CAP_{cap}" for cap in capabilities}))
    return guard({"defaultAction": ALLOW, "architectures": architectures(moby, host), "syscalls": []})
