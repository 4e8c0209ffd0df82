"""load_image and ResourceFileReader: NNabla's data_source_loader names."""

from __future__ import annotations

import io

import numpy as np
import pytest

from dataset_kit.image.decode import CorruptImageError, pillow
from dataset_kit.sources import ResourceFileReader, load_image


def _png(tmp_path, array, name="a.png"):
    path = tmp_path / name
    pillow().fromarray(array).save(path)
    return path


def test_load_image_gives_chw_uint8_from_a_path_a_file_or_a_reader(tmp_path):
    gray = (np.arange(12, dtype=np.uint8) * 20).reshape(3, 4)
    path = _png(tmp_path, gray)
    with open(path, "rb") as f:
        from_file = load_image(f)
    for image in (load_image(str(path)), from_file, load_image(ResourceFileReader(str(path)))):
        assert image.dtype == np.uint8 and image.shape == (1, 3, 4)
        np.testing.assert_array_equal(image[0], gray)
    rgb = np.zeros((2, 5, 3), np.uint8)
    rgb[..., 1] = 200
    image = load_image(str(_png(tmp_path, rgb, "c.png")), normalize=True)
    assert image.shape == (3, 2, 5) and image.dtype == np.float64
    assert image[1].max() == pytest.approx(200 / 255) and image[0].max() == 0


def test_load_image_resizes_to_a_shape_with_the_images_channels(tmp_path):
    path = str(_png(tmp_path, np.full((8, 8), 7, np.uint8)))
    image = load_image(path, shape=(1, 4, 2))
    assert image.shape == (1, 4, 2) and image.dtype == np.uint8 and (image == 7).all()
    with pytest.raises(ValueError, match="1 channels"):
        load_image(path, shape=(3, 4, 2))


def test_load_image_names_the_file_it_cannot_decode(tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    with pytest.raises(CorruptImageError, match="bad.png"):
        load_image(str(bad))


def test_resource_file_reader_takes_paths_and_binary_files_only(tmp_path):
    path = tmp_path / "tmp.txt"
    path.write_text("some text")
    reader = ResourceFileReader(str(path))
    assert reader.ext == ".txt"
    with reader.open() as f:
        assert f.read() == b"some text" and f.ext == ".txt"
    with open(path, "rb") as handle:
        reader = ResourceFileReader(handle)
        assert reader.ext == ".txt"
        with reader.open() as f:
            assert f.read() == b"some text"
        assert handle.tell() == 0  # rewound, and left open
    png = _png(tmp_path, np.zeros((2, 2), np.uint8))
    assert ResourceFileReader(io.BytesIO(png.read_bytes())).ext == ".png"  # sniffed
    assert ResourceFileReader(io.BytesIO(b"plain")).ext == ""
    for text in (io.StringIO("x"), open(path)):
        with pytest.raises(ValueError, match="text mode|seekable binary"):
            ResourceFileReader(text)
        text.close()
    with pytest.raises(ValueError, match="got int"):
        ResourceFileReader(3)
