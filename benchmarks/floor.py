"""Benchmark baseline: JAX's own floor for N processes on this machine, with nothing of the simulator around them.

One warm parent imports JAX and the built-in probe once, as the simulator's runner does, and forks N children (of
DEVICES CPU devices each, 1 unless given) that join one group over loopback TCP and run the same probe (its one
program, compiled by process 0 and loaded by the others; the same 50 ms timer slack): no pods, no sandbox, no network
namespaces, no controllers. What the simulator adds for N processes is its wall minus this floor; what grows faster
than N here is JAX's (its per-process work over the global device list, the executable that grows with the device
count, the coordination service in process 0).

    python benchmarks/floor.py N [DEVICES]   # one JSON line: wall, the processes' CPU (user, system), their switches
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import resource
import signal
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "simulate"))
from jaxinfra_sim.core.options import Options  # noqa: E402
from jaxinfra_sim.jax import probe
from jaxinfra_sim.jax.timeouts import JAX_HEARTBEAT_TIMEOUT, JAX_SHUTDOWN_TIMEOUT  # noqa: E402
from jaxinfra_sim.kubelet.container import PR_SET_TIMERSLACK, PROBE_TIMER_SLACK_NS  # noqa: E402
from jaxinfra_sim.node import capacity  # noqa: E402  (imports JAX: the warm parent)
from jaxinfra_sim.runtime.shim import PR_SET_PDEATHSIG  # noqa: E402

TIMEOUT_S = 300
DEFAULTS = Options()  # the simulator's own heartbeat and shutdown timeouts, dilated alike


def child(rank: int, n: int, devices: int, port: int, parent: int) -> int:
    """One process of the group: the probe as a pod would run it, its exit status whether every check passed."""
    libc = ctypes.CDLL(None)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # ends with the parent, never an orphan
    if os.getppid() != parent:  # the parent was gone before that took effect
        return 1
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)  # gloo's connection banners
    libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(PROBE_TIMER_SLACK_NS), 0, 0, 0)
    os.environ.update(JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_NUM_PROCESSES=str(n), JAX_PROCESS_ID=str(rank))
    spec = probe.ProbeSpec(
        expected_rank=rank,
        num_processes=n,
        devices_per_process=devices,
        groups=1,
        hosts_per_group=n,
        init_timeout=TIMEOUT_S,
        heartbeat_timeout=capacity.dilated(DEFAULTS.heartbeat_timeout, n, JAX_HEARTBEAT_TIMEOUT),
        shutdown_timeout=capacity.dilated(DEFAULTS.shutdown_timeout, n, JAX_SHUTDOWN_TIMEOUT),
    )
    try:
        return 0 if probe.run_probe(spec)["ok"] else 1
    except BaseException:  # noqa: BLE001  (a child reports by its exit status only)
        return 1


def main() -> None:
    n, devices = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 1
    probe.configure(devices)
    gc.freeze()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start, parent = time.perf_counter(), os.getpid()
    pids = []
    for rank in range(n):
        pid = os.fork()
        if pid == 0:
            os._exit(child(rank, n, devices, port, parent))
        pids.append(pid)
    passed = sum(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0 for pid in pids)
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "processes": n,
                "devices": devices,
                "passed": passed,
                "wall": wall,
                "cpu": usage.ru_utime + usage.ru_stime,
                "user": usage.ru_utime,
                "system": usage.ru_stime,
                "voluntary_switches": usage.ru_nvcsw,
            }
        )
    )


if __name__ == "__main__":
    main()
