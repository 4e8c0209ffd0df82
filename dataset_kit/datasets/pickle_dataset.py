"""PickleDataset: examples pickled one after another in a file, read by offset."""

from __future__ import annotations

import os
import pickle
import threading
from typing import Any, BinaryIO

from dataset_kit import _files
from dataset_kit.dataset import DatasetMixin


class PickleDatasetWriter:
    """Appends examples to ``writer`` as consecutive pickles (Chainer's writer).

    Args:
        writer: a binary file-like object open for writing.
        protocol: the pickle protocol.
    """

    def __init__(self, writer: BinaryIO, protocol: int = pickle.HIGHEST_PROTOCOL) -> None:
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
    """The writer of open_pickle_dataset_writer: nothing appears at the path before close()."""

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self._writer.abort()


class _PathReader:
    """Reads a file by path, reopened in each process (never a handle shared by a fork)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: Any = None
        self._pid: int | None = None
        self._closed = False

    def _handle(self) -> BinaryIO:
        if self._closed:
            raise ValueError(f"I/O on a closed pickle dataset ({self.path})")
        if self._pid != os.getpid():
            self._file, self._pid = open(self.path, "rb"), os.getpid()  # noqa: SIM115
        return self._file

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int) -> int:
        return self._handle().seek(offset)

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

    The reader is scanned once for where each pickle starts. Unpickling runs
    code from the file: open only files you trust. Opened with
    :func:`open_pickle_dataset`, the file is reopened in each worker process
    and the dataset pickles as its path.

    Args:
        reader: a seekable binary reader.

    Raises:
        ValueError: if the reader cannot seek.
    """

    def __init__(self, reader: Any) -> None:
        if not reader.seekable():
            raise ValueError("reader must support random access (seek), got one that does not")
        self._reader = reader
        self._positions = []
        reader.seek(0)
        while True:
            position = reader.tell()
            try:
                pickle.load(reader)
            except EOFError:
                break
            self._positions.append(position)
        self._lock = threading.RLock()

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _lock=threading.RLock())

    def __len__(self) -> int:
        return len(self._positions)

    def get_example(self, i: int) -> Any:
        with self._lock:
            self._reader.seek(self._positions[i])
            return pickle.load(self._reader)

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

    Args:
        path: the file.

    Returns:
        The dataset; close it (or use ``with``) when done.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"pickle dataset {path} does not exist")
    return PickleDataset(_PathReader(path))


def open_pickle_dataset_writer(path: str | os.PathLike,
                               protocol: int = pickle.HIGHEST_PROTOCOL) -> PickleDatasetWriter:
    """Open a writer of a pickle dataset file; the file appears complete on ``close()``.

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
