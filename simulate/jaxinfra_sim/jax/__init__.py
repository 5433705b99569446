"""JAX, as a pod's process meets it (jax 0.10.2): what it reads from the env (`env`: the coordinator, the rank,
the process count, its TPU port), its Kubernetes detection and the API access that needs (`k8s_detection`,
`k8s_access`), its timeouts (`timeouts`), the checks of a workload's contract before any pod starts (`contract`), and
the built-in probe each pod runs by default, a real `jax.distributed` group checked with closed-form collectives
(`probe`, `collectives`)."""
