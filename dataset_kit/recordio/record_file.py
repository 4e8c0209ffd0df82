"""Record files (MXNet's ``.rec``) and their indexes (``.idx``): readers and writers.

Writers build the files under temporary names and publish them on
``close()``, so an interrupted writer leaves nothing that looks complete.
Indexed readers map the file (``mmap``), reopened in each process, so random
reads are safe in threads and after a fork.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Iterator
from typing import Any

from dataset_kit import _files
from dataset_kit.recordio._format import RecordIOError, frame, parse


class RecordWriter:
    """Writes records one after another (MXNet's ``MXRecordIO(path, 'w')``).

    Args:
        path: the ``.rec`` file; it appears on :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._file = _files.AtomicFile(self.path)

    def write(self, buf: bytes) -> None:
        """Append one record.

        Raises:
            ValueError: if the writer is closed or the record is too long.
        """
        if self._file.closed:
            raise ValueError(f"record writer for {self.path} is closed")
        self._file.write(frame(buf))

    def tell(self) -> int:
        """The offset the next record will be written at."""
        return self._file.tell()

    def close(self) -> None:
        """Finish the file and move it into place. Idempotent."""
        self._file.close()

    def abort(self) -> None:
        """Discard what was written; nothing appears at the path."""
        self._file.abort()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class _MappedFile:
    """A read-only mapping of a file, made on first use in each process."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._map: mmap.mmap | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()

    def view(self) -> memoryview:
        if self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():
                    with open(self.path, "rb") as f:
                        size = os.fstat(f.fileno()).st_size
                        self._map = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) \
                            if size else None
                    self._pid = os.getpid()
        return memoryview(self._map) if self._map is not None else memoryview(b"")

    def __getstate__(self) -> dict:
        return {"path": self.path, "_map": None, "_pid": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _lock=threading.Lock())


class RecordReader:
    """Reads records in order (MXNet's ``MXRecordIO(path, 'r')``).

    Args:
        path: the ``.rec`` file.
        copy: False makes :meth:`read` and iteration give read-only views of
            the mapped file for one-part records (no copy of the payload,
            which is read only when used; see benchmarks/recordio.py).

    Raises:
        FileNotFoundError: if it does not exist.
    """

    def __init__(self, path: str | os.PathLike, copy: bool = True) -> None:
        self.path = os.fspath(path)
        if not os.path.isfile(self.path):
            raise FileNotFoundError(f"record file {self.path} does not exist")
        self._file = _MappedFile(self.path)
        self._offset = 0
        self._copy = bool(copy)

    def read(self) -> bytes | memoryview | None:
        """Return the next record, or None at the end.

        Raises:
            RecordIOError: for a truncated or corrupt file, naming it and the offset.
        """
        buffer = self._file.view()
        if self._offset >= len(buffer):
            return None
        record, self._offset = parse(buffer, self._offset, self.path)
        return bytes(record) if self._copy else record

    def tell(self) -> int:
        """The offset of the next record."""
        return self._offset

    def seek(self, offset: int) -> None:
        """Continue reading at ``offset`` (a value :meth:`tell` returned)."""
        self._offset = int(offset)

    def reset(self) -> None:
        """Go back to the first record."""
        self._offset = 0

    def __iter__(self) -> Iterator[bytes | memoryview]:
        while (record := self.read()) is not None:
            yield record

    def close(self) -> None:
        """Nothing to release until the mapping is collected; kept for MXNet's API."""

    def __enter__(self) -> RecordReader:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class IndexedRecordWriter(RecordWriter):
    """Writes records with keys, and the ``.idx`` index of their offsets.

    Args:
        idx_path: the index file (``key<TAB>offset`` lines).
        rec_path: the record file.
        key_type: the keys' type (``int`` by default).
    """

    def __init__(self, idx_path: str | os.PathLike, rec_path: str | os.PathLike,
                 key_type: type = int) -> None:
        super().__init__(rec_path)
        self.idx_path = os.fspath(idx_path)
        self.key_type = key_type
        self.keys: list = []
        self._lines: list[str] = []

    def write_idx(self, key: Any, buf: bytes) -> None:
        """Append a record under ``key``."""
        key = self.key_type(key)
        self._lines.append(f"{key}\t{self.tell()}\n")
        self.write(buf)
        self.keys.append(key)

    def close(self) -> None:
        """Publish the record file, then its index. Idempotent."""
        if not self._file.closed:
            super().close()
            with _files.atomic_write(self.idx_path) as temp, open(temp, "w") as f:
                f.writelines(self._lines)


class IndexedRecordReader:
    """Random access to records by key (MXNet's ``MXIndexedRecordIO(idx, rec, 'r')``).

    Args:
        idx_path: the index file, or None to index the records by scanning
            the file once (keys 0, 1, ...).
        rec_path: the record file.
        key_type: the keys' type (``int`` by default).

    Raises:
        FileNotFoundError: if a file does not exist.
        RecordIOError: if an index line is malformed (or, when scanning, the
            file is corrupt).
    """

    def __init__(self, idx_path: str | os.PathLike | None, rec_path: str | os.PathLike,
                 key_type: type = int) -> None:
        self.path = os.fspath(rec_path)
        if not os.path.isfile(self.path):
            raise FileNotFoundError(f"record file {self.path} does not exist")
        self.key_type = key_type
        self.idx: dict = {}
        self.keys: list = []
        self._file = _MappedFile(self.path)
        if idx_path is None:
            # No index: scan the records once; keys are their positions 0, 1, ...
            self.idx_path = f"{self.path} (scanned)"
            reader = RecordReader(self.path)
            while True:
                offset = reader.tell()
                if reader.read() is None:
                    break
                self.idx[len(self.keys)] = offset
                self.keys.append(len(self.keys))
            return
        self.idx_path = os.fspath(idx_path)
        with open(self.idx_path) as f:
            for number, line in enumerate(f, 1):
                fields = line.strip().split("\t")
                if len(fields) != 2 or not fields[1].isdigit():
                    raise RecordIOError(f"{self.idx_path}, line {number}: expected "
                                        f"'key<TAB>offset', got {line!r}")
                key = key_type(fields[0])
                self.idx[key] = int(fields[1])
                self.keys.append(key)

    def __len__(self) -> int:
        return len(self.keys)

    def read_idx(self, key: Any, copy: bool = True) -> bytes | memoryview:
        """Return the record stored under ``key``.

        Args:
            key: the key.
            copy: False returns a read-only view of the mapped file for a
                one-part record (no copy of the payload).

        Raises:
            KeyError: if ``key`` is not in the index.
            RecordIOError: if the index does not point at a record, naming
                the file, the offset and the key.
        """
        offset = self.idx[self.key_type(key)]
        try:
            record, _ = parse(self._file.view(), offset, self.path)
        except RecordIOError as error:
            raise RecordIOError(f"{error} (key {key!r} in {self.idx_path})") from None
        return bytes(record) if copy else record

    def close(self) -> None:
        """Kept for MXNet's API; the mapping goes with the reader."""

    def __enter__(self) -> IndexedRecordReader:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
