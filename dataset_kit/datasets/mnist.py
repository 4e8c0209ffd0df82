"""MNIST, Fashion-MNIST and Kuzushiji-MNIST, with Chainer's signatures and outputs.

Each loader is built only from public pieces: the raw files come through
``cached_download`` (pinned sha256, mirrors tried in order), and the parsed
arrays through ``cache_or_load_file`` (an ``.npz`` in the dataset directory,
so the second call loads in milliseconds).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataset_kit.datasets._mirrors import fetch
from dataset_kit.datasets.tuple_dataset import TupleDataset
from dataset_kit.download import cache_or_load_file, get_dataset_directory
from dataset_kit.formats import idx

# sha256 of the upstream files: the _CHECKSUMS tables of torchvision's
# prototype datasets (pytorch/vision, torchvision/prototype/datasets/_builtin/mnist.py).
CHECKSUMS = {
    "mnist": {
        "train-images-idx3-ubyte.gz":
            "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
        "train-labels-idx1-ubyte.gz":
            "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
        "t10k-images-idx3-ubyte.gz":
            "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
        "t10k-labels-idx1-ubyte.gz":
            "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
    },
    "fashion-mnist": {
        "train-images-idx3-ubyte.gz":
            "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
        "train-labels-idx1-ubyte.gz":
            "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
        "t10k-images-idx3-ubyte.gz":
            "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
        "t10k-labels-idx1-ubyte.gz":
            "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
    },
    "kuzushiji_mnist": {
        "train-images-idx3-ubyte.gz":
            "51467d22d8cc72929e2a028a0428f2086b092bb31cfb79c69cc0a90ce135fde4",
        "train-labels-idx1-ubyte.gz":
            "e38f9ebcd0f3ebcdec7fc8eabdcdaef93bb0df8ea12bee65224341c8183d8e17",
        "t10k-images-idx3-ubyte.gz":
            "edd7a857845ad6bb1d0ba43fe7e794d164fe2dce499a1694695a792adfac43c5",
        "t10k-labels-idx1-ubyte.gz":
            "20bb9a0ef54c7db3efc55a92eef5582c109615df22683c380526788f98e42a1c",
    },
}

UPSTREAM = {
    "mnist": ["https://ossci-datasets.s3.amazonaws.com/mnist/",
              "https://storage.googleapis.com/cvdf-datasets/mnist/",
              "http://yann.lecun.com/exdb/mnist/"],
    "fashion-mnist": ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"],
    "kuzushiji_mnist": ["http://codh.rois.ac.jp/kmnist/dataset/kmnist/"],
}

_FASHION_LABELS = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                   "Sneaker", "Bag", "Ankle boot")
_KUZUSHIJI_LABELS = (("o", "\u304a"), ("ki", "\u304d"), ("su", "\u3059"), ("tsu", "\u3064"),
                     ("na", "\u306a"), ("ha", "\u306f"), ("ma", "\u307e"), ("ya", "\u3084"),
                     ("re", "\u308c"), ("wo", "\u3092"))


def get_fashion_mnist_labels() -> list[str]:
    """The names of Fashion-MNIST's ten classes, in label order."""
    return list(_FASHION_LABELS)


def get_kuzushiji_mnist_labels() -> list[tuple[str, str]]:
    """Kuzushiji-MNIST's ten classes as ``(romaji, hiragana)``, in label order."""
    return list(_KUZUSHIJI_LABELS)


def read_idx(path: str, magic: int) -> np.ndarray:
    """Return the array of a gzipped IDX file whose magic number must be ``magic``.

    Raises:
        IdxFormatError: (a ValueError) naming ``path``, if the magic or the size
            does not match its header.
    """
    values = idx.read_idx(path, magic - 0x800)
    return values.reshape(len(values), -1) if values.ndim > 1 else values


def read_split(family: str, split: str, mirrors: Sequence[str] | None) -> Any:
    """Return the raw arrays of split ``split`` of MNIST-like ``family``, cached as npz."""
    prefix = "train" if split == "train" else "t10k"

    def create(path: str) -> dict:
        names = (f"{prefix}-images-idx3-ubyte.gz", f"{prefix}-labels-idx1-ubyte.gz")
        x_path, y_path = (fetch(n, CHECKSUMS[family][n], [u + n for u in UPSTREAM[family]],
                                mirrors) for n in names)
        x, y = read_idx(x_path, 2051), read_idx(y_path, 2049)
        if len(x) != len(y):
            raise ValueError(f"{family} {split}: {len(x)} images but {len(y)} labels")
        np.savez_compressed(path, x=x, y=y)
        return {"x": x, "y": y}  # what the loader returns: the first call returns this

    directory = get_dataset_directory(f"pfnet/chainer/{family}")
    return cache_or_load_file(os.path.join(directory, f"{split}.npz"), create,
                              lambda p: dict(np.load(p)))


def _preprocess(raw: dict, withlabel: bool, ndim: int, scale: float, dtype: Any,
                label_dtype: Any, rgb_format: bool) -> Any:
    images = raw["x"]
    if ndim == 2:
        images = images.reshape(-1, 28, 28)
    elif ndim == 3:
        images = images.reshape(-1, 1, 28, 28)
        if rgb_format:
            images = np.broadcast_to(images, (len(images), 3, 28, 28))
    elif ndim != 1:
        raise ValueError(f"ndim must be 1, 2 or 3, got {ndim!r}")
    images = images.astype(np.float32 if dtype is None else dtype)
    images *= scale / 255.0
    if withlabel:
        return TupleDataset(images, raw["y"].astype(label_dtype))
    return images


def _loader(family: str) -> Any:
    def load(withlabel: bool = True, ndim: int = 1, scale: float = 1.0, dtype: Any = None,
             label_dtype: Any = np.int32, rgb_format: bool = False,
             mirrors: Sequence[str] | None = None) -> tuple[Any, Any]:
        return tuple(_preprocess(read_split(family, split, mirrors), withlabel, ndim, scale, dtype,
                                 label_dtype, rgb_format) for split in ("train", "test"))

    return load


get_mnist = _loader("mnist")
get_fashion_mnist = _loader("fashion-mnist")
get_kuzushiji_mnist = _loader("kuzushiji_mnist")
_DOC = """Return the training and test sets of {name}, as Chainer's ``{func}`` does.

    Images are scaled to ``[0, scale]`` and shaped by ``ndim``: 1 gives 784
    values, 2 gives 28 x 28, 3 gives 1 x 28 x 28 (3 x 28 x 28 with
    ``rgb_format``). The raw files are downloaded once (pinned sha256, mirrors
    tried in order; ``mirrors`` and ``DATASET_KIT_MIRRORS`` put your own first)
    and the parsed arrays cached as an ``.npz`` in the dataset directory.

    Args:
        withlabel: return ``TupleDataset(images, labels)``; else only images.
        ndim: 1, 2 or 3.
        scale: the pixel values' upper bound.
        dtype: the images' dtype (float32 by default).
        label_dtype: the labels' dtype.
        rgb_format: with ``ndim=3``, three identical channels.
        mirrors: base URLs to try before the upstream ones.

    Returns:
        ``(train, test)``.

    Raises:
        ValueError: for a bad ``ndim`` or a malformed file.
        HashMismatchError: if a file arrives with another sha256 (nothing is cached).
        DownloadError: if no mirror could be reached.
    """
get_mnist.__doc__ = _DOC.format(name="MNIST", func="get_mnist")
get_fashion_mnist.__doc__ = _DOC.format(name="Fashion-MNIST", func="get_fashion_mnist")
get_kuzushiji_mnist.__doc__ = _DOC.format(name="Kuzushiji-MNIST", func="get_kuzushiji_mnist")
for _function, _name in ((get_mnist, "get_mnist"), (get_fashion_mnist, "get_fashion_mnist"),
                         (get_kuzushiji_mnist, "get_kuzushiji_mnist")):
    _function.__name__ = _function.__qualname__ = _name
