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


class OpenedShard:
    """An open shard of either format (:class:`ShardFile`, or
    ``_parquet.ParquetShardFile``): held open by a descriptor, which also holds the
    cache's in-use lock, or read from its verified bytes in memory.

    Args:
        path: the shard file (only its name, when ``data`` is given).
        data: the shard's bytes, or None to open ``path``.
    """

    def __init__(self, path: str, data: bytes | None) -> None:
        self.path = path
        self._file = None if data is not None else open(path, "rb")  # noqa: SIM115 - kept open

    @property
    def in_memory(self) -> bool:
        """Whether this shard is read from memory (no file, no in-use lock)."""
        return self._file is None

    def fileno(self) -> int:
        """The descriptor that holds the shard open (and its in-use lock).

        Raises:
            ValueError: if the shard is read from memory.
        """
        if self._file is None:
            raise ValueError(f"shard {self.path} is read from memory: it has no descriptor")
        return self._file.fileno()

    def columns_of(self, offsets: np.ndarray) -> list[list]:
        """Return the values of samples ``offsets``, one list per column."""
        raise NotImplementedError

    def fields(self, offset: int) -> list[Any]:
        """Return the column values of sample ``offset`` of this shard."""
        return [column[0] for column in self.columns_of(np.array([offset]))]

    def close(self) -> None:
        """Close the file (releases this process's in-use lock)."""
        if self._file is not None:
            self._file.close()


def zstd() -> Any:
    """Return the zstandard module (the shards' compression), or raise naming the extra."""
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


class ShardFile(OpenedShard):
    """A shard on local disk, mapped read-only, checked against its manifest entry.

    Args:
        path: the shard file.
        count: the number of samples the manifest gives it.
        columns: the number of columns.
        compressed: whether samples are zstd-compressed.
        data: the shard's verified bytes, to read from memory instead of
            ``path`` (while its file is still being written to the cache);
            ``path`` then only names it in errors.

    Raises:
        ShardFormatError: if the magic, the count or the offsets do not fit
            the file (naming the file and what was found).
    """

    def __init__(self, path: str, count: int, columns: int, compressed: bool,
                 data: bytes | None = None) -> None:
        super().__init__(path, data)
        self.columns = columns
        self._map: Any = data
        try:
            if self._file is not None:  # mapped: the descriptor also holds the in-use lock
                size = os.fstat(self._file.fileno()).st_size
                if size >= header_size(0):
                    self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
            else:
                size = len(data or b"")
            if size < header_size(0):
                raise ShardFormatError(f"shard {path} has {size} bytes, fewer than a header")
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
        self._decompressor = zstd().ZstdDecompressor() if compressed else None
        self._lengths = struct.Struct(f"<{columns}I")

    def columns_of(self, offsets: np.ndarray) -> list[list]:
        """Return the bytes of samples ``offsets``, one list per column.

        One pass per batch: the offset table is read with numpy once, then
        each column's bytes are sliced straight from the mapping (uncompressed)
        or from the decompressed sample.

        Raises:
            ShardFormatError: if a sample's column lengths do not fit its bytes.
        """
        starts = (self._offsets[offsets] + self._base).tolist()
        ends = (self._offsets[np.asarray(offsets) + 1] + self._base).tolist()
        head, unpack = 4 * self.columns, self._lengths.unpack_from
        columns: list[list[bytes]] = [[] for _ in range(self.columns)]
        decompress = None if self._decompressor is None else self._decompressor.decompress
        mapped = self._map
        for start, end in zip(starts, ends):
            if decompress is None:
                blob, pos, stop = mapped, start, end
            else:
                blob = decompress(mapped[start:end])
                pos, stop = 0, len(blob)
            base = pos
            if stop - pos < head:
                raise ShardFormatError(f"shard {self.path}: the sample at offset {start} has "
                                       f"{stop - pos} bytes, too few for its column lengths")
            lengths = unpack(blob, pos)
            pos += head
            for column, length in zip(columns, lengths):
                column.append(blob[pos:pos + length])
                pos += length
            if pos != stop:
                raise ShardFormatError(f"shard {self.path}: the sample at offset {start} has "
                                       f"{stop - base} bytes, its column lengths say "
                                       f"{pos - base}")
        return columns

    def close(self) -> None:
        """Unmap and close (releases this process's in-use lock)."""
        mapped = getattr(self, "_map", None)
        if isinstance(mapped, mmap.mmap):
            mapped.close()
        self._map = None
        super().close()
