"""Ctrl-C and SIGTERM in a command that forks and has JAX loaded: never lost.

Python runs a signal's handler at the next safe point, and some safe points swallow what the
handler raises ("Exception ignored in ..."): an at-fork callback (logging's lock release, run by
every `os.fork()`), a garbage-collection callback (JAX installs one), a finalizer. A simulation
whose KeyboardInterrupt vanished there would run on to its timeout with every pod alive. So:
- `install`: the handlers also latch the signal, and `check` (called by loops that wait) raises
  it again if it never arrived;
- `held`: both signals are blocked across a fork, so the parent gets them once the child is
  recorded, and the child once it has set its own dispositions (`release`).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOPS = frozenset({signal.SIGINT, signal.SIGTERM})
_latched: list[int] = []


def _stop(signum: int) -> BaseException:
    """What a stop signal raises: Ctrl-C's KeyboardInterrupt; SIGTERM (`timeout`, a CI cancel) exits 128 + 15
    through every `finally`, so a simulation kills and reaps its pods on the way out."""
    return KeyboardInterrupt() if signum == signal.SIGINT else SystemExit(128 + signum)


def _handler(signum: int, _: FrameType | None) -> None:
    _latched.append(signum)
    raise _stop(signum)


def install() -> None:
    """This process's handlers for SIGINT and SIGTERM (in the command, before anything forks)."""
    for signum in STOPS:
        signal.signal(signum, _handler)


def check() -> None:
    """Raise a stop whose handler ran where its exception was ignored (at most once per signal)."""
    if _latched:
        raise _stop(_latched.pop())


@contextmanager
def held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM for the block (fork in it; a child that never leaves it calls `release`)."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def release() -> None:
    """In a child forked inside `held`: take SIGINT and SIGTERM again, now that its dispositions are its own."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
