"""ParquetDataset: Parquet files, local or at any fsspec URL, as a random-access dataset."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int
from dataset_kit.datasets.columnar import ColumnarDataset
from dataset_kit.formats import _arrow
from dataset_kit.formats.parquet import ParquetFormatError, ParquetPart, list_files


class ParquetDataset(ColumnarDataset):
    """The rows of Parquet files: ``ds[i]`` is a dict ``{column: value}``.

    Opening reads only the files' footers and builds the map from global row
    to (file, row group, row) from their row counts: no data is scanned. A
    batch reads each row group it touches once, only the columns asked for,
    and keeps decoded row groups in a cache of ``cache_bytes``. Values are
    numpy scalars and arrays for fixed-width columns (a fixed-size list: a
    1-D array), 1-D arrays for lists of numbers (token ids), ``str`` and
    ``bytes`` for string and binary columns, dicts for structs and lists for
    other lists; a null is NaN in a number column (an integer or boolean
    column that may hold nulls is float64) and None elsewhere. A batch is an
    :class:`~dataset_kit.ExampleBatch` of columns, a list of numbers without
    nulls being a :class:`~dataset_kit.batch.RaggedColumn`, unless a column
    holds strings, binaries, structs or lists that may hold nulls (then a
    list of dicts).

    Remote files are read in byte ranges (the footer, then a row group's
    column chunks), each retried and bounded by ``timeout``: no local copy.

    The dataset holds no state to checkpoint; :class:`RowGroupOrderSampler`
    records the files' stamps and refuses to resume on files that changed.

    Args:
        source: a file, a glob, a folder (its ``*.parquet`` files, recursively;
            Hive ``key=value`` folders become string columns), or a list of
            those, as local paths or fsspec URLs (``s3://``, ``gs://``,
            ``http(s)://``, ``file://``).
        columns: the columns to read (None: all, in the files' order).
        storage_options: fsspec's options for URLs (credentials, endpoint...).
        cache_bytes: bytes of decoded row groups kept in memory (per process).
        timeout: seconds one ranged read of a remote file may take.
        retries: failed ranged reads retried (with backoff) before an error.

    Raises:
        FileNotFoundError: if a source matches no file.
        ParquetFormatError: if a file is not Parquet, or the files' schemas
            disagree, a column is missing or of a type that cannot become a
            numpy array (names the file and the column).
        ParquetReadError: if a remote footer could not be read.
        ImportError: if pyarrow (the ``parquet`` extra) or, for URLs, fsspec
            (the ``stream`` extra) is missing.
    """

    def __init__(self, source: str | os.PathLike | Sequence[str | os.PathLike],
                 columns: Sequence[str] | None = None, *,
                 storage_options: dict | None = None, cache_bytes: int = 256 << 20,
                 timeout: float = 60.0, retries: int = 5) -> None:
        _arrow.require_pyarrow("ParquetDataset")
        super().__init__(non_negative_int("cache_bytes", cache_bytes))
        sources = [source] if isinstance(source, (str, os.PathLike)) else list(source)
        if not sources or not all(isinstance(s, (str, os.PathLike)) for s in sources):
            raise TypeError(f"source must be a path, a URL or a non-empty list of them, got "
                            f"{source!r}")
        if columns is not None and (isinstance(columns, str) or not all(
                isinstance(c, str) for c in columns) or not columns):
            raise TypeError(f"columns must be a non-empty list of column names or None, got "
                            f"{columns!r}")
        if storage_options is not None and not isinstance(storage_options, dict):
            raise TypeError(f"storage_options must be a dict or None, got "
                            f"{type(storage_options).__name__}")
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        retries = non_negative_int("retries", retries)
        files = [f for s in sources for f in list_files(os.fspath(s), storage_options)]
        self.parts = [ParquetPart(name, partitions, storage_options, float(timeout), retries)
                      for name, partitions in files]
        self.stamps = [part.stamp.as_state() for part in self.parts]
        self.columns = self._columns(None if columns is None else list(columns))
        self._file_columns = [[name for name, _, _ in self.columns
                               if name not in part.partitions] for part in self.parts]
        groups = [(p, g, rows) for p, part in enumerate(self.parts)
                  for g, rows in enumerate(part.group_rows)]
        self._groups = [(p, g) for p, g, _ in groups]
        self.row_group_starts = np.concatenate(
            [[0], np.cumsum([rows for _, _, rows in groups], dtype=np.int64)]).astype(np.int64)

    def _columns(self, wanted: list[str] | None) -> list[tuple[str, str, np.dtype]]:
        """Check the files' schemas against each other; return ``(name, kind, dtype)`` each."""
        pa = _arrow.require_pyarrow("ParquetDataset")
        first = next((p for p in self.parts if p.schema is not None), None)
        if first is None:
            raise ParquetFormatError(f"none of the files has a schema (all are empty): "
                                     f"{[p.name for p in self.parts]}")
        names = [f.name for f in first.schema] + [k for k in first.partitions
                                                  if k not in first.schema.names]
        wanted = names if wanted is None else wanted
        if len(set(wanted)) != len(wanted):
            raise ValueError(f"columns names a column twice: {wanted}")
        found = []
        for name in wanted:
            types = {}
            for part in self.parts:
                if part.schema is None:
                    continue
                if name in part.partitions:
                    types[part.name] = pa.string()
                elif name in part.schema.names:
                    types[part.name] = part.schema.field(name).type
                else:
                    raise ParquetFormatError(f"{part.name} has no column {name!r} (its columns: "
                                             f"{part.schema.names + list(part.partitions)})")
            reference = types[first.name]
            for where, data_type in types.items():
                if data_type != reference:
                    raise ParquetFormatError(
                        f"{where}: column {name!r} is {data_type}, but in {first.name} it is "
                        f"{reference}; the files' schemas disagree")
            nullable = any(p.may_hold_nulls(name) for p in self.parts)
            kind = _arrow.kind_of(reference, nullable)
            if kind is None:
                raise ParquetFormatError(f"{first.name}: column {name!r} of type {reference} "
                                         f"cannot become a numpy array or Python value; leave "
                                         f"it out with columns=[...]")
            found.append((name, kind, _arrow.numpy_dtype(reference, kind, nullable)))
        if wanted is names:
            for part in self.parts:
                extra = [] if part.schema is None else \
                    [n for n in part.schema.names if n not in wanted]
                if extra:
                    raise ParquetFormatError(f"{part.name} has column {extra[0]!r}, which "
                                             f"{first.name} has not; the files' schemas disagree")
        return found

    def read_group(self, group: int) -> Any:
        """Read global row group ``group``: its columns, and the file's partition columns.

        Raises:
            ParquetFormatError: naming the file and the row group if it is corrupt.
            ParquetReadError: if its bytes could not be read from the store.
        """
        pa = _arrow.require_pyarrow("ParquetDataset")
        p, g = self._groups[group]
        part = self.parts[p]
        table = part.read_group(g, self._file_columns[p])
        for name, value in part.partitions.items():
            if any(name == c for c, _, _ in self.columns):
                table = table.append_column(name, pa.array([value] * table.num_rows,
                                                           pa.string()))
        return table

    def locate_file(self, index: int) -> tuple[str, int, int]:
        """Return ``(file, row group in the file, row in the row group)`` of row ``index``."""
        group, row = self.locate(index)
        p, g = self._groups[group]
        return self.parts[p].name, g, row

    def __repr__(self) -> str:
        return (f"ParquetDataset({len(self.parts)} files, {len(self)} rows, "
                f"{self.row_groups} row groups, columns={[n for n, _, _ in self.columns]})")
