"""One chunk file of an NNabla ``.npy`` cache, checked before any of it is trusted.

A chunk is one ``numpy.save`` per variable, one array after another.
:func:`scan_chunk` reads every header strictly and checks the arrays against
the file: a bounded header length, a header that parses (numpy's own parser
only inside ``try``, since a bit flip makes it raise ``TokenError``,
``SyntaxError`` or ``TypeError``), a numeric dtype in this machine's byte
order, the index's number of examples, and arrays that end exactly where the
file ends. It reads headers only, and never allocates what a header claims.
"""

from __future__ import annotations

import io
import math
import os
import re
import stat
from typing import NamedTuple

import numpy as np

MAGIC = b"\x93NUMPY"
# numpy's own default ``max_header_size``: a longer header is a damaged length field.
MAX_HEADER_BYTES = 10_000
# Booleans, integers, floats and complex numbers: what an NNabla cache holds. Strings,
# objects, structures and times are refused, so that a flipped type code in a header
# cannot turn a column of numbers into another type of the same size.
_NUMERIC_KINDS = "biufc"
# The header numpy writes, spacing aside: the three keys in numpy's order, and a shape
# that is a tuple ("(3,)", "(3, 4)", "()"), never a bare number.
_HEADER = re.compile(
    r"\{\s*'descr'\s*:\s*'([^']*)'\s*,\s*'fortran_order'\s*:\s*(True|False)\s*,"
    r"\s*'shape'\s*:\s*\(\s*((?:\d+\s*,(?:\s*\d+\s*,)*(?:\s*\d+)?)?)\s*\)\s*,?\s*\}\s*\Z")


class CacheFormatError(ValueError):
    """A cache directory is missing a file, holds one that does not parse, or changed."""


class ArrayHeader(NamedTuple):
    """One variable's array in a chunk file."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran: bool
    offset: int  # where its data begins in the file
    nbytes: int

    @property
    def row_bytes(self) -> int:
        """Bytes of one example (one row of a C-ordered array)."""
        return math.prod(self.shape[1:]) * self.dtype.itemsize


class Chunk(NamedTuple):
    """What a reader trusts about a chunk file: its arrays and its identity."""

    arrays: tuple[ArrayHeader, ...]
    identity: tuple[int, ...]


def identity(st: os.stat_result) -> tuple[int, ...]:
    """A file's identity for change detection: device, inode, size, mtime in ns.

    A rename over the file changes the inode, ``cp`` or ``rsync --inplace``
    into it changes the size or the modification time.
    """
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def scan_chunk(fd: int, name: str, count: int, variables: tuple[str, ...]) -> Chunk:
    """Read and check the headers of the chunk file open as ``fd``.

    Args:
        fd: the chunk file, open for reading.
        name: the file's full path, for messages (every cache's chunks share
            their base names).
        count: the number of examples the index says it holds.
        variables: the variable names of ``cache_info.csv``, in order.

    Returns:
        The chunk's array headers and the file's identity.

    Raises:
        CacheFormatError: naming the file (and the byte offset) if it is not
            a regular file, a header does not parse, an array does not hold
            ``count`` examples, or the arrays do not fill the file exactly.
    """
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # a directory would fail at pread with EISDIR, unnamed
        what = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise CacheFormatError(f"{name} is {what}, where the index names a chunk file")
    size, offset = st.st_size, 0
    arrays: list[ArrayHeader] = []
    for variable in variables:
        if offset >= size:
            raise CacheFormatError(
                f"{name}: the file ends (byte {size}) after {len(arrays)} arrays, but "
                f"cache_info.csv names {len(variables)} variables")
        shape, fortran, dtype, data_offset = _read_header(fd, name, offset, size)
        where = f"{name}: variable {variable!r} (header at byte {offset})"
        if dtype.kind not in _NUMERIC_KINDS or not dtype.isnative:
            raise CacheFormatError(
                f"{where} has dtype {dtype.str!r}; a cache holds numbers in this machine's "
                f"byte order")
        if not shape or shape[0] != count:
            raise CacheFormatError(f"{where} has shape {shape}, but the index says the file "
                                   f"holds {count} examples")
        nbytes = math.prod(shape) * dtype.itemsize
        if data_offset + nbytes > size:
            raise CacheFormatError(
                f"{where} needs {nbytes} bytes from byte {data_offset}, but the file has "
                f"{size} bytes (truncated)")
        arrays.append(ArrayHeader(shape, dtype, fortran, data_offset, nbytes))
        offset = data_offset + nbytes
    if offset != size:
        what = "more arrays than the variables of cache_info.csv" \
            if os.pread(fd, len(MAGIC), offset) == MAGIC else "bytes that are no array"
        raise CacheFormatError(f"{name}: {size - offset} bytes after the last variable's "
                               f"array (byte {offset}): the file holds {what}")
    if count > size and not any(a.nbytes for a in arrays):
        raise CacheFormatError(f"{name}: {count} examples of zero bytes in a file of {size} "
                               f"bytes: the count is damaged")
    return Chunk(tuple(arrays), identity(st))


def _read_header(fd: int, name: str, offset: int, size: int) -> tuple:
    """Read the .npy header at ``offset``; return (shape, fortran, dtype, data offset)."""
    prefix = os.pread(fd, 12, offset)
    if len(prefix) < 10 or prefix[:6] != MAGIC or prefix[6] not in (1, 2, 3) or prefix[7]:
        raise CacheFormatError(f"{name}: no .npy array header at byte {offset} (magic "
                               f"{prefix[:8]!r})")
    width = 2 if prefix[6] == 1 else 4
    length = int.from_bytes(prefix[8:8 + width], "little")
    start = offset + 8 + width
    if length > MAX_HEADER_BYTES or start + length > size:
        raise CacheFormatError(f"{name}: the .npy header at byte {offset} claims {length} "
                               f"bytes (at most {MAX_HEADER_BYTES}, and the file has {size})")
    raw = os.pread(fd, length, start)
    try:
        text = raw.decode("utf-8" if prefix[6] == 3 else "latin1")
        match = _HEADER.match(text)
        if match is not None:
            shape = tuple(int(n) for n in match.group(3).split(",") if n.strip())
            return shape, match.group(2) == "True", np.dtype(match.group(1)), start + length
        if prefix[6] == 3:
            raise ValueError("not the header numpy writes")
        # Another writer's spelling: numpy's parser evaluates the text, and a damaged
        # text makes it raise anything (TokenError, SyntaxError, TypeError, ...).
        stream = io.BytesIO(prefix[:8 + width] + raw)
        stream.seek(8)
        parse = np.lib.format.read_array_header_1_0 if prefix[6] == 1 \
            else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = parse(stream, max_header_size=MAX_HEADER_BYTES)
        return tuple(shape), bool(fortran), dtype, start + length
    except Exception as error:  # noqa: BLE001 - any parser failure means a damaged header
        raise CacheFormatError(f"{name}: the .npy header at byte {offset} does not parse "
                               f"({type(error).__name__}: {error})") from None
