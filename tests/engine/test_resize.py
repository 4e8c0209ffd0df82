"""Executors resized in place (``num_workers="auto"``): batches in flight are kept."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import numpy as np
import pytest

from dataset_kit.engine import WorkerDiedError
from dataset_kit.engine._executors import ProcessExecutor, Resizable, ThreadExecutor
from dataset_kit.engine._statemachine import BatchPlan


def _plan(k: int) -> BatchPlan:
    indices = np.arange(4 * k, 4 * k + 4)
    return BatchPlan(indices, np.zeros(4, np.int64))


def _expected(k: int) -> list:
    return list(range(4 * k, 4 * k + 4))


def _alive(pids: set[int]) -> set[int]:
    return pids & {child.pid for child in multiprocessing.active_children()}


def _children() -> set[int]:
    return {child.pid for child in multiprocessing.active_children()}


def _gone(pids: set[int]) -> bool:
    """Whether every process of ``pids`` has exited (within 10 s)."""
    deadline = time.monotonic() + 10
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not _alive(pids)


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_a_resize_keeps_every_batch_in_flight_and_the_depth_follows(kind: str) -> None:
    data = np.arange(200)
    executor = (ThreadExecutor(data, 1) if kind == "thread"
                else ProcessExecutor(data, workers=1, start_method="fork"))
    assert isinstance(executor, Resizable)
    try:
        handles = [executor.submit(_plan(k), 0) for k in range(3)]
        executor.resize(3)  # up: the three batches in flight stay
        assert (executor.workers, executor.depth) == (3, 6)
        handles += [executor.submit(_plan(k), 0) for k in range(3, 9)]
        executor.resize(1)  # down, with batches in flight on the workers removed
        assert (executor.workers, executor.depth) == (1, 2)
        handles += [executor.submit(_plan(k), 0) for k in range(9, 12)]
        got = [np.asarray(executor.collect(handle)).tolist() for handle in handles]
        assert got == [_expected(k) for k in range(12)]
    finally:
        executor.close()


def test_an_added_worker_is_forked_into_the_pool_and_a_removed_one_retires() -> None:
    before = _children()
    executor = ProcessExecutor(np.arange(200), workers=1, start_method="fork")
    try:
        executor.collect(executor.submit(_plan(0), 0))
        first = _children() - before
        executor.resize(2)
        grown = _children() - before
        assert len(first) == 1 and first < grown and len(grown) == 2  # the first one stays
        handles = [executor.submit(_plan(k), 0) for k in range(1, 5)]
        executor.resize(1)
        assert [np.asarray(executor.collect(h)).tolist() for h in handles] == \
            [_expected(k) for k in range(1, 5)]
        assert _gone(grown - first), "the removed worker did not exit"
        assert _alive(first) == first
        # The pool forgets the retired worker and goes on with the first one.
        assert np.asarray(executor.collect(executor.submit(_plan(5), 0))).tolist() == \
            _expected(5)
    finally:
        executor.close()


class _Slow:
    def __len__(self) -> int:
        return 200

    def __getitem__(self, index):
        time.sleep(0.05)
        return np.asarray(index)


@pytest.mark.parametrize("which", ["added", "removed"])
def test_a_worker_killed_while_added_or_removed_is_a_worker_died_error(which: str) -> None:
    before = _children()
    executor = ProcessExecutor(_Slow(), workers=1, start_method="fork", timeout=60)
    try:
        executor.collect(executor.submit(_plan(0), 0))
        first = _children() - before
        executor.resize(2)
        added = _children() - before - first
        assert len(added) == 1
        handles = [executor.submit(_plan(k), 0) for k in range(1, 5)]  # two on each worker
        if which == "removed":
            executor.resize(1)  # the added worker still owes its two batches
        os.kill(next(iter(added)), signal.SIGKILL)
        with pytest.raises(WorkerDiedError, match="SIGKILL"):
            for handle in handles:
                executor.collect(handle)
        with pytest.raises(RuntimeError, match="worker failure"):
            executor.ensure_open()
    finally:
        executor.close()
    assert _gone(_children() - before)


@pytest.mark.parametrize("workers", [0, -1])
def test_resize_rejects_a_count_below_one(workers: int) -> None:
    executor = ProcessExecutor(np.arange(8), workers=1, start_method="fork")
    try:
        with pytest.raises(ValueError, match="workers"):
            executor.resize(workers)
    finally:
        executor.close()
