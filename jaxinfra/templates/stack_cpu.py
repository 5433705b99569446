"""The team's job on CPU nodes: 2 processes x 2 JAX devices (written by `jaxinfra init --template cpu`).

The image must hold JAX and the training program that `python -m train` runs; jaxinfra's README,
"The env contract", shows how the program initializes. Every field and its default: `jaxinfra.spec`.
"""

from jaxinfra import CPU, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="training",
    node_pools=[NodePool("cpu", CPU(devices=2))],
    jobs=[
        JaxJob(
            "train",
            image="python:3.11-slim",  # your image: JAX and the training program
            command=["python", "-m", "train"],
            node_pool="cpu",
            nodes=2,
            init_timeout_seconds=120,
            resources={"requests": {"cpu": "2", "memory": "4Gi"}},
        )
    ],
)
