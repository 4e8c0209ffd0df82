"""Chunk files kept open for ``pread``, fewer than the process's descriptor limit allows.

A shuffled epoch touches every chunk of a cache in every batch; keeping the
recently read ones open saves an ``open`` per chunk and batch, but one
descriptor per chunk would fail with ``EMFILE`` once a cache has more chunks
than ``RLIMIT_NOFILE``. :class:`OpenChunks` keeps at most a quarter of the
limit (read again at every open, since a process may lower it) and gives
its own back when the process runs out anyway.
"""

from __future__ import annotations

import errno
import os
import resource
from collections import OrderedDict

from dataset_kit.formats.nnabla_cache._npy_chunk import CacheFormatError, Chunk, identity

# At most this many, and at most a quarter of RLIMIT_NOFILE, so that the rest of the
# process (sockets, workers' pipes, other readers) keeps its share.
_MAX_OPEN_CHUNKS = 256
_FD_SHARE = 4


def changed(path: str, cache_dir: str) -> str:
    """The message for a chunk file (its full path) that is not the one the reader scanned."""
    return (f"{path} changed after the reader opened the cache {cache_dir} (copied over, "
            f"truncated or rebuilt by another process); open the cache again to read it")


class _Fd:
    """An open chunk file, closed when the last user drops it.

    The LRU drops its reference on eviction while another thread may still be
    reading: the descriptor stays valid until that read is done, and its number
    is never reused under a reader.
    """

    __slots__ = ("fd",)

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))

    def __del__(self) -> None:
        fd = getattr(self, "fd", None)  # unset when the open failed
        if fd is not None:
            os.close(fd)


class OpenChunks:
    """The most recently read chunk files, at most a quarter of RLIMIT_NOFILE of them.

    No lock: each OrderedDict operation is atomic under the GIL, and a race
    only costs an extra open or an early close, never a wrong file.
    """

    def __init__(self) -> None:
        self._fds: OrderedDict[int, _Fd] = OrderedDict()

    def get(self, k: int, path: str, chunk: Chunk) -> _Fd:
        """Chunk ``k``'s open file (at ``path``), checked to be the file scanned as ``chunk``.

        Raises:
            CacheFormatError: if the file cannot be opened or is another file now.
            OSError: ``EMFILE`` if the process has no descriptor left even after
                this object closed all of its own.
        """
        handle = self._fds.get(k)
        if handle is not None:
            try:
                self._fds.move_to_end(k)
            except KeyError:
                pass
            return handle
        limit = _fd_budget()
        while len(self._fds) >= limit:
            try:
                self._fds.popitem(last=False)
            except KeyError:
                break
        try:
            handle = _Fd(path)
        except OSError as error:
            if error.errno not in (errno.EMFILE, errno.ENFILE):
                raise CacheFormatError(f"{path} cannot be opened ({error})") from error
            self.clear()  # our share of descriptors, back to the process
            try:
                handle = _Fd(path)
            except OSError as again:
                raise OSError(again.errno, f"cannot open the cache chunk {path}: "
                              f"{again.strerror} (the process may open "
                              f"{_soft_limit()} files)") from again
        if identity(os.fstat(handle.fd)) != chunk.identity:
            raise CacheFormatError(changed(path, os.path.dirname(path)))
        self._fds[k] = handle
        return handle

    def clear(self) -> None:
        """Drop every open file (each closes once no read holds it)."""
        self._fds.clear()


def _soft_limit() -> int:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def _fd_budget() -> int:
    """How many chunk files may stay open, read again at every open (the limit may change)."""
    return max(1, min(_MAX_OPEN_CHUNKS, _soft_limit() // _FD_SHARE))
