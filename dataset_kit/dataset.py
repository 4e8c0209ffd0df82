"""The dataset base class: integer, slice and index-array access."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataset_kit import _example_context
from dataset_kit._gather import take_rows
from dataset_kit.batch import ExampleBatch


def normalize_index(index: Any, length: int) -> int:
    """Return ``index`` as a non-negative int, checking ``-length <= index < length``.

    Raises:
        TypeError: if ``index`` is not an integer (bools are rejected too).
        IndexError: if ``index`` is out of range.
    """
    if isinstance(index, (bool, np.bool_)):
        raise TypeError(
            f"dataset index must be an integer, got bool {index!r} (dataset length {length})")
    try:
        i = operator.index(index)
    except TypeError:
        raise TypeError(
            f"dataset index must be an integer, slice or 1-D integer array, "
            f"got {type(index).__name__} {_short(index)} (dataset length {length})"
        ) from None
    if i < -length or i >= length:
        raise IndexError(f"dataset index {i} is out of range for a dataset of length {length}")
    return i + length if i < 0 else i


def normalize_index_array(index: Any, length: int) -> np.ndarray:
    """Return ``index`` (a list or 1-D integer array) as non-negative int64 indices.

    Raises:
        TypeError: if the array is not of an integer dtype (bool arrays included).
        IndexError: if it is not 1-D or any entry is out of range.
    """
    array = np.asarray(index)
    if array.size == 0 and array.ndim == 1:
        return np.empty(0, dtype=np.int64)
    if array.dtype.kind not in "iu":
        raise TypeError(
            f"dataset index array must have an integer dtype, got dtype {array.dtype} "
            f"(index {_short(index)}, dataset length {length})"
        )
    if array.ndim != 1:
        raise IndexError(
            f"dataset index array must be 1-D, got shape {array.shape} "
            f"(dataset length {length})"
        )
    array = array.astype(np.int64, copy=False)
    low, high = int(array.min()), int(array.max())
    if low < -length or high >= length:
        bad = low if low < -length else high
        raise IndexError(
            f"dataset index {bad} in index array {_short(index)} is out of range "
            f"for a dataset of length {length}"
        )
    if low < 0:
        array = np.where(array < 0, array + length, array)
    return array


def _short(index: Any) -> str:
    text = repr(index)
    return text if len(text) <= 80 else text[:77] + "..."


class DatasetMixin:
    """Base class of datasets: ``ds[i]``, ``ds[a:b:c]`` and ``ds[index_array]``.

    Subclasses implement ``__len__`` and :meth:`get_example`. They may override
    :meth:`get_examples` to fetch a whole batch at once (array-backed datasets
    answer with one fancy index per column). Iterators, slices and index
    arrays go through :meth:`get_batch`, which calls :meth:`get_examples`.

    * ``ds[i]`` accepts ``-len(ds) <= i < len(ds)``; other integers raise
      :class:`IndexError`.
    * ``ds[slice]`` follows Python list slicing exactly.
    * ``ds[index_array]`` accepts a list or a 1-D integer array (negative
      entries allowed).

    Slices and index arrays return a sequence of examples: a ``list``, or for
    array-backed datasets an :class:`~dataset_kit.ExampleBatch`, which behaves
    as a read-only list and lets :func:`~dataset_kit.concat_examples` skip
    restacking.
    """

    def __len__(self) -> int:
        raise NotImplementedError

    def __getitem__(self, index: Any) -> Any:
        length = len(self)
        if isinstance(index, slice):
            r = range(length)[index]
            return self.get_batch(np.arange(r.start, r.stop, r.step, dtype=np.int64))
        if isinstance(index, (list, np.ndarray)):
            return self.get_batch(normalize_index_array(index, length))
        return self.get_example(normalize_index(index, length))

    def get_example(self, i: int) -> Any:
        """Return the example at non-negative index ``i``.

        A subclass that defines ``__getitem__`` itself (a Gluon or PyTorch
        dataset ported onto this class) is asked through it.

        Args:
            i: an index with ``0 <= i < len(self)``.

        Returns:
            One example.

        Raises:
            NotImplementedError: if the subclass defines neither ``get_example``
                nor ``__getitem__``.
        """
        if type(self).__getitem__ is not DatasetMixin.__getitem__:
            return self[i]
        raise NotImplementedError(
            f"{type(self).__name__} must define get_example(i) (or __getitem__)")

    def get_examples(self, indices: np.ndarray) -> Sequence[Any]:
        """Return the examples at ``indices`` (validated, non-negative int64).

        The default calls :meth:`get_example` once per index and keeps the
        iterator's example cursor in step, so :func:`~dataset_kit.iterators.example_rng`
        knows which example it serves.

        Args:
            indices: a 1-D int64 array of valid, non-negative indices.

        Returns:
            A list (or list-like batch) of examples, in the order of ``indices``.
        """
        return _example_context.map_examples(self.get_example, indices.tolist())

    def get_batch(self, indices: np.ndarray) -> Sequence[Any]:
        """Return the examples at ``indices``: what iterators ask a dataset for.

        The default is :meth:`get_examples`; a dataset family whose
        ``get_examples`` means something else (Chainer's tabular datasets
        return columns) overrides this instead.

        Args:
            indices: a 1-D int64 array of valid, non-negative indices.

        Returns:
            A list (or list-like batch) of examples, in the order of ``indices``.
        """
        return self.get_examples(indices)

    # -- Gluon's dataset operations (views; see dataset_kit.datasets.gluon_ops) --

    def transform(self, fn: Any, lazy: bool = True) -> DatasetMixin:
        """Return a dataset of ``fn(*example)`` (tuples) or ``fn(example)`` (Gluon).

        Args:
            fn: the function; it may draw from :func:`~dataset_kit.example_rng`.
            lazy: apply it on access; False applies it to every example now.
        """
        from dataset_kit.datasets import gluon_ops

        return gluon_ops.transform(self, fn, lazy)

    def transform_first(self, fn: Any, lazy: bool = True) -> DatasetMixin:
        """Like :meth:`transform`, applied to the first field of each example only."""
        from dataset_kit.datasets import gluon_ops

        return gluon_ops.transform_first(self, fn, lazy)

    def filter(self, fn: Any) -> DatasetMixin:
        """Return a view of the examples for which ``fn(example)`` is true."""
        from dataset_kit.datasets import gluon_ops

        return gluon_ops.filter_examples(self, fn)

    def shard(self, num_shards: int, index: int) -> DatasetMixin:
        """Return contiguous shard ``index`` of ``num_shards`` (sizes differ by at most one).

        Raises:
            ValueError: if ``num_shards`` is not positive or ``index`` not below it.
        """
        from dataset_kit.datasets import gluon_ops

        return gluon_ops.shard(self, num_shards, index)

    def take(self, count: int | None) -> DatasetMixin:
        """Return a view of the first ``count`` examples (all of them for None)."""
        from dataset_kit.datasets import gluon_ops

        return gluon_ops.take(self, count)

    def sample(self, sampler: Any) -> DatasetMixin:
        """Return a view of the examples at the indices ``sampler`` yields."""
        from dataset_kit.datasets import gluon_ops

        return gluon_ops.sample(self, sampler)


def builds_one_by_one(dataset: Any) -> bool:
    """Whether :func:`fetch_examples` builds ``dataset``'s batches one example at a time."""
    if isinstance(dataset, DatasetMixin):
        kind = type(dataset)
        return kind.get_batch is DatasetMixin.get_batch \
            and kind.get_examples is DatasetMixin.get_examples
    return not (isinstance(dataset, np.ndarray) and dataset.ndim >= 1)


def fetch_examples(dataset: Any, indices: np.ndarray) -> Sequence[Any]:
    """Fetch valid, non-negative ``indices`` from any dataset, a batch at once if it can.

    A :class:`DatasetMixin` answers with :meth:`DatasetMixin.get_batch`; a
    numpy array with one fancy index (as an :class:`~dataset_kit.ExampleBatch`);
    any other sequence (a list, or a Gluon/PyTorch-style dataset with only
    ``__getitem__``) one item at a time, with the example cursor kept in step
    so :func:`~dataset_kit.example_rng` serves each example its own draws.

    Args:
        dataset: the dataset.
        indices: a 1-D int64 array of valid, non-negative indices.

    Returns:
        A sequence of examples in the order of ``indices``.
    """
    if isinstance(dataset, DatasetMixin):
        return dataset.get_batch(indices)
    if isinstance(dataset, np.ndarray) and dataset.ndim >= 1:
        return ExampleBatch(take_rows(dataset, indices))
    return _example_context.map_examples(dataset.__getitem__, indices.tolist())
