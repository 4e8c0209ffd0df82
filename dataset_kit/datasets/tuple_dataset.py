"""Datasets made of parallel columns: TupleDataset and DictDataset."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dataset_kit._gather import take_rows
from dataset_kit.batch import ExampleBatch
from dataset_kit.dataset import DatasetMixin, MapDataset, fetch_examples


def _check_lengths(columns: dict[str, MapDataset], what: str) -> int:
    lengths = {name: len(column) for name, column in columns.items()}
    if len(set(lengths.values())) > 1:
        described = ", ".join(f"{name}: {n}" for name, n in lengths.items())
        raise ValueError(f"{what} columns must have equal lengths, got {described}")
    return next(iter(lengths.values()))


def _gather(column: MapDataset, indices: np.ndarray) -> Any:
    if isinstance(column, np.ndarray):
        return take_rows(column, indices)
    # A column may itself be a dataset that draws from example_rng().
    return fetch_examples(column, indices)


def _stacked(column: Any) -> np.ndarray | None:
    """The column as one stacked array, if it is one already (else None)."""
    if isinstance(column, np.ndarray):
        return column
    if isinstance(column, ExampleBatch) and isinstance(column.columns, np.ndarray):
        return column.columns
    return None


class TupleDataset(DatasetMixin):
    """A dataset whose examples are tuples taken from parallel columns.

    ``TupleDataset(x, y)[i] == (x[i], y[i])``. Columns may be arrays, lists or
    other datasets, and must have equal lengths.

    Unlike Chainer's ``TupleDataset``, an index array or a slice returns a
    sequence of *examples* (tuples), not a tuple of columns: every dataset
    answers ``ds[index_array]`` the same way. When all columns are arrays the
    answer is an :class:`~dataset_kit.ExampleBatch` built with one fancy index
    per column.

    Args:
        *datasets: the columns.

    Raises:
        ValueError: if no column is given or the lengths differ.
    """

    def __init__(self, *datasets: MapDataset) -> None:
        if not datasets:
            raise ValueError("TupleDataset needs at least one column, got none")
        self._length = _check_lengths(
            {f"column {k}": d for k, d in enumerate(datasets)}, "TupleDataset"
        )
        self._datasets = datasets
        arrays = tuple(d for d in datasets if isinstance(d, np.ndarray))
        # All columns as arrays when every column is one (one fancy index each), else None.
        self._arrays = arrays if len(arrays) == len(datasets) else None

    def __len__(self) -> int:
        return self._length

    def get_example(self, i: int) -> tuple:
        return tuple(d[i] for d in self._datasets)

    def get_batch(self, indices: np.ndarray) -> Sequence[tuple]:
        arrays = self._arrays
        if arrays is not None:
            if len(arrays) == 2:  # (x, y), the commonest, without a comprehension's frame
                x, y = arrays
                return ExampleBatch.from_checked((take_rows(x, indices), take_rows(y, indices)),
                                            len(indices))
            return ExampleBatch.from_checked(tuple([take_rows(a, indices) for a in arrays]),
                                        len(indices))
        columns = [_gather(d, indices) for d in self._datasets]
        stacked = [_stacked(c) for c in columns]
        if all(c is not None for c in stacked):
            # Columns from datasets that answer with stacked arrays stay stacked.
            return ExampleBatch.from_checked(tuple(stacked), len(indices))
        return list(zip(*columns))


class DictDataset(DatasetMixin):
    """A dataset whose examples are dicts taken from named parallel columns.

    ``DictDataset(x=x, y=y)[i] == {"x": x[i], "y": y[i]}``.

    Args:
        **datasets: the columns, by name.

    Raises:
        ValueError: if no column is given or the lengths differ.
    """

    def __init__(self, **datasets: MapDataset) -> None:
        if not datasets:
            raise ValueError("DictDataset needs at least one column, got none")
        self._length = _check_lengths(datasets, "DictDataset")
        self._datasets = datasets
        arrays = {name: d for name, d in datasets.items() if isinstance(d, np.ndarray)}
        # All columns as arrays when every column is one (one fancy index each), else None.
        self._arrays = arrays if len(arrays) == len(datasets) else None

    def __len__(self) -> int:
        return self._length

    def get_example(self, i: int) -> dict:
        return {name: d[i] for name, d in self._datasets.items()}

    def get_batch(self, indices: np.ndarray) -> Sequence[dict]:
        if self._arrays is not None:
            return ExampleBatch.from_checked(
                {name: take_rows(a, indices) for name, a in self._arrays.items()}, len(indices))
        columns = {name: _gather(d, indices) for name, d in self._datasets.items()}
        keys = list(columns)
        return [dict(zip(keys, values)) for values in zip(*columns.values())]
