"""The pool's placement: which worker builds a batch, from the units the batch reads."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit import DatasetMixin
from dataset_kit.engine._process.placement import Placement
from dataset_kit.iterators import MultiprocessIterator


def test_batches_without_units_go_round_robin_by_task_id():
    placement = Placement()
    assert [placement.choose(task, None, 3) for task in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_a_unit_stays_with_the_worker_that_read_it_and_new_units_go_in_turn():
    placement = Placement()
    assert placement.choose(0, (5,), 2) == 0
    assert placement.choose(1, (5,), 2) == 0  # not the other worker: it would read 5 again
    assert placement.choose(2, (6,), 2) == 1  # new: the next in turn
    assert placement.choose(3, (7,), 2) == 0
    assert placement.choose(4, (6, 8), 2) == 1  # shares 6: goes with it, and 8 with it
    assert placement.choose(5, (8,), 2) == 1
    assert placement.choose(6, (9,), 2) == 0  # 8 was new at worker 1: the turn moved past it
    assert placement.choose(7, (5,), 2) == 0  # a unit remembered does not move the turn
    assert placement.choose(8, (10,), 2) == 1


def test_new_units_go_to_each_worker_in_turn():
    placement = Placement()
    assert [placement.choose(task, (task,), 3) for task in range(5)] == [0, 1, 2, 0, 1]


def test_a_settled_unit_is_placed_where_it_was_settled_and_the_turn_moves_past_it():
    placement = Placement()
    placement.settle((3, 4), 2)
    assert placement.choose(9, (4,), 3) == 2
    assert placement.choose(10, (1,), 3) == 0  # new: the turn moved past worker 2
    placement.settle(None, 1)  # nothing to remember
    assert placement.choose(11, (2,), 3) == 1
    assert placement.where(4, 3) == 2
    assert placement.where(4, 2) is None  # worker 2 is gone
    assert placement.where(99, 3) is None


def test_a_unit_remembered_at_a_worker_that_is_gone_counts_as_new():
    placement = Placement()
    placement.settle((1,), 3)  # the turn is now 4: worker 0 of 2
    assert placement.choose(0, (1,), 2) == 0
    assert placement.choose(1, (1,), 2) == 0  # remembered at 0 now


def test_the_oldest_units_are_forgotten_beyond_the_memory():
    placement = Placement(memory=2)
    for unit, worker in ((1, 0), (2, 1), (3, 1)):
        placement.settle((unit,), worker)
    assert placement.where(1, 2) is None
    assert placement.choose(0, (1,), 2) == 0  # forgotten: the next in turn (after 1)
    assert placement.choose(1, (1,), 2) == 0


@pytest.mark.parametrize("memory", [0, -1, 1.5, True, None])
def test_memory_must_be_a_positive_int(memory):
    with pytest.raises(ValueError, match=f"memory must be a positive number of units, got "
                                         f"{memory!r}"):
        Placement(memory)


@pytest.mark.parametrize("workers", [0, -2, 1.0, None])
def test_no_workers_is_an_error_naming_the_count(workers):
    with pytest.raises(ValueError, match=f"workers must be at least 1, got {workers!r}"):
        Placement().choose(0, (1,), workers)


@given(st.lists(st.tuples(st.none() | st.lists(st.integers(0, 6), min_size=1, max_size=3),
                          st.integers(1, 4)), max_size=40))
def test_every_choice_is_a_worker_and_a_unit_stays_put_while_its_worker_exists(calls):
    placement = Placement()
    where: dict[int, int] = {}
    turn = 0
    for task, (units, workers) in enumerate(calls):
        worker = placement.choose(task, None if units is None else tuple(units), workers)
        assert 0 <= worker < workers
        if units is None:
            assert worker == task % workers
            continue
        known = [where[u] for u in units if u in where and where[u] < workers]
        if known:
            assert worker == known[0]
        else:
            assert worker == turn % workers
        if any(u not in where for u in units):
            turn = worker + 1
        for unit in units:
            where[unit] = worker


class PidsOfBlocks(DatasetMixin):
    """Each example is the pid of the process that built it; batches read "blocks" of 4."""

    def __init__(self, preference: bool) -> None:
        self.preference = preference

    def __len__(self) -> int:
        return 24

    def get_example(self, i: int) -> int:
        return os.getpid()

    def get_batch(self, indices: np.ndarray) -> list[int]:
        # Built whole (a fresh pool does not split the first batch across workers).
        return [os.getpid()] * len(indices)

    def batch_locality(self, indices: np.ndarray):
        return tuple(sorted({int(i) // 4 for i in indices})) if self.preference else None


@pytest.mark.parametrize("preference", [True, False])
def test_the_process_pool_builds_the_batches_of_a_block_in_one_worker(preference):
    it = MultiprocessIterator(PidsOfBlocks(preference), 2, repeat=False, shuffle=False,
                              n_processes=2)
    try:
        pids = [batch[0] for batch in it]
    finally:
        it.finalize()
    blocks = [set(pids[k:k + 2]) for k in range(0, len(pids), 2)]  # 2 batches per block
    if preference:
        assert all(len(pid) == 1 for pid in blocks)
        assert len(set(pids)) == 2  # new blocks went to each worker in turn
    else:
        assert all(len(pid) == 2 for pid in blocks)  # round robin
