"""ImageFolderDataset: one class per sub-folder (the Gluon / torchvision convention)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataset_kit.datasets.gluon_dataset import Dataset
from dataset_kit.image.decode import load_decoders, read_image

DEFAULT_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm", ".tif", ".tiff", ".webp")


class ImageFolderDataset(Dataset):
    """``(image, label)`` for every image under ``root/<class>/``, classes in sorted order.

    Images are CHW arrays (``dtype``); ``label`` is the class's position in
    :attr:`classes`. Files are listed once, in sorted order; an image is
    decoded by whichever process fetches it.

    Args:
        root: the folder whose sub-folders are the classes.
        extensions: file name endings to include (case-insensitive).
        dtype: the images' dtype (float32 by default).
        label_dtype: the labels' dtype.
        draft_size: ``(width, height)``: decode JPEGs at a reduced scale still
            at least this large (see :func:`~dataset_kit.image.read_image`).

    Raises:
        ImportError: if Pillow is not installed (the ``image`` extra).
        FileNotFoundError: if ``root`` does not exist.
        NotADirectoryError: if ``root`` is a file.
    """

    def __init__(self, root: str | os.PathLike, extensions: Sequence[str] | None = None,
                 dtype: Any = None, label_dtype: Any = np.int32,
                 draft_size: tuple[int, int] | None = None) -> None:
        load_decoders()
        self._draft_size: tuple[int, int] | None = None
        if draft_size is not None:
            width, height = draft_size
            self._draft_size = (int(width), int(height))
        self.root = os.fspath(root)
        if not os.path.exists(self.root):
            raise FileNotFoundError(f"image folder {self.root} does not exist")
        if not os.path.isdir(self.root):
            raise NotADirectoryError(f"image folder {self.root} is a file, not a directory")
        wanted = tuple(e.lower() for e in (extensions or DEFAULT_EXTENSIONS))
        self.classes = sorted(d for d in os.listdir(self.root)
                              if os.path.isdir(os.path.join(self.root, d)))
        self.items: list[tuple[str, int]] = []
        for label, name in enumerate(self.classes):
            folder = os.path.join(self.root, name)
            for directory, subdirs, files in os.walk(folder):
                subdirs.sort()
                self.items += [(os.path.join(directory, f), label) for f in sorted(files)
                               if f.lower().endswith(wanted)]
        self._dtype = np.dtype(np.float32 if dtype is None else dtype)
        self._label_dtype = label_dtype

    @property
    def synsets(self) -> list[str]:
        """Gluon's name for :attr:`classes`: ``synsets[label]`` is the folder of ``label``."""
        return self.classes

    def __len__(self) -> int:
        return len(self.items)

    def get_example(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        path, label = self.items[i]
        return (read_image(path, self._dtype, f"{path} (example {i})", self._draft_size),
                np.array(label, dtype=self._label_dtype))
