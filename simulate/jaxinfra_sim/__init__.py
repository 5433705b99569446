"""jaxinfra_sim: run synthesized (or any) JobSet / Indexed Job manifests as real JAX processes on the CPU."""
