"""ShardedIterator on thread ranks: coverage, equal batch counts, elastic resume, refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.datasets import TupleDataset
from dataset_kit.distributed import DistributedError, ShardedIterator
from dataset_kit.distributed._shards import global_order
from dataset_kit.iterators import SerialIterator
from tests.distributed.thread_ranks import run_ranks, unwrap

POLICIES = ("pad", "drop", "keep")


def _ids(batch) -> list[int]:
    return [int(example[0]) for example in batch]


def _epoch(it) -> list[list[int]]:
    """The rest of the current epoch, batch by batch."""
    batches = []
    while True:
        batches.append(_ids(next(it)))
        if it.is_new_epoch:
            return batches


def _interleave(per_rank: list[list[list[int]]]) -> list[int]:
    """The global sequence the ranks consumed: position j * ranks + r is rank r's j-th."""
    flat = [[i for batch in batches for i in batch] for batches in per_rank]
    return [flat[r][j] for j in range(len(flat[0])) for r in range(len(flat))]


def _expected(order: np.ndarray, start: int, ranks: int, batch: int, policy: str) -> list[int]:
    rest = len(order) - start
    if policy == "pad":
        length = -(-rest // (ranks * batch)) * ranks * batch
    elif policy == "drop":
        length = rest // (ranks * batch) * ranks * batch
    else:
        length = -(-rest // ranks) * ranks
    return [int(order[(start + j) % len(order)]) for j in range(length)]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 60), ranks=st.integers(1, 4), batch=st.integers(1, 5),
       policy=st.sampled_from(POLICIES), shuffle=st.booleans(), seed=st.integers(0, 2**31))
def test_an_epoch_is_the_global_order_cut_evenly(n, ranks, batch, policy, shuffle, seed):
    ds = TupleDataset(np.arange(n))
    if policy == "drop" and n < ranks * batch:
        with pytest.raises(ValueError, match="no batch"):
            unwrap(run_ranks(ranks, lambda comm: ShardedIterator(
                ds, batch, comm, shuffle=shuffle, seed=seed, last_batch=policy)))
        return

    def body(comm):
        it = ShardedIterator(ds, batch, comm, shuffle=shuffle, seed=seed, last_batch=policy)
        return [_epoch(it), _epoch(it)]

    per_rank = unwrap(run_ranks(ranks, body))
    for epoch in range(2):
        batches = [epochs[epoch] for epochs in per_rank]
        assert len({len(b) for b in batches}) == 1  # the same number of batches everywhere
        if policy != "keep":
            assert all(len(b) == batch for bs in batches for b in bs)
        order = global_order(seed, epoch, n, shuffle)
        assert _interleave(batches) == _expected(order, 0, ranks, batch, policy)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(8, 60), before=st.integers(1, 3), after=st.integers(1, 3),
       batch=st.integers(1, 4), policy=st.sampled_from(POLICIES), consumed=st.integers(1, 6),
       seed=st.integers(0, 2**31))
def test_elastic_resume_continues_the_global_order(n, before, after, batch, policy, consumed,
                                                   seed):
    ds = TupleDataset(np.arange(n))
    per_epoch = len(_expected(np.arange(n), 0, before, batch, policy)) // before
    steps = min(consumed, -(-per_epoch // batch) - 1)
    if per_epoch == 0 or (policy == "drop" and n < after * batch) or steps < 1:
        return

    def first(comm):
        it = ShardedIterator(ds, batch, comm, seed=seed, last_batch=policy)
        seen = [_ids(next(it)) for _ in range(steps)]
        return seen, json.loads(json.dumps(it.state_dict()))

    results = unwrap(run_ranks(before, first))
    states = [state for _, state in results]
    assert all(state == states[0] for state in states)  # the state is global
    start = states[0]["global_position"]
    order = global_order(seed, 0, n, True)
    assert sorted(_interleave([seen for seen, _ in results])) == sorted(order[:start].tolist())

    def second(comm):
        it = ShardedIterator(ds, batch, comm, seed=seed, last_batch=policy)
        it.load_state_dict(states[0])
        rest = _epoch(it) if it.epoch == 0 else []
        return rest, _epoch(it)

    resumed = unwrap(run_ranks(after, second))
    assert len({len(rest) for rest, _ in resumed}) == 1
    rest = _interleave([r for r, _ in resumed])
    assert rest == _expected(order, start, after, batch, policy)
    if policy != "drop":  # every example of the epoch seen, none twice before the padding
        assert sorted(order[:start].tolist() + rest[:n - start]) == list(range(n))
    following = _interleave([e for _, e in resumed])
    assert following == _expected(global_order(seed, 1, n, True), 0, after, batch, policy)


def test_one_rank_visits_the_single_process_order():
    ds = TupleDataset(np.arange(23))
    sharded = ShardedIterator(ds, 5, seed=11, last_batch="keep")
    serial = SerialIterator(ds, 5, seed=11, last_batch="keep")
    for _ in range(12):
        assert _ids(next(sharded)) == _ids(next(serial))


@pytest.mark.parametrize("workers", [{"n_threads": 2}, {"n_processes": 2},
                                     {"n_processes": 2, "start_method": "spawn"}])
def test_workers_inside_a_rank_give_the_same_batches(workers):
    ds = TupleDataset(np.arange(40), np.arange(40) * 2.0)

    def body(options):
        return lambda comm: [_ids(b) for b in _take(ShardedIterator(ds, 4, comm, seed=5,
                                                                    **options), 12)]

    plain = unwrap(run_ranks(2, body({})))
    parallel = unwrap(run_ranks(2, body(workers)))
    assert parallel == plain


def _take(it, count):
    try:
        return [next(it) for _ in range(count)]
    finally:
        it.finalize()


def test_ranks_with_different_lengths_all_raise_naming_both():
    def body(comm):
        ShardedIterator(TupleDataset(np.arange(10 + comm.rank)), 2, comm)

    results = run_ranks(2, body)
    for result in results:
        assert isinstance(result, DistributedError)
        assert "rank 0 has 10" in str(result) and "rank 1 has 11" in str(result)


def test_ranks_with_different_seeds_raise():
    results = run_ranks(2, lambda comm: ShardedIterator(TupleDataset(np.arange(8)), 2, comm,
                                                        seed=comm.rank))
    assert all(isinstance(r, DistributedError) and "seeds" in str(r) for r in results)


def test_rank_zero_seed_is_shared():
    results = unwrap(run_ranks(3, lambda comm: ShardedIterator(
        TupleDataset(np.arange(9)), 1, comm).seed))
    assert len(set(results)) == 1


@pytest.mark.parametrize("key,value", [("dataset_length", 11), ("seed", 4), ("shuffle", False),
                                       ("last_batch", "drop"), ("repeat", False)])
def test_a_state_of_other_data_or_seed_is_refused(key, value):
    it = ShardedIterator(TupleDataset(np.arange(10)), 2, seed=3)
    state = dict(it.state_dict(), **{key: value})
    with pytest.raises(ValueError, match=f"{key}={value!r}.*{key}="):
        it.load_state_dict(state)


@pytest.mark.parametrize("state", [None, {"format": "dataset_kit.iterator"},
                                   {"format": "dataset_kit.sharded_iterator", "version": 9}])
def test_a_foreign_state_is_refused(state):
    with pytest.raises(ValueError, match="state"):
        ShardedIterator(TupleDataset(np.arange(4)), 2).load_state_dict(state)


def test_an_invalid_position_is_refused():
    it = ShardedIterator(TupleDataset(np.arange(10)), 2, seed=1)
    with pytest.raises(ValueError, match="global_position=10"):
        it.load_state_dict(dict(it.state_dict(), global_position=10))


@pytest.mark.parametrize("kwargs,error,match", [
    ({"batch_size": 0}, ValueError, "batch_size"),
    ({"last_batch": "rollover"}, ValueError, "last_batch"),
    ({"seed": -1}, ValueError, "seed"),
    ({"n_processes": 2, "n_threads": 2}, ValueError, "n_processes or n_threads"),
    ({"converter": 3}, TypeError, "converter"),
    ({"comm": object()}, TypeError, "comm"),
    ({"comm": "nccl"}, ValueError, "comm"),
])
def test_bad_arguments_are_named(kwargs, error, match):
    kwargs = {"batch_size": 2, **kwargs}
    with pytest.raises(error, match=match):
        ShardedIterator(TupleDataset(np.arange(4)), **kwargs)


def test_serialize_round_trips_through_a_serializer():
    from dataset_kit.serializers import DictionarySerializer, NpzDeserializer

    it = ShardedIterator(TupleDataset(np.arange(12)), 3, seed=2)
    next(it)
    target: dict = {}
    it.serialize(DictionarySerializer(target))
    expected = _ids(next(it))
    other = ShardedIterator(TupleDataset(np.arange(12)), 3, seed=2)
    other.serialize(NpzDeserializer(target))
    assert _ids(next(other)) == expected


def test_reset_forgets_a_resumed_epoch():
    ds = TupleDataset(np.arange(12))
    it = ShardedIterator(ds, 2, seed=2)
    for _ in range(3):
        next(it)
    it.load_state_dict(it.state_dict())
    it.reset()
    assert it.state_dict()["global_position"] == 0
    assert _ids(next(it)) == _ids(next(ShardedIterator(ds, 2, seed=2)))
