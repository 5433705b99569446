"""The container image's Python, as far as the simulator shapes it: the pods run this machine's
interpreter (its folder first on PATH), so what differs between images is stated here.

- The `kubernetes` package: an image built with `jax[k8s]` (as `pip install 'jax[k8s]'`, JAX's own
  Kubernetes docs, or Kubeflow's JAX image) can import it, and then `jax.distributed.initialize()`
  runs JAX's Kubernetes detection (which needs a ServiceAccount token); an image with plain `jax`
  cannot (`--no-k8s-client`). The `sim` extra installs what `jax[k8s]` brings, so the first is the
  default.
- The TPU VM (platform/gke_tpu.install) for TPU pods, and under --run-command the group libtpu forms on a
  multi-host slice for a program that does not initialize (platform/gke_tpu.join_slice).

Probe pods are forked from the simulator and call `shape` directly; command-mode pods start a fresh
interpreter, which runs `shape` from a `sitecustomize` module first on its PYTHONPATH.
"""

from __future__ import annotations

import importlib.abc
import os
import sys
from collections.abc import Mapping
from pathlib import Path

WITHOUT_K8S_CLIENT = "JAXINFRA_SIMULATED_WITHOUT_KUBERNETES_CLIENT"
"""Set in the env of pods whose image lacks the `kubernetes` package."""

SITECUSTOMIZE = """\
# Written by jaxinfra simulate: this pod's image, for its own command.
from jaxinfra_sim.kubelet.image import shape
shape(own_command=True)
"""


class _Absent(importlib.abc.MetaPathFinder):
    """The `kubernetes` package is not installed in this image."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "kubernetes" or name.startswith("kubernetes."):
            raise ModuleNotFoundError(f"No module named '{name}'", name=name)
        return None


def shape(env: Mapping[str, str] | None = None, own_command: bool = False) -> None:
    """In a pod's process, before its program imports anything of its own (`own_command`: the pod's own program, not
    the probe, which initializes JAX itself)."""
    env = os.environ if env is None else env
    if env.get(WITHOUT_K8S_CLIENT):
        for name in [m for m in sys.modules if m == "kubernetes" or m.startswith("kubernetes.")]:
            del sys.modules[name]
        sys.meta_path.insert(0, _Absent())
    from jaxinfra_sim.platform import gke_tpu

    if gke_tpu.is_marked(env):
        gke_tpu.install()
        if own_command:
            gke_tpu.join_slice()


def needs_hook(env: Mapping[str, str]) -> bool:
    """Whether a command-mode pod needs the sitecustomize hook."""
    from jaxinfra_sim.platform import gke_tpu

    return bool(env.get(WITHOUT_K8S_CLIENT)) or gke_tpu.is_marked(env)


def sitecustomize_dir(folder: Path) -> Path:
    """A folder to put first on PYTHONPATH of command-mode pods that need the hook."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return folder
