"""The built-in collectives probe: the real JAX processes of each pod (one, or each of its several), checked end to
end.

Each process joins the group exactly as the pod's env contract says (docs/design.md, "The env contracts"), then proves
the group works the way training will use it: the rank and device counts the manifests
promise, a hardware-shaped mesh, the four cross-process collectives, and one data-parallel
step against a single-process reference. Every check is verified on the process's own
shards, so a pod's verdict never depends on another pod's report. The group compiles its one
program once (`compile_once`): process 0 compiles, the others load its executable.

Run by the process runner (forked per pod) through `run_pod`: `configure` and `run_probe` in the pod's process,
or, where the pod holds several JAX processes (`launchers`), each forked before any backend exists with its own
rank, count and devices (`local_processes`), the mesh's "chip" axis spanning a host's processes (`build_mesh`), and
one result for the pod. Or as a fresh interpreter: `python -m jaxinfra_sim.jax.probe --num-processes 2 --devices 2
...` (`--local-processes 2 --first-rank R`: a pod of two).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import jax
import numpy as np
from jax.experimental.serialize_executable import deserialize_and_load, serialize
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxinfra_sim.jax.collectives import Formula, collective_cases, group_mesh, reference_step, sgd_step, training_data
from jaxinfra_sim.jax.local_processes import fork_each, local_env, pod_result

AXES = ("slice", "host", "chip")
"""Mesh axes, outermost first: slices (groups), hosts per slice, chips per host."""

CHECKS = ("rank", "mesh", "psum", "all_gather", "ppermute", "all_to_all", "train_step")
"""Every check a result carries, in the order they run."""

RTOL, ATOL = 1e-5, 1e-6
COMPILER_OPTIONS: dict[str, Any] = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
"""The probe's one program is tiny: XLA's optimizations and its newer CPU fusion emitters would
only cost compile time (about half of it), which is most of a probe's time on a few cores."""
EXECUTABLE_KEY = "jaxinfra/probe/executable"
SHARE_TIMEOUT_MS = 300_000

Report = Callable[[str, dict], None]
Lap = Callable[[str], None]


class Stopwatch:
    """Each step's wall and CPU seconds, the CPU of all this process's threads (JAX's, gRPC's, gloo's): where a
    probe's time goes as the group grows (benchmarks/scale.py --steps)."""

    def __init__(self) -> None:
        self.steps: dict[str, dict[str, float]] = {}
        self._last = (time.perf_counter(), time.process_time())

    def lap(self, step: str) -> None:
        now = (time.perf_counter(), time.process_time())
        self.steps[step] = {"wall": round(now[0] - self._last[0], 4), "cpu": round(now[1] - self._last[1], 4)}
        self._last = now


@dataclass(frozen=True)
class ProbeSpec:
    """What the manifests promise about this pod and its workload."""

    expected_rank: int | None  # the rank of the pod's (first) process as the manifests define it (None: no check)
    num_processes: int  # JAX processes in the group: its pods times the processes each holds
    devices_per_process: int  # CPU devices this process must have (a pod of one process: chips per host)
    groups: int  # slices (or 1); mesh axis "slice"
    hosts_per_group: int  # hosts (pods) per slice; mesh axis "host"
    init_timeout: int = 60
    heartbeat_timeout: int = 10
    shutdown_timeout: int = 10
    rank_from: str = ""  # where JAX finds the rank when no env names it (JAX's Kubernetes detection), for the detail
    local_devices: tuple[int, ...] = ()  # the devices of each of the pod's processes, where it holds several
    first_rank: int = 0  # the rank of the pod's first process where it holds several: its i-th is first_rank + i
    coordinator: str = ""  # host:port the pod's processes join where its env names none (a launcher's own choice)

    @property
    def local_processes(self) -> int:
        """The JAX processes of the pod (one host), each its own interpreter."""
        return len(self.local_devices) or 1

    @property
    def chips_per_host(self) -> int:
        """The devices of the pod's processes together: mesh axis "chip" spans them, processes in rank order."""
        return sum(self.local_devices) or self.devices_per_process


class CheckFailed(Exception):
    """A check ran to completion and found a wrong value: the runtime itself still works."""


def configure(devices: int) -> None:
    """Before any backend exists: N CPU devices with gloo cross-process collectives.

    JAX refuses (RuntimeError) to change the device count once a backend is initialized,
    which is why the runner forks workers from a parent that never touched a backend.
    """
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", devices)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")


# --- joining the group -------------------------------------------------------------------


def _env_int(env: Mapping[str, str], name: str) -> int:
    """An integer the contract injects; a missing or malformed one is a pod failure."""
    value = env.get(name)
    if value is None:
        raise ValueError(f"{name} is not set, but the env contract requires it")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not an integer") from None


def init_kwargs(spec: ProbeSpec, env: Mapping[str, str]) -> dict[str, Any]:
    """The `jax.distributed.initialize` arguments the pod's env contract implies.

    Trainer v2 style (`JAX_*`) and Training Operator v1 style (`COORDINATOR_*`, `PROCESS_ID`)
    name everything: then cluster detection is switched off (docs/env-contract.md: JAX
    runs it whenever an argument is unset, and its Kubernetes detector then needs a mounted
    ServiceAccount token as soon as the `kubernetes` package is importable). Otherwise only
    timeouts are passed and JAX's cluster detection (the GKE TPU detector on TPU pods, its
    Kubernetes detector, K8sCluster, on the pods of an Indexed Job that may read the API server)
    supplies the rest, as it would on the cluster.
    """
    requested = int(env.get("JAX_INITIALIZATION_TIMEOUT", spec.init_timeout))
    kwargs: dict[str, Any] = {
        "initialization_timeout": min(requested, spec.init_timeout),
        "heartbeat_timeout_seconds": spec.heartbeat_timeout,
        "shutdown_timeout_seconds": spec.shutdown_timeout,
    }
    if "JAX_PROCESS_ID" in env:
        kwargs.update(
            cluster_detection_method="deactivate",
            coordinator_address=env.get("JAX_COORDINATOR_ADDRESS"),
            num_processes=_env_int(env, "JAX_NUM_PROCESSES"),
            process_id=_env_int(env, "JAX_PROCESS_ID"),
        )
    elif "PROCESS_ID" in env:
        if "COORDINATOR_ADDRESS" not in env:
            raise ValueError("COORDINATOR_ADDRESS is not set, but the env contract requires it")
        kwargs.update(
            cluster_detection_method="deactivate",
            coordinator_address=f"{env['COORDINATOR_ADDRESS']}:{_env_int(env, 'COORDINATOR_PORT')}",
            num_processes=_env_int(env, "NUM_PROCESSES"),
            process_id=_env_int(env, "PROCESS_ID"),
        )
    return kwargs


# --- arrays and verification -------------------------------------------------------------


def _global_array(values: np.ndarray | Formula, sharding: NamedSharding) -> jax.Array:
    """A global array from data every process generates identically: each puts only its shards."""
    return jax.make_array_from_callback(values.shape, sharding, lambda index: values[index])


def _verify(name: str, out: jax.Array, expected: np.ndarray | Formula, exact: bool = True) -> int:
    """Compare every local shard with its slice of the closed-form result; returns the count."""
    for shard in out.addressable_shards:
        got, want = np.asarray(shard.data), expected[shard.index]
        same = np.array_equal(got, want) if exact else np.allclose(got, want, rtol=RTOL, atol=ATOL)
        if not same:
            raise CheckFailed(f"{name} on {shard.device}: got {got.tolist()}, expected {want.tolist()}")
    return len(out.addressable_shards)


# --- checks ------------------------------------------------------------------------------


def check_rank(spec: ProbeSpec) -> str:
    """The rank and device counts JAX sees are the ones the manifests promise."""
    seen = {
        "process_index": (jax.process_index(), spec.expected_rank),
        "process_count": (jax.process_count(), spec.num_processes),
        "local_device_count": (jax.local_device_count(), spec.devices_per_process),
        "device_count": (jax.device_count(), spec.num_processes // spec.local_processes * spec.chips_per_host),
    }
    wrong = [f"{k}={got} (expected {want})" for k, (got, want) in seen.items() if want is not None and got != want]
    if wrong:
        raise CheckFailed("; ".join(wrong))
    detail = ", ".join(f"{k}={got}" for k, (got, _) in seen.items())
    if spec.rank_from:
        where = getattr(getattr(_distributed(), "global_state", None), "coordinator_address", None)
        detail += f"; rank from {spec.rank_from}" + (f", coordinator {where}" if where else "")
    return detail


def _distributed() -> Any:
    """JAX's distributed module (its state: the coordinator address it used), or None where this JAX has none."""
    try:
        from jax._src import distributed
    except ImportError:
        return None
    return distributed


def build_mesh(spec: ProbeSpec) -> Mesh:
    """A mesh shaped like the hardware, each pod's devices forming one "host" row.

    Devices are ordered by (process_index, id), so process p sits at slice p // hosts,
    host p % hosts: the TPU rank rule (worker id + slice id × hosts per slice). A pod of several
    processes (ranks first_rank, first_rank + 1, ...) is one host whose "chip" axis spans its
    processes' devices in rank order, as each holds its share of the host's chips.
    """
    shape = (spec.groups, spec.hosts_per_group, spec.chips_per_host)
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    if len(devices) != int(np.prod(shape)):
        raise CheckFailed(
            f"mesh {dict(zip(AXES, shape))} needs {int(np.prod(shape))} devices, the group has {len(devices)}"
        )
    grid = np.array(devices, dtype=object).reshape(shape)
    rows = grid.reshape(-1, spec.chips_per_host)
    owners = [sorted({d.process_index for d in row}) for row in rows]
    per_host = spec.local_processes
    if owners != [list(range(row * per_host, (row + 1) * per_host)) for row in range(len(rows))]:
        each = "one process" if per_host == 1 else f"{per_host} processes of one pod"
        raise CheckFailed(f"host rows are not {each} each: processes per row {owners}")
    return Mesh(grid, AXES)


def _describe_mesh(mesh: Mesh) -> str:
    """Where this process landed in the mesh, for the check's detail: its host, and its chips where the host holds
    several processes."""
    me = jax.process_index()
    mine = [index for index, d in np.ndenumerate(mesh.devices) if d.process_index == me]
    slice_, host, chip = mine[0]
    shared = len({d.process_index for d in mesh.devices[slice_, host]}) > 1
    chips = f" chips {chip}-{mine[-1][2]}" if len(mine) > 1 else f" chip {chip}"
    shape = dict(zip(mesh.axis_names, mesh.devices.shape))
    return f"mesh {shape}; process {me} is slice {slice_} host {host}{chips if shared else ''}"


def _fingerprint(mesh: Mesh, args: Any) -> bytes:
    """Everything the probe's program is a function of: JAX, the mesh and the arguments."""
    devices = [(d.id, d.process_index) for d in mesh.devices.flat]
    avals = [(a.shape, str(a.dtype), str(a.sharding.spec)) for a in jax.tree_util.tree_leaves(args)]
    return hashlib.sha256(
        repr((jax.__version__, mesh.axis_names, mesh.devices.shape, devices, avals)).encode()
    ).digest()


def _compile(program: Any, args: Any) -> jax.stages.Compiled:
    """Compile with `COMPILER_OPTIONS`, leaving out any this XLA does not know."""
    lowered, options = program.trace(*args).lower(), dict(COMPILER_OPTIONS)
    while True:
        try:
            return lowered.compile(compiler_options=options)
        except jax.errors.JaxRuntimeError as error:  # "No such compile option: 'name'"
            unknown = [name for name in options if f"'{name}'" in str(error)]
            if not unknown:
                raise
            for name in unknown:
                del options[name]


def _kv_store() -> Any:
    """The group's key-value store client, which JAX has no public handle for yet; None if this
    JAX keeps it elsewhere (each process then compiles its own program, as before)."""
    return getattr(getattr(_distributed(), "global_state", None), "client", None)


def compile_once(program: Any, args: Any, mesh: Mesh) -> tuple[jax.stages.Compiled, str]:
    """The group's program, compiled by process 0 alone and loaded by the others.

    Compiling is most of a probe's CPU time, and N processes compiling one SPMD program at
    once on a few cores wait on each other. Process 0 publishes its executable in the
    coordination service's key-value store (as `jax_share_binary_between_hosts` does), with
    a fingerprint of what the program is a function of; a process whose fingerprint differs
    compiles its own, so a group that disagrees still fails as it would on a cluster.
    Returns the executable and where it came from.
    """
    fingerprint = _fingerprint(mesh, args)
    client = _kv_store()
    if client is not None and jax.process_count() > 1:
        if jax.process_index() == 0:
            compiled = _compile(program, args)
            client.key_value_set_bytes(EXECUTABLE_KEY, fingerprint + pickle.dumps(serialize(compiled)))
            return compiled, "compiled, shared with the group"
        shared = client.blocking_key_value_get_bytes(EXECUTABLE_KEY, SHARE_TIMEOUT_MS)
        if shared[: len(fingerprint)] == fingerprint:
            return deserialize_and_load(*pickle.loads(shared[len(fingerprint) :])), "loaded from process 0"
        return _compile(program, args), "compiled (differs from process 0's)"
    return _compile(program, args), "compiled"


def run_collectives(hardware: Mesh, lap: Lap = lambda step: None) -> tuple[dict[str, Callable[[], str]], str]:
    """Every collective and the training step in ONE compiled program (a compile per program
    is most of a probe's time), then one verification per check; and where the program came from.
    `lap` ends the steps "arrays" (the rank and mesh checks, the global inputs), "program" (compiled or loaded) and
    "collectives" (the program run)."""
    mesh = group_mesh(hardware)
    cases = collective_cases(mesh)
    names = tuple(mesh.axis_names)
    spec = P(names)
    sharded = NamedSharding(mesh, spec)
    w, x, y = training_data(mesh.size)
    collectives = jax.shard_map(
        lambda *vs: tuple(body(v) for v, (_, body, _) in zip(vs, cases.values())),
        mesh=mesh,
        in_specs=(spec,) * len(cases),
        out_specs=(spec,) * len(cases),
    )
    step = jax.shard_map(
        partial(sgd_step, names=names, count=y.size),
        mesh=mesh,
        in_specs=(P(), P(names, None), P(names, None)),
        out_specs=(P(), P()),
    )
    replicated, batch = NamedSharding(mesh, P()), NamedSharding(mesh, P(names, None))
    program = jax.jit(lambda vs, w, x, y: (collectives(*vs), step(w, x, y)))
    args = (
        tuple(_global_array(v, sharded) for v, _, _ in cases.values()),
        _global_array(w, replicated),
        _global_array(x, batch),
        _global_array(y, batch),
    )
    lap("arrays")
    compiled, origin = compile_once(program, args, mesh)
    lap("program")
    outs, (new_w, loss) = jax.block_until_ready(compiled(*args))
    lap("collectives")

    groups = f" (nested groups {'x'.join(map(str, mesh.devices.shape))})" if len(names) > 1 else ""

    def verify(name: str, out: jax.Array, expected: Formula) -> Callable[[], str]:
        return lambda: (
            f"{name} over {mesh.size} devices{groups} verified on {_verify(name, out, expected)} local shards"
        )

    def train_step() -> str:
        want_w, want_loss = reference_step(w, x, y)
        shards = _verify("updated params", new_w, want_w, exact=False)
        _verify("loss", loss, want_loss, exact=False)
        return (
            f"batch {x.shape[0]} over {mesh.size} devices; loss {float(want_loss):.6f}; "
            f"params match the reference on {shards} local replicas"
        )

    return {
        **{name: verify(name, out, expected) for (name, (_, _, expected)), out in zip(cases.items(), outs)},
        "train_step": train_step,
    }, origin


# --- orchestration -----------------------------------------------------------------------


def _record(checks: dict[str, dict], name: str, check: Callable[[], str]) -> bool:
    """Run one check and record it; False when it raised anything but `CheckFailed`.

    Such an exception may leave peers waiting inside a collective, so the remaining
    cross-process checks are skipped rather than risk a mismatched collective order.
    """
    try:
        checks[name] = {"ok": True, "detail": check()}
    except CheckFailed as failed:
        checks[name] = {"ok": False, "detail": str(failed)}
    except Exception as error:  # noqa: BLE001 - recorded, never raised (the verdict says why)
        checks[name] = {"ok": False, "detail": f"{type(error).__name__}: {error}"}
        return False
    return True


def _skip(checks: dict[str, dict], names: list[str], why: str) -> None:
    for name in names:
        checks[name] = {"ok": False, "detail": f"skipped: {why}"}


def run_checks(spec: ProbeSpec, lap: Lap = lambda step: None) -> tuple[dict[str, dict], str | None]:
    """Every check, in `CHECKS` order, and where the program came from (None: none ran). Skips
    depend only on global facts (spec, device list), so all processes take the same path and
    reach the same collectives."""
    checks: dict[str, dict] = {}
    _record(checks, "rank", partial(check_rank, spec))
    meshes: list[Mesh] = []

    def check_mesh() -> str:
        meshes.append(build_mesh(spec))
        return _describe_mesh(meshes[0])

    _record(checks, "mesh", check_mesh)
    pending = list(CHECKS[2:])
    if not meshes:
        _skip(checks, pending, "no mesh")
        return checks, None
    try:
        verifications, program = run_collectives(meshes[0], lap)
    except Exception as error:  # noqa: BLE001 - the runtime failed: every collective check says why
        for name in pending:
            checks[name] = {"ok": False, "detail": f"{type(error).__name__}: {error}"}
        return checks, None
    for name in pending:
        _record(checks, name, verifications[name])
    lap("verify")
    return checks, program


def run_probe(spec: ProbeSpec, report: Report = lambda phase, data: None) -> dict:
    """Join the group from the process env, run every check, shut down through the barrier.

    Call `configure` first (before any backend exists). Exceptions from `initialize`
    propagate (the pod failed to start). After it, check failures and errors are recorded
    in the result; only a backend that cannot be created or a `report` that raises
    propagates, and then only after `shutdown`, which always runs: process 0 hosts the
    coordination service and must not leave before the others have finished.
    """
    report("initializing", {"expected_rank": spec.expected_rank, "num_processes": spec.num_processes})
    start, watch = time.perf_counter(), Stopwatch()
    jax.distributed.initialize(**init_kwargs(spec, os.environ))
    connect_s = time.perf_counter() - start
    watch.lap("connect")
    try:
        jax.devices()  # creates the CPU backend: the global device exchange and gloo setup
        init_s = time.perf_counter() - start
        watch.lap("devices")
        report("running", {"process_index": jax.process_index(), "process_count": jax.process_count()})
        checks, program = run_checks(spec, watch.lap)
        checks_s = time.perf_counter() - start - init_s
        result = {
            "rank": jax.process_index(),
            "process_count": jax.process_count(),
            "local_devices": jax.local_device_count(),
            "global_devices": jax.device_count(),
            "checks": checks,
            "program": program,
            "ok": all(c["ok"] for c in checks.values()),
        }
    finally:
        shutdown_start = time.perf_counter()
        jax.distributed.shutdown()
    watch.lap("shutdown")
    result["timings"] = {
        "connect_s": round(connect_s, 3),
        "init_s": round(init_s, 3),
        "checks_s": round(checks_s, 3),
        "shutdown_s": round(time.perf_counter() - shutdown_start, 3),
        "steps": watch.steps,
    }
    return result


def run_pod(spec: ProbeSpec, report: Report = lambda phase, data: None) -> dict:
    """The pod's probe: its one process here (`configure`, `run_probe`: no fork), or each of its several forked
    before any backend exists (`local_processes`), its first reporting its phases, and one result for the pod."""
    if spec.local_processes == 1:
        configure(spec.devices_per_process)
        return run_probe(spec, report)

    def run(index: int) -> dict:
        rank = spec.first_rank + index
        devices = spec.local_devices[index]
        os.environ.update(local_env(os.environ, rank, spec.num_processes, devices, spec.coordinator))
        configure(devices)
        expected = None if spec.expected_rank is None else spec.expected_rank + index
        mine = replace(spec, expected_rank=expected, devices_per_process=devices)
        return run_probe(mine, report if index == 0 else lambda phase, data: None)

    def failed(index: int, why: str) -> dict:
        return {"rank": spec.first_rank + index, "ok": False, "error": why}

    return pod_result(fork_each(spec.local_processes, run, failed), CHECKS)


def _parse(argv: list[str] | None) -> ProbeSpec:
    parser = argparse.ArgumentParser(
        prog="python -m jaxinfra_sim.jax.probe",
        description="Run the collectives probe in this process; the env supplies the contract.",
    )
    parser.add_argument("--expected-rank", type=int, default=None)
    parser.add_argument("--num-processes", type=int, required=True)
    parser.add_argument("--devices", type=int, default=1, help="CPU devices of each process (chips per host / local)")
    parser.add_argument("--local-processes", type=int, default=1, help="JAX processes of this pod, each forked")
    parser.add_argument("--first-rank", type=int, default=0, help="rank of this pod's first process (local > 1)")
    parser.add_argument("--coordinator", default="", help="host:port they join where the env names none")
    parser.add_argument("--groups", type=int, default=1, help="slices (mesh axis 'slice')")
    parser.add_argument("--hosts", type=int, default=None, help="hosts per slice (default: pods / groups)")
    parser.add_argument("--init-timeout", type=int, default=60)
    parser.add_argument("--heartbeat-timeout", type=int, default=10)
    parser.add_argument("--shutdown-timeout", type=int, default=10)
    args = parser.parse_args(argv)
    pods = args.num_processes // args.local_processes
    return ProbeSpec(
        expected_rank=args.expected_rank,
        num_processes=args.num_processes,
        devices_per_process=args.devices,
        groups=args.groups,
        hosts_per_group=args.hosts if args.hosts is not None else pods // args.groups,
        init_timeout=args.init_timeout,
        heartbeat_timeout=args.heartbeat_timeout,
        shutdown_timeout=args.shutdown_timeout,
        local_devices=(args.devices,) * args.local_processes if args.local_processes > 1 else (),
        first_rank=args.first_rank,
        coordinator=args.coordinator,
    )


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send file descriptor 1 to stderr meanwhile: gloo's C++ code prints
    "[Gloo] Rank ... connected" on stdout, which must carry only the result line."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def main(argv: list[str] | None = None) -> int:
    """Fresh-interpreter entry: the pod's probe (`run_pod`), one JSON line; exit 0 only if all ok."""
    spec = _parse(argv)
    with _stdout_to_stderr():
        result = run_pod(spec)
    print(json.dumps(result, sort_keys=True), flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
