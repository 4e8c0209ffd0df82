"""``from_data``: a TabularDataset from arrays, lists and functions of the row index."""

from __future__ import annotations

from typing import Any

import numpy as np

from dataset_kit._gather import take_rows
from dataset_kit.tabular.tabular_dataset import TabularDataset


def from_data(data: Any, *, size: int | None = None) -> TabularDataset:
    """Make a :class:`TabularDataset` from columns.

    ``data`` is one column, a tuple of columns (tuple mode) or a dict of
    columns (dict mode). A column is an array, a list, or a function of the
    row index (then its key, and ``size`` unless another column gives the
    length, are needed). In a tuple, a column may be named: ``(key, column)``,
    and a function may give several columns: ``((key, key), fn)`` with ``fn``
    returning a tuple or dict.

    Args:
        data: the column(s).
        size: the number of rows, for datasets made of functions only.

    Returns:
        The dataset.

    Raises:
        ValueError: if a function column has no key, or the size is unknown.
        TypeError: if a column is neither an array, a list nor callable.
    """
    if isinstance(data, tuple):
        if len(data) == 2 and _is_key(data[0]):
            return _column(data[0], data[1], size)
        named = [item if isinstance(item, tuple) else (None, item) for item in data]
        size = _size_of([column for _, column in named], size)
        parts = [_column(key, column, size) for key, column in named]
        return parts[0].join(*parts[1:]).astuple()
    if isinstance(data, dict):
        size = _size_of(list(data.values()), size)
        parts = [_column(key, column, size) for key, column in data.items()]
        return parts[0].join(*parts[1:]).asdict()
    return _column(None, data, size)


def _is_key(key: Any) -> bool:
    return isinstance(key, str) or (isinstance(key, tuple) and all(isinstance(k, str)
                                                                   for k in key))


def _size_of(columns: list, size: int | None) -> int | None:
    if size is not None:
        return size
    return next((len(c) for c in columns if not callable(c) and hasattr(c, "__len__")), None)


def _column(key: Any, column: Any, size: int | None) -> TabularDataset:
    if isinstance(column, (np.ndarray, list)):
        return _Stored(f"_{id(column)}" if key is None else key, column)
    if callable(column):
        if key is None:
            raise ValueError("a column given as a function needs a key: (key, function)")
        if size is None:
            raise ValueError("a dataset of functions only needs size= (its number of rows)")
        return _RowIndex(size).transform(key, column)
    raise TypeError(f"a column must be an array, a list or a function of the row index, "
                    f"got {type(column).__name__}")


class _Stored(TabularDataset):
    """One column held in an array or a list."""

    array_rows = True

    def __init__(self, key: str, values: np.ndarray | list) -> None:
        self._key = key
        self._values = values

    def __len__(self) -> int:
        return len(self._values)

    @property
    def keys(self) -> tuple[str, ...]:
        return (self._key,)

    @property
    def mode(self) -> Any:
        return None

    def get_examples(self, indices: Any, key_indices: tuple[int, ...] | None) -> tuple:
        values = self._values
        if indices is not None:
            rows = indices if isinstance(indices, (np.ndarray, slice)) else np.asarray(indices)
            if isinstance(values, np.ndarray) and not isinstance(rows, slice) \
                    and rows.dtype.kind in "iu":
                values = take_rows(values, rows)
            elif isinstance(values, np.ndarray) or isinstance(indices, slice):
                values = values[indices]
            else:
                values = [values[i] for i in indices]
        return (values,) * (1 if key_indices is None else len(key_indices))


class _RowIndex(TabularDataset):
    """The row numbers ``0 .. size - 1``, the argument of function columns."""

    def __init__(self, size: int) -> None:
        self._size = size

    def __len__(self) -> int:
        return self._size

    @property
    def keys(self) -> tuple[str, ...]:
        return ("index",)

    @property
    def mode(self) -> Any:
        return None

    def get_examples(self, indices: Any, key_indices: tuple[int, ...] | None) -> tuple:
        if indices is None or isinstance(indices, slice):
            indices = list(range(*(indices or slice(None)).indices(self._size)))
        return (indices,) * (1 if key_indices is None else len(key_indices))


