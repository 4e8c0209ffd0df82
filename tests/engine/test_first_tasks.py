"""A fresh pool's first tasks travel with its workers (ProcessPool(first=...))."""

from __future__ import annotations

import numpy as np
import pytest

from dataset_kit.engine._fetch import fetch_batch
from dataset_kit.engine._process.pool import ProcessPool
from dataset_kit.engine._statemachine import BatchPlan
from dataset_kit.iterators import MultiprocessIterator, WorkerDiedError, WorkerError
from tests.iterators.helpers import Augmented, Misbehaving, batch_key, shm_blocks

SEED = 7


def expected(dataset, indices) -> list:
    return batch_key(fetch_batch(dataset, BatchPlan(np.asarray(indices), 0), SEED, stack=True))


@pytest.mark.parametrize("start_method", ["fork", "forkserver", "spawn"])
def test_each_worker_answers_the_first_task_it_was_started_with_then_later_ones(start_method):
    dataset = Augmented(40, 64)
    first = [(0, np.arange(0, 5), 0, SEED), (1, np.arange(5, 9), 0, SEED)]
    pool = ProcessPool(workers=3, start_method=start_method, dataset=dataset, first=first)
    try:
        # The third worker started without a task; every worker takes sent ones.
        later = {2: pool.submit(2, np.arange(9, 12), 0, SEED),
                 3: pool.submit(3, np.arange(12, 20), 0, SEED)}
        assert batch_key(pool.receive(pool.workers[1], 1)) == expected(dataset, range(5, 9))
        assert batch_key(pool.receive(pool.workers[0], 0)) == expected(dataset, range(0, 5))
        assert batch_key(pool.receive(later[2], 2)) == expected(dataset, range(9, 12))
        assert batch_key(pool.receive(later[3], 3)) == expected(dataset, range(12, 20))
    finally:
        pool.close()
    assert shm_blocks() == []


def test_a_first_task_counts_towards_maxtasksperchild():
    dataset = Augmented(40)
    pool = ProcessPool(workers=1, start_method="fork", dataset=dataset, max_tasks=1,
                       first=[(0, np.arange(0, 4), 0, SEED)])
    try:
        first_pid = pool.workers[0].process.pid
        assert batch_key(pool.receive(pool.workers[0], 0)) == expected(dataset, range(4))
        replacement = pool.submit(1, np.arange(4, 8), 0, SEED)
        assert replacement.process.pid != first_pid
        assert batch_key(pool.receive(replacement, 1)) == expected(dataset, range(4, 8))
    finally:
        pool.close()


def test_more_first_tasks_than_workers_is_refused_naming_first():
    tasks = [(k, np.arange(k, k + 1), 0, SEED) for k in range(3)]
    with pytest.raises(ValueError, match=r"first has 3 tasks, more than workers=2"):
        ProcessPool(workers=2, start_method="fork", dataset=Augmented(4), first=tasks)


@pytest.mark.parametrize("action, expected", [("sigkill", "SIGKILL"), ("raise", "boom at index 1")])
def test_a_worker_failing_on_the_first_task_it_was_started_with_is_reported(action, expected):
    it = MultiprocessIterator(Misbehaving(40, 1, action), 8, shuffle=False, n_processes=2)
    try:
        with pytest.raises(WorkerError, match=expected) as info:
            next(it)
        assert isinstance(info.value, WorkerDiedError) == (action == "sigkill")
    finally:
        it.finalize()
    assert shm_blocks() == []
