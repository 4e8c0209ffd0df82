"""``transform`` and ``transform_batch``: new columns computed from a dataset's examples."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dataset_kit.datasets.transform_dataset import TransformDataset
from dataset_kit.tabular.tabular_dataset import TabularDataset


class _Transformed(TabularDataset):
    """Columns ``keys`` computed from ``dataset``; the mode is what the function returns."""

    _what = "transform"

    def __init__(self, dataset: TabularDataset, keys: Any, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise TypeError(f"{self._what} must be callable, got {type(fn).__name__}")
        self._dataset = dataset
        self._keys = keys if isinstance(keys, tuple) else (keys,)
        self._fn = fn
        self._mode: Any = _UNKNOWN

    def __len__(self) -> int:
        return len(self._dataset)

    @property
    def keys(self) -> tuple[str, ...]:
        return self._keys

    @property
    def mode(self) -> Any:
        if self._mode is _UNKNOWN:
            self.get_examples([0], None)  # the first result tells
        return self._mode

    def _call(self, values: tuple) -> Any:
        if self._dataset.mode is dict:
            return self._fn(**dict(zip(self._dataset.keys, values)))
        return self._fn(*values)

    def _settle(self, result: Any) -> tuple:
        """Record the mode ``result`` implies and return its values in key order."""
        mode = tuple if isinstance(result, tuple) else dict if isinstance(result, dict) else None
        if self._mode is not _UNKNOWN and self._mode is not mode:
            raise ValueError(f"{self._what} must not change its return type: it returned "
                             f"{_name(self._mode)} before and {_name(mode)} now")
        self._mode = mode
        if mode is dict:
            return tuple(result[key] for key in self._keys)
        return result if mode is tuple else (result,)

    def convert(self, data: Any) -> Any:
        return self._dataset.convert(data)

    @property
    def array_rows(self) -> bool:  # type: ignore[override]
        return self._dataset.array_rows


class Transform(_Transformed):
    """``transform`` applied to each example (it may draw from ``example_rng()``).

    The rows are the one :class:`~dataset_kit.datasets.TransformDataset`
    over the base's tuples; this class only maps its keys and columns.
    """

    def __init__(self, dataset: TabularDataset, keys: Any, fn: Callable[..., Any]) -> None:
        super().__init__(dataset, keys, fn)
        self._rows = TransformDataset(dataset.astuple(), self._row)

    def _row(self, values: tuple) -> tuple:
        return self._settle(self._call(values))

    def get_examples(self, indices: Any, key_indices: tuple[int, ...] | None) -> tuple:
        wanted = range(len(self._keys)) if key_indices is None else key_indices
        results = self._rows.get_batch(_row_array(indices, len(self)))
        return tuple([values[k] for values in results] for k in wanted)


class TransformBatch(_Transformed):
    """``transform_batch`` applied to the columns of each batch."""

    _what = "transform_batch"

    def get_examples(self, indices: Any, key_indices: tuple[int, ...] | None) -> tuple:
        wanted = range(len(self._keys)) if key_indices is None else key_indices
        if indices is None:
            length = len(self)
        elif isinstance(indices, slice):
            length = len(range(*indices.indices(len(self))))
        else:
            length = len(indices)
        columns = self._settle(self._call(self._dataset.get_examples(indices, None)))
        if any(len(column) != length for column in columns):
            raise ValueError(
                f"transform_batch must not change the number of rows: asked for {length}, "
                f"got columns of lengths {[len(c) for c in columns]}")
        return tuple(columns[k] for k in wanted)


def _row_array(indices: Any, length: int) -> np.ndarray:
    """Chainer's row selector (None, a slice or a list of ints) as non-negative int64 rows."""
    if indices is None:
        return np.arange(length, dtype=np.int64)
    if isinstance(indices, slice):
        return np.arange(*indices.indices(length), dtype=np.int64)
    rows = np.asarray(indices, dtype=np.int64).reshape(-1)
    return np.where(rows < 0, rows + length, rows)


class _Unknown:
    def __repr__(self) -> str:
        return "unknown"


_UNKNOWN = _Unknown()


def _name(mode: Any) -> str:
    return "a single value" if mode is None else f"a {mode.__name__}"
