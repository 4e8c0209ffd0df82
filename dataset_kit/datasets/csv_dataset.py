"""CSVArrayDataset: the rows of a numeric CSV file, read on demand, never the whole file."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np

from dataset_kit.batch import ExampleBatch
from dataset_kit.dataset import DatasetMixin
from dataset_kit.formats import csv as csv_format

_CHUNK = 16 << 20
# Sequential batches are served from a parsed window of about this many bytes:
# parsers have a fixed cost per call (pandas: per column), so small calls are slow.
_WINDOW_BYTES = 8 << 20


def line_offsets(path: str) -> np.ndarray:
    """Return the byte offset of every line's start, plus the end of the last line.

    The file is scanned in chunks (memory stays bounded); a final line without
    a newline counts, a trailing newline adds no empty line.
    """
    ends = []
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            ends.append(np.flatnonzero(np.frombuffer(chunk, np.uint8) == 10) + (size + 1))
            size += len(chunk)
    offsets = np.concatenate([np.zeros(1, np.int64), *ends]).astype(np.int64)
    if offsets[-1] != size:
        offsets = np.append(offsets, size)
    return offsets


class CSVArrayDataset(DatasetMixin):
    """Row ``i`` of a numeric CSV file, as an array of ``row_shape``.

    An index of line offsets is built once (a scan, not a load); batches are
    read by offset and parsed, a contiguous range of rows in one read. What
    counts as a number is what ``numpy.loadtxt`` accepts (``nan`` and ``inf``
    included); pandas' C parser, when the ``csv`` extra is installed, only
    makes the same parse faster. A missing value (an empty cell, or ``NA``,
    ``N/A``, ``#N/A``, ``null``, ``NULL``, ``None``, ``<NA>`` and pandas' other
    spellings) is an error naming the file, line and column, unless
    ``fill_value`` is given. The file is opened lazily and reopened in each
    process, so the dataset works in forked or spawned workers; pickling it
    pickles the path and the index, not the data.

    Args:
        path: the CSV file (comma-separated numbers, no header).
        row_shape: the shape of one row's values (their product is the
            number of columns).
        dtype: the arrays' dtype.
        fill_value: the value that replaces missing values (for example
            ``float("nan")`` or ``0``); None makes them errors.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        IsADirectoryError: if ``path`` is a directory.
        ValueError: for a bad ``row_shape`` or a ``fill_value`` that ``dtype``
            cannot hold; (on access) for a malformed row or a missing value,
            naming the file and line (1-based, as an editor shows it).
    """

    def __init__(self, path: str | os.PathLike, row_shape: Sequence[int],
                 dtype: Any = np.float32, fill_value: float | None = None) -> None:
        self.path = os.fspath(path)
        self.row_shape = tuple(int(d) for d in row_shape)
        if not self.row_shape or any(d <= 0 for d in self.row_shape):
            raise ValueError(f"row_shape must be positive dimensions, got {row_shape!r}")
        self.dtype = np.dtype(dtype)
        self.fill_value = fill_value
        self._fill = None if fill_value is None else _fill_text(fill_value, self.dtype)
        if os.path.isdir(self.path):
            raise IsADirectoryError(f"CSV file {self.path} is a directory, not a file")
        self._columns = int(np.prod(self.row_shape))
        self._offsets = line_offsets(self.path)
        self._file: Any = None
        self._pid: int | None = None
        self._window: tuple[int, int, np.ndarray] | None = None  # (first row, stop, values)
        mean_line = self._offsets[-1] / max(len(self), 1)
        self._window_rows = max(1, int(_WINDOW_BYTES / max(mean_line, 1)))

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _file=None, _pid=None, _window=None)

    def _fd(self) -> int:
        if self._pid != os.getpid():  # first use, or a new process: never share a handle
            self._file = open(self.path, "rb")  # noqa: SIM115 - lives with the dataset
            self._pid = os.getpid()
        return self._file.fileno()

    def get_example(self, i: int) -> np.ndarray:
        return self._rows(np.array([i]))[0]

    def get_batch(self, indices: np.ndarray) -> Sequence[Any]:
        return ExampleBatch.from_checked(self._rows(indices), len(indices))

    def _rows(self, indices: np.ndarray) -> np.ndarray:
        if len(indices) == 0:
            return np.empty((0, *self.row_shape), self.dtype)
        breaks = np.flatnonzero(np.diff(indices) != 1) + 1
        if len(breaks) < 8:  # a few contiguous runs (sequential reading, a wrapped batch)
            runs = np.split(indices, breaks)
            parts = [self._run(int(run[0]), int(run[-1])) for run in runs]
            return parts[0] if len(parts) == 1 else np.concatenate(parts)
        # Scattered rows (a shuffle): read each line, parse them in one call.
        fd = self._fd()
        lines = [os.pread(fd, int(self._offsets[i + 1] - self._offsets[i]), int(self._offsets[i]))
                 for i in indices.tolist()]
        block = b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines)
        return self._parse(block, indices)

    def _run(self, first: int, last: int) -> np.ndarray:
        """Rows ``first..last`` (contiguous), served from the parsed window."""
        window = self._window
        if window is None or not (window[0] <= first and last < window[1]):
            stop_row = min(len(self), max(last + 1, first + self._window_rows))
            try:
                values = self._parse(self._read(first, stop_row), first)
            except ValueError:
                if stop_row == last + 1:
                    raise
                # A bad row after the requested ones: the requested rows may be fine.
                return self._parse(self._read(first, last + 1), first)
            window = self._window = (first, stop_row, values)
        # A view of the window: replacing the window later leaves it intact.
        return window[2][first - window[0]:last + 1 - window[0]]

    def _read(self, first: int, stop: int) -> bytes:
        start, end = int(self._offsets[first]), int(self._offsets[stop])
        return os.pread(self._fd(), end - start, start)

    def _parse(self, block: bytes, rows: int | np.ndarray) -> np.ndarray:
        """Parse a block of whole lines: rows ``rows, rows + 1, ...``, or the rows listed."""
        # Every line must have columns - 1 commas: checked first, vectorised,
        # because a parser may fill a short row with NaN rather than fail.
        raw = np.frombuffer(block, np.uint8)
        ends = np.flatnonzero(raw == 10)
        if not len(ends) or ends[-1] != len(raw) - 1:
            ends = np.append(ends, len(raw))
        commas = np.diff(np.searchsorted(np.flatnonzero(raw == 44), np.append(-1, ends)))
        if np.any(commas != self._columns - 1):
            self._raise_for_first_bad_line(block, rows)
        values = csv_format.parse_numbers(block, len(ends), self._columns, self.dtype)
        if values is None and self._fill is not None:
            block = csv_format.fill_missing(block, self._fill)
            values = csv_format.parse_numbers(block, len(ends), self._columns, self.dtype)
        if values is None:
            self._raise_for_first_bad_line(block, rows)
        return values.reshape(-1, *self.row_shape)

    def _raise_for_first_bad_line(self, block: bytes, rows: int | np.ndarray) -> NoReturn:
        """Find the malformed line of a block that failed to parse, and name it (error path)."""
        k, reason = csv_format.first_bad_line(block, self._columns, self.dtype)
        row = rows + k if isinstance(rows, int) else int(rows[k])
        raise ValueError(f"{self.path}, line {row + 1}: {reason} "
                         f"(row_shape {self.row_shape})")


def _fill_text(fill_value: Any, dtype: np.dtype) -> bytes:
    """The fill value as a cell both parsers read back as exactly that value."""
    try:
        value = np.asarray(fill_value, dtype=dtype).item()
        exact = np.issubdtype(dtype, np.floating) or value == fill_value
    except (TypeError, ValueError, OverflowError):
        exact = False
    if not exact or isinstance(fill_value, (bool, str, bytes)):
        raise ValueError(f"fill_value must be a number that dtype {dtype} holds exactly, "
                         f"got {fill_value!r}")
    return repr(value).encode()
