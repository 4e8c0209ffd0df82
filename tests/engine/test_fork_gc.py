"""Forked workers do not walk the main process's objects in their garbage collections."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from dataset_kit import DatasetMixin
from dataset_kit.iterators import MultiprocessIterator


class _FreezeCount(DatasetMixin):
    """Each example: how many objects the worker's collector ignores as frozen."""

    def __len__(self) -> int:
        return 8

    def get_example(self, i: int):
        return np.int64(gc.get_freeze_count())


def frozen_in_workers(start_method: str = "fork") -> list[int]:
    with MultiprocessIterator(_FreezeCount(), 4, repeat=False, n_processes=2,
                              start_method=start_method) as it:
        return [int(v) for batch in it for v in batch]


def test_a_forked_worker_sees_the_main_process_objects_frozen_and_the_main_process_does_not():
    assert gc.get_freeze_count() == 0
    parent_objects = len(gc.get_objects())
    counts = frozen_in_workers()
    # Every object the main process had when it forked (the test run's modules and
    # all) is out of the workers' collections.
    assert min(counts) >= parent_objects // 2, (counts, parent_objects)
    assert gc.get_freeze_count() == 0


def test_a_process_that_froze_objects_itself_keeps_its_own_freeze_untouched():
    gc.freeze()
    try:
        mine = gc.get_freeze_count()
        assert mine > 0
        frozen_in_workers()
        # Neither unfrozen nor added to (frozen objects may have been freed meanwhile).
        assert 0 < gc.get_freeze_count() <= mine
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_workers_that_are_not_forked_from_this_process_are_left_alone(start_method):
    # A spawned or fork-server worker starts from a fresh interpreter: nothing to freeze.
    assert gc.get_freeze_count() == 0
    assert frozen_in_workers(start_method) == [0] * 8
    assert gc.get_freeze_count() == 0
