"""The stacks' training program: `python -m train`, run from this folder (the image's WORKDIR).

A small but complete multi-host JAX training job: it initializes from whichever env contract the
pod got (jaxinfra's, Kubeflow's, GKE's TPU platform's, or none), builds a `data` x `model` mesh from
the job's shape, trains a 2-layer MLP with optax's Adam on data it generates from a seed, and
checkpoints with orbax-checkpoint so a restarted or preempted group resumes where it stopped.
Only the env and JAX's device discovery differ between CPU pools, GPUs and TPUs.

Every knob is an environment variable (`SETTINGS`); the job's stack sets them in `JaxJob(env=...)`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

#: Each setting: (environment variable, default, why). The only place defaults live.
SETTINGS: dict[str, tuple[str, Any, str]] = {
    "steps": ("TRAIN_STEPS", 100, "optimizer steps in all; a resumed run continues up to this step"),
    "seed": ("TRAIN_SEED", 0, "the data, the initial weights and so every loss follow from it"),
    "batch": ("TRAIN_BATCH", 0, "global batch, the same for any process count (so losses match); 0: 64, "
              "or the next multiple of the data axis when that is not one"),
    "learning_rate": ("TRAIN_LEARNING_RATE", 3e-3, "Adam's step size"),
    "hidden": ("TRAIN_HIDDEN", 128, "width of the hidden layer, sharded over the `model` axis"),
    "model_parallel": ("TRAIN_MODEL_PARALLEL", 1, "size of the `model` mesh axis; divides each host's devices"),
    "checkpoint_every": ("TRAIN_CHECKPOINT_EVERY", 10, "steps between checkpoints (and one at the end)"),
    "checkpoint_dir": ("JAXINFRA_CHECKPOINT_DIR", "", "shared by all pods and outliving them; unset: no checkpoints"),
    "min_step_seconds": ("TRAIN_MIN_STEP_SECONDS", 0.0, "pace each step to at least this long, standing in for a "
                         "bigger model, so a rehearsal can interrupt the run mid-training"),
    "heartbeat_timeout": ("TRAIN_HEARTBEAT_TIMEOUT", 30, "seconds before JAX declares a silent peer dead (JAX: 100)"),
    "shutdown_timeout": ("TRAIN_SHUTDOWN_TIMEOUT", 30, "seconds the shutdown barrier waits for peers (JAX: 300)"),
}

DATASET_SIZE, FEATURES, TARGETS, TEACHER_WIDTH = 8192, 32, 8, 64   # 1.3 MB of float32, made from the seed
DATA_STREAM, INIT_STREAM, ORDER_STREAM = 0, 1, 2   # independent numpy streams of the one seed
DEFAULT_BATCH = 64
EXIT_INPUT = 2   # a setting or the env contract is wrong: nothing was run
EXIT_PREEMPTED = 143   # stopped by SIGTERM after saving: not done. A drained pod that exits 0 counts as Succeeded
#                      (kubernetes/kubernetes#120182), and a Job whose pods all succeeded is complete: the run would end
#                      there, unfinished. Non-zero, the pods fail and the JobSet (or Job) restarts and resumes.


@dataclasses.dataclass(frozen=True)
class Config:
    """SETTINGS, read from the environment."""

    steps: int
    seed: int
    batch: int
    learning_rate: float
    hidden: int
    model_parallel: int
    checkpoint_every: int
    checkpoint_dir: str
    min_step_seconds: float
    heartbeat_timeout: int
    shutdown_timeout: int


class InputError(Exception):
    """Settings or env the program cannot run with; one line per problem, all reported at once."""


def _number(env: Mapping[str, str], name: str, default: Any, problems: list[str], low: float) -> Any:
    """One numeric setting, typed as its default; a problem noted, not raised, so all are reported."""
    raw = env.get(name, "")
    if raw == "":
        return default
    kind = type(default)
    what = "a whole number" if kind is int else "a number"
    fix = f"fix: {what} of at least {low}, or unset it (default: {default})"
    try:
        value = kind(raw)
    except ValueError:
        problems.append(f"{name} = {raw!r}: not {what}; {fix}")
        return default
    if not value >= low or math.isinf(value):
        problems.append(f"{name} = {raw!r}: must be at least {low}; {fix}")
    return value


def load_config(env: Mapping[str, str]) -> Config:
    """The settings from the environment; every bad value reported at once."""
    problems: list[str] = []
    values: dict[str, Any] = {}
    for field, (name, default, _) in SETTINGS.items():
        if isinstance(default, str):
            values[field] = env.get(name, default)
        else:
            low = 0 if field in ("seed", "batch", "min_step_seconds") else 1
            values[field] = _number(env, name, default, problems, low)
    if values["hidden"] % values["model_parallel"]:
        problems.append(f"TRAIN_HIDDEN = {values['hidden']}: must be a multiple of TRAIN_MODEL_PARALLEL = "
                        f"{values['model_parallel']}; fix: round it to a multiple")
    if problems:
        raise InputError(problems)
    return Config(**values)


def _ints(env: Mapping[str, str], names: tuple[str, ...], problems: list[str]) -> list[int]:
    """Whole numbers of the env contract, each missing or malformed one noted in `problems`."""
    out = []
    for name in names:
        raw = env.get(name)
        if raw is None or not raw.strip().isdigit():
            problems.append(f"{name} = {raw!r}: the env contract needs a whole number here; "
                            "fix: set it as the workload's controller would (jaxinfra explain shows it per rank)")
            out.append(0)
        else:
            out.append(int(raw))
    return out


def distributed_args(env: Mapping[str, str], cfg: Config) -> dict[str, Any] | None:
    """`jax.distributed.initialize` keyword arguments from the pod's env contract (jaxinfra's docs,
    docs/env-contract.md), or None for a lone process with no contract (no distributed runtime at all).

    - jaxinfra (`jobset`, `job`) and Kubeflow Trainer v2's JAX plugin: `JAX_COORDINATOR_ADDRESS`,
      `JAX_NUM_PROCESSES`, `JAX_PROCESS_ID`; JAX reads only the first, so count and rank are passed.
    - Kubeflow Training Operator v1 (`jaxjob`): `COORDINATOR_ADDRESS` (no port), `COORDINATOR_PORT`,
      `NUM_PROCESSES`, `PROCESS_ID`.
    - GKE TPU multi-slice (no `JAX_PROCESS_ID`): a bare initialize; JAX's GKE TPU detection derives
      the rank as `TPU_WORKER_ID + MEGASCALE_SLICE_ID x hosts`.

    With everything explicit, cluster detection is switched off: JAX runs it whenever an argument is
    unset or `local_device_ids` is, and its Kubernetes detector, when the `kubernetes` package is
    importable, loads the in-cluster config and raises without a ServiceAccount token, which
    jaxinfra does not mount (jax/_src/distributed.py, clusters/k8s_cluster.py; issue 12).
    """
    problems: list[str] = []
    timeouts = {
        "initialization_timeout": _ints(env, ("JAX_INITIALIZATION_TIMEOUT",), problems)[0]
        if "JAX_INITIALIZATION_TIMEOUT" in env else 300,   # JAX's own default
        "heartbeat_timeout_seconds": cfg.heartbeat_timeout,
        "shutdown_timeout_seconds": cfg.shutdown_timeout,
    }
    args: dict[str, Any] | None
    if "JAX_PROCESS_ID" in env:
        count, rank = _ints(env, ("JAX_NUM_PROCESSES", "JAX_PROCESS_ID"), problems)
        if not env.get("JAX_COORDINATOR_ADDRESS"):
            problems.append("JAX_COORDINATOR_ADDRESS is unset beside JAX_PROCESS_ID; fix: set it to "
                            "<rank-0 host>:<port>, as jaxinfra renders it")
        args = {"coordinator_address": env.get("JAX_COORDINATOR_ADDRESS"), "num_processes": count,
                "process_id": rank, "cluster_detection_method": "deactivate", **timeouts}
    elif "PROCESS_ID" in env and "COORDINATOR_ADDRESS" in env:
        port, count, rank = _ints(env, ("COORDINATOR_PORT", "NUM_PROCESSES", "PROCESS_ID"), problems)
        args = {"coordinator_address": f"{env['COORDINATOR_ADDRESS']}:{port}", "num_processes": count,
                "process_id": rank, "cluster_detection_method": "deactivate", **timeouts}
    elif env.get("JAX_COORDINATOR_ADDRESS") or env.get("MEGASCALE_COORDINATOR_ADDRESS"):
        args = timeouts
    else:
        args = None
    if problems:
        raise InputError(problems)
    return args


def slices(env: Mapping[str, str]) -> int:
    """How many slices the job spans: GKE's multi-slice env says; everything else is one."""
    problems: list[str] = []
    count = _ints(env, ("MEGASCALE_NUM_SLICES",), problems)[0] if "MEGASCALE_NUM_SLICES" in env else 1
    if problems or count < 1:
        raise InputError(problems or [f"MEGASCALE_NUM_SLICES = {count}: must be at least 1"])
    return count


class Preemption:
    """SIGTERM (a Spot reclaim, a node drain, a JobSet restart) noted here and acted on between steps.

    Every step carries each host's flag into the compiled step, whose all-reduce tells every host
    at once whether any was signalled; that step then leaves the state unchanged, so all hosts save
    the same step, the last one finished. JAX's own preemption service
    (`multihost_utils.reached_preemption_sync_point`) is not used: it polls for SIGTERM once a
    second (xla/tsl/distributed_runtime/preemption/preemption_notifier.cc, kListenInterval) and then
    saves at the hosts' maximum step + 1, many steps later for a small model, and it needs the
    distributed runtime, which a lone process does not start. It is switched off so that its own
    SIGTERM handler does not replace this one.
    """

    def __init__(self) -> None:
        self.signalled = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: self.signalled.set())


@dataclasses.dataclass(frozen=True)
class Data:
    """A teacher network's outputs on Gaussian inputs, all from the seed: nothing is downloaded."""

    x: np.ndarray
    y: np.ndarray
    seed: int

    @classmethod
    def make(cls, seed: int) -> Data:
        rng = np.random.default_rng([seed, DATA_STREAM])
        x = rng.standard_normal((DATASET_SIZE, FEATURES))
        w1 = rng.standard_normal((FEATURES, TEACHER_WIDTH)) / np.sqrt(FEATURES)
        w2 = rng.standard_normal((TEACHER_WIDTH, TARGETS)) / np.sqrt(TEACHER_WIDTH)
        y = np.tanh(x @ w1) @ w2 + 0.05 * rng.standard_normal((DATASET_SIZE, TARGETS))
        # Made in float64, stored in float32: the BLAS's summation order does not reach the data.
        return cls(x.astype(np.float32), y.astype(np.float32), seed)

    def batch(self, step: int, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The global batch of 0-based `step`: a function of seed and step alone, so neither the
        process count nor a restart changes the data order, and resuming needs no loader state."""
        per_epoch = DATASET_SIZE // size
        epoch, i = divmod(step, per_epoch)
        rows = _epoch_order(self.seed, epoch)[i * size:(i + 1) * size]
        return self.x[rows], self.y[rows]


@functools.lru_cache(maxsize=2)
def _epoch_order(seed: int, epoch: int) -> np.ndarray:
    return np.random.default_rng([seed, ORDER_STREAM, epoch]).permutation(DATASET_SIZE)


def log(line: str) -> None:
    """Process 0 speaks for the group; flushed at once, since pod logs are read live."""
    import jax

    if jax.process_index() == 0:
        print(line, flush=True)


def make_mesh(cfg: Config, num_slices: int) -> Any:
    """A (`data`, `model`) mesh over slices x hosts x local devices: `model` stays inside a host (its
    fastest links), `data` runs across local device groups, hosts and slices."""
    import jax
    from jax.sharding import Mesh

    processes, local = jax.process_count(), jax.local_device_count()
    problems = []
    if processes % num_slices:
        problems.append(f"MEGASCALE_NUM_SLICES = {num_slices}: does not divide the {processes} processes; "
                        "fix: run one process per host of every slice")
    if local % cfg.model_parallel:
        problems.append(f"TRAIN_MODEL_PARALLEL = {cfg.model_parallel}: must divide the {local} devices of a host; "
                        f"fix: use a divisor of {local}")
    if problems:
        raise InputError(problems)
    hosts = processes // num_slices
    order = sorted(jax.devices(), key=lambda d: (getattr(d, "slice_index", d.process_index // hosts),
                                                 d.process_index, d.id))
    return Mesh(np.array(order).reshape(-1, cfg.model_parallel), ("data", "model"))


def global_batch(cfg: Config, mesh: Any) -> int:
    """TRAIN_BATCH, or by default 64 rounded up to a multiple of the data axis, which splits it evenly."""
    data = mesh.shape["data"]
    batch = cfg.batch or data * -(-DEFAULT_BATCH // data)
    problems = []
    if batch % data:
        problems.append(f"TRAIN_BATCH = {batch}: must be a multiple of the data axis ({data} = devices / "
                        f"TRAIN_MODEL_PARALLEL); fix: use a multiple of {data}, or unset it")
    if batch > DATASET_SIZE:
        problems.append(f"TRAIN_BATCH = {batch}: larger than the {DATASET_SIZE} examples; fix: set at most "
                        f"{DATASET_SIZE - DATASET_SIZE % data}")
    if problems:
        raise InputError(problems)
    return batch


class Model(NamedTuple):
    """The 2-layer MLP with its Adam state, laid out on the mesh."""

    init: Callable[[], Any]   # the fresh train state: {"params": weights, "opt": Adam's moments}
    abstract: Any             # its shapes, dtypes and shardings: orbax's restore target
    step: Callable[..., Any]  # (state, x, y, preempt flags) -> (state, loss, stop); compiled once


def place(array: np.ndarray, sharding: Any) -> Any:
    """A global array from host values every process holds alike; each process places only its shards."""
    import jax

    return jax.make_array_from_callback(array.shape, sharding, lambda index: array[index])


def build(cfg: Config, mesh: Any) -> Model:
    """The model's functions over `mesh`; nothing is computed until `init` or `step` runs."""
    import jax
    import jax.numpy as jnp
    import optax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    def sharded(*spec: str | None) -> NamedSharding:
        return NamedSharding(mesh, P(*spec))

    tx = optax.adam(cfg.learning_rate)
    shapes = {"w1": (FEATURES, cfg.hidden), "b1": (cfg.hidden,), "w2": (cfg.hidden, TARGETS), "b2": (TARGETS,)}
    # The hidden layer is split over `model`; the batch over `data` (in the step's inputs).
    params_sharding = {"w1": sharded(None, "model"), "b1": sharded("model"), "w2": sharded("model", None),
                       "b2": sharded()}
    params_abstract = {k: jax.ShapeDtypeStruct(shape, jnp.float32, sharding=params_sharding[k])
                       for k, shape in shapes.items()}
    opt_sharding = optax.tree_map_params(tx, lambda _, s: s, jax.eval_shape(tx.init, params_abstract),
                                         params_sharding, transform_non_params=lambda _: sharded())
    state_sharding = {"params": params_sharding, "opt": opt_sharding}
    abstract = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
                            {"params": params_abstract, "opt": jax.eval_shape(tx.init, params_abstract)},
                            state_sharding)

    def init() -> dict[str, Any]:
        rng = np.random.default_rng([cfg.seed, INIT_STREAM])
        weights = {"w1": rng.standard_normal(shapes["w1"], dtype=np.float32) / np.float32(np.sqrt(FEATURES)),
                   "b1": np.zeros(shapes["b1"], np.float32),
                   "w2": rng.standard_normal(shapes["w2"], dtype=np.float32) / np.float32(np.sqrt(cfg.hidden)),
                   "b2": np.zeros(shapes["b2"], np.float32)}
        params = {k: place(v, params_sharding[k]) for k, v in weights.items()}
        return {"params": params, "opt": jax.jit(tx.init, out_shardings=opt_sharding)(params)}

    def loss_fn(params: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
        hidden = jax.nn.gelu(x @ params["w1"] + params["b1"])
        return jnp.mean((hidden @ params["w2"] + params["b2"] - y) ** 2)

    @functools.partial(jax.jit, donate_argnums=0, out_shardings=(state_sharding, sharded(), sharded()))
    def step(state: dict[str, Any], x: jax.Array, y: jax.Array, flags: jax.Array) -> tuple[Any, jax.Array, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(state["params"], x, y)
        updates, opt = tx.update(grads, state["opt"], state["params"])
        new = {"params": optax.apply_updates(state["params"], updates), "opt": opt}
        stop = jnp.any(flags)   # an all-reduce over every device: did any host get SIGTERM?
        return jax.tree.map(lambda n, o: jnp.where(stop, o, n), new, state), loss, stop

    return Model(init, abstract, step)


def checkpoints(cfg: Config) -> Any:
    """orbax-checkpoint's manager over the job's checkpoint directory, or None without one."""
    if not cfg.checkpoint_dir:
        return None
    import orbax.checkpoint as ocp

    # The loop calls save only at the steps it wants saved: a call costs ~2 ms even when orbax's
    # policy declines it, as much as a whole step of this model on a CPU.
    options = ocp.CheckpointManagerOptions(max_to_keep=3)
    return ocp.CheckpointManager(os.path.abspath(cfg.checkpoint_dir), options=options)


def train(cfg: Config, env: Mapping[str, str], preemption: Preemption) -> bool:
    """Join the group, lay out the mesh, restore or initialize, train; always leave through shutdown. True when
    SIGTERM stopped it."""
    import jax

    args = distributed_args(env, cfg)
    num_slices = slices(env)
    jax.config.update("jax_enable_preemption_service", False)   # see Preemption
    if args is not None:
        jax.distributed.initialize(**args)
    try:
        mesh = make_mesh(cfg, num_slices)
        cfg = dataclasses.replace(cfg, batch=global_batch(cfg, mesh))
        log(f"train: {jax.process_count()} processes x {jax.local_device_count()} {jax.devices()[0].platform} "
            f"devices, {num_slices} slice(s), mesh data={mesh.shape['data']} model={mesh.shape['model']}, "
            f"global batch {cfg.batch}, {cfg.steps} steps")
        model = build(cfg, mesh)
        manager = checkpoints(cfg)
        try:
            if manager is not None and (step := manager.latest_step()) is not None:
                import orbax.checkpoint as ocp

                state = manager.restore(step, args=ocp.args.StandardRestore(model.abstract))
                log(f"resumed from step {step}")
            else:
                state, step = model.init(), 0
            return _loop(cfg, mesh, model, state, step, manager, preemption)
        finally:
            if manager is not None:
                manager.wait_until_finished()   # an async save in flight completes before the exit
                manager.close()
    finally:
        if args is not None:
            jax.distributed.shutdown()   # through the barrier: rank 0 hosts the coordination service


def _loop(cfg: Config, mesh: Any, model: Model, state: Any, step: int, manager: Any, preemption: Preemption) -> bool:
    """Train from `step` to `cfg.steps`, saving every `checkpoint_every` steps, at the end, and on SIGTERM;
    True when SIGTERM stopped it."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    data = Data.make(cfg.seed)
    rows = NamedSharding(mesh, P("data", None))
    per_device = NamedSharding(mesh, P(("data", "model")))
    flags = np.zeros(jax.local_device_count(), bool)
    start, first, last = step, 0.0, 0.0   # when the first and the last step of this run ended
    while step < cfg.steps:
        began = time.monotonic()
        x, y = data.batch(step, cfg.batch)
        flags[:] = preemption.signalled.is_set()
        state, loss, stop = model.step(state, place(x, rows), place(y, rows),
                                       jax.make_array_from_process_local_data(per_device, flags))
        if bool(stop):   # that step left the state as it was: save the last finished one
            if manager is None:
                log(f"preempted at step {step}: no checkpoint (JAXINFRA_CHECKPOINT_DIR unset)")
                return True
            if manager.latest_step() != step:
                _save(manager, step, state, force=True)
            manager.wait_until_finished()
            log(f"preempted at step {step}: checkpoint saved")
            return True
        step += 1
        log(f"step {step} loss {float(loss):.7g}")
        if manager is not None and step % cfg.checkpoint_every == 0:
            _save(manager, step, state)
        if (rest := cfg.min_step_seconds - (time.monotonic() - began)) > 0:
            time.sleep(rest)
        last = time.monotonic()
        first = first or last
    if manager is not None and manager.latest_step() != step:
        _save(manager, step, state, force=True)   # the end too, so a rerun starts where this one ended
    rate = f": {(step - start - 1) / (last - first):.1f} steps/s after the first step's compile" \
        if step - start > 1 else ""
    log(f"finished at step {step}{rate}")
    return False


def _save(manager: Any, step: int, state: Any, force: bool = False) -> None:
    """Start an async save of `state` as `step`; training goes on while orbax writes it."""
    import orbax.checkpoint as ocp

    manager.save(step, args=ocp.args.StandardSave(state), force=force)


def main() -> int:
    env = dict(os.environ)
    preemption = Preemption()   # first: a SIGTERM during start-up is honoured too
    try:
        cfg = load_config(env)
        stopped = train(cfg, env, preemption)
    except InputError as err:
        for problem in err.args[0]:
            print(f"train: error: {problem}", file=sys.stderr)
        print(f"train: {len(err.args[0])} problem(s); nothing trained", file=sys.stderr)
        return EXIT_INPUT
    return EXIT_PREEMPTED if stopped else 0


if __name__ == "__main__":
    sys.exit(main())
