"""Views of a dataset: SubDataset and the split / cross-validation helpers."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataset_kit.dataset import DatasetMixin, fetch_examples


def _as_order(order: Any, length: int) -> np.ndarray | None:
    return None if order is None else _check_order(order, length)


def _check_order(order: Any, length: int) -> np.ndarray:
    array = np.asarray(order)
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise TypeError(f"order must be a 1-D integer array, got {array.dtype} {array.shape}")
    if len(array) != length:
        raise ValueError(
            f"order must have the length of the base dataset ({length}), got {len(array)}"
        )
    if array.size and (array.min() < 0 or array.max() >= length):
        raise ValueError(
            f"order entries must lie in [0, {length}), got {array.min()}..{array.max()}"
        )
    return array.astype(np.int64, copy=False)


class SubDataset(DatasetMixin):
    """The examples ``start <= k < finish`` of a dataset, optionally reordered.

    Example ``k`` of the view is ``dataset[order[start + k]]`` (or
    ``dataset[start + k]`` without ``order``).

    Args:
        dataset: the base dataset.
        start: first position (inclusive).
        finish: last position (exclusive).
        order: optional permutation of the base dataset's indices.

    Raises:
        ValueError: if ``0 <= start <= finish <= len(dataset)`` does not hold or
            ``order`` has the wrong length or entries.
    """

    def __init__(self, dataset: Any, start: int, finish: int, order: Any = None) -> None:
        start, finish = operator.index(start), operator.index(finish)
        n = len(dataset)
        if not 0 <= start <= finish <= n:
            raise ValueError(
                f"SubDataset needs 0 <= start <= finish <= len(dataset); got start={start}, "
                f"finish={finish}, len(dataset)={n}"
            )
        self._dataset = dataset
        self._start = start
        self._finish = finish
        self._order = _as_order(order, n)

    def __len__(self) -> int:
        return self._finish - self._start

    def _base_indices(self, indices: np.ndarray) -> np.ndarray:
        shifted = indices + self._start
        return shifted if self._order is None else self._order[shifted]

    def get_example(self, i: int) -> Any:
        j = self._start + i
        return self._dataset[j if self._order is None else int(self._order[j])]

    def get_batch(self, indices: np.ndarray) -> Sequence:
        return fetch_examples(self._dataset, self._base_indices(indices))


def _check_size(name: str, value: int, total: int) -> int:
    value = operator.index(value)
    if not 0 <= value <= total:
        raise ValueError(f"{name} must be in [0, {total}] (the dataset length), got {value}")
    return value


def split_dataset(dataset: Any, split_at: int, order: Any = None) -> tuple[SubDataset, SubDataset]:
    """Split a dataset into the first ``split_at`` examples and the rest.

    Args:
        dataset: the dataset to split.
        split_at: size of the first part.
        order: optional permutation applied before splitting.

    Returns:
        Two :class:`SubDataset` views.

    Raises:
        ValueError: if ``split_at`` is outside ``[0, len(dataset)]``.
    """
    n = len(dataset)
    split_at = _check_size("split_at", split_at, n)
    return SubDataset(dataset, 0, split_at, order), SubDataset(dataset, split_at, n, order)


def _permutation(n: int, seed: int | None) -> np.ndarray:
    # Chainer's generator, so a ported experiment gets the same splits.
    return np.random.RandomState(seed).permutation(n)


def split_dataset_random(
    dataset: Any, first_size: int, seed: int | None = None
) -> tuple[SubDataset, SubDataset]:
    """Split a dataset into a random part of ``first_size`` examples and the rest.

    The permutation is Chainer's (``numpy.random.RandomState(seed)``), so the
    same seed gives the same split as ``chainer.datasets.split_dataset_random``.

    Args:
        dataset: the dataset to split.
        first_size: size of the first part.
        seed: seed of the permutation; the same seed gives the same split.

    Returns:
        Two :class:`SubDataset` views.

    Raises:
        ValueError: if ``first_size`` is outside ``[0, len(dataset)]``.
    """
    return split_dataset(dataset, first_size, _permutation(len(dataset), seed))


def _check_parts(name: str, parts: int) -> int:
    parts = operator.index(parts)
    if parts < 1:
        raise ValueError(f"{name} must be at least 1, got {parts}")
    return parts


def _borders(n: int, parts: int, balanced: bool) -> list[int]:
    if balanced:
        return [n * k // parts for k in range(parts + 1)]
    size = n // parts
    return [size * k for k in range(parts + 1)]


def split_dataset_n(dataset: Any, n: int, order: Any = None,
                    balanced: bool = False) -> list[SubDataset]:
    """Split a dataset into ``n`` parts of equal size, as Chainer does.

    Each part has ``len(dataset) // n`` examples; the ``len(dataset) % n``
    trailing examples belong to no part (Chainer's semantics). With
    ``balanced=True`` every example lands in exactly one part instead, and
    the sizes differ by at most one.

    Args:
        dataset: the dataset to split.
        n: the number of parts.
        order: optional permutation applied before splitting.
        balanced: keep every example, in parts whose sizes differ by at most one.

    Returns:
        A list of ``n`` :class:`SubDataset` views.

    Raises:
        ValueError: if ``n`` is less than 1.
    """
    length = len(dataset)
    n = _check_parts("n", n)
    b = _borders(length, n, balanced)
    return [SubDataset(dataset, b[k], b[k + 1], order) for k in range(n)]


def split_dataset_n_random(dataset: Any, n: int, seed: int | None = None,
                           balanced: bool = False) -> list[SubDataset]:
    """Split a dataset into ``n`` random parts of equal size, as Chainer does.

    Args:
        dataset: the dataset to split.
        n: the number of parts.
        seed: seed of the permutation (Chainer's ``RandomState``).
        balanced: keep every example, as in :func:`split_dataset_n`.

    Returns:
        A list of ``n`` :class:`SubDataset` views.

    Raises:
        ValueError: if ``n`` is less than 1.
    """
    return split_dataset_n(dataset, n, _permutation(len(dataset), seed), balanced)


def get_cross_validation_datasets(
    dataset: Any, n_folds: int, order: Any = None
) -> list[tuple[SubDataset, SubDataset]]:
    """Return ``n_folds`` ``(train, test)`` pairs for k-fold cross validation.

    The folds are Chainer's, in Chainer's order: the test parts partition the
    dataset (sizes differ by at most one), the first fold tests on the last
    part, and each train part is everything else in a rotated order.

    Args:
        dataset: the dataset to split.
        n_folds: the number of folds.
        order: optional permutation applied before splitting.

    Returns:
        A list of ``(train, test)`` pairs of :class:`SubDataset`.

    Raises:
        ValueError: if ``n_folds`` is less than 1 or ``order`` does not fit.
    """
    length = len(dataset)
    n_folds = _check_parts("n_folds", n_folds)
    order = np.arange(length) if order is None else _check_order(order, length).copy()
    b = _borders(length, n_folds, balanced=True)
    folds = []
    for test_size in reversed([b[k + 1] - b[k] for k in range(n_folds)]):
        folds.append(split_dataset(dataset, length - test_size, order))
        # Rotate the tail to the front: the next fold tests on the part before.
        order = np.concatenate([order[length - test_size:], order[:length - test_size]])
    return folds


def get_cross_validation_datasets_random(
    dataset: Any, n_folds: int, seed: int | None = None
) -> list[tuple[SubDataset, SubDataset]]:
    """Like :func:`get_cross_validation_datasets` over a random permutation.

    Args:
        dataset: the dataset to split.
        n_folds: the number of folds.
        seed: seed of the permutation (Chainer's ``RandomState``).

    Returns:
        A list of ``(train, test)`` pairs of :class:`SubDataset`.

    Raises:
        ValueError: if ``n_folds`` is less than 1.
    """
    return get_cross_validation_datasets(dataset, n_folds, _permutation(len(dataset), seed))
