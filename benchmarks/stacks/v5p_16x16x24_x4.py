"""The largest case: four TPU v5p 16x16x24 slices, 6,144 hosts (benchmark input, not an example)."""

from jaxinfra import TPU, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="v5p-huge",
    node_pools=[NodePool("v5p", TPU("v5p", "16x16x24"))],
    jobs=[JaxJob("train", image="jax:tpu", command=["python", "-m", "train"], node_pool="v5p", slices=4)],
)
