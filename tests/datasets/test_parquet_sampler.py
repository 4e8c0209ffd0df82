"""RowGroupOrderSampler: orders from (seed, epoch), blocks of row groups, refused resumes."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.datasets import ParquetDataset, RowGroupOrderSampler, TupleDataset
from dataset_kit.formats import FileChangedError
from dataset_kit.iterators import SerialIterator
from tests.datasets.parquet_files import write


class _Groups:
    """A stand-in with only what the sampler reads: row-group starts and a fingerprint."""

    def __init__(self, counts: list[int]) -> None:
        self.row_group_starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def fingerprint(self) -> dict:
        return {"rows": int(self.row_group_starts[-1]), "files": [["f", 1, "0", None]]}


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.integers(0, 9), min_size=1, max_size=12), block=st.integers(1, 5),
       seed=st.integers(0, 2**40), epoch=st.integers(0, 50))
def test_an_epoch_is_a_permutation_of_blocks_and_a_pure_function_of_seed_and_epoch(
        counts, block, seed, epoch):
    groups = _Groups(counts)
    sampler = RowGroupOrderSampler(groups, block, seed=seed)
    size = sum(counts)
    order = sampler.epoch_order(epoch, size)
    assert sorted(order.tolist()) == list(range(size))
    again = RowGroupOrderSampler(groups, block, seed=seed).epoch_order(epoch, size)
    np.testing.assert_array_equal(order, again)
    group_of = np.searchsorted(groups.row_group_starts, order, side="right") - 1
    position = 0
    for members in sampler.blocks(epoch):  # each block's rows, together, in block order
        rows = sum(counts[g] for g in members)
        assert set(group_of[position:position + rows].tolist()) <= set(members.tolist())
        assert len(members) <= block
        position += rows
    assert position == size


def test_a_block_of_one_reads_each_row_group_whole_before_the_next():
    groups = _Groups([4, 4, 4, 4])
    order = RowGroupOrderSampler(groups, 1, seed=1).epoch_order(0, 16)
    assert [len(set((order[k:k + 4] // 4).tolist())) for k in range(0, 16, 4)] == [1] * 4


def test_epochs_differ_and_chainer_calls_step_through_them():
    groups = _Groups([50, 50])
    sampler = RowGroupOrderSampler(groups, 2, seed=5)
    first = sampler(np.arange(100), 0)
    np.testing.assert_array_equal(first, sampler.epoch_order(1, 100))
    assert not np.array_equal(sampler.epoch_order(1, 100), sampler.epoch_order(2, 100))


def test_state_round_trips_through_json_and_a_changed_file_is_named(tmp_path):
    write(tmp_path / "a.parquet", [5, 5])
    write(tmp_path / "b.parquet", [5], start=10)
    sampler = RowGroupOrderSampler(ParquetDataset(tmp_path), 2, seed=9)
    state = json.loads(json.dumps(sampler.state_dict()))
    other = RowGroupOrderSampler(ParquetDataset(tmp_path), 1, seed=1)
    other.load_state_dict(state)
    assert (other.seed, other.block_row_groups) == (9, 2)
    write(tmp_path / "b.parquet", [5], start=10)
    os.utime(tmp_path / "b.parquet", ns=(1, 1))  # the same bytes, but touched
    replaced = RowGroupOrderSampler(ParquetDataset(tmp_path), 2, seed=9)
    with pytest.raises(FileChangedError, match=rf"{tmp_path / 'b.parquet'} changed .*mtime"):
        replaced.load_state_dict(state)
    (tmp_path / "b.parquet").unlink()
    with pytest.raises(FileChangedError, match=rf"{tmp_path / 'b.parquet'} was read"):
        RowGroupOrderSampler(ParquetDataset(tmp_path), 2).load_state_dict(state)


def test_an_iterator_refuses_to_resume_on_a_changed_file_and_stays_unchanged(tmp_path):
    write(tmp_path / "a.parquet", [6, 6])
    ds = ParquetDataset(tmp_path, ["id"])
    it = SerialIterator(ds, 4, order_sampler=RowGroupOrderSampler(ds, 1, seed=2))
    next(it)
    state = it.state_dict()
    expected = [[int(r["id"]) for r in next(it)] for _ in range(5)]
    resumed = SerialIterator(ds, 4, order_sampler=RowGroupOrderSampler(ds, 1, seed=0))
    resumed.load_state_dict(state)
    assert [[int(r["id"]) for r in next(resumed)] for _ in range(5)] == expected
    write(tmp_path / "a.parquet", [6, 6], start=100)
    os.utime(tmp_path / "a.parquet", ns=(5, 5))
    changed = ParquetDataset(tmp_path, ["id"])
    fresh = SerialIterator(changed, 4, order_sampler=RowGroupOrderSampler(changed, 1, seed=0))
    with pytest.raises(ValueError, match=rf"{tmp_path / 'a.parquet'} changed"):
        fresh.load_state_dict(state)
    assert fresh.epoch == 0 and fresh.current_position == 0


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="dataset must be a ParquetDataset"):
        RowGroupOrderSampler(TupleDataset(np.arange(3)))
    with pytest.raises(ValueError, match="block_row_groups"):
        RowGroupOrderSampler(_Groups([3]), 0)
    with pytest.raises(ValueError, match="seed"):
        RowGroupOrderSampler(_Groups([3]), seed=-1)
    with pytest.raises(ValueError, match="built for 3 rows"):
        RowGroupOrderSampler(_Groups([3])).epoch_order(0, 4)
    with pytest.raises(ValueError, match="must be a dict"):
        RowGroupOrderSampler(_Groups([3])).load_state_dict(None)
