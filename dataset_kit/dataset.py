"""The dataset base class: integer, slice and index-array access."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

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

    The dataset contract (``docs/architecture.rst``): a subclass implements
    ``__len__`` and :meth:`get_example`, and may override the one batch hook,
    :meth:`get_batch`, to fetch a whole batch at once (array-backed datasets
    answer with one fancy index per column). Iterators, slices and index
    arrays all go through :meth:`get_batch`.

    * ``ds[i]`` accepts ``-len(ds) <= i < len(ds)``; other integers raise
      :class:`IndexError`.
    * ``ds[slice]`` follows Python list slicing exactly.
    * ``ds[index_array]`` accepts a list or a 1-D integer array (negative
      entries allowed).

    Slices and index arrays return a sequence of examples: a ``list``, or for
    array-backed datasets an :class:`~dataset_kit.ExampleBatch`, which behaves
    as a read-only list and lets :func:`~dataset_kit.concat_examples` skip
    restacking.

    A subclass written for dataset_kit 0.1 that overrides
    ``get_examples(indices)`` (the batch hook's name then) is still asked
    through it: its :meth:`get_batch` calls it. New code overrides
    :meth:`get_batch`; ``get_examples(indices, key_indices)`` is Chainer's
    tabular column protocol (:class:`~dataset_kit.TabularDataset`).

    Gluon's views (``transform``, ``filter``, ``shard``, ``take``...) are not
    here: they belong to Gluon's :class:`dataset_kit.datasets.Dataset`, a
    subclass of this one.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # 0.1's batch hook: a class that defines get_examples(indices) and
        # inherits the default get_batch keeps being asked through it.
        if "get_examples" in cls.__dict__ and cls.get_batch is DatasetMixin.get_batch:
            cls.get_batch = _get_batch_through_get_examples  # type: ignore[method-assign]

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

    def get_batch(self, indices: np.ndarray) -> Sequence[Any]:
        """Return the examples at ``indices``: the batch hook, what iterators ask for.

        The default calls :meth:`get_example` once per index and keeps the
        iterator's example cursor in step, so :func:`~dataset_kit.example_rng`
        knows which example it serves. Override it to fetch a batch at once.

        Args:
            indices: a 1-D int64 array of valid, non-negative indices.

        Returns:
            A list (or list-like batch, such as an
            :class:`~dataset_kit.ExampleBatch`) of examples, in the order of
            ``indices``.
        """
        return _example_context.map_examples(self.get_example, indices.tolist())


def _get_batch_through_get_examples(self: Any, indices: np.ndarray) -> Sequence[Any]:
    """:meth:`DatasetMixin.get_batch` of a subclass that overrides 0.1's ``get_examples``."""
    return self.get_examples(indices)


@runtime_checkable
class MapDataset(Protocol):
    """A map-style dataset: a length and examples by index (a list, an array, a DatasetMixin).

    ``ds[i]`` for ``0 <= i < len(ds)`` is one example. Iterators, loaders and
    the engine accept any such object.
    """

    def __len__(self) -> int: ...

    def __getitem__(self, index: Any) -> Any: ...


@runtime_checkable
class BatchDataset(MapDataset, Protocol):
    """A map-style dataset that also answers a whole batch: ``get_batch(indices)``.

    ``indices`` is a 1-D int64 array of valid, non-negative indices; the
    answer is a sequence of examples in that order (a list, or an
    :class:`~dataset_kit.ExampleBatch` of columns). Every
    :class:`DatasetMixin` is one.
    """

    def get_batch(self, indices: np.ndarray) -> Sequence[Any]: ...


def builds_one_by_one(dataset: Any) -> bool:
    """Whether :func:`fetch_examples` builds ``dataset``'s batches one example at a time."""
    if isinstance(dataset, DatasetMixin):
        return type(dataset).get_batch is DatasetMixin.get_batch
    if isinstance(dataset, np.ndarray):
        return dataset.ndim == 0
    return not isinstance(dataset, BatchDataset)


def fetch_examples(dataset: Any, indices: np.ndarray) -> Sequence[Any]:
    """Fetch valid, non-negative ``indices`` from any dataset, a batch at once if it can.

    A :class:`BatchDataset` (every :class:`DatasetMixin`) answers with its
    ``get_batch``; a numpy array with one fancy index (as an :class:`~dataset_kit.ExampleBatch`);
    any other sequence (a list, or a Gluon/PyTorch-style dataset with only
    ``__getitem__``) one item at a time, with the example cursor kept in step
    so :func:`~dataset_kit.example_rng` serves each example its own draws.

    Args:
        dataset: the dataset.
        indices: a 1-D int64 array of valid, non-negative indices.

    Returns:
        A sequence of examples in the order of ``indices``.
    """
    if isinstance(dataset, DatasetMixin):  # the common case, without a protocol check
        return dataset.get_batch(indices)
    if isinstance(dataset, np.ndarray) and dataset.ndim >= 1:
        return ExampleBatch(take_rows(dataset, indices))
    if isinstance(dataset, BatchDataset):
        return dataset.get_batch(indices)
    return _example_context.map_examples(dataset.__getitem__, indices.tolist())
