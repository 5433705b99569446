"""An MNIST classifier trained with SPMD data parallelism over every process's devices, in the style of Kubeflow's
JAXJob example (kubeflow/trainer release-1.9 examples/jax/jax-dist-spmd-mnist), written for jaxinfra's tests: the
program picks its own number of host devices through XLA_FLAGS before JAX is imported, joins the other processes
with the env a Training Operator v1 JAXJob gives each pod (COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES,
PROCESS_ID), shards each batch over one mesh of all processes' devices and trains a small MLP for a few steps on
synthetic MNIST-shaped data (datasets.py: nothing is downloaded)."""

import multiprocessing
import os

# JAX sees one CPU device unless told otherwise, and reads the flag when it is first imported. As the upstream
# example does, the count comes from the CPU count; here at least 2 (a mesh to shard over on a small machine) and
# at most 4 (a small run on a large one).
HOST_DEVICES = max(2, min(multiprocessing.cpu_count(), 4))
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={HOST_DEVICES}"

import time  # noqa: E402

import datasets  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

jax.config.update("jax_cpu_collectives_implementation", "gloo")  # cross-process collectives on CPU
jax.distributed.initialize(
    coordinator_address=f"{os.environ['COORDINATOR_ADDRESS']}:{int(os.environ['COORDINATOR_PORT'])}",
    num_processes=int(os.environ["NUM_PROCESSES"]),
    process_id=int(os.environ["PROCESS_ID"]),
)

SIZES = (datasets.PIXELS, 128, datasets.CLASSES)
PER_DEVICE = 16  # examples per device per step
STEPS = 8
LEARNING_RATE = 0.1


def init(sizes: tuple[int, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The same weights in every process (one seed): they are replicated, not sharded."""
    rng = np.random.default_rng(0)
    return [
        ((rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32), np.zeros(n, np.float32))
        for m, n in zip(sizes[:-1], sizes[1:])
    ]


def logits(params, images):
    x = images
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss(params, images, labels):
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits(params, images)) * labels, axis=1))


@jax.jit
def step(params, images, labels):
    """One step of gradient descent on the global batch: XLA sums each device's share of the gradient across every
    process (the all-reduce the mesh implies)."""
    value, grads = jax.value_and_grad(loss)(params, images, labels)
    return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads), value


@jax.jit
def accuracy(params, images, labels):
    return jnp.mean(jnp.argmax(logits(params, images), axis=1) == jnp.argmax(labels, axis=1))


def main() -> None:
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    batch, replicated = NamedSharding(mesh, P("batch")), NamedSharding(mesh, P())
    params = jax.tree.map(lambda x: jax.make_array_from_process_local_data(replicated, x), init(SIZES))
    local = PER_DEVICE * jax.local_device_count()  # this process's share of each global batch

    def shard(step_index: int) -> tuple[jax.Array, jax.Array]:
        """The global batch of a step, each process giving its own slice."""
        images, labels = datasets.mnist(local, seed=1000 * step_index + jax.process_index())
        return (
            jax.make_array_from_process_local_data(batch, images),
            jax.make_array_from_process_local_data(batch, labels),
        )

    print(f"JAX process {jax.process_index()} of {jax.process_count()}")
    print(f"JAX local device count:{jax.local_device_count()}")
    print(f"JAX device count:{jax.device_count()}")
    test_images, test_labels = shard(STEPS)  # a batch no step trains on
    start = time.time()
    for i in range(STEPS):
        params, value = step(params, *shard(i))
        print(f"step {i} loss {float(value):.4f}")
    print(f"Trained {STEPS} steps in {time.time() - start:0.2f} sec")
    print(f"Test set accuracy {float(accuracy(params, test_images, test_labels)):.4f}")
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
