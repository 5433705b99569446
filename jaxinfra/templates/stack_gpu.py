"""The team's job on 2 nodes with 8 x H100 80 GB each: one JAX process per node (`jaxinfra init --template gpu`).

It runs train/ (`python -m train`): build the image with `docker build --build-arg JAX_EXTRA='[cuda12]' train`
(train/README.md); jaxinfra's docs (docs/env-contract.md) show how the program initializes.
Every field and its default: `jaxinfra.spec`.
"""

from jaxinfra import GPU, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="training",
    node_pools=[NodePool("h100", GPU("h100-80gb", 8))],
    jobs=[
        JaxJob(
            "train",
            image="nvcr.io/nvidia/jax:25.10-py3",  # your image, train/Dockerfile's (the images table maps it to train/)
            command=["python", "-m", "train"],
            node_pool="h100",
            nodes=2,
            max_restarts=2,
            resources={"requests": {"cpu": "200", "memory": "1500Gi"}},
        )
    ],
)
