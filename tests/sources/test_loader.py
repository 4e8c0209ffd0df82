"""load_image, ResourceFileReader, download, get_data_home: NNabla's data_source_loader names."""

from __future__ import annotations

import inspect
import io
import os

import numpy as np
import pytest

from dataset_kit import OfflineError, cached_download_path
from dataset_kit.image.decode import CorruptImageError, pillow
from dataset_kit.sources import ResourceFileReader, download, get_data_home, load_image
from tests.http_server import Route


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


# -- download and get_data_home: what NNabla's examples import ---------------------

def test_download_and_get_data_home_keep_nnablas_signatures():
    assert [(p.name, p.kind, p.default) for p in inspect.signature(download).parameters.values()
            ] == [(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default) for name, default in (
                ("url", inspect.Parameter.empty), ("output_file", None), ("open_file", True),
                ("allow_overwrite", False))]
    assert list(inspect.signature(get_data_home).parameters) == []


def test_get_data_home_is_a_folder_under_the_dataset_root(dataset_root):
    home = get_data_home()
    assert home == str(dataset_root / "nnabla_data") and os.path.isdir(home)


def test_download_fetches_once_into_the_cache_and_opens_the_file(http_server, dataset_root):
    body = os.urandom(70_000)
    route = Route(body)
    url = http_server.add("/data/cifar.tar.gz", route)
    with download(url) as f:
        assert f.read() == body and f.name == cached_download_path(url)
    with download(url) as f:  # a second call, as a later run's, reads the cached file
        assert f.read() == body
    assert download(url, open_file=False) is None
    assert route.gets == 1
    with download(url, allow_overwrite=True) as f:
        assert f.read() == body
    assert route.gets == 2
    assert sorted(os.listdir(dataset_root / "downloads")) == [
        os.path.basename(cached_download_path(url))]


def test_download_to_an_output_file_keeps_it_unless_allowed_to_overwrite(
        http_server, dataset_root, tmp_path):
    route = Route(b"fresh bytes")
    url = http_server.add("/train.csv", route)
    target = tmp_path / "out" / "train.csv"
    assert download(url, output_file=str(target), open_file=False) is None
    assert target.read_bytes() == b"fresh bytes" and route.gets == 1
    target.write_bytes(b"edited by the user")
    with download(url, output_file=target) as f:
        assert f.read() == b"edited by the user"  # NNabla: an existing file is used as it is
    with download(url, output_file=target, allow_overwrite=True) as f:
        assert f.read() == b"fresh bytes"
    assert route.gets == 2 and sorted(os.listdir(target.parent)) == ["train.csv"]


def test_a_prefilled_cache_serves_a_url_offline(dataset_root, monkeypatch, tmp_path):
    # An offline cluster: the file was fetched elsewhere and copied to the URL's cache path.
    url = "http://unreachable.invalid/nnabla/mnist.zip"
    path = cached_download_path(url)
    os.makedirs(os.path.dirname(path))
    with open(path + ".copying", "wb") as f:
        f.write(b"prefilled")
    os.replace(path + ".copying", path)
    monkeypatch.setenv("DATASET_KIT_OFFLINE", "1")
    with download(url) as f:
        assert f.read() == b"prefilled"
    with pytest.raises(OfflineError, match="cannot be downloaded"):
        download(url, output_file=tmp_path / "elsewhere.zip")


@pytest.mark.parametrize("kwargs, error, name", [
    ({"url": ""}, ValueError, "url"),
    ({"url": "ftp://host/x"}, ValueError, "url"),
    ({"url": "http://h/x", "open_file": "yes"}, ValueError, "open_file"),
    ({"url": "http://h/x", "allow_overwrite": 1}, ValueError, "allow_overwrite"),
    ({"url": "http://h/x", "output_file": 3}, TypeError, "output_file"),
])
def test_download_names_a_bad_argument(kwargs, error, name, dataset_root):
    with pytest.raises(error, match=name):
        download(**kwargs)
