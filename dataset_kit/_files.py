"""Durable file writing: what makes a cached file complete once it has a name."""

from __future__ import annotations

import os
import threading
from typing import Any


def fsync_directory(directory: str) -> None:
    """Make a rename in ``directory`` durable (where directories can be fsynced)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def unique_temp(path: str) -> str:
    """A temporary name beside ``path``, unique to this process and call."""
    return f"{path}.{os.getpid()}-{os.urandom(4).hex()}.part"


class BackgroundFlush:
    """Flush written data to disk in a helper thread while the transfer goes on.

    The file must be on disk before it is renamed into the cache; syncing as we
    go overlaps the disk with the network, so the final fsync has little left.
    """

    EVERY = 32 << 20

    def __init__(self, out: Any) -> None:
        self._out = out
        self._pending = 0
        self._wake = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=self._run, name="dataset_kit-flush", daemon=True)

    def __enter__(self) -> BackgroundFlush:
        self._thread.start()
        return self

    def wrote(self, n: int) -> None:
        self._pending += n
        if self._pending >= self.EVERY:
            self._pending = 0
            self._out.flush()
            self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._done:
                return
            try:
                os.fdatasync(self._out.fileno())
            except (OSError, ValueError):
                return  # the final fsync in the caller reports real failures

    def __exit__(self, *exc_info: Any) -> None:
        self._done = True
        self._wake.set()
        self._thread.join()
