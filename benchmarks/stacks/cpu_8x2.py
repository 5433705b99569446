"""Eight CPU processes x 2 JAX devices: the simulator's speed benchmark (not an example)."""

from jaxinfra import CPU, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="cpu-8x2",
    node_pools=[NodePool("cpu", CPU(devices=2))],
    jobs=[
        JaxJob(
            "bench",
            image="python:3.11",
            command=["python", "-m", "train"],
            node_pool="cpu",
            nodes=8,
            init_timeout_seconds=60,
        )
    ],
)
