"""A pod's several JAX processes, as a launcher starts them: each forked before any backend exists, with its own env
(its rank, the group's process count, its devices), all waited for; then one result for the pod.

What each process is told is what the launchers in `launchers` pass JAX (`jax.distributed.initialize`'s
`process_id`, `num_processes`, `coordinator_address`; jax-ml/jax v0.10.2 jax/_src/distributed.py), here through the
env the probe reads (`probe.init_kwargs`): rank = the pod's first rank + the process's local index, as
`$((JOB_COMPLETION_INDEX*K + LOCAL_RANK))` computes it (NVIDIA/JAX-Toolbox@bcbbfa5,
.github/eks-workflow-files/maxtext-job.yaml).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jaxinfra_sim.runtime.shim import PR_SET_PDEATHSIG


def local_env(env: Mapping[str, str], rank: int, count: int, devices: int, coordinator: str) -> dict[str, str]:
    """The env of the pod's process of global `rank`, in a group of `count`, with `devices` CPU devices: the
    contract the pod's env uses (JAX_* or the Training Operator v1's PROCESS_ID/NUM_PROCESSES, as `init_kwargs` reads
    them: JAX_PROCESS_ID first), its rank and count replaced; where the env names no coordinator, `coordinator` (a
    launcher's own), which rank 0 binds."""
    out = {**env, "JAX_NUM_CPU_DEVICES": str(devices)}
    if "PROCESS_ID" in env and "JAX_PROCESS_ID" not in env:
        return {**out, "PROCESS_ID": str(rank), "NUM_PROCESSES": str(count)}
    out.update(JAX_PROCESS_ID=str(rank), JAX_NUM_PROCESSES=str(count))
    if "JAX_COORDINATOR_ADDRESS" not in env:
        if not coordinator:
            raise ValueError("JAX_COORDINATOR_ADDRESS is not set and no launcher names a coordinator")
        out["JAX_COORDINATOR_ADDRESS"] = coordinator
        if rank == 0:
            out.setdefault("JAX_COORDINATOR_BIND_ADDRESS", coordinator)
    return out


def fork_each(count: int, run: Callable[[int], dict[str, Any]], failed: Callable[[int, str], dict]) -> list[dict]:
    """`run(i)` in a forked child for each i < count, all at once; their results in order. A child whose `run`
    raised, or that ended with no result (killed), has `failed(i, why)`. Each child dies with this process
    (PR_SET_PDEATHSIG): a pod's processes end with its container."""
    parent, children = os.getpid(), list[tuple[int, int]]()  # (pid, its pipe's read end)
    for index in range(count):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's end is its exit status and its pipe
            code = 1
            try:
                os.close(read)
                for _, sibling in children:
                    os.close(sibling)
                ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                if os.getppid() == parent:
                    result = _child(index, run, failed)
                    with os.fdopen(write, "wb") as pipe:
                        pipe.write(json.dumps(result).encode())
                    code = 0 if result.get("ok") else 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        os.close(write)
        children.append((pid, read))
    results = []
    for index, (pid, read) in enumerate(children):
        with os.fdopen(read, "rb") as pipe:
            data = pipe.read()
        status = os.waitpid(pid, 0)[1]
        results.append(json.loads(data) if data else failed(index, _ended(status)))
    return results


def _child(index: int, run: Callable[[int], dict[str, Any]], failed: Callable[[int, str], dict]) -> dict:
    """One process's result; where it could not start (JAX refused its arguments), its stderr says why, as the
    pod's one process would."""
    try:
        return run(index)
    except BaseException as err:  # noqa: BLE001 - the process failed: its result says so
        why = f"{type(err).__name__}: {err}"
        print(f"jaxinfra simulate: {why}", file=sys.stderr)
        return failed(index, why)


def _ended(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited {code} with no result"


def pod_result(results: Sequence[Mapping[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """One result for the pod from its processes' (in rank order), keyed as one process's is: ok where every
    process's is; each check of `names` ok where it is in every process, else the first failing process's detail
    with its rank; the first process's rank, program and timings; `processes`, each one's own."""
    checks = {}
    for name in names:
        each = [(r["rank"], r.get("checks", {}).get(name) or _not_run(r)) for r in results]
        bad = [(rank, check) for rank, check in each if not check["ok"]]
        if bad:
            more = f" (and {len(bad) - 1} more of the pod's processes)" if len(bad) > 1 else ""
            checks[name] = {"ok": False, "detail": f"rank {bad[0][0]}: {bad[0][1]['detail']}{more}"}
        else:
            mine = f"rank {each[0][0]}: {each[0][1]['detail']}"
            checks[name] = {"ok": True, "detail": f"{mine} (all {len(each)} of the pod's processes pass)"}
    first = results[0]
    return {
        "rank": first["rank"],
        "process_count": first.get("process_count"),
        "local_devices": sum(r.get("local_devices", 0) for r in results),
        "global_devices": first.get("global_devices"),
        "checks": checks,
        "program": first.get("program"),
        "ok": all(r.get("ok") for r in results),
        "timings": first.get("timings", {}),
        "processes": list(results),
    }


def _not_run(result: Mapping[str, Any]) -> dict[str, Any]:
    return {"ok": False, "detail": f"did not run: {result.get('error', 'no result')}"}
