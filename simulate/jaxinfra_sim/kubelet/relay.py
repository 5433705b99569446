"""The relay of an attempt's container output (`pod_workers`): every container's pipes — its status pipe (phase changes,
the probe's result), its stdout and stderr, its shim's pidfd, as root the handshake of its id maps — watched from one
selector, read as they fill and split into lines: a log line goes to the listener (escaped: `printable`), a status line
to the pod's run (`PodRun.result`, the phase the container says it is in).
"""

from __future__ import annotations

import json
import os
import selectors
from collections.abc import Callable

from jaxinfra_sim.core.podrun import ContainerRun, Listener, Phase, PodRun, Process
from jaxinfra_sim.core.printable import printable
from jaxinfra_sim.runtime import sandbox


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
        """Read every pipe that holds something now."""
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
            data = os.read(fd, 65536)
        except BlockingIOError:
            return False
        if not data:
            self.close(p, fd)
            rest = p.buffers.pop(fd, b"")
            if rest:
                self._line(p, stream, rest)
            return False
        p.logged += len(data) if stream in ("stdout", "stderr") else 0
        buf = p.buffers.get(fd, b"") + data
        *lines, buf = buf.split(b"\n")
        p.buffers[fd] = buf
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
