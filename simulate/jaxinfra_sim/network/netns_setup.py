"""The pods' network's holder, its namespace: leaving the machine's network namespace and making the simulation's.

The holder (`netns_holder`) calls `namespace` first: unshare(CLONE_NEWNET) as root, otherwise
unshare(CLONE_NEWUSER | CLONE_NEWNET) with the caller's own ids mapped (and its subordinate ranges, through
newuidmap and newgidmap, where it has some), `lo` up, the link `cni0` with the pods' gateway, IPv4 forwarding on,
the low ports and ICMP echo sockets open. Also what the holder's other modules share: the namespace's addresses and
sysctls, libc, and `ip` run with CAP_NET_ADMIN kept across its exec (`ip_batch`).

The standard library only, as the holder (whose program imports it; see `netns_holder`).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import pwd
import shutil
import socket
import struct
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
STRATEGIES: dict[str, int] = {"privileged": CLONE_NEWNET, "user": CLONE_NEWUSER | CLONE_NEWNET}
"""The unshare(2) flags of each way to a network namespace, tried in this order (`user` only, unless root)."""

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = struct.Struct("16sh22x")  # struct ifreq: the name, then ifr_flags in a 24-byte union (40 bytes)
PR_SET_PDEATHSIG = 1
LOW_PORTS = "/proc/sys/net/ipv4/ip_unprivileged_port_start"
PING_GROUPS = "/proc/sys/net/ipv4/ping_group_range"
FORWARDING = "/proc/sys/net/ipv4/conf"
"""Each link's IPv4 `forwarding` (`all`: net.ipv4.ip_forward; `default`: what a link made later starts with)."""
EVERY_GROUP = "0 2147483647"
"""The groups containerd lets open ICMP echo sockets in a pod's network namespace (`ping` without CAP_NET_RAW)."""

POD_CIDR = "10.244.0.0/16"
"""The pods' addresses (kubeadm's --pod-network-cidr of the Kubernetes docs' examples): each simulation has a
namespace of its own, so every simulation may use the same range."""
POD_PREFIX = 16
GATEWAY = "10.244.0.1"
"""The gateway's address in the simulation's namespace: every pod's default route, the host side of every pod's veth
(the `ptp` plugin gives each the gateway's address), and the node's address to the pods."""
NODE_LINK = "cni0"
"""The link in the simulation's namespace that holds the gateway's address before any pod exists (where the API
server listens) and host-network pods' addresses: a bridge without ports (a `dummy` link would do, but kernels built
without CONFIG_DUMMY lack it, as the one this was written on does)."""
CAP_NET_ADMIN, CAP_NET_RAW, CAP_SYS_ADMIN = 12, 13, 21
PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 47, 2
_LIBC: list[ctypes.CDLL] = []


def load_libc() -> ctypes.CDLL:
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def net_admin(argv: Sequence[str], script: bytes, pass_fds: Sequence[int] = ()) -> None:
    """Run a network tool in this namespace, `script` on its stdin, with CAP_NET_ADMIN kept across its exec where this
    process is not root in its user namespace; raises OSError with the tool's own message (its end)."""
    done = subprocess.run(
        list(argv),
        input=script,
        capture_output=True,
        pass_fds=tuple(pass_fds),
        check=False,
        preexec_fn=None if os.geteuid() == 0 else lambda: ambient((CAP_NET_ADMIN,)),  # noqa: PLW1509 - single-threaded
    )
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip() or "failed"
        raise OSError(errno.EIO, f"{os.path.basename(argv[0])} {argv[1]}: {said[-2000:]}")


def ip_batch(script: str) -> None:
    """Run iproute2's `ip -batch -` in this namespace; raises OSError with ip's own message."""
    net_admin([shutil.which("ip") or "/usr/sbin/ip", "-batch", "-"], script.encode())


def nft_file(script: bytes) -> None:
    """Load an nftables file (`nft -f -`, one transaction) into this namespace; raises OSError with nft's message."""
    net_admin([shutil.which("nft") or "/usr/sbin/nft", "-f", "-"], script)


def _node_link_up() -> None:
    """Make `NODE_LINK` with the gateway's address in this namespace, so the simulator's API server can listen there
    before any pod exists, and make the rest of the pod CIDR unreachable here: a pod's address is routed to its veth
    (`ptp`) while it lives, and never to the egress tool."""
    ip_batch(
        f"link add {NODE_LINK} type bridge\naddr add {GATEWAY}/32 dev {NODE_LINK}\nlink set {NODE_LINK} up\n"
        f"route add unreachable {POD_CIDR}\n"
    )


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def ambient(caps: Sequence[int]) -> None:
    """Keep `caps` across execve(2) for a process that is not root in its user namespace (the holder maps the
    caller's own uid, so a plugin it execs would otherwise lose every capability): inheritable, then ambient
    (capabilities(7))."""
    libc = load_libc()
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    for cap in caps:
        data[cap // 32].inheritable |= 1 << (cap % 32)
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    for cap in caps:
        if libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"prctl(PR_CAP_AMBIENT_RAISE, {cap})")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def try_write(path: str, text: str) -> bool:
    try:
        _write(path, text)
    except OSError:
        return False
    return True


def enable_forwarding() -> None:
    """Turn IPv4 forwarding on in this namespace, once, before any pod's network is added (every packet between pods is
    forwarded here, from one pod's veth to the other's): for the links made from now on (`default`: each pod's veth, the
    egress tool's tap), then for all and each link there is already.

    The `ptp` plugin would turn it on itself at each pod's ADD, by writing net.ipv4.ip_forward unless it reads 1
    already (containernetworking/plugins pkg/ip/ipforward_linux.go EnableIP4Forward, echo1). Two pods' ADDs run at
    once here, and the kernel's handler of that file is racy between two writers: it stores the new value, and where
    it cannot take the RTNL lock at once (busy with another namespace's links on a loaded machine) it puts back the
    value it read and restarts, while the other writer may have read the new value meanwhile and finish seeing no
    change (net/ipv4/devinet.c devinet_sysctl_forward). Both then leave `all` at 1 without ever applying it to
    `default` and the links (inet_forward_change): every pod's veth kept forwarding 0, every packet from one pod to
    another was dropped, and a JAX group's processes never reached their coordinator (each attempt hung to its init
    timeout). Written here first, by one writer, the plugin reads 1 and never writes it."""
    _write(f"{FORWARDING}/default/forwarding", "1")
    for link in sorted(os.listdir(FORWARDING)):  # `all` (it sets `default` and every link when it changes), each link
        _write(f"{FORWARDING}/{link}/forwarding", "1")


def lo_up() -> None:
    """Bring this network namespace's loopback interface up (the kernel then gives it 127.0.0.1/8 and ::1)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = _IFREQ.unpack(fcntl.ioctl(s, SIOCGIFFLAGS, _IFREQ.pack(b"lo", 0)))[1]
        if not flags & IFF_UP:
            fcntl.ioctl(s, SIOCSIFFLAGS, _IFREQ.pack(b"lo", flags | IFF_UP))


def subordinate_ids(uid: int) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The caller's subordinate uid and gid ranges, (first, count) each, from /etc/subuid and /etc/subgid (by name or
    number), where newuidmap and newgidmap (shadow's uidmap package) can hand them out; None otherwise."""
    if not (shutil.which("newuidmap") and shutil.which("newgidmap")):
        return None
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = str(uid)
    found = []
    for path in ("/etc/subuid", "/etc/subgid"):
        try:
            lines = open(path, encoding="utf-8").read().splitlines()
        except OSError:
            return None
        ranges = [
            (int(f[1]), int(f[2]))
            for f in (line.split(":") for line in lines)
            if len(f) == 3 and f[0] in (name, str(uid)) and f[1].isdigit() and f[2].isdigit() and int(f[2]) > 0
        ]
        if not ranges:
            return None
        found.append(ranges[0])
    return found[0], found[1]


def _map_by_helper(uid: int, gid: int, ids: tuple[tuple[int, int], tuple[int, int]]) -> Callable[[bool], bool]:
    """Fork, before unshare(2), the child that will write this process's id maps with newuidmap and newgidmap once
    asked (only a process outside a user namespace may): the caller's own ids and its subordinate ranges, each as
    itself. Returns the call that asks it and says whether it worked."""
    ask_r, ask_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ask_w)
        ok = os.read(ask_r, 1) == b"m"
        target = str(os.getppid())
        (us, uc), (gs, gc) = ids
        for tool, own, first, count in (("newuidmap", uid, us, uc), ("newgidmap", gid, gs, gc)):
            argv = [tool, target, str(own), str(own), "1", str(first), str(first), str(count)]
            ok = ok and subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False).returncode == 0
        os._exit(0 if ok else 1)
    os.close(ask_r)

    def ask(go: bool) -> bool:
        os.write(ask_w, b"m" if go else b"x")
        os.close(ask_w)
        _, status = os.waitpid(pid, 0)
        return status == 0

    return ask


def namespace(strategies: Sequence[str]) -> dict[str, Any]:
    """Leave the machine's network namespace by the first strategy that works; the report for the simulator.
    Unprivileged, the user namespace also maps the caller's subordinate ids where it has some (`subordinate_ids`), so
    that pods' containers, nested in it, may run as other ids than the caller's."""
    libc = load_libc()
    uid, gid = os.getuid(), os.getgid()
    ids = subordinate_ids(uid) if os.geteuid() != 0 else None
    attempts: list[dict[str, Any]] = []
    for strategy in strategies:
        helper = _map_by_helper(uid, gid, ids) if strategy == "user" and ids is not None else None
        if libc.unshare(STRATEGIES[strategy]) == 0:
            break
        attempts.append({"strategy": strategy, "step": f"unshare({strategy})", "errno": ctypes.get_errno()})
        if helper is not None:
            helper(False)
    else:
        return {"ok": False, "attempts": attempts}
    step = ""
    mapped = helper(True) if helper is not None else False
    try:
        if strategy == "user" and not mapped:  # only ourselves: nothing is gained outside the namespace
            for step, path, text in (  # noqa: B007 - `step` is read below, when a write fails
                ("write /proc/self/setgroups", "/proc/self/setgroups", "deny"),
                ("write /proc/self/uid_map", "/proc/self/uid_map", f"{uid} {uid} 1"),
                ("write /proc/self/gid_map", "/proc/self/gid_map", f"{gid} {gid} 1"),
            ):
                _write(path, text)
        step = "bring lo up in the pods' network namespace"
        lo_up()
        step = f"make {NODE_LINK} ({GATEWAY}) with ip (Debian package iproute2)"
        _node_link_up()
        step = f"turn IPv4 forwarding on in the pods' network namespace ({FORWARDING}/*/forwarding)"
        enable_forwarding()
    except OSError as e:
        attempts.append({"strategy": strategy, "step": step, "errno": e.errno or errno.EPERM})
        return {"ok": False, "attempts": attempts}
    # A user namespace maps only the caller's gid, the one every pod's process has on the machine: naming more
    # groups is EINVAL there.
    groups = EVERY_GROUP if strategy == "privileged" else f"{gid} {gid}"
    opened = {
        name: try_write(path, text)
        for name, path, text in (
            ("low_ports", LOW_PORTS, "0"),
            ("ping", PING_GROUPS, groups),
        )
    }
    subordinate = [list(r) for r in ids] if mapped and ids is not None else None
    return {"ok": True, "strategy": strategy, **opened, "attempts": attempts, "subordinate": subordinate}
