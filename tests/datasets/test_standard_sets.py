"""CIFAR-10/100, SVHN and PTB loaders against files in the real formats, from 127.0.0.1."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

from dataset_kit import HashMismatchError
from dataset_kit.datasets import (
    cifar,
    get_cifar10,
    get_cifar10_labels,
    get_cifar100,
    get_cifar100_labels,
    get_ptb_words,
    get_ptb_words_vocabulary,
    get_svhn,
    ptb,
    svhn,
)
from tests.datasets.standard_files import (
    PTB_TEXT,
    cifar10_archive,
    cifar100_archive,
    svhn_mat,
)
from tests.http_server import Route


def _serve(http_server, monkeypatch, module, files: dict[str, bytes], md5: tuple = ()) -> dict:
    """Serve ``files`` as a mirror and pin the module's checksums to them."""
    routes = {}
    for name, body in files.items():
        routes[name] = Route(body)
        http_server.add(f"/mirror/{name}", routes[name])
        pin = "md5:" + hashlib.md5(body).hexdigest() if name in md5 else \
            hashlib.sha256(body).hexdigest()
        monkeypatch.setitem(module.CHECKSUMS, name, pin)
    monkeypatch.setattr(module, "UPSTREAM", ["http://127.0.0.1:9/unreachable/"])
    monkeypatch.setenv("DATASET_KIT_MIRRORS", http_server.url("/mirror"))
    return routes


def test_cifar10(http_server, monkeypatch, dataset_root):
    body, arrays = cifar10_archive(np.random.default_rng(0))
    routes = _serve(http_server, monkeypatch, cifar, {"cifar-10-python.tar.gz": body})
    train, test = get_cifar10()
    assert len(train) == 15 and len(test) == 3
    x, y = train[7]
    assert x.shape == (3, 32, 32) and x.dtype == np.float32 and y.dtype == np.int32
    np.testing.assert_allclose(x, arrays["train"][0][7].reshape(3, 32, 32) / np.float32(255))
    assert y == arrays["train"][1][7]
    flat, _ = get_cifar10(withlabel=False, ndim=1, scale=2.0, dtype=np.float64)
    assert flat.shape == (15, 3072) and flat.dtype == np.float64
    np.testing.assert_allclose(flat[3], arrays["train"][0][3] * (2.0 / 255.0))
    assert routes["cifar-10-python.tar.gz"].gets == 1  # the second call read the .npz
    assert os.path.isfile(dataset_root / "pfnet" / "chainer" / "cifar" / "cifar-10.npz")
    with pytest.raises(ValueError, match="ndim must be 1 or 3"):
        get_cifar10(ndim=2)
    assert get_cifar10_labels()[9] == "truck"


def test_cifar100_fine_labels_and_names(http_server, monkeypatch, dataset_root):
    body, arrays = cifar100_archive(np.random.default_rng(1))
    _serve(http_server, monkeypatch, cifar, {"cifar-100-python.tar.gz": body})
    train, test = get_cifar100()
    x, y = test[2]
    np.testing.assert_allclose(x, arrays["test"][0][2].reshape(3, 32, 32) / np.float32(255))
    assert y == arrays["test"][1][2] and len(train) == 4
    names = get_cifar100_labels()
    assert len(names) == 100 and names[42] == "class42"


def test_svhn(http_server, monkeypatch, dataset_root):
    rng = np.random.default_rng(2)
    files, raw = {}, {}
    for split, n in (("train", 5), ("test", 3), ("extra", 2)):
        files[f"{split}_32x32.mat"], *raw[split] = svhn_mat(rng, n)
    _serve(http_server, monkeypatch, svhn, files)
    train, test, extra = get_svhn(add_extra=True)
    assert (len(train), len(test), len(extra)) == (5, 3, 2)
    x, y = train[0]
    want_x, want_y = raw["train"]
    np.testing.assert_allclose(x, want_x[..., 0].transpose(2, 0, 1) / np.float32(255))
    assert x.shape == (3, 32, 32) and y == 0  # label 10 is the digit 0
    assert [int(train[i][1]) for i in range(1, 5)] == [int(v) % 10 for v in want_y[1:, 0]]
    images, _ = get_svhn(withlabel=False, scale=3.0, dtype=np.float64)
    assert images.dtype == np.float64 and images.max() <= 3.0


def test_svhn_without_scipy_names_the_extra():
    code = ("import sys; sys.modules['scipy'] = None; sys.modules['scipy.io'] = None\n"
            "from dataset_kit.datasets import get_svhn\n"
            "try:\n    get_svhn()\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert "dataset_kit[scipy]" in out.stdout, out.stderr


def test_ptb_words_and_vocabulary(http_server, monkeypatch, dataset_root):
    files = {f"ptb.{split}.txt": text.encode() for split, text in PTB_TEXT.items()}
    routes = _serve(http_server, monkeypatch, ptb, files, md5=("ptb.train.txt",))
    vocab = get_ptb_words_vocabulary()
    assert list(vocab) == ["the", "cat", "sat", "on", "mat", "<eos>", "a", "dog", "<unk>"]
    train, valid, test = get_ptb_words()
    assert train.dtype == np.int32
    assert train.tolist() == [0, 1, 2, 3, 0, 4, 5, 6, 7, 8, 0, 1, 5]
    assert valid.tolist() == [0, 7, 2, 5]
    assert test.tolist() == [6, 1, 3, 6, 4, 5, 0, 8, 5]
    assert routes["ptb.train.txt"].gets == 1
    assert (dataset_root / "pfnet" / "chainer" / "ptb" / "vocab.txt").read_text().split() == \
        list(vocab)


@pytest.mark.parametrize("md5", [False, True])
def test_a_wrong_file_is_refused_and_not_kept(http_server, monkeypatch, dataset_root, md5):
    files = {f"ptb.{split}.txt": text.encode() for split, text in PTB_TEXT.items()}
    _serve(http_server, monkeypatch, ptb, files, md5=("ptb.train.txt",) if md5 else ())
    wrong = ("md5:" + "0" * 32) if md5 else "0" * 64
    monkeypatch.setitem(ptb.CHECKSUMS, "ptb.train.txt", wrong)
    with pytest.raises(HashMismatchError, match=r"ptb.train.txt.*expected.*0000"):
        get_ptb_words_vocabulary()
    kept = [p for p in (dataset_root / "downloads").rglob("*") if p.is_file()] \
        if (dataset_root / "downloads").exists() else []
    assert not [p for p in kept if p.name.endswith("ptb.train.txt")]
    assert not (dataset_root / "pfnet" / "chainer" / "ptb" / "vocab.txt").exists()
