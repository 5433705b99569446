"""Two A3 nodes x 8 H100 80 GB GPUs from flex-start (DWS queued provisioning): Kueue asks GKE for both nodes at once
through a ProvisioningRequest and admits the job once they exist; the pool has no node before and after. The job
prefers one GKE block for its two nodes (Kueue Topology-Aware Scheduling, which A3 High supports with flex-start or a
reservation: AI-Hypercomputer/xpk @367c8382 src/xpk/commands/common.py is_GPU_TAS_possible)."""

from _images import JAX_GPU_IMAGE, TRAIN

from jaxinfra import GPU, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="gpu-h100-flex",
    kueue=True,
    node_pools=[NodePool("h100", GPU("h100-80gb", 8), flex_start=True)],
    jobs=[
        JaxJob(
            "train",
            image=JAX_GPU_IMAGE,
            command=TRAIN,
            node_pool="h100",
            nodes=2,
            max_restarts=2,
            topology="block",
            resources={"requests": {"cpu": "200", "memory": "1500Gi"}},
        )
    ],
)
