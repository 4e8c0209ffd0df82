"""PickleDataset: examples pickled one after another in a file, read by offset.

Unpickling runs code that the file names, so a pickle dataset must come from
a source you trust. Opening one unpickles nothing: the offsets are found by
walking pickle opcodes (:mod:`dataset_kit.datasets._pickle_scan`), so a hostile
file runs no code until an example is read.
"""

from __future__ import annotations

import io
import os
import pickle
import threading
from typing import Any, Protocol

from dataset_kit import _files
from dataset_kit.dataset import DatasetMixin
from dataset_kit.datasets._pickle_scan import (
    BEGIN,
    TruncatedPickleError,
    check_end,
    end_marker,
    pickle_offsets,
)


class _BinaryWriter(Protocol):
    """What PickleDatasetWriter needs of its writer (``flush`` is used where present)."""

    def write(self, data: bytes, /) -> int: ...

    def close(self) -> None: ...


class PickleDatasetWriter:
    """Appends examples to ``writer`` as consecutive pickles (Chainer's writer).

    Args:
        writer: a binary file-like object open for writing.
        protocol: the pickle protocol.
    """

    def __init__(self, writer: _BinaryWriter, protocol: int = pickle.HIGHEST_PROTOCOL) -> None:
        self._writer, self._protocol = writer, protocol

    def write(self, example: Any) -> None:
        """Append one example."""
        pickle.dump(example, self._writer, protocol=self._protocol)

    def flush(self) -> None:
        """Flush the writer, where it can."""
        if hasattr(self._writer, "flush"):
            self._writer.flush()

    def close(self) -> None:
        """Close the writer."""
        self._writer.close()

    def __enter__(self) -> PickleDatasetWriter:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class _PathWriter(PickleDatasetWriter):
    """The writer of open_pickle_dataset_writer: nothing appears at the path before close().

    The first example is preceded by a begin marker and the last by an end
    marker with the count (no-op opcodes, see ``_pickle_scan``), so a reader
    tells a file cut after a whole example from a complete one. The last
    example is held in memory until the next ``write`` or ``close``, since only
    then is it known whether it is the last.
    """

    def __init__(self, writer: _files.AtomicFile, protocol: int) -> None:
        super().__init__(writer, protocol)
        self._atomic = writer  # the same writer, with closed and abort()
        self._count = 0
        self._pending: bytes | None = None

    def write(self, example: Any) -> None:
        """Append one example."""
        data = pickle.dumps(example, protocol=self._protocol)
        self._write_pending(b"")
        self._pending = data
        self._count += 1

    def _write_pending(self, marker: bytes) -> None:
        if self._pending is not None:
            self._writer.write((BEGIN if self._count == 1 else b"") + marker + self._pending)
            self._pending = None

    def close(self) -> None:
        """Write the last example with the end marker, then publish the file."""
        if not self._atomic.closed:
            self._write_pending(end_marker(self._count))
        self._atomic.close()

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self._atomic.abort()


class _PathReader:
    """Reads a file by path, reopened in each process (never a handle shared by a fork)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: io.BufferedReader | None = None
        self._pid: int | None = None
        self._closed = False

    def _handle(self) -> io.BufferedReader:
        if self._closed:
            raise ValueError(f"I/O on a closed pickle dataset ({self.path})")
        if self._pid != os.getpid():
            self._file, self._pid = open(self.path, "rb"), os.getpid()  # noqa: SIM115
        assert self._file is not None  # set together with _pid
        return self._file

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._handle().seek(offset, whence)

    def tell(self) -> int:
        return self._handle().tell()

    def read(self, n: int = -1) -> bytes:
        return self._handle().read(n)

    def readline(self) -> bytes:
        return self._handle().readline()

    def readinto(self, buffer: Any) -> int:
        return self._handle().readinto(buffer)

    def peek(self, n: int = 0) -> bytes:
        return self._handle().peek(n)

    def close(self) -> None:
        if self._file is not None and self._pid == os.getpid():
            self._file.close()
        self._closed = True

    def __getstate__(self) -> dict:
        return {"path": self.path, "_file": None, "_pid": None, "_closed": self._closed}


class PickleDataset(DatasetMixin):
    """Examples stored as consecutive pickles in a seekable binary reader.

    .. warning:: Reading an example unpickles it, and unpickling runs code
       that the file names: use only files from a source you trust.
       Constructing the dataset unpickles nothing.

    The reader is scanned once for where each pickle starts, by walking
    pickle opcodes without unpickling them. Opened with
    :func:`open_pickle_dataset`, the file is reopened in each worker process
    and the dataset pickles as its path.

    Args:
        reader: a seekable binary reader.

    Raises:
        ValueError: if the reader cannot seek.
        ValueError: if the data ends inside an example or holds bytes that
            are not pickles, naming the offset; (on access) if an example
            cannot be unpickled, whatever the unpickler raised (chained as
            the cause), or ends elsewhere than where the scan found its end,
            naming the file and the offset. A ``MemoryError`` is left as it is.
    """

    def __init__(self, reader: Any) -> None:
        if not reader.seekable():
            raise ValueError("reader must support random access (seek), got one that does not")
        self._reader = reader
        # Scan the real file, not the per-process wrapper: one call less per opcode.
        source = reader._handle() if isinstance(reader, _PathReader) else reader
        name = reader.path if isinstance(reader, _PathReader) else getattr(reader, "name", reader)
        self._name = str(name)
        size = self._size = source.seek(0, os.SEEK_END)
        self._positions = pickle_offsets(source, size, self._name)
        check_end(source, self._positions, size, self._name)
        self._lock = threading.RLock()

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _lock=threading.RLock())

    def __len__(self) -> int:
        return len(self._positions)

    def get_example(self, i: int) -> Any:
        k = range(len(self._positions))[i]  # a negative i counts from the end, as for a list
        start = self._positions[k]
        end = self._positions[k + 1] if k + 1 < len(self._positions) else self._size
        with self._lock:
            self._reader.seek(start)
            try:
                example = pickle.load(self._reader)
            except MemoryError:
                raise  # a whole example too big for memory: the scan bounds damaged lengths
            except Exception as error:  # noqa: BLE001 - damaged bytes make it raise anything
                # (UnicodeDecodeError, OverflowError, TypeError from a damaged REDUCE, ...)
                raise TruncatedPickleError(
                    f"pickle dataset {self._name}: example {i} at offset {start} cannot be "
                    f"unpickled ({type(error).__name__}: {error}); the file is corrupt, or the "
                    f"example needs code this process cannot run") from error
            stopped = self._reader.tell()
        if stopped != end:  # a damaged frame length made the unpickler read past its pickle
            raise TruncatedPickleError(
                f"pickle dataset {self._name}: example {i} at offset {start} was unpickled up to "
                f"offset {stopped}, but its pickle ends at offset {end}; the file is corrupt")
        return example

    def close(self) -> None:
        """Close the reader."""
        with self._lock:
            self._reader.close()

    def __enter__(self) -> PickleDataset:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def open_pickle_dataset(path: str | os.PathLike) -> PickleDataset:
    """Open a file written by :func:`open_pickle_dataset_writer` as a dataset.

    .. warning:: Reading an example unpickles it, and unpickling runs code
       that the file names: open only files from a source you trust. Opening
       unpickles nothing; it walks the file's pickle opcodes to find where each
       example starts.

    Args:
        path: the file.

    Returns:
        The dataset; close it (or use ``with``) when done.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        IsADirectoryError: if ``path`` is a directory.
        ValueError: if the file ends inside an example or holds bytes that
            are not pickles, naming the offset.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"pickle dataset {path} is a directory, not a file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"pickle dataset {path} does not exist")
    return PickleDataset(_PathReader(path))


def open_pickle_dataset_writer(path: str | os.PathLike,
                               protocol: int = pickle.HIGHEST_PROTOCOL) -> PickleDatasetWriter:
    """Open a writer of a pickle dataset file; the file appears complete on ``close()``.

    .. warning:: Whoever reads the file unpickles it, which runs code the file
       names; share pickle datasets only with readers who trust you, and read
       only those from a source you trust.

    Examples are written under a temporary name beside ``path``, which is
    fsynced and renamed into place on a clean ``close()`` (or the end of a
    ``with`` block); a writer that fails inside ``with`` leaves nothing.

    Args:
        path: the file to write.
        protocol: the pickle protocol.

    Returns:
        The writer.
    """
    return _PathWriter(_files.AtomicFile(os.fspath(path)), protocol)
