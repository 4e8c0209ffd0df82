"""Parquet files: listing a source, footers, checked row-group reads, ranged remote reads.

A :class:`ParquetPart` is one file: opening it reads only its footer (the
metadata: row groups, their row counts, the schema, statistics), never the
data. :meth:`ParquetPart.read_group` reads one row group, with column
projection; pages are checked against their CRC where the writer wrote one.

Remote files (any fsspec URL) are read in byte ranges: the footer, then
each row group's column chunks, each range retried on a failure (a cut
connection, a 5xx) and bounded by a stall timeout, so a flaky store is an
error naming the file and the bytes, never a hang, and nothing partial is
ever kept. Or, with ``ParquetDataset(cache=...)``, from a whole local copy
in a :mod:`dataset_kit.filecache` (the reads then take ``source=``): see
``docs/columnar.rst`` ("Remote files") for the measurement.

Every file is stamped at open with its size, modification time and ETag
(where the store has one): :func:`check_stamps` compares the stamps a
checkpoint recorded with today's files and names the file that changed.
"""

from __future__ import annotations

import glob
import io
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from dataset_kit import _fsspec
from dataset_kit._fsspec import is_local
from dataset_kit._worker_process import pool_workers
from dataset_kit.filecache import listed_stamp
from dataset_kit.formats._arrow import require_pyarrow

_SUFFIXES = (".parquet", ".parq", ".pq")
#: Rows a row group is decoded in at a time (see ParquetPart.read_group).
DECODE_ROWS = 4096
_GLOB = frozenset("*?[")


# Whether this process chose its decode allocator (see _decode_in_jemalloc).
_allocator_chosen = False


def _decode_in_jemalloc(pa: Any) -> None:
    """In a worker process of a pool, make jemalloc pyarrow's default pool, once.

    pyarrow's default, mimalloc, hands a row group's decode scratch back to
    the kernel 10 ms after it is freed, in a region marked for huge pages, so
    each decode in a worker (on its warm-up thread, between batches) faulted
    in and zeroed those pages again. A 2-worker shuffled epoch of 1M rows:
    5.26 s with mimalloc, 4.79 s with jemalloc (medians of 5 interleaved
    rounds; a bare read 4.57 s); the processes' system time 3.0 against
    2.0 s, the huge-page faults 870 against 180. A worker process is ours,
    so its default pool is ours to choose; the loop's process keeps the
    user's. A pool named in ``ARROW_DEFAULT_MEMORY_POOL``, or a pyarrow
    built without jemalloc, stays as it is.
    """
    global _allocator_chosen
    if _allocator_chosen:
        return
    _allocator_chosen = True
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL") \
            or pa.default_memory_pool().backend_name != "mimalloc":
        return
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:  # not built into this pyarrow
        return
    pa.set_memory_pool(pool)


class ParquetFormatError(ValueError):
    """A Parquet file cannot be read as it should (names the file and the row group or column)."""


class ParquetReadError(OSError):
    """Reading bytes of a remote Parquet file failed after its retries (names the file)."""


class ParquetTimeoutError(ParquetReadError, TimeoutError):
    """A ranged read of a remote Parquet file did not finish within ``timeout`` seconds."""


class FileChangedError(ValueError):
    """A file differs from the one a checkpoint was made with (names the file and what changed)."""


@dataclass(frozen=True)
class FileStamp:
    """What identifies one version of a file: its name, size, modification time and ETag."""

    name: str
    size: int
    mtime: str
    etag: str | None

    def as_state(self) -> list:
        """The stamp as a JSON-ready list (what a checkpoint records)."""
        return [self.name, self.size, self.mtime, self.etag]


def check_stamps(mine: list, saved: Any) -> None:
    """Raise unless ``saved`` describes the same files as ``mine`` (both lists of
    :meth:`FileStamp.as_state`).

    Raises:
        FileChangedError: naming the first file that was added, removed or
            changed (size, modification time or ETag, old and new).
    """
    if not isinstance(saved, list):
        raise FileChangedError(f"the checkpoint records no file stamps, got {saved!r}")
    now = {entry[0]: list(entry) for entry in mine}
    before = {entry[0]: list(entry) for entry in saved
              if isinstance(entry, list) and len(entry) == 4}
    for name, old in before.items():
        new = now.get(name)
        if new is None:
            raise FileChangedError(f"file {name} was read when the checkpoint was written, "
                                   f"but is not among the dataset's files now")
        changed = [f"{what} {a!r} -> {b!r}" for what, a, b in
                   zip(("size", "mtime", "etag"), old[1:], new[1:]) if a != b]
        if changed:
            raise FileChangedError(f"file {name} changed since the checkpoint was written "
                                   f"({'; '.join(changed)}); resuming would not continue the "
                                   f"same order")
    for name in now:
        if name not in before:
            raise FileChangedError(f"file {name} is among the dataset's files now, but was not "
                                   f"when the checkpoint was written")


def filesystem(url: str, storage_options: dict | None) -> tuple[Any, str]:
    """Return ``(fsspec filesystem, path inside it)`` for ``url``.

    Raises:
        ImportError: if fsspec (the ``stream`` extra) is not installed.
    """
    return _fsspec.filesystem(url, storage_options, f"reading {url}")


def _partitions(relative: str) -> dict[str, str]:
    """Hive-style ``key=value`` folders of a file's path relative to its source's root."""
    found = {}
    for part in relative.replace("\\", "/").split("/")[:-1]:
        key, sep, value = part.partition("=")
        if sep and key:
            found[key] = value
    return found


def _root_of_glob(pattern: str) -> str:
    """The folder of a glob pattern before its first wildcard."""
    parts = pattern.replace("\\", "/").split("/")
    for i, part in enumerate(parts):
        if _GLOB & set(part):
            return "/".join(parts[:i])
    return "/".join(parts[:-1])


def _is_data_file(relative: str) -> bool:
    name = relative.replace("\\", "/").rsplit("/", 1)[-1]
    return name.endswith(_SUFFIXES) and not name.startswith((".", "_"))


def list_files(source: str, storage_options: dict | None) -> list[tuple[str, dict[str, str]]]:
    """The files of one source and their Hive partitions, sorted by name.

    Args:
        source: a file, a glob or a folder (whose ``*.parquet`` files are
            taken, recursively), as a local path or an fsspec URL.
        storage_options: fsspec's options for a URL.

    Returns:
        ``(path or URL, {partition column: value})`` for each file.

    Raises:
        FileNotFoundError: naming ``source`` if it matches no file.
    """
    found: list[tuple[str, str]] = []  # (file, its source's root)
    if is_local(source):
        source = os.path.abspath(source)
        if _GLOB & set(source):
            found = [(p, _root_of_glob(source)) for p in glob.glob(source, recursive=True)
                     if os.path.isfile(p)]
        elif os.path.isdir(source):
            for base, folders, names in os.walk(source):
                folders.sort()
                found += [(os.path.join(base, n), source) for n in names
                          if _is_data_file(n)]
        elif os.path.isfile(source):
            found = [(source, os.path.dirname(source))]
        if not found:
            raise FileNotFoundError(f"no Parquet file at {source}")
        return [(path, _partitions(os.path.relpath(path, root))) for path, root in
                sorted(found)]
    fs, path = filesystem(source, storage_options)
    if _GLOB & set(path):
        root = _root_of_glob(path)
        found = [(p, root) for p in fs.glob(path) if fs.isfile(p)]
    elif source.startswith(("http://", "https://")) or not fs.isdir(path):
        # An HTTP "folder" would be a page of links: a URL is one file.
        found = [(path, path.rsplit("/", 1)[0])]
    else:
        found = [(p, path) for p in fs.find(path) if _is_data_file(p[len(path):])]
    if not found:
        raise FileNotFoundError(f"no Parquet file at {source}")
    return [(fs.unstrip_protocol(p) if not source.startswith(("http://", "https://"))
             else p, _partitions(p[len(root):].lstrip("/"))) for p, root in sorted(found)]


def _attempt(fs: Any, path: str, name: str, start: int, end: int) -> tuple[threading.Event,
                                                                           dict[str, Any]]:
    """Start reading bytes ``start:end`` on a daemon thread; return (done, result)."""
    done, result = threading.Event(), {}

    def run() -> None:
        try:
            result["data"] = fs.cat_file(path, start=start, end=end)
        except BaseException as error:  # noqa: BLE001 - handed to the waiting thread
            result["error"] = error
        done.set()

    threading.Thread(target=run, daemon=True, name=f"parquet-read {name}").start()
    return done, result


def read_range(fs: Any, path: str, name: str, start: int, end: int, *, timeout: float,
               retries: int) -> bytes:
    """Read bytes ``start:end`` of a remote file: retried, bounded by a stall timeout.

    Each read runs on a daemon thread that this call waits on for ``timeout``
    seconds, so a stalled store never blocks the reader (nor interpreter exit).

    Raises:
        ParquetTimeoutError: if a read did not finish within ``timeout`` seconds.
        ParquetReadError: if ``retries + 1`` reads in a row failed or came back short.
        FileNotFoundError: if the file is gone (names it).
    """
    pieces, at, failures = [], start, 0
    while at < end:
        done, result = _attempt(fs, path, name, at, end)
        if not done.wait(timeout):
            raise ParquetTimeoutError(f"reading bytes {at}-{end} of {name} stalled: no answer "
                                      f"within {timeout} s")
        error = result.get("error")
        if isinstance(error, FileNotFoundError):
            raise FileNotFoundError(f"{name} is gone from its store: {error}") from None
        data = result.get("data", b"")[:end - at]
        if error is None and data:
            pieces.append(data)
            at += len(data)
            failures = 0
            continue
        failures += 1  # a failure, or an empty answer before the end: a cut read
        if failures > retries:
            cause = f"{type(error).__name__}: {error}" if error is not None else "no bytes"
            raise ParquetReadError(f"reading {name} failed {failures} times in a row at byte "
                                   f"{at} (of bytes {start}-{end}): {cause}") from error
        time.sleep(min(2.0, 0.05 * 2 ** failures))
    return b"".join(pieces)


class _RangedFile(io.RawIOBase):
    """A remote file as a seekable file object whose every read is :func:`read_range`."""

    def __init__(self, fs: Any, path: str, name: str, size: int, timeout: float,
                 retries: int) -> None:
        super().__init__()
        self._where = (fs, path, name)
        self._size, self._pos = size, 0
        self._timeout, self._retries = timeout, retries

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = offset if whence == 0 else self._pos + offset if whence == 1 \
            else self._size + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        if end <= self._pos:
            return b""
        data = read_range(*self._where, self._pos, end, timeout=self._timeout,
                          retries=self._retries)
        self._pos = end
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


class ParquetPart:
    """One Parquet file: its stamp, its footer and checked reads of its row groups.

    Args:
        name: the file's path or URL.
        partitions: its Hive partition columns.
        storage_options: fsspec's options (for a URL).
        timeout: seconds one ranged read of a remote file may take.
        retries: failed ranged reads retried before an error.
        copy: a local copy of the file (an Arrow file or buffer) to read the
            footer from, and later row groups (``read_group(..., source=copy)``),
            instead of ``name``, which then only names it (a shard in a cache,
            maybe still being written there); its stamp is the copy's size.

    Raises:
        ParquetFormatError: if the file is not Parquet or its footer is corrupt
            (names the file).
        ParquetReadError: if its footer could not be read from the store.
    """

    def __init__(self, name: str, partitions: dict[str, str], storage_options: dict | None,
                 timeout: float, retries: int, *, copy: Any = None) -> None:
        self.name, self.partitions = name, partitions
        self.storage_options = storage_options
        self.timeout, self.retries = timeout, retries
        self._fs: tuple[int, Any, str] | None = None
        self.stamp = self._stamp() if copy is None else FileStamp(name, copy.size(), "", None)
        self.metadata: Any = None  # None: an empty file, which holds no rows
        self.schema: Any = None
        if self.stamp.size:
            handle = self._open(None, copy)
            self.metadata, self.schema = handle.metadata, handle.schema_arrow

    def _stamp(self) -> FileStamp:
        if is_local(self.name):
            try:
                st = os.stat(self.name)
            except FileNotFoundError:
                raise FileNotFoundError(f"Parquet file {self.name} does not exist") from None
            return FileStamp(self.name, st.st_size, str(st.st_mtime_ns), None)
        fs, path = self.fs
        return FileStamp(self.name, *listed_stamp(fs.info(path)))

    @property
    def fs(self) -> tuple[Any, str]:
        """``(fsspec filesystem, path)``, made in this process (none survives ``fork``)."""
        if self._fs is None or self._fs[0] != os.getpid():
            fs, path = filesystem(self.name, self.storage_options)
            self._fs = (os.getpid(), fs, path)
        return self._fs[1], self._fs[2]

    def _open(self, metadata: Any, source: Any = None) -> Any:
        pq = require_pyarrow(f"reading {self.name}").parquet
        if source is not None:
            pass  # a local copy of a remote file (a cache's)
        elif is_local(self.name):
            source = self.name
        else:
            source = _RangedFile(*self.fs, self.name, self.stamp.size, self.timeout,
                                 self.retries)
        try:
            return pq.ParquetFile(source, metadata=metadata, page_checksum_verification=True)
        except (ParquetReadError, FileNotFoundError):
            raise
        except Exception as error:  # noqa: BLE001 - pyarrow's ArrowInvalid, OSError, ...
            raise ParquetFormatError(f"{self.name} ({self.stamp.size} bytes) is not a readable "
                                     f"Parquet file; its footer failed: {error}") from None

    def _file(self, source: Any = None) -> Any:
        """The file (or ``source``, a local copy of it), opened for one read from the footer
        already read.

        Not kept open: a dataset of thousands of files would hold a descriptor
        for each (and none may cross a fork). Opening with the parsed footer
        costs about 0.1 ms, next to a row group's decode.
        """
        return self._open(self.metadata, source)

    @property
    def group_rows(self) -> list[int]:
        """The row count of each row group, in file order."""
        if self.metadata is None:
            return []
        return [self.metadata.row_group(g).num_rows for g in range(self.metadata.num_row_groups)]

    def may_hold_nulls(self, column: str) -> bool:
        """Whether the footer's statistics allow a null in ``column`` (no statistics: True)."""
        if self.metadata is None:
            return False
        for g in range(self.metadata.num_row_groups):
            group = self.metadata.row_group(g)
            if not group.num_rows:
                continue  # a row group of no rows has no statistics, and no null
            for c in range(group.num_columns):
                chunk = group.column(c)
                if chunk.path_in_schema.split(".")[0] != column:
                    continue
                stats = chunk.statistics
                if stats is None or not stats.has_null_count or stats.null_count:
                    return True
        return False

    def read_group(self, group: int, columns: list[str], source: Any = None) -> Any:
        """Read row group ``group``'s ``columns`` (names in the file) as an Arrow table.

        ``source`` is a local copy of the file to read instead (an Arrow
        file or buffer, from a cache), or None to read the file itself.

        Raises:
            ParquetFormatError: naming the file and the row group if a page is
                corrupt (a CRC that does not match, data that does not decode)
                or the file ends early.
            ParquetReadError: if its bytes could not be read from the store.
        """
        try:
            # Local files decode their columns on pyarrow's threads: a shuffled
            # epoch took 3.8 s where one thread took 5.7 (200k rows, medians of
            # 5, a loaded 2-core machine). Not in a pool of 2 or more worker
            # processes, where the workers decode row groups at once (warmed
            # ahead) and more threads only contend: 1M rows, 2 workers, 4.32 s
            # on one thread against 4.94 s on pyarrow's (medians of 3, bare
            # read 3.89 s). Ranged remote reads (and the file cache's) stay on
            # the calling thread.
            threads = is_local(self.name) and pool_workers() < 2
            pa = require_pyarrow(f"reading {self.name}")
            if pool_workers():
                _decode_in_jemalloc(pa)
            expected = self.metadata.row_group(group).num_rows
            if not expected:  # no batches to make a table of (nor its schema)
                table = self._file(source).read_row_group(group, columns=columns)
            else:
                # Decoded DECODE_ROWS rows at a time, then joined: the decoder's
                # scratch buffers (levels, dictionary indices) stay small and are
                # reused, where a whole row group's are fresh memory the
                # allocator returns after each group, every page of it faulted
                # and zeroed again for the next. A 64k-row group of token lists
                # decoded in 137 ms against 214 ms whole (one thread, the mean
                # of 8 reads); a 2-worker epoch of 1M rows had spent 3 s of its
                # workers' CPU zeroing pages. The join is one more copy of the
                # group, which a cache holding every group (a full shuffle)
                # pays without the reuse: 6.96 s an epoch against 6.19 s.
                batches = self._file(source).iter_batches(
                    batch_size=DECODE_ROWS, row_groups=[group], columns=columns,
                    use_threads=threads)
                table = pa.Table.from_batches(list(batches))
        except (ParquetReadError, FileNotFoundError):
            raise
        except Exception as error:  # noqa: BLE001 - pyarrow raises several types
            raise ParquetFormatError(f"{self.name}: row group {group} cannot be read: "
                                     f"{type(error).__name__}: {error}") from None
        if table.num_rows != expected:
            raise ParquetFormatError(f"{self.name}: row group {group} gave {table.num_rows} "
                                     f"rows, but the footer says {expected}")
        return table

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _fs=None)
