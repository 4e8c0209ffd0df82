"""ShardWriter(format='parquet'): the same samples as our layout, through StreamingDataset."""

import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dataset_kit.cli import main
from dataset_kit.formats.shards._columns import DECODE, ENCODE
from dataset_kit.iterators import SerialIterator
from dataset_kit.shards import (
    Manifest,
    ShardFormatError,
    ShardOrderSampler,
    ShardWriter,
    StreamingDataset,
)

pa = pytest.importorskip("pyarrow", reason="Parquet shards need pyarrow (the parquet extra)")
pq = pytest.importorskip("pyarrow.parquet", reason="Parquet shards need pyarrow")

COLUMNS = {"a": "ndarray", "b": "bytes", "s": "str", "i": "int", "f": "float", "j": "json",
           "jpg": "jpeg", "png": "png", "img": "image"}


def image(kind, value=0):
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray((np.arange(48, dtype=np.uint8) + value).reshape(4, 4, 3)).save(
        out, format="JPEG" if kind == "jpeg" else "PNG")
    return out.getvalue()


def row(i):
    return {"a": np.arange(i * 3, dtype=np.int16).reshape(i, 3), "b": bytes([i]) * i,
            "s": f"é{i}", "i": -i * 10**12, "f": i / 3, "j": {"k": [i, None], "t": "x"},
            "jpg": image("jpeg"), "png": image("png", i),
            "img": image("jpeg" if i % 2 else "png", i)}


def write_both(tmp_path, rows, columns=COLUMNS, shard_size=2000, **options):
    """The rows written in both formats; return ``{format: StreamingDataset}``."""
    out = {}
    for fmt in ("shards", "parquet"):
        with ShardWriter(tmp_path / fmt, columns, shard_size=shard_size, format=fmt,
                         **options) as writer:
            for r in rows:
                writer.write(r)
        out[fmt] = StreamingDataset(tmp_path / fmt, local=tmp_path / f"cache-{fmt}")
    return out


def assert_same(got, expected):
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, np.ndarray):
            assert isinstance(got[key], np.ndarray), key
            assert (got[key].dtype, got[key].shape) == (value.dtype, value.shape), key
            assert got[key].tobytes() == value.tobytes(), key
        else:
            assert type(got[key]) is type(value) and got[key] == value, key


@pytest.mark.parametrize("group_bytes", [1 << 20, 1500])
def test_every_encoding_reads_back_as_our_layout_gives_it(tmp_path, monkeypatch, group_bytes):
    from dataset_kit.formats.shards import _parquet

    monkeypatch.setattr(_parquet, "ROW_GROUP_BYTES", group_bytes)  # 1500: a few rows a group
    rows = [row(i) for i in range(30)]
    ds = write_both(tmp_path, rows, shard_size=6000)
    assert len(ds["parquet"].manifest.shards) > 2
    groups = pq.ParquetFile(tmp_path / "parquet" / "shard.00000.parquet").metadata.num_row_groups
    assert groups == 1 if group_bytes > 6000 else groups > 1
    assert ds["parquet"].manifest.shard_format == "parquet"
    assert ds["parquet"].manifest.compression == "zstd"
    for i in range(30):
        assert_same(ds["parquet"][i], ds["shards"][i])
        np.testing.assert_array_equal(ds["parquet"][i]["a"], rows[i]["a"])
        assert ds["parquet"][i]["j"] == rows[i]["j"]
    # Batches: every shard and row group, in a shuffled order.
    order = np.random.default_rng(0).permutation(30)
    for got, expected in zip(ds["parquet"][order], ds["shards"][order]):
        assert_same(got, expected)
    raw = StreamingDataset(tmp_path / "parquet", local=tmp_path / "raw", decode_images=False)
    assert raw[3]["png"] == rows[3]["png"] and raw[3]["img"] == rows[3]["img"]


def test_a_parquet_shard_is_an_ordinary_parquet_file(tmp_path):
    rows = [{"tokens": np.arange(i, dtype=np.int32), "label": i} for i in range(50)]
    write_both(tmp_path, rows, {"tokens": "ndarray", "label": "int"}, shard_size=10**6)
    table = pq.read_table(tmp_path / "parquet" / "shard.00000.parquet")
    assert table.column_names == ["tokens", "tokens.shape", "label"]
    assert table.column("tokens").to_pylist()[5] == [0, 1, 2, 3, 4]
    assert table.column("label").to_pylist() == list(range(50))
    meta = pq.ParquetFile(tmp_path / "parquet" / "shard.00000.parquet").metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"


def test_large_shards_have_row_groups_of_about_a_mebibyte(tmp_path):
    rows = [{"x": np.full(1 << 14, i, np.float32)} for i in range(200)]  # 64 KiB each
    write_both(tmp_path, rows, {"x": "ndarray"}, shard_size=64 << 20)
    meta = pq.ParquetFile(tmp_path / "parquet" / "shard.00000.parquet").metadata
    assert meta.num_rows == 200 and 8 <= meta.num_row_groups <= 16


@settings(max_examples=60, deadline=None)
@given(st.lists(hnp.arrays(
    st.sampled_from(["?", "u1", "i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f2", "<f4",
                     "<f8"]).flatmap(lambda d: st.just(np.dtype(d))),
    hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)),
    min_size=1, max_size=6).filter(lambda arrays: len({a.dtype for a in arrays}) == 1))
def test_any_shape_and_dtype_round_trips_as_in_our_layout(arrays):
    from dataset_kit.formats.shards import _parquet
    from dataset_kit.formats.shards._parquet import ParquetRows, ParquetShardFile

    rows = ParquetRows({"x": "ndarray"})
    cells = [[rows.cell("x", "ndarray", a)[0]] for a in arrays]
    # Row groups of two rows, read in an order that crosses them.
    data = rows.file_bytes(cells, len(cells) * _parquet.ROW_GROUP_BYTES // 2)
    shard = ParquetShardFile("memory.parquet", len(arrays), {"x": "ndarray"}, data=data)
    try:
        got = shard.columns_of(np.arange(len(arrays))[::-1])[0][::-1]
    finally:
        shard.close()
    for back, array in zip(got, arrays):
        ours = DECODE["ndarray"](ENCODE["ndarray"](array))
        assert (back.dtype, back.shape) == (ours.dtype, ours.shape) == (array.dtype, array.shape)
        assert back.tobytes() == ours.tobytes() == array.tobytes()


def test_a_value_the_parquet_column_cannot_hold_names_sample_and_column(tmp_path):
    with ShardWriter(tmp_path / "out", {"x": "ndarray", "y": "int"}, format="parquet") as w:
        w.write({"x": np.zeros(2, np.float32), "y": 1})
        with pytest.raises(TypeError, match=r"sample 1, column 'x' \(ndarray\): .*one dtype "
                                             r"\(float32, from the first sample\), got float64"):
            w.write({"x": np.zeros(2), "y": 2})
        with pytest.raises(TypeError, match=r"sample 1, column 'x' \(ndarray\): .*got dtype "
                                             r"<c16"):
            w.write({"x": np.zeros(2, complex), "y": 2})
        with pytest.raises(TypeError, match=r"sample 1, column 'y' \(int\)"):
            w.write({"x": np.zeros(2, np.float32), "y": "two"})
        w.write({"x": np.ones((1, 2), np.float32), "y": 2})
    ds = StreamingDataset(tmp_path / "out", local=tmp_path / "cache")
    assert len(ds) == 2 and ds[1]["x"].shape == (1, 2)


def test_bad_arguments_name_the_argument_and_value(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"format must be one of \['shards', 'parquet'\], "
                                         r"got 'arrow'"):
        ShardWriter(tmp_path / "a", {"y": "int"}, format="arrow")
    with pytest.raises(ValueError, match="compression 'zstd' is for format='shards'"):
        ShardWriter(tmp_path / "b", {"y": "int"}, compression="zstd", format="parquet")
    with pytest.raises(ValueError, match="column 'x.shape' is also the shape column"):
        ShardWriter(tmp_path / "c", {"x": "ndarray", "x.shape": "int"}, format="parquet")
    with pytest.raises(SystemExit):
        main(["shards", "write", "m:d", str(tmp_path / "d"), "--format", "arrow"])
    assert "--format: invalid choice: 'arrow'" in capsys.readouterr().err


def test_parquet_input_converts_to_parquet_shards(tmp_path, capsys):
    from tests.datasets.parquet_files import check_row, write

    (tmp_path / "in").mkdir()
    write(tmp_path / "in" / "a.parquet", [4, 0, 3])
    write(tmp_path / "in" / "b.parquet", [5], start=7)
    assert main(["shards", "write", str(tmp_path / "in"), str(tmp_path / "out"),
                 "--format", "parquet", "--shard-size", "200", "--no-progress"]) == 0
    assert "12 samples in" in capsys.readouterr().out
    ds = StreamingDataset(tmp_path / "out", local=tmp_path / "cache")
    assert ds.manifest.shard_format == "parquet" and len(ds.manifest.shards) > 1
    for i in range(12):
        check_row(ds[i], i)


def test_a_manifest_without_shard_format_is_our_layout(tmp_path):
    with ShardWriter(tmp_path / "old", {"y": "int"}) as writer:
        for i in range(5):
            writer.write({"y": i})
    text = (tmp_path / "old" / "index.json").read_text()
    # What every manifest written before Parquet shards looks like: no such field,
    # and the same text (so the sha256 their checkpoints recorded still matches).
    assert "shard_format" not in json.loads(text)
    manifest = Manifest.from_json(text, "index.json")
    assert manifest.shard_format == "shards" and manifest.to_json() == text
    assert StreamingDataset(tmp_path / "old", local=tmp_path / "cache")[4] == {"y": 4}


def test_a_shuffled_epoch_and_its_resume_read_parquet_shards_as_ours(tmp_path):
    rows = [{"x": np.full((2, 2), i, np.int64), "y": i, "s": str(i)} for i in range(90)]
    ds = write_both(tmp_path, rows, {"x": "ndarray", "y": "int", "s": "str"}, shard_size=400)

    def batches(dataset, state=None, count=13):
        it = SerialIterator(dataset, 7, order_sampler=ShardOrderSampler(dataset, 2, seed=3))
        if state is not None:
            it.load_state_dict(state)
        return [next(it) for _ in range(count)], it.state_dict()

    for fmt, dataset in ds.items():
        epoch, _ = batches(dataset)
        seen = [r["y"] for batch in epoch for r in batch]
        assert sorted(seen[:90]) == list(range(90)), fmt
        for batch in epoch:
            for r in batch:
                assert_same(r, rows[r["y"]])
    # The shards' boundaries differ (sizes are counted per format): compare the
    # Parquet epoch with itself resumed on a fresh dataset.
    full, _ = batches(ds["parquet"], count=20)
    _, state = batches(StreamingDataset(tmp_path / "parquet", local=tmp_path / "c2"), count=9)
    resumed, _ = batches(StreamingDataset(tmp_path / "parquet", local=tmp_path / "c3"), state,
                         count=11)
    assert [[r["y"] for r in b] for b in resumed] == [[r["y"] for r in b] for b in full[9:]]


def corrupt(tmp_path, monkeypatch, damage):
    """Write a Parquet set, damage shard 1, and give the manifest its new bytes (as a
    writer with a bug would): the cache's sha256 check passes, the reader must not."""
    import hashlib

    from dataset_kit.formats.shards import _parquet

    monkeypatch.setattr(_parquet, "ROW_GROUP_BYTES", 4000)  # several row groups a shard

    rows = [{"x": np.arange(50, dtype=np.int64) + i, "y": i} for i in range(200)]
    with ShardWriter(tmp_path / "set", {"x": "ndarray", "y": "int"}, shard_size=40_000,
                     format="parquet") as writer:
        for r in rows:
            writer.write(r)
    path = tmp_path / "set" / "shard.00001.parquet"
    data = damage(path.read_bytes())
    path.write_bytes(data)
    manifest = json.loads((tmp_path / "set" / "index.json").read_text())
    manifest["shards"][1].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    (tmp_path / "set" / "index.json").write_text(json.dumps(manifest))
    return StreamingDataset(tmp_path / "set", local=tmp_path / "cache"), writer.manifest


def test_a_truncated_parquet_shard_is_an_error_naming_the_file(tmp_path, monkeypatch):
    ds, manifest = corrupt(tmp_path, monkeypatch, lambda data: data[:len(data) // 2])
    first = manifest.shards[0].samples
    assert ds[0]["y"] == 0
    with pytest.raises(ShardFormatError, match=r"shard .*shard\.00001\.parquet .*footer"):
        ds[first]


def test_a_corrupt_page_is_an_error_naming_the_file_and_row_group(tmp_path, monkeypatch):
    def flip(data):
        meta = pq.ParquetFile(pa.BufferReader(data)).metadata
        column = meta.row_group(1).column(0)
        start = column.data_page_offset + 40  # inside the first data page's compressed bytes
        return data[:start] + bytes(b ^ 0xFF for b in data[start:start + 8]) + \
            data[start + 8:]

    ds, manifest = corrupt(tmp_path, monkeypatch, flip)
    first = manifest.shards[0].samples
    meta = pq.ParquetFile(tmp_path / "set" / "shard.00001.parquet").metadata
    group_rows = meta.row_group(0).num_rows
    assert ds[first]["y"] == first  # row group 0 is intact
    with pytest.raises(ShardFormatError, match=r"shard .*shard\.00001\.parquet: row group 1 "
                                               r"cannot be read"):
        ds[first + group_rows]


def test_worker_processes_and_threads_read_parquet_shards_as_the_main_process_does(tmp_path):
    from dataset_kit.iterators import MultiprocessIterator, MultithreadIterator

    rows = [{"x": np.full(i % 7, i, np.int32), "y": i} for i in range(300)]
    with ShardWriter(tmp_path / "set", {"x": "ndarray", "y": "int"}, shard_size=1000,
                     format="parquet") as writer:
        for r in rows:
            writer.write(r)
    ds = StreamingDataset(tmp_path / "set", local=tmp_path / "cache")
    assert len(ds.manifest.shards) > 4

    def sampler():
        return ShardOrderSampler(ds, block_shards=3, seed=5)

    serial = SerialIterator(ds, 8, order_sampler=sampler())
    expected = [next(serial) for _ in range(60)]
    with MultiprocessIterator(ds, 8, order_sampler=sampler(), n_processes=2) as processes, \
            MultithreadIterator(ds, 8, order_sampler=sampler(), n_threads=3) as threads:
        for batch in expected:
            for got in (next(processes), next(threads)):
                assert len(got) == len(batch)
                for a, b in zip(got, batch):
                    assert_same(a, b)
                    assert_same(a, rows[a["y"]])
