"""One TPU v5e 2x4 slice: 2 hosts x 4 chips."""

from _images import JAX_TPU_IMAGE, TRAIN

from jaxinfra import TPU, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="tpu-v5e",
    node_pools=[NodePool("v5e-2x4", TPU("v5e", "2x4"))],
    jobs=[JaxJob("train", image=JAX_TPU_IMAGE, command=TRAIN, node_pool="v5e-2x4", max_restarts=3)],
)
