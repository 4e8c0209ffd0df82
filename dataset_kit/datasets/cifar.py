"""CIFAR-10 and CIFAR-100, with Chainer's signatures and outputs.

The python-version archives come through ``cached_download`` (pinned sha256,
mirrors tried in order) and the parsed arrays through ``cache_or_load_file``,
in the same ``pfnet/chainer/cifar/<name>.npz`` files Chainer writes (so a
cache Chainer made is used as it is, and the other way round).
"""

from __future__ import annotations

import os
import pickle
import tarfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataset_kit.datasets._mirrors import fetch
from dataset_kit.datasets.tuple_dataset import TupleDataset
from dataset_kit.download import cache_or_load_file, get_dataset_directory

# sha256 of the upstream archives, as pinned by Keras (keras/datasets/cifar10.py and
# cifar100.py, ``file_hash``) and torchvision's prototype datasets (cifar.py,
# ``_SHA256``); the upstream page publishes only their MD5s
# (c58f30108f718f92721af3b95e74349a and eb9058c3a382ffc7106e4002c42a8d85).
CHECKSUMS = {
    "cifar-10-python.tar.gz": "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
    "cifar-100-python.tar.gz": "85cd44d02ba6437773c5bbd22e183051d648de2e7d6b014e1ef29b855ba677a7",
}
UPSTREAM = ["https://www.cs.toronto.edu/~kriz/"]

_CIFAR10_LABELS = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                   "ship", "truck")


def get_cifar10_labels() -> list[str]:
    """The names of CIFAR-10's ten classes, in label order."""
    return list(_CIFAR10_LABELS)


def get_cifar100_labels(mirrors: Sequence[str] | None = None) -> list[str]:
    """The names of CIFAR-100's hundred fine classes, in label order (read from the archive).

    Raises:
        HashMismatchError: if the archive arrives with another sha256.
        DownloadError: if no mirror could be reached.
    """
    def create(path: str) -> list[str]:
        with tarfile.open(archive_path("cifar-100", mirrors), "r:gz") as archive:
            names = unpickle_member(archive, "cifar-100-python/meta")["fine_label_names"]
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(names) + "\n")
        return list(names)

    def load(path: str) -> list[str]:
        with open(path, encoding="utf-8") as f:
            return f.read().split()

    directory = get_dataset_directory(os.path.join("pfnet", "chainer", "cifar"))
    return cache_or_load_file(os.path.join(directory, "cifar-100-labels.txt"), create, load)


def archive_path(name: str, mirrors: Sequence[str] | None) -> str:
    """Return the path of the cached CIFAR archive ``name`` (downloaded if missing)."""
    file = f"{name}-python.tar.gz"
    return fetch(file, CHECKSUMS[file], [u + file for u in UPSTREAM], mirrors)


def unpickle_member(archive: tarfile.TarFile, member: str) -> dict:
    """Return the unpickled dict of ``member`` of a CIFAR ``archive``.

    Raises:
        ValueError: naming the member, if the archive lacks it.
    """
    f = archive.extractfile(member)
    if f is None:
        # Our archives are opened from a str path, so name is that path.
        raise ValueError(f"{os.fsdecode(archive.name or '')}: {member} is not a file")
    # The archives hold Python 2 pickles of numpy arrays and lists: latin-1,
    # as Chainer reads them.
    return pickle.load(f, encoding="latin-1")


def read_raw(name: str, mirrors: Sequence[str] | None) -> dict:
    """Return the raw arrays of CIFAR ``name`` (``"cifar-10"``/``"cifar-100"``), cached as npz."""
    def create(path: str) -> dict:
        with tarfile.open(archive_path(name, mirrors), "r:gz") as archive:
            if name == "cifar-10":
                batches = [unpickle_member(archive, f"cifar-10-batches-py/data_batch_{k}")
                           for k in range(1, 6)]
                test = unpickle_member(archive, "cifar-10-batches-py/test_batch")
                train_x = np.concatenate([b["data"] for b in batches]).reshape(-1, 3072)
                train_y = np.concatenate([b["labels"] for b in batches]).astype(np.uint8)
                test_x = test["data"].reshape(-1, 3072)
                test_y = np.asarray(test["labels"], np.uint8)
            else:
                train = unpickle_member(archive, "cifar-100-python/train")
                test = unpickle_member(archive, "cifar-100-python/test")
                train_x = train["data"].reshape(-1, 3072)
                train_y = np.asarray(train["fine_labels"], np.uint8)
                test_x = test["data"].reshape(-1, 3072)
                test_y = np.asarray(test["fine_labels"], np.uint8)
        raw = {"train_x": train_x, "train_y": train_y, "test_x": test_x, "test_y": test_y}
        np.savez_compressed(path, **raw)
        return raw

    directory = get_dataset_directory(os.path.join("pfnet", "chainer", "cifar"))
    return cache_or_load_file(os.path.join(directory, f"{name}.npz"), create,
                              lambda p: dict(np.load(p)))


def _preprocess(images: np.ndarray, labels: np.ndarray, withlabel: bool, ndim: int,
                scale: float, dtype: Any) -> Any:
    if ndim == 1:
        images = images.reshape(-1, 3072)
    elif ndim == 3:
        images = images.reshape(-1, 3, 32, 32)
    else:
        raise ValueError(f"ndim must be 1 or 3 for CIFAR, got {ndim!r}")
    images = images.astype(np.float32 if dtype is None else dtype)
    images *= scale / 255.0
    if withlabel:
        return TupleDataset(images, labels.astype(np.int32))
    return images


def _load(name: str, withlabel: bool, ndim: int, scale: float, dtype: Any,
          mirrors: Sequence[str] | None) -> tuple[Any, Any]:
    if ndim not in (1, 3):
        raise ValueError(f"ndim must be 1 or 3 for CIFAR, got {ndim!r}")
    raw = read_raw(name, mirrors)
    return (_preprocess(raw["train_x"], raw["train_y"], withlabel, ndim, scale, dtype),
            _preprocess(raw["test_x"], raw["test_y"], withlabel, ndim, scale, dtype))


def get_cifar10(withlabel: bool = True, ndim: int = 3, scale: float = 1.0, dtype: Any = None,
                mirrors: Sequence[str] | None = None) -> tuple[Any, Any]:
    """Return CIFAR-10's training and test sets, as Chainer's ``get_cifar10`` does.

    Images are 3 x 32 x 32 (``ndim=3``) or 3072 values (``ndim=1``), scaled to
    ``[0, scale]``; labels are int32.

    Args:
        withlabel: return ``TupleDataset(images, labels)``; else only images.
        ndim: 1 or 3.
        scale: the pixel values' upper bound.
        dtype: the images' dtype (float32 by default).
        mirrors: base URLs to try before the upstream one.

    Returns:
        ``(train, test)``.

    Raises:
        ValueError: for a bad ``ndim``.
        HashMismatchError: if the archive arrives with another sha256 (nothing is cached).
        DownloadError: if no mirror could be reached.
    """
    return _load("cifar-10", withlabel, ndim, scale, dtype, mirrors)


def get_cifar100(withlabel: bool = True, ndim: int = 3, scale: float = 1.0, dtype: Any = None,
                 mirrors: Sequence[str] | None = None) -> tuple[Any, Any]:
    """Return CIFAR-100's training and test sets (fine labels), as Chainer's ``get_cifar100``.

    Args and errors as :func:`get_cifar10`.
    """
    return _load("cifar-100", withlabel, ndim, scale, dtype, mirrors)
