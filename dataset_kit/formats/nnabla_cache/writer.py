"""Writing NNabla's file cache: a directory of .npy chunks that NNabla and dataset_kit both read.

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
    One line per chunk, in order: ``file name,number of examples,total``,
    where ``total`` (the cache's number of examples, on every line) is
    dataset_kit's addition: NNabla reads the first two columns only, and a
    reader that finds a total knows when lines are missing.

dataset_kit writes every chunk atomically and ``cache_index.csv`` last, so
a directory with an index is complete; a directory without one (its writer
died, or the disk filled up) is rebuilt, never half-read. Writers of one
directory take its lock, so concurrent builders build it once, and the next
build or open removes the temporaries of killed writers.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import glob
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dataset_kit._files import atomic_write, lock_for
from dataset_kit.formats.nnabla_cache.reader import (
    INDEX_FILE,
    INFO_FILE,
    CacheFormatError,
    CacheReader,
    remove_debris,
)

CHUNK_SIZE = 100  # NNabla's data_source_file_cache_size


def is_complete(cache_dir: str) -> bool:
    """Whether ``cache_dir`` holds a finished cache (its index is written last)."""
    return os.path.isfile(os.path.join(cache_dir, INDEX_FILE))


def write_cache(cache_dir: str, variables: tuple[str, ...], size: int,
                examples: Callable[[range], Sequence[Sequence[Any]]], prefix: str = "cache",
                chunk_size: int = CHUNK_SIZE) -> CacheReader:
    """Write ``size`` examples to ``cache_dir`` in NNabla's layout, unless a matching one is there.

    Under the directory's lock: the temporaries of killed writers are
    removed; a complete cache of the same variables and size is kept;
    anything else of this prefix is removed and the cache written again,
    chunk by chunk, index last. A build that fails removes what it wrote, so
    the directory holds nothing that looks complete.

    Args:
        cache_dir: the cache directory (created if missing).
        variables: the examples' variable names, in order.
        size: how many examples.
        examples: ``examples(positions)`` returns the examples at a range of
            positions (one chunk's), each a sequence of one value per variable.
        prefix: the beginning of the chunk file names.
        chunk_size: examples per chunk file.

    Returns:
        A reader of the cache, opened under the lock (so it is the cache
        that was checked or written, not one another process made since).

    Raises:
        ValueError: if an example's part has another shape than the same
            part of the chunk's first example (naming variable and position),
            or there are variables but no examples.
        OSError: with ``errno.ENOSPC`` naming ``cache_dir`` if the disk
            filled up; nothing of the new cache is left.
    """
    if not size and variables:
        raise ValueError(f"a file cache of no examples cannot hold the variables "
                         f"{variables} (readers take an empty index for a cut one)")
    os.makedirs(cache_dir, exist_ok=True)
    with lock_for(cache_dir):
        remove_debris(cache_dir, under_lock=True)
        if is_complete(cache_dir):
            try:
                reader: CacheReader | None = CacheReader(cache_dir)
            except CacheFormatError:
                reader = None
            if reader is not None and reader.variables == variables \
                    and reader.size == size:
                return reader
            os.remove(os.path.join(cache_dir, INDEX_FILE))
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(cache_dir, INFO_FILE))
        pattern = os.path.join(glob.escape(cache_dir), f"{glob.escape(prefix)}_*.npy")
        for stale in glob.glob(pattern):
            os.remove(stale)
        written: list[str] = []
        try:
            _write_files(cache_dir, variables, size, examples, prefix, chunk_size, written)
        except BaseException as error:
            for path in reversed(written):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
            if isinstance(error, OSError) and error.errno in _DISK_FULL:
                raise OSError(error.errno, f"the disk holding the file cache {cache_dir} is full "
                              f"({error.strerror}); the partial cache was removed, free some "
                              f"space and build it again") from error
            raise
        return CacheReader(cache_dir)


# Errors that mean the file system has no room left (a full disk, a user's quota).
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def _write_files(cache_dir: str, variables: tuple[str, ...], size: int,
                 examples: Callable[[range], Sequence[Sequence[Any]]], prefix: str,
                 chunk_size: int, written: list[str]) -> None:
    """Write the chunks, ``cache_info.csv`` and ``cache_index.csv``; list each in ``written``."""
    names: list[tuple[str, int, int]] = []
    layout: list[tuple] = []  # each variable's (dtype, example shape), from the first chunk
    for first in range(0, size, chunk_size):
        positions = range(first, min(first + chunk_size, size))
        chunk = examples(positions)
        name = f"{prefix}_{first:08d}_{positions[-1]:08d}.npy"
        written.append(os.path.join(cache_dir, name))
        with atomic_write(written[-1]) as temp:
            with open(temp, "wb") as f:
                for k, variable in enumerate(variables):
                    array = _stack(variable, [ex[k] for ex in chunk], first)
                    _check_layout(layout, k, variable, array, first)
                    np.save(_Stream(f), array)
        names.append((name, len(positions), size))
    written.append(os.path.join(cache_dir, INFO_FILE))
    with atomic_write(written[-1]) as temp:
        with open(temp, "w", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows((v,) for v in variables)
    with atomic_write(os.path.join(cache_dir, INDEX_FILE)) as temp:
        with open(temp, "w", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows(names)


def _check_layout(layout: list[tuple], k: int, variable: str, array: np.ndarray,
                  first: int) -> None:
    """Refuse a chunk whose variable ``k`` differs in dtype or example shape from chunk 0's.

    Readers refuse such a cache (a batch is one array per variable), so it is
    never written.
    """
    if len(layout) == k:
        layout.append((array.dtype, array.shape[1:]))
    elif layout[k] != (array.dtype, array.shape[1:]):
        raise ValueError(
            f"variable {variable!r}: example {first} is {array.dtype} of shape "
            f"{array.shape[1:]}, but example 0 is {layout[k][0]} of shape {layout[k][1]}; a "
            f"file cache needs one dtype and shape per variable")


class _Stream:
    """A file that ``numpy.save`` writes through ``write()``.

    On a real file numpy uses ``ndarray.tofile``, which reports a full disk
    as "N requested and M written" without an errno; through ``write()`` it is
    an ``OSError`` with ``errno.ENOSPC``.
    """

    def __init__(self, f: Any) -> None:
        self.write = f.write


def _stack(variable: str, parts: list, first: int) -> np.ndarray:
    arrays = [p if isinstance(p, np.ndarray) else np.array(p).astype(np.float32) for p in parts]
    for k, a in enumerate(arrays):
        if a.shape != arrays[0].shape:
            raise ValueError(
                f"variable {variable!r}: example {first + k} has shape {a.shape}, but example "
                f"{first} has {arrays[0].shape}; a file cache needs parts of one shape")
    return np.stack(arrays)
