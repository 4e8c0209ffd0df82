"""Reading a cache directory in NNabla's ``.npy`` layout (see :mod:`.file_cache`).

Scattered examples come from memory maps of the chunk files; a run of
consecutive examples is read straight into the batch's arrays, one read per
variable, as ``np.load`` would read a whole chunk.
"""

from __future__ import annotations

import csv
import os
import re
from collections import OrderedDict
from typing import Any, NamedTuple

import numpy as np

from dataset_kit.batch import ExampleBatch
from dataset_kit.sources import _uri
from dataset_kit.sources.data_source import DataSource

INDEX_FILE, INFO_FILE = "cache_index.csv", "cache_info.csv"
# Memory maps kept open: a shuffled epoch touches every chunk in every batch, and
# an open map costs address space only (its pages are the page cache's).
_OPEN_CHUNKS = 1024


class CacheFormatError(ValueError):
    """A cache directory is missing a file, or holds one that does not parse."""


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
