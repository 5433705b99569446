"""The team's job on CPU nodes: 2 processes x 2 JAX devices (written by `jaxinfra init --template cpu`).

It runs train/ (`python -m train`; train/Dockerfile builds the image). Checkpoints go to a claim jaxinfra renders
(ReadWriteMany: the cluster's default storage class must offer it; on GKE, storage_class="standard-rwx" with the
Filestore CSI driver on), and the group restarts once after a lost host or a preemption, resuming from its last
checkpoint: `jaxinfra simulate --run-command --preempt 1@3` rehearses it. Every field and its default: `jaxinfra.spec`.
"""

from jaxinfra import CPU, PVC, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="training",
    node_pools=[NodePool("cpu", CPU(devices=2))],
    jobs=[
        JaxJob(
            "train",
            image="python:3.11-slim",  # your image: train/Dockerfile's (pyproject.toml's images table maps it to train/)
            command=["python", "-m", "train"],
            node_pool="cpu",
            nodes=2,
            init_timeout_seconds=120,
            max_restarts=1,
            checkpoints=PVC(size="10Gi"),
            resources={"requests": {"cpu": "2", "memory": "4Gi"}},
        )
    ],
)
