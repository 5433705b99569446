"""Two CPU processes x 1 JAX device that may read the Kubernetes API (a Role and a mounted token), one
whole-group restart: the stress run's case where every simulation starts and stops its API server."""

from jaxinfra import CPU, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="cpu-2x1-api",
    node_pools=[NodePool("cpu", CPU(devices=1))],
    jobs=[
        JaxJob(
            "stress",
            image="python:3.11",
            command=["python", "-m", "train"],
            node_pool="cpu",
            nodes=2,
            max_restarts=1,
            init_timeout_seconds=60,
            kubernetes_api=True,
        )
    ],
)
