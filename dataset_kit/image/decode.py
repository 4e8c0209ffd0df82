"""Image decoding with Pillow (the optional ``image`` extra), into Chainer's CHW layout."""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np


class CorruptImageError(ValueError):
    """An image file could not be decoded (corrupt, truncated, or not an image)."""


def pillow() -> Any:
    """Return ``PIL.Image``, or raise an ImportError that names the extra to install."""
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("image datasets decode with Pillow, which is not installed; install "
                          "it with: pip install 'dataset_kit[image]'") from None
    return Image


def read_image(source: str | os.PathLike | bytes, dtype: Any, where: str,
               draft_size: tuple[int, int] | None = None) -> np.ndarray:
    """Decode an image file (a path or its bytes) to a CHW array, as Chainer does.

    Grayscale gives ``1 x H x W``; RGB ``3 x H x W``; RGBA keeps its alpha
    (``4 x H x W``), as Chainer 7.8.1 does. The whole image is decoded, so a
    truncated file fails here rather than giving a partly black image.

    Args:
        source: a path, or the file's bytes.
        dtype: the array's dtype.
        where: how to name the image in an error (its path and example index).
        draft_size: ``(width, height)``: decode a JPEG at the smallest of its
            1/2, 1/4, 1/8 scales that is still at least this large (Pillow's
            ``draft``), which is several times faster when a smaller image is
            wanted anyway. Other formats decode in full.

    Returns:
        The image as a CHW array.

    Raises:
        CorruptImageError: if the file cannot be decoded, naming ``where``.
        FileNotFoundError: if a path does not exist.
        ImportError: if Pillow is not installed.
    """
    image_module = pillow()
    file = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        with image_module.open(file) as image:
            if draft_size is not None and image.format == "JPEG":
                image.draft(image.mode, tuple(draft_size))
            array = np.asarray(image, dtype=dtype)
    except FileNotFoundError:
        raise
    except (OSError, SyntaxError, ValueError) as error:
        raise CorruptImageError(f"cannot decode image {where}: {error}") from None
    if array.ndim == 2:
        array = array[np.newaxis]
    else:
        array = array.transpose(2, 0, 1)
    return array
