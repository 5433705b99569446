"""File descriptors by the hundred: waiting on them with poll(2), never select(2) (a simulation of a few hundred
pods holds more than FD_SETSIZE, 1024, and select() refuses any numbered past it: "filedescriptor out of range"),
and making pipes all or none (a full table must not leave half of them open)."""

from __future__ import annotations

import os
import select
from collections.abc import Sequence
from typing import Protocol


class _HasFileno(Protocol):
    def fileno(self) -> int: ...


def readable(fds: Sequence[int | _HasFileno], timeout: float | None = None) -> list[int]:
    """The descriptors of `fds` ready to read (or closed at the other end) within `timeout` seconds (None: wait)."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    wait = None if timeout is None else max(0, int(timeout * 1000) + 1)
    return [fd for fd, _ in poller.poll(wait)]


def pipes(n: int) -> list[int]:
    """n pipes' ends (read, write, read, write, ...), or none of them open: the table filled up on the way."""
    ends: list[int] = []
    try:
        for _ in range(n):
            ends += os.pipe()
    except OSError:
        close(ends)
        raise
    return ends


def close(ends: Sequence[int]) -> None:
    for fd in ends:
        os.close(fd)
