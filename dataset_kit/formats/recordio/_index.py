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

import numpy as np

from dataset_kit.formats.recordio._format import MAGIC_BYTES, RecordIOError, parse

# How many offsets (spread evenly, first and last included) are checked for a record at open.
SAMPLED = 64
# The largest file offset there is (off_t is int64).
MAX_OFFSET = (1 << 63) - 1
_MAX_OFFSET_TEXT = str(MAX_OFFSET)


def read_index(data: bytes, idx_path: str, key_type: Callable[[str], Any]
               ) -> tuple[list, dict]:
    """Parse an index file's bytes into its keys (in file order) and ``{key: offset}``.

    Raises:
        RecordIOError: for a malformed line, a key ``key_type`` refuses, a
            duplicate key or an offset beyond int64, naming the file and line
            (and the key).
    """
    keys: list = []
    idx: dict = {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        number = data.count(b"\n", 0, error.start) + 1
        raw = data.split(b"\n")[number - 1]
        raise RecordIOError(f"{idx_path}, line {number}: not UTF-8 text: {raw[:80]!r}") from None
    rows = text.split("\n")
    if rows[-1] == "":
        rows.pop()  # the newline that ends the last line
    for number, row in enumerate(rows, 1):
        fields = row.strip().split("\t")
        if len(fields) != 2 or not (fields[1].isdigit() and fields[1].isascii()):
            raise RecordIOError(f"{idx_path}, line {number}: expected 'key<TAB>offset', got "
                                f"{row[:80]!r}")
        try:
            key = key_type(fields[0])
        except (ValueError, TypeError) as error:
            raise RecordIOError(f"{idx_path}, line {number}: key {fields[0]!r} is not a valid "
                                f"{getattr(key_type, '__name__', key_type)} ({error})") from None
        if key in idx:
            first = keys.index(key) + 1
            raise RecordIOError(f"{idx_path}, line {number}: duplicate key {key!r} (first on "
                                f"line {first})")
        # Digits counted first: int() of thousands of them is slow, then refused.
        digits = fields[1].lstrip("0") or "0"
        if len(digits) > len(_MAX_OFFSET_TEXT) or int(digits) > MAX_OFFSET:
            raise RecordIOError(f"{idx_path}, line {number}: offset {digits[:40]} of key "
                                f"{key!r} is beyond any file (at most {MAX_OFFSET})")
        idx[key] = int(digits)
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
    offsets = np.fromiter(idx.values(), dtype=np.int64, count=len(idx))
    bad = np.flatnonzero((offsets % 4 != 0) | (offsets > size - 8))
    if bad.size:
        key, offset = list(idx.items())[bad[0]]
        raise RecordIOError(f"{mismatch}: key {key!r} points at offset {offset}, which is "
                            + ("not 4-byte aligned" if offset % 4 else
                               f"past the end of the record file ({size} bytes)"))
    order = np.argsort(offsets, kind="stable")
    ordered = offsets[order]
    repeats = np.flatnonzero(ordered[1:] == ordered[:-1])
    keys = list(idx)
    if repeats.size:
        first, second = order[repeats[0]], order[repeats[0] + 1]
        raise RecordIOError(f"{mismatch}: keys {keys[first]!r} and {keys[second]!r} both "
                            f"point at offset {ordered[repeats[0]]}")
    step = max(1, len(ordered) // SAMPLED)
    for i in [*range(0, len(ordered), step)][:SAMPLED] + [len(ordered) - 1]:
        if bytes(read(int(ordered[i]), 4)) != MAGIC_BYTES:
            raise RecordIOError(f"{mismatch}: key {keys[order[i]]!r} points at offset "
                                f"{ordered[i]}, where no record starts")
    last, last_key = int(ordered[-1]), keys[order[-1]]
    try:
        _, end = parse(read, last, size, rec_path)
    except RecordIOError as error:
        raise RecordIOError(f"{mismatch}: {error} (key {last_key!r})") from None
    if end != size:
        raise RecordIOError(f"{mismatch}: the last indexed record (key {last_key!r}, offset "
                            f"{last}) ends at {end}, but the record file has {size} bytes")
    return ordered.tolist()


def span(ordered: Sequence[int], offset: int, size: int) -> int:
    """Bytes from ``offset`` to the next indexed record (or the end of the file)."""
    after = bisect_right(ordered, offset)
    return (ordered[after] if after < len(ordered) else size) - offset
