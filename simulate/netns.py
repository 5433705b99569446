"""The pods' network: one network namespace of their own per simulation, loopback only, as each pod
of a cluster has a network namespace of its own.

Without it the pods share the machine's: a pod that binds 0.0.0.0:18080 listens on the machine's
real interfaces, and a machine's process already on 0.0.0.0:8482 takes a job's port. Here every
pod of one simulation (and the simulator's API server, so that pods reach it) joins one namespace
that only has `lo` (up, with 127.0.0.0/8 and ::1, so each pod's 127.<seed>.x.y address works as
before), in which ports below 1024 are open to everyone (net.ipv4.ip_unprivileged_port_start = 0,
as Docker and containerd set it): a container's root, whose capabilities are only its own user
namespace's, binds port 80 as root does on a node.

A *holder* process keeps the namespace. It is a fresh interpreter (`python -I -S` running this
file: only the standard library, no descriptor of the simulator's, never a fork of a process with
JAX's threads), made by `Network.create`:
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
`egress_note` says why.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
STRATEGIES: dict[str, int] = {"privileged": CLONE_NEWNET, "user": CLONE_NEWUSER | CLONE_NEWNET}
"""The unshare(2) flags of each way to a network namespace, tried in this order (`user` only, unless root)."""

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = struct.Struct("16sh22x")   # struct ifreq: the name, then ifr_flags in a 24-byte union (40 bytes)
PR_SET_PDEATHSIG = 1
LOW_PORTS = "/proc/sys/net/ipv4/ip_unprivileged_port_start"

EGRESS_TOOLS = ("pasta", "slirp4netns")
"""The user-mode networking tools that give the namespace egress, in order of preference."""
NO_EGRESS = "egress off: neither pasta nor slirp4netns is installed (Debian packages passt, slirp4netns)"
EGRESS_TIMEOUT_S = 5.0
"""How long the holder waits for an egress tool to configure the namespace before going on without."""
START_TIMEOUT_S = 10.0
"""How long `create` waits for the holder's report (an interpreter's start, plus the egress tool's)."""
REPLY_TIMEOUT_S = 2.0
"""How long a request to the holder may take (it answers in microseconds; this is for a stuck machine)."""


class NetworkError(OSError):
    """A step on the way into the pods' network failed, or its holder is gone: which step, and the errno."""

    def __init__(self, step: str, code: int):
        super().__init__(code, f"{step}: {os.strerror(code)}")
        self.step = step


_LIBC: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL:
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


# --- egress ---------------------------------------------------------------------------------------

def find_egress(which: Callable[[str], str | None] = shutil.which) -> tuple[str | None, str | None, str]:
    """(tool, its path, the note) of the egress tool installed here: pasta, else slirp4netns, else none."""
    for tool in EGRESS_TOOLS:
        path = which(tool)
        if path:
            return tool, path, f"egress on: {tool} ({path})"
    return None, None, NO_EGRESS


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
        return [path, "--foreground", "--quiet", "--config-net", "--no-map-gw", "-t", "none", "-u", "none",
                "-T", "none", "-U", "none", "--netns", net, *(["--userns", user] if user_namespace else [])]
    if tool == "slirp4netns":
        return [path, "--configure", "--mtu=65520", "--disable-host-loopback", "--netns-type=path",
                *([f"--userns-path={user}"] if user_namespace else []), net, "tap0"]
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


# --- the simulator's side ---------------------------------------------------------------------------

class Network:
    """One simulation's pod network: its holder, the descriptors of its namespaces, the control socket.

    Make it with `create`; use it as a context manager (or call `close`). `strategy` is the way it was
    made ("privileged" or "user"); `egress` the tool that gives it egress (None: none, `egress_note` says
    why); `low_ports` whether ports below 1024 are open to every process in it."""

    def __init__(self, proc: subprocess.Popen, control: socket.socket, report: dict[str, Any]):
        self._proc, self._control = proc, control
        self.holder: int = proc.pid
        self.strategy: str = report["strategy"]
        self.egress: str | None = report.get("egress")
        self.egress_note: str = report.get("note", NO_EGRESS)
        self.low_ports: bool = bool(report.get("low_ports"))
        self._owner = os.getpid()
        self._lock = threading.Lock()
        self._seq = 0
        self._closed = False
        self._net_fd = self._user_fd = -1
        try:   # while the holder lives: the descriptors keep the namespaces, whatever becomes of it
            self._net_fd = os.open(f"/proc/{self.holder}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            if self.strategy == "user":
                self._user_fd = os.open(f"/proc/{self.holder}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
            if os.fstat(self._net_fd).st_ino == os.stat("/proc/self/ns/net").st_ino:
                raise NetworkError("open the holder's network namespace (it is the machine's)", errno.ESRCH)
        except BaseException:
            self._forget()
            raise

    @classmethod
    def create(cls, strategy: str | None = None, *, egress: bool = True,
               which: Callable[[str], str | None] = shutil.which, egress_timeout: float = EGRESS_TIMEOUT_S,
               timeout: float = START_TIMEOUT_S) -> Network:
        """The pods' network namespace, and its holder; `strategy` as `sandbox.preflight` names them (None: the
        first that works here). With `egress`, pasta or slirp4netns (looked up with `which`) is attached where
        installed. Raises `sandbox.Unavailable` (cause and fix, exit status 3) where the kernel refuses."""
        strategies = [strategy] if strategy else [s for s in STRATEGIES if s == "user" or os.geteuid() == 0]
        for name in strategies:
            if name not in STRATEGIES:
                raise ValueError(f"unknown strategy {name!r} (known: {', '.join(STRATEGIES)})")
        launch = _PRESTARTED.pop(None, None) if strategy is None and egress and which is shutil.which else None
        if launch is None:
            launch = _Launch.spawn(strategies, egress, which, egress_timeout)
        return launch.finish(cls, timeout)

    # -- in a forked child ---------------------------------------------------------------------------

    def join(self) -> None:
        """Enter the pods' network namespace: call it in a freshly forked, single-threaded process (a pod's,
        before its sandbox; the API server's). Two setns(2) calls; then this process's copies of the network's
        descriptors are closed (it is in the namespace now) and `close` here does nothing. Raises NetworkError."""
        libc = _libc()
        if self._user_fd >= 0 and libc.setns(self._user_fd, CLONE_NEWUSER) != 0:
            raise NetworkError("setns(user namespace of the pods' network)", ctypes.get_errno())
        if libc.setns(self._net_fd, CLONE_NEWNET) != 0:
            raise NetworkError("setns(the pods' network namespace)", ctypes.get_errno())
        self._forget()

    # -- in the simulator ----------------------------------------------------------------------------

    def socket(self, family: int = socket.AF_INET, type: int = socket.SOCK_STREAM, proto: int = 0) -> socket.socket:
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
                raise NetworkError("ask the network's holder for a socket (it is gone)", e.errno or errno.EPIPE) from None
            deadline = time.monotonic() + REPLY_TIMEOUT_S
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not _readable(self._control, left):
                    raise NetworkError(f"the network's holder did not answer within {REPLY_TIMEOUT_S:g} s", errno.ETIMEDOUT)
                try:
                    msg, fds, _, _ = socket.recv_fds(self._control, 256, 1, socket.MSG_CMSG_CLOEXEC)
                except OSError as e:
                    raise NetworkError("hear from the network's holder", e.errno or errno.EPIPE) from None
                if not msg:
                    raise NetworkError("hear from the network's holder (it is gone)", errno.EPIPE)
                words = msg.split()
                if len(words) < 2 or words[1] != seq:   # the late answer to a request that timed out
                    for fd in fds:
                        os.close(fd)
                    continue
                if words[0] == b"ok" and len(fds) == 1:
                    return socket.socket(fileno=fds[0])
                for fd in fds:
                    os.close(fd)
                code = int(words[2]) if len(words) > 2 and words[2].isdigit() else errno.EIO
                raise OSError(code, f"socket() in the pods' network: {os.strerror(code)}")

    def connect(self, address: tuple[str, int], timeout: float | None = 1.0) -> socket.socket:
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


class _Launch:
    """A holder started and not yet waited for: `prestart` begins one while the simulator imports JAX."""

    def __init__(self, proc: subprocess.Popen, parent_end: socket.socket):
        self.proc, self.parent_end = proc, parent_end

    @classmethod
    def spawn(cls, strategies: Sequence[str], egress: bool, which: Callable[[str], str | None],
              egress_timeout: float) -> _Launch:
        tool, path, note = find_egress(which) if egress else (None, None, "egress off: not asked for")
        _libc()   # loaded here, once: a forked child's join() finds it
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [sys.executable, "-I", "-S", os.path.abspath(__file__), "--holder", str(child_end.fileno()),
                str(os.getpid()), "1" if threading.current_thread() is threading.main_thread() else "0",
                ",".join(strategies), note, str(egress_timeout), *([tool, path] if tool and path else [])]
        try:
            proc = subprocess.Popen(argv, pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
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
            raise NetworkError(f"start the pods' network (its holder did not report within {timeout:g} s)", errno.ETIMEDOUT)
        if _readable(control, min(left, 0.05)):
            data = control.recv(65536)
            if data:
                return json.loads(data)
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
            last = err.splitlines()[-1] if err else f"exit status {proc.returncode}"
            raise NetworkError(f"start the pods' network (its holder died: {last})", errno.ECHILD)


def _readable(sock: socket.socket, timeout: float) -> bool:
    """poll(2), not select(2): the simulator may hold more than FD_SETSIZE descriptors."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(max(0, int(timeout * 1000) + 1)))


def _unavailable(attempts: Sequence[dict[str, Any]]) -> BaseException:
    """`sandbox.Unavailable` for the holder's failed attempts: the same causes and fixes as the pods' sandbox."""
    from jaxinfra.simulate import sandbox   # the simulator's side only: the holder runs without the package

    tried = [sandbox.Attempt(a["strategy"], a["step"], a["errno"]) for a in attempts] or \
        [sandbox.Attempt("user", "unshare(user)", errno.EPERM)]
    return sandbox.Unavailable(*sandbox.diagnose(sys.platform, os.getuid(), tried, sandbox.read_sysctls(),
                                                 sandbox.seccomp_mode()))


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


# --- the holder -------------------------------------------------------------------------------------

def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def lo_up() -> None:
    """Bring this network namespace's loopback interface up (the kernel then gives it 127.0.0.1/8 and ::1)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = _IFREQ.unpack(fcntl.ioctl(s, SIOCGIFFLAGS, _IFREQ.pack(b"lo", 0)))[1]
        if not flags & IFF_UP:
            fcntl.ioctl(s, SIOCSIFFLAGS, _IFREQ.pack(b"lo", flags | IFF_UP))


def _namespace(strategies: Sequence[str]) -> dict[str, Any]:
    """Leave the machine's network namespace by the first strategy that works; the report for the simulator."""
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    attempts: list[dict[str, Any]] = []
    for strategy in strategies:
        if libc.unshare(STRATEGIES[strategy]) == 0:
            break
        attempts.append({"strategy": strategy, "step": f"unshare({strategy})", "errno": ctypes.get_errno()})
    else:
        return {"ok": False, "attempts": attempts}
    step = ""
    try:
        if strategy == "user":   # only ourselves: nothing is gained outside the namespace
            for step, path, text in (("write /proc/self/setgroups", "/proc/self/setgroups", "deny"),
                                     ("write /proc/self/uid_map", "/proc/self/uid_map", f"{uid} {uid} 1"),
                                     ("write /proc/self/gid_map", "/proc/self/gid_map", f"{gid} {gid} 1")):
                _write(path, text)
        step = "bring lo up in the pods' network namespace"
        lo_up()
    except OSError as e:
        attempts.append({"strategy": strategy, "step": step, "errno": e.errno or errno.EPERM})
        return {"ok": False, "attempts": attempts}
    try:
        _write(LOW_PORTS, "0")
        low_ports = True
    except OSError:
        low_ports = False
    return {"ok": True, "strategy": strategy, "low_ports": low_ports, "attempts": attempts}


class _Egress:
    """The holder's child that becomes the egress tool: forked in the machine's namespaces, told to go on once
    the holder has its own, dying with the holder."""

    def __init__(self, tool: str, path: str, keep_closed: Sequence[int]):
        self.tool, self.path = tool, path
        go_r, self._go = os.pipe()
        self.errors, err_w = os.pipe()
        holder = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:   # the child: wait for the holder's word (its strategy), then become the tool
            try:
                for fd in (self._go, self.errors, *keep_closed):
                    os.close(fd)
                word = os.read(go_r, 64).decode()
                if word in STRATEGIES:
                    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
                    if os.getppid() == holder:
                        null = os.open(os.devnull, os.O_RDWR)
                        os.dup2(null, 0)
                        os.dup2(null, 1)
                        os.dup2(err_w, 2)
                        os.execv(path, egress_command(tool, path, holder, word == "user"))
            except BaseException:   # noqa: BLE001 - the child never returns into the holder
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
                how = f"killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit status {os.WEXITSTATUS(status)}"
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
                os.kill(self.pid, signal.SIGKILL)   # not yet reaped: never a stranger's pid
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            self.pid = 0


def _serve(control: socket.socket, parent: int, egress: _Egress | None) -> None:
    """Answer the simulator's requests until it goes (its pidfd), closes the socket, or says quit."""
    watched: list[int] = [control.fileno(), parent]
    if egress is not None and egress.pid:
        watched += [egress.pidfd, egress.errors]
    while True:
        ready = select.select(watched, [], [])[0]
        if parent in ready:
            return
        if egress is not None and egress.pidfd in ready:
            egress.reap()
            watched.remove(egress.pidfd)
        if egress is not None and egress.errors in ready and not egress.drain():
            watched.remove(egress.errors)
        if control.fileno() not in ready:
            continue
        try:
            msg = control.recv(256)
        except OSError:
            return
        words = msg.split()
        if not words or words[0] == b"quit":
            return
        if words[0] == b"socket" and len(words) == 5:
            seq = words[1]
            try:
                made = socket.socket(int(words[2]), int(words[3]), int(words[4]))
            except (OSError, ValueError) as e:
                reply = b"err %s %d" % (seq, getattr(e, "errno", None) or errno.EINVAL)
                try:
                    control.send(reply)
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
        signal.signal(signum, signal.SIG_IGN)   # the simulator's to handle: it closes us
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # through the `finally` that ends the egress tool
    if deathsig == "1" and len(tool_path) < 2:
        # With an egress tool the pidfd below is the only watch: the holder then ends the tool on its way out
        # (pasta, dropping root to nobody, loses its own PR_SET_PDEATHSIG; see egress_command).
        _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    try:
        parent = os.pidfd_open(int(parent_pid))
    except OSError:
        return
    if os.getppid() != int(parent_pid):   # the simulator died before the line above
        return
    control = socket.socket(fileno=int(control_fd))
    egress = _Egress(tool_path[0], tool_path[1], (control.fileno(), parent)) if len(tool_path) == 2 else None
    try:
        try:
            report = _namespace(strategies.split(","))
        except BaseException as e:   # noqa: BLE001 - the simulator must hear of it
            report = {"ok": False, "attempts": [{"strategy": strategies.split(",")[-1],
                                                  "step": f"{type(e).__name__}: {e}", "errno": errno.EINVAL}]}
        if report["ok"]:
            report["egress"], report["note"] = None, note
            if egress is not None:
                report["egress"], report["note"] = egress.start(report["strategy"], float(egress_timeout))
        control.send(json.dumps(report).encode())
        if report["ok"]:
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 2)   # nothing more to say but through the control socket
            os.close(null)
            _serve(control, parent, egress if report["egress"] else None)
    finally:
        if egress is not None:
            egress.stop()


if __name__ == "__main__" and sys.argv[1:2] == ["--holder"]:
    try:
        _holder(sys.argv[2:])
    finally:
        os._exit(0)
