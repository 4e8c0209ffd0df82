"""MNIST-family loaders against files in the real IDX format, served from 127.0.0.1."""

import gzip
import hashlib
import os

import numpy as np
import pytest

from dataset_kit import HashMismatchError
from dataset_kit.datasets import (
    get_fashion_mnist,
    get_fashion_mnist_labels,
    get_kuzushiji_mnist_labels,
    get_mnist,
    mnist,
)
from tests.http_server import Route

SIZES = {"train": 5, "t10k": 3}


def idx(array, magic):
    header = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in array.shape)
    return gzip.compress(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def served(http_server, monkeypatch):
    """The four MNIST files, written in IDX format, with checksums pinned to them."""
    rng = np.random.default_rng(0)
    arrays, pins, routes = {}, {}, {}
    for prefix, n in SIZES.items():
        x = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        y = rng.integers(0, 10, n, dtype=np.uint8)
        arrays[prefix] = (x, y)
        for name, body in ((f"{prefix}-images-idx3-ubyte.gz", idx(x, 2051)),
                           (f"{prefix}-labels-idx1-ubyte.gz", idx(y, 2049))):
            routes[name] = Route(body)
            http_server.add(f"/mirror/{name}", routes[name])
            pins[name] = hashlib.sha256(body).hexdigest()
    monkeypatch.setitem(mnist.CHECKSUMS, "mnist", pins)
    monkeypatch.setitem(mnist.UPSTREAM, "mnist", ["http://127.0.0.1:9/unreachable/"])
    return http_server.url("/mirror"), arrays, routes


def test_arrays_shapes_scaling_and_labels_are_chainers(served, dataset_root):
    mirror, arrays, routes = served
    train, test = get_mnist(mirrors=[mirror])
    x, y = arrays["train"]
    assert len(train) == 5 and len(test) == 3
    images, labels = train[0]
    assert images.shape == (784,) and images.dtype == np.float32 and labels.dtype == np.int32
    np.testing.assert_allclose(images, x[0].reshape(-1).astype(np.float32) / 255.0)
    assert labels == y[0]
    two, _ = get_mnist(withlabel=False, ndim=2, scale=2.0, dtype=np.float64, mirrors=[mirror])
    assert two.shape == (5, 28, 28) and two.dtype == np.float64
    np.testing.assert_allclose(two[1], x[1] * (2.0 / 255.0))
    rgb, _ = get_mnist(withlabel=False, ndim=3, rgb_format=True, mirrors=[mirror])
    assert rgb.shape == (5, 3, 28, 28) and np.array_equal(rgb[:, 0], rgb[:, 2])
    with pytest.raises(ValueError, match="ndim must be 1, 2 or 3"):
        get_mnist(ndim=4, mirrors=[mirror])


def test_the_second_call_loads_the_cached_arrays_without_downloading(served, dataset_root):
    mirror, _, routes = served
    get_mnist(mirrors=[mirror])
    before = {name: route.gets for name, route in routes.items()}
    assert all(count == 1 for count in before.values())
    get_mnist(mirrors=[mirror])
    assert {name: route.gets for name, route in routes.items()} == before
    assert os.path.isfile(dataset_root / "pfnet" / "chainer" / "mnist" / "train.npz")


def test_the_mirrors_environment_variable_is_tried_first(served, dataset_root, monkeypatch):
    mirror, _, _ = served
    monkeypatch.setenv("DATASET_KIT_MIRRORS", f"http://127.0.0.1:9/down, {mirror}")
    train, _ = get_mnist()
    assert len(train) == 5


def test_a_checksum_mismatch_names_the_file_and_caches_nothing(served, dataset_root,
                                                              monkeypatch):
    mirror, _, _ = served
    wrong = dict(mnist.CHECKSUMS["mnist"], **{"train-labels-idx1-ubyte.gz": "0" * 64})
    monkeypatch.setitem(mnist.CHECKSUMS, "mnist", wrong)
    with pytest.raises(HashMismatchError, match="train-labels-idx1-ubyte.gz.*expected 0{64}"):
        get_mnist(mirrors=[mirror])
    downloads = dataset_root / "downloads"
    assert not any("labels" in n for n in os.listdir(downloads))
    assert not (dataset_root / "pfnet" / "chainer" / "mnist" / "train.npz").exists()


def test_label_names_and_the_pinned_upstream_checksums():
    assert get_fashion_mnist_labels()[9] == "Ankle boot"
    assert get_kuzushiji_mnist_labels()[0] == ("o", "\u304a")
    for family in ("mnist", "fashion-mnist", "kuzushiji_mnist"):
        assert len(mnist.CHECKSUMS[family]) == 4
        assert all(len(h) == 64 for h in mnist.CHECKSUMS[family].values())
    assert get_fashion_mnist.__name__ == "get_fashion_mnist"
