"""ParquetDataset: Parquet files, local or at any fsspec URL, as a random-access dataset."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit._fsspec import is_local
from dataset_kit.datasets.columnar import ColumnarDataset
from dataset_kit.filecache import CachedFile, FileCache, SizeAndStamp, cached_name
from dataset_kit.formats import _arrow
from dataset_kit.formats.parquet import (
    FileChangedError,
    ParquetFormatError,
    ParquetPart,
    list_files,
)


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
    column that may hold nulls is float64) and None elsewhere: a null list
    of numbers is None, an empty one an empty array. A batch is an
    :class:`~dataset_kit.ExampleBatch` of columns, a list of numbers being a
    :class:`~dataset_kit.batch.RaggedColumn` (a null list flagged as a null
    row) whether or not it may hold nulls, unless a column holds strings,
    binaries, structs or lists of those (then a list of dicts). The values
    of a list of numbers keep their dtype: Parquet's statistics count an
    empty list as a null, so they cannot say whether a list holds a null
    value; one inside a list of integers or booleans is a ValueError naming
    the file, the row group and the column when its row group is read.

    Remote files are read in byte ranges (the footer, then a row group's
    column chunks), each retried and bounded by ``timeout``: no local copy.
    With ``cache``, a remote file is instead downloaded whole, once per node,
    into that folder (a :mod:`dataset_kit.filecache`, shared by every process
    and every dataset that names it) the first time one of its row groups is
    read, and read from there: verified against the size and ETag (or, without
    one, modification time) the store listed when the dataset was opened,
    least-recently-used files evicted beyond ``cache_limit`` bytes. A file
    that changed in the store since the open is refused (a
    :class:`~dataset_kit.formats.FileChangedError` naming it); a dataset
    opened again sees the new version, which is cached under another name, so
    it is downloaded again. The footers are always read by ranges, so opening
    downloads nothing. Ranged reads stay the default, by measurement
    (``benchmarks/columnar.py``, ``docs/columnar.rst``): on a local S3 server
    they were faster for a cold epoch, and they need no disk and fetch only
    the columns asked for; the cache pays where requests are costly, epochs
    repeat, or many processes of a node read the same files.

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
        cache: a local folder to download remote files into (see above), or
            None to read them by ranges. Local files are always read in place.
        cache_limit: bytes the ``cache`` folder may hold, or None for no limit
            (needs ``cache``; at least the largest remote file).
        chunk_size: the most bytes per ranged read of a download into ``cache``.

    Raises:
        FileNotFoundError: if a source matches no file.
        ParquetFormatError: if a file is not Parquet, or the files' schemas
            disagree, a column is missing or of a type that cannot become a
            numpy array (names the file and the column).
        ParquetReadError: if a remote footer could not be read.
        ValueError: if ``cache_limit`` is smaller than the largest remote file,
            or given without ``cache``.
        ImportError: if pyarrow (the ``parquet`` extra) or, for URLs, fsspec
            (the ``stream`` extra) is missing.
    """

    def __init__(self, source: str | os.PathLike | Sequence[str | os.PathLike],
                 columns: Sequence[str] | None = None, *,
                 storage_options: dict | None = None, cache_bytes: int = 256 << 20,
                 timeout: float = 60.0, retries: int = 5,
                 cache: str | os.PathLike | None = None, cache_limit: int | None = None,
                 chunk_size: int = 64 << 20) -> None:
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
        chunk_size = positive_int("chunk_size", chunk_size)
        if cache is not None and not isinstance(cache, (str, os.PathLike)):
            raise TypeError(f"cache must be a local folder (a path) or None, got {cache!r}")
        if cache_limit is not None:
            cache_limit = non_negative_int("cache_limit", cache_limit)
            if cache is None:
                raise ValueError(f"cache_limit {cache_limit} bytes needs a cache folder: pass "
                                 f"cache=... too (without one, remote files are read by "
                                 f"ranges and nothing is cached on disk)")
        files = [f for s in sources for f in list_files(os.fspath(s), storage_options)]
        self.parts = [ParquetPart(name, partitions, storage_options, float(timeout), retries)
                      for name, partitions in files]
        self.stamps = [part.stamp.as_state() for part in self.parts]
        self._remote, self._cached = self._file_cache(cache, cache_limit, storage_options,
                                                     float(timeout), retries, chunk_size)
        self.columns = self._columns(None if columns is None else list(columns))
        self._file_columns = [[name for name, _, _ in self.columns
                               if name not in part.partitions] for part in self.parts]
        groups = [(p, g, rows) for p, part in enumerate(self.parts)
                  for g, rows in enumerate(part.group_rows)]
        self._groups = [(p, g) for p, g, _ in groups]
        self.row_group_starts = np.concatenate(
            [[0], np.cumsum([rows for _, _, rows in groups], dtype=np.int64)]).astype(np.int64)

    def _file_cache(self, cache: str | os.PathLike | None, limit: int | None,
                    storage_options: dict | None, timeout: float, retries: int,
                    chunk_size: int) -> tuple[FileCache | None, dict[int, int]]:
        """The cache of the remote files, and each cached part's number in it."""
        remote = [p for p, part in enumerate(self.parts)
                  if not is_local(part.name) and part.metadata is not None]
        if cache is None or not remote:
            return None, {}
        entries = []
        for p in remote:
            stamp = self.parts[p].stamp
            # The cache's name of the file pins this version of it (URL, size,
            # time, ETag): a file replaced in the store is never read from the
            # copy of the old one.
            version = hashlib.sha256(repr(stamp.as_state()).encode()).hexdigest()
            entries.append(CachedFile(
                cached_name(version, stamp.name), stamp.name, stamp.size,
                SizeAndStamp(stamp.name, stamp.size, stamp.mtime, stamp.etag,
                             FileChangedError), stamp.name))
        largest = max(entries, key=lambda e: e.size)
        if limit is not None and limit < largest.size:
            raise ValueError(f"cache_limit {limit} bytes is smaller than the file "
                             f"{largest.url} ({largest.size} bytes); the cache must hold at "
                             f"least the largest remote file")
        folder = os.path.abspath(os.fspath(cache))
        return (FileCache(folder, entries, storage_options, limit, timeout, retries,
                          chunk_size), {p: k for k, p in enumerate(remote)})

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
            # A list's values keep their dtype (see the docstring): the
            # statistics count an empty list as a null.
            values_nullable = nullable and kind != _arrow.RAGGED
            found.append((name, kind, _arrow.numpy_dtype(reference, kind, values_nullable)))
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
            dataset_kit.filecache.CacheDownloadError: with ``cache``, if the file
                could not be downloaded (names it).
            dataset_kit.filecache.CacheFullError: with ``cache``, if the cache
                has no room for the file.
            FileChangedError: with ``cache``, if the file changed in the store
                since the dataset was opened.
        """
        pa = _arrow.require_pyarrow("ParquetDataset")
        p, g = self._groups[group]
        part = self.parts[p]
        if p in self._cached and self._remote is not None:
            copy = self._remote.open(self._cached[p], _CachedCopy)
            try:
                table = part.read_group(g, self._file_columns[p], source=copy.arrow())
            finally:
                copy.close()
        else:
            table = part.read_group(g, self._file_columns[p])
        for name, value in part.partitions.items():
            if any(name == c for c, _, _ in self.columns):
                table = table.append_column(name, pa.array([value] * table.num_rows,
                                                           pa.string()))
        return table

    def describe_group(self, group: int) -> str:
        """Global row group ``group`` as its file and its row group in the file."""
        p, g = self._groups[group]
        return f"{self.parts[p].name}: row group {g}"

    def locate_file(self, index: int) -> tuple[str, int, int]:
        """Return ``(file, row group in the file, row in the row group)`` of row ``index``."""
        group, row = self.locate(index)
        p, g = self._groups[group]
        return self.parts[p].name, g, row

    def __repr__(self) -> str:
        return (f"ParquetDataset({len(self.parts)} files, {len(self)} rows, "
                f"{self.row_groups} row groups, columns={[n for n, _, _ in self.columns]})")


class _CachedCopy:
    """A file of the cache while it is read: held open (its shared ``flock`` keeps it from
    eviction) or, while this process still writes it, its verified bytes in memory."""

    def __init__(self, path: str, data: bytes | None) -> None:
        self.path, self.data = path, data
        self._file = None if data is not None else open(path, "rb")  # noqa: SIM115

    def fileno(self) -> int:
        if self._file is None:
            raise ValueError(f"{self.path} is read from memory, not from a file")
        return self._file.fileno()

    def arrow(self) -> Any:
        """The copy as an Arrow file (memory-mapped) or buffer, for pyarrow to read."""
        pa = _arrow.require_pyarrow("ParquetDataset")
        return pa.BufferReader(self.data) if self.data is not None else pa.memory_map(self.path)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
