"""A batch that keeps its columns stacked while behaving as a list of examples."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np


class ExampleBatch(Sequence):
    """A read-only sequence of examples backed by stacked columns.

    Array-backed datasets return this from ``ds[index_array]``: one array per
    column, already stacked along axis 0. Indexing, iteration and ``len`` give
    the same examples a list would (tuples, dicts or single arrays, as views
    into the columns); :func:`~dataset_kit.concat_examples` uses the columns
    directly instead of restacking one example at a time.

    Args:
        columns: an array, a tuple of arrays or a dict of arrays, all of the
            same length along axis 0.

    Raises:
        TypeError: if ``columns`` is not an array, tuple or dict of arrays.
        ValueError: if the columns differ in length.
    """

    __slots__ = ("_columns", "_examples", "_length")

    def __init__(self, columns: np.ndarray | tuple | Mapping[str, np.ndarray]) -> None:
        if isinstance(columns, np.ndarray):
            arrays = [columns]
        elif isinstance(columns, tuple):
            arrays = list(columns)
        elif isinstance(columns, Mapping):
            columns = dict(columns)
            arrays = list(columns.values())
        else:
            raise TypeError(
                f"ExampleBatch columns must be an ndarray, a tuple or a dict of ndarrays, "
                f"got {type(columns).__name__}"
            )
        if not arrays or not all(isinstance(a, np.ndarray) and a.ndim >= 1 for a in arrays):
            raise TypeError("ExampleBatch columns must be one or more arrays with ndim >= 1")
        lengths = {len(a) for a in arrays}
        if len(lengths) != 1:
            raise ValueError(f"ExampleBatch columns differ in length: {sorted(lengths)}")
        self._columns = columns
        self._length = lengths.pop()
        self._examples: list | None = None

    @classmethod
    def from_checked(cls, columns: np.ndarray | tuple | dict, length: int) -> ExampleBatch:
        """Build a batch from columns the caller has already checked (hot path)."""
        batch = cls.__new__(cls)
        batch._columns = columns
        batch._length = length
        batch._examples = None
        return batch

    @property
    def columns(self) -> np.ndarray | tuple | dict:
        """The stacked columns, in the structure of one example."""
        return self._columns

    def _materialize(self) -> list:
        if self._examples is None:
            columns = self._columns
            if isinstance(columns, np.ndarray):
                self._examples = list(columns)
            elif isinstance(columns, tuple):
                self._examples = list(zip(*columns))
            else:
                keys = list(columns)
                self._examples = [dict(zip(keys, values)) for values in zip(*columns.values())]
        return self._examples

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: Any) -> Any:
        return self._materialize()[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._materialize())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ExampleBatch):
            other = other._materialize()
        if not isinstance(other, (list, tuple)):
            return NotImplemented
        return self._materialize() == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ExampleBatch(length={self._length}, columns={_describe(self._columns)})"

    def __reduce__(self) -> tuple:
        return (ExampleBatch, (self._columns,))


def _describe(columns: Any) -> str:
    if isinstance(columns, np.ndarray):
        return f"array{columns.shape}"
    if isinstance(columns, tuple):
        return "(" + ", ".join(_describe(c) for c in columns) + ")"
    return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in columns.items()) + "}"
