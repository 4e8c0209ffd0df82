"""The standard-set loaders return exactly what Chainer 7.8.1's return for the same files.

Both read the same files, written here in the upstream formats: Chainer's
``cached_download`` is pointed at them, ours fetches them from a mirror on
127.0.0.1. Runs where Chainer is installed (CI's numpy<2 environment).
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

pytest.importorskip("chainer", reason="Chainer 7.8.1 is not installed here "
                    "(CI runs tests/peers in a numpy<2 environment that has it)")

import chainer.dataset.download  # noqa: E402
import chainer.datasets  # noqa: E402
import chainer.datasets.cifar  # noqa: E402
import chainer.datasets.ptb  # noqa: E402
import chainer.datasets.svhn  # noqa: E402

import dataset_kit.datasets as ours  # noqa: E402
from dataset_kit.datasets import cifar, ptb, svhn  # noqa: E402
from tests.datasets.standard_files import (  # noqa: E402
    PTB_TEXT,
    cifar10_archive,
    cifar100_archive,
    svhn_mat,
)
from tests.http_server import Route  # noqa: E402


@pytest.fixture
def both(http_server, monkeypatch, dataset_root, tmp_path):
    """Serve files to both libraries: ``put(module, {name: body})``."""
    local = {}
    monkeypatch.setattr(chainer.dataset.download, "cached_download",
                        lambda url: local[url.rsplit("/", 1)[1]])
    chainer.dataset.download.set_dataset_root(str(tmp_path / "chainer"))
    monkeypatch.setenv("DATASET_KIT_MIRRORS", http_server.url("/mirror"))

    def put(module, files):
        for name, body in files.items():
            (tmp_path / name).write_bytes(body)
            local[name] = str(tmp_path / name)
            http_server.add(f"/mirror/{name}", Route(body))
            monkeypatch.setitem(module.CHECKSUMS, name, hashlib.sha256(body).hexdigest())
        monkeypatch.setattr(module, "UPSTREAM", ["http://127.0.0.1:9/unreachable/"])

    yield put
    chainer.dataset.download.set_dataset_root(None)


def _same(a, b):
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b)
        return
    assert len(a) == len(b)
    for k in range(len(a)):
        for u, v in zip(a[k], b[k]):
            assert np.asarray(u).dtype == np.asarray(v).dtype and np.array_equal(u, v)


def test_cifar_equals_chainers(both):
    rng = np.random.default_rng(0)
    # Chainer's reader needs CIFAR-10's real batch size (the slow part: both
    # libraries parse and cache 60,000 images once; later calls load the .npz).
    both(cifar, {"cifar-10-python.tar.gz": cifar10_archive(rng, per_batch=10000)[0],
                 "cifar-100-python.tar.gz": cifar100_archive(rng)[0]})
    for kwargs in ({}, {"ndim": 1, "scale": 2.0}, {"withlabel": False, "dtype": np.float64}):
        for mine, theirs in ((ours.get_cifar10, chainer.datasets.get_cifar10),
                             (ours.get_cifar100, chainer.datasets.get_cifar100)):
            for a, b in zip(mine(**kwargs), theirs(**kwargs)):
                _same(a, b)


@pytest.mark.parametrize("kwargs", [{}, {"scale": 3.0, "label_dtype": np.int64},
                                    {"withlabel": False, "add_extra": True}])
def test_svhn_equals_chainers(both, kwargs):
    pytest.importorskip("scipy", reason="SciPy is in the test extra")
    rng = np.random.default_rng(1)
    both(svhn, {f"{s}_32x32.mat": svhn_mat(rng, n)[0]
                for s, n in (("train", 4), ("test", 3), ("extra", 2))})
    for a, b in zip(ours.get_svhn(**kwargs), chainer.datasets.get_svhn(**kwargs)):
        _same(a, b)


def test_ptb_equals_chainers(both):
    both(ptb, {f"ptb.{s}.txt": text.encode() for s, text in PTB_TEXT.items()})
    assert ours.get_ptb_words_vocabulary() == chainer.datasets.get_ptb_words_vocabulary()
    for a, b in zip(ours.get_ptb_words(), chainer.datasets.get_ptb_words()):
        _same(a, b)
