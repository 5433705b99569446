"""Shared by the example stacks (a helper, not a stack: its name starts with '_')."""

#: A public JAX image for CPU runs and the simulator's default stack.
JAX_CPU_IMAGE = "python:3.11-slim"
#: Google's JAX image for TPU VMs (libtpu included).
JAX_TPU_IMAGE = "us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu:latest"
#: NVIDIA's JAX container.
JAX_GPU_IMAGE = "nvcr.io/nvidia/jax:25.10-py3"

#: A training entry point that initializes from the env contract (explicit arguments).
TRAIN = ["python", "-m", "train"]
