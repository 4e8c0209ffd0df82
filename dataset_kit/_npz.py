"""Reading an npz file that may be truncated, bit-flipped or crafted.

:func:`numpy.load` trusts an npz file: a flipped bit in an array header can
make it allocate what the header claims before finding the data missing, a
flipped bit in the data is only noticed if the member happens to be read to
its end (zip's CRC), and errors escape as ``BadZipFile``, ``zlib.error`` or
``EOFError``. :func:`read_npz` checks every member before trusting it and
raises one :class:`ValueError` that names the file and the member.
"""

from __future__ import annotations

import math
import os
import zipfile
import zlib
from typing import IO

import numpy as np

# Deflate expands at most ~1032 times; anything that claims more is corrupt.
_MAX_DEFLATE_RATIO = 1100
_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0,
                   (2, 0): np.lib.format.read_array_header_2_0}


def read_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Return every array of the npz file at ``path``, each checked.

    Checks: the zip structure; member names (``<key>.npy``, each once); that
    sizes in the zip directory are possible for the file's size; each array's
    header (magic, version 1.0 or 2.0, no Python objects) against the
    member's size, so nothing larger than the member is ever allocated; and
    each member's CRC, by reading it to its end.

    Args:
        path: the npz file.

    Returns:
        A dict from key (the member name without ``.npy``) to array.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if the file is not a sound npz file of plain arrays; the
            message names the file and, where it applies, the member.
    """
    path = os.fspath(path)
    file_size = os.path.getsize(path)
    arrays: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                key = _key_of(info, arrays)
                _check_sizes(info, file_size)
                with archive.open(info) as member:
                    arrays[key] = _read_member(member, info)
    except _CheckpointFault as fault:
        raise ValueError(f"{path}: {fault}") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, RuntimeError,
            NotImplementedError, OSError) as error:
        if isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError)):
            raise
        raise ValueError(f"{path} is not a sound npz file: {type(error).__name__}: "
                         f"{error}") from error
    return arrays


class _CheckpointFault(Exception):
    """A check of ours failed (the message is complete; the caller adds the file)."""


def _key_of(info: zipfile.ZipInfo, seen: dict) -> str:
    if not info.filename.endswith(".npy"):
        raise _CheckpointFault(f"member {info.filename!r} is not an array (.npy)")
    key = info.filename[:-4]
    if key in seen:
        raise _CheckpointFault(f"member {info.filename!r} appears twice")
    return key


def _check_sizes(info: zipfile.ZipInfo, file_size: int) -> None:
    limit = info.compress_size if info.compress_type == zipfile.ZIP_STORED else \
        info.compress_size * _MAX_DEFLATE_RATIO + 1024
    if info.compress_size > file_size or info.file_size > limit:
        raise _CheckpointFault(
            f"member {info.filename!r} claims {info.file_size} bytes ({info.compress_size} "
            f"stored) in a file of {file_size} bytes")


def _read_member(member: IO[bytes], info: zipfile.ZipInfo) -> np.ndarray:
    name = info.filename
    version = np.lib.format.read_magic(member)
    read_header = _HEADER_READERS.get(version)
    if read_header is None:
        raise _CheckpointFault(f"member {name!r} has npy format version {version}; "
                               f"expected 1.0 or 2.0")
    header_start = member.tell()
    shape, fortran_order, dtype = read_header(member)
    header_size = member.tell() - header_start + 8  # + magic and version
    if dtype.hasobject:
        raise _CheckpointFault(f"member {name!r} holds Python objects (dtype {dtype}); "
                               f"checkpoints hold plain arrays only")
    nbytes = math.prod(shape) * dtype.itemsize
    if min(shape, default=0) < 0 or header_size + nbytes != info.file_size:
        raise _CheckpointFault(
            f"member {name!r} has a header for shape {shape} and dtype {dtype} "
            f"({nbytes} bytes), but holds {info.file_size - header_size} bytes of data")
    data = bytearray(member.read(nbytes))
    if len(data) != nbytes or member.read(1):  # reading to the end checks the CRC
        raise _CheckpointFault(f"member {name!r} holds {len(data)} bytes of data; its "
                               f"header says {nbytes}")
    array = np.frombuffer(data, dtype=dtype) if nbytes else np.zeros(0, dtype)
    return array.reshape(shape, order="F" if fortran_order else "C")
