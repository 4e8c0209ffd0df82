"""Record files (MXNet's ``.rec``) and their indexes (``.idx``): readers and writers.

Writers stage their files under private names and publish them together (the
``.rec`` and its ``.idx`` as one unit, see ``_publish``) when the writer is
closed, leaves a ``with`` block normally, is garbage collected (``del writer``,
as MXNet users do) or is open at a normal exit. A crash, a ``with`` block left
by an exception, or an interpreter that exits on an unhandled exception
publishes nothing. Readers open the pair under its lock, check that the index
fits the file, and read with ``pread``: a file truncated under them is an error,
never a SIGBUS.
"""

from __future__ import annotations

import atexit
import operator
import os
import shutil
import sys
import weakref
from array import array
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any, TypeVar

from dataset_kit import _files
from dataset_kit.formats.recordio import _publish
from dataset_kit.formats.recordio._format import (
    RecordIOError,
    check_start,
    frame,
    parse,
    read_whole,
)
from dataset_kit.formats.recordio._index import check_pair, read_index, span
from dataset_kit.formats.recordio._source import (
    DIRECT,
    WINDOW,
    RecordSource,
    as_bytes,
    open_record_file,
)

_exit = {"hooked": False, "exiting": False}


def _note_exit() -> None:
    _exit["exiting"] = True


def _ended_by_exception() -> bool:
    """Whether the interpreter is exiting because of an unhandled exception (a crash)."""
    return _exit["exiting"] and (getattr(sys, "last_exc", None) is not None
                                 or getattr(sys, "last_value", None) is not None)


_open: weakref.WeakSet = weakref.WeakSet()


def _flush_before_fork() -> None:
    # A child that inherits a writer must not write its copy of our buffer into the file.
    for staged in list(_open):
        if not staged.file.closed:
            staged.file.flush()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_flush_before_fork)


class _Staged:
    """The files a writer has staged; published or discarded once (also from a finalizer)."""

    def __init__(self, rec_path: str, idx_path: str | None) -> None:
        self.rec_path, self.idx_path = os.path.abspath(rec_path), idx_path
        self.temp = _files.staging_file(rec_path)
        self.file = open(self.temp, "wb")  # noqa: SIM115 - closed by publish() or discard()
        self.lines: list[str] = []
        self.pid = os.getpid()
        _open.add(self)

    def publish(self) -> None:
        if self.file.closed:
            return
        moves = [(self.temp, self.rec_path)]
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            if self.idx_path is not None:
                moves.append((_files.staging_file(self.idx_path),
                              os.path.abspath(self.idx_path)))
                with open(moves[1][0], "w") as f:
                    f.writelines(self.lines)
                    f.flush()
                    os.fsync(f.fileno())
        except BaseException:
            _close_quietly(self.file)
            for staged, _ in moves:
                shutil.rmtree(os.path.dirname(staged), ignore_errors=True)
            raise
        _publish.publish(self.rec_path, moves)

    def discard(self) -> None:
        if not self.file.closed:
            _close_quietly(self.file)
            shutil.rmtree(os.path.dirname(self.temp), ignore_errors=True)

    def finish(self) -> None:
        """Publish, unless the interpreter is going down on an unhandled exception."""
        if os.getpid() != self.pid:
            return  # a forked child's copy of the writer: the parent owns the files
        if _ended_by_exception():
            self.discard()
        else:
            self.publish()


def _close_quietly(file: Any) -> None:
    """Close a staging file that is being discarded: a failed flush (ENOSPC) no longer matters."""
    try:
        file.close()
    except OSError:
        if not file.closed:  # pragma: no cover - CPython marks it closed even when flush fails
            raise


_Writer = TypeVar("_Writer", bound="RecordWriter")
_Reader = TypeVar("_Reader", bound="RecordReader")


class RecordWriter:
    """Writes records one after another (MXNet's ``MXRecordIO(path, 'w')``).

    The file appears at ``path`` when the writer is closed, leaves a ``with``
    block without an exception, is garbage collected, or is still open at a
    normal interpreter exit; never half written. A ``with`` block left by an
    exception, an exit on an unhandled exception, or a crash publishes nothing.

    Args:
        path: the ``.rec`` file.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._staged = self._stage()
        self._finalizer = weakref.finalize(self, self._staged.finish)
        if not _exit["hooked"]:
            # Registered after weakref's own exit hook exists, so it runs first (LIFO).
            atexit.register(_note_exit)
            _exit["hooked"] = True

    def _stage(self) -> _Staged:
        return _Staged(self.path, None)

    def write(self, buf: bytes) -> None:
        """Append one record.

        Raises:
            ValueError: if the writer is closed or the record is too long.
            RuntimeError: in a forked child: the parent owns the files.
        """
        if self._staged.file.closed:
            raise ValueError(f"record writer for {self.path} is closed")
        if os.getpid() != self._staged.pid:
            # The child's copy of the staging file shares the parent's file offset.
            raise RuntimeError(f"record writer for {self.path} was opened in process "
                               f"{self._staged.pid}; a forked child cannot write to it")
        self._staged.file.write(frame(buf))

    def tell(self) -> int:
        """The offset the next record will be written at."""
        return self._staged.file.tell()

    def close(self) -> None:
        """Finish the file(s) and publish them. Idempotent."""
        self._finalizer.detach()
        self._staged.publish()

    def abort(self) -> None:
        """Discard what was written; nothing appears at the path. Idempotent."""
        self._finalizer.detach()
        self._staged.discard()

    def __enter__(self: _Writer) -> _Writer:
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class RecordReader:
    """Reads records in order (MXNet's ``MXRecordIO(path, 'r')``).

    Args:
        path: the ``.rec`` file.
        copy: False makes :meth:`read` and iteration give read-only views for
            one-part records (of a buffer read ahead; no second copy).

    Raises:
        FileNotFoundError: if it does not exist.
        IsADirectoryError: if it is a directory.
    """

    def __init__(self, path: str | os.PathLike, copy: bool = True) -> None:
        self.path = os.fspath(path)
        with _publish.locked_pair(self.path):
            _publish.remove_debris([self.path])
            self._source = RecordSource(self.path, open_record_file(self.path))
        self._offset = 0
        self._last = 0  # the size of the record read last
        self._copy = bool(copy)

    def read(self) -> bytes | memoryview | None:
        """Return the next record, or None at the end.

        Raises:
            RecordIOError: for a truncated or corrupt file, naming it and the offset.
        """
        source = self._source
        if self._offset >= source.size:
            return None
        # After a large record, expect another: read its header alone, then its payload whole.
        read = partial(source.read, ahead=8 if self._last >= DIRECT else WINDOW)
        record, after = parse(read, self._offset, source.size, self.path)
        self._last, self._offset = after - self._offset, after
        return _result(record, self._copy)

    def tell(self) -> int:
        """The offset of the next record."""
        return self._offset

    def seek(self, offset: int) -> None:
        """Continue reading at ``offset`` (a value :meth:`tell` returned).

        Raises:
            TypeError: if ``offset`` is not an integer.
            RecordIOError: if no record starts at ``offset`` (outside the file,
                not 4-byte aligned, no record header there), naming the file
                and the offset; the position is then unchanged.
        """
        try:
            position = operator.index(offset)
        except TypeError:
            raise TypeError(f"offset must be an integer, got {offset!r}") from None
        source = self._source
        check_start(partial(source.read, ahead=8 if self._last >= DIRECT else WINDOW), position,
                    source.size, self.path)
        self._offset = position

    def reset(self) -> None:
        """Go back to the first record."""
        self._offset = 0

    def __iter__(self) -> Iterator[bytes | memoryview]:
        while (record := self.read()) is not None:
            yield record

    def close(self) -> None:
        """Close the file. Idempotent."""
        self._source.close()

    def __enter__(self: _Reader) -> _Reader:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def _result(record: bytes | memoryview | None, copy: bool) -> Any:
    if isinstance(record, memoryview):
        return as_bytes(record) if copy else record
    return record


class IndexedRecordWriter(RecordWriter):
    """Writes records with keys, and the ``.idx`` index of their offsets.

    Both files appear together (see :class:`RecordWriter` for when).

    Args:
        idx_path: the index file (``key<TAB>offset`` lines).
        rec_path: the record file.
        key_type: the keys' type (``int`` by default).
    """

    def __init__(self, idx_path: str | os.PathLike, rec_path: str | os.PathLike,
                 key_type: type = int) -> None:
        self.idx_path = os.fspath(idx_path)
        self.key_type = key_type
        self.keys: list = []
        super().__init__(rec_path)

    def _stage(self) -> _Staged:
        return _Staged(self.path, self.idx_path)

    def write_idx(self, key: Any, buf: bytes) -> None:
        """Append a record under ``key``."""
        key = self.key_type(key)
        line = f"{key}\t{self.tell()}\n"
        self.write(buf)
        self._staged.lines.append(line)
        self.keys.append(key)


class _ScannedIndex(Mapping):
    """``{position: offset}`` of a file indexed by scanning (keys 0, 1, ...), 8 bytes a record."""

    def __init__(self, offsets: array) -> None:
        self._offsets = offsets

    def __getitem__(self, key: Any) -> int:
        if isinstance(key, int) and 0 <= key < len(self._offsets):
            return self._offsets[key]
        raise KeyError(key)

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self._offsets)))

    def __len__(self) -> int:
        return len(self._offsets)


class IndexedRecordReader(RecordReader):
    """Random access to records by key (MXNet's ``MXIndexedRecordIO(idx, rec, 'r')``).

    It also reads in order from where :meth:`read_idx` or :meth:`seek` left
    it (:meth:`read`, :meth:`tell`, :meth:`reset`), as MXNet's does.

    Args:
        idx_path: the index file, or None to index the records by scanning
            the file once (keys 0, 1, ...).
        rec_path: the record file.
        key_type: the keys' type (``int`` by default).

    Raises:
        FileNotFoundError: if a file does not exist.
        RecordIOError: if an index line is malformed or a key repeats (naming
            the file and line), if the index does not fit the record file
            (naming both), or, when scanning, if the file is corrupt.
    """

    def __init__(self, idx_path: str | os.PathLike | None, rec_path: str | os.PathLike,
                 key_type: type = int) -> None:
        self.path = os.fspath(rec_path)
        self.key_type = key_type
        self.idx_path = f"{self.path} (scanned)" if idx_path is None else os.fspath(idx_path)
        with _publish.locked_pair(self.path):
            _publish.remove_debris([self.path] + ([self.idx_path] if idx_path else []))
            source = RecordSource(self.path, open_record_file(self.path))
            try:
                data = None if idx_path is None else _read_index_file(self.idx_path)
            except BaseException:
                source.close()
                raise
        self._source = source
        self._offset = self._last = 0
        self._copy = True
        try:
            if data is None:
                offsets = _scan(source)
                self.keys: Any = range(len(offsets))
                self.idx: Mapping = _ScannedIndex(offsets)
                self._ordered: Any = offsets
            else:
                self.keys, self.idx = read_index(data, self.idx_path, key_type)
                self._ordered = check_pair(self.idx, source.size, source.read, self.idx_path,
                                           self.path)
        except BaseException:
            source.close()
            raise

    def __len__(self) -> int:
        return len(self.keys)

    def read_idx(self, key: Any, copy: bool = True) -> bytes | memoryview:
        """Return the record stored under ``key``; :meth:`read` goes on after it.

        Args:
            key: the key.
            copy: False returns a read-only view for a one-part record (no
                second copy).

        Raises:
            KeyError: if ``key`` is not in the index.
            RecordIOError: if the index does not point at a record, or the
                file shrank since it was opened, naming the file, the offset
                and the key.
        """
        offset = self.idx[self.key_type(key)]
        source = self._source
        ahead = span(self._ordered, offset, source.size)
        self._last = ahead
        try:
            if ahead > DIRECT:
                # A large record: its header, then its payload straight into the bytes
                # returned (two preads, one copy; measured in benchmarks/recordio.py).
                whole = read_whole(source.pread, offset, ahead)
                if whole is not None:
                    self._offset = offset + ahead
                    return whole if copy else memoryview(whole)
            # A small record comes in one read (and anything odd is parsed in full).
            record, self._offset = parse(
                partial(source.read, ahead=ahead if ahead <= DIRECT else 8), offset,
                source.size, self.path, end=offset + ahead)
        except RecordIOError as error:
            raise RecordIOError(f"{error} (key {key!r} in {self.idx_path})") from None
        return _result(record, copy)


def _read_index_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"index file {path} does not exist") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"index file {path} is a directory, not a file") from None


def _scan(source: RecordSource) -> array:
    """The offset of every record, checking the framing (payloads are skipped, not read)."""
    offsets, position, last = array("q"), 0, 0
    while position < source.size:
        offsets.append(position)
        # Past a large record the window would be wasted: read the next header alone.
        read = partial(source.read, ahead=8 if last >= DIRECT else WINDOW)
        _, after = parse(read, position, source.size, source.path, payload=False)
        last, position = after - position, after
    return offsets
