"""The pods' network's holder, its egress: pasta or slirp4netns attached to the simulation's namespace by a child the
holder forks before it leaves the machine's (`Egress`), up once the namespace has a default route.

The standard library only, as the holder (whose program imports it; see `netns_holder`).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence

from jaxinfra_sim.network.netns_setup import PR_SET_PDEATHSIG, STRATEGIES, load_libc

EGRESS_TOOLS = ("pasta", "slirp4netns")
"""The user-mode networking tools that give the namespace egress, in order of preference."""


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


class Egress:
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
