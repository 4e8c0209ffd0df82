"""read_image: decompression bombs are refused from the header, with Pillow's rule and types."""

import io
import os
import subprocess
import sys
import textwrap
import warnings
import zipfile

import numpy as np
import pytest
from PIL import Image

from dataset_kit.datasets import (
    ImageDataset,
    ImageFolderDataset,
    ImageRecordDataset,
    ZippedImageDataset,
)
from dataset_kit.image import read_image
from dataset_kit.recordio import IndexedRecordWriter, IRHeader, pack

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def jpeg_claiming(width, height, real=(8, 8)):
    """A tiny JPEG whose SOF0 header claims ``width x height`` (the scan data stays tiny)."""
    out = io.BytesIO()
    Image.fromarray(np.full((real[1], real[0], 3), 77, np.uint8)).save(out, "JPEG")
    data = bytearray(out.getvalue())
    sof = data.index(b"\xff\xc0")  # marker, length(2), precision(1), height(2), width(2)
    data[sof + 5:sof + 7] = height.to_bytes(2, "big")
    data[sof + 7:sof + 9] = width.to_bytes(2, "big")
    return bytes(data)


@pytest.fixture(params=["simplejpeg", "pillow"])
def jpeg_decoder(request, monkeypatch):
    """Run with simplejpeg, and with Pillow alone (simplejpeg's import failing)."""
    if request.param == "pillow":
        monkeypatch.setitem(sys.modules, "simplejpeg", None)
    return request.param


@pytest.mark.parametrize("size", [(20000, 20000), (65000, 65000)])
def test_a_jpeg_claiming_too_many_pixels_is_refused_before_decoding(jpeg_decoder, size):
    bomb = jpeg_claiming(*size)
    assert len(bomb) < 1000
    with pytest.raises(Image.DecompressionBombError, match="record 7"):
        read_image(bomb, np.uint8, "record 7")


def test_the_limit_is_pillows_read_at_call_time_with_its_warning(jpeg_decoder, monkeypatch):
    image = jpeg_claiming(8, 8)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 40)  # 64 pixels: over 1x, under 2x
    with pytest.warns(Image.DecompressionBombWarning):
        assert read_image(image, np.uint8, "small.jpg").shape == (3, 8, 8)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 31)  # 64 > 2 x 31
    with pytest.raises(Image.DecompressionBombError, match="small.jpg"):
        read_image(image, np.uint8, "small.jpg")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)  # Pillow's way to turn it off
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_image(image, np.uint8, "small.jpg").shape == (3, 8, 8)


def test_a_bomb_costs_neither_time_nor_memory():
    """In a child, so its peak memory is its own: the 65000 x 65000 JPEG asked for 11.8 GiB."""
    child = textwrap.dedent("""
        import sys
        import numpy as np
        from PIL import Image
        from dataset_kit.image import read_image
        from tests.image.test_decode import jpeg_claiming
        for size in ((20000, 20000), (65000, 65000)):
            try:
                read_image(jpeg_claiming(*size), np.uint8, "bomb")
            except Image.DecompressionBombError:
                pass
            else:
                sys.exit("not refused")
        # VmHWM, the peak of this process's own memory map: ru_maxrss also
        # keeps the peak of the map exec replaced, the (v)forking pytest
        # process's, which in a whole suite's run is some 500 MiB.
        with open("/proc/self/status") as status:
            peak_kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
        print(peak_kib // 1024)
    """)
    done = subprocess.run([sys.executable, "-c", child], env=dict(os.environ, PYTHONPATH=ROOT),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 400  # MiB: an import of numpy and Pillow, not a 1.2 GB image


def test_file_and_zip_datasets_refuse_a_bomb_naming_the_file(tmp_path, jpeg_decoder):
    (tmp_path / "cls").mkdir()
    (tmp_path / "cls" / "bomb.jpg").write_bytes(jpeg_claiming(20000, 20000))
    with pytest.raises(Image.DecompressionBombError, match=r"bomb.jpg \(example 0\)"):
        ImageDataset(["cls/bomb.jpg"], root=str(tmp_path))[0]
    with pytest.raises(Image.DecompressionBombError, match=r"bomb.jpg \(example 0\)"):
        ImageFolderDataset(tmp_path)[0]
    with zipfile.ZipFile(tmp_path / "images.zip", "w") as archive:
        archive.writestr("bomb.jpg", jpeg_claiming(20000, 20000))
    with pytest.raises(Image.DecompressionBombError, match=r"bomb.jpg in .*images.zip"):
        ZippedImageDataset(str(tmp_path / "images.zip"))[0]


def test_image_record_dataset_refuses_a_bomb_naming_the_record(tmp_path, jpeg_decoder):
    rec, idx = str(tmp_path / "bomb.rec"), str(tmp_path / "bomb.idx")
    with IndexedRecordWriter(idx, rec) as writer:
        writer.write_idx(0, pack(IRHeader(0, 1.0, 41, 0), jpeg_claiming(8, 8)))
        writer.write_idx(1, pack(IRHeader(0, 2.0, 42, 0), jpeg_claiming(20000, 20000)))
    dataset = ImageRecordDataset(rec)
    assert dataset[0][0].shape == (8, 8, 3)
    with pytest.raises(Image.DecompressionBombError,
                       match=r"bomb\.rec, example 1 \(key 1, offset \d+\) \(id 42\)"):
        dataset[1]


def test_a_directory_is_named_as_a_directory(tmp_path, jpeg_decoder):
    (tmp_path / "sub.jpg").mkdir()
    with pytest.raises(IsADirectoryError, match=r"sub.jpg \(example 0\) is a directory"):
        ImageDataset(["sub.jpg"], root=str(tmp_path))[0]
    with pytest.raises(NotADirectoryError, match="is a file, not a directory"):
        ImageFolderDataset(__file__)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ImageFolderDataset(tmp_path / "missing")


class _NotInstalled:
    """A meta-path finder for which simplejpeg is not installed; it counts the lookups."""

    def __init__(self):
        self.lookups = 0

    def find_spec(self, name, path=None, target=None):
        if name == "simplejpeg":
            self.lookups += 1
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def test_without_simplejpeg_pillow_decodes_and_the_import_is_tried_once(tmp_path, monkeypatch):
    from dataset_kit.image import decode

    pixels = np.random.default_rng(0).integers(0, 255, (30, 40, 3), dtype=np.uint8)
    path = tmp_path / "a.jpg"
    Image.fromarray(pixels).save(path, quality=90)
    finder = _NotInstalled()
    monkeypatch.delitem(sys.modules, "simplejpeg", raising=False)
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    monkeypatch.setattr(decode, "_simplejpeg_missing", False)
    expected = np.asarray(Image.open(path).convert("RGB")).transpose(2, 0, 1)
    for _ in range(3):
        np.testing.assert_array_equal(read_image(str(path), np.uint8, "a.jpg"), expected)
        np.testing.assert_array_equal(read_image(path.read_bytes(), np.uint8, "a.jpg"),
                                      expected)
    # A failed import is not remembered by Python: retried per image, it cost a path search.
    assert finder.lookups == 1


def _saved(image, fmt):
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


_MODES = ["L", "LA", "RGB", "RGBA", "P", "I;16", "1", "CMYK"]
# Every mode in every format Pillow writes: PNG has no CMYK, JPEG no alpha,
# palette or 16-bit modes.
_WRITABLE = [(mode, "PNG") for mode in _MODES if mode != "CMYK"] \
    + [(mode, "TIFF") for mode in _MODES] \
    + [(mode, "JPEG") for mode in ("L", "RGB", "1", "CMYK")]


@pytest.mark.parametrize(("mode", "fmt"), _WRITABLE)
def test_pillow_decodes_the_pixels_numpy_reads_from_pillow(monkeypatch, mode, fmt):
    monkeypatch.setitem(sys.modules, "simplejpeg", None)
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 255, (30, 41, 3), dtype=np.uint8)).convert(mode)
    data = _saved(image, fmt)
    expected = np.asarray(Image.open(io.BytesIO(data)))
    expected = expected[np.newaxis] if expected.ndim == 2 else expected.transpose(2, 0, 1)
    for dtype in (np.uint8, np.float32):
        got = read_image(data, dtype, "x")
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, expected.astype(dtype))
