"""Gluon's dataset operations, available on every DatasetMixin.

``transform``, ``transform_first``, ``filter``, ``shard``, ``take`` and
``sample`` return views; ``transform(fn, lazy=False)`` materialises once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit._example_context import map_examples
from dataset_kit.dataset import DatasetMixin, fetch_examples
from dataset_kit.datasets.gluon_dataset import Dataset


class IndexedDataset(Dataset):
    """Example ``k`` is ``dataset[indices[k]]``; batches go to the base as one index array.

    Args:
        dataset: the base dataset.
        indices: positions in the base dataset.

    Raises:
        IndexError: if an index is outside the base dataset.
    """

    def __init__(self, dataset: Any, indices: Sequence[int]) -> None:
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        n = len(dataset)
        if indices.size and (indices.min() < 0 or indices.max() >= n):
            raise IndexError(f"indices must lie in [0, {n}) (the dataset's length), got "
                             f"{indices.min()}..{indices.max()}")
        self._dataset, self._indices = dataset, indices

    def __len__(self) -> int:
        return len(self._indices)

    def get_example(self, i: int) -> Any:
        return self._dataset[int(self._indices[i])]

    def get_examples(self, indices: np.ndarray) -> Sequence[Any]:
        return fetch_examples(self._dataset, self._indices[indices])


class LazyTransformDataset(Dataset):
    """``fn(*example)`` for tuple examples, ``fn(example)`` otherwise, on access (Gluon)."""

    def __init__(self, dataset: Any, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        self._dataset, self._fn = dataset, fn

    def __len__(self) -> int:
        return len(self._dataset)

    def _apply(self, example: Any) -> Any:
        return self._fn(*example) if isinstance(example, tuple) else self._fn(example)

    def get_example(self, i: int) -> Any:
        return self._apply(self._dataset[i])

    def get_examples(self, indices: np.ndarray) -> list:
        return map_examples(self._apply, fetch_examples(self._dataset, indices))


class _First:
    """Applies ``fn`` to the first field of an example (picklable for workers)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, first: Any, *rest: Any) -> Any:
        return (self.fn(first), *rest) if rest else self.fn(first)


def transform(dataset: Any, fn: Callable[..., Any], lazy: bool = True) -> DatasetMixin:
    """See :meth:`dataset_kit.DatasetMixin.transform`."""
    view = LazyTransformDataset(dataset, fn)
    if lazy:
        return view
    from dataset_kit.datasets.array_dataset import SimpleDataset

    return SimpleDataset([view[i] for i in range(len(view))])


def transform_first(dataset: Any, fn: Callable[[Any], Any], lazy: bool = True) -> DatasetMixin:
    """See :meth:`dataset_kit.DatasetMixin.transform_first`."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    return transform(dataset, _First(fn), lazy)


def filter_examples(dataset: Any, fn: Callable[[Any], bool]) -> DatasetMixin:
    """See :meth:`dataset_kit.DatasetMixin.filter`."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    return IndexedDataset(dataset, [i for i in range(len(dataset)) if fn(dataset[i])])


def shard(dataset: Any, num_shards: int, index: int) -> DatasetMixin:
    """See :meth:`dataset_kit.DatasetMixin.shard`."""
    num_shards = positive_int("num_shards", num_shards)
    index = non_negative_int("index", index)
    if index >= num_shards:
        raise ValueError(f"index must be below num_shards={num_shards}, got {index}")
    size, rest = divmod(len(dataset), num_shards)
    start = size * index + min(index, rest)
    return IndexedDataset(dataset, np.arange(start, start + size + (index < rest)))


def take(dataset: Any, count: int | None) -> DatasetMixin:
    """See :meth:`dataset_kit.DatasetMixin.take`."""
    n = len(dataset)
    count = n if count is None else min(non_negative_int("count", count), n)
    return IndexedDataset(dataset, np.arange(count))


def sample(dataset: Any, sampler: Any) -> DatasetMixin:
    """See :meth:`dataset_kit.DatasetMixin.sample`."""
    if not hasattr(sampler, "__iter__"):
        raise TypeError(f"sampler must be an iterable of indices, got {type(sampler).__name__}")
    return IndexedDataset(dataset, [int(i) for i in sampler])
