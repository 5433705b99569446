"""The team's job on 2 nodes with 8 x H100 80 GB each from flex-start: one JAX process per node
(`jaxinfra init --template gpu-flex`).

Flex-start with queued provisioning (GKE's Dynamic Workload Scheduler): the node pool has no node until the job is
queued; Kueue then asks GKE for both nodes at once (a ProvisioningRequest), admits the job once they exist, and GKE
removes them when it ends. `jaxinfra simulate --provision CHECK@SECONDS` rehearses the wait, `CHECK@never` capacity
that never comes (CHECK: the AdmissionCheck `jaxinfra synth` renders, training-h100-flex-start).

It runs train/ (`python -m train`): build the image with `docker build --build-arg JAX_EXTRA='[cuda12]' train`
(train/README.md); jaxinfra's docs (docs/env-contract.md) show how the program initializes.
Every field and its default: `jaxinfra.spec`.
"""

from jaxinfra import GPU, Cluster, JaxJob, NodePool

cluster = Cluster(
    name="training",
    kueue=True,  # flex-start capacity comes through Kueue's ProvisioningRequest admission check
    node_pools=[NodePool("h100", GPU("h100-80gb", 8), flex_start=True)],
    jobs=[
        JaxJob(
            "train",
            image="nvcr.io/nvidia/jax:25.10-py3",  # your image, train/Dockerfile's (the images table maps it to train/)
            command=["python", "-m", "train"],
            node_pool="h100",
            nodes=2,
            max_restarts=2,
            topology="block",  # both nodes in one GKE block if Kueue can (Topology-Aware Scheduling)
            resources={"requests": {"cpu": "200", "memory": "1500Gi"}},
        )
    ],
)
