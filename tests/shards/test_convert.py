import io
import json
import tarfile

import numpy as np
import pytest

from dataset_kit.cli import main
from dataset_kit.shards import ShardWriter, StreamingDataset


def png(value):
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray(np.full((2, 3, 3), value, dtype=np.uint8)).save(out, format="PNG")
    return out.getvalue()


def test_a_dataset_becomes_shards_with_a_summary(tmp_path, monkeypatch, capsys):
    (tmp_path / "mymod.py").write_text(
        "import numpy as np\n"
        "from dataset_kit.datasets import TupleDataset\n"
        "def make():\n"
        "    return TupleDataset(np.arange(30, dtype=np.float32).reshape(10, 3), np.arange(10))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    assert main(["shards", "write", "mymod:make", str(out), "--shard-size", "100",
                 "--no-progress"]) == 0
    summary = capsys.readouterr().out
    assert "10 samples in" in summary and "0 (ndarray), 1 (int)" in summary
    ds = StreamingDataset(out, local=tmp_path / "cache")
    np.testing.assert_array_equal(ds[4]["0"], [12, 13, 14])
    assert int(ds[4]["1"]) == 4


def test_an_im2rec_list_keeps_images_encoded(tmp_path, capsys):
    for i in range(3):
        (tmp_path / f"{i}.png").write_bytes(png(10 * i))
    lst = tmp_path / "train.lst"
    lst.write_text("".join(f"{i}\t{i}.0\t{i}.png\n" for i in range(3)))
    assert main(["shards", "write", str(lst), str(tmp_path / "out"), "--no-progress"]) == 0
    ds = StreamingDataset(tmp_path / "out", local=tmp_path / "cache", decode_images=False)
    assert ds[2] == {"image": png(20), "label": [2.0]}
    assert "3 samples in 1 shards" in capsys.readouterr().out


def test_webdataset_tars_become_one_column_per_extension(tmp_path):
    folder = tmp_path / "wds"
    folder.mkdir()
    for part in range(2):
        with tarfile.open(folder / f"part-{part}.tar", "w") as tar:
            for i in range(3):
                key = f"s{part}{i}"
                for ext, data in (("png", png(i)), ("cls", str(i).encode()),
                                  ("json", json.dumps({"i": i}).encode())):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    assert main(["shards", "write", str(folder), str(tmp_path / "out"), "--no-progress",
                 "--compression", "zstd"]) == 0
    ds = StreamingDataset(tmp_path / "out", local=tmp_path / "cache")
    assert len(ds) == 6
    got = ds[4]
    assert got["cls"] == "1" and got["json"] == {"i": 1} and got["png"].shape == (3, 2, 3)


def test_a_bad_source_is_an_error_not_a_traceback(tmp_path, capsys):
    assert main(["shards", "write", str(tmp_path / "missing.lst"), str(tmp_path / "o")]) == 1
    assert "missing.lst" in capsys.readouterr().err


def test_parquet_files_become_shards_row_for_row(tmp_path, capsys):
    pytest.importorskip("pyarrow", reason="Parquet input needs pyarrow (the parquet extra)")
    from tests.datasets.parquet_files import check_row, write

    (tmp_path / "in").mkdir()
    write(tmp_path / "in" / "a.parquet", [4, 0, 3])
    write(tmp_path / "in" / "b.parquet", [5], start=7)
    assert main(["shards", "write", str(tmp_path / "in"), str(tmp_path / "out"),
                 "--no-progress"]) == 0
    summary = capsys.readouterr().out
    assert "12 samples in" in summary
    assert "id (int), x (ndarray), tokens (ndarray), name (str), raw (bytes), meta (json)" \
        in summary
    ds = StreamingDataset(tmp_path / "out", local=tmp_path / "cache")
    for i in range(12):
        check_row(ds[i], i)


def jpeg(value):
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray(np.full((2, 3, 3), value, dtype=np.uint8)).save(out, format="JPEG")
    return out.getvalue()


def test_an_im2rec_list_mixing_jpeg_and_png_keeps_each_image_in_its_own_format(tmp_path):
    files = {"0.jpg": jpeg(0), "1.png": png(10), "2.JPEG": jpeg(200), "3.png": png(30)}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    lst = tmp_path / "train.lst"
    lst.write_text("".join(f"{i}\t{i}.0\t{name}\n" for i, name in enumerate(files)))
    assert main(["shards", "write", str(lst), str(tmp_path / "out"), "--no-progress"]) == 0
    raw = StreamingDataset(tmp_path / "out", local=tmp_path / "raw", decode_images=False)
    assert raw.manifest.columns["image"] == "image"
    assert [raw[i]["image"] for i in range(4)] == list(files.values())
    decoded = StreamingDataset(tmp_path / "out", local=tmp_path / "cache")
    from PIL import Image
    for i, data in enumerate(files.values()):
        expected = np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).transpose(2, 0, 1)
        np.testing.assert_array_equal(decoded[i]["image"], expected)
        assert decoded[i]["label"] == [float(i)]


def test_an_image_column_refuses_bytes_that_are_neither_jpeg_nor_png(tmp_path):
    with pytest.raises(ValueError, match="takes encoded JPEG or PNG bytes"), \
            ShardWriter(tmp_path / "out", {"image": "image"}) as writer:
        writer.write({"image": b"GIF89a..."})
