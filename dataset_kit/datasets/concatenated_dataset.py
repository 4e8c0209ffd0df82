"""ConcatenatedDataset: several datasets end to end."""

from __future__ import annotations

from typing import Any

import numpy as np

from dataset_kit import _example_context
from dataset_kit.dataset import DatasetMixin, fetch_examples


class ConcatenatedDataset(DatasetMixin):
    """The examples of several datasets, one after another.

    Args:
        *datasets: the datasets to concatenate, in order.
    """

    def __init__(self, *datasets: Any) -> None:
        self._datasets = datasets
        self._ends = np.cumsum([len(d) for d in datasets], dtype=np.int64)

    def __len__(self) -> int:
        return int(self._ends[-1]) if len(self._ends) else 0

    def _locate(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        which = np.searchsorted(self._ends, indices, side="right")
        starts = np.concatenate([[0], self._ends[:-1]])
        return which, indices - starts[which]

    def get_example(self, i: int) -> Any:
        which, local = self._locate(np.array([i]))
        return self._datasets[int(which[0])][int(local[0])]

    def get_batch(self, indices: np.ndarray) -> Any:
        which, local = self._locate(indices)
        if len(indices) and (which == which[0]).all():
            return fetch_examples(self._datasets[int(which[0])], local)
        datasets = self._datasets
        return _example_context.map_examples(
            lambda pair: datasets[pair[0]][pair[1]], zip(which.tolist(), local.tolist()))
