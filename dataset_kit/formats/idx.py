"""IDX files (MNIST's format): one reader for every dataset and door that reads them.

An IDX file is a 4-byte big-endian magic ``0x0800 + ndim`` (unsigned bytes,
``ndim`` dimensions), ``ndim`` 4-byte big-endian sizes, then the values. The
file may be gzipped.
"""

from __future__ import annotations

import gzip
import os

import numpy as np


class IdxFormatError(ValueError):
    """A file that is not an IDX file of unsigned bytes with the expected dimensions."""


def read_idx(path: str | os.PathLike, ndim: int) -> np.ndarray:
    """Read an IDX file of uint8 values with ``ndim`` dimensions (plain or gzipped).

    Args:
        path: the file.
        ndim: the number of dimensions the file must have.

    Returns:
        The values, shaped as the header says.

    Raises:
        FileNotFoundError: if the file does not exist.
        IdxFormatError: naming the file, if its magic or its size does not match its header.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    magic = 0x800 + ndim
    found = int.from_bytes(data[:4], "big")
    if found != magic:
        raise IdxFormatError(f"{path} has magic {found} at offset 0, expected {magic} "
                             f"(uint8, {ndim} dimensions)")
    dims = [int.from_bytes(data[4 + 4 * k:8 + 4 * k], "big") for k in range(ndim)]
    values = np.frombuffer(data, np.uint8, offset=4 + 4 * ndim)
    if values.size != int(np.prod(dims)):
        raise IdxFormatError(f"{path} holds {values.size} values from offset {4 + 4 * ndim}, "
                             f"its header says {dims}")
    return values.reshape(dims)
