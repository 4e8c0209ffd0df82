"""Gluon's NDArrays through dataset_kit's Gluon door, against MXNet 1.9.1 itself.

Runs where MXNet 1.9.1 is installed (numpy<2, numpy.bool set before import);
CI installs it into the peers environment (see .ci/run).
"""

import os
import subprocess
import sys

import numpy as np
import pytest

if not hasattr(np, "bool"):
    np.bool = bool  # MXNet 1.9.1 still reads numpy.bool
mx = pytest.importorskip("mxnet", reason="MXNet 1.9.1 is not installed here (CI runs "
                         "tests/peers in a numpy<2 environment that has it)")

from dataset_kit import loader  # noqa: E402
from dataset_kit.datasets import MNIST  # noqa: E402

WORKERS = [dict(num_workers=0), dict(num_workers=3, thread_pool=True), dict(num_workers=3)]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Full(loader.Dataset):
    """MXNet's test_gluon_data.Dataset: example k is nd.full((10,), k)."""

    def __len__(self):
        return 30

    def __getitem__(self, key):
        return mx.nd.full((10,), key)


def same(ours, theirs):
    if isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            same(a, b)
        return
    assert isinstance(ours, mx.nd.NDArray), type(ours)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    assert (ours.asnumpy() == theirs.asnumpy()).all()


@pytest.mark.parametrize("examples", [
    [mx.nd.ones((2, 3)) * k for k in range(4)],
    [(mx.nd.ones((2,)) * k, np.int32(k)) for k in range(3)],
    [(np.float32(k), mx.nd.array([k, k + 1], dtype="int64"), k * 0.5) for k in range(3)],
], ids=["ndarrays", "ndarray and int32", "ndarray in the middle"])
def test_default_batchify_gives_what_gluons_gives_for_ndarray_examples(examples):
    theirs = mx.gluon.data.dataloader.default_batchify_fn(examples)
    same(loader.default_batchify_fn(examples), theirs)


@pytest.mark.parametrize("workers", WORKERS, ids=["serial", "threads", "processes"])
def test_ndarray_examples_give_ndarray_batches_for_every_worker_kind(workers):
    # MXNet's test_multi_worker, and what stalled then failed before (numpy
    # tried to read NDArrays as nested sequences, 32 dimensions deep).
    with loader.DataLoader(Full(), batch_size=4, **workers) as data:
        for i, batch in enumerate(data):
            assert isinstance(batch, mx.nd.NDArray) and batch.shape[1:] == (10,)
            assert (batch.asnumpy()[:, 0] == np.arange(4 * i, min(4 * i + 4, 30))).all()
            assert batch.as_in_context(mx.cpu()).context == mx.cpu()


def test_an_array_dataset_takes_ndarrays_as_gluon_does():
    x = mx.nd.array(np.arange(12, dtype=np.float32).reshape(6, 2))
    y = mx.nd.array(np.arange(6, dtype=np.float32))
    ours = list(loader.DataLoader(loader.ArrayDataset(x, y), 4))
    theirs = list(mx.gluon.data.DataLoader(mx.gluon.data.ArrayDataset(x, y), 4))
    same(ours, theirs)


def test_gluon_mnist_gives_ndarray_images_and_int32_labels_when_mxnet_is_in_use(tmp_path):
    from tests.peers.test_gluon_training import write_synthetic_mnist

    write_synthetic_mnist(tmp_path / "mnist", counts=(("train", 8), ("t10k", 4)))
    train = MNIST(root=tmp_path / "mnist")
    image, label = train[3]
    assert isinstance(image, mx.nd.NDArray) and image.shape == (28, 28, 1)
    assert image.dtype == np.uint8 and isinstance(label, np.int32)
    data, labels = next(iter(loader.DataLoader(train, 4)))
    assert isinstance(data, mx.nd.NDArray) and data.shape == (4, 28, 28, 1)
    assert isinstance(labels, mx.nd.NDArray) and labels.dtype == np.int32


def test_a_numpy_batch_never_imports_mxnet():
    code = ("import numpy as np, sys; from dataset_kit import loader; "
            "out = loader.default_batchify_fn([(np.ones(2), 1), (np.zeros(2), 2)]); "
            "batch = next(iter(loader.DataLoader(loader.ArrayDataset(np.arange(6)), 4))); "
            "from dataset_kit.io import MXArray; "
            "assert type(out[0]) is np.ndarray and type(batch) is MXArray; "
            "assert 'mxnet' not in sys.modules, 'mxnet was imported'")
    result = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=ROOT),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
