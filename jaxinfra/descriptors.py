"""The descriptors the `jaxinfra` process inherited from whoever started it (a shell's `3>file`, a CI runner's pipes).

They are the caller's, not the command's: a simulated pod must never hold one (a container could write through it to a
file only its caller may open). `record` notes them once, first thing in `jaxinfra.entry.run`, each with the file it
is open at (device and inode); `caller` gives those still open at the same file, which the simulator's pod processes
close before they become containers (a number the command closed and then reused for its own is not the caller's).
"""

from __future__ import annotations

import os

_CALLER: dict[int, tuple[int, int]] = {}


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        found = os.fstat(fd)
    except OSError:  # closed, or the descriptor os.listdir itself used
        return None
    return found.st_dev, found.st_ino


def record() -> None:
    """Note the descriptors above stderr this process holds now, at its start (idempotent: the first call counts)."""
    if _CALLER:
        return
    try:
        found = sorted(int(name) for name in os.listdir("/proc/self/fd") if name.isdigit())
    except OSError:
        return
    for fd in found:
        identity = _identity(fd) if fd > 2 else None
        if identity is not None:
            _CALLER[fd] = identity


def caller() -> list[int]:
    """The recorded descriptors still open at the file they were open at (none where `record` never ran: the library
    used in-process)."""
    return [fd for fd, identity in _CALLER.items() if _identity(fd) == identity]
