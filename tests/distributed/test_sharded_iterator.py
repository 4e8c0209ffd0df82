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

POLICIES = ("keep", "pad", "discard")


def _ids(batch) -> list[int]:
    return [int(example[0]) for example in batch]


def _epoch(it, pads: list | None = None) -> list[list[int]]:
    """The rest of the current epoch, batch by batch (and each batch's last_pad into pads)."""
    batches = []
    while True:
        batches.append(_ids(next(it)))
        if pads is not None:
            pads.append(it.last_pad)
        if it.is_new_epoch:
            return batches


def _padding(batches: list[list[int]], rank: int, ranks: int, rest: int) -> list[int]:
    """How many trailing examples of each batch of a rank come from past the end of the
    ``rest`` examples that remained of the global order (the wrapped ones)."""
    pads, j = [], 0
    for batch in batches:
        pads.append(sum(1 for k in range(j, j + len(batch)) if k * ranks + rank >= rest))
        j += len(batch)
    return pads


def _interleave(per_rank: list[list[list[int]]]) -> list[int]:
    """The global sequence the ranks consumed: position j * ranks + r is rank r's j-th."""
    flat = [[i for batch in batches for i in batch] for batches in per_rank]
    return [flat[r][j] for j in range(len(flat[0])) for r in range(len(flat))]


def _expected(order: np.ndarray, start: int, ranks: int, batch: int, policy: str) -> list[int]:
    rest = len(order) - start
    if policy == "pad":
        length = -(-rest // (ranks * batch)) * ranks * batch
    elif policy == "discard":
        length = rest // (ranks * batch) * ranks * batch
    else:
        length = -(-rest // ranks) * ranks
    return [int(order[(start + j) % len(order)]) for j in range(length)]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 60), ranks=st.integers(1, 4), batch=st.integers(1, 5),
       policy=st.sampled_from(POLICIES), shuffle=st.booleans(), seed=st.integers(0, 2**31))
def test_an_epoch_is_the_global_order_cut_evenly(n, ranks, batch, policy, shuffle, seed):
    ds = TupleDataset(np.arange(n))
    if policy == "discard" and n < ranks * batch:
        with pytest.raises(ValueError, match="no batch"):
            unwrap(run_ranks(ranks, lambda comm: ShardedIterator(
                ds, batch, comm, shuffle=shuffle, seed=seed, last_batch=policy)))
        return

    def body(comm):
        it = ShardedIterator(ds, batch, comm, shuffle=shuffle, seed=seed, last_batch=policy)
        assert it.last_batch == policy
        pads: list = [[], []]
        return [_epoch(it, pads[0]), _epoch(it, pads[1])], pads

    per_rank = unwrap(run_ranks(ranks, body))
    for epoch in range(2):
        batches = [epochs[epoch] for epochs, _ in per_rank]
        assert len({len(b) for b in batches}) == 1  # the same number of batches everywhere
        if policy != "keep":
            assert all(len(b) == batch for bs in batches for b in bs)
        order = global_order(seed, epoch, n, shuffle)
        seen = _interleave(batches)
        assert seen == _expected(order, 0, ranks, batch, policy)
        if policy == "keep":  # padded to a multiple of the ranks, no further
            assert len(seen) - n == -n % ranks
        for rank, (_, pads) in enumerate(per_rank):
            assert pads[epoch] == _padding(batches[rank], rank, ranks, n)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(8, 60), before=st.integers(1, 3), after=st.integers(1, 3),
       batch=st.integers(1, 4), policy=st.sampled_from(POLICIES), consumed=st.integers(1, 6),
       seed=st.integers(0, 2**31))
def test_elastic_resume_continues_the_global_order(n, before, after, batch, policy, consumed,
                                                   seed):
    ds = TupleDataset(np.arange(n))
    per_epoch = len(_expected(np.arange(n), 0, before, batch, policy)) // before
    steps = min(consumed, -(-per_epoch // batch) - 1)
    if per_epoch == 0 or (policy == "discard" and n < after * batch) or steps < 1:
        return

    def first(comm):
        it = ShardedIterator(ds, batch, comm, seed=seed, last_batch=policy)
        seen = [_ids(next(it)) for _ in range(steps)]
        return seen, json.loads(json.dumps(it.state_dict()))

    results = unwrap(run_ranks(before, first))
    states = [state for _, state in results]
    assert all(state == states[0] for state in states)  # the state is global
    start = states[0]["door"]["global_position"]
    order = global_order(seed, 0, n, True)
    assert sorted(_interleave([seen for seen, _ in results])) == sorted(order[:start].tolist())

    def second(comm):
        it = ShardedIterator(ds, batch, comm, seed=seed, last_batch=policy)
        it.load_state_dict(states[0])
        pads: list = []
        rest = _epoch(it, pads) if it.epoch == 0 else []
        return rest, _epoch(it), pads

    resumed = unwrap(run_ranks(after, second))
    assert len({len(rest) for rest, _, _ in resumed}) == 1
    rest = _interleave([r for r, _, _ in resumed])
    assert rest == _expected(order, start, after, batch, policy)
    if policy != "discard":  # every example of the epoch seen, none twice before the padding
        assert sorted(order[:start].tolist() + rest[:n - start]) == list(range(n))
    for rank, (mine, _, pads) in enumerate(resumed):
        assert pads == _padding(mine, rank, after, n - start)
    following = _interleave([e for _, e, _ in resumed])
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
                                       ("last_batch", "discard"), ("repeat", False)])
def test_a_state_of_other_data_or_seed_is_refused(key, value):
    it = ShardedIterator(TupleDataset(np.arange(10)), 2, seed=3)
    state = it.state_dict()
    state["door"][key] = value
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
        state = it.state_dict()
        state["door"]["global_position"] = 10
        it.load_state_dict(state)


@pytest.mark.parametrize("kwargs,error,match", [
    ({"batch_size": 0}, ValueError, "batch_size"),
    ({"last_batch": "rollover"}, ValueError, "last_batch"),
    ({"last_batch": "drop"}, ValueError, "last_batch"),
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
    assert it.state_dict()["door"]["global_position"] == 0
    assert _ids(next(it)) == _ids(next(ShardedIterator(ds, 2, seed=2)))


def test_an_evaluation_epoch_on_one_rank_sees_each_example_once():
    ds = TupleDataset(np.arange(10))
    it = ShardedIterator(ds, 3, repeat=False, shuffle=False)
    assert [_ids(b) for b in it] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert it.last_batch == "keep" and it.last_pad == 0


def test_the_default_pads_only_to_a_multiple_of_the_ranks():
    def body(comm):
        it = ShardedIterator(TupleDataset(np.arange(10)), 3, comm, repeat=False, shuffle=False)
        return [(_ids(b), it.last_pad) for b in it]

    per_rank = unwrap(run_ranks(4, body))
    # 10 examples on 4 ranks: 12 places, the last two repeat examples 0 and 1.
    assert per_rank == [[([0, 4, 8], 0)], [([1, 5, 9], 0)], [([2, 6, 0], 1)],
                        [([3, 7, 1], 1)]]


def test_pad_fills_the_last_batch_and_counts_the_padding():
    it = ShardedIterator(TupleDataset(np.arange(10)), 3, repeat=False, shuffle=False,
                         last_batch="pad")
    assert it.last_batch == "pad"
    assert [(_ids(b), it.last_pad) for b in it] == [
        ([0, 1, 2], 0), ([3, 4, 5], 0), ([6, 7, 8], 0), ([9, 0, 1], 2)]


def test_a_state_of_the_former_drop_policy_loads_as_discard():
    ds = TupleDataset(np.arange(12))
    it = ShardedIterator(ds, 2, seed=2, last_batch="discard")
    next(it)
    # A state of version 1, as that release wrote it.
    state = {"format": "dataset_kit.sharded_iterator", "version": 1,
             **{k: v for k, v in it.state_dict()["door"].items()
                if k not in ("name", "order_sampler")}, "last_batch": "drop"}
    other = ShardedIterator(ds, 2, seed=2, last_batch="discard")
    other.load_state_dict(state)
    assert _ids(next(other)) == _ids(next(it))
