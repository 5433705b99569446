"""The 8 x 2 speed benchmark's job with kubernetes_api=True: its pods mount a token, so the simulation
starts its API server (the benchmark prints what that costs; not an example)."""

from jaxinfra import CPU, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="cpu-8x2-api",
    node_pools=[NodePool("cpu", CPU(devices=2))],
    jobs=[
        JaxJob(
            "bench",
            image="python:3.11",
            command=["python", "-m", "train"],
            node_pool="cpu",
            nodes=8,
            init_timeout_seconds=60,
            kubernetes_api=True,
        )
    ],
)
