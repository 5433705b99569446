"""Two CPU processes x 2 JAX devices: the smallest real multi-process job, and the simulator's default."""

from _images import JAX_CPU_IMAGE

from jaxinfra import CPU, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="cpu-dev",
    node_pools=[NodePool("cpu", CPU(devices=2))],
    jobs=[
        JaxJob(
            "train",
            image=JAX_CPU_IMAGE,
            command=["python", "-m", "train"],
            node_pool="cpu",
            nodes=2,
            init_timeout_seconds=60,
            resources={"requests": {"cpu": "2", "memory": "4Gi"}},
        )
    ],
)
