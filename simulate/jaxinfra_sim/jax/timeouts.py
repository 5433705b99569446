"""JAX's timeouts as a pod's process meets them: `jax.distributed.initialize`'s own defaults, and the seconds a
program following the env contract hands it from JAX_INITIALIZATION_TIMEOUT (jax/_src/distributed.py, jax 0.10.2).
The controllers refuse a value such a program cannot pass (`controllers.base.init_timeout_problems`); the kubelet waits
that long for a pod's group (`kubelet.podstatus`), and the probe is given it (`kubelet.container`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jaxinfra_sim.core.options import Options

INIT_TIMEOUT = "JAX_INITIALIZATION_TIMEOUT"
JAX_INIT_TIMEOUT = 300
"""jax.distributed.initialize's own default `initialization_timeout` (jax/_src/distributed.py, jax 0.10.2)."""
JAX_HEARTBEAT_TIMEOUT = 100
"""Its `heartbeat_timeout_seconds` default (the same file)."""
JAX_SHUTDOWN_TIMEOUT = 300
"""Its `shutdown_timeout_seconds` default (the same file)."""


def jax_init_timeout(raw: str) -> int | None:
    """The seconds a program following the env contract hands JAX for JAX_INITIALIZATION_TIMEOUT, or None where it
    cannot. JAX itself reads no such variable (jax 0.10.2: only `initialization_timeout: int = 300`, an argument);
    the contract's programs pass `int(os.environ["JAX_INITIALIZATION_TIMEOUT"])` (docs/env-contract.md), as the
    built-in probe does, and jaxlib's `get_distributed_runtime_client(init_timeout=...)` takes a C++ int: Python's
    int() refuses "abc" or "1.5" (ValueError), jaxlib 2**31 and past (TypeError, measured with jaxlib 0.10.2)."""
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if -(2**31) <= value < 2**31 else None


def init_timeout(env: Mapping[str, str], options: Options) -> float:
    """The seconds a pod's JAX waits for its group (capped by --init-timeout): JAX_INITIALIZATION_TIMEOUT as a program
    following the env contract passes it (`jax_init_timeout`: `int()`, within jaxlib's C++ int), else JAX's
    own default, 300 s (jax/_src/distributed.py): JAX reads no such variable itself. A value that program cannot pass
    is the workload's problem before anything starts (`controllers.init_timeout_problems`); never an exception here,
    which the kubelet's stuck check and the probe's spec both call."""
    raw = env.get(INIT_TIMEOUT)
    parsed = jax_init_timeout(raw) if raw else None
    value = float(JAX_INIT_TIMEOUT if parsed is None else parsed)
    return min(value, options.init_timeout) if options.init_timeout else value
