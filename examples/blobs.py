"""A small dataset module: Gaussian blobs, one per class, with noise augmentation.

This is what a user writes for their own data: subclass DatasetMixin, give it
``__len__`` and ``get_example``. The augmentation draws from
``example_rng()``, so it is the same for the same (seed, epoch, example) in
every iterator and after every resume.
"""

from __future__ import annotations

import numpy as np

import dataset_kit
from dataset_kit.iterators import example_rng

N_CLASSES, N_FEATURES = 10, 32


def make_blobs(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Generate ``n`` float32 points around ``N_CLASSES`` centres, with int32 labels."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, 0.6, (N_CLASSES, N_FEATURES))
    labels = rng.integers(0, N_CLASSES, n)
    points = centres[labels] + rng.normal(0.0, 1.0, (n, N_FEATURES))
    return points.astype(np.float32), labels.astype(np.int32)


class Blobs(dataset_kit.DatasetMixin):
    """Labelled points; each access adds a little reproducible noise."""

    def __init__(self, x: np.ndarray, y: np.ndarray, noise: float = 0.1) -> None:
        self.x, self.y, self.noise = x, y, noise

    def __len__(self) -> int:
        return len(self.x)

    def get_example(self, i: int) -> tuple[np.ndarray, np.int32]:
        jitter = example_rng().normal(0.0, self.noise, N_FEATURES).astype(np.float32)
        return self.x[i] + jitter, self.y[i]
