"""NNabla's file cache: a directory of .npy chunks that NNabla and dataset_kit both read.

The layout (NNabla's ``.npy`` cache format, ``cache_file_format = .npy``):

``{prefix}_{first:08d}_{last:08d}.npy``
    One chunk: examples ``first`` to ``last`` (inclusive) of the source, at
    most :data:`CHUNK_SIZE` of them. The file is one ``numpy.save`` per
    variable, one after another, in the order of ``cache_info.csv``: the
    stacked values of that variable for the chunk's examples (a value that
    is not an array is stored as a float32 array, as NNabla stores it).
``cache_info.csv``
    The variable names, one per line.
``cache_index.csv``
    One line per chunk, in order: ``file name,number of examples``.

dataset_kit writes every chunk atomically and ``cache_index.csv`` last, so
a directory with an index is complete; a directory without one (its writer
died) is rebuilt, never half-read. Writers of one directory take its lock,
so concurrent builders build it once.
"""

from __future__ import annotations

import csv
import glob
import os
import shutil
import tempfile
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from dataset_kit._files import atomic_write, lock_for, remove_stale_parts
from dataset_kit.sources.cache_reader import (
    INDEX_FILE,
    INFO_FILE,
    CacheFormatError,
    CacheReader,
    _ReadsCache,
)
from dataset_kit.sources.data_source import DataSource

CHUNK_SIZE = 100  # NNabla's data_source_file_cache_size
LOADER_THREADS = 10  # NNabla's data_source_file_cache_num_of_threads


def is_complete(cache_dir: str) -> bool:
    """Whether ``cache_dir`` holds a finished cache (its index is written last)."""
    return os.path.isfile(os.path.join(cache_dir, INDEX_FILE))


def write_cache(cache_dir: str, source: DataSource, prefix: str = "cache",
                chunk_size: int = CHUNK_SIZE) -> None:
    """Write ``source`` to ``cache_dir`` in NNabla's layout, unless a matching cache is there.

    Under the directory's lock: a complete cache of the same variables and
    size is kept; anything else of this prefix (a dead writer's chunks) is
    removed and the cache written again, chunk by chunk, index last.

    Raises:
        ValueError: if an example's part has another shape than the same
            part of the chunk's first example (naming variable and position).
    """
    os.makedirs(cache_dir, exist_ok=True)
    with lock_for(cache_dir):
        if is_complete(cache_dir):
            try:
                reader = CacheReader(cache_dir)
            except CacheFormatError:
                reader = None
            if reader is not None and reader.variables == source.variables \
                    and reader.size == source.size:
                return
            os.remove(os.path.join(cache_dir, INDEX_FILE))
        for stale in glob.glob(os.path.join(glob.escape(cache_dir), f"{glob.escape(prefix)}_*.npy")):
            os.remove(stale)
        remove_stale_parts(cache_dir)
        names: list[tuple[str, int]] = []
        with ThreadPoolExecutor(LOADER_THREADS) as pool:
            for first in range(0, source.size, chunk_size):
                positions = range(first, min(first + chunk_size, source.size))
                examples = list(pool.map(source._get_data, positions))
                name = f"{prefix}_{first:08d}_{positions[-1]:08d}.npy"
                with atomic_write(os.path.join(cache_dir, name)) as temp:
                    with open(temp, "wb") as f:
                        for k, variable in enumerate(source.variables):
                            np.save(f, _stack(variable, [ex[k] for ex in examples], first))
                names.append((name, len(positions)))
        with atomic_write(os.path.join(cache_dir, INFO_FILE)) as temp:
            with open(temp, "w", newline="") as f:
                csv.writer(f, lineterminator="\n").writerows((v,) for v in source.variables)
        with atomic_write(os.path.join(cache_dir, INDEX_FILE)) as temp:
            with open(temp, "w", newline="") as f:
                csv.writer(f, lineterminator="\n").writerows(names)


def _stack(variable: str, parts: list, first: int) -> np.ndarray:
    arrays = [p if isinstance(p, np.ndarray) else np.array(p).astype(np.float32) for p in parts]
    for k, a in enumerate(arrays):
        if a.shape != arrays[0].shape:
            raise ValueError(
                f"variable {variable!r}: example {first + k} has shape {a.shape}, but example "
                f"{first} has {arrays[0].shape}; a file cache needs parts of one shape")
    return np.stack(arrays)


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
        write_cache(self._cache_dir, data_source, cache_file_name_prefix)
        self._open_reader(self._cache_dir)

    @property
    def cache_dir(self) -> str:
        """Where the cache is."""
        return self._cache_dir

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_remove"] = None  # only the process that made the directory removes it
        return state

    def close(self) -> None:
        if self._remove is not None:
            self._remove()
        self._data_source.close()
        super().close()


def _remove_if_owner(path: str, owner: int) -> None:
    if os.getpid() == owner:
        shutil.rmtree(path, ignore_errors=True)
