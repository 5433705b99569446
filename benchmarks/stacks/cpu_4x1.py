"""Four CPU processes x 1 JAX device, one whole-group restart: the stress run's restart case (not an example)."""

from jaxinfra import CPU, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="cpu-4x1",
    node_pools=[NodePool("cpu", CPU(devices=1))],
    jobs=[
        JaxJob(
            "stress",
            image="python:3.11",
            command=["python", "-m", "train"],
            node_pool="cpu",
            nodes=4,
            max_restarts=1,
            init_timeout_seconds=60,
        )
    ],
)
