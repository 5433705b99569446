"""Two TPU v5p 2x2x4 slices over DCN (multi-slice): 2 x 4 hosts x 4 chips = 32 chips, checkpointing to a Cloud
Storage bucket (rename it: bucket names are global)."""

from _images import JAX_TPU_IMAGE, TRAIN

from jaxinfra import TPU, Cluster, GCSBucket, JaxJob, NodePool

cluster = Cluster(
    name="tpu-v5p",
    node_pools=[NodePool("v5p-2x2x4", TPU("v5p", "2x2x4"))],
    jobs=[
        JaxJob(
            "train",
            namespace="ml",
            image=JAX_TPU_IMAGE,
            command=TRAIN,
            node_pool="v5p-2x2x4",
            slices=2,
            max_restarts=3,
            checkpoints=GCSBucket("my-project-tpu-v5p-checkpoints"),
        )
    ],
)
