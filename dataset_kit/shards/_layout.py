"""The shard file: a header, an offset table, then the samples, for O(1) random access.

Layout (little-endian)::

    b"DKSHARD1"  uint64 n  uint64 offsets[n + 1]  samples...

Sample ``i`` is ``samples[offsets[i]:offsets[i + 1]]``: one uint32 length per
column, then the columns' bytes, the whole optionally zstd-compressed. The
offset table makes opening a shard one ``mmap`` (no scan) and a sample one
slice; the record-file format would need a scan or a second ``.idx`` object
per shard (see the commit that chose this layout for the measurement).
"""

from __future__ import annotations

import mmap
import os
import struct
from typing import Any

import numpy as np

MAGIC = b"DKSHARD1"
_HEAD = len(MAGIC) + 8


class ShardFormatError(ValueError):
    """A shard file is not what its manifest says (names the file and the offset)."""


def _zstd() -> Any:
    try:
        import zstandard
    except ImportError:
        raise ImportError("compression='zstd' needs the zstandard package: "
                          "pip install 'dataset_kit[stream]'") from None
    return zstandard


def sample_bytes(fields: list[bytes], compressor: Any) -> bytes:
    """Pack one sample's column bytes (compressed when ``compressor`` is given)."""
    blob = struct.pack(f"<{len(fields)}I", *map(len, fields)) + b"".join(fields)
    return blob if compressor is None else compressor.compress(blob)


def shard_bytes(samples: list[bytes]) -> bytes:
    """Return a whole shard holding ``samples`` (each from :func:`sample_bytes`)."""
    offsets = np.zeros(len(samples) + 1, dtype="<u8")
    np.cumsum([len(s) for s in samples], out=offsets[1:])
    return MAGIC + struct.pack("<Q", len(samples)) + offsets.tobytes() + b"".join(samples)


def header_size(count: int) -> int:
    """Bytes before the first sample of a shard of ``count`` samples."""
    return _HEAD + 8 * (count + 1)


class ShardFile:
    """A shard on local disk, mapped read-only, checked against its manifest entry.

    Args:
        path: the shard file.
        count: the number of samples the manifest gives it.
        columns: the number of columns.
        compressed: whether samples are zstd-compressed.

    Raises:
        ShardFormatError: if the magic, the count or the offsets do not fit
            the file (naming the file and what was found).
    """

    def __init__(self, path: str, count: int, columns: int, compressed: bool) -> None:
        self.path, self.columns = path, columns
        self._file = open(path, "rb")  # noqa: SIM115 - kept open: the mapping and its lock
        try:
            size = os.fstat(self._file.fileno()).st_size
            if size < header_size(0):
                raise ShardFormatError(f"shard {path} has {size} bytes, fewer than a header")
            self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
            if self._map[:len(MAGIC)] != MAGIC:
                raise ShardFormatError(f"shard {path} does not start with {MAGIC!r} at offset 0")
            found = struct.unpack_from("<Q", self._map, len(MAGIC))[0]
            if found != count or header_size(count) > size:
                raise ShardFormatError(f"shard {path} holds {found} samples at offset "
                                       f"{len(MAGIC)}; its manifest says {count}")
            self._offsets = np.frombuffer(self._map, "<u8", count + 1, _HEAD).astype(np.int64)
            self._base = header_size(count)
            if (self._offsets[0] != 0 or np.any(np.diff(self._offsets) < 0)
                    or self._base + self._offsets[-1] != size):
                raise ShardFormatError(f"shard {path}: the offset table at offset {_HEAD} does "
                                       f"not fit the file's {size} bytes")
        except BaseException:
            self.close()
            raise
        self._decompressor = _zstd().ZstdDecompressor() if compressed else None

    def fileno(self) -> int:
        """The descriptor that holds the shard open (and its in-use lock)."""
        return self._file.fileno()

    def fields(self, offset: int) -> list[bytes]:
        """Return the column bytes of sample ``offset`` of this shard."""
        start, end = self._offsets[offset] + self._base, self._offsets[offset + 1] + self._base
        blob = self._map[start:end]
        if self._decompressor is not None:
            blob = self._decompressor.decompress(blob)
        if len(blob) < 4 * self.columns:
            raise ShardFormatError(f"shard {self.path}: sample {offset} at offset {start} has "
                                   f"{len(blob)} bytes, too few for its column lengths")
        lengths = struct.unpack_from(f"<{self.columns}I", blob, 0)
        out, pos = [], 4 * self.columns
        for length in lengths:
            out.append(blob[pos:pos + length])
            pos += length
        if pos != len(blob):
            raise ShardFormatError(f"shard {self.path}: sample {offset} at offset {start} has "
                                   f"{len(blob)} bytes, its column lengths say {pos}")
        return out

    def close(self) -> None:
        """Unmap and close (releases this process's in-use lock)."""
        mapped = getattr(self, "_map", None)
        if mapped is not None:
            mapped.close()
        self._file.close()
