"""The user-facing declarative model: a `Cluster` of `NodePool`s and `JaxJob`s.

Every default lives in this package, documented on its field. Validation is deferred to the root: leaf
objects (`TPU(...)`, `JaxJob(...)`) only record what they were given, and `Cluster(...)`
validates the whole tree in one pass, so one `SpecError` lists every problem with its path
(`jobs[0].coordinator_port`) instead of stopping at the first constructor that fails.

One module per concern, each importing only those listed before it: `problems` (how a problem is
raised and reported), `base` (`Spec`, shared validators), `accelerators`, `env`, `checkpoints`,
`extras` (what a team adds to the pods: tolerations, node selectors, pod patches),
`jobs` (node pools, jobs, sidecars, the CPU shadow), `rules` (across objects) and `cluster` (the root).
"""

from __future__ import annotations

from jaxinfra.spec.accelerators import CPU, GPU, TPU, Accelerator
from jaxinfra.spec.base import Spec, dns_label, raw, tagged
from jaxinfra.spec.checkpoints import PVC, Checkpoints, GCSBucket
from jaxinfra.spec.cluster import Cluster
from jaxinfra.spec.env import ConfigMapRef, EnvValue, SecretRef, credential_literal
from jaxinfra.spec.extras import Toleration
from jaxinfra.spec.jobs import (
    BACKENDS,
    CAPACITIES,
    Backend,
    Capacity,
    JaxJob,
    NodePool,
    Resources,
    Shadow,
    Sidecar,
)
from jaxinfra.spec.problems import UNION_TAGS, path_of, problem

__all__ = [
    "BACKENDS",
    "CAPACITIES",
    "CPU",
    "GPU",
    "PVC",
    "TPU",
    "UNION_TAGS",
    "Accelerator",
    "Backend",
    "Capacity",
    "Checkpoints",
    "Cluster",
    "ConfigMapRef",
    "EnvValue",
    "GCSBucket",
    "JaxJob",
    "NodePool",
    "Resources",
    "SecretRef",
    "Shadow",
    "Sidecar",
    "Spec",
    "Toleration",
    "credential_literal",
    "dns_label",
    "path_of",
    "problem",
    "raw",
    "tagged",
]
