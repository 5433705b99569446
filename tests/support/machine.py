"""A memory cgroup standing for this machine: the simulation and its pods run in it (`preexec=group.enter`), so that
a test can run "this machine" out of memory without touching the real one."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest


@contextlib.contextmanager
def memory_machine(name: str, size: int) -> Iterator[Any]:
    """A cgroup `name` of `size` bytes, removed afterwards; the test skips where this process cannot make one (not
    root, and no delegated cgroup v2 group) or the machine has no usable memory controller."""
    from jaxinfra_sim.node import cgroupfs, cgroups

    if os.geteuid() != 0:
        pytest.skip("making cgroups needs root here (or a delegated cgroup v2 group)")
    controllers = cgroupfs.probe()
    if controllers.memory is None:
        pytest.skip(f"no usable memory controller: {controllers.memory_reason}")
    with cgroups.Session.create(name) as session:
        group = session.pod("simulation", size, None)
        assert group is not None
        yield group
