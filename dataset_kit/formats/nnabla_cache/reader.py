"""Reading a cache directory in NNabla's ``.npy`` layout (see :mod:`.writer`).

Nothing is trusted before it is checked. Opening a cache reads
``cache_info.csv``, ``cache_index.csv`` and the header of every array of every
chunk (:func:`._npy_chunk.scan_chunk`; headers only, a few hundred bytes per
chunk), so counts, variables, dtypes and lengths are known to agree with the
files before the first example is served. Examples are then read with
``pread`` from file descriptors kept in a small LRU bounded by the process's
descriptor limit: no memory maps, so a chunk truncated under the reader (``cp``
or ``rsync --inplace`` over a live file) is a short read and an error naming
the file, not a ``SIGBUS``.

A reader notices when the cache changes under it: every batch compares the
index file's identity (inode, size, mtime) with the one it opened, and every
chunk read compares the chunk file's identity with the one it scanned. Another
process that rebuilds or replaces the cache makes the next batch raise
:class:`CacheFormatError`, never serve the new examples under the old indices.
"""

from __future__ import annotations

import csv
import io
import os
import re

import numpy as np

from dataset_kit import _uri
from dataset_kit._files import PART_SUFFIX, remove_stale_parts
from dataset_kit.formats.nnabla_cache._npy_chunk import (
    CacheFormatError,
    Chunk,
    identity,
    scan_chunk,
)
from dataset_kit.formats.nnabla_cache._open_chunks import OpenChunks, changed

__all__ = ["CacheFormatError", "CacheReader"]

INDEX_FILE, INFO_FILE = "cache_index.csv", "cache_info.csv"
_IOV_MAX = 1024  # buffers per preadv (Linux's IOV_MAX)
_COUNT = re.compile(r"[0-9]{1,18}")


class CacheReader:
    """Checked random access to the examples of a cache directory.

    Args:
        cache_dir: the directory (NNabla's ``.npy`` layout), a path or an
            http(s) URL.

    Raises:
        CacheFormatError: naming the file (and line or byte offset) if
            ``cache_index.csv`` or ``cache_info.csv`` is missing or malformed,
            a chunk does not hold what the index and ``cache_info.csv`` say, or
            the cache changed while it was being opened.
    """

    def __init__(self, cache_dir: str) -> None:
        self.cache_dir = cache_dir
        try:
            index, info = self._path(INDEX_FILE), self._path(INFO_FILE)
        except OSError as error:
            raise CacheFormatError(f"{cache_dir} is not a finished .npy cache: {error}") \
                from error
        for path in (index, info):
            if not os.path.isfile(path):
                raise CacheFormatError(
                    f"{path} is missing: {cache_dir} is not a finished .npy cache (HDF5 caches "
                    f"are not supported)")
        self._index = index
        self._index_identity = self._identity_of_index()
        self.variables = _read_info(info)
        self.files, counts = _read_index(index)
        if not counts and self.variables:
            raise CacheFormatError(f"{index} lists no chunk file, but {info} names "
                                   f"{len(self.variables)} variables (an index cut to nothing)")
        self.ends = np.cumsum(np.array(counts, dtype=np.int64))
        self.size = int(self.ends[-1]) if counts else 0
        # Full local paths, for reading and for every message: all caches share base names.
        self.paths: list[str] = []
        self.chunks = [self._scan(k, count) for k, count in enumerate(counts)]
        self._check_alike()
        # Our writers remove the index before they touch a chunk: an index unchanged
        # across the scan means every chunk scanned belongs to it.
        self.check_unchanged()
        self._open = OpenChunks()

    def check_unchanged(self) -> None:
        """Raise if ``cache_index.csv`` is not the file this reader opened (one ``stat``).

        Raises:
            CacheFormatError: if another process rebuilt or replaced the cache.
        """
        try:
            now = self._identity_of_index()
        except CacheFormatError:
            now = None
        if now != self._index_identity:
            raise CacheFormatError(
                f"{self._index} changed after this reader opened it (another process rebuilt "
                f"or replaced the cache in {self.cache_dir}); open the cache again to read it")

    def gather(self, k: int, rows: list[int], where: list[int],
               columns: list[np.ndarray]) -> None:
        """Copy rows ``rows`` of chunk ``k`` to positions ``where`` of ``columns``.

        Consecutive rows are read with one ``preadv`` per variable, straight
        into the columns (a run of a chunk in order is one read, as
        ``np.load`` would make).

        Raises:
            CacheFormatError: naming the file if it shrank or changed since
                the reader opened it.
        """
        chunk, name, n = self.chunks[k], self.paths[k], len(rows)
        handle = self._open.get(k, name, chunk)  # held: the fd stays open
        in_order = where[-1] - where[0] == n - 1 and rows == list(range(rows[0], rows[0] + n))
        runs: list[tuple[int, list[int]]] = []  # (first row, positions) of consecutive rows
        if not in_order:
            for row, position in sorted(zip(rows, where)):
                if runs and row == runs[-1][0] + len(runs[-1][1]) \
                        and len(runs[-1][1]) < _IOV_MAX:
                    runs[-1][1].append(position)
                else:
                    runs.append((row, [position]))
        for h, column in zip(chunk.arrays, columns):
            step = h.row_bytes
            if h.fortran and len(h.shape) > 1:  # rows are not contiguous: read it all
                flat = np.empty(h.nbytes, np.uint8)
                _read_exactly(handle.fd, name, [flat], h.offset, h.nbytes)
                column[where] = flat.view(h.dtype).reshape(h.shape, order="F")[rows]
            elif step and in_order:
                _read_exactly(handle.fd, name, [column[where[0]:where[0] + n]],
                              h.offset + rows[0] * step, n * step)
            elif step:
                for row, positions in runs:
                    _read_exactly(handle.fd, name, [column[t:t + 1] for t in positions],
                                  h.offset + row * step, len(positions) * step)
        if identity(os.fstat(handle.fd)) != chunk.identity:
            raise CacheFormatError(changed(name, self.cache_dir))

    def empty_columns(self, length: int) -> list[np.ndarray]:
        """Uninitialised columns for ``length`` examples (every chunk has the same layout)."""
        if not self.chunks:
            return [np.empty(0) for _ in self.variables]
        return [np.empty((length,) + h.shape[1:], h.dtype) for h in self.chunks[0].arrays]

    def close(self) -> None:
        """Close the chunk files this reader holds open. Idempotent."""
        self._open.clear()

    def _identity_of_index(self) -> tuple[int, ...]:
        try:
            return identity(os.stat(self._index))
        except OSError as error:
            raise CacheFormatError(f"{self._index}: {error.strerror}") from error

    def _scan(self, k: int, count: int) -> Chunk:
        name = self.files[k]
        try:
            path = self._path(name)
            # O_NONBLOCK: a FIFO in place of a chunk must not hang the open.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except (OSError, ValueError) as error:
            raise CacheFormatError(f"{self._index} line {k + 1} names {name!r}, which cannot "
                                   f"be opened ({error})") from error
        self.paths.append(path)
        try:
            return scan_chunk(fd, path, count, self.variables)
        finally:
            os.close(fd)

    def _check_alike(self) -> None:
        """Every chunk must hold each variable with one dtype and one example shape."""
        for k, chunk in enumerate(self.chunks[1:], start=1):
            for variable, a, b in zip(self.variables, self.chunks[0].arrays, chunk.arrays):
                if (a.dtype, a.shape[1:]) != (b.dtype, b.shape[1:]):
                    raise CacheFormatError(
                        f"{self.paths[k]}: variable {variable!r} holds {b.dtype} examples of "
                        f"shape {b.shape[1:]}, but {self.paths[0]} holds {a.dtype} of shape "
                        f"{a.shape[1:]}")

    def _path(self, name: str) -> str:
        """The local path of the cache's file ``name`` (fetched once from an http(s) cache)."""
        if _uri.is_remote(self.cache_dir):
            return _uri.local_path(_uri.join(self.cache_dir.rstrip("/") + "/", name))
        return os.path.join(_uri.local_path(self.cache_dir), name)

    def locate(self, position: int) -> tuple[int, int]:
        """Return (chunk, row) of the example at ``position``."""
        k = int(np.searchsorted(self.ends, position, side="right"))
        return k, position - (int(self.ends[k - 1]) if k else 0)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_open"] = OpenChunks()  # each process opens its own
        return state


def _read_exactly(fd: int, name: str, buffers: list, offset: int, want: int) -> None:
    """Fill ``buffers`` from ``offset`` of the chunk file ``name`` (its full path)."""
    got = os.preadv(fd, buffers, offset)
    if got != want:
        raise CacheFormatError(f"{name}: read {got} of {want} bytes at byte {offset}: the file "
                               f"shrank after the reader opened it")


def _csv_rows(path: str) -> list[tuple[int, list[str]]]:
    """The non-empty rows of a cache CSV, with their line numbers.

    Every writer ends the file with a line break, so a file that ends without
    one was cut: its last line may be a shorter, still well-formed one.
    """
    rows = []
    line = 0
    try:
        with open(path, newline="", encoding="utf-8") as f:
            text = f.read()
        if text and not text.endswith(("\n", "\r")):
            raise CacheFormatError(f"{path}: the last line has no line break (the file was "
                                   f"cut)")
        reader = csv.reader(io.StringIO(text, newline=""))
        for row in reader:
            line = reader.line_num
            if row:
                rows.append((line, row))
    except (csv.Error, UnicodeDecodeError) as error:
        raise CacheFormatError(f"{path} after line {line} does not parse as CSV "
                               f"({error})") from error
    return rows


def _read_info(path: str) -> tuple[str, ...]:
    variables = []
    for line, row in _csv_rows(path):
        if len(row) != 1 or not row[0]:
            raise CacheFormatError(f"{path} line {line}: expected one variable name, "
                                   f"got {row!r}")
        variables.append(row[0])
    return tuple(variables)


def _read_index(path: str) -> tuple[list[str], list[int]]:
    """The chunk names and counts of ``cache_index.csv``, each count positive.

    dataset_kit writes a third column, the cache's total number of examples,
    on every line (NNabla reads only the first two), so a file cut at a line
    boundary is noticed; NNabla's two-column files are read as they are.
    """
    names: list[str] = []
    counts: list[int] = []
    totals = set()
    seen: dict[str, int] = {}
    for line, row in _csv_rows(path):
        if len(row) not in (2, 3) or not row[0] or not all(_COUNT.fullmatch(c) for c in row[1:]) \
                or int(row[1]) == 0:
            raise CacheFormatError(f"{path} line {line}: expected 'file,count' or "
                                   f"'file,count,total' with a positive count, got {row!r}")
        key = os.path.normpath(row[0])
        if key in seen:
            raise CacheFormatError(f"{path} line {line}: {row[0]!r} is listed again (first on "
                                   f"line {seen[key]})")
        seen[key] = line
        names.append(row[0])
        counts.append(int(row[1]))
        totals.add(int(row[2]) if len(row) == 3 else None)
    if len(totals) > 1 or totals - {None, sum(counts)}:
        raise CacheFormatError(
            f"{path}: its lines hold {sum(counts)} examples, but the total column says "
            f"{sorted(totals, key=str)} (a damaged or cut index)")
    return names, counts


def remove_debris(cache_dir: str, *, under_lock: bool) -> list[str]:
    """Remove the temporaries that killed writers left in ``cache_dir``.

    Args:
        cache_dir: the cache directory (a local path).
        under_lock: True when the caller holds the directory's lock, which
            every writer of the cache takes (then whatever is found is a dead
            writer's); False to remove only those whose writer's pid is dead.

    Returns:
        The paths removed. A directory that cannot be listed or written
        (a read-only copy) is left alone.
    """
    try:
        names = os.listdir(cache_dir)
    except OSError:
        return []
    bases = {name.lstrip(".")[: -len(PART_SUFFIX)].rsplit(".", 1)[0]
             for name in names if name.endswith(PART_SUFFIX)}
    removed: list[str] = []
    for base in sorted(bases):
        if base in (INDEX_FILE, INFO_FILE) or base.endswith(".npy"):
            try:
                removed += remove_stale_parts(os.path.join(cache_dir, base),
                                              under_lock=under_lock)
            except OSError:
                pass
    return removed


def normalized(value: np.ndarray) -> np.ndarray:
    """NNabla's ``normalize``: uint8 to float32 in [0, 1], uint16 likewise; else unchanged."""
    if value.dtype == np.uint8:
        return value.astype(np.float32) * np.float32(1.0 / 255.0)
    if value.dtype == np.uint16:
        return value.astype(np.float32) * np.float32(1.0 / 65535.0)
    return value
