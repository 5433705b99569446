"""The team's job on 2 nodes with 8 x H100 80 GB each: one JAX process per node (`jaxinfra init --template gpu`).

The image must hold JAX for CUDA and the training program that `python -m train` runs; jaxinfra's
README, "The env contract", shows how the program initializes. Every field and its default:
`jaxinfra.spec`.
"""

from jaxinfra import GPU, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="training",
    node_pools=[NodePool("h100", GPU("h100-80gb", 8))],
    jobs=[
        JaxJob(
            "train",
            image="nvcr.io/nvidia/jax:25.10-py3",  # your image, built on this one
            command=["python", "-m", "train"],
            node_pool="h100",
            nodes=2,
            max_restarts=2,
            resources={"requests": {"cpu": "200", "memory": "1500Gi"}},
        )
    ],
)
