"""A record file opened for reading: positional reads (``pread``), never a memory map.

A memory-mapped file that someone truncates in place (``cp`` or ``rsync
--inplace`` over a live ``.rec``) kills the reader with SIGBUS, and no
check can close the window between a size check and the page access. A
``pread`` past the new end just returns fewer bytes, so the shrink becomes
an error naming the file. ``benchmarks/recordio.py`` measures the cost.

``pread`` needs no shared file position, so one source serves many threads
and forked children. Pickling keeps the path and the file's identity;
unpickling reopens the path and refuses a file that was replaced since.
"""

from __future__ import annotations

import os
import stat
import weakref
from typing import Any

from dataset_kit.formats.recordio._format import RecordIOError

# Small reads pull in this much, so small records cost one system call per window.
WINDOW = 64 << 10
# A payload this large is read on its own, into the bytes object that is returned (one copy).
DIRECT = 16 << 10


def open_record_file(path: str) -> int:
    """Open ``path`` read-only; return the descriptor.

    Raises:
        FileNotFoundError: if it does not exist.
        IsADirectoryError: if it is a directory.
        RecordIOError: if it is not a regular file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise FileNotFoundError(f"record file {path} does not exist") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(f"record file {path} is a directory, not a file")
        raise RecordIOError(f"record file {path} is not a regular file")
    return fd


class RecordSource:
    """Positional reads of one open record file, checked against its size at open.

    Args:
        path: the file's path (for errors, and to reopen after unpickling).
        fd: an open descriptor of it; the source owns and closes it.
        identity: ``(device, inode, size, mtime_ns)`` it must have, or None.

    Raises:
        RecordIOError: if ``identity`` is given and the file is another one.
    """

    def __init__(self, path: str, fd: int, identity: tuple | None = None) -> None:
        st = os.fstat(fd)
        self.path = path
        self.size = st.st_size
        self.identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if identity is not None and tuple(identity) != self.identity:
            os.close(fd)
            raise RecordIOError(f"{path} was replaced or changed since it was opened (its index "
                                f"belongs to the old file); open it again")
        self._fd = fd
        self._window: tuple[int, bytes] = (0, b"")
        self._close = weakref.finalize(self, os.close, fd)

    def read(self, offset: int, n: int, ahead: int = WINDOW) -> memoryview:
        """Return ``n`` bytes at ``offset``, reading at least ``ahead`` bytes when it must read.

        Raises:
            RecordIOError: if the file is shorter than it was when opened.
            ValueError: if the source is closed.
        """
        start, window = self._window  # one tuple: safe to read while another thread replaces it
        if start <= offset and offset + n <= start + len(window):
            return memoryview(window)[offset - start:offset - start + n]
        if not self._close.alive:
            raise ValueError(f"record file {self.path} is closed")
        want = max(n, min(ahead, self.size - offset))
        data = os.pread(self._fd, want, offset)
        if len(data) < n:
            raise self._shrank(offset, n, len(data))
        self._window = (offset, data)
        return memoryview(data)[:n] if len(data) != n else memoryview(data)

    def pread(self, offset: int, n: int) -> bytes:
        """Return ``n`` bytes at ``offset``, read straight into the bytes returned (no window).

        What a large record's payload needs: one system call, one copy.

        Raises:
            RecordIOError: if the file is shorter than it was when opened.
            ValueError: if the source is closed.
        """
        if not self._close.alive:
            raise ValueError(f"record file {self.path} is closed")
        data = os.pread(self._fd, n, offset)
        if len(data) < n:
            raise self._shrank(offset, n, len(data))
        return data

    def _shrank(self, offset: int, n: int, got: int) -> RecordIOError:
        return RecordIOError(
            f"{self.path} shrank under the reader: it had {self.size} bytes when opened, but "
            f"only {got} of the {n} bytes at offset {offset} are left (was it overwritten in "
            f"place, e.g. by cp or rsync --inplace?)")

    def close(self) -> None:
        """Close the descriptor. Idempotent."""
        self._close()
        self._window = (0, b"")

    def __getstate__(self) -> dict:
        return {"path": self.path, "identity": self.identity}

    def __setstate__(self, state: dict) -> None:
        type(self).__init__(self, state["path"], open_record_file(state["path"]),
                            state["identity"])


def as_bytes(view: memoryview) -> bytes:
    """``bytes(view)``, without a copy when the view spans a whole bytes object."""
    obj: Any = view.obj
    if type(obj) is bytes and view.nbytes == len(obj):
        return obj
    return bytes(view)
