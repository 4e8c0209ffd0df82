"""Joining stopped workers off the caller's thread.

``finalize()`` returns once every worker has said it stopped (see
``ProcessPool._stop_workers``); the kernel then still tears its memory down,
which for a worker of a large process takes milliseconds. Left alone, such a
worker would stay a zombie until multiprocessing next starts a process, and
its CPU time would be missing from ``getrusage(RUSAGE_CHILDREN)``. So one
daemon thread per process joins them as they exit (and kills any that has
not exited a second after saying it stopped).
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any

# How long a worker that said it stopped may take to exit before it is killed.
EXIT_SECONDS = 1.0


class Reaper:
    """The thread that joins stopped worker processes, started on first use."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def _own(self) -> None:
        # A forked child has the parent's queue but not its thread: start afresh.
        if self._pid != os.getpid():
            self._reset()

    def reap(self, process: Any) -> None:
        """Join ``process`` (a stopping :class:`multiprocessing.Process`) in the background."""
        self._own()
        with self._lock:
            self._queue.put(process)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dataset_kit-reaper",
                                                daemon=True)
                self._thread.start()

    def drain(self) -> None:
        """Wait until every process handed over so far (in this process) has been joined."""
        self._own()
        with self._lock:
            if self._thread is None:
                return  # nothing was ever handed over
            done = threading.Event()
            self._queue.put(done)
        done.wait()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            item.join(EXIT_SECONDS)
            if item.exitcode is None:
                item.kill()
                item.join(5)


reaper = Reaper()
