"""NNabla's ``DataSourceWithFileCache``: another source, written once to a file cache.

The format (NNabla's ``.npy`` cache layout, written atomically, index last,
under the directory's lock) lives in :mod:`dataset_kit.formats.nnabla_cache`;
this module is the door's source over it and keeps ``write_cache`` (over a
source) and ``CHUNK_SIZE`` importable from here.

The examples of a chunk are read from the source on NNabla's
``data_source_file_cache_num_of_threads`` threads, not through the engine's
executor: see "The NNabla file cache's threads" in docs/architecture.rst.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dataset_kit.formats.nnabla_cache import writer
from dataset_kit.formats.nnabla_cache.reader import CacheReader
from dataset_kit.formats.nnabla_cache.writer import CHUNK_SIZE, is_complete
from dataset_kit.sources.cache_reader import _ReadsCache
from dataset_kit.sources.data_source import DataSource

__all__ = ["CHUNK_SIZE", "LOADER_THREADS", "DataSourceWithFileCache", "is_complete",
           "write_cache"]

LOADER_THREADS = 10  # NNabla's data_source_file_cache_num_of_threads


def write_cache(cache_dir: str, source: DataSource, prefix: str = "cache",
                chunk_size: int = CHUNK_SIZE) -> CacheReader:
    """Write ``source`` to ``cache_dir`` in NNabla's layout, unless a matching cache is there.

    :func:`dataset_kit.formats.nnabla_cache.writer.write_cache` over the
    source's examples, each chunk's read on :data:`LOADER_THREADS` threads.

    Args:
        cache_dir: the cache directory (created if missing).
        source: the examples to write.
        prefix: the beginning of the chunk file names.
        chunk_size: examples per chunk file.

    Returns:
        A reader of the cache, opened under the lock.

    Raises:
        ValueError: if an example's part has another shape than the same
            part of the chunk's first example (naming variable and position),
            or ``source`` has variables but no examples.
        OSError: with ``errno.ENOSPC`` naming ``cache_dir`` if the disk
            filled up; nothing of the new cache is left.
    """
    with ThreadPoolExecutor(LOADER_THREADS) as pool:
        return writer.write_cache(cache_dir, source.variables, source.size,
                                  lambda positions: list(pool.map(source._get_data, positions)),
                                  prefix, chunk_size)


class DataSourceWithFileCache(_ReadsCache):
    """Another source, written once to a file cache and read from there (NNabla's).

    The cache is built when this is constructed (as in NNabla), or reused
    when ``cache_dir`` already holds a complete cache of the same variables
    and size. With ``cache_dir=None`` it lives in a temporary directory that
    is removed by :meth:`close` (a :class:`~dataset_kit.sources.DataIterator`
    closes its source) or when this object is garbage-collected.

    Args:
        data_source: the source to cache.
        cache_dir: the cache directory, or None for a temporary one.
        cache_file_name_prefix: the beginning of the chunk file names.
        shuffle: whether iterators shuffle each epoch.
        rng: see :class:`~dataset_kit.sources.DataSource`.
    """

    def __init__(self, data_source: DataSource, cache_dir: str | None = None,
                 cache_file_name_prefix: str = "cache", shuffle: bool = False,
                 rng: Any = None) -> None:
        super().__init__(shuffle=shuffle, rng=rng)
        self._data_source = data_source
        self._cache_dir = tempfile.mkdtemp(prefix="dataset_kit_cache_") if cache_dir is None \
            else os.path.abspath(os.fspath(cache_dir))
        self._remove = weakref.finalize(self, _remove_if_owner, self._cache_dir, os.getpid()) \
            if cache_dir is None else None
        self._use_reader(write_cache(self._cache_dir, data_source, cache_file_name_prefix))

    def fingerprint(self) -> Any:
        """The cached source's fingerprint: the cache is made from it (anew in a temporary
        directory each run, so its own files' stamps would differ)."""
        return self._data_source.fingerprint()

    @property
    def cache_dir(self) -> str:
        """Where the cache is."""
        return self._cache_dir

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_remove"] = None  # only the process that made the directory removes it
        return state

    def close(self) -> None:
        super().close()  # the reader's open chunk files first
        if self._remove is not None:
            self._remove()
        self._data_source.close()


def _remove_if_owner(path: str, owner: int) -> None:
    if os.getpid() == owner:
        shutil.rmtree(path, ignore_errors=True)
