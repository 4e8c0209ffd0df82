"""Chainer's image datasets: files in folders or in zip archives, decoded with Pillow."""

from __future__ import annotations

import bisect
import os
import threading
import zipfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataset_kit.dataset import DatasetMixin
from dataset_kit.image.decode import load_decoders, read_image


def _lines(path: str) -> list[str]:
    with open(path) as f:
        return [line.strip() for line in f]


def _pairs_from_file(path: str) -> list[tuple[str, int]]:
    pairs = []
    for number, line in enumerate(_lines(path)):
        fields = line.split()
        if len(fields) != 2:
            raise ValueError(f"{path}, line {number + 1}: expected 'path label', got {line!r}")
        pairs.append((fields[0], int(fields[1])))
    return pairs


class ImageDataset(DatasetMixin):
    """Images as CHW arrays (grayscale ``1 x H x W``; RGBA keeps its alpha, as in Chainer).

    Args:
        paths: a list of paths, or a text file with one path per line.
        root: the directory the paths are relative to.
        dtype: the arrays' dtype (float32 by default).

    Raises:
        ImportError: if Pillow is not installed (the ``image`` extra).
        CorruptImageError: (on access) naming the file and the example index.
    """

    def __init__(self, paths: str | Sequence[str], root: str = ".", dtype: Any = None) -> None:
        load_decoders()
        self._paths = _lines(paths) if isinstance(paths, str) else list(paths)
        self._root = root
        self._dtype = np.dtype(np.float32 if dtype is None else dtype)

    def __len__(self) -> int:
        return len(self._paths)

    def get_example(self, i: int) -> np.ndarray:
        path = os.path.join(self._root, self._paths[i])
        return read_image(path, self._dtype, f"{path} (example {i})")


class LabeledImageDataset(DatasetMixin):
    """``(image, label)`` pairs: a list of ``(path, label)`` or a file of ``path label`` lines.

    Args:
        pairs: the pairs, or a text file of them.
        root: the directory the paths are relative to.
        dtype: the images' dtype (float32 by default).
        label_dtype: the labels' dtype.

    Raises:
        ImportError: if Pillow is not installed.
        ValueError: if a line of the pairs file is not ``path label``.
    """

    def __init__(self, pairs: str | Sequence[tuple[str, int]], root: str = ".",
                 dtype: Any = None, label_dtype: Any = np.int32) -> None:
        load_decoders()
        self._pairs = _pairs_from_file(pairs) if isinstance(pairs, str) else list(pairs)
        self._root = root
        self._dtype = np.dtype(np.float32 if dtype is None else dtype)
        self._label_dtype = label_dtype

    def __len__(self) -> int:
        return len(self._pairs)

    def get_example(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        path, label = self._pairs[i]
        full = os.path.join(self._root, path)
        return (read_image(full, self._dtype, f"{full} (example {i})"),
                np.array(label, dtype=self._label_dtype))


class ZippedImageDataset(DatasetMixin):
    """The images in a zip archive (every entry that is not a folder), in archive order.

    The archive is reopened in each process; pickling keeps only its name.

    Args:
        zipfilename: the archive.
        dtype: the arrays' dtype (float32 by default).
    """

    def __init__(self, zipfilename: str, dtype: Any = None) -> None:
        load_decoders()
        self._zipfilename = os.fspath(zipfilename)
        self._dtype = np.dtype(np.float32 if dtype is None else dtype)
        self._zf: zipfile.ZipFile | None = None
        self._zf_pid: int | None = None
        self._lock = threading.Lock()
        with zipfile.ZipFile(self._zipfilename) as zf:
            self._paths = [name for name in zf.namelist() if not name.endswith("/")]

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _zf=None, _zf_pid=None, _lock=None)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    def __len__(self) -> int:
        return len(self._paths)

    def get_example(self, i_or_name: int | str) -> np.ndarray:
        if isinstance(i_or_name, (int, np.integer)):
            return self._decode(i_or_name, i_or_name)
        return self._decode(i_or_name, None)

    def _decode(self, i_or_name: int | str, index: int | None) -> np.ndarray:
        """Decode a member, named by its position or its name.

        ``index`` is the example index of the dataset that asks (another one
        for the datasets built on this one), which a decode error names
        beside the member and the archive; None when asked by name alone.
        """
        name = self._paths[i_or_name] if isinstance(i_or_name, (int, np.integer)) else i_or_name
        with self._lock:
            if self._zf is None or self._zf_pid != os.getpid():
                self._zf, self._zf_pid = zipfile.ZipFile(self._zipfilename), os.getpid()
            data = self._zf.read(name)
        example = "" if index is None else f" (example {index})"
        return read_image(data, self._dtype, f"{name} in {self._zipfilename}{example}")


class MultiZippedImageDataset(DatasetMixin):
    """The images of several zip archives, one archive after another."""

    def __init__(self, zipfilenames: Sequence[str], dtype: Any = None) -> None:
        self._zfs = [ZippedImageDataset(name, dtype) for name in zipfilenames]
        self._ends = np.cumsum([0] + [len(z) for z in self._zfs]).tolist()

    def __len__(self) -> int:
        return self._ends[-1]

    def get_example(self, i: int) -> np.ndarray:
        which = bisect.bisect(self._ends, i) - 1
        return self._zfs[which]._decode(i - self._ends[which], i)


class LabeledZippedImageDataset(DatasetMixin):
    """``(image, label)`` pairs from a zip archive and a file of ``name label`` lines."""

    def __init__(self, zipfilename: str, labelfilename: str, dtype: Any = None,
                 label_dtype: Any = np.int32) -> None:
        self._pairs = _pairs_from_file(labelfilename)
        self._label_dtype = label_dtype
        self._zipfile = ZippedImageDataset(zipfilename, dtype=dtype)

    def __len__(self) -> int:
        return len(self._pairs)

    def get_example(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        name, label = self._pairs[i]
        return self._zipfile._decode(name, i), np.array(label, dtype=self._label_dtype)
