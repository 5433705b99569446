"""The pods' network's holder: the process that keeps one simulation's network namespace (`netns`).

A fresh interpreter runs this file (`python -I -S`: the standard library only, no descriptor of the
simulator's, never a fork of a process with JAX's threads). It leaves the machine's network
namespace (as root unshare(CLONE_NEWNET); otherwise unshare(CLONE_NEWUSER | CLONE_NEWNET) mapping
only the caller's ids), brings `lo` up, turns IPv4 forwarding on (`enable_forwarding`), opens the low ports,
attaches an egress tool where one is installed, reports to the simulator, and serves it (sockets made in the
namespace) until it goes.
`netns` holds the simulator's side; the facts and sources are in its docstring.
"""

from __future__ import annotations

import collections
import ctypes
import errno
import fcntl
import ipaddress
import json
import os
import pwd
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
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
POD_MTU = 65520
"""The pods' MTU: the loopback's, as slirp4netns's, not a cloud's 1460 or 8896: every packet between pods crosses two
veth pairs, a route and nftables here, and JAX's collectives move their bytes in fewer packets."""
CNI_DIR = "/usr/lib/cni"
"""Where Debian's containernetworking-plugins installs the plugins (CNI_PATH)."""
CNI_PLUGINS = ("ptp", "static")
CNI_VERSION = "1.0.0"
POD_IFNAME = "eth0"
CAP_NET_ADMIN, CAP_NET_RAW, CAP_SYS_ADMIN = 12, 13, 21
PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 47, 2
MAX_WORKERS = 2 * (os.cpu_count() or 1) + 2
"""Workers the holder runs at once: enough to keep the cores busy with the plugins' exec and netlink work, few enough
that 256 pods' set-up never holds 256 plugin processes in memory at the same time."""
POD_REPLY_TIMEOUT_S = 30.0
"""How long a pod's network may take to set up (the plugins' exec and netlink work; seconds on a loaded machine)."""

EGRESS_TOOLS = ("pasta", "slirp4netns")
"""The user-mode networking tools that give the namespace egress, in order of preference."""
_LIBC: list[ctypes.CDLL] = []


def load_libc() -> ctypes.CDLL:
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


# --- egress ---------------------------------------------------------------------------------------


def egress_command(tool: str, path: str, holder: int, user_namespace: bool) -> list[str]:
    """The command line that attaches `tool` (at `path`) to the network namespace of process `holder`, and to
    its user namespace when it has one of its own (`user_namespace`). Nothing is forwarded from the machine
    to the pods or back, and the machine's own loopback is out of the pods' reach, as on a node.

    Run by the holder's child with PR_SET_PDEATHSIG, in the foreground: it ends with the holder, which also
    kills it on every way out but SIGKILL (the holder then watches the simulator through a pidfd only, since
    pasta started as root switches to nobody, and a change of user clears its own death signal)."""
    net, user = f"/proc/{holder}/ns/net", f"/proc/{holder}/ns/user"
    if tool == "pasta":
        # --foreground: stay the holder's child (dies with it); --config-net: addresses and routes copied from
        # the machine; -t/-u none: no automatic forwarding of the pods' bound ports to the machine; -T/-U none:
        # nor of the machine's to the pods' loopback; --no-map-gw: the gateway address is not the machine.
        return [
            path,
            "--foreground",
            "--quiet",
            "--config-net",
            "--no-map-gw",
            "-t",
            "none",
            "-u",
            "none",
            "-T",
            "none",
            "-U",
            "none",
            "--netns",
            net,
            *(["--userns", user] if user_namespace else []),
        ]
    if tool == "slirp4netns":
        return [
            path,
            "--configure",
            "--mtu=65520",
            "--disable-host-loopback",
            "--netns-type=path",
            *([f"--userns-path={user}"] if user_namespace else []),
            net,
            "tap0",
        ]
    raise ValueError(f"unknown egress tool {tool!r} (known: {', '.join(EGRESS_TOOLS)})")


def has_default_route(route: str = "/proc/net/route", route6: str = "/proc/net/ipv6_route") -> bool:
    """Whether this process's network namespace has a default route (IPv4 or IPv6; not the kernel's own IPv6
    'unreachable' entry): what both egress tools add last, once the namespace is configured."""
    try:
        with open(route) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if len(fields) > 7 and fields[1] == "00000000" and fields[7] == "00000000" and int(fields[3], 16) & 0x1:
                    return True
        with open(route6) as f:
            for line in f:
                fields = line.split()
                flags = int(fields[8], 16) if len(fields) > 9 else 0
                if fields and set(fields[0]) == {"0"} and fields[1] == "00" and flags & 0x1 and not flags & 0x200:
                    return True
    except (OSError, ValueError):
        pass
    return False


# --- the pods' own namespaces ----------------------------------------------------------------------


def cni_conf(ip: str) -> dict[str, Any]:
    """The network configuration a pod's `eth0` is added with: the `ptp` plugin (a veth pair, the pod's address
    routed to its host side, which holds the gateway's: Calico's way, a route per pod and no shared broadcast domain,
    where a bridge of 256 pods flooded every ARP request to every pod and their all-to-all collectives' connections
    failed with EHOSTUNREACH) with `static` IPAM giving the pod the address the simulator chose for it (the DNS names
    in every pod's hosts file are written before the pods start)."""
    return {
        "cniVersion": CNI_VERSION,
        "name": "jaxinfra-sim",
        "type": "ptp",
        "ipMasq": False,
        "mtu": POD_MTU,
        "ipam": {
            "type": "static",
            "addresses": [{"address": f"{ip}/{POD_PREFIX}", "gateway": GATEWAY}],
            "routes": [{"dst": "0.0.0.0/0", "gw": GATEWAY}],
        },
    }


def missing_plugins(folder: str = CNI_DIR) -> list[str]:
    """The CNI plugins the pods' namespaces need that `folder` lacks."""
    return [name for name in CNI_PLUGINS if not os.access(os.path.join(folder, name), os.X_OK)]


def _ip_batch(script: str) -> None:
    """Run iproute2's `ip -batch -` in this namespace (with CAP_NET_ADMIN kept across its exec where this process is
    not root in its user namespace); raises OSError with ip's own message."""
    done = subprocess.run(
        [shutil.which("ip") or "/usr/sbin/ip", "-batch", "-"],
        input=script.encode(),
        capture_output=True,
        check=False,
        preexec_fn=None if os.geteuid() == 0 else lambda: _ambient((CAP_NET_ADMIN,)),  # noqa: PLW1509 - single-threaded
    )
    if done.returncode != 0:
        raise OSError(errno.EIO, done.stderr.decode(errors="replace").strip() or "ip -batch failed")


def failure(e: BaseException) -> bytes:
    """A request's failed answer: the errno and what was said, as JSON (`netns._answer` raises it as NetworkError)."""
    said = e.strerror if isinstance(e, OSError) and e.strerror else f"{type(e).__name__}: {e}"
    return json.dumps({"errno": getattr(e, "errno", None) or errno.EIO, "error": said}).encode()


def _worker(reply: socket.socket, work: Callable[[], None]) -> int:
    """Fork a worker that does `work`, which answers on `reply` when it succeeds; a failure is answered by
    `failure`. The worker's pid (an OSError where this holder cannot fork it: its caller answers)."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        work()
        code = 0
    except BaseException as e:  # noqa: BLE001 - the simulator must hear of it
        try:
            reply.send(failure(e))
        except OSError:
            pass
    os._exit(code)


def _host_address(reply: socket.socket, verb: str, ip: str) -> int:
    """Fork the worker that adds (`verb` "add") or removes ("del") a host-network pod's address on `NODE_LINK`: such
    a pod stays in this namespace, its node's, and listens on its own address, which the other pods reach through
    their gateway. Its pid; it answers on `reply` ("ok", or the error as JSON)."""

    def work() -> None:
        _ip_batch(f"address {'replace' if verb == 'add' else 'del'} {ip}/32 dev {NODE_LINK}\n")
        reply.send(b"ok")

    return _worker(reply, work)


def _route(reply: socket.socket, cidr: str) -> int:
    """Fork the worker that routes `cidr` (the service CIDR) to `NODE_LINK`: a packet for a cluster IP that kube-proxy's
    rules do not DNAT is forwarded there, through their forward hook, as a node forwards it to its default gateway,
    and never to the egress tool. Its pid; it answers on `reply` ("ok", or the error as JSON)."""

    def work() -> None:
        network = ipaddress.IPv4Network(cidr)  # only a CIDR reaches ip's command line
        _ip_batch(f"route replace {network} dev {NODE_LINK}\n")
        reply.send(b"ok")

    return _worker(reply, work)


def _nft(reply: socket.socket, ruleset: int) -> int:
    """Fork the worker that loads the nftables file open at `ruleset` into this namespace (`nft -f`, one transaction:
    NetworkPolicy's rules, `netpol`). Its pid; it answers on `reply` ("ok", or nft's error as JSON)."""

    def work() -> None:
        done = subprocess.run(
            [shutil.which("nft") or "/usr/sbin/nft", "-f", f"/proc/self/fd/{ruleset}"],
            capture_output=True,
            pass_fds=(ruleset,),
            check=False,
            preexec_fn=None if os.geteuid() == 0 else lambda: _ambient((CAP_NET_ADMIN,)),  # noqa: PLW1509
        )
        if done.returncode != 0:
            raise OSError(errno.EIO, "nft -f: " + (done.stderr.decode(errors="replace").strip() or "failed")[-2000:])
        reply.send(b"ok")

    return _worker(reply, work)


def _node_link_up() -> None:
    """Make `NODE_LINK` with the gateway's address in this namespace, so the simulator's API server can listen there
    before any pod exists, and make the rest of the pod CIDR unreachable here: a pod's address is routed to its veth
    (`ptp`) while it lives, and never to the egress tool."""
    _ip_batch(
        f"link add {NODE_LINK} type bridge\naddr add {GATEWAY}/32 dev {NODE_LINK}\nlink set {NODE_LINK} up\n"
        f"route add unreachable {POD_CIDR}\n"
    )


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _ambient(caps: Sequence[int]) -> None:
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


def routed(ip: str, table: str = "/proc/net/route") -> bool:
    """Whether this namespace has a route to exactly `ip`/32 (the kernel's table: destinations in hex, host order)."""
    want = f"{int.from_bytes(socket.inet_aton(ip), 'little'):08X}"
    with open(table) as f:
        return any(
            len(fields) > 7 and fields[1] == want and fields[7] == "FFFFFFFF"
            for fields in (line.split() for line in f.readlines()[1:])
        )


def _cni(command: str, conf: dict[str, Any], container: str, netns: str, ifname: str, fds: Sequence[int]) -> str:
    """Run the plugin `conf` names with the CNI protocol (SPEC.md, Execution Protocol): CNI_* in the environment, the
    configuration on stdin, the result on stdout; raises OSError with the plugin's own error message."""
    env = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": container,
        "CNI_NETNS": netns,
        "CNI_IFNAME": ifname,
        "CNI_PATH": CNI_DIR,
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
    }
    done = subprocess.run(
        [os.path.join(CNI_DIR, conf["type"])],
        input=json.dumps(conf).encode(),
        capture_output=True,
        env=env,
        pass_fds=tuple(fds),
        check=False,
    )
    if done.returncode != 0:
        try:
            said = json.loads(done.stdout or b"{}")
            message = f"{said.get('msg', '')} {said.get('details', '')}".strip()
        except ValueError:
            message = ""
        message = message or done.stderr.decode(errors="replace").strip() or f"exit status {done.returncode}"
        raise OSError(errno.EIO, f"CNI {command} {conf['type']}: {message}")
    return done.stdout.decode(errors="replace")


def _pod_network(reply: socket.socket, ip: str, container: str, strategy: str, gid: int) -> int:
    """Fork the worker that makes one pod's network namespace, as containerd's CRI makes a sandbox's (containerd
    @ dea7da592f5d1 internal/cri/server/sandbox_run.go setupPodNetwork, through go-cni: the loopback network, then
    the pod network, each an ADD): unshare(CLONE_NEWNET), `lo` up and the same sysctls as this namespace (containerd
    sets both in every pod's), back into this namespace (the plugins' "host" side: the pod's route and veth end are
    here, never on the machine), the `ptp` plugin's ADD, and the namespace's descriptor sent on `reply` (SCM_RIGHTS).
    Its pid; it answers the simulator by itself. A route to the address left by a pod of an earlier attempt, whose
    namespace the kernel has not finished removing (that is asynchronous), is deleted first: `ptp` would refuse it.

    go-cni's loopback network (opts.go WithLoNetwork) runs the `loopback` plugin, whose whole ADD is bringing `lo`
    up (containernetworking/plugins plugins/main/loopback/loopback.go cmdAdd); here that is one ioctl in the worker
    instead of an exec, about a sixth of a pod's set-up."""

    def work() -> None:
        libc = load_libc()
        here = os.open("/proc/self/ns/net", os.O_RDONLY)
        if libc.unshare(CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) for the pod")
        pod = os.open("/proc/self/ns/net", os.O_RDONLY)
        lo_up()
        _try_write(LOW_PORTS, "0")
        _try_write(PING_GROUPS, EVERY_GROUP if strategy == "privileged" else f"{gid} {gid}")
        if libc.setns(here, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns(the simulation's network namespace)")
        if os.geteuid() != 0:
            _ambient((CAP_NET_ADMIN, CAP_NET_RAW, CAP_SYS_ADMIN))
        if routed(ip):
            try:
                _ip_batch(f"route del {ip}/32\n")
            except OSError:
                if routed(ip):  # else the kernel removed it meanwhile, with the old namespace's veth
                    raise
        result = _cni("ADD", cni_conf(ip), container, f"/proc/self/fd/{pod}", POD_IFNAME, (pod,))
        socket.send_fds(reply, [b"ok " + result.encode()[:60000]], [pod])

    return _worker(reply, work)


# --- the holder -------------------------------------------------------------------------------------


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _try_write(path: str, text: str) -> bool:
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


def _namespace(strategies: Sequence[str]) -> dict[str, Any]:
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
        name: _try_write(path, text)
        for name, path, text in (
            ("low_ports", LOW_PORTS, "0"),
            ("ping", PING_GROUPS, groups),
        )
    }
    subordinate = [list(r) for r in ids] if mapped and ids is not None else None
    return {"ok": True, "strategy": strategy, **opened, "attempts": attempts, "subordinate": subordinate}


class _Egress:
    """The holder's child that becomes the egress tool: forked in the machine's namespaces, told to go on once
    the holder has its own, dying with the holder."""

    def __init__(self, tool: str, path: str, keep_closed: Sequence[int]):
        self.tool, self.path = tool, path
        go_r, self._go = os.pipe()
        self.errors, err_w = os.pipe()
        holder = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:  # the child: wait for the holder's word (its strategy), then become the tool
            try:
                for fd in (self._go, self.errors, *keep_closed):
                    os.close(fd)
                word = os.read(go_r, 64).decode()
                if word in STRATEGIES:
                    load_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
                    if os.getppid() == holder:
                        null = os.open(os.devnull, os.O_RDWR)
                        os.dup2(null, 0)
                        os.dup2(null, 1)
                        os.dup2(err_w, 2)
                        os.execv(path, egress_command(tool, path, holder, word == "user"))
            except BaseException:  # noqa: BLE001 - the child never returns into the holder
                pass
            os._exit(127)
        os.close(go_r)
        os.close(err_w)
        self.pidfd = os.pidfd_open(self.pid)
        self.output = b""

    def start(self, strategy: str, timeout: float) -> tuple[str | None, str]:
        """Let the tool run, and wait until the namespace has a default route: (the tool or None, the note)."""
        os.write(self._go, strategy.encode())
        os.close(self._go)
        os.set_blocking(self.errors, False)
        deadline = time.monotonic() + timeout
        while True:
            self.drain()
            if has_default_route():
                return self.tool, f"egress on: {self.tool} ({self.path})"
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.drain()
                self.pid = 0
                said = self.output.decode(errors="replace").strip().splitlines()
                how = (
                    f"killed by signal {os.WTERMSIG(status)}"
                    if os.WIFSIGNALED(status)
                    else f"exit status {os.WEXITSTATUS(status)}"
                )
                return None, f"egress off: {self.tool} ended ({how})" + (f": {said[-1]}" if said else "")
            if time.monotonic() > deadline:
                self.stop()
                return None, f"egress off: {self.tool} did not configure the pods' network within {timeout:g} s"
            time.sleep(0.01)

    def drain(self) -> bool:
        """Read what the tool wrote to its standard error (keeping the end of it): its pipe must never fill.
        False once that pipe has ended."""
        try:
            while chunk := os.read(self.errors, 65536):
                self.output = (self.output + chunk)[-4096:]
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        return False

    def reap(self) -> None:
        if self.pid and os.waitpid(self.pid, os.WNOHANG)[0]:
            self.pid = 0

    def stop(self) -> None:
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)  # not yet reaped: never a stranger's pid
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            self.pid = 0


def _serve(control: socket.socket, parent: int, egress: _Egress | None, strategy: str) -> None:
    """Answer the simulator's requests until it goes (its pidfd), closes the socket, or says quit: a socket of this
    namespace, or work for a worker (a pod's own namespace, a host-network pod's address, NetworkPolicy's rules),
    each answering on the socket that came with its request; at most `MAX_WORKERS` at once, the rest queued in order."""
    watched: list[int] = [control.fileno(), parent]
    if egress is not None and egress.pid:
        watched += [egress.pidfd, egress.errors]
    workers: dict[int, int] = {}  # pidfd -> pid
    queued: collections.deque[tuple[list[bytes], list[int]]] = collections.deque()
    gid = os.getgid()

    def start(words: list[bytes], received: list[int]) -> None:
        pid = None
        with socket.socket(fileno=received[0]) as reply:
            try:
                if words[0] == b"pod":
                    pid = _pod_network(reply, words[1].decode(), words[2].decode(), strategy, gid)
                elif words[0] == b"addr":
                    pid = _host_address(reply, words[1].decode(), words[2].decode())
                elif words[0] == b"route":
                    pid = _route(reply, words[1].decode())
                else:
                    pid = _nft(reply, received[1])
            except OSError as e:  # no worker (a full pids group: EAGAIN): the request's answer, not the holder's end
                reply.send(failure(e))
        for fd in received[1:]:
            os.close(fd)
        if pid is not None:
            workers[os.pidfd_open(pid)] = pid

    while True:
        while queued and len(workers) < MAX_WORKERS:
            start(*queued.popleft())
        poller = select.poll()  # not select(2): no FD_SETSIZE bound (the package's `fds` is not importable here)
        for fd in [*watched, *workers]:
            poller.register(fd, select.POLLIN)
        ready = [fd for fd, _ in poller.poll()]
        if parent in ready:
            return
        for pidfd in [fd for fd in ready if fd in workers]:  # reaped as they end: never another's pid
            os.waitpid(workers.pop(pidfd), 0)
            os.close(pidfd)
        if egress is not None and egress.pidfd in ready:
            egress.reap()
            watched.remove(egress.pidfd)
        if egress is not None and egress.errors in ready and not egress.drain():
            watched.remove(egress.errors)
        if control.fileno() not in ready:
            continue
        try:
            msg, received, _, _ = socket.recv_fds(control, 512, 2, socket.MSG_CMSG_CLOEXEC)
        except OSError:
            return
        words = msg.split()
        if not words or words[0] == b"quit":
            return
        if (
            words[0] == b"pod"
            and len(words) == 3
            and len(received) == 1
            or words[0] == b"addr"
            and len(words) == 3
            and words[1] in (b"add", b"del")
            and len(received) == 1
            or words[0] == b"nft"
            and len(words) == 1
            and len(received) == 2
            or words[0] == b"route"
            and len(words) == 2
            and len(received) == 1
        ):
            queued.append((words, received))
            continue
        for fd in received:
            os.close(fd)
        if words[0] == b"socket" and len(words) == 5:
            seq = words[1]
            try:
                made = socket.socket(int(words[2]), int(words[3]), int(words[4]))
            except (OSError, ValueError) as e:
                refused = b"err %s %d" % (seq, getattr(e, "errno", None) or errno.EINVAL)
                try:
                    control.send(refused)
                except OSError:
                    return
                continue
            with made:
                try:
                    socket.send_fds(control, [b"ok " + seq], [made.fileno()])
                except OSError:
                    return


def _holder(argv: Sequence[str]) -> None:
    """The holder's life: argv is control fd, parent pid, PR_SET_PDEATHSIG (1/0), strategies, the egress note,
    the egress timeout, and the egress tool and its path if any."""
    control_fd, parent_pid, deathsig, strategies, note, egress_timeout = argv[:6]
    tool_path = argv[6:8]
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    for signum in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)  # the simulator's to handle: it closes us
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # through the `finally` that ends the egress tool
    if deathsig == "1" and len(tool_path) < 2:
        # With an egress tool the pidfd below is the only watch: the holder then ends the tool on its way out
        # (pasta, dropping root to nobody, loses its own PR_SET_PDEATHSIG; see egress_command).
        load_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    try:
        parent = os.pidfd_open(int(parent_pid))
    except OSError:
        return
    if os.getppid() != int(parent_pid):  # the simulator died before the line above
        return
    control = socket.socket(fileno=int(control_fd))
    egress = _Egress(tool_path[0], tool_path[1], (control.fileno(), parent)) if len(tool_path) == 2 else None
    try:
        try:
            report = _namespace(strategies.split(","))
        except BaseException as e:  # noqa: BLE001 - the simulator must hear of it
            report = {
                "ok": False,
                "attempts": [
                    {"strategy": strategies.split(",")[-1], "step": f"{type(e).__name__}: {e}", "errno": errno.EINVAL}
                ],
            }
        if report["ok"]:
            report["egress"], report["note"] = None, note
            if egress is not None:
                report["egress"], report["note"] = egress.start(report["strategy"], float(egress_timeout))
        control.send(json.dumps(report).encode())
        if report["ok"]:
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 2)  # nothing more to say but through the control socket
            os.close(null)
            _serve(control, parent, egress if report["egress"] else None, report["strategy"])
    finally:
        if egress is not None:
            egress.stop()


if __name__ == "__main__" and sys.argv[1:2] == ["--holder"]:
    try:
        _holder(sys.argv[2:])
    finally:
        os._exit(0)
