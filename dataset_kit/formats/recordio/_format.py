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
from collections.abc import Callable

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


def parse(read: Callable[[int, int], memoryview], offset: int, size: int, where: str,
          payload: bool = True, end: int | None = None) -> tuple[bytes | memoryview | None, int]:
    """Read the record at ``offset``; return it and the next record's offset.

    Every length is checked against ``size`` before anything is read, so a
    corrupt length field cannot make the reader allocate more than the file
    holds; a multi-part record is joined into one buffer (no object per part).

    Args:
        read: ``read(offset, n)`` returns ``n`` bytes of the file at ``offset``.
        offset: where the record starts.
        size: the file's size.
        where: the file's name, for errors.
        payload: False only checks the framing (returns None for the record):
            what a scan for offsets needs.
        end: where the next record is known to start (from an index), or
            None. With an index, a record that ends before ``end`` must be
            followed by the start of a record, so a damaged length or part flag
            is an error instead of a silently shortened record. Without one
            nothing past the record is read: a reader in order returns every
            record up to the damage and fails at the damaged offset on its next
            read, as MXNet does, instead of refusing the last good record
            because of the bytes after it.

    Returns:
        The record (a view for a one-part record, bytes for a joined one) and
        the offset after it (its padding included).

    Raises:
        RecordIOError: for a bad magic, an undefined or out-of-order part flag,
            a length past the end, or (given ``end``) a record not followed by
            a record, naming ``where`` and the offset.
    """
    joined: bytearray | None = None
    position = offset
    while True:
        cflag, length = _header(read, position, size, where)
        if (cflag in (0, 1)) != (joined is None):
            raise RecordIOError(f"{where}: part flag {cflag} at offset {position} is out of "
                                f"order (" + ("a record is still open" if joined is not None
                                              else "no record was started") + ")")
        start = position + 8
        if length > size - start:
            raise RecordIOError(f"{where}: record at offset {position} claims {length} bytes, "
                                f"past the end of the file ({size} bytes)")
        position = start + length + (-length % 4)
        if not payload:
            joined = None if cflag in (0, 3) else bytearray()
            if joined is None:
                return None, position
            continue
        data = read(start, length)
        if cflag != 0:
            # A writer (ours and MXNet's) splits a payload at every aligned magic,
            # so a part holding one has a damaged length that swallowed a header.
            # Checked for parts only: they are rare and copied here anyway.
            _check_no_aligned_magic(data, start, where)
        if cflag == 0:
            if end is not None:
                _check_next(read, offset, position, size, end, where)
            return data, position
        if joined is None:
            joined = bytearray(data)
        else:
            joined += MAGIC_BYTES
            joined += data
        if cflag == 3:
            if end is not None:
                _check_next(read, offset, position, size, end, where)
            return bytes(joined), position


def check_start(read: Callable[[int, int], memoryview], offset: int, size: int,
                where: str) -> None:
    """Refuse an ``offset`` where no record starts (the file's end is allowed).

    Raises:
        RecordIOError: if ``offset`` is outside the file, not 4-byte aligned, or
            holds no record header, or only a later part of one, naming
            ``where`` and the offset.
    """
    if offset == size:
        return
    if not 0 <= offset < size:
        raise RecordIOError(f"{where}: offset {offset} is outside the file (0 to {size})")
    if offset % 4:
        raise RecordIOError(f"{where}: offset {offset} is not 4-byte aligned, so no record "
                            f"starts there")
    cflag, _ = _header(read, offset, size, where)
    if cflag > 1:
        raise RecordIOError(f"{where}: offset {offset} holds a later part of a record (part "
                            f"flag {cflag}), not the start of one")


def _header(read: Callable[[int, int], memoryview], position: int, size: int,
            where: str) -> tuple[int, int]:
    """The part flag and length of the record header at ``position``, checked.

    Raises:
        RecordIOError: if the header is cut by the file's end, has no magic or
            has an undefined part flag, naming ``where`` and the offset.
    """
    if position + 8 > size:
        raise RecordIOError(f"{where}: truncated record header at offset {position} "
                            f"(the file has {size} bytes)")
    magic, lrec = _HEAD.unpack(read(position, 8))
    if magic != MAGIC:
        raise RecordIOError(f"{where}: no record at offset {position} (magic {magic:#010x}, "
                            f"expected {MAGIC:#010x})")
    if lrec >> 29 > 3:
        raise _undefined_flag(where, lrec >> 29, position)
    return lrec >> 29, lrec & MAX_LENGTH


def _undefined_flag(where: str, cflag: int, position: int) -> RecordIOError:
    return RecordIOError(f"{where}: undefined part flag {cflag} at offset {position} "
                         f"(0 whole record, 1 first, 2 middle, 3 last part)")


def read_whole(pread: Callable[[int, int], bytes], offset: int, span: int) -> bytes | None:
    """The payload of the one-part record at ``offset`` that fills ``span`` bytes, or None.

    The fast path of a read by index, where the next record's offset (and so
    ``span``) is known: the header is read alone and the payload straight into
    the bytes returned, two system calls and one copy. A record that is not
    one part, or does not end exactly at ``offset + span``, gives None: the
    caller then parses it with :func:`parse`, which names what is wrong.

    Args:
        pread: ``pread(offset, n)`` returns exactly ``n`` bytes of the file at
            ``offset`` (or raises).
        offset: where the record starts.
        span: bytes from ``offset`` to the next indexed record (or the end of
            the file), which the caller checked lie inside the file.
    """
    magic, lrec = _HEAD.unpack(pread(offset, 8))
    length = lrec & MAX_LENGTH
    if magic != MAGIC or lrec >> 29 or 8 + length + (-length % 4) != span:
        return None
    return pread(offset + 8, length)


def _check_no_aligned_magic(data: bytes | memoryview, start: int, where: str) -> None:
    """Refuse a part whose data holds the record magic at a 4-byte-aligned offset."""
    data = bytes(data)
    found = data.find(MAGIC_BYTES)
    while found != -1:
        if found % 4 == 0:
            raise RecordIOError(f"{where}: the record part at offset {start - 8} holds a record "
                                f"header at offset {start + found}, which a writer never "
                                f"leaves inside a part (a damaged length)")
        found = data.find(MAGIC_BYTES, found + 1)


def _check_next(read: Callable[[int, int], memoryview], offset: int, after: int, size: int,
                end: int, where: str) -> None:
    """Check that the record at ``offset`` ends at ``end`` or where a record begins."""
    if after > end:
        raise RecordIOError(f"{where}: the record at offset {offset} runs to {after}, into the "
                            f"next indexed record (at {end})")
    if after == end or after >= size:
        return
    if after + 8 <= size:
        magic, lrec = _HEAD.unpack(read(after, 8))
        if magic == MAGIC and lrec >> 29 in (0, 1):
            return
        if magic == MAGIC and lrec >> 29 > 3:
            raise _undefined_flag(where, lrec >> 29, after)
    raise RecordIOError(f"{where}: the record at offset {offset} ends at {after}, where no "
                        f"record starts (a damaged length or part flag)")
