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
import re
import os
import shutil
import tempfile
import weakref
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np

from dataset_kit._files import atomic_write, lock_for, remove_stale_parts
from dataset_kit.batch import ExampleBatch
from dataset_kit.sources import _uri
from dataset_kit.sources.data_source import DataSource

CHUNK_SIZE = 100  # NNabla's data_source_file_cache_size
INDEX_FILE, INFO_FILE = "cache_index.csv", "cache_info.csv"
LOADER_THREADS = 10  # NNabla's data_source_file_cache_num_of_threads
# Memory maps kept open: a shuffled epoch touches every chunk in every batch, and
# an open map costs address space only (its pages are the page cache's).
_OPEN_CHUNKS = 1024


class CacheFormatError(ValueError):
    """A cache directory is missing a file, or holds one that does not parse."""


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


class CacheReader:
    """Random access to the examples of a cache directory (memory-mapped chunks).

    Args:
        cache_dir: the directory (NNabla's ``.npy`` layout).

    Raises:
        CacheFormatError: if ``cache_index.csv`` or ``cache_info.csv`` is
            missing or malformed, or a chunk does not hold what the index says.
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
        with open(info, newline="", encoding="utf-8") as f:
            self.variables = tuple(row[0] for row in csv.reader(f) if row)
        self.files: list[str] = []
        counts = []
        with open(index, newline="", encoding="utf-8") as f:
            for line, row in enumerate(csv.reader(f), start=1):
                if not row:
                    continue
                try:
                    name, count = row[0], int(row[1])
                except (IndexError, ValueError):
                    raise CacheFormatError(f"{index} line {line}: expected 'file,count', "
                                           f"got {row!r}") from None
                self.files.append(name)
                counts.append(count)
        self.ends = np.cumsum(counts, dtype=np.int64)
        self.size = int(self.ends[-1]) if counts else 0
        self._headers: dict[int, list[_Header]] = {}
        self._maps: OrderedDict[int, list[np.ndarray]] = OrderedDict()

    def chunk(self, k: int) -> list[np.ndarray]:
        """The arrays of chunk ``k``, one per variable (memory-mapped; the latest few are kept)."""
        arrays = self._maps.get(k)
        if arrays is None:
            path = self._path(self.files[k])
            arrays = [np.memmap(path, h.dtype, "r", h.offset, h.shape,
                                "F" if h.fortran else "C") if h.nbytes else
                      np.zeros(h.shape, h.dtype) for h in self.headers(k)]
            self._maps[k] = arrays
            if len(self._maps) > _OPEN_CHUNKS:
                self._maps.popitem(last=False)
        else:
            self._maps.move_to_end(k)
        return arrays

    def headers(self, k: int, f: Any = None) -> list[_Header]:
        """The .npy headers of chunk ``k`` (read once, from ``f`` if it is open)."""
        headers = self._headers.get(k)
        if headers is None:
            if f is None:
                with open(self._path(self.files[k]), "rb") as f:
                    headers = self._read_headers(k, f)
            else:
                headers = self._read_headers(k, f)
            self._headers[k] = headers
        return headers

    def open_chunk(self, k: int) -> Any:
        """Open chunk ``k``'s file for :meth:`read_rows` (unbuffered)."""
        return open(self._path(self.files[k]), "rb", buffering=0)

    def read_rows(self, f: Any, k: int, first: int, outs: list[np.ndarray]) -> None:
        """Read rows ``first .. first + len(out) - 1`` of chunk ``k`` (open as ``f``) into
        ``outs`` (one per variable, C-contiguous), one read per variable: sequential
        reading copies once, as ``np.load`` does."""
        for v, (h, out) in enumerate(zip(self.headers(k, f), outs)):
            if h.fortran and len(h.shape) > 1:
                np.copyto(out, self.chunk(k)[v][first:first + len(out)])
                continue
            f.seek(h.offset + first * (out.nbytes // max(len(out), 1)))
            got = f.readinto(memoryview(out.reshape(-1).view(np.uint8)))
            if got != out.nbytes:
                raise CacheFormatError(f"{self.files[k]}: expected {out.nbytes} bytes at row "
                                       f"{first}, got {got} (a truncated chunk)")

    def _path(self, name: str) -> str:
        """The local path of the cache's file ``name`` (fetched once from an http(s) cache)."""
        if _uri.is_remote(self.cache_dir):
            return _uri.local_path(_uri.join(self.cache_dir.rstrip("/") + "/", name))
        return os.path.join(_uri.local_path(self.cache_dir), name)

    def _read_headers(self, k: int, f: Any) -> list[_Header]:
        path = self.files[k]
        expected = int(self.ends[k] - (self.ends[k - 1] if k else 0))
        headers = []
        try:
            f.seek(0)
            for variable in self.variables:
                shape, fortran, dtype = _read_header(f)
                if dtype.hasobject:
                    raise CacheFormatError(
                        f"{path}: variable {variable!r} holds Python objects (ragged "
                        f"examples); dataset_kit reads only same-shape parts")
                nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                headers.append(_Header(shape, dtype, fortran, f.tell(), nbytes))
                f.seek(nbytes, os.SEEK_CUR)
            size = f.seek(0, os.SEEK_END)
        except (OSError, ValueError) as error:
            if isinstance(error, CacheFormatError):
                raise
            raise CacheFormatError(f"{path}: cannot read the chunk ({error})") from error
        for variable, h in zip(self.variables, headers):
            if not h.shape or h.shape[0] != expected:
                raise CacheFormatError(f"{path}: variable {variable!r} has shape {h.shape}, "
                                       f"the index says {expected} examples")
        if headers and headers[-1].offset + headers[-1].nbytes > size:
            raise CacheFormatError(f"{path}: the file is truncated ({size} bytes)")
        return headers

    def locate(self, position: int) -> tuple[int, int]:
        """Return (chunk, row) of the example at ``position``."""
        k = int(np.searchsorted(self.ends, position, side="right"))
        return k, position - (int(self.ends[k - 1]) if k else 0)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_maps"] = OrderedDict()  # each process maps its own
        return state


def _empty_columns(headers: list, length: int) -> list[np.ndarray]:
    return [np.empty((length,) + h.shape[1:], h.dtype) for h in headers]


class _Header(NamedTuple):
    """One variable's array in a chunk file."""

    shape: tuple
    dtype: np.dtype
    fortran: bool
    offset: int  # where its data begins in the file
    nbytes: int


_HEADER = re.compile(r"\{'descr': '([^']+)', 'fortran_order': (True|False), "
                     r"'shape': \(([0-9, ]*)\), \}")


def _read_header(f: Any) -> tuple[tuple, bool, np.dtype]:
    """Read one .npy header from ``f``; return (shape, fortran order, dtype).

    The headers numpy writes for plain dtypes are parsed with a pattern
    (numpy's own parser evaluates the header, which costs more than reading
    a small chunk); anything else goes to numpy's parser.
    """
    start = f.tell()
    magic = f.read(8)
    if len(magic) == 8 and magic[:6] == b"\x93NUMPY" and magic[6] in (1, 2, 3):
        width = 2 if magic[6] == 1 else 4
        length = int.from_bytes(f.read(width), "little")
        match = _HEADER.match(f.read(length).decode("latin1"))
        if match is not None:
            shape = tuple(int(n) for n in match.group(3).replace(" ", "").split(",") if n)
            return shape, match.group(2) == "True", np.dtype(match.group(1))
    f.seek(start)
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(f)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(f)
    raise ValueError(f"unsupported .npy format version {version}")


def normalized(value: np.ndarray) -> np.ndarray:
    """NNabla's ``normalize``: uint8 to float32 in [0, 1], uint16 likewise; else unchanged."""
    if value.dtype == np.uint8:
        return value.astype(np.float32) * np.float32(1.0 / 255.0)
    if value.dtype == np.uint16:
        return value.astype(np.float32) * np.float32(1.0 / 65535.0)
    return value


class _ReadsCache(DataSource):
    """A source whose examples come from a :class:`CacheReader` (``_reader``)."""

    _reader: CacheReader
    _normalize = False

    def _open_reader(self, cache_dir: str) -> None:
        self._reader = CacheReader(cache_dir)
        self._size = self._reader.size
        self._variables = self._reader.variables

    def _get_data(self, position: int) -> tuple:
        k, row = self._reader.locate(position)
        values = [np.array(a[row]) for a in self._reader.chunk(k)]
        return tuple(normalized(v) for v in values) if self._normalize else tuple(values)

    def get_examples(self, indices: np.ndarray) -> ExampleBatch:
        """Gather a batch chunk by chunk: a run of consecutive examples in one read per
        variable, anything else with one take per variable and chunk."""
        reader = self._reader
        chunks = np.searchsorted(reader.ends, indices, side="right")
        starts = np.concatenate([[0], reader.ends])[chunks]
        columns: list[np.ndarray] | None = None
        for k in np.unique(chunks).tolist():
            where = np.flatnonzero(chunks == k)
            rows = indices[where] - starts[where]
            run = len(rows) > 1 and where[-1] - where[0] == len(where) - 1 \
                and rows[-1] - rows[0] == len(rows) - 1 and bool(np.all(np.diff(rows) == 1))
            if run:
                with reader.open_chunk(k) as f:
                    if columns is None:
                        columns = _empty_columns(reader.headers(k, f), len(indices))
                    reader.read_rows(f, k, int(rows[0]),
                                     [c[where[0]:where[-1] + 1] for c in columns])
                continue
            if columns is None:
                columns = _empty_columns(reader.headers(k), len(indices))
            for column, a in zip(columns, reader.chunk(k)):
                column[where] = a.take(rows, axis=0)
        if columns is None:
            columns = [np.empty(0) for _ in self.variables]
        if self._normalize:
            columns = [normalized(c) for c in columns]
        return ExampleBatch(tuple(columns))


class CacheDataSource(_ReadsCache):
    """The examples of a cache directory (NNabla's ``CacheDataSource``), ours or NNabla's.

    Args:
        cachedir: the directory.
        shuffle: whether iterators shuffle each epoch.
        rng: see :class:`~dataset_kit.sources.DataSource`.
        normalize: scale uint8 (and uint16) parts to float32 in [0, 1].

    Raises:
        CacheFormatError: if the directory is not a finished ``.npy`` cache.
    """

    def __init__(self, cachedir: str, shuffle: bool = False, rng: Any = None,
                 normalize: bool = False) -> None:
        super().__init__(shuffle=shuffle, rng=rng)
        self._normalize = bool(normalize)
        self._open_reader(os.fspath(cachedir))


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
        self._temporary = cache_dir is None
        self._cache_dir = tempfile.mkdtemp(prefix="dataset_kit_cache_") if cache_dir is None \
            else os.path.abspath(os.fspath(cache_dir))
        self._remove = weakref.finalize(self, _remove_if_owner, self._cache_dir, os.getpid()) \
            if self._temporary else None
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
