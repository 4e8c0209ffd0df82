"""The engine's public counters and its statistics hook."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from dataset_kit import EngineStatistics
from dataset_kit.iterators import MultithreadIterator, SerialIterator


def test_counters_count_batches_examples_and_wait() -> None:
    it = SerialIterator(np.arange(10), 4, repeat=False, shuffle=False)
    assert it.statistics().batches == 0
    assert it.statistics().mean_wait_seconds == 0.0
    batches = list(it)
    stats = it.statistics()
    assert isinstance(stats, EngineStatistics)
    assert (stats.batches, stats.examples) == (len(batches), 10)
    assert stats.wait_seconds > 0.0
    assert stats.shm_blocks is None  # a serial engine has no shared memory


def test_hook_is_called_every_n_batches_and_can_be_removed() -> None:
    it = MultithreadIterator(np.arange(40), 2, shuffle=False, n_threads=2)
    try:
        seen: list[EngineStatistics] = []
        remove = it.add_statistics_hook(seen.append, every=3)
        for _ in range(7):
            next(it)
        assert [s.batches for s in seen] == [3, 6]
        assert seen[-1].examples == 12
        remove()
        for _ in range(3):
            next(it)
        assert len(seen) == 2
    finally:
        it.finalize()


def test_a_copy_counts_from_zero() -> None:
    it = SerialIterator(np.arange(10), 2, shuffle=False)
    next(it)
    assert copy.copy(it).statistics().batches == 0


@pytest.mark.parametrize(("every", "error"), [(0, ValueError), (1.5, TypeError)])
def test_hook_rejects_bad_every(every: object, error: type) -> None:
    it = SerialIterator(np.arange(10), 2)
    with pytest.raises(error, match="every"):
        it.add_statistics_hook(print, every=every)  # type: ignore[arg-type]


def test_hook_rejects_a_callback_that_is_not_callable() -> None:
    it = SerialIterator(np.arange(10), 2)
    with pytest.raises(TypeError, match="callback"):
        it.add_statistics_hook(3, every=1)
