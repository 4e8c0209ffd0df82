"""NNabla's ``CacheDataSource``: the examples of a cache directory, as a data source.

The format (reading and checking a cache in NNabla's ``.npy`` layout) lives in
:mod:`dataset_kit.formats.nnabla_cache`; this module is the door's source over
it, and keeps the reader's names importable from here.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from dataset_kit import _uri
from dataset_kit._files import files_fingerprint
from dataset_kit.batch import ExampleBatch
from dataset_kit.formats.nnabla_cache.reader import (
    INDEX_FILE,
    INFO_FILE,
    CacheFormatError,
    CacheReader,
    normalized,
    remove_debris,
)
from dataset_kit.sources.data_source import DataSource

__all__ = ["INDEX_FILE", "INFO_FILE", "CacheDataSource", "CacheFormatError", "CacheReader",
           "normalized", "remove_debris"]


class _ReadsCache(DataSource):
    """A source whose examples come from a :class:`CacheReader` (``_reader``)."""

    _reader: CacheReader
    _normalize = False

    def _use_reader(self, reader: CacheReader) -> None:
        self._reader = reader
        self._size = reader.size
        self._variables = reader.variables

    def _get_data(self, position: int) -> tuple:
        return tuple(np.array(c[0]) for c in self._columns(np.array([position])))

    def get_batch(self, indices: np.ndarray) -> ExampleBatch:
        """Gather a batch chunk by chunk, one ``preadv`` per variable and run of rows."""
        return ExampleBatch(tuple(self._columns(np.asarray(indices))))

    def _columns(self, indices: np.ndarray) -> list[np.ndarray]:
        reader = self._reader
        reader.check_unchanged()
        columns = reader.empty_columns(len(indices))
        if len(indices):
            chunks = np.searchsorted(reader.ends, indices, side="right")
            rows = (indices - np.concatenate([[0], reader.ends])[chunks]).tolist()
            ks = chunks.tolist()
            order = np.argsort(chunks, kind="stable").tolist()
            first = 0
            for i in range(1, len(order) + 1):  # one gather per chunk, positions ascending
                if i == len(order) or ks[order[i]] != ks[order[first]]:
                    where = order[first:i]
                    reader.gather(ks[where[0]], [rows[w] for w in where], where, columns)
                    first = i
        return [normalized(c) for c in columns] if self._normalize else columns

    def close(self) -> None:
        reader = getattr(self, "_reader", None)
        if reader is not None:
            reader.close()
        super().close()


class CacheDataSource(_ReadsCache):
    """The examples of a cache directory (NNabla's ``CacheDataSource``), ours or NNabla's.

    Opening it checks the whole cache (see :class:`CacheReader`) and removes
    temporaries that dead writers left in the directory.

    Args:
        cachedir: the directory.
        shuffle: whether iterators shuffle each epoch.
        rng: see :class:`~dataset_kit.sources.DataSource`.
        normalize: scale uint8 (and uint16) parts to float32 in [0, 1].

    Raises:
        CacheFormatError: if the directory is not a finished ``.npy`` cache, or
            a file in it does not hold what the others say (naming the file).
    """

    def __init__(self, cachedir: str, shuffle: bool = False, rng: Any = None,
                 normalize: bool = False) -> None:
        super().__init__(shuffle=shuffle, rng=rng)
        self._normalize = bool(normalize)
        cachedir = os.fspath(cachedir)
        self._use_reader(CacheReader(cachedir))
        # A remote cache's local copies are new files each run: no stamps to compare.
        self._stamp = None if _uri.is_remote(cachedir) else files_fingerprint(
            *self._reader.paths)
        if not _uri.is_remote(cachedir):
            remove_debris(_uri.local_path(cachedir), under_lock=False)

    def fingerprint(self) -> str | None:
        """The chunk files' sizes and mtimes when opened (None for an http(s) cache)."""
        return self._stamp
