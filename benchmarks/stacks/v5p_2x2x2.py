"""The smallest multi-host case: one TPU v5p 2x2x2 slice, 2 hosts (benchmark baseline)."""

from jaxinfra import TPU, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="v5p-small",
    node_pools=[NodePool("v5p", TPU("v5p", "2x2x2"))],
    jobs=[JaxJob("train", image="jax:tpu", command=["python", "-m", "train"], node_pool="v5p")],
)
