"""Whether a process is a pool's worker: recorded by the engine's workers, asked by storage."""

from __future__ import annotations

import pytest

from dataset_kit import DatasetMixin, _worker_process
from dataset_kit.iterators import MultiprocessIterator


class PoolWorkers(DatasetMixin):
    """Each example is what this process says of its pool."""

    def __len__(self) -> int:
        return 6

    def get_example(self, i: int) -> int:
        return _worker_process.pool_workers()


def test_the_main_process_is_no_pool_worker():
    assert _worker_process.pool_workers() == 0


@pytest.mark.parametrize("workers", [1, 3])
def test_a_worker_process_knows_how_many_workers_its_pool_has(workers):
    it = MultiprocessIterator(PoolWorkers(), 2, repeat=False, shuffle=False,
                              n_processes=workers)
    try:
        assert {int(x) for batch in it for x in batch} == {workers}
    finally:
        it.finalize()
    assert _worker_process.pool_workers() == 0


@pytest.mark.parametrize("workers", [0, -1, 1.5, True, None])
def test_enter_pool_takes_a_positive_int(workers):
    with pytest.raises(ValueError, match=f"workers must be a positive int, got {workers!r}"):
        _worker_process.enter_pool(workers)
    assert _worker_process.pool_workers() == 0
