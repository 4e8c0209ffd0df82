"""MXNet's record header (``IRHeader``) and image records, byte-compatible.

A record's payload starts with ``struct`` ``'IfQQ'`` (24 bytes): ``flag``,
``label``, ``id``, ``id2``. When ``flag > 0``, ``flag`` float32 labels follow
the header (and ``label`` is 0). Images are encoded files (JPEG or PNG).
Unlike MXNet, whose ``unpack_img`` returned OpenCV's BGR, images here are
numpy HWC uint8 arrays in **RGB**.
"""

from __future__ import annotations

import io
import numbers
import struct
from typing import Any, NamedTuple

import numpy as np

from dataset_kit.image.decode import pillow, read_image

_FORMAT = struct.Struct("<IfQQ")


class IRHeader(NamedTuple):
    """The header of an image record: ``flag``, ``label``, ``id``, ``id2``."""

    flag: int
    label: Any
    id: int
    id2: int


def pack(header: Any, s: bytes) -> bytes:
    """Prefix ``s`` with ``header`` (a number label, or an array of float32 labels).

    Args:
        header: an :class:`IRHeader` or a 4-tuple.
        s: the payload.

    Returns:
        The record's bytes, as MXNet's ``recordio.pack`` makes them.
    """
    header = IRHeader(*header)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        labels = np.asarray(header.label, dtype=np.float32)
        header = header._replace(flag=labels.size, label=0)
        s = labels.tobytes() + bytes(s)
    return _FORMAT.pack(*header) + bytes(s)


def unpack(s: bytes | memoryview, where: str = "record") -> tuple[IRHeader, bytes | memoryview]:
    """Split a record into its header (labels decoded) and the rest.

    Args:
        s: the record.
        where: how to name the record in an error (its file and offset).

    Raises:
        ValueError: if the record is shorter than its header says, naming ``where``.
    """
    if len(s) < _FORMAT.size:
        raise ValueError(f"{where}: {len(s)} bytes, shorter than a record header "
                         f"({_FORMAT.size} bytes)")
    header = IRHeader(*_FORMAT.unpack_from(s))
    s = s[_FORMAT.size:]
    if header.flag > 0:
        if len(s) < 4 * header.flag:
            raise ValueError(f"{where}: the header announces {header.flag} labels, but only "
                             f"{len(s)} bytes follow it")
        header = header._replace(label=np.frombuffer(s, np.float32, header.flag))
        s = s[4 * header.flag:]
    return header, s


def pack_img(header: Any, img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """Encode a uint8 image (HxWx3 RGB, HxWx4 RGBA for PNG, HxW or HxWx1 gray) and pack it.

    A gray image is encoded as one channel, as MXNet's OpenCV does: a JPEG
    is then byte for byte MXNet 1.9.1's.

    Args:
        header: the record header.
        img: the image.
        quality: JPEG quality (1-100), or PNG compression level (0-9).
        img_fmt: ``'.jpg'`` or ``'.png'``.

    Raises:
        ValueError: for another format, or an image of another shape.
    """
    image_module = pillow()
    fmt = img_fmt.lower()
    if fmt not in (".jpg", ".jpeg", ".png"):
        raise ValueError(f"img_fmt must be '.jpg' or '.png', got {img_fmt!r}")
    pixels = np.asarray(img, dtype=np.uint8)
    if pixels.ndim == 3 and pixels.shape[2] == 1:
        pixels = pixels[:, :, 0]  # one channel: Pillow's gray mode takes it as HxW
    if not (pixels.ndim == 2 or (pixels.ndim == 3 and pixels.shape[2] in (3, 4))):
        raise ValueError(f"img must be HxW, HxWx1, HxWx3 or HxWx4, got shape {np.shape(img)}")
    out = io.BytesIO()
    image = image_module.fromarray(pixels)
    if fmt == ".png":
        image.save(out, format="PNG", compress_level=min(max(int(quality), 0), 9))
    else:
        image.save(out, format="JPEG", quality=int(quality))
    return pack(header, out.getvalue())


def unpack_img(s: bytes | memoryview, iscolor: int = -1, where: str = "record"
               ) -> tuple[IRHeader, np.ndarray]:
    """Unpack an image record: its header and the image, HWC uint8 **RGB** (MXNet gave BGR).

    Args:
        s: the record.
        iscolor: 1 for 3 channels, 0 for grayscale (HW), -1 as stored.
        where: how to name the record in an error (its file and offset).

    Raises:
        ValueError: if the header is truncated, naming ``where``.
        CorruptImageError: if the image cannot be decoded.
    """
    header, encoded = unpack(s, where)
    chw = read_image(bytes(encoded), np.uint8, f"in {where} (id {header.id})")
    image = chw.transpose(1, 2, 0)
    if iscolor == 1 and image.shape[2] == 1:
        image = np.repeat(image, 3, axis=2)
    elif iscolor == 1 and image.shape[2] == 4:
        image = image[:, :, :3]
    elif iscolor == 0 and image.shape[2] != 1:
        image = np.asarray(pillow().fromarray(np.ascontiguousarray(image[:, :, :3])).convert("L"))
    elif image.shape[2] == 1:
        image = image[:, :, 0]
    return header, image
