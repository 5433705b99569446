"""MNIST-shaped data made here, offline: ten classes of 28x28 grey images, each class a fixed random pattern with
noise over it, labels one-hot. It stands in for the download of the real set (which needs the internet) and is
learnable, so a few steps of training show the loss falling."""

from __future__ import annotations

import numpy as np

PIXELS = 28 * 28
CLASSES = 10


def mnist(count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`count` images (flattened, in [0, 1]) and their one-hot labels; the same `seed` gives the same set."""
    rng = np.random.default_rng(seed)
    patterns = np.random.default_rng(1234).random((CLASSES, PIXELS), dtype=np.float32)  # one set for every seed
    labels = rng.integers(0, CLASSES, count)
    noise = rng.normal(0.0, 0.35, (count, PIXELS)).astype(np.float32)
    images = np.clip(patterns[labels] + noise, 0.0, 1.0)
    return images, np.eye(CLASSES, dtype=np.float32)[labels]
