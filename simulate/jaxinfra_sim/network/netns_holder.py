"""The pods' network's holder: the process that keeps one simulation's network namespace (`netns`).

A fresh interpreter runs this file (`python -I -S`: the standard library only, no descriptor of the
simulator's, never a fork of a process with JAX's threads). It leaves the machine's network
namespace (as root unshare(CLONE_NEWNET); otherwise unshare(CLONE_NEWUSER | CLONE_NEWNET) mapping
only the caller's ids), brings `lo` up, turns IPv4 forwarding on (`enable_forwarding`), opens the low ports,
attaches an egress tool where one is installed, reports to the simulator, and serves it (sockets made in the
namespace) until it goes.
`netns` holds the simulator's side; the facts and sources are in its docstring.

This file is the holder's program and its server loop (`_serve`: the control protocol); the rest is in modules
beside it, the standard library only as well: `netns_setup` (leaving the machine's namespace and making the
simulation's), `netns_workers` (the work forked per request: each pod's namespace wired by the CNI plugins, a
host-network pod's address, the service route, NetworkPolicy's rules) and `netns_egress` (pasta or slirp4netns).
They import one another as `jaxinfra_sim.network.netns_*`, as they do when the simulator imports them (`netns` does,
for their names). Run as a program, with `-I` (which implies `-P`: not even this file's folder is on sys.path) and
`-S`, this file first puts bare modules in sys.modules as `jaxinfra_sim` and `jaxinfra_sim.network`, the latter's
`__path__` this folder: those imports then find the modules beside it, and neither package's `__init__` runs
(tests/test_layers.py checks that the holder loads nothing else of the simulator).
"""

from __future__ import annotations

import collections
import errno
import json
import os
import select
import signal
import socket
import sys
import types
from collections.abc import Sequence

if __name__ == "__main__":
    # The holder's program (`python -I -S`, netns.HOLDER): stand-ins for the packages (the module's docstring).
    for _name, _path in (("jaxinfra_sim", []), ("jaxinfra_sim.network", [os.path.dirname(os.path.abspath(__file__))])):
        _PACKAGE = types.ModuleType(_name)
        _PACKAGE.__path__ = _path
        sys.modules.setdefault(_name, _PACKAGE)

from jaxinfra_sim.network.netns_boundary import machine_addresses, read_routes, ruleset  # noqa: E402 - after the stand-in above
from jaxinfra_sim.network.netns_egress import Egress  # noqa: E402
from jaxinfra_sim.network.netns_setup import PR_SET_PDEATHSIG, load_libc, namespace, nft_file  # noqa: E402
from jaxinfra_sim.network.netns_workers import failure, host_address, nft, pod_network, route  # noqa: E402

MAX_WORKERS = 2 * (os.cpu_count() or 1) + 2
"""Workers the holder runs at once: enough to keep the cores busy with the plugins' exec and netlink work, few enough
that 256 pods' set-up never holds 256 plugin processes in memory at the same time."""


def _serve(control: socket.socket, parent: int, egress: Egress | None, strategy: str) -> None:
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
                    pid = pod_network(reply, words[1].decode(), words[2].decode(), strategy, gid)
                elif words[0] == b"addr":
                    pid = host_address(reply, words[1].decode(), words[2].decode())
                elif words[0] == b"route":
                    pid = route(reply, words[1].decode())
                else:
                    pid = nft(reply, received[1])
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
    egress = Egress(tool_path[0], tool_path[1], (control.fileno(), parent)) if len(tool_path) == 2 else None
    try:
        machine: tuple[list, list] | str = "no egress tool"  # what the boundary keeps the pods from, for egress only
        if egress is not None:  # read here, while this process is still in the machine's namespaces
            try:
                machine = machine_addresses(read_routes())
            except (OSError, ValueError) as e:  # ValueError: ip's JSON unreadable
                machine = f"the machine's routes could not be read: {e}"
        try:
            report = namespace(strategies.split(","))
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
                try:  # the boundary first: never an egress tool without it (`netns_boundary`)
                    if isinstance(machine, str):
                        raise OSError(machine)
                    nft_file(ruleset(*machine).encode())
                except OSError as e:
                    egress.stop()
                    report["note"] = f"egress off: the rules that keep the pods from the machine's addresses: {e}"
                else:
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
