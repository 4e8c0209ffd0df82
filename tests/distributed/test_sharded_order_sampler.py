"""ShardedIterator over a shard-aware global order (ShardOrderSampler), cut among ranks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dataset_kit.datasets import TupleDataset
from dataset_kit.distributed import ShardedIterator
from dataset_kit.shards import ShardOrderSampler, StreamingDataset
from tests.distributed.thread_ranks import run_ranks, unwrap
from tests.shards.conftest import write

N, BATCH = 60, 4


@pytest.fixture
def shards(tmp_path):
    write(tmp_path / "set", n=N, shard_size=700)
    return lambda rank=0: StreamingDataset(tmp_path / "set", local=tmp_path / f"cache{rank}")


def _ys(batch) -> list[int]:
    return [int(example["y"]) for example in batch]


def _epoch(it) -> list[int]:
    seen = []
    while True:
        seen += _ys(next(it))
        if it.is_new_epoch:
            return seen


def _interleave(per_rank: list[list[int]]) -> list[int]:
    return [per_rank[r][j] for j in range(len(per_rank[0])) for r in range(len(per_rank))]


def test_the_ranks_cut_the_samplers_order_of_each_epoch(shards):
    def body(comm):
        ds = shards(comm.rank)
        it = ShardedIterator(ds, BATCH, comm, order_sampler=ShardOrderSampler(ds, 2, seed=3))
        return [_epoch(it), _epoch(it)]

    per_rank = unwrap(run_ranks(3, body))
    sampler = ShardOrderSampler(shards(), 2, seed=3)
    for epoch in range(2):
        got = _interleave([epochs[epoch] for epochs in per_rank])
        assert got == sampler.epoch_order(epoch, N).tolist()


@pytest.mark.parametrize("before, after", [(2, 3), (3, 2), (1, 4)])
def test_a_resume_on_another_number_of_ranks_continues_the_samplers_order(shards, before,
                                                                          after):
    def first(comm):
        ds = shards(comm.rank)
        it = ShardedIterator(ds, BATCH, comm, seed=0,
                             order_sampler=ShardOrderSampler(ds, 2, seed=5))
        seen = [y for _ in range(2) for y in _ys(next(it))]
        return seen, json.loads(json.dumps(it.state_dict()))

    saved = unwrap(run_ranks(before, first))
    state = saved[0][1]
    assert all(s == state for _, s in saved)  # the state is global
    start = state["door"]["global_position"]
    assert start == 2 * BATCH * before
    assert state["door"]["order_sampler"]["kind"] == "shard_blocks"
    order = ShardOrderSampler(shards(), 2, seed=5).epoch_order(0, N).tolist()
    assert sorted(_interleave([seen for seen, _ in saved])) == sorted(order[:start])

    def second(comm):
        ds = shards(comm.rank)
        # Another seed: the state brings the saved sampler's back.
        it = ShardedIterator(ds, BATCH, comm, seed=0,
                             order_sampler=ShardOrderSampler(ds, 2, seed=9))
        it.load_state_dict(state)
        return _epoch(it), _epoch(it)

    resumed = unwrap(run_ranks(after, second))
    rest = _interleave([r for r, _ in resumed])
    assert rest[:N - start] == order[start:]
    assert len(rest) - (N - start) < after  # 'keep' pads to a multiple of the ranks only
    following = _interleave([e for _, e in resumed])
    assert following == ShardOrderSampler(shards(), 2, seed=5).epoch_order(1, N).tolist()


def test_a_state_of_another_sampler_is_refused_naming_it(shards):
    ds = shards()
    with_sampler = ShardedIterator(ds, BATCH, seed=1,
                                   order_sampler=ShardOrderSampler(ds, seed=1))
    next(with_sampler)
    shuffled = ShardedIterator(ds, BATCH, seed=1)
    before = shuffled.state_dict()
    with pytest.raises(ValueError, match="order sampler 'shard_blocks', but this iterator "
                                         "uses None"):
        shuffled.load_state_dict(with_sampler.state_dict())
    assert shuffled.state_dict() == before
    with pytest.raises(ValueError, match="order sampler None, but this iterator uses "
                                         "'shard_blocks'"):
        with_sampler.load_state_dict(before)


def test_the_sampler_must_give_random_access_orders_and_excludes_shuffle(shards):
    ds = shards()
    with pytest.raises(ValueError, match="either shuffle or order_sampler"):
        ShardedIterator(ds, BATCH, shuffle=True, order_sampler=ShardOrderSampler(ds))
    with pytest.raises(TypeError, match="pure function"):
        ShardedIterator(TupleDataset(np.arange(5)), 2, order_sampler=lambda order, pos: order)


def test_ranks_with_different_samplers_fail_on_every_rank(shards):
    def body(comm):
        ds = shards(comm.rank)
        return ShardedIterator(ds, BATCH, comm,
                               order_sampler=ShardOrderSampler(ds, seed=comm.rank))

    results = run_ranks(2, body)
    assert all("ranks disagree on order_sampler" in str(r) for r in results)


def test_a_sampler_part_without_the_samplers_state_is_refused(shards):
    ds = shards()
    it = ShardedIterator(ds, BATCH, seed=1, order_sampler=ShardOrderSampler(ds, seed=1))
    state = it.state_dict()
    del state["door"]["order_sampler"]["state"]
    with pytest.raises(ValueError, match=r"order_sampler'\] must hold 'kind' and 'state' of "
                                         r"sampler 'shard_blocks'"):
        it.load_state_dict(state)
