"""Prefetching the shards the planned order needs next, in the background.

The engine owns the order; a :class:`~dataset_kit.shards.ShardOrderSampler`
computes it, as a pure function of ``(seed, epoch)``. Whenever the engine asks
it for an epoch's order, the sampler records itself on its dataset's
:class:`OrderPlan`. When the dataset then builds a batch (in the main process
or a worker), it knows the batch's epoch (from the iterator's batch context)
and its indices, so it can look up where the batch sits in that order and
which shards the order reaches next. A :class:`Prefetcher` thread downloads
those into the shared cache, a few shards ahead, under the same per-shard lock
as every other download: processes never download a shard twice.

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
from typing import Any

import numpy as np

from dataset_kit.shards._cache import ShardCache, cached_name


class OrderPlan:
    """Which order sampler the engine follows, and its orders as shard sequences.

    Args:
        starts: the first global index of each shard, then the total.
    """

    def __init__(self, starts: np.ndarray) -> None:
        self.sampler: Any = None
        self._starts = np.asarray(starts)
        self._epochs: collections.OrderedDict[tuple[int, int], tuple] = collections.OrderedDict()
        self._lock = threading.Lock()

    def follow(self, sampler: Any) -> None:
        """Plan from ``sampler``'s orders from now on (called by the sampler in use)."""
        if sampler is not self.sampler:
            with self._lock:
                self.sampler = sampler
                self._epochs.clear()

    def _epoch(self, epoch: int) -> tuple | None:
        """``(position of each index, shards by first use, their first positions)``."""
        sampler = self.sampler
        if sampler is None:
            return None
        key = (id(sampler), epoch)
        with self._lock:
            found = self._epochs.get(key)
        if found is not None:
            return found
        order = sampler.epoch_order(epoch, int(self._starts[-1]))
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order))
        shards = np.searchsorted(self._starts, order, side="right") - 1
        seen, first = np.unique(shards, return_index=True)
        by_use = np.argsort(first)
        found = (position, seen[by_use], first[by_use])
        with self._lock:
            self._epochs[key] = found
            while len(self._epochs) > 2:
                self._epochs.popitem(last=False)
        return found

    def next_shards(self, epoch: int, indices: np.ndarray, ahead: int) -> list[int]:
        """Return up to ``ahead`` shards the order first reaches after ``indices``.

        Args:
            epoch: the epoch the batch belongs to.
            indices: the batch's global indices (of that epoch's order).
            ahead: how many shards to return at most.

        Returns:
            Shard numbers, soonest first; empty when no sampler is followed.
        """
        out: list[int] = []
        planned = self._epoch(epoch)
        if planned is None or ahead <= 0 or not len(indices):
            return out
        position, shards, first = planned
        reached = int(position[indices].max())
        out += shards[np.searchsorted(first, reached, side="right"):][:ahead].tolist()
        if len(out) < ahead:  # the next epoch begins
            following = self._epoch(epoch + 1)
            out += [s for s in following[1][:ahead] if s not in out][:ahead - len(out)]
        return out

    def __copy__(self) -> OrderPlan:
        return self  # shared by the dataset, the sampler and the engine's copies of it

    def __deepcopy__(self, memo: dict) -> OrderPlan:
        return self

    def __getstate__(self) -> dict:
        return {"sampler": self.sampler, "_starts": self._starts}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._epochs, self._lock = collections.OrderedDict(), threading.Lock()


_THREADS = 2  # shards downloaded at once: the per-shard work overlaps the next transfer


class Prefetcher:
    """Daemon threads (per process) that download shards into ``cache`` ahead of use.

    A newer request replaces the shards not yet started (the reader moved
    on). A prefetch never evicts the shards it was told to keep, nor one in
    use; if the cache has no other room, the shard is skipped, and the reader
    downloads it when it gets there (and reports any error then).

    Args:
        cache: the shard cache.
    """

    def __init__(self, cache: ShardCache) -> None:
        self._cache = cache
        self._pid = -1
        self.fetched = 0

    def _start(self) -> None:
        self._pid = os.getpid()
        self._request: tuple | None = None
        self._asked = self._planned = 0  # numbers of the last request made and planned
        self._wanted: list[int] = []
        self._keep: frozenset[str] = frozenset()
        self._wake = threading.Condition()
        for _ in range(_THREADS):
            threading.Thread(target=self._run, daemon=True, name="shard-prefetch").start()

    def request(self, plan: OrderPlan, epoch: int, indices: np.ndarray, ahead: int,
                keep: set[int]) -> None:
        """Download the ``ahead`` shards ``plan`` reaches after ``indices`` of ``epoch``.

        The plan is looked up on a prefetch thread, off the reader's path;
        shards in ``keep`` (the batch's own) are never evicted to make room.
        """
        if self._pid != os.getpid():
            self._start()  # first use, or a forked child (threads do not survive fork)
        with self._wake:
            self._asked += 1
            self._request = (self._asked, plan, epoch, np.array(indices), ahead, keep)
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._wanted and self._request is None:
                    self._wake.wait()
                request, self._request = self._request, None
                if request is None:
                    shard, keep = self._wanted.pop(0), self._keep
            if request is not None:
                self._plan(*request)
                continue
            with contextlib.suppress(Exception):
                # The reader meets any real failure again, and raises it there.
                if self._cache.fetch(shard, keep=keep):
                    self.fetched += 1

    def _plan(self, number: int, plan: OrderPlan, epoch: int, indices: np.ndarray, ahead: int,
              batch: set[int]) -> None:
        """Replace the shards to download by those the reader needs next."""
        wanted: list[int] = []
        with contextlib.suppress(Exception):
            wanted = plan.next_shards(epoch, indices, ahead)
        names = self._cache.manifest.shards
        keep = frozenset(cached_name(names[s]) for s in batch | set(wanted))
        wanted = [s for s in wanted if not os.path.exists(self._cache.path(s))]
        with self._wake:
            if number > self._planned:  # a later request may have been planned already
                self._planned = number
                self._wanted, self._keep = wanted, keep
                self._wake.notify_all()

    def __getstate__(self) -> dict:
        return {"_cache": self._cache, "_pid": -1, "fetched": 0}
