"""The records every layer of the simulator shares, at the bottom of its house: the manifests as the API server
holds them (`inputs`), what the control plane makes of them (`model`: workloads, pods, problems), a container's
securityContext (`security`), what a simulation was asked for (`options`), what ran (`podrun`) and what it found
(`results`), with the simulator's errors, events and their reasons, steps, paths and this machine's programs. Upstream:
the API types of Kubernetes 1.37 (the schemas `jaxinfra.schemas` bundles); core imports nothing of the simulator's
other subpackages (tests/test_layers.py)."""
