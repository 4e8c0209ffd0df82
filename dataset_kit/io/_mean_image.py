"""ImageRecordIter's ``mean_img`` file: MXNet's NDArray file format, read, or computed and saved.

MXNet saves the mean image with ``NDArray::Save`` as ``{"mean_img": CHW float32}``
(the format of ``mx.nd.save``), little-endian:

=====================  =====================================================
u64 0x112, u64 0       the list's magic and a reserved word
u64 n                  arrays; each: u32 0xF993FAC9 (V2), i32 storage type 0
                       (dense), i32 ndim, i64 x ndim shape, i32 device type,
                       i32 device id, i32 dtype flag (0: float32), the data
u64 n                  names; each: u64 length and the UTF-8 bytes
=====================  =====================================================
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterable

import numpy as np

from dataset_kit.io.errors import mxnet_error

_LIST_MAGIC = 0x112
_V2_MAGIC = 0xF993FAC9
_DTYPES = {0: np.float32, 1: np.float64, 2: np.float16, 3: np.uint8, 4: np.int32, 5: np.int8,
           6: np.int64}


def save_mean_image(path: str | os.PathLike, mean: np.ndarray) -> None:
    """Write ``{"mean_img": mean}`` in MXNet's NDArray format, all at once (atomic replace)."""
    mean = np.ascontiguousarray(mean, np.float32)
    name = b"mean_img"
    parts = [struct.pack("<QQQ", _LIST_MAGIC, 0, 1),
             struct.pack("<Iii", _V2_MAGIC, 0, mean.ndim),
             struct.pack(f"<{mean.ndim}q", *mean.shape),
             struct.pack("<iii", 1, 0, 0), mean.tobytes(),
             struct.pack("<QQ", 1, len(name)), name]
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".mean_img.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(b"".join(parts))
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def load_mean_image(path: str | os.PathLike) -> np.ndarray:
    """Read the one array of an MXNet NDArray file (``mx.nd.save`` / MXNet's mean image).

    Raises:
        MXNetError: if the file is not such a file, naming it and the offset.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()

    def take(fmt: str, offset: int) -> tuple:
        size = struct.calcsize(fmt)
        if offset + size > len(data):
            raise mxnet_error(f"Invalid NDArray file format: {path} ends at byte {len(data)}, "
                              f"inside a field at offset {offset}")
        return struct.unpack_from(fmt, data, offset), offset + size

    (magic, _, count), at = take("<QQQ", 0)
    if magic != _LIST_MAGIC or count != 1:
        raise mxnet_error(f"Invalid mean image file format: {path} is not an MXNet NDArray "
                          f"file of one array (magic {magic:#x}, {count} arrays)")
    (magic, stype, ndim), at = take("<Iii", at)
    if magic != _V2_MAGIC or stype != 0 or not 0 < ndim <= 8:
        raise mxnet_error(f"Invalid mean image file format: {path} at offset 24 holds no dense "
                          f"NDArray (magic {magic:#x}, storage {stype}, ndim {ndim})")
    shape, at = take(f"<{ndim}q", at)
    (_, _, flag), at = take("<iii", at)
    if flag not in _DTYPES:
        raise mxnet_error(f"Invalid mean image file format: {path} has dtype flag {flag}")
    dtype = np.dtype(_DTYPES[flag])
    size = int(np.prod(shape)) * dtype.itemsize
    if at + size > len(data):
        raise mxnet_error(f"Invalid mean image file format: {path} is truncated: {size} bytes "
                          f"of data from offset {at}, the file has {len(data)}")
    return np.frombuffer(data, dtype, int(np.prod(shape)), at).reshape(shape).astype(np.float32)


def mean_of(batches: Iterable[np.ndarray]) -> np.ndarray:
    """The mean image over stacked batches (float64 sums, float32 result).

    Raises:
        ValueError: if there are no images.
    """
    total: np.ndarray | None = None
    count = 0
    for batch in batches:
        sums = batch.sum(axis=0, dtype=np.float64)
        total = sums if total is None else total + sums
        count += len(batch)
    if total is None or not count:  # total is None only when count is 0
        raise ValueError("cannot compute a mean image over no images")
    return (total / count).astype(np.float32)
