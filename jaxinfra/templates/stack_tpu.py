"""The team's job on one TPU v5e 2x4 slice: 2 hosts x 4 chips (written by `jaxinfra init --template tpu`).

It runs train/ (`python -m train`): build the image with `docker build --build-arg JAX_EXTRA='[tpu]' train`
(train/README.md); jaxinfra's docs (docs/env-contract.md) show how the program initializes.
More slices: `slices=2` on a multi-host topology. Every field and its default: `jaxinfra.spec`.
"""

from jaxinfra import TPU, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="training",
    node_pools=[NodePool("v5e-2x4", TPU("v5e", "2x4"))],
    jobs=[
        JaxJob(
            "train",
            image="us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu:latest",  # your image, train/Dockerfile's (the images table maps it to train/)
            command=["python", "-m", "train"],
            node_pool="v5e-2x4",
            max_restarts=3,
        )
    ],
)
