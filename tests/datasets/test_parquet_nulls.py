"""List columns with empty and null lists stay columnar: RaggedColumns with null rows.

Parquet's footer statistics count an empty list as a null of its column, so
a list column's batch type must not follow them: every file here is written
by pyarrow, and every row is compared with pyarrow's own ``to_pylist()``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_kit import ExampleBatch, concat_examples
from dataset_kit.batch import RaggedColumn
from dataset_kit.datasets import ParquetDataset, RowGroupOrderSampler
from dataset_kit.iterators import MultiprocessIterator, SerialIterator
from dataset_kit.loader import DataLoader as GluonLoader
from dataset_kit.loader.batchify import Dict, Pad
from tests.datasets.parquet_files import pa, pq

# Row groups of these sizes, one of zero rows among them.
GROUPS = [5, 0, 7, 1, 6]
KINDS = ["empty", "null", "both"]


def _tokens(kind: str, i: int) -> list | None:
    """Row ``i``'s token list: empty lists, null lists or both among lists of 1-4 ids."""
    if i % 3 == 1 and kind in ("empty", "both"):
        return []
    if i % 4 == 2 and kind in ("null", "both"):
        return None
    return [i * 10 + k for k in range(1 + i % 4)]


def _write(path, kind: str) -> None:
    schema = pa.schema([("id", pa.int64()), ("tokens", pa.list_(pa.int32())),
                        ("scores", pa.large_list(pa.float32())),
                        ("pair", pa.list_(pa.int16(), 2))])
    start = 0
    with pq.ParquetWriter(str(path), schema) as writer:
        for size in GROUPS:
            ids = range(start, start + size)
            tokens = [_tokens(kind, i) for i in ids]
            writer.write_table(pa.table({
                "id": pa.array(list(ids), pa.int64()),
                "tokens": pa.array(tokens, pa.list_(pa.int32())),
                "scores": pa.array([None if t is None else [v / 2 for v in t] for t in tokens],
                                   pa.large_list(pa.float32())),
                "pair": pa.array([None if t is None else [i, -i] for i, t in zip(ids, tokens)],
                                 pa.list_(pa.int16(), 2)),
            }, schema=schema), row_group_size=max(size, 1))
            start += size


@pytest.fixture(params=KINDS)
def parquet(request, tmp_path):
    path = tmp_path / f"{request.param}.parquet"
    _write(path, request.param)
    return path, pq.read_table(path).to_pylist()


def _ragged_names(kind: str) -> tuple[str, ...]:
    """The columns that are RaggedColumns: the lists, and the fixed-size list if a row
    is null."""
    return ("tokens", "scores") if kind == "empty" else ("tokens", "scores", "pair")


def _plain(row: dict) -> dict:
    """A row as pyarrow's ``to_pylist`` gives it (lists, Python numbers, None)."""
    return {k: v.tolist() if isinstance(v, (np.ndarray, np.generic)) else v
            for k, v in row.items()}


def test_the_files_have_a_row_group_of_zero_rows_and_statistics_that_say_nulls(parquet):
    path, _ = parquet
    metadata = pq.ParquetFile(path).metadata
    assert [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)] == GROUPS
    # The leaf's null count holds the empty and the null lists alike.
    assert metadata.row_group(0).column(1).statistics.null_count > 0


def test_rows_slices_and_index_arrays_equal_pyarrows_rows(parquet):
    path, expected = parquet
    ds = ParquetDataset(path)
    assert len(ds) == len(expected) == sum(GROUPS)
    assert [_plain(ds[i]) for i in range(len(ds))] == expected
    assert [_plain(ds[i]) for i in range(-len(ds), 0)] == expected
    for part in (slice(None), slice(3, 14, 2), slice(None, None, -1), slice(15, 2, -4)):
        assert [_plain(r) for r in ds[part]] == expected[part]
    # Empty lists are empty arrays of the column's dtype, null lists None.
    row = ds[1]
    if row["tokens"] is not None:
        assert row["tokens"].dtype == np.int32 and row["scores"].dtype == np.float32


@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(KINDS), picks=st.lists(st.integers(0, 10**6), max_size=40))
def test_a_batch_of_any_rows_is_ragged_columns_equal_to_pyarrows_rows(tmp_path_factory,
                                                                     kind, picks):
    path = tmp_path_factory.mktemp("nulls") / "a.parquet"
    _write(path, kind)
    expected = pq.read_table(path).to_pylist()
    ds = ParquetDataset(path)
    indices = np.array([p % len(ds) for p in picks], dtype=np.int64)
    batch = ds[indices]
    if not len(indices):
        assert batch == []
        return
    # The same batch type whatever the statistics say: columns, lists ragged
    # (a fixed-size list too when a row is null: None is no row of a 2-D array).
    assert isinstance(batch, ExampleBatch)
    for name in _ragged_names(kind):
        assert isinstance(batch.columns[name], RaggedColumn)
    assert [_plain(r) for r in batch] == [expected[i] for i in indices.tolist()]


def test_a_list_column_is_ragged_with_or_without_nulls_in_its_statistics(tmp_path):
    # Only non-empty lists: the statistics say no null, and the column is the
    # same RaggedColumn (its fixed-size list a 2-D array, as no row is null).
    path = tmp_path / "full.parquet"
    pq.write_table(pa.table({"tokens": pa.array([[1], [2, 3]], pa.list_(pa.int32())),
                             "pair": pa.array([[1, 2], [3, 4]], pa.list_(pa.int16(), 2))}),
                   path)
    batch = ParquetDataset(path)[np.array([1, 0])]
    assert isinstance(batch.columns["tokens"], RaggedColumn)
    assert batch.columns["tokens"].valid is None
    assert batch.columns["pair"].tolist() == [[3, 4], [1, 2]]


def test_concat_examples_pads_empty_lists_and_refuses_a_null_naming_it(tmp_path):
    path = tmp_path / "empty.parquet"
    _write(path, "empty")
    ds = ParquetDataset(path, ["id", "tokens"])
    padded = concat_examples(ds[np.array([1, 0, 3])], padding=-1)
    assert padded["tokens"].tolist() == [[-1, -1, -1, -1], [0, -1, -1, -1], [30, 31, 32, 33]]
    path = tmp_path / "null.parquet"
    _write(path, "null")
    ds = ParquetDataset(path, ["id", "tokens"])
    with pytest.raises(ValueError, match=r"key 'tokens' of example 1 is None \(a null list"):
        concat_examples(ds[np.array([0, 2, 3])], padding=-1)
    with pytest.raises(ValueError, match=r"key 'tokens' of example 0 is None"):
        concat_examples(ds[np.array([2])])


def test_the_torch_collate_refuses_a_null_list_naming_it(tmp_path):
    pytest.importorskip("torch", reason="the torch collate needs PyTorch")
    from dataset_kit.torch._collate import collate_to_numpy

    path = tmp_path / "both.parquet"
    _write(path, "both")
    ds = ParquetDataset(path, ["id", "pair"])
    got = collate_to_numpy(ds[np.array([0, 1, 3])])  # no null: PyTorch's stacked columns
    assert got["pair"].tolist() == [[0, 0], [1, -1], [3, -3]]
    with pytest.raises(TypeError, match=r"key 'pair' of example 1 is None"):
        collate_to_numpy(ds[np.array([0, 2])])


def test_the_gluon_pad_refuses_a_null_list_naming_it(tmp_path):
    path = tmp_path / "both.parquet"
    _write(path, "both")
    ds = ParquetDataset(path, ["tokens"])
    pad = Dict(tokens=Pad(pad_val=-1))
    assert pad(ds[np.array([1, 3])])["tokens"].tolist() == [[-1, -1, -1, -1],
                                                           [30, 31, 32, 33]]
    with pytest.raises(ValueError, match="Pad: example 1 is None"):
        pad(ds[np.array([3, 2])])
    loader = GluonLoader(ds, batch_size=4, num_workers=2, batchify_fn=lambda rows: [
        None if r["tokens"] is None else r["tokens"].tolist() for r in rows])
    expected = [r["tokens"] for r in pq.read_table(path).to_pylist()]
    assert [t for batch in loader for t in batch] == expected


def test_a_batch_crosses_two_worker_processes_with_its_nulls(parquet):
    path, expected = parquet
    ds = ParquetDataset(path)

    def make(cls, **options):
        return cls(ds, 4, repeat=False, order_sampler=RowGroupOrderSampler(ds, 2, seed=7),
                   **options)

    serial = make(SerialIterator)
    it = make(MultiprocessIterator, n_processes=2)
    try:
        seen = 0
        for got, reference in zip(it, serial, strict=True):
            assert isinstance(got, ExampleBatch)
            for name in _ragged_names(path.stem):
                assert isinstance(got.columns[name], RaggedColumn)
                assert got.columns[name] == reference.columns[name]
            assert [_plain(r) for r in got] == [expected[int(r["id"])] for r in got]
            seen += len(got)
        assert seen == len(expected)
    finally:
        it.finalize()


def test_a_null_inside_a_list_of_integers_names_the_file_row_group_and_column(tmp_path):
    path = tmp_path / "inner.parquet"
    pq.write_table(pa.table({"tokens": pa.array([[1], [2], [None, 3]], pa.list_(pa.int32()))}),
                   path, row_group_size=2)
    ds = ParquetDataset(path)
    assert ds[0]["tokens"].tolist() == [1]  # row group 0 holds no null value
    with pytest.raises(ValueError, match=rf"{path}: row group 1, column 'tokens': 1 nulls "
                                         rf"inside the lists"):
        ds[2]
    floats = tmp_path / "floats.parquet"
    pq.write_table(pa.table({"v": pa.array([[1.5, None], None, []], pa.list_(pa.float64()))}),
                   floats)
    rows = ParquetDataset(floats)[0:3]
    assert rows[0]["v"][0] == 1.5 and np.isnan(rows[0]["v"][1])
    assert rows[1]["v"] is None and rows[2]["v"].tolist() == []
