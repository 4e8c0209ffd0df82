"""Find where each pickle of a file starts, by walking opcodes: nothing is unpickled.

Unpickling runs code named in the file (``__reduce__``), so opening a file
must not unpickle it. Every pickle opcode has an argument whose length is
fixed, ends at a newline, or is given by a length field right after the
opcode (``pickletools`` describes them all), so the walk only reads opcodes
and length fields and seeks over the rest. A length field is checked against
the file's size before anything is read or allocated, so a corrupt length is an
error naming its offset, never a huge allocation.

Two arguments are not lengths of what follows but still size what the
unpickler allocates, so the walk checks them too: a ``FRAME``'s length (the
unpickler reads the whole frame ahead at once: it must end inside the file),
and the index of a memo entry stored with ``LONG_BINPUT`` or ``PUT`` (the
unpickler grows its memo list to twice the index: a pickler numbers memo
entries from 0, one per object already pushed, so an index is below the
number of bytes before it; counted from the file's start, not the pickle's,
since one ``Pickler`` that dumps every example numbers on across them).
"""

from __future__ import annotations

import pickle
import pickletools
import struct
from typing import Any

_STOP = pickle.STOP[0]
_FIXED, _LINES, _SIZED = 0, 1, 2
_WINDOW = 1 << 20
_HEADER = 9  # the longest opcode with its length field: 1 + 8 bytes
_LENGTH_FORMATS = {pickletools.TAKEN_FROM_ARGUMENT1: "<B", pickletools.TAKEN_FROM_ARGUMENT4: "<i",
                   pickletools.TAKEN_FROM_ARGUMENT4U: "<I", pickletools.TAKEN_FROM_ARGUMENT8U: "<Q"}


def _argument(op: pickletools.OpcodeInfo) -> tuple[int, Any]:
    arg = op.arg
    if arg is None:
        return _FIXED, 0
    if arg.n >= 0:
        return _FIXED, arg.n
    if arg.n == pickletools.UP_TO_NEWLINE:
        return _LINES, 2 if arg.name == "stringnl_noescape_pair" else 1
    return _SIZED, struct.Struct(_LENGTH_FORMATS[arg.n])


# opcode byte -> how to skip its argument
_OPCODES = {op.code.encode("latin-1")[0]: _argument(op) for op in pickletools.opcodes}
_FRAME, _LONG_BINPUT, _PUT = pickle.FRAME[0], pickle.LONG_BINPUT[0], pickle.PUT[0]
# opcode byte -> its size with a fixed-length argument (the fast path), 0 for the others
_FIXED_SIZE = [0] * 256
for _code, (_kind, _how) in _OPCODES.items():
    if _kind == _FIXED and _code not in (_STOP, _FRAME, _LONG_BINPUT):  # those are checked
        _FIXED_SIZE[_code] = 1 + _how


def _marker(text: bytes) -> bytes:
    """Opcodes that push ``text`` and pop it again: a no-op for every unpickler."""
    return b"X" + struct.pack("<I", len(text)) + text + b"0"  # BINUNICODE, POP


# Written before the first and the last pickle of a file by open_pickle_dataset_writer,
# so that a file cut after a whole example is told from a complete one. Any
# unpickler (Chainer's included) reads the same examples with or without them.
BEGIN = _marker(b"dataset_kit pickle dataset v1")
_END_PREFIX = b"dataset_kit pickle dataset v1 end: examples "


def end_marker(count: int) -> bytes:
    """The marker before the last pickle: it records how many examples there are."""
    return _marker(_END_PREFIX + b"%020d" % count)


class TruncatedPickleError(ValueError):
    """A pickle dataset file ends inside an example, or holds bytes that are not pickles."""


def pickle_offsets(f: Any, size: int, path: str) -> list[int]:
    """Return the offset where each pickle in ``f`` starts (the file holds nothing else).

    Args:
        f: a binary file positioned anywhere; it is read from offset 0.
        size: the file's size in bytes.
        path: how to name the file in an error.

    Returns:
        The start offsets, in file order.

    Raises:
        TruncatedPickleError: if the file ends inside a pickle, or a byte is
            not a pickle opcode, naming the file, the example's start offset
            and the offset of the problem.
    """
    starts: list[int] = []
    # The walk works on a window of the file in memory (index arithmetic, no
    # call per opcode); arguments are skipped by moving the position only.
    window, window_start = b"", 0
    position = 0

    def fail(reason: str) -> TruncatedPickleError:
        return TruncatedPickleError(
            f"pickle dataset {path}: example {len(starts)} (starting at offset {start}) "
            f"{reason}; the file is truncated or corrupt")

    while position < size:
        start = position
        while True:
            k = position - window_start
            if k < 0 or k + _HEADER > len(window):  # room for an opcode and a length field
                f.seek(position)
                window, window_start, k = f.read(_WINDOW), position, 0
            if k >= len(window):
                raise fail(f"is cut at offset {position}, before its end (STOP opcode)")
            code = window[k]
            step = _FIXED_SIZE[code]
            if step and k + step <= len(window):  # most opcodes: no length field, no line
                position += step
                continue
            if code == _LONG_BINPUT and k + 5 <= len(window):  # frequent in protocols 1 to 3
                if int.from_bytes(window[k + 1:k + 5], "little") < position:
                    position += 5
                    continue
            spec = _OPCODES.get(code)
            if spec is None:
                raise fail(f"has byte {bytes([code])!r} at offset {position}, which is not a "
                           f"pickle opcode")
            position += 1
            kind, how = spec
            if kind == _FIXED:
                length = how
                if code in (_FRAME, _LONG_BINPUT) and position + how <= size:
                    # The window holds the argument: it was refilled for _HEADER bytes
                    # unless it reaches the end of the file.
                    value = int.from_bytes(window[k + 1:k + 1 + how], "little")
                    if code == _FRAME and position + how + value > size:
                        raise fail(f"has a frame of {value} bytes at offset {position - 1}, but "
                                   f"the file ends at offset {size}")
                    if code == _LONG_BINPUT and value >= position:
                        raise fail(_memo_problem(value, position - 1))
            elif kind == _LINES:
                f.seek(position)
                for _ in range(how):
                    line = f.readline()
                    position += len(line)
                    if not line.endswith(b"\n"):
                        raise fail(f"is cut at offset {position}, inside a line argument")
                if code == _PUT:
                    text = line.strip()
                    if not (text.isdigit() and int(text) < position):
                        raise fail(_memo_problem(text.decode("latin-1"),
                                                 position - len(line) - 1))
                length = 0
            else:
                if k + 1 + how.size > len(window):
                    raise fail(f"is cut at offset {size}, inside a length field")
                (length,) = how.unpack_from(window, k + 1)
                position += how.size
                if length < 0:
                    raise fail(f"has a negative length {length} at offset {position - how.size}")
            if position + length > size:
                raise fail(f"needs {length} bytes at offset {position}, but the file ends at "
                           f"offset {size}")
            position += length
            if code == _STOP:
                break
        starts.append(start)
    return starts


def _memo_problem(index: Any, offset: int) -> str:
    return (f"stores memo entry {index!r} at offset {offset}, which no pickler writes after "
            f"{offset} bytes (the unpickler would allocate for that many entries)")


def check_end(f: Any, starts: list[int], size: int, path: str) -> None:
    """For a file with the writer's markers, check that its last example is the last written.

    Files without them (Chainer's, or written by :class:`PickleDatasetWriter`
    to a stream) have nothing to check against.

    Raises:
        TruncatedPickleError: if the first example has the begin marker and
            the last one lacks the end marker or records another count.
    """
    if not starts:
        return
    f.seek(0)
    if f.read(len(BEGIN)) != BEGIN:
        return
    last = starts[-1] + (len(BEGIN) if len(starts) == 1 else 0)
    f.seek(last)
    marker = f.read(len(end_marker(0)))
    if marker[:-21] != end_marker(0)[:-21] or not marker[-21:-1].isdigit():
        raise TruncatedPickleError(
            f"pickle dataset {path}: ends at offset {size} after example {len(starts) - 1} "
            f"(at offset {starts[-1]}), which lacks the end marker its writer puts on the "
            f"last example; the file is truncated after a whole example")
    written = int(marker[-21:-1])
    if written != len(starts):
        raise TruncatedPickleError(
            f"pickle dataset {path}: holds {len(starts)} examples, but its end marker (at "
            f"offset {last}) says {written} were written; the file is corrupt")
