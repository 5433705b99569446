"""What JAX reads from a pod's env: the coordinator's address, this process's rank and the process count, as
`jax.distributed.initialize()` and its cluster detectors take them (jax-ml/jax v0.10.2: jax/_src/distributed.py
`State.initialize`, jax/_src/clusters/cluster.py `ClusterEnv.auto_detect_unset_distributed_params`,
cloud_tpu_cluster.py `GkeTpuCluster`), and the Training Operator v1's COORDINATOR_* contract. `contract.py` checks a
workload's pods against what these functions read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from jaxinfra.upstream import JOB_COMPLETION_INDEX, OPERATOR_ENV
from jaxinfra_sim.core import model
from jaxinfra_sim.core.inputs import to_int

JAX_DEFAULT_TPU_PORT = 8482
"""JAX's TPU coordinator port (jax/_src/clusters/cloud_tpu_cluster.py, coordinator_port)."""


@dataclass(frozen=True)
class Address:
    var: str  # where it came from
    raw: str
    host: str
    port: int | None


def _port(raw: str) -> int | None:
    """A port number (1 to 65535) as the env writes it, or None."""
    return int(raw) if raw.isdigit() and 0 < int(raw) < 65536 else None


def split_hostport(raw: str) -> tuple[str, int | None]:
    if raw.startswith("["):
        host, _, rest = raw[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    host, sep, port = raw.rpartition(":")
    if not sep:
        return raw, None
    return host, _port(port)


def _is_tpu_detected(pod: model.Pod) -> bool:
    """JAX's GkeTpuCluster applies: a TPU pod with TPU_PROCESS_ADDRESSES or TPU_WORKER_HOSTNAMES."""
    return pod.accelerator == "tpu" and ("TPU_PROCESS_ADDRESSES" in pod.env or "TPU_WORKER_HOSTNAMES" in pod.env)


def _worker_list(pod: model.Pod) -> str:
    return pod.env.get("TPU_PROCESS_ADDRESSES", pod.env.get("TPU_WORKER_HOSTNAMES", ""))


@lru_cache(maxsize=256)
def _hosts_in_slice(worker_list: str) -> int:
    """Entries of a worker list; cached because every pod of a slice shares the same (long) string."""
    return worker_list.count(",") + 1


def v1_coordinator(pod: model.Pod) -> Address | None:
    """Training Operator v1: COORDINATOR_ADDRESS (a host, no port) and COORDINATOR_PORT, which the script joins."""
    host = pod.env.get("COORDINATOR_ADDRESS")
    if not host:
        return None
    raw_port = pod.env.get("COORDINATOR_PORT", "")
    return Address("COORDINATOR_ADDRESS", f"{host}:{raw_port}", host, _port(raw_port))


BARE_INITIALIZE = "jax.distributed.initialize()"
"""A command that holds this calls JAX's initialize with no argument: JAX reads the env itself."""


def reads_env(pod: model.Pod) -> bool:
    """Whether the pod's command is known to leave the coordinator to JAX (`BARE_INITIALIZE` in its command or args,
    as a `python -c` script has it): then what JAX itself reads is all there is."""
    return any(BARE_INITIALIZE in part for part in (*pod.command, *pod.args))


def joined(pod: model.Pod) -> Address | None:
    """A host-only JAX_COORDINATOR_ADDRESS with JAX_COORDINATOR_PORT beside it, as the address a program that joins
    them builds (`host:port`; the port None where it is not a number); None where the env has no such pair."""
    raw = pod.env.get("JAX_COORDINATOR_ADDRESS")
    if not raw or ":" in raw or "JAX_COORDINATOR_PORT" not in pod.env:
        return None
    port_raw = pod.env["JAX_COORDINATOR_PORT"]
    return Address("JAX_COORDINATOR_ADDRESS", f"{raw} (JAX_COORDINATOR_PORT={port_raw})", raw, _port(port_raw))


def coordinator(pod: model.Pod) -> Address | None:
    """The address jax.distributed.initialize() would use: JAX_COORDINATOR_ADDRESS, else the Training Operator v1
    pair COORDINATOR_ADDRESS + COORDINATOR_PORT, else (TPU detector) MEGASCALE_COORDINATOR_ADDRESS or the first worker,
    port JAX_COORDINATOR_PORT or 8482 (cluster.py)."""
    raw = pod.env.get("JAX_COORDINATOR_ADDRESS")
    if raw:
        host, port = split_hostport(raw)
        return Address("JAX_COORDINATOR_ADDRESS", raw, host, port)
    if v1 := v1_coordinator(pod):
        return v1
    if not _is_tpu_detected(pod):
        return None
    port = to_int(pod.env.get("JAX_COORDINATOR_PORT"), JAX_DEFAULT_TPU_PORT)
    if pod.env.get("MEGASCALE_COORDINATOR_ADDRESS"):
        raw = pod.env["MEGASCALE_COORDINATOR_ADDRESS"]
        return Address("MEGASCALE_COORDINATOR_ADDRESS", raw, raw.split(":")[0], port)
    raw = _worker_list(pod).split(",", 1)[0]
    var = "TPU_PROCESS_ADDRESSES" if "TPU_PROCESS_ADDRESSES" in pod.env else "TPU_WORKER_HOSTNAMES"
    return Address(var, raw, raw.split(":")[0], port)


def rank_of(pod: model.Pod) -> tuple[str, int | None, str] | None:
    """(source, rank or None if not an integer, raw): JAX_PROCESS_ID, else PROCESS_ID (Training Operator v1), else the
    rank JAX's TPU detector derives: TPU_WORKER_ID + MEGASCALE_SLICE_ID x hosts in the slice. None when the pod has
    none."""
    for var in ("JAX_PROCESS_ID", "PROCESS_ID"):
        if var in pod.env:
            raw = pod.env[var]
            return var, int(raw) if re.fullmatch(r"-?\d+", raw.strip()) else None, raw
    if _is_tpu_detected(pod) and "TPU_WORKER_ID" in pod.env:
        worker, slice_id = pod.env["TPU_WORKER_ID"], pod.env.get("MEGASCALE_SLICE_ID") or "0"
        raw = f"TPU_WORKER_ID={worker} MEGASCALE_SLICE_ID={slice_id}"
        if not (worker.isdigit() and slice_id.isdigit()):
            return "TPU_WORKER_ID", None, raw
        return "TPU_WORKER_ID", int(worker) + int(slice_id) * _hosts_in_slice(_worker_list(pod)), raw
    return None


def count_of(pod: model.Pod) -> tuple[str, int | None, str] | None:
    """(source, process count, raw): JAX_NUM_PROCESSES, else NUM_PROCESSES (Training Operator v1), else hosts in the
    slice x MEGASCALE_NUM_SLICES (TPU detector)."""
    for var in ("JAX_NUM_PROCESSES", "NUM_PROCESSES"):
        if var in pod.env:
            raw = pod.env[var]
            return var, to_int(raw, -1) if raw.strip().isdigit() else None, raw
    if _is_tpu_detected(pod):
        slices = pod.env.get("MEGASCALE_NUM_SLICES") or "1"
        hosts = _hosts_in_slice(_worker_list(pod))
        return (
            "TPU_WORKER_HOSTNAMES",
            hosts * int(slices) if slices.isdigit() else None,
            f"{hosts} hosts x {slices} slices",
        )
    return None


#: Env a controller appends after the container's own env: `$(VAR)` to them in env stays verbatim (kubelet order).
_APPENDED = {JOB_COMPLETION_INDEX: "the Job controller", **{v: "the Training Operator" for v in OPERATOR_ENV}}


def appended_hint(raw: str) -> tuple[str, str | None]:
    """(message suffix, fix) when a value still holds `$(VAR)` of a controller-appended variable, else ("", None)."""
    found = sorted((v for v in _APPENDED if f"$({v})" in raw), key=lambda v: raw.index(f"$({v})"))
    if not found:
        return "", None
    who = _APPENDED[found[0]]
    names = ", ".join(found)
    hint = (
        f"; $(VAR) in env expands only variables defined earlier in the list, and {names} "
        f"{'is' if len(found) == 1 else 'are'} appended by {who} after yours"
    )
    if who == "the Job controller":
        return hint, None
    return hint, f"read {names} in the program, or use $({found[0]}) in command/args (they see the whole env)"
