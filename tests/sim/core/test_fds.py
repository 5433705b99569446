"""Waiting on descriptors (simulate/fds.py): numbers past select()'s FD_SETSIZE (1024), which a simulation of a few
hundred pods holds, are waited on like any other."""

from __future__ import annotations

import os
import resource

import pytest

from jaxinfra_sim.core import fds

pytestmark = pytest.mark.unit


def test_a_descriptor_numbered_past_fd_setsize_is_seen_ready_and_an_idle_one_is_not() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 1500:
        pytest.skip(f"this process may hold at most {hard} descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
    r, w = os.pipe()
    high_r = os.dup2(r, 1500)
    try:
        assert fds.readable([high_r], 0) == []
        os.write(w, b"x")
        assert sorted(fds.readable([high_r, r], 0.5)) == sorted([high_r, r])
    finally:
        for fd in (r, w, high_r):
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
