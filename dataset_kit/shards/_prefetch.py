"""Prefetching the shards the planned order needs next, in the background.

The engine owns the order; a :class:`~dataset_kit.shards.ShardOrderSampler`
computes it, as a pure function of ``(seed, epoch)``: blocks of shards in a
random order, every sample of a block before any of the next. Whenever the
engine asks it for an epoch's order, the sampler records itself on its
dataset's :class:`OrderPlan`. When the dataset then builds a batch (in the
main process or a worker), it knows the batch's epoch (from the iterator's
batch context) and its shards, hence its block, hence which shards come next:
the rest of the block, then the next blocks. That needs the shard permutation
only (a few integers per shard), never the sample order. :class:`Prefetcher`
threads download those into the shared cache, a few shards ahead, under the
same per-shard lock as every other download: processes never download a shard
twice.

The plan is shared, never copied: the engine deep-copies a sampler when it
loads a state into it, and that copy must still tell the dataset which order
it follows. Forked or spawned workers get the plan as it was when they
started (the engine plans epoch 0 before it starts them).
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

from dataset_kit.filecache import _handoff
from dataset_kit.shards._cache import ShardCache, cached_name


class OrderPlan:
    """Which order sampler the engine follows, and the shard blocks of its epochs."""

    def __init__(self) -> None:
        self.sampler: Any = None
        self._epochs: collections.OrderedDict[tuple[int, int], tuple] = collections.OrderedDict()
        self._lock = threading.Lock()

    def follow(self, sampler: Any) -> None:
        """Plan from ``sampler``'s orders from now on (called by the sampler in use)."""
        if sampler is not self.sampler:
            with self._lock:
                self.sampler = sampler
                self._epochs.clear()

    def _epoch(self, epoch: int) -> tuple | None:
        """``(blocks of shards in reading order, block of each shard)`` of ``epoch``."""
        sampler = self.sampler
        if sampler is None:
            return None
        key = (id(sampler), epoch)
        with self._lock:
            found = self._epochs.get(key)
        if found is None:
            blocks = sampler.blocks(epoch)
            block_of = {int(s): k for k, block in enumerate(blocks) for s in block}
            found = ([block.tolist() for block in blocks], block_of)
            with self._lock:
                self._epochs[key] = found
                while len(self._epochs) > 2:
                    self._epochs.popitem(last=False)
        return found

    def upcoming(self, epoch: int, shards: set[int]) -> tuple[Iterator[int], set[int]]:
        """Return the shards a reader of ``shards`` (of ``epoch``) needs from now on.

        Returns:
            ``(upcoming, block)``: an iterator over the shards of the current
            block that the batch does not touch, then those of the following
            blocks (into the next epoch), soonest first (lazy: a reader looks
            a few shards ahead, whatever the number of shards); and the
            current block's shards, which the reader needs until the block
            ends. Both empty when no sampler is followed.
        """
        planned = self._epoch(epoch)
        if planned is None or not shards:
            return iter(()), set()
        blocks, block_of = planned
        current = max(block_of[s] for s in shards)

        def walk() -> Iterator[int]:
            yield from (s for s in blocks[current] if s not in shards)
            for later in blocks[current + 1:]:
                yield from later
            following = self._epoch(epoch + 1)
            for later in following[0] if following is not None else []:
                yield from later

        return walk(), set(blocks[current])

    def __copy__(self) -> OrderPlan:
        return self  # shared by the dataset, the sampler and the engine's copies of it

    def __deepcopy__(self, memo: dict) -> OrderPlan:
        return self

    def __getstate__(self) -> dict:
        return {"sampler": self.sampler}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._epochs, self._lock = collections.OrderedDict(), threading.Lock()


class Prefetcher:
    """Daemon threads (per process) that download shards into ``cache`` ahead of use.

    The reader plans (a few shards ahead of its batch, so the work does not
    grow with the number of shards); the threads start only when a planned
    shard is missing from the cache, so a warm cache costs no thread. A newer
    request replaces the shards not yet started (the reader moved on). A
    prefetch never evicts the shards it was told to keep, nor one in use; if
    the cache has no other room, the shard is skipped, and the reader
    downloads it when it gets there (and reports any error then).

    Args:
        cache: the shard cache.
    """

    def __init__(self, cache: ShardCache) -> None:
        self._cache = cache
        self._pid = -1
        self._threads = 0

    def _ready(self) -> None:
        """Make this process's state (first use, or a forked child: threads do not survive fork)."""
        if self._pid == os.getpid():
            return
        with _handoff.MAKING:  # once, whichever threads of the process read first
            if self._pid != os.getpid():
                self._threads = 0
                self._wanted: list[int] = []
                self._keep: frozenset[str] = frozenset()
                self._wake = threading.Condition()
                self._pid = os.getpid()  # last: then the state above is whole

    def request(self, plan: OrderPlan, epoch: int, shards: set[int], batch: set[int],
                ahead: int, fit: int | None) -> None:
        """Download the ``ahead`` shards ``plan`` needs next after ``shards`` of ``epoch``.

        The current block's shards and the batch's are never evicted to make
        room, and with ``fit`` (shards the cache holds) no more are fetched
        than fit beside them.
        """
        self._ready()
        upcoming: Iterator[int] = iter(())
        block: set[int] = set()
        with contextlib.suppress(Exception):  # a plan it cannot make: no prefetch
            upcoming, block = plan.upcoming(epoch, shards)
        keep = block | batch  # the batch may reach into the epoch before
        room = ahead if fit is None else min(ahead, fit - len(keep))
        # The window: the next upcoming shards, all kept (cached ones too),
        # never more than fit beside the block's.
        window: list[int] = []
        for shard in upcoming:
            if len(window) >= room:
                break
            if shard not in keep and shard not in window:
                window.append(shard)
        wanted = [s for s in window if not os.path.exists(self._cache.path(s))]
        names = self._cache.manifest.shards
        with self._wake:
            self._wanted = wanted
            self._keep = frozenset(cached_name(names[s]) for s in keep | set(window))
            if wanted:
                self._wake.notify_all()
                # Two downloads at once overlap one's hashing with the other's
                # transfer; with a cache_limit one, so that a download of a stale
                # plan (reserved, not yet evictable) never leaves the current
                # plan without room.
                for _ in range((1 if self._cache.cache_limit is not None else 2)
                               - self._threads):
                    self._threads += 1
                    threading.Thread(target=self._run, daemon=True,
                                     name="shard-prefetch").start()

    def cancel(self) -> None:
        """Forget the shards not yet started (a download under way finishes)."""
        if self._pid == os.getpid():
            with self._wake:
                self._wanted = []

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._wanted:
                    self._wake.wait()
                shard, keep = self._wanted.pop(0), self._keep
            with contextlib.suppress(Exception):
                # The reader meets any real failure again, and raises it there.
                self._cache.fetch(shard, keep=keep)

    def __getstate__(self) -> dict:
        return {"_cache": self._cache, "_pid": -1, "_threads": 0}
