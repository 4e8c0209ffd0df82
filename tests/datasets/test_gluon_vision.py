"""Gluon's MNIST, FashionMNIST, CIFAR10 and CIFAR100 over files in the real formats."""

import gzip
import hashlib

import numpy as np
import pytest

from dataset_kit.datasets import CIFAR10, CIFAR100, MNIST, FashionMNIST, cifar, mnist
from dataset_kit.loader import DataLoader, Dataset, vision
from tests.datasets.standard_files import cifar10_archive, cifar100_archive
from tests.datasets.test_mnist import idx
from tests.datasets.test_standard_sets import _serve
from tests.http_server import Route


def write_mnist(root, sizes=(("train", 6), ("t10k", 4)), seed=0):
    """Gluon's four MNIST files (IDX, gzip) in ``root``; returns the arrays."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for prefix, n in sizes:
        x = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        y = rng.integers(0, 10, n, dtype=np.uint8)
        (root / f"{prefix}-images-idx3-ubyte.gz").write_bytes(idx(x, 2051))
        (root / f"{prefix}-labels-idx1-ubyte.gz").write_bytes(idx(y, 2049))
        arrays[prefix] = (x, y)
    return arrays


def double(image, label):
    return image.astype(np.float32) * 2, label + 100


@pytest.mark.parametrize("cls", [MNIST, FashionMNIST])
def test_mnist_reads_gluons_files_in_root_and_gives_gluons_examples(tmp_path, cls):
    arrays = write_mnist(tmp_path / "mnist")
    train = cls(root=str(tmp_path / "mnist"))
    test = cls(root=tmp_path / "mnist", train=False)
    assert isinstance(train, Dataset) and len(train) == 6 and len(test) == 4
    image, label = train[5]
    assert image.shape == (28, 28, 1) and image.dtype == np.uint8
    assert isinstance(label, np.int32)
    np.testing.assert_array_equal(image[:, :, 0], arrays["train"][0][5])
    assert label == arrays["train"][1][5] and test[3][1] == arrays["t10k"][1][3]
    shown = cls(root=tmp_path / "mnist", transform=double)
    image, label = shown[2]
    assert image.dtype == np.float32 and label == arrays["train"][1][2] + 100
    # Batches through the loader: images stack as N x 28 x 28 x 1, labels int32.
    x, y = next(iter(DataLoader(train, 4)))
    assert x.shape == (4, 28, 28, 1) and y.dtype == np.int32
    np.testing.assert_array_equal(y, arrays["train"][1][:4])
    x, y = next(iter(DataLoader(shown, 3, shuffle=True, seed=1)))
    assert x.dtype == np.float32 and x.shape == (3, 28, 28, 1) and (y >= 100).all()


def test_a_file_in_root_that_is_not_mnist_is_named(tmp_path):
    write_mnist(tmp_path)
    (tmp_path / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(b"\0\0\x08\x03abc"))
    with pytest.raises(ValueError, match="train-labels-idx1-ubyte.gz"):
        MNIST(root=tmp_path)


def test_mnist_without_files_in_root_comes_from_the_mirrored_cache(http_server, monkeypatch,
                                                                  dataset_root, tmp_path):
    arrays = write_mnist(tmp_path / "served")
    pins = {}
    for path in (tmp_path / "served").iterdir():
        http_server.add(f"/mirror/{path.name}", Route(path.read_bytes()))
        pins[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.setitem(mnist.CHECKSUMS, "mnist", pins)
    monkeypatch.setitem(mnist.UPSTREAM, "mnist", ["http://127.0.0.1:9/unreachable/"])
    monkeypatch.setenv("DATASET_KIT_MIRRORS", http_server.url("/mirror"))
    empty = tmp_path / "empty"
    test = MNIST(root=empty, train=False)
    assert len(test) == 4 and not empty.exists()  # nothing is written into root
    np.testing.assert_array_equal(test[1][0][:, :, 0], arrays["t10k"][0][1])


def write_cifar_bins(root, label_bytes, names, n=3, seed=0):
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    out = {}
    for name in names:
        labels = rng.integers(0, 20, (n, label_bytes), dtype=np.uint8)
        pixels = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        (root / name).write_bytes(np.concatenate([labels, pixels], axis=1).tobytes())
        out[name] = (pixels.reshape(n, 3, 32, 32).transpose(0, 2, 3, 1), labels)
    return out


def test_cifar10_reads_gluons_binary_batches_as_hwc_images(tmp_path):
    names = [f"data_batch_{k}.bin" for k in range(1, 6)] + ["test_batch.bin"]
    written = write_cifar_bins(tmp_path, 1, names)
    train, test = CIFAR10(root=tmp_path), CIFAR10(root=tmp_path, train=False)
    assert len(train) == 15 and len(test) == 3
    image, label = train[4]  # the second record of data_batch_2.bin
    assert image.shape == (32, 32, 3) and image.dtype == np.uint8 and isinstance(label, np.int32)
    np.testing.assert_array_equal(image, written["data_batch_2.bin"][0][1])
    assert label == written["data_batch_2.bin"][1][1, 0]
    assert test[2][1] == written["test_batch.bin"][1][2, 0]


@pytest.mark.parametrize("fine_label", [False, True])
def test_cifar100_gives_coarse_labels_by_default_and_fine_ones_on_request(tmp_path, fine_label):
    written = write_cifar_bins(tmp_path, 2, ["train.bin", "test.bin"])
    test = CIFAR100(root=tmp_path, fine_label=fine_label, train=False)
    pixels, labels = written["test.bin"]
    image, label = test[1]
    np.testing.assert_array_equal(image, pixels[1])
    assert label == labels[1, int(fine_label)]


def test_cifar_without_files_in_root_comes_from_the_python_archives(http_server, monkeypatch,
                                                                    dataset_root, tmp_path):
    body10, arrays10 = cifar10_archive(np.random.default_rng(0))
    body100, arrays100 = cifar100_archive(np.random.default_rng(1))
    _serve(http_server, monkeypatch, cifar, {"cifar-10-python.tar.gz": body10,
                                              "cifar-100-python.tar.gz": body100})
    train = CIFAR10(root=tmp_path / "none")
    np.testing.assert_array_equal(train[7][0],
                                  arrays10["train"][0][7].reshape(3, 32, 32).transpose(1, 2, 0))
    assert train[7][1] == arrays10["train"][1][7]
    coarse = CIFAR100(root=tmp_path / "none", train=False)
    fine = CIFAR100(root=tmp_path / "none", train=False, fine_label=True)
    assert fine[2][1] == arrays100["test"][1][2] and coarse[2][1] == arrays100["test"][1][2] // 5
    np.testing.assert_array_equal(coarse[3][0], fine[3][0])


def test_the_gluon_vision_namespace_holds_gluons_names():
    assert vision.MNIST is MNIST and vision.CIFAR100 is CIFAR100
    assert {"ImageFolderDataset", "ImageRecordDataset", "FashionMNIST"} <= set(vision.__all__)
