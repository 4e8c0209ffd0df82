"""The shards one process keeps open, shared safely by every thread that reads them.

A :class:`StreamingDataset` keeps its last few shards mapped between reads
(``open_shards``). Several threads read one dataset (the thread executor), so
a shard leaving that table may still be read by another thread: it is only
*retired* then, and closed when its last reader lets go. The lock guards the
table and the reader counts only: no read, open or download happens under
it, so readers of different (or the same) shards never wait for each other.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from types import TracebackType

from dataset_kit._checks import positive_int
from dataset_kit.filecache import CacheFullError
from dataset_kit.formats.shards._layout import OpenedShard


class Hold:
    """One shard held open for reading: use it as ``with held as shard_file: ...``.

    The shard stays open until the ``with`` block ends, even if the table
    let it go meanwhile.
    """

    __slots__ = ("file", "readers", "retired", "_owner")

    def __init__(self, owner: OpenShards, file: OpenedShard) -> None:
        self.file, self.readers, self.retired, self._owner = file, 1, False, owner

    def __enter__(self) -> OpenedShard:
        return self.file

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._owner.release(self)


class OpenShards:
    """At most ``limit`` shards kept open (least recently used let go first), plus those in use.

    Args:
        limit: shards kept open between reads.
        opener: opens shard number ``n`` (downloading it if needed); may raise
            :class:`CacheFullError` when the cache has no room.
        reopen: returns shard ``n`` mapped from the cache once it is published
            there, else None (a shard first read from its downloaded bytes in
            memory is then mapped instead, and the memory freed).

    Raises:
        TypeError, ValueError: if ``limit`` is not a positive integer.
    """

    def __init__(self, limit: int, opener: Callable[[int], OpenedShard],
                 reopen: Callable[[int], OpenedShard | None]) -> None:
        self.limit = positive_int("open_shards", limit)
        self._opener, self._reopen = opener, reopen
        self._fresh()

    def _fresh(self) -> None:
        # A forked child gets a new table and lock: the parent's descriptors
        # are the parent's, and its lock may have been held by a thread that
        # the child does not have.
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._table: OrderedDict[int, Hold] = OrderedDict()

    def hold(self, shard: int) -> Hold:
        """Return shard number ``shard`` held open; the caller releases it (``with``).

        Raises:
            The opener's errors (a download's, :class:`CacheFullError`, ...).
        """
        if self._pid != os.getpid():
            self._fresh()
        with self._lock:
            held = self._table.get(shard)
            if held is not None:
                held.readers += 1
                self._table.move_to_end(shard)
        if held is None:
            return self._open(shard)
        if held.file.in_memory:
            return self._map_published(shard, held)
        return held

    def release(self, held: Hold) -> None:
        """Let go of ``held``; it is closed if it was retired and this was its last reader."""
        with self._lock:
            held.readers -= 1
            last = held.retired and held.readers == 0
        if last:
            held.file.close()

    def close(self) -> int:
        """Let every shard go (closed now, or by its last reader); return how many there were."""
        with self._lock:
            idle = [self._retire(held) for held in self._table.values()]
            count = len(self._table)
            self._table.clear()
        _close(idle)
        return count

    def __len__(self) -> int:
        return len(self._table)

    def _retire(self, held: Hold) -> OpenedShard | None:
        """Mark ``held`` retired (under the lock); return its file if nobody reads it."""
        held.retired = True
        return held.file if held.readers == 0 else None

    def _shrink(self, keep: int) -> list[OpenedShard | None]:
        """Retire least recently used shards until ``keep`` are left (under the lock)."""
        idle = []
        while len(self._table) > keep:
            idle.append(self._retire(self._table.popitem(last=False)[1]))
        return idle

    def _open(self, shard: int) -> Hold:
        # Shards we hold open are in use for the cache, which never evicts
        # them: let one go before opening another, as the limit says.
        with self._lock:
            idle = self._shrink(self.limit - 1)
        _close(idle)
        try:
            opened = self._opener(shard)
        except CacheFullError:
            if not self.close():
                raise
            opened = self._opener(shard)  # our own open shards may be what filled the cache
        with self._lock:
            held = self._table.get(shard)
            if held is not None:  # another thread opened it meanwhile: read theirs
                held.readers += 1
                idle = [opened]
            else:
                held = self._table[shard] = Hold(self, opened)
                idle = self._shrink(self.limit)
        _close(idle)
        return held

    def _map_published(self, shard: int, held: Hold) -> Hold:
        """Swap ``held`` (read from memory) for the published file, if it is published now."""
        mapped = self._reopen(shard)
        if mapped is None:
            return held
        with self._lock:
            if self._table.get(shard) is not held:  # another thread swapped it first
                idle: list[OpenedShard | None] = [mapped]
            else:  # retired, and closed by its last reader (maybe us)
                held.retired = True
                held.readers -= 1
                idle = [held.file] if held.readers == 0 else []
                held = self._table[shard] = Hold(self, mapped)
        _close(idle)
        return held


def _close(files: list[OpenedShard | None]) -> None:
    for file in files:
        if file is not None:
            file.close()
