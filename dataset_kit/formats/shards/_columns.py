"""Column encodings: how one value of a column becomes bytes in a shard, and back.

A column's encoding is a name recorded in the manifest, so a reader decodes
without guessing. Images stay encoded in the shard (``jpeg``, ``png``) and are
decoded on read, as a CHW ``uint8`` array, as :mod:`dataset_kit.image` does;
an ``image`` column holds JPEG and PNG samples side by side, each in its own.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

ENCODINGS = ("ndarray", "bytes", "str", "int", "float", "json", "jpeg", "png", "image")
#: The encodings that hold encoded images (``image``: JPEG or PNG, each sample its own).
IMAGES = ("jpeg", "png", "image")
_MAGIC: dict[str, tuple[bytes, ...]] = {"jpeg": (b"\xff\xd8\xff",), "png": (b"\x89PNG\r\n\x1a\n",)}
_MAGIC["image"] = _MAGIC["jpeg"] + _MAGIC["png"]


def check_columns(columns: Any) -> dict[str, str]:
    """Validate ``{name: encoding}`` and return it as a plain dict.

    Raises:
        TypeError: if ``columns`` is not a dict of strings.
        ValueError: if it is empty or names an unknown encoding.
    """
    if not isinstance(columns, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in columns.items()):
        raise TypeError(f"columns must be a dict of column name -> encoding name, got {columns!r}")
    if not columns:
        raise ValueError("columns must name at least one column, got {}")
    for name, encoding in columns.items():
        if encoding not in ENCODINGS:
            raise ValueError(f"column {name!r} has encoding {encoding!r}; expected one of "
                             f"{list(ENCODINGS)}")
    return dict(columns)


def _encode_ndarray(value: Any) -> bytes:
    array = np.asarray(value)
    if array.dtype.hasobject:
        raise TypeError(f"an ndarray column cannot hold dtype {array.dtype}")
    dtype = array.dtype.str.encode()
    head = struct.pack(f"<B{len(dtype)}sB{array.ndim}Q", len(dtype), dtype, array.ndim,
                       *array.shape)
    return head + np.ascontiguousarray(array).tobytes()


def _decode_ndarray(data: bytes) -> np.ndarray:
    n = data[0]
    dtype = np.dtype(data[1:1 + n].decode())
    ndim = data[1 + n]
    start = 2 + n + 8 * ndim
    shape = struct.unpack_from(f"<{ndim}Q", data, 2 + n)
    return np.frombuffer(data, dtype, offset=start, count=int(np.prod(shape))).reshape(shape)


def _encode_image(kind: str) -> Callable[[Any], bytes]:
    def encode(value: Any) -> bytes:
        if isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(value)
            if not data.startswith(_MAGIC[kind]):
                what = "JPEG or PNG" if kind == "image" else kind
                raise ValueError(f"a {kind} column takes encoded {what} bytes or an HxWxC "
                                 f"uint8 array; these bytes start with {data[:8]!r}")
            return data
        from dataset_kit.image.decode import pillow
        array = np.asarray(value)
        if array.dtype != np.uint8 or array.ndim not in (2, 3):
            raise ValueError(f"a {kind} column takes an HxW or HxWxC uint8 array, got dtype "
                             f"{array.dtype} and shape {array.shape}")
        out = io.BytesIO()
        # An array in an ``image`` column is kept lossless (PNG).
        pillow().fromarray(array).save(out, format="JPEG" if kind == "jpeg" else "PNG")
        return out.getvalue()
    return encode


def _decode_image(data: bytes) -> np.ndarray:
    from dataset_kit.image.decode import read_image
    return read_image(data, np.uint8, "in a shard")


def _encode_int(value: Any) -> bytes:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"an int column takes integers, got {type(value).__name__}")
    return struct.pack("<q", int(value))


def _encode_float(value: Any) -> bytes:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"a float column takes numbers, got {type(value).__name__}")
    return struct.pack("<d", float(value))


def _encode_bytes(value: Any) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"a bytes column takes bytes, got {type(value).__name__}")
    return bytes(value)


def _encode_str(value: Any) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"a str column takes str, got {type(value).__name__}")
    return value.encode()


ENCODE: dict[str, Callable[[Any], bytes]] = {
    "ndarray": _encode_ndarray, "bytes": _encode_bytes, "str": _encode_str,
    "int": _encode_int, "float": _encode_float,
    "json": lambda value: json.dumps(value, separators=(",", ":")).encode(),
    "jpeg": _encode_image("jpeg"), "png": _encode_image("png"), "image": _encode_image("image"),
}
DECODE: dict[str, Callable[[bytes], Any]] = {
    "ndarray": _decode_ndarray, "bytes": bytes, "str": lambda data: bytes(data).decode(),
    "int": lambda data: struct.unpack("<q", data)[0],
    "float": lambda data: struct.unpack("<d", data)[0],
    "json": lambda data: json.loads(bytes(data)),
    "jpeg": _decode_image, "png": _decode_image, "image": _decode_image,
}
