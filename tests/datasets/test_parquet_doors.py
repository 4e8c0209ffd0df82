"""Every front door takes a ParquetDataset as it takes any dataset."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dataset_kit import concat_examples
from dataset_kit.batch import RaggedColumn
from dataset_kit.datasets import ParquetDataset, RowGroupOrderSampler
from dataset_kit.distributed import ShardedIterator
from dataset_kit.iterators import MultiprocessIterator, SerialIterator
from dataset_kit.loader import DataLoader as GluonLoader
from tests.datasets.parquet_files import write
from tests.distributed.thread_ranks import run_ranks, unwrap


@pytest.fixture
def dataset(tmp_path):
    write(tmp_path / "a.parquet", [7, 0, 9, 5])
    write(tmp_path / "b.parquet", [8, 6], start=21)
    return ParquetDataset(tmp_path, ["id", "x", "tokens"])


def _ids(batch) -> list[int]:
    return [int(row["id"]) for row in batch]


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_the_multiprocess_iterator_gives_the_serial_batches_and_resumes(dataset, start_method):
    def make(cls, **options):
        return cls(dataset, 4, order_sampler=RowGroupOrderSampler(dataset, 2, seed=3), **options)

    serial = make(SerialIterator)
    expected = [_ids(next(serial)) for _ in range(12)]
    it = make(MultiprocessIterator, n_processes=2, start_method=start_method)
    try:
        got = [_ids(next(it)) for _ in range(5)]
        state = json.loads(json.dumps(it.state_dict()))
    finally:
        it.finalize()
    resumed = make(MultiprocessIterator, n_processes=2, start_method=start_method)
    try:
        resumed.load_state_dict(state)
        got += [_ids(next(resumed)) for _ in range(7)]
    finally:
        resumed.finalize()
    assert got == expected


def test_sharded_iterator_resumes_two_ranks_on_three(dataset):
    size = len(dataset)
    order = RowGroupOrderSampler(dataset, 2, seed=8).epoch_order(0, size)

    def first(comm):
        it = ShardedIterator(dataset, 3, comm, seed=1,
                             order_sampler=RowGroupOrderSampler(dataset, 2, seed=8))
        seen = [_ids(next(it)) for _ in range(2)]
        return seen, json.loads(json.dumps(it.state_dict()))

    before = unwrap(run_ranks(2, first))
    state = before[0][1]
    assert all(s == state for _, s in before)

    def second(comm):
        it = ShardedIterator(dataset, 3, comm, seed=1,
                             order_sampler=RowGroupOrderSampler(dataset, 2, seed=8))
        it.load_state_dict(state)
        rest = []
        while True:
            rest.append(_ids(next(it)))
            if it.is_new_epoch:
                return rest

    after = unwrap(run_ranks(3, second))
    consumed = sorted(i for seen, _ in before for batch in seen for i in batch)
    start = state["door"]["global_position"]
    assert consumed == sorted(order[:start].tolist())
    flat = [[i for batch in rest for i in batch] for rest in after]
    interleaved = [flat[r][j] for j in range(len(flat[0])) for r in range(3)]
    assert interleaved[:size - start] == order[start:].tolist()


def test_the_gluon_loader_with_workers(dataset):
    loader = GluonLoader(dataset, batch_size=5, num_workers=2,
                         batchify_fn=lambda rows: concat_examples(rows, padding=-1))
    batches = list(loader)
    assert [i for b in batches for i in np.asarray(b["id"]).tolist()] == list(range(len(dataset)))
    assert np.asarray(batches[0]["tokens"]).tolist()[:2] == [[-1] * 4, [0, -1, -1, -1]]


def test_torch_loaders_with_workers(dataset):
    torch = pytest.importorskip("torch", reason="the torch doors need PyTorch")
    from dataset_kit.torch import DataLoader

    def batches(workers):
        loader = DataLoader(dataset, batch_size=6, shuffle=True, num_workers=workers,
                            generator=torch.Generator().manual_seed(0),
                            collate_fn=lambda rows: [int(r["id"]) for r in rows])
        return list(loader)

    assert batches(2) == batches(0)
    assert sorted(i for b in batches(0) for i in b) == list(range(len(dataset)))
    plain = torch.utils.data.DataLoader(dataset, batch_size=6, num_workers=2,
                                        collate_fn=lambda rows: [int(r["id"]) for r in rows])
    assert [i for b in plain for i in b] == list(range(len(dataset)))


def test_ragged_rows_cross_the_process_pool_as_two_arrays(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet", reason="the Parquet tests need pyarrow")
    pa = pytest.importorskip("pyarrow", reason="the Parquet tests need pyarrow")
    lengths = np.arange(60) % 7 + 1  # empty and null lists: test_parquet_nulls.py
    pq.write_table(pa.table({"id": np.arange(60), "tokens": pa.array(
        [list(range(k * 40)) for k in lengths], pa.list_(pa.int32()))}),
        tmp_path / "t.parquet", row_group_size=16)
    dataset = ParquetDataset(tmp_path / "t.parquet")
    it = MultiprocessIterator(dataset, 6, repeat=False, n_processes=2,
                              order_sampler=RowGroupOrderSampler(dataset, 1, seed=5))
    serial = SerialIterator(dataset, 6, repeat=False,
                            order_sampler=RowGroupOrderSampler(dataset, 1, seed=5))
    try:
        for got, expected in zip(it, serial, strict=True):
            # The batch arrives as columns, its token lists one RaggedColumn
            # (values + offsets), never a list of per-row objects.
            assert isinstance(got.columns["tokens"], RaggedColumn)
            if len({i // 16 for i in _ids(got)}) == 1:
                # A view of shared memory; a batch that straddles two row
                # groups is joined from its two parts in this process.
                assert not got.columns["tokens"].values.flags.owndata
            assert got.columns["tokens"] == expected.columns["tokens"]
            assert _ids(got) == _ids(expected)
            np.testing.assert_array_equal(concat_examples(got, padding=-1)["tokens"],
                                          concat_examples(expected, padding=-1)["tokens"])
    finally:
        it.finalize()
