"""The probe's one program, as closed forms: the four cross-process collectives over nested groups of devices and
one data-parallel SGD step, each with the global result every device must end with (`probe.run_collectives` runs
them and checks each process's own shards).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh

SEED = 20240611
ROWS_PER_DEVICE = 4
FEATURES, OUTPUTS = 8, 4
LEARNING_RATE = 0.1
GROUP_LIMIT = 8
"""The most devices one of the probe's collectives spans. XLA's CPU collectives connect every pair of a group's
devices before its first collective (gloo's connectFullMesh, through the coordination service's key-value store:
openxla/xla xla/backends/cpu/collectives/gloo_collectives.cc), so one group of all N devices costs N² set-ups on
this machine's few cores, 5.9 s of a 128-process probe here. Nested groups of at most 8 give every collective the
same global result for N × 7 per level."""


def group_sizes(devices: int, limit: int = GROUP_LIMIT) -> tuple[int, ...]:
    """`devices` as a product of group sizes of at most `limit`, outermost first (a prime past `limit` stays one
    group): the shape the probe's collectives nest over."""
    sizes: list[int] = []
    while devices > 1:
        size = next((k for k in range(min(limit, devices), 1, -1) if devices % k == 0), devices)
        sizes.append(size)
        devices //= size
    return tuple(reversed(sizes)) or (1,)


def group_mesh(mesh: Mesh) -> Mesh:
    """The hardware mesh's devices, in the same flat order, reshaped to nested groups (`group_sizes`)."""
    sizes = group_sizes(mesh.size)
    return Mesh(mesh.devices.reshape(sizes), tuple(f"group{i}" for i in range(len(sizes))))


def _psum(v: jax.Array, names: tuple[str, ...]) -> jax.Array:
    for name in names:
        v = lax.psum(v, name)
    return v


def _all_gather(v: jax.Array, names: tuple[str, ...]) -> jax.Array:
    """Innermost group first: each level concatenates whole lower groups, so the result is in flat device order."""
    for name in reversed(names):
        v = lax.all_gather(v, name, tiled=True)
    return v


def _shift(v: jax.Array, name: str, size: int, point_to_point: bool) -> jax.Array:
    """Each device of a group of `size` along `name` gets its predecessor's value: by collective-permute (XLA's
    send/recv pairs) or, where that would span too many devices, picked from the group's all-gather."""
    if point_to_point:
        return lax.ppermute(v, name, [(i, (i + 1) % size) for i in range(size)])
    return lax.all_gather(v, name)[(lax.axis_index(name) - 1) % size]


def _ring(v: jax.Array, names: tuple[str, ...], sizes: tuple[int, ...]) -> jax.Array:
    """A shift by one along the flat device order: a shift within the innermost group, and at each outer level
    the shift of what the devices at the start of every inner group must receive from the previous group.

    One group shifts by collective-permute. Nested groups cannot: XLA's CPU collective-permute gives every
    permute a communicator of all the program's devices, whatever its pairs (openxla/xla
    xla/backends/cpu/runtime/collective_permute_thunk.cc), so it alone would cost the N² set-ups `GROUP_LIMIT`
    avoids; their shifts are picked from each group's all-gather instead."""
    out, first = v, jnp.bool_(True)  # first: this device starts every group inside the current level
    for level, (name, size) in enumerate(reversed(list(zip(names, sizes)))):
        shifted = _shift(out, name, size, point_to_point=len(names) == 1)
        out = shifted if level == 0 else jnp.where(first, shifted, out)
        first = first & (lax.axis_index(name) == 0)
    return out


def _all_to_all(v: jax.Array, names: tuple[str, ...], sizes: tuple[int, ...]) -> jax.Array:
    """The flat all-to-all as one exchange per level: the local block, indexed by destination device, is shaped by
    the groups, and level j trades its dimension j, so block [d, q] ends at [q, d]."""
    block = v.reshape(sizes)
    for axis, name in enumerate(names):
        block = lax.all_to_all(block, name, split_axis=axis, concat_axis=axis, tiled=True)
    return block.reshape(v.shape)


@dataclass(frozen=True)
class Formula:
    """A 1-D global array given by a formula of the flat index: a process makes only the slices it puts or checks.

    All N devices' inputs and results are N² elements for all_gather and all_to_all (4 MiB at 1,024 devices, a copy
    of each in every process); a process needs only its own shards of them."""

    size: int
    at: Callable[[np.ndarray], np.ndarray]

    @property
    def shape(self) -> tuple[int]:
        return (self.size,)

    def __getitem__(self, index: tuple[slice, ...] | None) -> np.ndarray:
        flat = range(self.size)[index[0] if index else slice(None)]
        return self.at(np.arange(flat.start, flat.stop, flat.step, dtype=np.int64)).astype(np.int32)


def collective_cases(mesh: Mesh) -> dict[str, tuple[Formula, Callable, Formula]]:
    """Per collective over every device of `mesh` (a `group_mesh`): the global input, the per-device body, the
    closed-form global output.

    Arrays are sharded over every mesh axis: device d (in flat order: process p, chip c, d = p * chips + c) holds
    element d, or for all_to_all a block of one element per device.
    """
    n, names, sizes = mesh.size, tuple(mesh.axis_names), tuple(mesh.devices.shape)
    values = Formula(n, lambda d: d + 1)
    return {
        # every device ends with the sum of (global index + 1) over all devices
        "psum": (values, partial(_psum, names=names), Formula(n, lambda d: np.full_like(d, n * (n + 1) // 2))),
        # every device ends with all values, in device order
        "all_gather": (values, partial(_all_gather, names=names), Formula(n * n, lambda k: k % n + 1)),
        # a ring across the flat device order: each device receives its predecessor's value
        "ppermute": (values, partial(_ring, names=names, sizes=sizes), Formula(n, lambda d: (d - 1) % n + 1)),
        # device d sends d * n + q to each device q, so device d ends with q * n + d in place q
        "all_to_all": (
            Formula(n * n, lambda k: k),
            partial(_all_to_all, names=names, sizes=sizes),
            Formula(n * n, lambda k: k % n * n + k // n),
        ),
    }


def _matmul(x: jax.Array, w: jax.Array) -> jax.Array:
    """x @ w as products and a sum: XLA's CPU backend hands a dot to oneDNN, which generates its kernel in every
    process on first use (about 10 ms each here, most of a 128-process step); these tiny shapes need no kernel."""
    return jnp.sum(x[:, :, None] * w[None, :, :], axis=1)


def sgd_step(w: jax.Array, x: jax.Array, y: jax.Array, names: tuple[str, ...], count: int) -> tuple[jax.Array, ...]:
    """One data-parallel SGD step on this device's rows: the gradient and loss of its squared errors, summed over
    every device (the gradient all-reduce) and divided by the global batch's `count` of errors."""
    mine = lax.pcast(w, names, to="varying")  # this device's copy: its gradient stays local until the psums
    loss, grad = jax.value_and_grad(lambda v: jnp.sum((_matmul(x, v) - y) ** 2))(mine)
    loss, grad = _psum(loss, names) / count, _psum(grad, names) / count
    return w - LEARNING_RATE * grad, loss


def reference_step(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same step on the full batch in float64 numpy: no JAX, no distribution."""
    w, x, y = (a.astype(np.float64) for a in (w, x, y))
    err = x @ w - y
    grad = 2.0 * x.T @ err / err.size
    return w - LEARNING_RATE * grad, np.asarray(np.mean(err**2))


def training_data(devices: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weights and a global batch from a fixed seed: identical in every process."""
    rng = np.random.default_rng(SEED)
    w = rng.standard_normal((FEATURES, OUTPUTS)).astype(np.float32)
    x = rng.standard_normal((ROWS_PER_DEVICE * devices, FEATURES)).astype(np.float32)
    y = rng.standard_normal((ROWS_PER_DEVICE * devices, OUTPUTS)).astype(np.float32)
    return w, x, y
