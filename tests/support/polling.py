"""Waiting for a condition instead of bounding wall-clock time: tests assert what happens, never how fast (speed
targets live in benchmarks/); a bound is only how long to wait before giving up, generous for a loaded machine."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class NotYet(AssertionError):
    """The condition did not hold within the time allowed; the message says what was last seen."""


def wait_until(predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.02, what: str = "") -> T:
    """Call `predicate` every `interval` seconds until it returns something truthy, and return that; after `timeout`
    seconds raise `NotYet` with the last value it returned (or the exception it raised)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            seen: object = predicate()
        except Exception as err:  # noqa: BLE001 (a condition that cannot be read yet is one not met yet)
            seen = err
        else:
            if seen:
                return seen  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise NotYet(
                f"{what or getattr(predicate, '__name__', 'condition')} not met within {timeout:g} s; "
                f"last seen: {seen!r}"
            )
        time.sleep(interval)
