"""A batch that keeps its columns stacked while behaving as a list of examples.

A column is a numpy array with the examples along axis 0, or a
:class:`RaggedColumn`: rows of different lengths (token ids) kept as one
values array and its offsets, so a batch of them is two arrays however many
rows it has.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np


class RaggedColumn(Sequence):
    """Rows of different lengths as one values array and offsets: row ``i`` is
    ``values[offsets[i]:offsets[i + 1]]`` (a view, never a copy), or None if
    ``valid`` says it is null.

    A batch of token-id lists kept this way is two arrays (three with nulls),
    whatever its number of rows: it is gathered with a few vectorised numpy
    calls, padded into one array by :func:`~dataset_kit.concat_examples`
    without a loop over rows, and crosses a process boundary (shared memory
    or a pickle) as those arrays.

    A null row (a missing list, as Arrow and Parquet have) is None when
    indexed or iterated, and has length 0 in :attr:`lengths`; an empty list
    is an empty array. A column with a null row cannot be padded
    (:meth:`padded` raises a ValueError naming the row): a null has no
    values to pad, and padding it as an empty list would hide it.

    Args:
        values: the rows' values, concatenated along axis 0.
        offsets: ``len(rows) + 1`` non-decreasing integers within
            ``[0, len(values)]``.
        valid: None (no row is null), or one boolean per row, False where
            the row is null; a null row must span no values.

    Raises:
        TypeError: if ``values`` or ``offsets`` is not a numpy array,
            ``offsets`` is not a 1-D integer array, or ``valid`` is neither
            None nor a 1-D boolean array.
        ValueError: if ``offsets`` is empty, decreases or leaves ``values``,
            or ``valid`` is not one flag per row or marks a row with values null.
    """

    __slots__ = ("values", "offsets", "valid")

    def __init__(self, values: np.ndarray, offsets: np.ndarray,
                 valid: np.ndarray | None = None) -> None:
        if not isinstance(values, np.ndarray) or values.ndim < 1:
            raise TypeError(f"values must be a numpy array with ndim >= 1, got "
                            f"{type(values).__name__}")
        if not isinstance(offsets, np.ndarray) or offsets.ndim != 1 \
                or offsets.dtype.kind not in "iu":
            raise TypeError(f"offsets must be a 1-D numpy array of integers, got "
                            f"{getattr(offsets, 'dtype', type(offsets).__name__)} "
                            f"of shape {getattr(offsets, 'shape', None)}")
        if len(offsets) == 0:
            raise ValueError("offsets must hold len(rows) + 1 integers, got an empty array")
        if offsets[0] < 0 or offsets[-1] > len(values) or np.any(np.diff(offsets) < 0):
            raise ValueError(f"offsets must be non-decreasing within [0, {len(values)}] "
                             f"(the length of values), got {offsets[:8]}...")
        if valid is not None:
            if not isinstance(valid, np.ndarray) or valid.ndim != 1 or valid.dtype != bool:
                raise TypeError(f"valid must be None or a 1-D numpy array of booleans, got "
                                f"{getattr(valid, 'dtype', type(valid).__name__)} of shape "
                                f"{getattr(valid, 'shape', None)}")
            if len(valid) != len(offsets) - 1:
                raise ValueError(f"valid must hold one flag per row ({len(offsets) - 1}), "
                                 f"got {len(valid)}")
            spans = np.flatnonzero(~valid & (np.diff(offsets) != 0))
            if len(spans):
                raise ValueError(f"row {int(spans[0])} is marked null (valid False) but spans "
                                 f"values; a null row must span none")
        self.values = values
        self.offsets = offsets.astype(np.int64, copy=False)
        self.valid = valid

    @classmethod
    def from_checked(cls, values: np.ndarray, offsets: np.ndarray,
                     valid: np.ndarray | None = None) -> RaggedColumn:
        """Build a column from arrays the caller has already checked (hot path)."""
        column = cls.__new__(cls)
        column.values, column.offsets, column.valid = values, offsets, valid
        return column

    @classmethod
    def from_rows(cls, rows: Sequence[np.ndarray | None]) -> RaggedColumn:
        """The rows (arrays of one dtype, equal shapes after axis 0; None for a null
        row) as one column.

        Raises:
            ValueError: if ``rows`` holds no array (nothing to take the dtype from).
        """
        present = [r for r in rows if r is not None]
        if not present:
            raise ValueError("from_rows needs at least one row that is an array to know the "
                             "dtype, got none")
        lengths = np.fromiter((0 if r is None else len(r) for r in rows), np.int64, len(rows))
        valid = None if len(present) == len(rows) else \
            np.fromiter((r is not None for r in rows), bool, len(rows))
        return cls.from_checked(np.concatenate(present),
                                np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                                valid)

    @property
    def dtype(self) -> np.dtype:
        """The values' dtype."""
        return self.values.dtype

    @property
    def lengths(self) -> np.ndarray:
        """Each row's length (0 for a null row)."""
        return np.diff(self.offsets)

    @property
    def null_count(self) -> int:
        """The number of null rows."""
        return 0 if self.valid is None else int(len(self.valid) - np.count_nonzero(self.valid))

    def first_null(self) -> int | None:
        """The position of the first null row, or None if no row is null."""
        if self.valid is None:
            return None
        nulls = np.flatnonzero(~self.valid)
        return int(nulls[0]) if len(nulls) else None

    @property
    def nbytes(self) -> int:
        """Bytes of the values, offsets and validity flags."""
        flags = 0 if self.valid is None else self.valid.nbytes
        return int(self.values.nbytes + self.offsets.nbytes + flags)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, (int, np.integer)):
            n = len(self)
            if not -n <= index < n:
                raise IndexError(f"row {index} out of range for a column of {n} rows")
            index = int(index) % n if n else 0
            if self.valid is not None and not self.valid[index]:
                return None
            return self.values[self.offsets[index]:self.offsets[index + 1]]
        if isinstance(index, slice):
            return self.take(np.arange(len(self))[index])
        return self.take(np.asarray(index))

    def __iter__(self) -> Iterator[np.ndarray | None]:
        values, bounds = self.values, self.offsets.tolist()
        rows = (values[a:b] for a, b in zip(bounds[:-1], bounds[1:]))
        if self.valid is None:
            return rows
        return (row if ok else None for row, ok in zip(rows, self.valid.tolist()))

    def take(self, rows: np.ndarray) -> RaggedColumn:
        """The rows at ``rows`` (integers, in that order) as a new contiguous column."""
        rows = np.asarray(rows, dtype=np.int64)
        starts, ends = self.offsets[rows], self.offsets[rows + 1]
        valid = None if self.valid is None else self.valid[rows]
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(ends - starts, out=offsets[1:])
        if _long_rows(offsets):
            # One memcpy per row: several times faster than a fancy index
            # over every value (0.1 ms against 0.9 for 256 rows of ~256).
            values = np.concatenate([self.values[a:b] for a, b in
                                     zip(starts.tolist(), ends.tolist())]) \
                if len(rows) else self.values[:0]
        else:
            values = self.values[_value_index(starts, offsets)]
        return RaggedColumn.from_checked(values, offsets, valid)

    @staticmethod
    def concatenate(columns: Sequence[RaggedColumn]) -> RaggedColumn:
        """The rows of ``columns``, one after the other, as one contiguous column.

        Raises:
            ValueError: if ``columns`` is empty.
        """
        if not columns:
            raise ValueError("concatenate needs at least one column, got none")
        parts = [c if c.offsets[0] == 0 and c.offsets[-1] == len(c.values)
                 else c.take(np.arange(len(c))) for c in columns]
        shifts = np.cumsum([0] + [len(c.values) for c in parts[:-1]])
        offsets = np.concatenate([parts[0].offsets[:1]] + [
            c.offsets[1:] + shift for c, shift in zip(parts, shifts)])
        valid = None
        if any(c.valid is not None for c in parts):
            valid = np.concatenate([np.ones(len(c), bool) if c.valid is None else c.valid
                                    for c in parts])
        return RaggedColumn.from_checked(np.concatenate([c.values for c in parts]), offsets,
                                         valid)

    def padded(self, padding: Any,
               empty: Callable[[tuple, np.dtype], np.ndarray] | None = None) -> np.ndarray:
        """The rows as one array of shape ``(rows, longest, ...)`` of the values' dtype,
        each row filled up with ``padding``.

        Args:
            padding: the value after each row's end.
            empty: makes the uninitialised array to fill, given its shape and
                dtype (``numpy.empty`` if None); ``concat_examples`` passes
                one that makes it in the shared memory a batch travels in.

        Raises:
            ValueError: if a row is null (naming the first one).
        """
        null = self.first_null()
        if null is not None:
            raise ValueError(f"row {null} is null (None), and a null list has no values to "
                             f"pad; {self.null_count} of {len(self)} rows are null")
        lengths = self.lengths
        longest = int(lengths.max()) if len(lengths) else 0
        out = (empty or np.empty)((len(self), longest) + self.values.shape[1:],
                                  self.values.dtype)
        np.copyto(out, padding, casting="unsafe")  # as numpy.full fills it
        if not longest:
            return out
        if _long_rows(self.offsets):
            for k, row in enumerate(self):  # a copy per row (see take)
                out[k, :len(row)] = row
        else:
            # Value j of the rows goes to (its row, j - its row's start).
            rows = np.repeat(np.arange(len(self)), lengths)
            within = _value_index(np.zeros(len(self), np.int64), self.offsets - self.offsets[0])
            out[rows, within] = self.values[self.offsets[0]:self.offsets[-1]]
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RaggedColumn):
            return NotImplemented
        return len(self) == len(other) and bool(np.array_equal(self.lengths, other.lengths)) \
            and self._validity() == other._validity() \
            and all(np.array_equal(a, b) for a, b in zip(self, other)
                    if a is not None and b is not None)

    def _validity(self) -> list[bool]:
        return [True] * len(self) if self.valid is None else self.valid.tolist()

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple:
        return (RaggedColumn.from_checked, (self.values, self.offsets, self.valid))

    def __repr__(self) -> str:
        nulls = f", nulls={self.null_count}" if self.null_count else ""
        return (f"RaggedColumn(rows={len(self)}, values={self.values.dtype}"
                f"{self.values.shape}{nulls})")


# Rows at least this long on average are copied one slice each; shorter ones
# through one index array over every value (a Python call per row costs more).
_LONG_ROW = 16


def _long_rows(offsets: np.ndarray) -> bool:
    rows = len(offsets) - 1
    return rows > 0 and int(offsets[-1] - offsets[0]) >= _LONG_ROW * rows


def _value_index(starts: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The source index of every value when row k (starting at ``starts[k]``) moves to
    ``offsets[k]:offsets[k + 1]``."""
    lengths = np.diff(offsets)
    return np.arange(offsets[0], offsets[-1], dtype=np.int64) + np.repeat(
        starts - offsets[:-1], lengths)


class ExampleBatch(Sequence):
    """A read-only sequence of examples backed by stacked columns.

    Array-backed datasets return this from ``ds[index_array]``: one array per
    column, already stacked along axis 0. Indexing, iteration and ``len`` give
    the same examples a list would (tuples, dicts or single arrays, as views
    into the columns); :func:`~dataset_kit.concat_examples` uses the columns
    directly instead of restacking one example at a time.

    A column may be a :class:`RaggedColumn` (rows of different lengths): the
    examples then hold views of its rows, and :func:`~dataset_kit.concat_examples`
    pads it when given ``padding`` (see :attr:`ragged`).

    Args:
        columns: an array or :class:`RaggedColumn`, or a tuple or dict of
            them, all of the same length along axis 0.

    Raises:
        TypeError: if ``columns`` is not an array, tuple or dict of arrays.
        ValueError: if the columns differ in length.
    """

    __slots__ = ("_columns", "_examples", "_length")

    def __init__(self, columns: np.ndarray | RaggedColumn | tuple | Mapping[str, Any]) -> None:
        if isinstance(columns, (np.ndarray, RaggedColumn)):
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
        if not arrays or not all(isinstance(a, RaggedColumn) or (
                isinstance(a, np.ndarray) and a.ndim >= 1) for a in arrays):
            raise TypeError("ExampleBatch columns must be one or more arrays with ndim >= 1 "
                            "or RaggedColumns")
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
    def columns(self) -> np.ndarray | RaggedColumn | tuple | dict:
        """The stacked columns, in the structure of one example."""
        return self._columns

    @property
    def ragged(self) -> bool:
        """Whether a column is a :class:`RaggedColumn` (not every column is one array)."""
        columns = self._columns
        if isinstance(columns, RaggedColumn):
            return True
        if isinstance(columns, np.ndarray):
            return False
        values = columns if isinstance(columns, tuple) else columns.values()
        return any(isinstance(c, RaggedColumn) for c in values)

    def _materialize(self) -> list:
        if self._examples is None:
            columns = self._columns
            if isinstance(columns, (np.ndarray, RaggedColumn)):
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
    if isinstance(columns, RaggedColumn):
        return f"ragged[{len(columns)}]"
    if isinstance(columns, tuple):
        return "(" + ", ".join(_describe(c) for c in columns) + ")"
    return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in columns.items()) + "}"
