"""dmlc-core's RecordIO framing, byte for byte (what MXNet's .rec files are).

A record is ``magic (uint32 0xced7230a) | lrec (uint32: cflag << 29 | length)
| payload | zero padding to a multiple of 4``, little-endian. A payload that
contains the magic at a 4-byte-aligned offset is split there: the magic is
dropped and the pieces are written as parts with ``cflag`` 1 (first), 2
(middle) and 3 (last); a reader joins them with the magic in between. A
record of one part has ``cflag`` 0.
"""

from __future__ import annotations

import struct

MAGIC = 0xCED7230A
MAGIC_BYTES = struct.pack("<I", MAGIC)
MAX_LENGTH = (1 << 29) - 1
_HEAD = struct.Struct("<II")


class RecordIOError(ValueError):
    """A record file is truncated or corrupt; the message names the file and offset."""


def frame(payload: bytes | memoryview) -> bytes:
    """Return the bytes that store ``payload`` as one record (split at aligned magics).

    Raises:
        ValueError: if the payload is 2**29 bytes or longer.
    """
    data = bytes(payload)
    if len(data) > MAX_LENGTH:
        raise ValueError(f"a record holds at most {MAX_LENGTH} bytes, got {len(data)}")
    out, start = [], 0
    aligned_end = len(data) & ~3
    position = data.find(MAGIC_BYTES, 0, aligned_end + 3) if aligned_end else -1
    while 0 <= position < aligned_end:
        if position % 4 == 0:
            out.append(_HEAD.pack(MAGIC, ((1 if start == 0 else 2) << 29) | (position - start)))
            out.append(data[start:position])
            start = position + 4
        position = data.find(MAGIC_BYTES, position + 1, aligned_end + 3)
    rest = len(data) - start
    out.append(_HEAD.pack(MAGIC, ((3 if start else 0) << 29) | rest))
    out.append(data[start:])
    out.append(b"\0" * (-rest % 4))
    return b"".join(out)


def parse(buffer: memoryview, offset: int, where: str) -> tuple[bytes | memoryview, int]:
    """Read the record at ``offset`` of ``buffer``; return it and the next record's offset.

    A one-part record is returned as a view of ``buffer`` (no copy); a
    multi-part record is joined into bytes.

    Raises:
        RecordIOError: for a bad magic, a bad part sequence, or a length past
            the end, naming ``where`` and the offset.
    """
    parts: list = []
    position, size = offset, len(buffer)
    while True:
        if position + 8 > size:
            raise RecordIOError(f"{where}: truncated record header at offset {position}")
        magic, lrec = _HEAD.unpack_from(buffer, position)
        if magic != MAGIC:
            raise RecordIOError(f"{where}: no record at offset {position} (magic "
                                f"{magic:#010x}, expected {MAGIC:#010x})")
        cflag, length = lrec >> 29, lrec & MAX_LENGTH
        start = position + 8
        if start + length > size:
            raise RecordIOError(f"{where}: record at offset {position} claims {length} bytes, "
                                f"past the end of the file ({size} bytes)")
        if (cflag in (0, 1)) != (not parts):
            raise RecordIOError(f"{where}: unexpected part flag {cflag} at offset {position}")
        payload = buffer[start:start + length]
        position = start + length + (-length % 4)
        if cflag == 0:
            return payload, position
        parts.append(payload)
        if cflag == 3:
            return MAGIC_BYTES.join(bytes(p) for p in parts), position
