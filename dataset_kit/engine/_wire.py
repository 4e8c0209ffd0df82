"""The batch wire format: how a batch is laid out in a shared-memory block.

Workers copy a batch's arrays into a block (see :mod:`._shm`) and send only a
small skeleton: the batch's structure with :class:`ArrayRef` placeholders
where its arrays were. The main process rebuilds the batch as numpy views of
the block. A list of uniform examples travels as stacked columns and arrives
as an :class:`~dataset_kit.ExampleBatch`. A
:class:`~dataset_kit.batch.RaggedColumn` (rows of different lengths, such as
token ids) travels as its arrays, values, offsets and (when a row is null)
validity flags, and arrives as a RaggedColumn of views: a batch of ragged
rows is never pickled row by row.
"""

from __future__ import annotations

import math
import mmap
from typing import Any, NamedTuple

import numpy as np

from dataset_kit._gather import ALIGN
from dataset_kit.batch import ExampleBatch, RaggedColumn

# Below this many bytes an array is cheaper to pickle than to place.
MIN_SHARED_BYTES = 1024


# -- packing (worker side) -----------------------------------------------------------

class ArrayRef(NamedTuple):
    """Where one array of a batch lies in its block.

    ``axes``, when set, is the transpose that turns the stored (contiguous)
    array back into the one the worker had: a CHW image that is a view of a
    contiguous HWC array travels as that HWC array, copied with one memcpy
    instead of a strided copy, and arrives as the same CHW view.
    """

    offset: int
    shape: tuple
    dtype: str
    axes: tuple | None = None


def _contiguous_form(a: np.ndarray) -> tuple[np.ndarray, tuple | None]:
    """``a`` itself if C-contiguous, else a contiguous transpose of it and the axes back."""
    if a.flags.c_contiguous:
        return a, None
    order = tuple(int(k) for k in np.argsort(a.strides, kind="stable")[::-1])
    stored = a.transpose(order)
    if not stored.flags.c_contiguous:
        return a, None  # not a permuted contiguous array: copied with its strides
    return stored, tuple(int(k) for k in np.argsort(order))


def split_arrays(obj: Any, arrays: list) -> Any:
    """Return ``obj``'s skeleton; large arrays are appended to ``arrays``.

    Placeholders hold the array's position in ``arrays`` until
    :func:`place_arrays` turns them into offsets.
    """
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject or obj.nbytes < MIN_SHARED_BYTES:
            return obj
        stored, axes = _contiguous_form(obj)
        arrays.append(stored)
        return ArrayRef(len(arrays) - 1, stored.shape, obj.dtype.str, axes)
    if isinstance(obj, ExampleBatch):
        return _SharedBatch(split_arrays(obj.columns, arrays))
    if isinstance(obj, RaggedColumn):
        return _SharedRagged(split_arrays(obj.values, arrays), split_arrays(obj.offsets, arrays),
                             None if obj.valid is None else split_arrays(obj.valid, arrays))
    if type(obj) is tuple:
        return tuple(split_arrays(x, arrays) for x in obj)
    if type(obj) is list:
        return [split_arrays(x, arrays) for x in obj]
    if type(obj) is dict:
        return {k: split_arrays(v, arrays) for k, v in obj.items()}
    return obj


class _SharedBatch(NamedTuple):
    columns: Any


class _SharedRagged(NamedTuple):
    """A RaggedColumn in a skeleton: its values, offsets and validity flags (each an
    ArrayRef or an array; no flags: None)."""

    values: Any
    offsets: Any
    valid: Any = None


def uniform_columns(batch: Any) -> tuple[Any, list[list]] | None:
    """Return a list of uniform examples as columns to stack, or None if it is not one.

    Uniform: every example is an array (or numpy scalar), a tuple of them or a
    dict of them, with the same structure, shapes and dtypes throughout.
    Such a batch can travel as one stacked array per element (and arrive as
    an :class:`~dataset_kit.ExampleBatch` of views) instead of example by
    example.

    Returns:
        ``(structure, columns)``: ``structure`` is None (bare arrays), an int
        (tuples of that length) or a tuple of dict keys; ``columns`` holds,
        per element, the list of that element's values across the batch.
    """
    if type(batch) is not list or not batch:
        return None
    first = batch[0]
    # Rejected on the first example when it holds anything but plain arrays
    # (bytes, str, Python numbers: a shard's rows), before walking the batch.
    heads = first.values() if type(first) is dict else first if type(first) is tuple \
        else (first,)
    for head in heads:
        if not isinstance(head, (np.ndarray, np.generic)) or head.dtype.hasobject:
            return None
    if type(first) is tuple:
        structure: Any = len(first)
        rows = batch if all(type(ex) is tuple and len(ex) == structure for ex in batch) \
            else None
    elif type(first) is dict:
        structure = tuple(first)
        rows = [tuple(ex.values()) for ex in batch] if all(
            type(ex) is dict and tuple(ex) == structure for ex in batch) else None
    else:
        structure, rows = None, [(ex,) for ex in batch]
    if rows is None:
        return None
    columns = [list(column) for column in zip(*rows)]
    for column in columns:
        head = column[0]  # the first example's element: an array, checked above
        shape, dtype, kind = head.shape, head.dtype, type(head)
        if not all(type(v) is kind and v.shape == shape and v.dtype == dtype for v in column):
            return None
    return structure, columns


def layout(arrays: list) -> tuple[list[int], int]:
    """Return each array's aligned offset and the total bytes needed."""
    return layout_sizes([a.nbytes for a in arrays])


def layout_sizes(sizes: list[int], start: int = 0) -> tuple[list[int], int]:
    """Return the aligned offset of each of ``sizes`` bytes from ``start``, and the end."""
    offsets, total = [], start
    for nbytes in sizes:
        offsets.append(total)
        total += -(-nbytes // ALIGN) * ALIGN
    return offsets, total


def stacked_batch(structure: Any, columns: list[list]) -> ExampleBatch:
    """Return the columns of :func:`uniform_columns` stacked, as an ExampleBatch."""
    arrays = [np.stack(column) for column in columns]
    if structure is None:
        return ExampleBatch(arrays[0])
    if isinstance(structure, int):
        return ExampleBatch(tuple(arrays))
    return ExampleBatch(dict(zip(structure, arrays)))


def stack_columns(structure: Any, columns: list[list], offsets: list[int],
                  buffer: mmap.mmap) -> Any:
    """Stack each column straight into ``buffer`` at ``offsets``; return the batch skeleton."""
    refs = []
    for column, offset in zip(columns, offsets):
        head = column[0]
        stored, axes = _contiguous_form(head)
        if axes is not None and all(v.strides == head.strides for v in column):
            # Permuted contiguous arrays (CHW views of decoded HWC images):
            # stacked as they lie in memory, one memcpy each instead of a
            # strided copy, and delivered as the same permuted view.
            order = tuple(int(k) for k in np.argsort(axes))
            column = [v.transpose(order) for v in column]
            axes = (0,) + tuple(k + 1 for k in axes)
        else:
            stored, axes = head, None
        shape = (len(column),) + stored.shape
        np.stack(column, out=np.ndarray(shape, head.dtype, buffer=buffer, offset=offset))
        refs.append(ArrayRef(offset, shape, head.dtype.str, axes))
    if structure is None:
        return _SharedBatch(refs[0])
    if isinstance(structure, int):
        return _SharedBatch(tuple(refs))
    return _SharedBatch(dict(zip(structure, refs)))


def place_arrays(skeleton: Any, arrays: list, offsets: list[int], buffer: mmap.mmap,
                 in_place: list[bool] | None = None) -> Any:
    """Copy ``arrays`` into ``buffer`` at ``offsets``; return the skeleton with offsets.

    Arrays flagged ``in_place`` lie at their offset already (gathered there).
    """
    for k, (a, offset) in enumerate(zip(arrays, offsets)):
        if in_place is None or not in_place[k]:
            np.copyto(np.ndarray(a.shape, a.dtype, buffer=buffer, offset=offset), a,
                      casting="no")
    return _map_refs(skeleton, lambda ref: ref._replace(offset=offsets[ref.offset]))


def _map_refs(obj: Any, fn: Any, batch: Any = _SharedBatch) -> Any:
    """Rebuild a skeleton with ``fn(ref)`` for each ArrayRef and ``batch(columns)``
    for each batch marker."""
    if isinstance(obj, ArrayRef):
        return fn(obj)
    if isinstance(obj, _SharedBatch):
        return batch(_map_refs(obj.columns, fn, batch))
    if isinstance(obj, _SharedRagged):
        values, offsets = _map_refs(obj.values, fn, batch), _map_refs(obj.offsets, fn, batch)
        valid = None if obj.valid is None else _map_refs(obj.valid, fn, batch)
        # Placing (fn gives ArrayRefs) keeps the marker; restoring makes the column.
        if isinstance(values, np.ndarray) and isinstance(offsets, np.ndarray) \
                and (valid is None or isinstance(valid, np.ndarray)):
            return RaggedColumn.from_checked(values, offsets, valid)
        return _SharedRagged(values, offsets, valid)
    if type(obj) is tuple:
        return tuple(_map_refs(x, fn, batch) for x in obj)
    if type(obj) is list:
        return [_map_refs(x, fn, batch) for x in obj]
    if type(obj) is dict:
        return {k: _map_refs(v, fn, batch) for k, v in obj.items()}
    return obj


# -- unpacking (main side) -----------------------------------------------------------

def unpack(skeleton: Any, lease: np.ndarray) -> Any:
    """Rebuild a batch as views of ``lease`` (a block's bytes, see ``BlockPool.lease``)."""

    def view(ref: ArrayRef) -> np.ndarray:
        dtype = np.dtype(ref.dtype)
        # math.prod: 0.1 us a call, where np.prod took 5 (three arrays a batch).
        count = math.prod(ref.shape) * dtype.itemsize
        array = lease[ref.offset:ref.offset + count].view(dtype).reshape(ref.shape)
        return array if ref.axes is None else array.transpose(ref.axes)

    return restore(skeleton, view)


def restore(skeleton: Any, view: Any) -> Any:
    """Turn a skeleton back into a batch, calling ``view`` for each ArrayRef."""
    return _map_refs(skeleton, view, ExampleBatch)
