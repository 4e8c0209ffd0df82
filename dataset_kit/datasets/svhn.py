"""SVHN (Street View House Numbers, cropped digits), with Chainer's signature and outputs.

The ``.mat`` files come through ``cached_download`` (pinned sha256, mirrors
tried in order) and are read with SciPy (the optional extra
``dataset_kit[scipy]``); the arrays are cached in the same
``pfnet/chainer/svhn/<split>.npz`` files Chainer writes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataset_kit.datasets._mirrors import fetch
from dataset_kit.datasets.tuple_dataset import TupleDataset
from dataset_kit.download import cache_or_load_file, get_dataset_directory

# sha256 of the upstream files: the _CHECKSUMS table of torchvision's prototype
# datasets (pytorch/vision, torchvision/prototype/datasets/_builtin/svhn.py); the
# upstream page publishes no checksum.
CHECKSUMS = {
    "train_32x32.mat": "435e94d69a87fde4fd4d7f3dd208dfc32cb6ae8af2240d066de1df7508d083b8",
    "test_32x32.mat": "cdce80dfb2a2c4c6160906d0bd7c68ec5a99d7ca4831afa54f09182025b6a75b",
    "extra_32x32.mat": "a133a4beb38a00fcdda90c9489e0c04f900b660ce8a316a5e854838379a71eb3",
}
UPSTREAM = ["http://ufldl.stanford.edu/housenumbers/"]


def _loadmat() -> Any:
    try:
        from scipy.io import loadmat
    except ImportError as error:
        raise ImportError("get_svhn reads .mat files with SciPy: pip install "
                          f"'dataset_kit[scipy]' ({error})") from error
    return loadmat


def _raw(split: str, mirrors: Sequence[str] | None) -> dict:
    loadmat = _loadmat()

    def create(path: str) -> dict:
        name = f"{split}_32x32.mat"
        mat = loadmat(fetch(name, CHECKSUMS[name], [u + name for u in UPSTREAM], mirrors))
        raw = {"x": mat["X"].astype(np.uint8), "y": mat["y"].astype(np.uint8)}
        np.savez_compressed(path, **raw)
        return raw

    directory = get_dataset_directory(os.path.join("pfnet", "chainer", "svhn"))
    return cache_or_load_file(os.path.join(directory, f"{split}.npz"), create,
                              lambda p: dict(np.load(p)))


def _preprocess(raw: dict, withlabel: bool, scale: float, dtype: Any, label_dtype: Any) -> Any:
    images = raw["x"].transpose(3, 2, 0, 1).astype(np.float32 if dtype is None else dtype)
    images *= scale / 255.0
    labels = raw["y"].astype(label_dtype).flatten()
    labels[labels == 10] = 0  # the digit 0 is stored as label 10
    if withlabel:
        return TupleDataset(images, labels)
    return images


def get_svhn(withlabel: bool = True, scale: float = 1.0, dtype: Any = None,
             label_dtype: Any = np.int32, add_extra: bool = False,
             mirrors: Sequence[str] | None = None) -> tuple[Any, ...]:
    """Return SVHN's training and test sets (and the extra set), as Chainer's ``get_svhn``.

    Images are 3 x 32 x 32, scaled to ``[0, scale]``; labels are digits 0-9
    (the files' label 10 becomes 0).

    Args:
        withlabel: return ``TupleDataset(images, labels)``; else only images.
        scale: the pixel values' upper bound.
        dtype: the images' dtype (float32 by default).
        label_dtype: the labels' dtype.
        add_extra: also return the extra training set.
        mirrors: base URLs to try before the upstream one.

    Returns:
        ``(train, test)``, or ``(train, test, extra)`` with ``add_extra``.

    Raises:
        ImportError: if SciPy is not installed (``pip install 'dataset_kit[scipy]'``).
        HashMismatchError: if a file arrives with another sha256 (nothing is cached).
        DownloadError: if no mirror could be reached.
    """
    splits = ("train", "test", "extra") if add_extra else ("train", "test")
    return tuple(_preprocess(_raw(split, mirrors), withlabel, scale, dtype, label_dtype)
                 for split in splits)
