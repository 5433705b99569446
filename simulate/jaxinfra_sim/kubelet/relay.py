"""The relay of an attempt's container output (`pod_workers`): every container's pipes — its status pipe (phase changes,
the probe's result), its stdout and stderr, its shim's pidfd, as root the handshake of its id maps — watched from one
selector, read as they fill and split into lines: a log entry goes to the listener (escaped: `printable`), a status
line to the pod's run (`PodRun.result`, the phase the container says it is in).

Logs as containerd's CRI writes them (containerd @ c6b9f637 internal/cri/io/logger.go redirectLogs): a line longer
than `MAX_LOG_LINE` is cut into entries of that size, which its log file tags P (partial), the last one F (full); a
line of exactly that size is one entry; what a stream ends with, without a newline, is one last entry. Each entry
reaches the listener as a line of its own. So a stream holds at most one entry's bytes between reads, and each byte
is copied a bounded number of times: a line held whole until its newline was copied again on every read (its cost
the square of its length), and the cleanup that a SIGTERM runs handed it to the listener in one piece.
"""

from __future__ import annotations

import json
import os
import selectors
from collections.abc import Callable

from jaxinfra_sim.core.podrun import ContainerRun, Listener, Phase, PodRun, Process
from jaxinfra_sim.core.printable import printable
from jaxinfra_sim.runtime import sandbox

#: The CRI plugin's `max_container_log_line_size`, 16 KiB by default (containerd @ 01cca8cc
#: internal/cri/config/config_unix.go DefaultRuntimeConfig, MaxContainerLogLineSize): longer lines are split.
MAX_LOG_LINE = 16 * 1024
#: The most one `read` takes from a pipe (a pipe's default capacity, pipe(7)): `pump` reads each ready pipe once, so a
#: pod that floods its output is read a piece at a time between the loop's other steps, never to its end in one.
READ_SIZE = 65536


class Relay:
    """The pipes of one attempt's containers, watched from one selector (its `fileno` is what the loop waits on);
    `phase`: told a pod's new phase as its JAX container says it (initializing, running)."""

    def __init__(self, listener: Listener, phase: Callable[[PodRun, Phase], None]) -> None:
        self.selector = selectors.DefaultSelector()
        self.answers: set[int] = set()  # as root, the ends that tell pods their id maps are written: no pod holds one
        self.listener = listener
        self.phase = phase

    def fileno(self) -> int:
        return self.selector.fileno()

    def watch(self, p: Process, fd: int, stream: str) -> None:
        p.fds[fd] = stream
        os.set_blocking(fd, False)
        self.selector.register(fd, selectors.EVENT_READ, p)

    def grant(self, p: Process, handshake: sandbox.Handshake) -> None:
        """Answer `p`'s handshake once it asks (`read`): the next pods fork meanwhile."""
        self.answers.add(handshake.done)
        self.watch(p, handshake.ask, "grant")

    def pump(self) -> None:
        """Read every pipe that holds something now, once each (`READ_SIZE` at most)."""
        for key, _ in self.selector.select(0):
            self.read(key.data, key.fd)

    def read(self, p: Process, fd: int) -> bool:
        """Consume what the pipe holds now; False once it has nothing more (drained or at EOF)."""
        stream = p.fds[fd]
        if stream == "exit":  # its shim's pidfd, readable once the shim has exited: the loop reaps it next
            return False
        if stream == "grant":  # its user namespace is made: root writes its id maps (or it died first)
            if p.pid is not None and p.handshake is not None:
                sandbox.answer(p.pid, p.handshake)
            self.close_handshake(p)
            return False
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return False
        if not data:
            self.close(p, fd)
            rest = p.buffers.pop(fd, b"")
            if rest:  # its last line, without a newline: containerd writes it as a partial entry
                self._line(p, stream, rest)
            return False
        if stream == "status":  # the simulator's own JSON messages from the container, one a line: never cut
            *lines, p.buffers[fd] = (p.buffers.pop(fd, b"") + data).split(b"\n")
        else:
            p.logged += len(data)
            lines, p.buffers[fd] = entries(p.buffers.pop(fd, b"") + data)
        for line in lines:
            self._line(p, stream, line)
        return True

    def _line(self, p: Process, stream: str, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace")
        if stream != "status":
            text = printable(text)  # what the pod wrote steers no terminal, here or where its report is read
            if stream == "stderr" and text.strip():
                p.stderr_tail.append(text.strip())
            if isinstance(p, ContainerRun):  # as `kubectl logs --all-containers --prefix` tells them apart
                self.listener("log", (p.owner, stream, f"[{p.container.name}] {text}"))
            else:
                self.listener("log", (p, stream, text))
            return
        msg = json.loads(text)
        phase = msg.pop("phase")
        p.running = p.running or phase == Phase.RUNNING
        if not isinstance(p, PodRun):  # the probe's phases and result: the JAX container's alone
            return
        if phase == "result":
            p.result = msg["result"]
        elif not p.done:
            self.phase(p, Phase(phase))  # initializing, running: what the container says of itself

    def drain(self, p: Process) -> None:
        """Read what the container wrote before it exited (its last lines explain the failure)."""
        for fd in list(p.fds):
            while self.read(p, fd):
                pass

    def close(self, p: Process, fd: int) -> None:
        """Stop watching one of `p`'s pipes and close it."""
        self.selector.unregister(fd)
        os.close(fd)
        del p.fds[fd]

    def close_handshake(self, p: Process) -> None:
        if p.handshake is not None:
            if p.handshake.ask in p.fds:
                self.selector.unregister(p.handshake.ask)
                del p.fds[p.handshake.ask]
            self.answers.discard(p.handshake.done)
            p.handshake.close()
            p.handshake = None


def entries(data: bytes) -> tuple[list[bytes], bytes]:
    """`data` (what a log stream held, then what was read) as containerd's CRI logger cuts it: its complete entries,
    newlines removed, each at most `MAX_LOG_LINE` bytes (a line is cut into as many as it needs, an empty line is one
    empty entry), and what is left to wait for the rest of its line (at most `MAX_LOG_LINE` bytes: a line is cut only
    once it is longer, so one of exactly that size waits for its newline and stays one entry)."""
    *lines, rest = data.split(b"\n")
    out = [line[i : i + MAX_LOG_LINE] for line in lines for i in range(0, max(len(line), 1), MAX_LOG_LINE)]
    cut = max(len(rest) - 1, 0) // MAX_LOG_LINE * MAX_LOG_LINE  # whole entries; at most MAX_LOG_LINE bytes wait
    out += [rest[i : i + MAX_LOG_LINE] for i in range(0, cut, MAX_LOG_LINE)]
    return out, rest[cut:]
