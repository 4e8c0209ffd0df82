"""from_hf: a Hugging Face ``datasets.Dataset`` as a random-access dataset over its Arrow table.

The Arrow table under a ``datasets.Dataset`` is read in place (memory-mapped
from its cache files, or in memory): its record batches are the row groups
of a :class:`~dataset_kit.datasets.ColumnarDataset`, so shuffling is the
order sampler's job (:class:`RowGroupOrderSampler` or any other), never an
indices mapping that turns each row into a random read. A dataset that
already carries an indices mapping (``.shuffle()``, ``.select()``) is
flattened once, up front.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int
from dataset_kit.datasets.columnar import ColumnarDataset
from dataset_kit.formats import _arrow
from dataset_kit.formats.parquet import FileStamp


def _require_datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise ImportError("from_hf needs Hugging Face datasets: pip install 'dataset_kit[hf]'") \
            from None
    return datasets


class ArrowDataset(ColumnarDataset):
    """The rows of an Arrow table whose record batches are its row groups.

    Made by :func:`from_hf`. ``ds[i]`` is a dict ``{column: value}`` with the
    same conversions as :class:`ParquetDataset` (a column holding a null is
    float64 if it is of integers; so are the values of a list of integers
    holding a null value, a null as NaN; a null list is None and an empty
    one an empty array, in a :class:`~dataset_kit.batch.RaggedColumn` either way).

    Args:
        table: a :class:`pyarrow.Table`.
        files: the Arrow (IPC stream) files the table maps, if any: they are
            stamped for checkpoints and mapped again in a worker started by
            ``spawn`` (instead of pickling the table).
        columns: the columns to read (None: all).
        cache_bytes: bytes of converted row groups kept in memory.

    Raises:
        ValueError: if a column is missing or cannot become a numpy array.
    """

    def __init__(self, table: Any, files: Sequence[str] = (),
                 columns: Sequence[str] | None = None, cache_bytes: int = 256 << 20) -> None:
        super().__init__(non_negative_int("cache_bytes", cache_bytes))
        names = list(table.column_names) if columns is None else list(columns)
        missing = [n for n in names if n not in table.column_names]
        if missing:
            raise ValueError(f"the table has no column {missing[0]!r} (its columns: "
                             f"{table.column_names})")
        self.columns = []
        for name in names:
            column = table.column(name)
            nullable = column.null_count > 0
            kind = _arrow.kind_of(column.type, nullable)
            if kind is None:
                raise ValueError(f"column {name!r} of type {column.type} cannot become a numpy "
                                 f"array or Python value; leave it out with columns=[...]")
            if kind == _arrow.RAGGED:
                # The table is at hand: whether a list holds a null value is
                # known exactly (an empty or null list is no null value).
                nullable = _list_values_hold_nulls(column)
            self.columns.append((name, kind, _arrow.numpy_dtype(column.type, kind, nullable)))
        self.files = [os.path.abspath(f) for f in files]
        self.stamps = [_stamp(f) for f in self.files]
        self._set_table(table.select(names))
        if self.files and _read_files(self.files, names).num_rows != table.num_rows:
            # A slice of its files (a contiguous select): workers get the table pickled.
            self.files = []

    def _set_table(self, table: Any) -> None:
        self._table = table
        self._batches = [b for b in table.to_batches() if b.num_rows]
        counts = [b.num_rows for b in self._batches]
        self.row_group_starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]) \
            .astype(np.int64)

    def read_group(self, group: int) -> Any:
        """Row group (record batch) ``group`` as a one-batch Arrow table (no copy)."""
        pa = _arrow.require_pyarrow("from_hf")
        return pa.Table.from_batches([self._batches[group]])

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        if self.files:  # map the files again rather than pickle the table's bytes
            state.update(_table=None, _batches=None)
        return state

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if self._table is None:
            self._set_table(_read_files(self.files, [name for name, _, _ in self.columns]))

    def __repr__(self) -> str:
        return (f"ArrowDataset({len(self)} rows, {self.row_groups} row groups, "
                f"columns={[n for n, _, _ in self.columns]})")


def _list_values_hold_nulls(column: Any) -> bool:
    """Whether a list column of a table holds a null value inside one of its lists."""
    import pyarrow.compute as pc

    # A child without nulls answers at once; list_flatten (a copy when a list
    # is null) only decides whether its nulls lie under null lists.
    return any(chunk.values.null_count and pc.list_flatten(chunk).null_count
               for chunk in column.chunks)


def _read_files(files: list[str], names: list[str]) -> Any:
    """The table of ``datasets``' Arrow cache files (IPC streams), memory-mapped."""
    pa = _arrow.require_pyarrow("from_hf")
    tables = [pa.ipc.open_stream(pa.memory_map(f)).read_all() for f in files]
    return pa.concat_tables(tables).select(names)


def _stamp(path: str) -> list:
    st = os.stat(path)
    return FileStamp(path, st.st_size, str(st.st_mtime_ns), None).as_state()


def from_hf(dataset: Any, split: str | None = None, columns: Sequence[str] | None = None, *,
            cache_bytes: int = 256 << 20) -> ArrowDataset:
    """Wrap a Hugging Face dataset: zero-copy reads of its Arrow table.

    Args:
        dataset: a ``datasets.Dataset``, a ``datasets.DatasetDict`` (with
            ``split``, or holding one split), or the folder of
            ``save_to_disk``.
        split: the split of a ``DatasetDict``.
        columns: the columns to read (None: all).
        cache_bytes: bytes of converted row groups kept in memory.

    Returns:
        An :class:`ArrowDataset`. The Hugging Face dataset's format
        (``with_format``) does not apply: values come as numpy arrays and
        Python objects, like :class:`ParquetDataset`'s.

    Raises:
        TypeError: if ``dataset`` is none of those.
        KeyError: if ``split`` is not a split of the ``DatasetDict``.
        ValueError: if a ``DatasetDict`` has several splits and none is named.
        ImportError: if Hugging Face datasets (the ``hf`` extra) is missing.
    """
    hf = _require_datasets()
    if isinstance(dataset, (str, os.PathLike)):
        dataset = hf.load_from_disk(os.fspath(dataset))
    if isinstance(dataset, hf.DatasetDict):
        if split is None:
            if len(dataset) != 1:
                raise ValueError(f"the DatasetDict has splits {sorted(dataset)}: name one with "
                                 f"split=...")
            split = next(iter(dataset))
        if split not in dataset:
            raise KeyError(f"split {split!r} is not in the DatasetDict (its splits: "
                           f"{sorted(dataset)})")
        dataset = dataset[split]
    elif split is not None:
        raise ValueError(f"split={split!r} is for a DatasetDict; got a "
                         f"{type(dataset).__name__}")
    if not isinstance(dataset, hf.Dataset):
        raise TypeError(f"dataset must be a datasets.Dataset, a DatasetDict or a save_to_disk "
                        f"folder, got {type(dataset).__name__}")
    # datasets has no public accessor for its indices mapping (what .shuffle()
    # and .select() add); flattening writes the rows in order once.
    if getattr(dataset, "_indices", None) is not None:
        dataset = dataset.flatten_indices()
    files = [entry["filename"] for entry in dataset.cache_files]
    return ArrowDataset(dataset.data.table, files, columns, cache_bytes)
