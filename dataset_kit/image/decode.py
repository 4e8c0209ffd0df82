"""Image decoding with Pillow (the optional ``image`` extra), into Chainer's CHW layout."""

from __future__ import annotations

import io
import os
import sys
import warnings
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


JPEG_MAGIC = b"\xff\xd8\xff"


# Set once an import of simplejpeg failed: Python does not remember a failed
# import, and retrying it for every image cost ~25 us (a path search) each time.
_simplejpeg_missing = False


def _simplejpeg() -> Any:
    """simplejpeg (libjpeg-turbo, in the ``image`` extra) if installed, else None.

    A module hidden with ``sys.modules["simplejpeg"] = None`` counts as not
    installed; a failed import is not retried.
    """
    global _simplejpeg_missing
    if "simplejpeg" in sys.modules:
        return sys.modules["simplejpeg"]
    if _simplejpeg_missing:
        return None
    try:
        import simplejpeg
    except ImportError:
        _simplejpeg_missing = True
        return None
    return simplejpeg


def _read_file(path: str | os.PathLike, where: str) -> bytes:
    """A file's bytes, read in one go.

    Pillow reads a file through many small buffered reads (about 40 for a
    70 KB JPEG); from the bytes read at once it reads nothing more. With the
    other changes of that commit, a worker's CPU per 500x375 JPEG decoded by
    Pillow went from 1.56-1.59 to 1.31-1.38 ms.
    """
    try:
        with open(path, "rb", buffering=0) as f:
            return f.readall()
    except IsADirectoryError:
        raise IsADirectoryError(f"image {where} is a directory, not an image file") from None


def load_decoders() -> None:
    """Import Pillow, and simplejpeg where installed, in this process now.

    Image datasets call it when they are made, in the process that will fork
    the workers: a worker forked afterwards inherits the modules, where it
    would otherwise import simplejpeg itself (77 ms of CPU per worker, for
    every iterator, against ~1 ms per decoded 500x375 JPEG).

    Raises:
        ImportError: if Pillow is not installed, naming the extra.
    """
    pillow()
    _simplejpeg()


def _check_pixels(image_module: Any, width: int, height: int, where: str) -> None:
    """Refuse a decompression bomb before decoding, with Pillow's own rule and types.

    simplejpeg decodes whatever size a header claims (a 675-byte JPEG can ask
    for 1.2 GB), so the header's size is checked first against
    ``PIL.Image.MAX_IMAGE_PIXELS``, read at each call so that a user who
    changes it changes ours: above twice the limit is an error, above the
    limit a warning, as in Pillow; None disables the check, as in Pillow.

    Raises:
        PIL.Image.DecompressionBombError: above twice the limit, naming ``where``.
    """
    limit = image_module.MAX_IMAGE_PIXELS
    if limit is None:
        return
    pixels = max(1, width) * max(1, height)
    if pixels > 2 * limit:
        raise image_module.DecompressionBombError(
            f"image {where} is {width}x{height} ({pixels} pixels), which exceeds the limit of "
            f"{2 * limit} pixels (2 x PIL.Image.MAX_IMAGE_PIXELS): it could be a "
            f"decompression bomb")
    if pixels > limit:
        warnings.warn(f"image {where} is {width}x{height} ({pixels} pixels), which exceeds "
                      f"PIL.Image.MAX_IMAGE_PIXELS ({limit}): it could be a decompression bomb",
                      image_module.DecompressionBombWarning, stacklevel=3)


def decode_jpeg(data: bytes, where: str, draft_size: Any) -> np.ndarray | None:
    """Decode a JPEG with simplejpeg: HWC uint8, or None where Pillow should decode it.

    It gives the same pixels as Pillow (both are libjpeg-turbo) about 1.5x
    faster (benchmarks/images.py); strict mode makes corrupt or truncated
    data an error, never a partly grey image. The size in the header is
    checked against Pillow's limit first (:func:`_check_pixels`).
    """
    simplejpeg = _simplejpeg()
    if simplejpeg is None:
        return None
    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError as error:
        raise CorruptImageError(f"cannot decode image {where}: {error}") from None
    _check_pixels(pillow(), width, height, where)
    try:
        if colorspace not in ("Gray", "YCbCr", "RGB"):
            return None  # CMYK and others: Pillow knows their conversions
        size = {}
        if draft_size is not None:
            # Pillow's draft rule (scales 1/2, 1/4, 1/8 only), so that both
            # decoders give the same shape whichever is installed.
            ratio = min(width // int(draft_size[0]), height // int(draft_size[1]))
            scale = next(s for s in (8, 4, 2, 1) if ratio >= s)
            size = {"min_width": -(-width // scale), "min_height": -(-height // scale)}
        return simplejpeg.decode_jpeg(data, colorspace="GRAY" if colorspace == "Gray" else "RGB",
                                      strict=True, **size)
    except ValueError as error:
        raise CorruptImageError(f"cannot decode image {where}: {error}") from None


# Pillow modes whose pixels are bytes, by their channel count.
_BYTE_MODES = {"L": 1, "RGB": 3, "RGBA": 4}


def _pixels(image_module: Any, image: Any) -> np.ndarray:
    """``np.asarray(image)``, read-only as numpy gives it, with one copy fewer.

    ``np.asarray`` takes ``image.tobytes()``, which packs the pixels in 64 KB
    pieces and then joins the pieces: a second copy of the whole image, 0.2 ms
    of the 1.2 ms a 500x375 JPEG took (benchmarks/images.py). Packing it in
    one piece with the same encoder gives the same bytes. Other modes, or a
    Pillow without that encoder, go through ``np.asarray``.
    """
    channels = _BYTE_MODES.get(image.mode)
    encoder_for = getattr(image_module, "_getencoder", None)
    if channels is None or encoder_for is None:
        return np.asarray(image)
    image.load()
    width, height = image.size
    size = width * height * channels
    encoder = encoder_for(image.mode, "raw", image.mode)
    encoder.setimage(image.im, (0, 0, width, height))
    _, status, data = encoder.encode(max(size, 1))
    if status <= 0 or len(data) != size:  # not packed in one piece: Pillow's own way
        return np.asarray(image)
    shape = (height, width) if channels == 1 else (height, width, channels)
    return np.frombuffer(data, np.uint8).reshape(shape)


def read_image(source: str | os.PathLike | bytes, dtype: Any, where: str,
               draft_size: tuple[int, int] | None = None) -> np.ndarray:
    """Decode an image file (a path or its bytes) to a CHW array, as Chainer does.

    Grayscale gives ``1 x H x W``; RGB ``3 x H x W``; RGBA keeps its alpha
    (``4 x H x W``), as Chainer 7.8.1 does. The whole image is decoded, so a
    truncated file fails here rather than giving a partly black image. JPEGs
    decode with simplejpeg where it is installed (the same pixels, faster),
    everything else with Pillow.

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
        PIL.Image.DecompressionBombError: if the image has more than twice
            ``PIL.Image.MAX_IMAGE_PIXELS`` pixels (read at each call), naming
            ``where``; above the limit itself, a ``DecompressionBombWarning``
            (Pillow's rule, applied to the size in the header before decoding,
            whichever decoder runs).
        FileNotFoundError: if a path does not exist.
        IsADirectoryError: if a path is a directory.
        ImportError: if Pillow is not installed.
    """
    image_module = pillow()
    if not isinstance(source, bytes):
        source = _read_file(source, where)
    if source[:3] == JPEG_MAGIC:
        decoded = decode_jpeg(source, where, draft_size)
        if decoded is not None:
            return decoded.transpose(2, 0, 1).astype(dtype, copy=False)
    try:
        with image_module.open(io.BytesIO(source)) as image:
            if draft_size is not None and image.format == "JPEG":
                image.draft(image.mode, tuple(draft_size))
            array = _pixels(image_module, image).astype(dtype, copy=False)
    except image_module.DecompressionBombError as error:
        raise image_module.DecompressionBombError(f"image {where}: {error}") from None
    except (OSError, SyntaxError, ValueError) as error:
        raise CorruptImageError(f"cannot decode image {where}: {error}") from None
    if array.ndim == 2:
        array = array[np.newaxis]
    else:
        array = array.transpose(2, 0, 1)
    return array
