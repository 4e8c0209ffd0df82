"""How a worker learns that its parent died, or wants it gone: a lifeline only the main
process holds.

The main process keeps the write end of a pipe; each worker watches the read
end from a thread. When the main process dies, for any reason and under any
start method, the kernel closes its end and every worker sees end-of-file
within milliseconds, whatever its main thread is doing (building a batch,
blocked sending one, or idle). Comparing ``os.getppid()`` with the main pid
does not work: under ``forkserver`` the parent is the fork server.

The same thread is how the main process stops its workers at once: it writes
one byte per worker, and each watcher reads exactly one. A message on the
worker's own pipe would wait behind the batch the worker is building, which
nobody wants once the iterator is finalized (Chainer's finalize terminates
its pool for the same reason).

A forked child inherits copies of every descriptor of its parent, and a copy
of the lifeline's write end (or of the main process's end of a worker's
socket) held by any child would keep it open after the main process dies.
So descriptors that only the main process may hold are registered here, and
every child forked from this process points them at ``/dev/null`` before it
runs any other code (``os.register_at_fork``). ``/dev/null`` rather than
``close``: objects in the child's copy of memory still name those numbers,
and closing one later must not close an unrelated file.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

_parent_only: set[int] = set()
_STOP = b"s"
# More stops than that could fill the pipe's buffer (64 KiB on Linux, 4 KiB at least).
_MOST_STOPS = 4096


def keep_from_children(fd: int) -> None:
    """Register ``fd`` as one that no forked child may keep open."""
    _parent_only.add(fd)


def release(fd: int) -> None:
    """Forget ``fd`` (call it before closing the descriptor)."""
    _parent_only.discard(fd)


def _drop_parent_only_fds() -> None:
    if not _parent_only:
        return
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in list(_parent_only):
            try:
                os.dup2(devnull, fd, inheritable=False)
            except OSError:
                pass
    finally:
        os.close(devnull)
    _parent_only.clear()


os.register_at_fork(after_in_child=_drop_parent_only_fds)


class Lifeline:
    """The main process's end of a pool's lifeline, and the end to hand to workers.

    Attributes:
        child_end: the read end; pass it to each worker process.
    """

    def __init__(self, context: Any) -> None:
        self.child_end, self._parent_end = context.Pipe(duplex=False)
        keep_from_children(self._parent_end.fileno())

    def stop(self, n_workers: int) -> None:
        """Tell up to ``n_workers`` watching workers to exit now (see :func:`watch_parent`)."""
        if not self._parent_end.closed and n_workers > 0:
            # Far below the pipe's buffer, so the write never blocks.
            os.write(self._parent_end.fileno(), _STOP * min(n_workers, _MOST_STOPS))

    def cut(self) -> None:
        """Close both ends here: any worker still alive sees end-of-file. Idempotent."""
        if not self._parent_end.closed:
            release(self._parent_end.fileno())
            self._parent_end.close()
        if not self.child_end.closed:
            self.child_end.close()


def watch_parent(child_end: Any, on_parent_death: Callable[[], None],
                 on_stop: Callable[[], None]) -> threading.Thread:
    """Call ``on_parent_death()`` or ``on_stop()`` from a daemon thread, whichever comes.

    Args:
        child_end: the lifeline's read end, as the worker received it.
        on_parent_death: runs when the lifeline is cut (the main process is
            gone, or closed it); it is expected to end the process.
        on_stop: runs when the main process asks its workers to stop
            (:meth:`Lifeline.stop`); it is expected to end the process.

    Returns:
        The started watcher thread.
    """
    def watch() -> None:
        try:
            # One byte, never more: the other workers' stops stay in the pipe.
            got = os.read(child_end.fileno(), 1)
        except OSError:
            got = b""
        if got == _STOP:
            on_stop()
        else:
            on_parent_death()

    thread = threading.Thread(target=watch, name="dataset_kit-lifeline", daemon=True)
    thread.start()
    return thread
