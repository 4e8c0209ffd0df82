"""Parquet shards: the column encodings as Parquet columns, written and read back.

A shard of ``shard_format='parquet'`` is one Parquet file (zstd pages, page
checksums) with one Parquet column per column of the manifest, so any
Parquet reader (pyarrow, Hugging Face ``datasets``, DuckDB) reads it too:

==========================  =========================================================
encoding                    Parquet column(s)
==========================  =========================================================
``int`` / ``float``         int64 / float64
``str`` / ``json``          large_string (``json``: the value's JSON text)
``bytes``, images           large_binary (images stay encoded, as in our layout)
``ndarray``                 ``name``: large_list of the flat values (C order), in the
                            column's one dtype; ``name + SHAPE_SUFFIX``: large_list
                            of int64, each row's shape
==========================  =========================================================

An ``ndarray`` column is a list of the flat values plus the shape, rather
than a fixed-size list: a shard is written as samples arrive, before any
writer knows that every row will have one shape, and token lists never do.
Its dtype is fixed by the first sample (Parquet has one type per column);
bool, integer and float dtypes (native byte order) fit.

Reading goes through :class:`dataset_kit.formats.parquet.ParquetPart` (the
one Parquet reader: footer checks, page checksums, errors naming the file
and the row group); :class:`ParquetShardFile` gives it the shard cache's
interface (that of :class:`~dataset_kit.formats.shards._layout.ShardFile`),
returning values as our layout's decoders do, images still encoded.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from dataset_kit.formats import _arrow
from dataset_kit.formats.parquet import ParquetFormatError, ParquetPart
from dataset_kit.formats.shards._columns import ENCODE
from dataset_kit.formats.shards._layout import OpenedShard, ShardFormatError

#: The suffix of the column holding an ``ndarray`` column's shapes.
SHAPE_SUFFIX = ".shape"
#: Bytes of samples per row group. A read of one row decodes its whole row
#: group; a shuffled epoch decodes every row group of a shard once (they stay
#: decoded while the shard is open) and pays per group: 1 MiB keeps a first
#: read near the smallest groups' cost, larger groups make epochs faster
#: (``docs/streaming.rst``, "Our layout or Parquet", has the measurement).
ROW_GROUP_BYTES = 1 << 20
_NDARRAY_KINDS = "biuf"


def column_names(columns: dict[str, str]) -> list[str]:
    """The Parquet columns of a manifest's ``{name: encoding}``, in file order."""
    names = []
    for name, encoding in columns.items():
        names.append(name)
        if encoding == "ndarray":
            names.append(name + SHAPE_SUFFIX)
    return names


def check_columns(columns: dict[str, str]) -> None:
    """Raise unless every Parquet column name of ``columns`` is distinct.

    Raises:
        ValueError: naming the column whose shape column another column's name takes.
    """
    names = column_names(columns)
    if len(set(names)) != len(names):
        clash = next(n for n in names if names.count(n) > 1)
        raise ValueError(f"column {clash!r} is also the shape column of the ndarray column "
                         f"{clash[:-len(SHAPE_SUFFIX)]!r} in a Parquet shard; rename it")


class ParquetRows:
    """The writer's side: samples' values checked and kept, then written as one Parquet file.

    Args:
        columns: the manifest's ``{name: encoding}``.
    """

    def __init__(self, columns: dict[str, str]) -> None:
        self.pa = _arrow.require_pyarrow("ShardWriter(format='parquet')")
        if not self.pa.Codec.is_available("zstd"):
            raise ImportError("ShardWriter(format='parquet') writes zstd pages, and this "
                              "pyarrow was built without zstd")
        check_columns(columns)
        self.columns = columns
        self._dtypes: dict[str, np.dtype] = {}  # each ndarray column's, from its first sample

    def cell(self, name: str, encoding: str, value: Any) -> tuple[Any, int]:
        """Return ``(what the Parquet column keeps, its size in bytes)`` of one value.

        Raises:
            TypeError, ValueError: if the value does not fit the encoding (as
                in our layout), or an ndarray's dtype does not fit the column.
        """
        if encoding == "ndarray":
            array = np.asarray(value)
            if array.dtype.kind not in _NDARRAY_KINDS or not (
                    array.dtype.isnative or array.dtype.itemsize == 1):
                raise TypeError(f"a Parquet shard's ndarray column holds bool, integer or float "
                                f"arrays in native byte order, got dtype {array.dtype.str}; "
                                f"write format='shards' for others")
            first = self._dtypes.setdefault(name, array.dtype)
            if array.dtype != first:
                raise TypeError(f"a Parquet shard's ndarray column holds one dtype ({first}, "
                                f"from the first sample), got {array.dtype}")
            return array, array.nbytes + 8 * array.ndim
        data = ENCODE[encoding](value)  # our layout's checks; images become encoded bytes
        if encoding == "int":
            return int(value), 8
        if encoding == "float":
            return float(value), 8
        if encoding in ("str", "json"):
            return (value if encoding == "str" else data.decode()), len(data)
        return data, len(data)

    def file_bytes(self, rows: list[list], size: int) -> bytes:
        """One Parquet file holding ``rows`` (each a list of :meth:`cell` values, in column
        order), whose cells take about ``size`` bytes."""
        pa = self.pa
        arrays, names = [], []
        for (name, encoding), cells in zip(self.columns.items(), zip(*rows)):
            names.append(name)
            if encoding != "ndarray":
                arrays.append(pa.array(cells, _ARROW_TYPES[encoding](pa)))
                continue
            flat = [np.ravel(a) for a in cells]
            arrays.append(_list_array(pa, flat, self._dtypes[name]))
            arrays.append(_list_array(pa, [np.asarray(a.shape, np.int64) for a in cells],
                                      np.dtype(np.int64)))
            names.append(name + SHAPE_SUFFIX)
        table = pa.Table.from_arrays(arrays, names)
        group = max(1, len(rows) * ROW_GROUP_BYTES // max(size, 1))
        out = pa.BufferOutputStream()
        _arrow.require_pyarrow("ShardWriter").parquet.write_table(
            table, out, row_group_size=group, compression="zstd", write_page_checksum=True)
        return out.getvalue().to_pybytes()


_ARROW_TYPES: dict[str, Callable[[Any], Any]] = {
    "int": lambda pa: pa.int64(), "float": lambda pa: pa.float64(),
    "str": lambda pa: pa.large_string(), "json": lambda pa: pa.large_string(),
    "bytes": lambda pa: pa.large_binary(), "jpeg": lambda pa: pa.large_binary(),
    "png": lambda pa: pa.large_binary(), "image": lambda pa: pa.large_binary(),
}


def _list_array(pa: Any, rows: list[np.ndarray], dtype: np.dtype) -> Any:
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    values = np.concatenate(rows).astype(dtype, copy=False) if rows else np.empty(0, dtype)
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))


Get = Callable[[int], Any]


class ParquetShardFile(OpenedShard):
    """A Parquet shard on local disk (or its verified bytes in memory), read by row group.

    An :class:`~dataset_kit.formats.shards._layout.OpenedShard`, as our layout's
    ``ShardFile`` is: :meth:`columns_of` returns each column's values for a batch of rows:
    ``int``, ``float``, ``str``, ``bytes``, ``json`` and ``ndarray`` values as
    our layout's decoders return them, images as their encoded bytes. The row
    groups a read decodes stay decoded while the shard is open, so a shuffled
    pass over the shard decodes each once (memory: about the shard's
    uncompressed size).

    Args:
        path: the shard file.
        count: the number of samples the manifest gives it.
        columns: the manifest's ``{name: encoding}``.
        data: the shard's verified bytes, to read instead of ``path`` (which
            then only names it in errors).

    Raises:
        ShardFormatError: if the file is not a readable Parquet file (its
            footer), or its rows or columns are not the manifest's (names the file).
    """

    def __init__(self, path: str, count: int, columns: dict[str, str],
                 data: bytes | None = None) -> None:
        pa = _arrow.require_pyarrow("StreamingDataset over Parquet shards")
        super().__init__(path, data)
        self._encodings = list(columns.items())
        self._names = column_names(columns)
        self._source: Any = None
        self._groups: dict[int, list[Get]] = {}
        self._lock = threading.Lock()
        try:
            if data is not None:
                self._source = pa.BufferReader(data)
            elif os.fstat(self.fileno()).st_size:
                self._source = pa.memory_map(path)
            else:
                raise ShardFormatError(f"shard {path} is empty: not a Parquet file")
            try:
                self._part = ParquetPart(path, {}, None, 60.0, 0, copy=self._source)
            except ParquetFormatError as error:
                raise ShardFormatError(f"shard {error}") from None
            rows = self._part.group_rows
            if sum(rows) != count:
                raise ShardFormatError(f"shard {path} holds {sum(rows)} rows; its manifest "
                                       f"says {count}")
            found = [] if self._part.schema is None else list(self._part.schema.names)
            if found != self._names:
                raise ShardFormatError(f"shard {path} has the columns {found}; its manifest's "
                                       f"encodings make {self._names}")
            self._starts = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
        except BaseException:
            self.close()
            raise

    def columns_of(self, offsets: np.ndarray) -> list[list]:
        """Return the values of samples ``offsets``, one list per column.

        Raises:
            ShardFormatError: naming the file and the row group if a row group
                cannot be read (a corrupt page, a file that ends early).
        """
        offsets = np.asarray(offsets, dtype=np.int64)
        groups = np.searchsorted(self._starts, offsets, side="right") - 1
        unique = np.unique(groups).tolist()
        if len(unique) == 1:  # the common case: a batch inside one row group
            rows = (offsets - self._starts[unique[0]]).tolist()
            return [list(map(get, rows)) for get in self._group(unique[0])]
        # Row by row: a fully random batch touches about one row per row group,
        # where a pass per row group would cost more than its row.
        decoded = {group: self._group(group) for group in unique}
        places = list(zip(groups.tolist(), (offsets - self._starts[groups]).tolist()))
        return [[decoded[group][c](row) for group, row in places]
                for c in range(len(self._encodings))]

    def _group(self, group: int) -> list[Get]:
        """Row group ``group``'s columns, decoded once while the shard is open."""
        with self._lock:
            found = self._groups.get(group)
        if found is not None:
            return found
        try:
            table = self._part.read_group(group, self._names, source=self._source)
        except ParquetFormatError as error:
            raise ShardFormatError(f"shard {error}") from None
        decoded = [_column(table, name, encoding) for name, encoding in self._encodings]
        with self._lock:
            return self._groups.setdefault(group, decoded)

    def close(self) -> None:
        """Let go of the decoded row groups, the mapping and the file (its in-use lock)."""
        self._groups = {}
        if self._source is not None:
            self._source.close()
            self._source = None
        super().close()


def _column(table: Any, name: str, encoding: str) -> Get:
    """A function that returns the value of one column of a row group at a given row."""
    column = table.column(name).combine_chunks()
    if encoding in ("int", "float"):
        return column.to_numpy().tolist().__getitem__  # Python ints and floats
    if encoding == "ndarray":
        values = column.values.to_numpy(zero_copy_only=False)
        bounds = column.offsets.to_numpy().tolist()
        shapes_column = table.column(name + SHAPE_SUFFIX).combine_chunks()
        dims = shapes_column.values.to_numpy().tolist()
        ends = shapes_column.offsets.to_numpy().tolist()
        if all(b - a == 1 for a, b in zip(ends[:-1], ends[1:])):
            # Every row 1-D (token lists, feature vectors): the slices are the arrays.
            return lambda r: values[bounds[r]:bounds[r + 1]]
        shapes = [tuple(dims[a:b]) for a, b in zip(ends[:-1], ends[1:])]
        return lambda r: values[bounds[r]:bounds[r + 1]].reshape(shapes[r])
    items = column.to_pylist()
    if encoding == "json":
        return lambda r: json.loads(items[r])
    return items.__getitem__
