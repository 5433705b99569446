"""One TPU v5e 2x4 slice: 2 hosts x 4 chips, checkpointing to a Cloud Storage bucket (rename it: names are global)."""

from _images import JAX_TPU_IMAGE, TRAIN

from jaxinfra import TPU, Cluster, GCSBucket, JaxJob, NodePool

cluster = Cluster(
    name="tpu-v5e",
    node_pools=[NodePool("v5e-2x4", TPU("v5e", "2x4"))],
    jobs=[
        JaxJob(
            "train",
            image=JAX_TPU_IMAGE,
            command=TRAIN,
            node_pool="v5e-2x4",
            max_restarts=3,
            checkpoints=GCSBucket("my-project-tpu-v5e-checkpoints"),
        )
    ],
)
