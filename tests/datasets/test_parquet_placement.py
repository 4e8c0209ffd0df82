"""With worker processes, the batches that read a row group are built by one worker.

Each worker keeps its own cache of decoded row groups; the engine asks the
dataset which row groups a batch reads (``batch_locality``) and sends it to
the worker that decoded them. The batches themselves never change.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit.datasets import ParquetDataset, RowGroupOrderSampler
from dataset_kit.engine import BatchLocality, BatchParts
from dataset_kit.iterators import MultiprocessIterator, MultithreadIterator, SerialIterator
from tests.datasets.parquet_files import write


class LoggedDecodes(ParquetDataset):
    """A ParquetDataset placed by row group that appends ``pid group`` to a file for every
    row group it decodes."""

    locality_groups = 8

    def __init__(self, log: str, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.log = log

    def read_group(self, group: int):
        with open(self.log, "a") as out:  # one short line per write: appends do not interleave
            out.write(f"{os.getpid()} {group}\n")
        return super().read_group(group)


def _decodes(log: str) -> list[tuple[int, int]]:
    with open(log) as lines:
        return [(int(pid), int(group)) for pid, group in (line.split() for line in lines)]


def _ids(batch) -> list[int]:
    return [int(row["id"]) for row in batch]


def _epoch_ids(it) -> list[int]:
    """The sorted ids of an epoch of ``it``, which is finalized after."""
    try:
        return sorted(i for b in it for i in _ids(b))
    finally:
        it.finalize()


@pytest.mark.parametrize(("groups", "batch", "block"), [
    ([8] * 6, 4, 1),            # batches never straddle row groups
    ([7, 0, 9, 5, 8, 6], 4, 1),  # they do: a straddling batch keeps its row groups together
    ([8] * 8, 4, 2),            # blocks of two row groups
])
def test_each_row_group_is_decoded_by_one_worker_over_an_epoch(tmp_path, groups, batch, block):
    write(tmp_path / "a.parquet", groups)
    log = str(tmp_path / "decodes.log")
    ds = LoggedDecodes(log, tmp_path / "a.parquet", ["id", "tokens"])
    seen = _epoch_ids(MultiprocessIterator(ds, batch, repeat=False, n_processes=2,
                                            order_sampler=RowGroupOrderSampler(ds, block, seed=5)))
    assert seen == list(range(sum(groups)))
    decodes = _decodes(log)
    assert os.getpid() not in {pid for pid, _ in decodes}  # built in the workers only
    read = [g for g, rows in enumerate(groups) if rows]
    assert sorted(g for _, g in decodes) == read  # each row group once, by one worker
    assert len({pid for pid, _ in decodes}) == 2  # and both workers decoded some


def _pad_ids(batch) -> dict:
    """A converter: the batch's ids, and its token lists padded (run where the batch is built)."""
    from dataset_kit import concat_examples
    return concat_examples(batch, padding=-1)


@pytest.mark.parametrize("workers", [2, 3])
def test_straddling_batches_are_built_in_parts_then_converted_as_a_whole(tmp_path, workers):
    # Row groups of 7, 9, 5, ... rows and batches of 4: most batches straddle
    # two row groups, which the engine warmed in two different workers.
    write(tmp_path / "a.parquet", [7, 0, 9, 5, 8, 6, 11])
    log = str(tmp_path / "decodes.log")
    ds = LoggedDecodes(log, tmp_path / "a.parquet", ["id", "tokens"])
    plain = ParquetDataset(tmp_path / "a.parquet", ["id", "tokens"])
    expected = [_pad_ids(b) for b in SerialIterator(
        plain, 4, repeat=False, order_sampler=RowGroupOrderSampler(plain, 1, seed=3))]
    it = MultiprocessIterator(ds, 4, repeat=False, n_processes=workers, converter=_pad_ids,
                              order_sampler=RowGroupOrderSampler(ds, 1, seed=3))
    try:
        got = list(it)
    finally:
        it.finalize()
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected):
        assert set(mine) == set(theirs)
        for key in theirs:
            np.testing.assert_array_equal(mine[key], theirs[key])
    assert sorted(g for _, g in _decodes(log)) == [0, 2, 3, 4, 5, 6]  # each once


def test_a_cache_too_small_for_two_row_groups_reads_none_ahead(tmp_path):
    # Uneven row groups: a warm-up may reach a worker still building its last
    # row group's batches, and with room for one row group it would evict it.
    write(tmp_path / "a.parquet", [7, 0, 9, 5, 8, 6, 11, 5, 9])
    log = str(tmp_path / "decodes.log")
    ds = LoggedDecodes(log, tmp_path / "a.parquet", ["id", "tokens"], cache_bytes=1)
    for seed in range(8):  # the eviction is a race: several orders to lose it in
        open(log, "w").close()
        seen = _epoch_ids(MultiprocessIterator(
            ds, 4, repeat=False, n_processes=2,
            order_sampler=RowGroupOrderSampler(ds, 1, seed=seed)))
        assert seen == list(range(60))
        assert sorted(g for _, g in _decodes(log)) == [0, 2, 3, 4, 5, 6, 7, 8]  # each once


class TimedDecodes(ParquetDataset):
    """Decodes take 0.3 s; appends ``pid group start end`` to a file for each."""

    def __init__(self, log: str, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.log = log

    def read_group(self, group: int):
        start = time.time()
        time.sleep(0.3)
        table = super().read_group(group)
        with open(self.log, "a") as out:
            out.write(f"{os.getpid()} {group} {start} {time.time()}\n")
        return table


def test_the_next_row_group_is_decoded_by_the_other_worker_while_one_is_served(tmp_path):
    # Row groups of 64 rows are 16 batches of 4: more than the prefetch
    # window, so only warming makes two decodes run at once.
    write(tmp_path / "a.parquet", [64] * 4)
    log = str(tmp_path / "decodes.log")
    ds = TimedDecodes(log, tmp_path / "a.parquet", ["id"])
    seen = _epoch_ids(MultiprocessIterator(ds, 4, repeat=False, n_processes=2,
                                            order_sampler=RowGroupOrderSampler(ds, 1, seed=1)))
    assert seen == list(range(256))
    with open(log) as lines:
        decodes = sorted((float(a), float(b), int(pid), int(g))
                         for pid, g, a, b in (line.split() for line in lines))
    assert sorted(g for *_, g in decodes) == [0, 1, 2, 3]
    order = RowGroupOrderSampler(ds, 1, seed=1).epoch_order(0, len(ds))
    groups_in_order = list(dict.fromkeys((order // 64).tolist()))
    pid_of = {g: pid for _, _, pid, g in decodes}
    # Consecutive row groups of the order went to the two workers in turn ...
    assert [pid_of[g] for g in groups_in_order[:2]] == [pid_of[g] for g in groups_in_order[2:]]
    assert pid_of[groups_in_order[0]] != pid_of[groups_in_order[1]]
    # ... and the second was decoded while the first was (not after it).
    first, second = (next(d for d in decodes if d[3] == g) for g in groups_in_order[:2])
    assert second[0] < first[1]


def test_placement_by_row_group_is_on_by_default_and_zero_turns_it_off(tmp_path):
    write(tmp_path / "a.parquet", [4, 4])
    ds = ParquetDataset(tmp_path / "a.parquet", ["id"])
    assert isinstance(ds, BatchParts)
    assert ds.locality_groups == 8
    assert ds.batch_locality(np.array([0, 5])) == (0, 1)
    ds.locality_groups = 0
    assert ds.batch_locality(np.array([0, 1])) is None
    assert ds.batch_parts(np.array([0, 1])) is None


def test_a_batch_is_cut_by_row_group(tmp_path):
    write(tmp_path / "a.parquet", [4, 0, 4, 4])
    ds = ParquetDataset(tmp_path / "a.parquet", ["id", "tokens"])
    parts = ds.batch_parts(np.array([9, 0, 3, 8, 1]))
    assert [(g, where.tolist()) for g, where in parts] == [(0, [1, 2, 4]), (3, [0, 3])]
    assert [(g, w.tolist()) for g, w in ds.batch_parts(np.array([5, 4]))] == [(2, [0, 1])]
    assert ds.batch_parts(np.array([], dtype=np.int64)) is None
    assert ds.unit_examples == 4  # the median of the non-empty row groups


@pytest.mark.parametrize("columns", [["id", "tokens", "x"], ["id", "name", "meta"]])
@settings(max_examples=25, deadline=None)
@given(picks=st.lists(st.integers(0, 28), min_size=1, max_size=20))
def test_joined_parts_are_the_batch_of_the_whole_index_array(files, columns, picks):
    ds = ParquetDataset(files, columns)
    indices = np.array(picks)
    parts = ds.batch_parts(indices)
    if parts is None:  # more than locality_groups row groups
        assert len(np.unique(np.searchsorted(ds.row_group_starts, indices, "right"))) > 8
        return
    answers = [ds.get_batch(indices[where]) for _, where in parts]
    joined = ds.join_parts(answers, [where for _, where in parts])
    whole = ds.get_batch(indices)
    assert type(joined) is type(whole)
    assert [_row(r) for r in joined] == [_row(r) for r in whole]


def _row(row) -> dict:
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in row.items()}


def test_a_parquet_dataset_names_the_row_groups_of_a_batch(tmp_path):
    write(tmp_path / "a.parquet", [4, 0, 4, 4])
    ds = ParquetDataset(tmp_path / "a.parquet", ["id"])
    ds.locality_groups = 8
    assert isinstance(ds, BatchLocality)
    assert ds.batch_locality(np.array([5, 4, 7])) == (2,)
    assert ds.batch_locality(np.array([9, 0, 3])) == (0, 3)
    assert ds.batch_locality(np.array([], dtype=np.int64)) is None


def test_a_batch_of_more_than_a_few_row_groups_has_no_preference(tmp_path):
    write(tmp_path / "a.parquet", [2] * 12)
    ds = ParquetDataset(tmp_path / "a.parquet", ["id"])
    ds.locality_groups = 8
    assert ds.batch_locality(np.arange(0, 24, 2)[:ds.locality_groups]) == \
        tuple(range(ds.locality_groups))
    assert ds.batch_locality(np.arange(0, 24, 2)) is None


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("placement")
    write(folder / "a.parquet", [7, 0, 9, 5, 8])
    write(folder / "b.parquet", [6, 10, 3], start=29)
    return folder


@settings(max_examples=8, deadline=None)
@given(block=st.integers(1, 4), batch=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_placed_batches_are_those_of_no_workers_and_of_three(files, block, batch, seed):
    ds = ParquetDataset(files, ["id", "tokens"])
    ds.locality_groups = 8

    def epochs(**options):
        sampler = RowGroupOrderSampler(ds, block, seed=seed)
        cls = MultiprocessIterator if options else SerialIterator
        it = cls(ds, batch, order_sampler=sampler, **options)
        try:
            return [_ids(next(it)) for _ in range(2 * -(-len(ds) // batch) + 1)]
        finally:
            it.finalize()

    expected = epochs()
    assert epochs(n_processes=2) == expected
    assert epochs(n_processes=3) == expected


class SlowDecodes(LoggedDecodes):
    """Decodes slowly enough that the other threads ask for the row group meanwhile."""

    def read_group(self, group: int):
        time.sleep(0.05)
        return super().read_group(group)


def test_threads_sharing_the_cache_decode_each_row_group_once(tmp_path):
    write(tmp_path / "a.parquet", [8] * 4)
    log = str(tmp_path / "decodes.log")
    ds = SlowDecodes(log, tmp_path / "a.parquet", ["id", "tokens"])
    seen = _epoch_ids(MultithreadIterator(ds, 2, repeat=False, n_threads=3,
                                           order_sampler=RowGroupOrderSampler(ds, 1, seed=2)))
    assert seen == list(range(32))
    assert sorted(g for _, g in _decodes(log)) == [0, 1, 2, 3]


def test_a_failed_decode_is_retried_by_the_thread_that_waited_for_it(tmp_path):
    write(tmp_path / "a.parquet", [8])

    class FailsOnce(ParquetDataset):
        calls = 0

        def read_group(self, group: int):
            FailsOnce.calls += 1
            time.sleep(0.05)
            if FailsOnce.calls == 1:
                raise OSError("the first read fails")
            return super().read_group(group)

    ds = FailsOnce(tmp_path / "a.parquet", ["id"])
    with ThreadPoolExecutor(2) as pool:
        # Whichever asks first reads and fails; the other, which waited for
        # that read, reads again rather than hang or take the failure.
        futures = [pool.submit(ds.group, 0) for _ in range(2)]
        errors = [f.exception(timeout=10) for f in futures]
    assert sorted(type(e).__name__ for e in errors) == ["NoneType", "OSError"]
    assert next(f for f, e in zip(futures, errors) if e is None).result()["id"].tolist() == \
        list(range(8))
    assert FailsOnce.calls == 2


def test_the_torch_door_places_batches_by_row_group_too(tmp_path):
    pytest.importorskip("torch", reason="the torch door needs PyTorch (the torch extra)")
    from dataset_kit.torch import DataLoader

    write(tmp_path / "a.parquet", [8] * 6)
    log = str(tmp_path / "decodes.log")
    ds = LoggedDecodes(log, tmp_path / "a.parquet", ["id"])
    order = RowGroupOrderSampler(ds, 1, seed=4).epoch_order(0, len(ds)).tolist()
    loader = DataLoader(ds, batch_size=4, sampler=order, num_workers=2)
    seen = sorted(int(i) for batch in loader for i in batch["id"])
    assert seen == list(range(48))
    assert sorted(g for _, g in _decodes(log)) == list(range(6))
