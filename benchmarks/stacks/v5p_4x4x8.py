"""One TPU v5p 4x4x8 slice: 32 hosts x 4 chips = 128 devices (the simulator's scale benchmark)."""

from jaxinfra import TPU, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="v5p-4x4x8",
    node_pools=[NodePool("v5p", TPU("v5p", "4x4x8"))],
    jobs=[
        JaxJob("scale", image="jax:tpu", command=["python", "-m", "train"], node_pool="v5p", init_timeout_seconds=120)
    ],
)
