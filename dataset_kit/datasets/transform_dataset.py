"""TransformDataset: apply a function to every example on access."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dataset_kit import _example_context
from dataset_kit.dataset import DatasetMixin, fetch_examples


class TransformDataset(DatasetMixin):
    """A dataset that applies ``transform`` to each example of another dataset.

    The base dataset is asked for whole batches; ``transform`` then runs once per
    example and may call :func:`~dataset_kit.iterators.example_rng` for
    reproducible random augmentation.

    Args:
        dataset: the base dataset.
        transform: a callable taking one example and returning the new one.

    Raises:
        TypeError: if ``transform`` is not callable.
    """

    def __init__(self, dataset: Any, transform: Callable[[Any], Any]) -> None:
        if not callable(transform):
            raise TypeError(f"transform must be callable, got {type(transform).__name__}")
        self._dataset = dataset
        self._transform = transform

    def __len__(self) -> int:
        return len(self._dataset)

    def get_example(self, i: int) -> Any:
        return self._transform(self._dataset[i])

    def get_batch(self, indices: np.ndarray) -> list:
        base = fetch_examples(self._dataset, indices)
        return _example_context.map_examples(self._transform, base)
