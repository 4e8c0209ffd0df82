"""MXNet's ``mx.recordio.MXRecordIO`` and ``MXIndexedRecordIO``: one class, a flag for the mode.

A translation table over :class:`RecordReader`, :class:`RecordWriter` and their
indexed kin, for code ported from MXNet 1.9.1 by imports alone:

=================================  ===========================================
MXNet                              here
=================================  ===========================================
``MXRecordIO(uri, 'r')``           a :class:`RecordReader`
``MXRecordIO(uri, 'w')``           a :class:`RecordWriter`
``MXIndexedRecordIO(idx, uri,      an :class:`IndexedRecordReader` or
'r' | 'w', key_type=int)``         :class:`IndexedRecordWriter`
``read()``                         the next record, None at the end
``write(buf)`` / ``write_idx``     append a record (under a key)
``read_idx(key)``, ``seek(key)``   read at a key; ``read()`` goes on after it
``tell()``                         the writer's offset (the reader's too, here)
``reset()``                        back to the first record; a writer starts over
``close()``, ``open()``            close (a writer publishes), reopen
``keys``, ``idx``                  the keys in file order, ``{key: offset}``
=================================  ===========================================

Where they differ, on purpose: a writer's files appear when it is closed (or
collected), never half written, and the readers check what they read (see
:mod:`dataset_kit.formats.recordio.record_file`). A reader may be used in a forked
child (reads are positional), where MXNet raises; a writer may not, as in
MXNet. Pickling a reader pickles the open file (its identity is checked when
it is unpickled) and the copy starts at the first record, as MXNet's reopened
copy does, but the original stays open (MXNet closes it); an open writer
cannot be pickled (MXNet's copy would truncate the file the original is
writing). Both are context managers (a ``with`` block left by an exception
discards a writer's files).
"""

from __future__ import annotations

import io
import os
from typing import Any, TypeVar

from dataset_kit.formats.recordio.record_file import (
    IndexedRecordReader,
    IndexedRecordWriter,
    RecordReader,
    RecordWriter,
)

_FLAGS = ("r", "w")
_Self = TypeVar("_Self", bound="MXRecordIO")


def _path(value: Any, name: str) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike), got {value!r}")
    return os.fspath(value)


class MXRecordIO:
    """Reads (``flag='r'``) or writes (``flag='w'``) records in order, as MXNet's class does.

    Args:
        uri: the ``.rec`` file.
        flag: ``'r'`` to read, ``'w'`` to write.

    Raises:
        TypeError: if ``uri`` is not a path.
        ValueError: if ``flag`` is neither ``'r'`` nor ``'w'``.
        FileNotFoundError: if ``flag`` is ``'r'`` and the file does not exist.
    """

    def __init__(self, uri: str | os.PathLike, flag: str) -> None:
        self.uri = _path(uri, "uri")
        if flag not in _FLAGS:
            raise ValueError(f"flag must be 'r' (read) or 'w' (write), got {flag!r}")
        self.flag = flag
        self.writable = flag == "w"
        self.is_open = False
        self._file: Any = None
        self.open()

    def _open_file(self) -> Any:
        return RecordWriter(self.uri) if self.writable else RecordReader(self.uri)

    def open(self) -> None:
        """Open the file (a writer starts an empty one). Nothing happens if it is open."""
        if not self.is_open:
            self._file = self._open_file()
            self.is_open = True

    def close(self) -> None:
        """Close the file; a writer publishes what it wrote. Idempotent."""
        if self.is_open:
            self.is_open = False
            self._file.close()

    def reset(self) -> None:
        """Go back to the first record; a writer discards what it wrote and starts over."""
        if self.writable and self.is_open:
            self.is_open = False
            self._file.abort()
        if not self.writable and self.is_open:
            self._file.reset()
        self.open()

    def write(self, buf: bytes | bytearray | memoryview) -> None:
        """Append a record.

        Raises:
            io.UnsupportedOperation: if the file is open for reading.
            TypeError: if ``buf`` is not bytes-like.
            ValueError: if the file is closed or the record is too long.
            RuntimeError: in a forked child of the writer's process.
        """
        self._need(writable=True, verb="write")
        if not isinstance(buf, (bytes, bytearray, memoryview)):
            raise TypeError(f"buf must be bytes-like, got {type(buf).__name__}")
        self._file.write(buf)

    def read(self) -> bytes | None:
        """Return the next record, or None at the end.

        Raises:
            io.UnsupportedOperation: if the file is open for writing.
            ValueError: if the file is closed.
            RecordIOError: for a truncated or corrupt file, naming it and the offset.
        """
        self._need(writable=False, verb="read")
        record = self._file.read()
        return record if record is None or isinstance(record, bytes) else bytes(record)

    def tell(self) -> int:
        """The offset of the next record written (or read).

        Raises:
            ValueError: if the file is closed.
        """
        self._need(writable=self.writable, verb="tell")
        return self._file.tell()

    def _need(self, writable: bool, verb: str) -> None:
        if writable != self.writable:
            mode = "writing ('w')" if self.writable else "reading ('r')"
            raise io.UnsupportedOperation(f"cannot {verb}: {self.uri} is open for {mode}")
        if not self.is_open:
            raise ValueError(f"cannot {verb}: {self.uri} is closed")

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is not None and self.writable and self.is_open:
            self.is_open = False
            self._file.abort()
        self.close()

    def __getstate__(self) -> dict:
        if self.writable and self.is_open:
            raise TypeError(f"cannot pickle an MXRecordIO writing {self.uri}: the copy would "
                            f"start the file over; close it first")
        state = dict(self.__dict__)
        if not self.is_open:
            state["_file"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.is_open:
            self._file.reset()  # a copy starts at the first record, as MXNet's reopened one


class MXIndexedRecordIO(MXRecordIO):
    """Reads records by key (``flag='r'``) or writes them with keys (``flag='w'``), as MXNet.

    Args:
        idx_path: the index file (``key<TAB>offset`` lines).
        uri: the ``.rec`` file.
        flag: ``'r'`` to read, ``'w'`` to write.
        key_type: the keys' type (``int`` by default).

    Attributes:
        keys: the keys, in the index's order (a list: shuffle it freely).
        idx: ``{key: offset}``.

    Raises:
        TypeError: if a path is not a path or ``key_type`` is not callable.
        ValueError: if ``flag`` is neither ``'r'`` nor ``'w'``.
        FileNotFoundError: if ``flag`` is ``'r'`` and a file does not exist.
        RecordIOError: if ``flag`` is ``'r'`` and the index is malformed or
            does not fit the record file.
    """

    def __init__(self, idx_path: str | os.PathLike, uri: str | os.PathLike, flag: str,
                 key_type: Any = int) -> None:
        self.idx_path = _path(idx_path, "idx_path")
        if not callable(key_type):
            raise TypeError(f"key_type must be a type (callable), got {key_type!r}")
        self.key_type = key_type
        self.keys: list = []
        self.idx: Any = {}  # a dict; the reader's mapping when reading
        super().__init__(uri, flag)

    def _open_file(self) -> Any:
        if self.writable:
            self.keys, self.idx = [], {}
            return IndexedRecordWriter(self.idx_path, self.uri, self.key_type)
        reader = IndexedRecordReader(self.idx_path, self.uri, self.key_type)
        # The keys are copied (MXNet's users shuffle them in place); the index is shared.
        self.keys, self.idx = list(reader.keys), reader.idx
        return reader

    def seek(self, idx: Any) -> None:
        """Make :meth:`read` go on at the record stored under key ``idx``.

        Raises:
            io.UnsupportedOperation: if the file is open for writing.
            KeyError: if ``idx`` is not a key.
        """
        self._need(writable=False, verb="seek")
        self._file.seek(self.idx[self.key_type(idx)])

    def read_idx(self, idx: Any) -> bytes:
        """Return the record stored under key ``idx``; :meth:`read` goes on after it.

        Raises:
            io.UnsupportedOperation: if the file is open for writing.
            KeyError: if ``idx`` is not a key.
            RecordIOError: if the file is corrupt or shrank, naming it and the offset.
        """
        self._need(writable=False, verb="read_idx")
        return self._file.read_idx(idx)

    def write_idx(self, idx: Any, buf: bytes | bytearray | memoryview) -> None:
        """Append a record under key ``idx``.

        Raises:
            io.UnsupportedOperation: if the file is open for reading.
            TypeError: if ``buf`` is not bytes-like.
            ValueError: if ``key_type`` refuses ``idx``, or the file is closed.
        """
        self._need(writable=True, verb="write_idx")
        if not isinstance(buf, (bytes, bytearray, memoryview)):
            raise TypeError(f"buf must be bytes-like, got {type(buf).__name__}")
        key = self.key_type(idx)
        offset = self._file.tell()
        self._file.write_idx(key, buf)
        self.keys.append(key)
        self.idx[key] = offset
