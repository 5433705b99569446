"""The Pulumi program that Pulumi.yaml names: a jaxinfra stack's GKE cluster and node pools (or an
existing cluster), the controllers its objects need, and every Kubernetes object of its jobs. All
logic lives in `jaxinfra.pulumi`.

Config (Pulumi.<stack>.yaml): jaxinfra:stack, jaxinfra:provider (gke | existing) and the keys of
that provider; see README.md, "Cluster plus job with Pulumi".
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # jaxinfra from this checkout, even when not pip-installed
    sys.path.insert(0, str(ROOT))

from jaxinfra.pulumi import program  # noqa: E402

outputs = program()
