"""Two CPU processes x 2 JAX devices: the smallest real multi-process job, and the simulator's default.

Checkpoints go to a claim jaxinfra renders (10Gi, ReadWriteMany: the cluster's default storage class must offer it;
on GKE, set storage_class="standard-rwx" with the Filestore CSI driver on), and the group restarts once after a lost
host or a preemption, resuming from its last checkpoint (`jaxinfra simulate --run-command --preempt 1@20` rehearses it).
"""

from _images import JAX_CPU_IMAGE

from jaxinfra import CPU, PVC, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="cpu-dev",
    node_pools=[NodePool("cpu", CPU(devices=2))],
    jobs=[
        JaxJob(
            "train",
            image=JAX_CPU_IMAGE,
            command=["python", "-m", "train"],
            node_pool="cpu",
            nodes=2,
            init_timeout_seconds=60,
            max_restarts=1,
            checkpoints=PVC(size="10Gi"),
            resources={"requests": {"cpu": "2", "memory": "4Gi"}},
        )
    ],
)
