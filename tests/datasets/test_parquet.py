"""ParquetDataset over real local files: the index map, the columns, the cache, bad input."""

from __future__ import annotations

import mmap
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit import ExampleBatch, _gather, concat_examples
from dataset_kit.batch import RaggedColumn
from dataset_kit.datasets import ParquetDataset
from dataset_kit.formats import ParquetFormatError
from tests.datasets.parquet_files import check_row, pa, pq, table, write


@settings(max_examples=30, deadline=None)
@given(files=st.lists(st.one_of(st.just(None), st.lists(st.integers(0, 7), max_size=4)),
                      min_size=1, max_size=4),
       picks=st.lists(st.integers(0, 10**6), max_size=12))
def test_every_row_is_the_concatenated_tables_row(tmp_path_factory, files, picks):
    folder = tmp_path_factory.mktemp("map")
    start = 0
    for number, groups in enumerate(files):
        path = folder / f"part-{number}.parquet"
        if groups is None:
            path.write_bytes(b"")  # an empty file: no rows
        else:
            start += write(path, groups, start)
    if all(groups is None for groups in files):
        with pytest.raises(ParquetFormatError, match="all are empty"):
            ParquetDataset(folder)
        return
    ds = ParquetDataset(folder, ["id", "tokens", "name"])
    assert len(ds) == start
    assert [int(ds[i]["id"]) for i in range(len(ds))] == list(range(start))
    if start:
        indices = np.array([p % start for p in picks], dtype=np.int64)
        batch = ds[indices]
        assert [int(row["id"]) for row in batch] == indices.tolist()
        for row, i in zip(batch, indices.tolist()):
            check_row(row, i)


@settings(max_examples=25, deadline=None)
@given(groups=st.lists(st.integers(0, 9), min_size=1, max_size=4),
       decode_rows=st.integers(1, 4), shuffled=st.randoms(use_true_random=False))
def test_row_groups_decoded_a_few_rows_at_a_time_read_the_same_rows(
        tmp_path_factory, groups, decode_rows, shuffled):
    # A row group is decoded parquet.DECODE_ROWS rows at a time and joined:
    # every kind of column must come out whole, wherever the pieces end.
    from dataset_kit.formats import parquet as parquet_format

    path = tmp_path_factory.mktemp("pieces") / "a.parquet"
    rows = write(path, groups)
    if not rows:
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parquet_format, "DECODE_ROWS", decode_rows)
        ds = ParquetDataset(path)
        order = list(range(rows))
        shuffled.shuffle(order)
        for row, i in zip(ds[np.array(order)], order):
            check_row(row, i)


def test_values_of_every_column_kind(tmp_path):
    write(tmp_path / "a.parquet", [4, 3, 5])
    ds = ParquetDataset(tmp_path / "a.parquet")
    for i in range(len(ds)):
        check_row(ds[i], i)
    assert ds[2]["x"].dtype == np.float32 and ds[2]["tokens"].dtype == np.int32
    assert ds[-1]["id"] == 11 and [r["id"] for r in ds[10:4:-3]] == [10, 7]
    with pytest.raises(IndexError):
        ds[12]


def test_fixed_width_columns_come_as_one_batch_of_columns(tmp_path):
    write(tmp_path / "a.parquet", [3, 3])
    ds = ParquetDataset(tmp_path / "a.parquet", ["id", "x"])
    batch = ds[np.array([5, 0, 3])]
    assert isinstance(batch, ExampleBatch)
    arrays = concat_examples(batch)
    np.testing.assert_array_equal(arrays["id"], [5, 0, 3])
    np.testing.assert_array_equal(arrays["x"], [[5, -5], [0, 0], [3, -3]])
    ragged = ParquetDataset(tmp_path / "a.parquet", ["tokens"])[np.array([4, 1])]
    np.testing.assert_array_equal(concat_examples(ragged, padding=-1)["tokens"],
                                  [[0, 1, 2, 3], [0, -1, -1, -1]])


def test_in_a_worker_a_batch_is_gathered_and_padded_where_it_travels(tmp_path):
    # The worker's block (an arena) receives the fixed columns' rows and the
    # padded tokens: the batch needs no copy into shared memory after.
    write(tmp_path / "a.parquet", [3, 3])
    ds = ParquetDataset(tmp_path / "a.parquet", ["id", "x", "tokens"])
    for rows in ([2, 0, 1], [5, 0, 4]):  # one row group, and two joined
        arena = _gather.Arena(mmap.mmap(-1, 1 << 16))
        previous = _gather.install(arena)
        try:
            arrays = concat_examples(ds[np.array(rows)], padding=-1)
        finally:
            _gather.install(previous)
        assert all(arena.offset_of(arrays[name]) is not None for name in arrays)
        np.testing.assert_array_equal(arrays["id"], rows)
        np.testing.assert_array_equal(arrays["x"], [[r, -r] for r in rows])
        width = max(r % 5 for r in rows)
        np.testing.assert_array_equal(
            arrays["tokens"], [list(range(r % 5)) + [-1] * (width - r % 5) for r in rows])


@settings(max_examples=25, deadline=None)
@given(picks=st.lists(st.integers(0, 10**6), min_size=1, max_size=40))
def test_a_list_column_without_nulls_comes_as_one_ragged_column_across_row_groups(
        tmp_path_factory, picks):
    # No empty list, so the statistics say no null (test_parquet_nulls.py
    # has the columns whose statistics say there may be).
    path = tmp_path_factory.mktemp("ragged") / "a.parquet"
    pq.write_table(pa.table({"id": np.arange(15), "tokens": pa.array(
        [list(range(1 + i % 4)) for i in range(15)], pa.list_(pa.int32()))}), path,
        row_group_size=4)
    ds = ParquetDataset(path)
    indices = np.array([p % len(ds) for p in picks], dtype=np.int64)
    batch = ds[indices]
    # Rows of several row groups, in the batch's order, as values + offsets.
    assert isinstance(batch, ExampleBatch) and isinstance(batch.columns["tokens"], RaggedColumn)
    assert [r["tokens"].tolist() for r in batch] == [list(range(1 + i % 4)) for i in indices]
    assert [int(r["id"]) for r in batch] == indices.tolist()


def test_a_list_column_that_may_hold_nulls_comes_as_a_ragged_column_with_none(tmp_path):
    tokens = pa.array([[1, 2], None, [3]], pa.list_(pa.int32()))
    pq.write_table(pa.table({"tokens": tokens}), tmp_path / "n.parquet")
    batch = ParquetDataset(tmp_path / "n.parquet")[np.array([2, 1, 0])]
    assert isinstance(batch, ExampleBatch) and isinstance(batch.columns["tokens"], RaggedColumn)
    assert [None if r["tokens"] is None else r["tokens"].tolist() for r in batch] == \
        [[3], None, [1, 2]]


@pytest.mark.parametrize("options", [
    {"compression": "snappy"}, {"compression": "gzip"}, {"compression": "zstd"},
    {"compression": "none"}, {"use_dictionary": False}, {"use_dictionary": True},
    {"compression": "zstd", "write_page_checksum": True, "data_page_size": 64},
])
def test_codecs_and_encodings_read_the_same_rows(tmp_path, options):
    write(tmp_path / "a.parquet", [50, 7, 0, 13], **options)
    ds = ParquetDataset(tmp_path / "a.parquet")
    for row, i in zip(ds[np.arange(len(ds))[::-1]], range(len(ds) - 1, -1, -1)):
        check_row(row, i)


def test_nulls_are_nan_in_number_columns_and_none_elsewhere(tmp_path):
    pq.write_table(pa.table({
        "n": pa.array([1, None, 3], pa.int64()), "f": pa.array([0.5, None, 1.5], pa.float32()),
        "s": pa.array(["a", None, "c"]), "l": pa.array([[1], None, []], pa.list_(pa.int64())),
        "full": pa.array([7, 8, 9], pa.int16())}), tmp_path / "n.parquet")
    ds = ParquetDataset(tmp_path / "n.parquet")
    row = ds[1]
    assert np.isnan(row["n"]) and np.isnan(row["f"]) and row["s"] is None and row["l"] is None
    assert ds[0]["n"] == 1.0 and ds[0]["n"].dtype == np.float64
    assert ds[0]["full"].dtype == np.int16  # statistics say no nulls: its own dtype
    assert ds[2]["l"].tolist() == []


def test_dictionary_typed_columns_read_as_their_values(tmp_path):
    column = pa.array(["b", "a", "b"]).dictionary_encode()
    pq.write_table(pa.table({"c": column}), tmp_path / "d.parquet")
    assert [r["c"] for r in ParquetDataset(tmp_path / "d.parquet")[0:3]] == ["b", "a", "b"]


def test_hive_partitions_become_columns_and_files_sort_by_path(tmp_path):
    for split, start in (("train", 0), ("test", 100)):
        (tmp_path / f"split={split}").mkdir()
        write(tmp_path / f"split={split}" / "p.parquet", [2], start)
    (tmp_path / "_SUCCESS").write_text("")
    ds = ParquetDataset(tmp_path, ["id", "split"])
    assert [(int(r["id"]), r["split"]) for r in ds[0:4]] == [
        (100, "test"), (101, "test"), (0, "train"), (1, "train")]


def test_a_glob_and_a_list_of_files(tmp_path):
    write(tmp_path / "a.parquet", [2], 0)
    write(tmp_path / "b.parquet", [3], 2)
    assert len(ParquetDataset(str(tmp_path / "*.parquet"))) == 5
    ds = ParquetDataset([tmp_path / "b.parquet", tmp_path / "a.parquet"], ["id"])
    assert [int(r["id"]) for r in ds[0:5]] == [2, 3, 4, 0, 1]
    assert ds.locate_file(3) == (str(tmp_path / "a.parquet"), 0, 0)


def test_a_shuffled_batch_reads_each_row_group_once_and_the_cache_is_bounded(tmp_path):
    write(tmp_path / "a.parquet", [100] * 8)
    one_group = pq.ParquetFile(tmp_path / "a.parquet").read_row_group(0).nbytes
    ds = ParquetDataset(tmp_path / "a.parquet", cache_bytes=3 * one_group)
    reads: list[int] = []
    read = ds.read_group
    ds.read_group = lambda g: (reads.append(g), read(g))[1]  # type: ignore[method-assign]
    batch = ds[np.random.default_rng(0).permutation(800)[:400]]
    assert sorted(reads) == list(range(8))
    assert [int(r["id"]) for r in batch] == np.random.default_rng(0).permutation(800)[:400]\
        .tolist()
    assert ds.cached_bytes() <= 3 * one_group
    ds[np.arange(700, 800)]  # the last group read is still cached
    assert sorted(reads) == list(range(8))


def test_room_for_a_row_group_is_made_before_it_is_decoded(tmp_path):
    # Dropped before the decode, the old groups' memory is there for the new
    # one to reuse, instead of fresh pages faulted in beside them.
    write(tmp_path / "a.parquet", [100] * 6)
    sizes = []
    learn = ParquetDataset(tmp_path / "a.parquet")
    for group in range(6):
        before = learn.cached_bytes()
        learn[100 * group]
        sizes.append(learn.cached_bytes() - before)
    ds = ParquetDataset(tmp_path / "a.parquet", cache_bytes=2 * max(sizes))
    held_at_read: list[int] = []
    read = ds.read_group
    ds.read_group = lambda g: (held_at_read.append(ds.cached_bytes()), read(g))[1]  # type: ignore[method-assign]
    for group in range(6):
        assert int(ds[100 * group + 7]["id"]) == 100 * group + 7
    # Two groups fit; before each read from the third on, the older of the
    # two is dropped, so only the group before it is held.
    assert held_at_read == [0, sizes[0]] + sizes[1:5], (held_at_read, sizes)
    assert ds.cached_bytes() == sizes[4] + sizes[5]


def test_reading_many_files_keeps_no_descriptor_open(tmp_path):
    for k in range(40):
        write(tmp_path / f"{k:02}.parquet", [2], start=2 * k)
    before = len(os.listdir("/proc/self/fd"))
    ds = ParquetDataset(tmp_path, ["id"], cache_bytes=0)
    assert [int(r["id"]) for r in ds[np.arange(80)]] == list(range(80))
    assert len(os.listdir("/proc/self/fd")) < before + 5


def test_a_small_cache_still_keeps_the_row_group_in_use(tmp_path):
    write(tmp_path / "a.parquet", [10, 10])
    ds = ParquetDataset(tmp_path / "a.parquet", ["id"], cache_bytes=0)
    assert [int(r["id"]) for r in ds[np.array([15, 2, 11])]] == [15, 2, 11]


# -- bad input, each with a real file --

def test_a_truncated_file_is_named(tmp_path):
    path = tmp_path / "t.parquet"
    write(path, [20, 20])
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ParquetFormatError, match=f"{path}.*footer"):
        ParquetDataset(path)


def test_a_corrupt_footer_is_named(tmp_path):
    path = tmp_path / "f.parquet"
    write(path, [20])
    data = bytearray(path.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    data[-8 - footer:-8] = b"\xff" * footer
    path.write_bytes(bytes(data))
    with pytest.raises(ParquetFormatError, match=str(path)):
        ParquetDataset(path)


def test_a_corrupt_page_is_named_with_its_row_group(tmp_path):
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"v": np.arange(1000, dtype=np.int64)}), path,
                   row_group_size=500, compression="none", write_page_checksum=True,
                   use_dictionary=False)
    metadata = pq.ParquetFile(path).metadata
    chunk = metadata.row_group(1).column(0)
    data = bytearray(path.read_bytes())
    middle = chunk.data_page_offset + chunk.total_compressed_size // 2
    data[middle] ^= 0xFF
    path.write_bytes(bytes(data))
    ds = ParquetDataset(path)
    assert int(ds[0]["v"]) == 0  # row group 0 is intact
    with pytest.raises(ParquetFormatError, match=rf"{path}: row group 1 .*"):
        ds[700]


def test_schemas_that_disagree_name_the_file_and_the_column(tmp_path):
    pq.write_table(pa.table({"a": [1], "b": [1.0]}), tmp_path / "1.parquet")
    pq.write_table(pa.table({"a": [1], "b": ["x"]}), tmp_path / "2.parquet")
    with pytest.raises(ParquetFormatError, match=r"2\.parquet: column 'b' is string"):
        ParquetDataset(tmp_path)
    pq.write_table(pa.table({"a": [1]}), tmp_path / "2.parquet")
    with pytest.raises(ParquetFormatError, match=r"2\.parquet has no column 'b'"):
        ParquetDataset(tmp_path)
    assert len(ParquetDataset(tmp_path, ["a"])) == 2
    pq.write_table(pa.table({"a": [1], "b": [1.0], "c": [2]}), tmp_path / "2.parquet")
    with pytest.raises(ParquetFormatError, match=r"2\.parquet has column 'c'"):
        ParquetDataset(tmp_path)


def test_a_missing_column_and_a_type_without_numpy_form_are_named(tmp_path):
    path = tmp_path / "m.parquet"
    pq.write_table(pa.table({"a": [1], "m": pa.array([[("k", 1)]], pa.map_(pa.string(),
                                                                             pa.int64()))}), path)
    with pytest.raises(ParquetFormatError, match=f"{path}: column 'm' of type map"):
        ParquetDataset(path)
    with pytest.raises(ParquetFormatError, match=f"{path} has no column 'zz'"):
        ParquetDataset(path, ["a", "zz"])
    assert int(ParquetDataset(path, ["a"])[0]["a"]) == 1


def test_an_empty_file_and_a_file_without_row_groups_hold_no_rows(tmp_path):
    (tmp_path / "0.parquet").write_bytes(b"")
    pq.write_table(table(0, 0), tmp_path / "1.parquet")
    write(tmp_path / "2.parquet", [0, 3, 0])
    ds = ParquetDataset(tmp_path, ["id"])
    assert len(ds) == 3 and [int(r["id"]) for r in ds[0:3]] == [0, 1, 2]
    assert ds[0]["id"].dtype == np.int64  # an empty row group has no statistics, no null


def test_arguments_are_checked(tmp_path):
    write(tmp_path / "a.parquet", [1])
    with pytest.raises(FileNotFoundError, match="nothing"):
        ParquetDataset(tmp_path / "nothing")
    with pytest.raises(TypeError, match="columns"):
        ParquetDataset(tmp_path, "id")
    with pytest.raises(TypeError, match="source"):
        ParquetDataset([])
    with pytest.raises(ValueError, match="cache_bytes"):
        ParquetDataset(tmp_path, cache_bytes=-1)
    with pytest.raises(ValueError, match="timeout"):
        ParquetDataset(tmp_path, timeout=0)
    with pytest.raises(ValueError, match="twice"):
        ParquetDataset(tmp_path, ["id", "id"])
    assert os.path.exists(tmp_path / "a.parquet")


def test_lists_of_strings_and_nested_structs_come_as_python_values(tmp_path):
    nested = pa.struct([("ids", pa.list_(pa.int32())), ("who", pa.string())])
    pq.write_table(pa.table({
        "words": pa.array([["a", "b"], [], None], pa.list_(pa.string())),
        "deep": pa.array([{"ids": [1, 2], "who": "x"}, {"ids": [], "who": None}, None], nested),
        "pairs": pa.array([[1, 2], [3, 4], [5, 6]], pa.list_(pa.int64()))}), tmp_path / "n.parquet")
    rows = ParquetDataset(tmp_path / "n.parquet")[0:3]
    assert [r["words"] for r in rows] == [["a", "b"], [], None]
    assert [r["deep"] for r in rows] == [{"ids": [1, 2], "who": "x"}, {"ids": [], "who": None},
                                         None]
    assert [r["pairs"].tolist() for r in rows] == [[1, 2], [3, 4], [5, 6]]  # one row each


def test_without_pyarrow_the_error_names_the_extra(tmp_path, monkeypatch):
    write(tmp_path / "a.parquet", [1])
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError, match=r"dataset_kit\[parquet\]"):
        ParquetDataset(tmp_path)
