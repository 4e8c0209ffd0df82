"""``.idx`` files (``key<TAB>offset`` lines, as MXNet writes them), and checks of a pair.

The checks run when a reader opens a ``.rec`` with its ``.idx``; they are
cheap (no pass over the records) but catch an index that belongs to another
write of the file: offsets must be distinct, 4-byte aligned and inside the
file, a sample of them (the first and last included) must land on a record,
and the record at the largest offset must end exactly where the file ends.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Any

from dataset_kit.recordio._format import MAGIC_BYTES, RecordIOError, parse

# How many offsets (spread evenly, first and last included) are checked for a record at open.
SAMPLED = 64


def read_index(data: bytes, idx_path: str, key_type: Callable[[str], Any]
               ) -> tuple[list, dict]:
    """Parse an index file's bytes into its keys (in file order) and ``{key: offset}``.

    Raises:
        RecordIOError: for a malformed line, a key ``key_type`` refuses or a
            duplicate key, naming the file and line (and the key).
    """
    keys: list = []
    idx: dict = {}
    lines: dict = {}
    rows = data.split(b"\n")
    if rows[-1] == b"":
        rows.pop()  # the newline that ends the last line
    for number, raw in enumerate(rows, 1):
        try:
            fields = raw.decode("utf-8").strip().split("\t")
        except UnicodeDecodeError:
            raise RecordIOError(f"{idx_path}, line {number}: not UTF-8 text: {raw[:80]!r}"
                                ) from None
        if len(fields) != 2 or not fields[1].isdigit() or not fields[1].isascii():
            raise RecordIOError(f"{idx_path}, line {number}: expected 'key<TAB>offset', got "
                                f"{raw[:80].decode('utf-8', 'replace')!r}")
        try:
            key = key_type(fields[0])
        except (ValueError, TypeError) as error:
            raise RecordIOError(f"{idx_path}, line {number}: key {fields[0]!r} is not a valid "
                                f"{getattr(key_type, '__name__', key_type)} ({error})") from None
        if key in idx:
            raise RecordIOError(f"{idx_path}, line {number}: duplicate key {key!r} (first on "
                                f"line {lines[key]})")
        idx[key] = int(fields[1])
        lines[key] = number
        keys.append(key)
    return keys, idx


def check_pair(idx: dict, size: int, read: Callable[[int, int], memoryview], idx_path: str,
               rec_path: str) -> list[int]:
    """Check that an index fits its record file; return the offsets sorted.

    Args:
        idx: ``{key: offset}``.
        size: the record file's size.
        read: ``read(offset, n)`` of the record file.
        idx_path: the index, for errors.
        rec_path: the record file, for errors.

    Raises:
        RecordIOError: naming both files and what does not fit.
    """
    mismatch = f"{idx_path} does not belong to {rec_path}"
    if not idx:
        if size:
            raise RecordIOError(f"{mismatch}: the index lists no record, but the record file "
                                f"has {size} bytes")
        return []
    by_offset: dict[int, Any] = {}
    for key, offset in idx.items():
        if offset % 4 or offset > size - 8:
            raise RecordIOError(f"{mismatch}: key {key!r} points at offset {offset}, which is "
                                + ("not 4-byte aligned" if offset % 4 else
                                   f"past the end of the record file ({size} bytes)"))
        if offset in by_offset:
            raise RecordIOError(f"{mismatch}: keys {by_offset[offset]!r} and {key!r} both "
                                f"point at offset {offset}")
        by_offset[offset] = key
    ordered = sorted(by_offset)
    step = max(1, len(ordered) // SAMPLED)
    for offset in ordered[::step][:SAMPLED] + [ordered[-1]]:
        if bytes(read(offset, 4)) != MAGIC_BYTES:
            raise RecordIOError(f"{mismatch}: key {by_offset[offset]!r} points at offset "
                                f"{offset}, where no record starts")
    try:
        _, end = parse(read, ordered[-1], size, rec_path)
    except RecordIOError as error:
        raise RecordIOError(f"{mismatch}: {error} (key {by_offset[ordered[-1]]!r})") from None
    if end != size:
        raise RecordIOError(f"{mismatch}: the last indexed record (key "
                            f"{by_offset[ordered[-1]]!r}, offset {ordered[-1]}) ends at {end}, "
                            f"but the record file has {size} bytes")
    return ordered


def span(ordered: Sequence[int], offset: int, size: int) -> int:
    """Bytes from ``offset`` to the next indexed record (or the end of the file)."""
    after = bisect_right(ordered, offset)
    return (ordered[after] if after < len(ordered) else size) - offset
