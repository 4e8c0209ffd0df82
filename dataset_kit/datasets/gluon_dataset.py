"""Gluon's ``Dataset`` base, its views, and ``SimpleDataset``.

A class written for ``mxnet.gluon.data.Dataset`` keeps its body: it defines
``__getitem__(idx)`` and ``__len__()``, and gets Gluon's ``transform``,
``transform_first``, ``filter``, ``shard``, ``take`` and ``sample``. Those
views live here, on Gluon's class, not on :class:`~dataset_kit.DatasetMixin`
(Chainer's base, which Gluon's extends): Chainer and tabular datasets keep
their own vocabularies, and this module imports nothing that imports it.
Iterators fetch a ``__getitem__``-only dataset's batches one example at a
time, with :func:`~dataset_kit.example_rng` kept in step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit.dataset import DatasetMixin, fetch_examples
from dataset_kit.datasets.transform_dataset import TransformDataset


class Dataset(DatasetMixin):
    """Gluon's abstract dataset: override ``__getitem__`` and ``__len__``.

    It is a :class:`~dataset_kit.DatasetMixin`, so every iterator and loader
    of dataset_kit takes it, and a subclass may define ``get_example``
    instead of ``__getitem__`` (then slices and index arrays work too).
    Every view below is a :class:`Dataset` again, so views chain.
    """

    def transform(self, fn: Callable[..., Any], lazy: bool = True) -> Dataset:
        """Return a dataset of ``fn(*example)`` (tuple examples) or ``fn(example)``.

        Args:
            fn: the function; it may draw from :func:`~dataset_kit.example_rng`.
            lazy: apply it on access; False applies it to every example now
                and returns a :class:`SimpleDataset` of the results.

        Raises:
            TypeError: if ``fn`` is not callable.
        """
        view = _LazyTransformDataset(self, _Unpacked(_callable("fn", fn)))
        if lazy:
            return view
        return SimpleDataset([view[i] for i in range(len(view))])

    def transform_first(self, fn: Callable[[Any], Any], lazy: bool = True) -> Dataset:
        """Like :meth:`transform`, applied to the first field of each example only.

        Raises:
            TypeError: if ``fn`` is not callable.
        """
        return self.transform(_First(_callable("fn", fn)), lazy)

    def filter(self, fn: Callable[[Any], bool]) -> Dataset:
        """Return a view of the examples for which ``fn(example)`` is true.

        Raises:
            TypeError: if ``fn`` is not callable.
        """
        fn = _callable("fn", fn)
        return _IndexedDataset(self, [i for i in range(len(self)) if fn(self[i])])

    def shard(self, num_shards: int, index: int) -> Dataset:
        """Return contiguous shard ``index`` of ``num_shards`` (sizes differ by at most one).

        Raises:
            ValueError: if ``num_shards`` is not positive or ``index`` not below it.
        """
        num_shards = positive_int("num_shards", num_shards)
        index = non_negative_int("index", index)
        if index >= num_shards:
            raise ValueError(f"index must be below num_shards={num_shards}, got {index}")
        size, rest = divmod(len(self), num_shards)
        start = size * index + min(index, rest)
        return _IndexedDataset(self, np.arange(start, start + size + (index < rest)))

    def take(self, count: int | None) -> Dataset:
        """Return a view of the first ``count`` examples (all of them for None)."""
        n = len(self)
        count = n if count is None else min(non_negative_int("count", count), n)
        return _IndexedDataset(self, np.arange(count))

    def sample(self, sampler: Iterable[int]) -> Dataset:
        """Return a view of the examples at the indices ``sampler`` yields.

        Raises:
            TypeError: if ``sampler`` is not an iterable.
        """
        if not isinstance(sampler, Iterable):
            raise TypeError(
                f"sampler must be an iterable of indices, got {type(sampler).__name__}")
        return _IndexedDataset(self, [int(i) for i in sampler])


class SimpleDataset(Dataset):
    """A dataset over any sequence (a list, say): example ``i`` is ``data[i]``.

    Args:
        data: the sequence.
    """

    def __init__(self, data: Sequence) -> None:
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def get_example(self, i: int) -> Any:
        return self._data[i]

    def get_batch(self, indices: np.ndarray) -> Sequence[Any]:
        return fetch_examples(self._data, indices)


class _IndexedDataset(Dataset):
    """Example ``k`` is ``dataset[indices[k]]``; batches go to the base as one index array.

    Raises:
        IndexError: if an index is outside the base dataset.
    """

    def __init__(self, dataset: Any, indices: Sequence[int] | np.ndarray) -> None:
        positions = np.asarray(indices, dtype=np.int64).reshape(-1)
        n = len(dataset)
        if positions.size and (positions.min() < 0 or positions.max() >= n):
            raise IndexError(f"indices must lie in [0, {n}) (the dataset's length), got "
                             f"{positions.min()}..{positions.max()}")
        self._dataset, self._indices = dataset, positions

    def __len__(self) -> int:
        return len(self._indices)

    def get_example(self, i: int) -> Any:
        return self._dataset[int(self._indices[i])]

    def get_batch(self, indices: np.ndarray) -> Sequence[Any]:
        return fetch_examples(self._dataset, self._indices[indices])


class _LazyTransformDataset(TransformDataset, Dataset):
    """Gluon's lazy ``transform``: the one :class:`TransformDataset`, with Gluon's views."""


class _Unpacked:
    """Calls ``fn(*example)`` for a tuple example, ``fn(example)`` otherwise (Gluon's rule).

    A class rather than a closure, so a worker process can unpickle it.
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def __call__(self, example: Any) -> Any:
        return self.fn(*example) if isinstance(example, tuple) else self.fn(example)


class _First:
    """Applies ``fn`` to the first field of an example (picklable for workers)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, first: Any, *rest: Any) -> Any:
        return (self.fn(first), *rest) if rest else self.fn(first)


def _callable(name: str, fn: Any) -> Any:
    if not callable(fn):
        raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
    return fn
