"""The schemas jaxinfra validates against: the upstream CRDs bundled here (README.md), and `K8S_VERSION`, the
Kubernetes release whose built-in schemas (those `kubernetes-validate` ships) go with them. A leaf, so the
simulator's API server reports the same release (`/version`) without importing the validator."""

# Newest minor that the installed kubernetes-validate (1.37.0) ships; batch/v1 JobSpec there has
# podReplacementPolicy, podFailurePolicy and backoffLimitPerIndex (all present since 1.28/1.29).
K8S_VERSION = "1.37"
