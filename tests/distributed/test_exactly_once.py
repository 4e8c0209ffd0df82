"""ShardedIterator proves at each epoch's end that the job consumed the epoch exactly once."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from dataset_kit import ResumeMismatchError
from dataset_kit.distributed import ShardedIterator, ThreadRanks

N, BATCH = 20, 2


def run_ranks(size: int, body) -> list:
    """Run ``body(comm)`` on ``size`` thread ranks; return each rank's result or exception."""
    group = ThreadRanks(size, timeout=10)
    results: list = [None] * size

    def run(rank: int) -> None:
        try:
            results[rank] = body(group.communicator(rank))
        except BaseException as error:  # reported to the test, never lost
            # No abort(): a rank may still be leaving the last collective's
            # barrier; one that stopped early fails the others by the timeout.
            results[rank] = error

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(size)]
    try:
        for thread in threads:
            thread.start()
    finally:
        for thread in threads:
            thread.join(30)
    return results


def state_after(batches: int, ranks: int = 2, **options) -> dict:
    """The global state after ``batches`` batches of a ``ranks``-rank job."""
    def body(comm):
        it = ShardedIterator(np.arange(N), BATCH, comm, seed=3, **options)
        for _ in range(batches):
            next(it)
        return it.state_dict()
    return run_ranks(ranks, body)[0]


@pytest.mark.parametrize("policy", ["keep", "pad", "discard"])
@pytest.mark.parametrize("ranks, resumed_on", [(2, 2), (2, 3), (3, 2)])
def test_resumes_on_any_number_of_ranks_pass_the_exactly_once_check(policy, ranks, resumed_on):
    state = state_after(3, ranks, last_batch=policy)

    def body(comm):
        it = ShardedIterator(np.arange(N), BATCH, comm, seed=3, last_batch=policy)
        it.load_state_dict(state)
        while it.epoch < 3:
            next(it)
        return it.ledger()

    results = run_ranks(resumed_on, body)
    assert not [r for r in results if isinstance(r, BaseException)], results


def test_a_rank_resumed_from_an_older_state_is_detected_at_the_epoch_end():
    older, newer = state_after(1), state_after(3)

    def body(comm):
        it = ShardedIterator(np.arange(N), BATCH, comm, seed=3)
        it.load_state_dict(older if comm.rank == 0 else newer)
        while it.epoch < 1:
            next(it)

    results = run_ranks(2, body)
    assert all(isinstance(r, ResumeMismatchError) and r.cause == "ranks" for r in results), \
        results
    assert "different global positions" in str(results[0])


def test_without_the_check_the_older_rank_goes_unnoticed():
    older, newer = state_after(1), state_after(3)

    def body(comm):
        it = ShardedIterator(np.arange(N), BATCH, comm, seed=3, check_epochs=False)
        it.load_state_dict(older if comm.rank == 0 else newer)
        while it.epoch < 1:
            next(it)
        return it.epoch

    assert run_ranks(2, body) == [1, 1]


def test_check_epochs_must_be_a_bool():
    with pytest.raises(TypeError, match="check_epochs"):
        ShardedIterator(np.arange(N), BATCH, seed=0, check_epochs=1)
