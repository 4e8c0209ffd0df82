"""Row gathers that write straight into the memory a batch will travel in.

Array-backed datasets gather a batch's rows with :func:`take_rows`. Outside a
worker process that is ``array[indices]``. Inside one, the worker installs an
:class:`Arena` over the shared-memory block the batch will be delivered in,
and the rows are gathered directly there: the block then needs no second
copy (the worker finds the array already in place).
"""

from __future__ import annotations

import threading

import numpy as np
from numpy.typing import DTypeLike

ALIGN = 64  # bytes; every array in a block starts on such a boundary
_local = threading.local()
# Whether any thread of this process ever installed an arena (only worker
# processes do): elsewhere take_rows skips the thread-local lookup.
_arenas_used = False


class Arena:
    """A bump allocator over a writable buffer (a shared-memory block).

    Args:
        buffer: the writable buffer.
    """

    def __init__(self, buffer) -> None:
        self.base = np.frombuffer(buffer, np.uint8)
        self.address = self.base.ctypes.data
        self.used = 0

    def allocate(self, shape: tuple, dtype: np.dtype) -> np.ndarray | None:
        """Return an uninitialised C-contiguous array in the buffer, or None if it is full."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        start = self.used
        if start + nbytes > len(self.base):
            return None
        self.used = start + -(-nbytes // ALIGN) * ALIGN
        return self.base[start:start + nbytes].view(dtype).reshape(shape)

    def stacked(self, arrays: list) -> np.ndarray | None:
        """``np.stack(arrays)`` as a view, if the arrays lie back to back here, in order.

        Examples whose arrays were allocated one after another (see
        :func:`empty`) are then stacked already; anything else gives None.
        """
        head = arrays[0]
        nbytes = head.nbytes
        start = self.offset_of(head)
        if start is None or nbytes == 0 or nbytes % ALIGN:
            return None
        for k, array in enumerate(arrays):
            if (array.shape != head.shape or array.dtype != head.dtype
                    or self.offset_of(array) != start + k * nbytes):
                return None
        return self.base[start:start + len(arrays) * nbytes].view(head.dtype).reshape(
            (len(arrays),) + head.shape)

    def offset_of(self, array: np.ndarray) -> int | None:
        """The offset of ``array`` in the buffer, if it is a C-contiguous array lying there."""
        offset = array.__array_interface__["data"][0] - self.address
        if 0 <= offset and offset + array.nbytes <= self.used and array.flags.c_contiguous:
            return offset
        return None


def install(arena: Arena | None) -> Arena | None:
    """Make ``arena`` this thread's destination for gathers; return the previous one."""
    global _arenas_used
    previous = getattr(_local, "arena", None)
    _local.arena = arena
    _arenas_used = _arenas_used or arena is not None
    return previous


def empty(shape: tuple, dtype: DTypeLike) -> np.ndarray:
    """An uninitialised C-contiguous array for an example's result, in the arena if any.

    An augmenter writes its output here: in a worker, the examples' results
    then lie back to back in the block the batch travels in, and
    :func:`stack` finds them stacked already (no copy of the batch). Only for
    an array that is the example's result: any other would take space in the
    block for nothing.
    """
    arena = getattr(_local, "arena", None) if _arenas_used else None
    if arena is not None:
        out = arena.allocate(tuple(shape), np.dtype(dtype))
        if out is not None:
            return out
    return np.empty(shape, dtype)


def take_rows(array: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Return ``array[indices]``: the rows at an integer index array, as numpy gives them."""
    if not (indices.ndim == 1 and indices.dtype.kind in "iu" and array.ndim >= 1):
        return array[indices]
    arena = getattr(_local, "arena", None) if _arenas_used else None
    if arena is not None and not array.dtype.hasobject \
            and (not len(indices) or (indices.min() >= 0 and indices.max() < len(array))):
        out = arena.allocate((len(indices),) + array.shape[1:], array.dtype)
        if out is not None:
            # mode="clip": the indices are checked already, and "raise"
            # would gather into a temporary first.
            array.take(indices, axis=0, out=out, mode="clip")
            return out
    # The same rows as array[indices] (negative indices and IndexError
    # included), gathered by a faster loop than fancy indexing's.
    return array.take(indices, axis=0)


def stack(arrays: list) -> np.ndarray:
    """Return ``np.stack(arrays)``, in the arena if any and the arrays share a dtype.

    A collate step in a worker (``concat_examples`` as a converter, a
    ``collate_fn``) stacks a batch's examples with this, so the stacked array
    lies where the batch will travel (no second copy, no fresh pages).
    Arrays of several dtypes are left to ``np.stack``, which promotes them.
    """
    arena = getattr(_local, "arena", None) if _arenas_used else None
    head = arrays[0]
    if arena is not None and isinstance(head, np.ndarray) and not head.dtype.hasobject \
            and all(isinstance(a, np.ndarray) and a.dtype == head.dtype for a in arrays):
        stacked = arena.stacked(arrays)
        if stacked is not None:  # results of empty(), in order: nothing to copy
            return stacked
        out = arena.allocate((len(arrays),) + head.shape, head.dtype)
        if out is not None:
            return np.stack(arrays, out=out)
    return np.stack(arrays)
