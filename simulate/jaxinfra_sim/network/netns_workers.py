"""The pods' network's holder, its workers: each pod's own network namespace, wired by the CNI plugins as
containerd's CRI wires a pod sandbox (`pod_network`), a host-network pod's address (`host_address`), the service
CIDR's route (`route`) and NetworkPolicy's rules (`nft`), each done by a worker the holder forks (`netns_holder`'s
server loop), which answers the simulator by itself.

The standard library only, as the holder (whose program imports it; see `netns_holder`).
"""

from __future__ import annotations

import ctypes
import errno
import ipaddress
import json
import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

from jaxinfra_sim.network.netns_setup import (
    CAP_NET_ADMIN,
    CAP_NET_RAW,
    CAP_SYS_ADMIN,
    CLONE_NEWNET,
    EVERY_GROUP,
    GATEWAY,
    LOW_PORTS,
    NODE_LINK,
    PING_GROUPS,
    POD_PREFIX,
    ambient,
    ip_batch,
    lo_up,
    load_libc,
    net_admin,
    try_write,
)

POD_MTU = 65520
"""The pods' MTU: the loopback's, as slirp4netns's, not a cloud's 1460 or 8896: every packet between pods crosses two
veth pairs, a route and nftables here, and JAX's collectives move their bytes in fewer packets."""
CNI_PLUGINS = ("ptp", "static")
CNI_DIRS = ("/usr/lib/cni", "/usr/libexec/cni", "/opt/cni/bin")
"""Where the plugins are looked for (CNI_PATH), in this order: Debian's and Ubuntu's containernetworking-plugins,
Fedora's, and the CNI project's own release archives' (containerd's default bin_dir)."""
CNI_VERSION = "1.0.0"
POD_IFNAME = "eth0"
POD_REPLY_TIMEOUT_S = 30.0
"""How long a pod's network may take to set up (the plugins' exec and netlink work; seconds on a loaded machine)."""


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


def cni_dir(folders: Sequence[str] = CNI_DIRS) -> str:
    """The first of `folders` that holds every plugin the pods' namespaces need (the first, where none does)."""
    return next(
        (d for d in folders if all(os.access(os.path.join(d, name), os.X_OK) for name in CNI_PLUGINS)), folders[0]
    )


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


def host_address(reply: socket.socket, verb: str, ip: str) -> int:
    """Fork the worker that adds (`verb` "add") or removes ("del") a host-network pod's address on `NODE_LINK`: such
    a pod stays in this namespace, its node's, and listens on its own address, which the other pods reach through
    their gateway. Its pid; it answers on `reply` ("ok", or the error as JSON)."""

    def work() -> None:
        ip_batch(f"address {'replace' if verb == 'add' else 'del'} {ip}/32 dev {NODE_LINK}\n")
        reply.send(b"ok")

    return _worker(reply, work)


def route(reply: socket.socket, cidr: str) -> int:
    """Fork the worker that routes `cidr` (the service CIDR) to `NODE_LINK`: a packet for a cluster IP that kube-proxy's
    rules do not DNAT is forwarded there, through their forward hook, as a node forwards it to its default gateway,
    and never to the egress tool. Its pid; it answers on `reply` ("ok", or the error as JSON)."""

    def work() -> None:
        network = ipaddress.IPv4Network(cidr)  # only a CIDR reaches ip's command line
        ip_batch(f"route replace {network} dev {NODE_LINK}\n")
        reply.send(b"ok")

    return _worker(reply, work)


def nft(reply: socket.socket, ruleset: int) -> int:
    """Fork the worker that loads the nftables file open at `ruleset` into this namespace (`nft -f`, one transaction:
    NetworkPolicy's rules, `netpol`). Its pid; it answers on `reply` ("ok", or nft's error as JSON)."""

    def work() -> None:
        net_admin([shutil.which("nft") or "/usr/sbin/nft", "-f", f"/proc/self/fd/{ruleset}"], b"", (ruleset,))
        reply.send(b"ok")

    return _worker(reply, work)


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
    folder = cni_dir()
    env = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": container,
        "CNI_NETNS": netns,
        "CNI_IFNAME": ifname,
        "CNI_PATH": folder,
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
    }
    done = subprocess.run(
        [os.path.join(folder, conf["type"])],
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


def pod_network(reply: socket.socket, ip: str, container: str, strategy: str, gid: int) -> int:
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
        try_write(LOW_PORTS, "0")
        try_write(PING_GROUPS, EVERY_GROUP if strategy == "privileged" else f"{gid} {gid}")
        if libc.setns(here, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns(the simulation's network namespace)")
        if os.geteuid() != 0:
            ambient((CAP_NET_ADMIN, CAP_NET_RAW, CAP_SYS_ADMIN))
        if routed(ip):
            try:
                ip_batch(f"route del {ip}/32\n")
            except OSError:
                if routed(ip):  # else the kernel removed it meanwhile, with the old namespace's veth
                    raise
        result = _cni("ADD", cni_conf(ip), container, f"/proc/self/fd/{pod}", POD_IFNAME, (pod,))
        socket.send_fds(reply, [b"ok " + result.encode()[:60000]], [pod])

    return _worker(reply, work)
