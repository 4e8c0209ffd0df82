"""``ds.slice[rows, keys]``: a view of some rows and columns, composed without copying."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from dataset_kit.tabular.tabular_dataset import TabularDataset

Rows = Any  # None (all rows), a slice, or a list of non-negative ints


class SliceHelper:
    """What ``dataset.slice`` returns; indexing it makes the view."""

    def __init__(self, dataset: TabularDataset) -> None:
        self._dataset = dataset

    def __getitem__(self, args: Any) -> TabularDataset:
        rows, keys = args if isinstance(args, tuple) else (args, None)
        return Slice(self._dataset, rows, keys)


class Slice(TabularDataset):
    """Rows ``rows`` and columns ``keys`` of ``dataset``.

    Raises:
        IndexError: if a row or a key position is out of range.
        KeyError: if a key name is not a column.
        ValueError: if a boolean mask is not as long as the dataset.
    """

    def __init__(self, dataset: TabularDataset, rows: Any, keys: Any) -> None:
        self._dataset = dataset
        # keys=None keeps the mode; one key gives single values; a tuple, tuples.
        self._single = None if keys is None else not isinstance(keys, tuple)
        if self._single:
            keys = (keys,)
        self._rows = _rows(rows, len(dataset))
        self._columns = None if keys is None else _columns(keys, dataset.keys)

    def __len__(self) -> int:
        if self._rows is None:
            return len(self._dataset)
        if isinstance(self._rows, slice):
            return len(range(*self._rows.indices(len(self._dataset))))
        return len(self._rows)

    @property
    def keys(self) -> tuple[str, ...]:
        names = self._dataset.keys
        return names if self._columns is None else tuple(names[k] for k in self._columns)

    @property
    def mode(self) -> Any:
        if self._single is None:
            return self._dataset.mode
        return None if self._single else (self._dataset.mode or tuple)

    def get_examples(self, indices: Rows, key_indices: tuple[int, ...] | None) -> tuple:
        rows = _compose_rows(self._rows, indices, len(self._dataset), len(self))
        if key_indices is None:
            columns = self._columns
        elif self._columns is None:
            columns = key_indices
        else:
            columns = tuple(self._columns[k] for k in key_indices)
        return self._dataset.get_examples(rows, columns)

    def convert(self, data: Any) -> Any:
        return self._dataset.convert(data)

    @property
    def array_rows(self) -> bool:  # type: ignore[override]
        return self._dataset.array_rows


def _rows(rows: Any, length: int) -> Rows:
    """Normalise a row selection: slices stay slices, masks and ints become lists."""
    if isinstance(rows, slice):
        return rows
    rows = list(rows)
    if rows and all(isinstance(r, (bool, np.bool_)) for r in rows):
        if len(rows) != length:
            raise ValueError(
                f"a boolean row mask must have the dataset's length {length}, got {len(rows)}")
        return [i for i, keep in enumerate(rows) if keep]
    checked = []
    for row in rows:
        i = int(row)
        if not -length <= i < length:
            raise IndexError(f"row {i} is out of range for a dataset of length {length}")
        checked.append(i + length if i < 0 else i)
    return checked


def _columns(keys: tuple, names: tuple[str, ...]) -> tuple[int, ...]:
    columns = []
    for key in keys:
        if isinstance(key, numbers.Integral):
            k = int(key)
            if not -len(names) <= k < len(names):
                raise IndexError(f"key position {k} is out of range for keys {names}")
            columns.append(k % len(names))
        elif key in names:
            columns.append(names.index(key))
        else:
            raise KeyError(f"{key!r} is not one of the keys {names}")
    return tuple(columns)


def _compose_rows(outer: Rows, inner: Rows, outer_length: int, length: int) -> Rows:
    """Rows of the base dataset for rows ``inner`` of a view over rows ``outer``.

    Slices composed with slices stay slices (so a file-backed base can read
    a range); anything composed with a list becomes a list.
    """
    if inner is None:
        return outer
    if outer is None:
        return inner
    if isinstance(outer, slice):
        start, _, step = outer.indices(outer_length)
        if isinstance(inner, slice):
            first, last, inner_step = inner.indices(length)
            if not range(first, last, inner_step):
                return slice(0, 0)  # (Chainer composes this into a wrapping start of -1)
            new_start, new_stop = start + step * first, start + step * last
            new_step = step * inner_step
            # A bound that falls before index 0 means "to the end" in that direction.
            return slice(None if new_start < 0 and new_step > 0 else new_start,
                         None if new_stop < 0 and new_step < 0 else new_stop, new_step)
        return [start + step * i for i in inner]
    if isinstance(inner, slice):
        return outer[inner]
    return [outer[i] for i in inner]
