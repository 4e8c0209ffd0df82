import io
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given
from hypothesis.extra import numpy as hnp

from dataset_kit.formats.shards._columns import DECODE, ENCODE
from dataset_kit.shards import Manifest, ShardWriter, StreamingDataset
from tests.shards.conftest import check, sigkill_when, write

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def image_bytes(kind):
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray(np.arange(48, dtype=np.uint8).reshape(4, 4, 3)).save(
        out, format="JPEG" if kind == "jpeg" else "PNG")
    return out.getvalue()


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_every_column_kind_round_trips(tmp_path, compression):
    columns = {"a": "ndarray", "b": "bytes", "s": "str", "i": "int", "f": "float", "j": "json",
               "jpg": "jpeg", "png": "png"}
    png = image_bytes("png")
    rows = [{"a": np.arange(i * 3, dtype=np.int16).reshape(i, 3), "b": bytes([i]) * i,
             "s": f"é{i}", "i": -i, "f": i / 3, "j": {"k": [i, None]}, "jpg": image_bytes("jpeg"),
             "png": png} for i in range(20)]
    with ShardWriter(tmp_path / "out", columns, shard_size=500, compression=compression) as w:
        for row in rows:
            w.write(row)
    assert len(w.manifest.shards) > 1
    ds = StreamingDataset(tmp_path / "out", local=tmp_path / "cache")
    assert len(ds) == 20
    for i, row in enumerate(rows):
        got = ds[i]
        np.testing.assert_array_equal(got["a"], row["a"])
        assert got["a"].dtype == np.int16
        assert (got["b"], got["s"], got["i"], got["f"], got["j"]) == \
            (row["b"], row["s"], row["i"], row["f"], row["j"])
        np.testing.assert_array_equal(got["png"], np.arange(48, dtype=np.uint8).reshape(
            4, 4, 3).transpose(2, 0, 1))
        assert got["jpg"].shape == (3, 4, 4)
    raw = StreamingDataset(tmp_path / "out", local=tmp_path / "cache", decode_images=False)
    assert raw[3]["png"] == png


@given(hnp.arrays(hnp.scalar_dtypes(), hnp.array_shapes(min_dims=0, max_dims=4, min_side=0,
                                                         max_side=5)))
def test_any_array_round_trips_bit_exactly(array):
    back = DECODE["ndarray"](ENCODE["ndarray"](array))
    assert back.dtype == array.dtype and back.shape == array.shape
    assert back.tobytes() == array.tobytes()


def test_manifest_pins_counts_sizes_and_hashes(tmp_path):
    import hashlib
    manifest = write(tmp_path / "out", n=50, shard_size=800)
    text = (tmp_path / "out" / "index.json").read_text()
    assert Manifest.from_json(text, "x") == manifest
    data = json.loads(text)
    assert data["samples"] == 50 == sum(s["samples"] for s in data["shards"])
    for shard in data["shards"]:
        body = (tmp_path / "out" / shard["name"]).read_bytes()
        assert len(body) == shard["bytes"]
        assert hashlib.sha256(body).hexdigest() == shard["sha256"]
    assert data["columns"] == {"x": "ndarray", "y": "int", "name": "str"}


def test_a_value_that_does_not_fit_its_column_names_sample_and_column(tmp_path):
    with ShardWriter(tmp_path / "out", {"y": "int"}) as w:
        w.write({"y": 1})
        with pytest.raises(TypeError, match=r"sample 1, column 'y' \(int\)"):
            w.write({"y": "two"})
        with pytest.raises(ValueError, match=r"must be a dict with the columns \['y'\]"):
            w.write({"z": 1})


def test_an_existing_dataset_is_not_overwritten_silently(tmp_path):
    write(tmp_path / "out", n=10)
    with pytest.raises(FileExistsError, match="index.json exists"):
        ShardWriter(tmp_path / "out", {"y": "int"})
    with ShardWriter(tmp_path / "out", {"y": "int"}, overwrite=True) as w:
        w.write({"y": 5})
    assert json.loads((tmp_path / "out" / "index.json").read_text())["samples"] == 1


def test_a_failed_write_leaves_no_manifest(tmp_path):
    with pytest.raises(RuntimeError):
        with ShardWriter(tmp_path / "out", {"y": "int"}, shard_size=10) as w:
            for i in range(10):
                w.write({"y": i})
            raise RuntimeError("boom")
    assert os.listdir(tmp_path / "out") and not (tmp_path / "out" / "index.json").exists()


FORMATS = [("shards", ".dks"), ("parquet", ".parquet")]


def needs(fmt):
    if fmt == "parquet":
        pytest.importorskip("pyarrow", reason="Parquet shards need pyarrow (the parquet extra)")


@pytest.mark.parametrize(("fmt", "suffix"), FORMATS)
def test_sigkill_while_writing_leaves_no_manifest(tmp_path, fmt, suffix):
    needs(fmt)
    out = tmp_path / "out"
    script = textwrap.dedent(f"""
        import numpy as np
        from dataset_kit.shards import ShardWriter
        with ShardWriter({str(out)!r}, {{"x": "ndarray"}}, shard_size=10_000,
                         format={fmt!r}) as w:
            for i in range(10**9):
                w.write({{"x": np.zeros(1000, np.uint8)}})
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ,
                                                                  "PYTHONPATH": ROOT})
    try:
        sigkill_when(proc, lambda: len([n for n in os.listdir(out) if n.endswith(suffix)]
                                       if out.exists() else []) >= 3,
                     "three shards were written", 60)
    finally:
        proc.kill()
        proc.wait()
    assert not (out / "index.json").exists()
    with pytest.raises(FileNotFoundError):
        StreamingDataset(out, local=tmp_path / "cache")


@pytest.mark.parametrize(("fmt", "suffix"), FORMATS)
def test_writes_straight_to_s3_and_reads_back(tmp_path, s3, fmt, suffix):
    needs(fmt)
    manifest = write("s3://data/set", n=60, shard_size=700, storage_options=s3, format=fmt)
    assert len(manifest.shards) > 2 and manifest.shards[0].name.endswith(suffix)
    ds = StreamingDataset("s3://data/set", local=tmp_path / "cache", storage_options=s3)
    assert len(ds) == 60 and ds.manifest.shard_format == fmt
    for i in (0, 17, 59):
        check(ds[i], i)
    for i, example in zip((59, 3, 30), ds[np.array([59, 3, 30])]):
        check(example, i)


@pytest.mark.parametrize(("fmt", "suffix"), FORMATS)
def test_sigkill_while_writing_straight_to_s3_leaves_no_manifest(tmp_path, s3, fmt, suffix):
    import s3fs

    needs(fmt)
    script = textwrap.dedent(f"""
        import numpy as np
        from dataset_kit.shards import ShardWriter
        with ShardWriter("s3://data/killed", {{"x": "ndarray"}}, shard_size=10_000,
                         storage_options={s3!r}, format={fmt!r}) as w:
            for i in range(10**9):
                w.write({{"x": np.zeros(1000, np.uint8)}})
    """)
    fs = s3fs.S3FileSystem(**s3)

    def shards():
        fs.invalidate_cache()
        return [p for p in fs.find("data/killed") if p.endswith(suffix)]

    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ,
                                                                  "PYTHONPATH": ROOT})
    try:
        sigkill_when(proc, lambda: len(shards()) >= 3, "three shards were written", 120, 0.1)
    finally:
        proc.kill()
        proc.wait()
    fs.invalidate_cache()
    assert not fs.exists("data/killed/index.json")
    with pytest.raises(FileNotFoundError):
        StreamingDataset("s3://data/killed", local=tmp_path / "cache", storage_options=s3)
