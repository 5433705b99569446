"""The pods' network: a network namespace per simulation (the node's, never this machine's), and a
network namespace per pod wired to it by the CNI plugins, as containerd's CRI wires a pod sandbox
(`PodNetwork`; `netns_workers.pod_network` has the steps and the sources).

Each pod gets `eth0` with its own address from the pod CIDR (10.244.0.0/16), routed through a veth to
the simulation's namespace (the `ptp` plugin), whose gateway 10.244.0.1 is where the simulator's API
server listens, and its own `lo`: two pods bind the same port and reach each other by their addresses,
as on a cluster; all containers of a pod share its namespace. A host-network pod stays in the
simulation's namespace, with its address there (`HostAddress`). The simulation's namespace is what the
rest of this docstring describes.

Without it the pods share the machine's: a pod that binds 0.0.0.0:18080 listens on the machine's
real interfaces, and a machine's process already on 0.0.0.0:8482 takes a job's port. Here every
pod of one simulation (and the simulator's API server, so that pods reach it) joins one namespace
that only has `lo` (up, with 127.0.0.0/8 and ::1, so each pod's 127.<seed>.x.y address works as
before), in which ports below 1024 are open to everyone (net.ipv4.ip_unprivileged_port_start = 0) and
so are ICMP echo sockets (net.ipv4.ping_group_range = 0 2147483647), as containerd sets both in
every pod's network namespace (containerd @ 74b0fbfb internal/cri/config/config_unix.go
DefaultRuntimeConfig enables both; @ 56e5564d internal/cri/server/podsandbox/sandbox_run_linux.go
sandboxContainerSpec writes them): a container's root, whose capabilities are only its own user
namespace's, binds port 80 as root does on a node, and `ping` works without CAP_NET_RAW (the
Kubernetes docs' pod-to-pod Job pings its peers).

A *holder* process keeps the namespace. It is a fresh interpreter (`python -I -S` running
`netns_holder.py`, which imports its modules beside it, `netns_setup`, `netns_workers` and
`netns_egress`: only the standard library, no descriptor of the simulator's, never a fork of a
process with JAX's threads), made by `Network.create`:
- as root (CAP_SYS_ADMIN) it calls unshare(CLONE_NEWNET): `privileged`;
- otherwise unshare(CLONE_NEWUSER | CLONE_NEWNET), mapping only the caller's own uid and gid to
  themselves (setgroups deny): `user`. The caller's euid owns that user namespace.
It brings `lo` up (SIOCGIFFLAGS / SIOCSIFFLAGS, no `ip` binary), opens the low ports, reports, and
serves the simulator until the simulator goes: a pidfd of the simulator's process, the end of its
control socket, and PR_SET_PDEATHSIG (only when made from the main thread, since that signal
follows the forking *thread*, and without an egress tool, which the holder must end on its way
out), whichever comes first. It is in a session of its own: a Ctrl-C to the simulator's process
group is the simulator's to handle. Make the network in the process that runs the simulation:
forks inherit the object, but only `join` works there (`close` in a fork touches nothing shared).

Ways in, in a process of the simulator's:
- `join()`, in a freshly forked single-threaded child (a pod's process before it makes its own
  user, mount, UTS and PID namespaces; the API server's process): setns(2) into the holder's
  network namespace, after its user namespace for `user` (setns into a user namespace needs a
  single thread; its owner gets every capability in it, and a process in it may still create a
  nested user namespace, mapping one id: "0 <uid> 1" for a root container, "1000 <uid> 1" ...).
  The namespaces' descriptors are opened once, here, while the holder lives, and inherited by the
  fork: join() is two syscalls.
- `socket()`: a socket *of the namespace* made by the holder and passed back (SCM_RIGHTS) to a
  process that stays in the machine's namespace, multithreaded and unprivileged as it may be: a
  socket belongs to the namespace it was made in. `connect_check` (is rank 0 listening yet?),
  `connect`, and a listener bound before a fork are built on it.

Egress: GKE lets a pod reach the internet by default. Where `pasta` (Debian package passt) or
`slirp4netns` is installed, the holder attaches it to its namespace as rootless Podman does (a tap
device, the machine's addresses and routes copied by pasta, or 10.0.2.100/24 by slirp4netns; no
port forwarded either way, no path to the machine's own loopback). It is started by a child the
holder forks *before* it leaves the machine's namespaces (the tool needs the machine's network
for itself), which dies with the holder (PR_SET_PDEATHSIG; --foreground keeps pasta that child).
It counts as up once the namespace has a default route. Otherwise `egress` is None and
`egress_note` says why. Before the tool starts, the holder loads the boundary's table
(`netns_boundary`): no packet of the namespace or of a pod reaches an address of the machine
through it; where that table cannot be loaded, egress stays off.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from jaxinfra_sim.core import fds
from jaxinfra_sim.core.errors import InvalidArgument, NetworkError
from jaxinfra_sim.network.netns_egress import (
    EGRESS_TOOLS,
    egress_command,  # noqa: F401 - the holder's own, offered here with the rest of the pods' network
    has_default_route,  # noqa: F401 - likewise
)
from jaxinfra_sim.network.netns_setup import (
    CLONE_NEWNET,
    CLONE_NEWUSER,
    GATEWAY,  # noqa: F401
    LOW_PORTS,  # noqa: F401
    PING_GROUPS,  # noqa: F401
    POD_CIDR,  # noqa: F401
    STRATEGIES,
    load_libc,
)
from jaxinfra_sim.network.netns_workers import POD_REPLY_TIMEOUT_S

HOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netns_holder.py")
"""The holder's program, run by path: a fresh interpreter with the standard library only."""
NO_EGRESS = "egress off: neither pasta nor slirp4netns is installed (Debian packages passt, slirp4netns)"
EGRESS_OFF = "egress off (--no-egress): pods reach only the simulation's pods, Services and node"
EGRESS_TIMEOUT_S = 5.0
"""How long the holder waits for an egress tool to configure the namespace before going on without."""
START_TIMEOUT_S = 10.0
"""How long `create` waits for the holder's report (an interpreter's start, plus the egress tool's)."""
REPLY_TIMEOUT_S = 2.0
"""How long a request to the holder may take (it answers in microseconds; this is for a stuck machine)."""
Socket = socket.socket
"""The socket class, by a name `Network.socket` (a method) does not hide inside the class."""


def find_egress(which: Callable[[str], str | None] = shutil.which) -> tuple[str | None, str | None, str]:
    """(tool, its path, the note) of the egress tool installed here: pasta, else slirp4netns, else none."""
    for tool in EGRESS_TOOLS:
        path = which(tool)
        if path:
            return tool, path, f"egress on: {tool} ({path})"
    return None, None, NO_EGRESS


class Network:
    """One simulation's pod network: its holder, the descriptors of its namespaces, the control socket.

    Make it with `create`; use it as a context manager (or call `close`). `strategy` is the way it was
    made ("privileged" or "user"); `egress` the tool that gives it egress (None: none, `egress_note` says
    why); `low_ports` whether ports below 1024 are open to every process in it, `ping` whether ICMP echo
    sockets are."""

    def __init__(self, proc: subprocess.Popen, control: socket.socket, report: dict[str, Any]):
        self._proc, self._control = proc, control
        self.holder: int = proc.pid
        self.strategy: str = report["strategy"]
        self.egress: str | None = report.get("egress")
        self.egress_note: str = report.get("note", NO_EGRESS)
        self.low_ports: bool = bool(report.get("low_ports"))
        self.ping: bool = bool(report.get("ping"))
        found = report.get("subordinate")
        # The caller's subordinate (uid, gid) ranges, (first, count) each, that its user namespace maps as themselves
        # (`netns_setup.subordinate_ids`); None: only the caller's own ids.
        self.subordinate: tuple[tuple[int, int], tuple[int, int]] | None = (
            ((found[0][0], found[0][1]), (found[1][0], found[1][1])) if found else None
        )
        self._owner = os.getpid()
        self._lock = threading.Lock()
        self._seq = 0
        self._closed = False
        self._net_fd = self._user_fd = -1
        try:  # while the holder lives: the descriptors keep the namespaces, whatever becomes of it
            self._net_fd = os.open(f"/proc/{self.holder}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            if self.strategy == "user":
                self._user_fd = os.open(f"/proc/{self.holder}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
            if os.fstat(self._net_fd).st_ino == os.stat("/proc/self/ns/net").st_ino:
                raise NetworkError("open the holder's network namespace (it is the machine's)", errno.ESRCH)
        except BaseException:
            self._forget()
            raise

    @classmethod
    def create(
        cls,
        strategy: str | None = None,
        *,
        egress: bool = True,
        which: Callable[[str], str | None] = shutil.which,
        egress_timeout: float = EGRESS_TIMEOUT_S,
        timeout: float = START_TIMEOUT_S,
    ) -> Network:
        """The pods' network namespace, and its holder; `strategy` as `sandbox.preflight` names them (None: the
        first that works here). With `egress`, pasta or slirp4netns (looked up with `which`) is attached where
        installed. Raises `sandbox.Unavailable` (cause and fix, exit status 3) where the kernel refuses."""
        strategies = [strategy] if strategy else [s for s in STRATEGIES if s == "user" or os.geteuid() == 0]
        for name in strategies:
            if name not in STRATEGIES:
                raise InvalidArgument(f"unknown strategy {name!r} (known: {', '.join(STRATEGIES)})")
        launch = _PRESTARTED.pop(None, None) if strategy is None and egress and which is shutil.which else None
        if launch is None:
            launch = _Launch.spawn(strategies, egress, which, egress_timeout)
        return launch.finish(cls, timeout)

    # -- in a forked child ---------------------------------------------------------------------------

    def join(self, pod: PodNetwork | None = None) -> None:
        """Enter the simulation's network namespace, or `pod`'s own: call it in a freshly forked, single-threaded
        process (a pod's, before its sandbox; the API server's). Two setns(2) calls; then this process's copies of
        the network's descriptors are closed (it is in the namespace now) and `close` here does nothing. Raises
        NetworkError."""
        libc = load_libc()
        if self._user_fd >= 0 and libc.setns(self._user_fd, CLONE_NEWUSER) != 0:
            raise NetworkError("setns(user namespace of the pods' network)", ctypes.get_errno())
        target = self._net_fd if pod is None else pod.fd()
        if libc.setns(target, CLONE_NEWNET) != 0:
            what = "the pods' network namespace" if pod is None else f"pod {pod.container}'s network namespace"
            raise NetworkError(f"setns({what})", ctypes.get_errno())
        self._forget()
        if pod is not None:
            pod.close()

    def pod(self, ip: str, container: str) -> PodNetwork:
        """Ask the holder for a pod's own network namespace (`netns_workers.pod_network`): `eth0` with `ip` routed
        from the simulation's namespace, `lo` up. Returns at once: many pods' namespaces are made at the same time, and
        `PodNetwork.fd` waits for this one. `container` names it to the plugins (CNI_CONTAINERID: letters, digits,
        '-', '.', '_'). Raises NetworkError once the holder is gone."""
        if self._closed or os.getpid() != self._owner:
            raise NetworkError("the pods' network is closed here (a forked child joins it instead)", errno.EBADF)
        ipaddress.IPv4Address(ip)  # only an address ever reaches the holder's request
        if not container or any(not (ch.isascii() and (ch.isalnum() or ch in "-._")) for ch in container):
            raise InvalidArgument(f"pod sandbox id {container!r}: letters, digits, '-', '.' and '_' only")
        return PodNetwork(ip, container, self._ask(f"pod {ip} {container}"))

    def host_address(self, ip: str) -> HostAddress:
        """Give a host-network pod its address in the simulation's namespace (where the other pods reach it
        through their gateway); waits for it. `HostAddress.close` takes it away again. Raises NetworkError."""
        ipaddress.IPv4Address(ip)
        reply = self._ask(f"addr add {ip}")
        with reply:
            _answer(reply, f"host-network pod address {ip}", POD_REPLY_TIMEOUT_S)
        return HostAddress(self, ip)

    def route_services(self, cidr: str) -> None:
        """Route the service CIDR to the node link in the simulation's namespace (`netns_workers.route`, for
        `kubeproxy`); waits for it. Raises NetworkError."""
        ipaddress.IPv4Network(cidr)
        with self._ask(f"route {cidr}") as reply:
            _answer(reply, f"the route for the service CIDR {cidr}", POD_REPLY_TIMEOUT_S)

    def load_rules(self, ruleset: str) -> None:
        """Load an nftables file (`netpol`'s table) into the simulation's namespace, replacing what it replaces, in one
        transaction; waits for it. Raises NetworkError with nft's own message."""
        fd = os.memfd_create("jaxinfra-nft", os.MFD_CLOEXEC)
        try:
            os.write(fd, ruleset.encode())
            with self._ask("nft", fd) as reply:
                _answer(reply, "NetworkPolicy's nftables rules", POD_REPLY_TIMEOUT_S)
        finally:
            os.close(fd)

    def _ask(self, request: str, *extra: int) -> socket.socket:
        """Send the holder `request` with a socket of its own for the answer (its worker answers there, while the
        holder serves other requests), and the descriptors `extra`; that socket's other end."""
        if self._closed or os.getpid() != self._owner:
            raise NetworkError("the pods' network is closed here (a forked child joins it instead)", errno.EBADF)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with self._lock:
                socket.send_fds(self._control, [request.encode()], [theirs.fileno(), *extra])
        except OSError as e:
            mine.close()
            raise NetworkError(f"ask the network's holder: {request} (it is gone)", e.errno or errno.EPIPE) from None
        finally:
            theirs.close()
        return mine

    # -- in the simulator ----------------------------------------------------------------------------

    def socket(self, family: int = socket.AF_INET, type: int = socket.SOCK_STREAM, proto: int = 0) -> Socket:
        """A new socket of the pods' network namespace, for this process (thread-safe): connect it to reach a
        pod, or bind and listen before a fork to serve the pods. Raises NetworkError once the holder is gone."""
        if self._closed or os.getpid() != self._owner:
            raise NetworkError("the pods' network is closed here (a forked child joins it instead)", errno.EBADF)
        with self._lock:
            self._seq += 1
            seq = str(self._seq).encode()
            try:
                self._control.send(b"socket %s %d %d %d" % (seq, family, type, proto))
            except OSError as e:
                raise NetworkError(
                    "ask the network's holder for a socket (it is gone)", e.errno or errno.EPIPE
                ) from None
            deadline = time.monotonic() + REPLY_TIMEOUT_S
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not fds.readable([self._control], left):
                    raise NetworkError(
                        f"the network's holder did not answer within {REPLY_TIMEOUT_S:g} s", errno.ETIMEDOUT
                    )
                try:
                    msg, received, _, _ = socket.recv_fds(self._control, 256, 1, socket.MSG_CMSG_CLOEXEC)
                except OSError as e:
                    raise NetworkError("hear from the network's holder", e.errno or errno.EPIPE) from None
                if not msg:
                    raise NetworkError("hear from the network's holder (it is gone)", errno.EPIPE)
                words = msg.split()
                if len(words) < 2 or words[1] != seq:  # the late answer to a request that timed out
                    for fd in received:
                        os.close(fd)
                    continue
                if words[0] == b"ok" and len(received) == 1:
                    return socket.socket(fileno=received[0])
                for fd in received:
                    os.close(fd)
                code = int(words[2]) if len(words) > 2 and words[2].isdigit() else errno.EIO
                raise OSError(code, f"socket() in the pods' network: {os.strerror(code)}")

    def connect(self, address: tuple[str, int], timeout: float | None = 1.0) -> Socket:
        """A TCP connection to `address` (an IPv4 or IPv6 address, a port) made in the pods' network."""
        host, port = address
        s = self.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        try:
            s.settimeout(timeout)
            s.connect((host, port))
        except BaseException:
            s.close()
            raise
        return s

    def connect_check(self, ip: str, port: int, timeout: float = 0.2) -> bool:
        """Whether something listens on `ip`:`port` in the pods' network (the runner's connect_ex, done there).
        Never takes longer than `timeout` plus a round trip to the holder; False if the holder is gone."""
        try:
            s = self.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET)
        except NetworkError:
            return False
        with s:
            s.settimeout(timeout)
            return s.connect_ex((ip, port)) == 0

    def alive(self) -> bool:
        """Whether the holder still runs (the namespace itself lives as long as a process is in it)."""
        return not self._closed and self._proc.poll() is None

    def close(self) -> None:
        """End the holder (and its egress tool), reap it, close the descriptors. Idempotent; in a process other
        than the creator (a fork that inherited the object) it only closes that process's copies."""
        if self._closed:
            return
        owner = os.getpid() == self._owner
        if owner:
            try:
                self._control.send(b"quit")
            except OSError:
                pass
        self._forget()
        if owner:
            _end(self._proc, 1.0)

    def _forget(self) -> None:
        self._closed = True
        self._control.close()
        for fd in (self._net_fd, self._user_fd):
            if fd >= 0:
                os.close(fd)
        self._net_fd = self._user_fd = -1

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Network(holder={self.holder}, strategy={self.strategy!r}, egress={self.egress!r})"


class PodNetwork:
    """One pod's own network namespace, being made or made: its descriptor once the holder's worker has sent it.
    Every container of the pod joins it (`Network.join(pod)`); `close` lets it go (the kernel removes the namespace,
    and with it the pod's veth, once no process is in it)."""

    def __init__(self, ip: str, container: str, reply: socket.socket):
        self.ip, self.container = ip, container
        self._reply: socket.socket | None = reply
        self._fd = -1
        self.result: dict[str, Any] = {}  # the ptp plugin's ADD result

    def fd(self, timeout: float = POD_REPLY_TIMEOUT_S) -> int:
        """The namespace's descriptor, waiting for it if need be. Raises NetworkError with the plugin's own message."""
        if self._fd >= 0:
            return self._fd
        if self._reply is None:
            raise NetworkError(f"pod {self.container}'s network namespace is closed", errno.EBADF)
        with self._reply as reply:
            self._reply = None
            msg, self._fd = _answer(reply, f"pod {self.container}'s network", timeout)
        self.result = json.loads(msg[3:] or b"{}")
        return self._fd

    def fileno(self) -> int:
        """Its descriptor, or its pending reply's: a forked container of another pod must close it."""
        return self._fd if self._fd >= 0 else self._reply.fileno() if self._reply is not None else -1

    def close(self) -> None:
        if self._reply is not None:
            self._reply.close()
            self._reply = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __repr__(self) -> str:
        return f"PodNetwork({self.container!r}, {self.ip})"


class HostAddress:
    """A host-network pod's address in the simulation's namespace (`Network.host_address`), until `close`."""

    def __init__(self, network: Network, ip: str):
        self.network, self.ip = network, ip
        self._held = True

    def fileno(self) -> int:
        return -1

    def close(self) -> None:
        """Take the address away (the holder's worker does it; not waited for)."""
        if self._held:
            self._held = False
            with contextlib.suppress(NetworkError):
                self.network._ask(f"addr del {self.ip}").close()


def _answer(reply: socket.socket, what: str, timeout: float) -> tuple[bytes, int]:
    """A worker's answer on `reply`: ("ok ..." and the descriptor it sent, or -1). Raises NetworkError with the
    worker's own message (a plugin's), or when none came within `timeout` seconds."""
    if not fds.readable([reply], timeout):
        raise NetworkError(f"set up {what}: no answer within {timeout:g} s", errno.ETIMEDOUT)
    msg, received, _, _ = socket.recv_fds(reply, 65536, 1, socket.MSG_CMSG_CLOEXEC)
    if msg.startswith(b"ok") and len(received) <= 1:
        return msg, received[0] if received else -1
    for fd in received:
        os.close(fd)
    said = json.loads(msg) if msg.startswith(b"{") else {}
    raise NetworkError(
        f"set up {what} ({said.get('error', 'the holder is gone')})", int(said.get("errno") or errno.EIO)
    )


class _Launch:
    """A holder started and not yet waited for: `prestart` begins one while the simulator imports JAX."""

    def __init__(self, proc: subprocess.Popen, parent_end: socket.socket):
        self.proc, self.parent_end = proc, parent_end

    @classmethod
    def spawn(
        cls, strategies: Sequence[str], egress: bool, which: Callable[[str], str | None], egress_timeout: float
    ) -> _Launch:
        tool, path, note = find_egress(which) if egress else (None, None, EGRESS_OFF)
        load_libc()  # loaded here, once: a forked child's join() finds it
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [
            sys.executable,
            "-I",
            "-S",
            HOLDER,
            "--holder",
            str(child_end.fileno()),
            str(os.getpid()),
            "1" if threading.current_thread() is threading.main_thread() else "0",
            ",".join(strategies),
            note,
            str(egress_timeout),
            *([tool, path] if tool and path else []),
        ]
        try:
            proc = subprocess.Popen(
                argv,
                pass_fds=(child_end.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except BaseException:
            parent_end.close()
            raise
        finally:
            child_end.close()
        return cls(proc, parent_end)

    def finish(self, network: type[Network], timeout: float) -> Network:
        """Wait for the holder's report: the Network, or `sandbox.Unavailable`."""
        try:
            report = _read_report(self.parent_end, self.proc, timeout)
            if report.get("ok"):
                return network(self.proc, self.parent_end, report)
            raise _unavailable(report.get("attempts", []))
        except BaseException:
            self.parent_end.close()
            _end(self.proc, 0.0)
            raise
        finally:
            if self.proc.stderr is not None:
                self.proc.stderr.close()


_PRESTARTED: dict[None, _Launch] = {}


def prestart() -> None:
    """Begin this process's pod network now (its holder starts while other work goes on); the next
    `Network.create()` with default arguments takes it. A process that never asks leaves it to exit with it."""
    if None not in _PRESTARTED:
        strategies = [s for s in STRATEGIES if s == "user" or os.geteuid() == 0]
        _PRESTARTED[None] = _Launch.spawn(strategies, True, shutil.which, EGRESS_TIMEOUT_S)


def _read_report(control: socket.socket, proc: subprocess.Popen, timeout: float) -> dict[str, Any]:
    """The holder's first message: {"ok": true, "strategy": ..., ...} or {"ok": false, "attempts": [...]}."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise NetworkError(
                f"start the pods' network (its holder did not report within {timeout:g} s)", errno.ETIMEDOUT
            )
        if fds.readable([control], min(left, 0.05)):
            data = control.recv(65536)
            if data:
                return json.loads(data)
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
            last = err.splitlines()[-1] if err else f"exit status {proc.returncode}"
            raise NetworkError(f"start the pods' network (its holder died: {last})", errno.ECHILD)


def _unavailable(attempts: Sequence[dict[str, Any]]) -> BaseException:
    """`sandbox.Unavailable` for the holder's failed attempts: the same causes and fixes as the pods' sandbox."""
    from jaxinfra_sim.runtime import sandbox  # the simulator's side only: the holder runs without the package

    tried = [sandbox.Attempt(a["strategy"], a["step"], a["errno"]) for a in attempts] or [
        sandbox.Attempt("user", "unshare(user)", errno.EPERM)
    ]
    return sandbox.Unavailable(
        *sandbox.diagnose(sys.platform, os.getuid(), tried, sandbox.read_sysctls(), sandbox.seccomp_mode())
    )


def _end(proc: subprocess.Popen, grace: float) -> None:
    """Wait up to `grace` seconds for the holder to end by itself, then SIGKILL it; reap it either way."""
    try:
        proc.wait(grace)
        return
    except subprocess.TimeoutExpired:
        pass
    try:
        proc.kill()
    except OSError:
        pass
    try:
        proc.wait(5.0)
    except subprocess.TimeoutExpired:
        pass
