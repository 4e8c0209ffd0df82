"""Gluon's vision datasets: ``MNIST``, ``FashionMNIST``, ``CIFAR10`` and ``CIFAR100``.

Gluon's constructors (``root``, ``train``, ``transform``; ``fine_label`` for
CIFAR-100) and examples: an HWC uint8 image and an int32 label, passed
through ``transform(image, label)`` when one is given.

=====================================  ===============================================
Gluon 1.9.1                            dataset_kit
=====================================  ===============================================
files in ``root`` (Gluon's names)      read as they are (Gluon checks their sha1 and
                                       downloads again on a mismatch)
files missing from ``root``            dataset_kit's loaders: pinned sha256, mirrors
                                       (``DATASET_KIT_MIRRORS``), the dataset cache;
                                       nothing is written to ``root``
image: an NDArray                      an NDArray when the program has imported MXNet,
                                       else a numpy array (MXNet is never imported here)
label: a numpy int32 scalar            the same
=====================================  ===============================================
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dataset_kit._gather import take_rows
from dataset_kit._mxnet_arrays import mxnet_in_use
from dataset_kit.batch import ExampleBatch
from dataset_kit.datasets import cifar, mnist
from dataset_kit.datasets.gluon_dataset import Dataset
from dataset_kit.download import cache_or_load_file, get_dataset_directory


def _root(root: str | os.PathLike | None, name: str) -> str:
    """``root``, or Gluon's default ``$MXNET_HOME/datasets/<name>`` (Gluon's files are reused)."""
    if root is None:
        home = os.environ.get("MXNET_HOME", os.path.join("~", ".mxnet"))
        root = os.path.join(home, "datasets", name)
    return os.path.expanduser(os.fspath(root))


class _VisionDataset(Dataset):
    """Images (N x H x W x C uint8) and int32 labels, with Gluon's ``transform``."""

    def __init__(self, images: np.ndarray, labels: np.ndarray,
                 transform: Callable[[Any, Any], Any] | None) -> None:
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be callable or None, got {type(transform).__name__}")
        self._images, self._labels, self._transform = images, labels, transform
        self._ndarray = mxnet_in_use() is not None

    def __len__(self) -> int:
        return len(self._labels)

    def _image(self, image: np.ndarray) -> Any:
        if not self._ndarray:
            return image
        import mxnet  # the program imported it before building this dataset

        return mxnet.nd.array(image, dtype=image.dtype)

    def get_example(self, i: int) -> Any:
        image, label = self._image(self._images[i]), self._labels[i]
        return (image, label) if self._transform is None else self._transform(image, label)

    def get_batch(self, indices: np.ndarray) -> Sequence[Any]:
        if self._transform is None and not self._ndarray:  # numpy columns, one gather each
            return ExampleBatch((take_rows(self._images, indices),
                                 take_rows(self._labels, indices)))
        return super().get_batch(indices)


# -- MNIST --------------------------------------------------------------------------


def _mnist_arrays(family: str, root: str, train: bool) -> tuple[np.ndarray, np.ndarray]:
    prefix = "train" if train else "t10k"
    images = os.path.join(root, f"{prefix}-images-idx3-ubyte.gz")
    labels = os.path.join(root, f"{prefix}-labels-idx1-ubyte.gz")
    if os.path.isfile(images) and os.path.isfile(labels):
        x, y = mnist.read_idx(images, 2051), mnist.read_idx(labels, 2049)
        if len(x) != len(y):
            raise ValueError(f"{images} holds {len(x)} images but {labels} {len(y)} labels")
        if x.shape[1] != 28 * 28:
            raise ValueError(f"{images} holds images of {x.shape[1]} pixels, expected 28 x 28")
    else:
        raw = mnist.read_split(family, "train" if train else "test", None)
        x, y = raw["x"], raw["y"]
    return x.reshape(-1, 28, 28, 1), y.astype(np.int32)


class MNIST(_VisionDataset):
    """Gluon's MNIST: ``(image, label)``, a 28 x 28 x 1 uint8 image and an int32 label.

    Args:
        root: the folder of Gluon's files (default ``$MXNET_HOME/datasets/mnist``,
            as Gluon's: ``train-images-idx3-ubyte.gz``,
            ``train-labels-idx1-ubyte.gz``, ``t10k-...``); read when present,
            else fetched through :func:`~dataset_kit.datasets.get_mnist`'s cache.
        train: the training set (60000) or the test set (10000).
        transform: ``transform(image, label)`` applied to every example.

    Raises:
        ValueError: if a file in ``root`` is not an MNIST IDX file.
        HashMismatchError: if a downloaded file has another sha256.
        DownloadError: if no mirror could be reached.
    """

    _family = "mnist"

    def __init__(self, root: str | os.PathLike | None = None, train: bool = True,
                 transform: Callable[[Any, Any], Any] | None = None) -> None:
        self._train = bool(train)
        root = _root(root, self._family)
        super().__init__(*_mnist_arrays(self._family, root, self._train), transform)


class FashionMNIST(MNIST):
    """Gluon's FashionMNIST: as :class:`MNIST`, over Zalando's Fashion-MNIST files."""

    _family = "fashion-mnist"

    def __init__(self, root: str | os.PathLike | None = None,
                 train: bool = True, transform: Callable[[Any, Any], Any] | None = None) -> None:
        super().__init__(root, train, transform)


# -- CIFAR --------------------------------------------------------------------------


def _read_bin(path: str, label_bytes: int, label_at: int) -> tuple[np.ndarray, np.ndarray]:
    """A CIFAR binary batch: rows of label byte(s), then 3 x 32 x 32 pixels."""
    with open(path, "rb") as f:
        data = np.frombuffer(f.read(), dtype=np.uint8)
    row = 3072 + label_bytes
    if data.size % row:
        raise ValueError(f"{path} holds {data.size} bytes, not a whole number of "
                         f"{row}-byte CIFAR records")
    data = data.reshape(-1, row)
    return data[:, label_bytes:].reshape(-1, 3, 32, 32), data[:, label_at].astype(np.int32)


def _cifar100_coarse_labels(train: bool) -> np.ndarray:
    """CIFAR-100's 20 coarse labels, read once from the python archive and cached."""
    def create(path: str) -> dict:
        import tarfile

        with tarfile.open(cifar.archive_path("cifar-100", None), "r:gz") as archive:
            raw = {split: np.asarray(cifar.unpickle_member(archive, f"cifar-100-python/{split}")
                                     ["coarse_labels"], dtype=np.uint8)
                   for split in ("train", "test")}
        np.savez_compressed(path, train=raw["train"], test=raw["test"])
        return raw

    directory = get_dataset_directory(os.path.join("dataset_kit", "cifar"))
    raw = cache_or_load_file(os.path.join(directory, "cifar-100-coarse-labels.npz"), create,
                             lambda p: dict(np.load(p)))
    return raw["train" if train else "test"]


class CIFAR10(_VisionDataset):
    """Gluon's CIFAR10: ``(image, label)``, a 32 x 32 x 3 uint8 image and an int32 label.

    Args:
        root: the folder of Gluon's binary files (default
            ``$MXNET_HOME/datasets/cifar10``: ``data_batch_1.bin`` ...
            ``data_batch_5.bin``, ``test_batch.bin``); read when all are
            present, else the python archive is fetched through
            :func:`~dataset_kit.datasets.get_cifar10`'s cache.
        train: the training set (50000) or the test set (10000).
        transform: ``transform(image, label)`` applied to every example.

    Raises:
        ValueError: if a file in ``root`` is not a CIFAR binary batch.
        HashMismatchError: if a downloaded archive has another sha256.
        DownloadError: if no mirror could be reached.
    """

    def __init__(self, root: str | os.PathLike | None = None, train: bool = True,
                 transform: Callable[[Any, Any], Any] | None = None) -> None:
        self._train = bool(train)
        root = _root(root, "cifar10")
        names = [f"data_batch_{k}.bin" for k in range(1, 6)] if self._train \
            else ["test_batch.bin"]
        paths = [os.path.join(root, name) for name in names]
        if all(os.path.isfile(p) for p in paths):
            parts = [_read_bin(p, 1, 0) for p in paths]
            images = np.concatenate([x for x, _ in parts])
            labels = np.concatenate([y for _, y in parts])
        else:
            images, labels = self._from_cache()
        super().__init__(images.transpose(0, 2, 3, 1), labels.astype(np.int32), transform)

    def _from_cache(self) -> tuple[np.ndarray, np.ndarray]:
        raw = cifar.read_raw("cifar-10", None)
        split = "train" if self._train else "test"
        return raw[f"{split}_x"].reshape(-1, 3, 32, 32), raw[f"{split}_y"]


class CIFAR100(CIFAR10):
    """Gluon's CIFAR100: as :class:`CIFAR10`, with 20 coarse or 100 fine labels.

    Args:
        root: the folder of Gluon's binary files (``train.bin``, ``test.bin``).
        fine_label: the 100 fine labels; the 20 coarse ones when False (Gluon's default).
        train: the training set (50000) or the test set (10000).
        transform: ``transform(image, label)`` applied to every example.

    Raises:
        ValueError: if a file in ``root`` is not a CIFAR-100 binary file.
        HashMismatchError: if a downloaded archive has another sha256.
        DownloadError: if no mirror could be reached.
    """

    def __init__(self, root: str | os.PathLike | None = None,
                 fine_label: bool = False, train: bool = True,
                 transform: Callable[[Any, Any], Any] | None = None) -> None:
        self._train, self._fine_label = bool(train), bool(fine_label)
        root = _root(root, "cifar100")
        path = os.path.join(root, "train.bin" if self._train else "test.bin")
        if os.path.isfile(path):
            images, labels = _read_bin(path, 2, int(self._fine_label))
        else:
            images, labels = self._from_cache()
        _VisionDataset.__init__(self, images.transpose(0, 2, 3, 1), labels.astype(np.int32),
                                transform)

    def _from_cache(self) -> tuple[np.ndarray, np.ndarray]:
        raw = cifar.read_raw("cifar-100", None)
        split = "train" if self._train else "test"
        labels = raw[f"{split}_y"] if self._fine_label else _cifar100_coarse_labels(self._train)
        return raw[f"{split}_x"].reshape(-1, 3, 32, 32), labels
