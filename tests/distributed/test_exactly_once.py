"""ShardedIterator proves at each epoch's end that the job consumed the epoch exactly once."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from dataset_kit import ResumeMismatchError
from dataset_kit.distributed import DistributedError, ShardedIterator, ThreadRanks
from dataset_kit.engine import mix_sum

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


@pytest.mark.parametrize("check", [True, "full"])
@pytest.mark.parametrize("policy", ["keep", "pad", "discard"])
@pytest.mark.parametrize("ranks, resumed_on", [(2, 2), (2, 3), (3, 2)])
def test_resumes_on_any_number_of_ranks_pass_the_exactly_once_check(policy, ranks, resumed_on,
                                                                     check):
    state = state_after(3, ranks, last_batch=policy, check_epochs=check)

    def body(comm):
        it = ShardedIterator(np.arange(N), BATCH, comm, seed=3, last_batch=policy,
                             check_epochs=check)
        it.load_state_dict(state)
        while it.epoch < 3:
            next(it)
        return it.ledger()

    results = run_ranks(resumed_on, body)
    assert not [r for r in results if isinstance(r, BaseException)], results


@pytest.mark.parametrize("check", [True, "full"])
def test_a_rank_resumed_from_an_older_state_is_detected_at_the_epoch_end(check):
    older, newer = state_after(1), state_after(3)

    def body(comm):
        it = ShardedIterator(np.arange(N), BATCH, comm, seed=3, check_epochs=check)
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


def test_check_epochs_must_be_a_bool_or_a_mode():
    with pytest.raises(TypeError, match="check_epochs"):
        ShardedIterator(np.arange(N), BATCH, seed=0, check_epochs=1)
    with pytest.raises(ValueError, match="check_epochs.*'fast'"):
        ShardedIterator(np.arange(N), BATCH, seed=0, check_epochs="fast")
    assert ShardedIterator(np.arange(N), BATCH, seed=0).check_epochs == "order"
    assert ShardedIterator(np.arange(N), BATCH, seed=0, check_epochs="full").check_epochs == \
        "full"


class Staged:
    """A global order sampler whose order depends on its state (a curriculum's stage)."""

    def __init__(self) -> None:
        self.stage = 0

    def __call__(self, current_order, current_position):
        raise AssertionError("random access only")

    def epoch_order(self, epoch, size):
        return np.random.default_rng([self.stage, epoch]).permutation(size)

    def state_dict(self):
        return {"stage": self.stage}

    def load_state_dict(self, state):
        self.stage = state["stage"]


@pytest.mark.parametrize("check, names", [(True, "different global orders"),
                                          ("full", "not the same ones")])
def test_a_rank_resumed_with_another_sampler_state_is_detected_at_the_epoch_end(check, names):
    # Same position, another order: only the order's identity (or the ids) tell.
    def body(comm):
        it = ShardedIterator(np.arange(N), BATCH, comm, seed=3, order_sampler=Staged(),
                             check_epochs=check)
        next(it)
        state = json.loads(json.dumps(it.state_dict()))
        if comm.rank == 1:
            state["door"]["order_sampler"]["state"]["stage"] = 1
        it.load_state_dict(state)
        while it.epoch < 1:
            next(it)

    results = run_ranks(2, body)
    assert all(isinstance(r, ResumeMismatchError) and r.cause == "ranks" for r in results), \
        results
    assert names in str(results[0])


def test_the_default_check_hashes_no_id_and_the_full_one_does(monkeypatch):
    import dataset_kit.distributed.sharded_iterator as sharded
    hashed: list[int] = []

    def counting(ids):
        hashed.append(len(ids))
        return mix_sum(ids)

    def one_epoch(check):
        def body(comm):
            it = ShardedIterator(np.arange(N), BATCH, comm, seed=3, check_epochs=check)
            while it.epoch < 1:
                next(it)
        return body

    monkeypatch.setattr(sharded, "mix_sum", counting)
    # "full": each rank its share of the ids, and the whole epoch's sum to compare with.
    for check, expected in ((True, []), ("full", [N // 2, N // 2, N, N])):
        hashed.clear()
        assert run_ranks(2, one_epoch(check)) == [None, None]
        assert sorted(hashed) == expected


def test_ranks_that_disagree_on_the_check_are_refused():
    results = run_ranks(2, lambda comm: ShardedIterator(
        np.arange(N), BATCH, comm, seed=3, check_epochs="full" if comm.rank else True))
    assert all(isinstance(r, DistributedError) and "check_epochs" in str(r) for r in results), \
        results


def test_check_epoch_runs_the_check_again_only_at_an_epoch_end():
    it = ShardedIterator(np.arange(N), BATCH, seed=3, check_epochs="full")
    next(it)
    with pytest.raises(RuntimeError, match="epoch's end"):
        it.check_epoch()
    while not it.is_new_epoch:
        next(it)
    it.check_epoch()  # the one rank consumed the epoch once
