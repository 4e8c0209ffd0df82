"""PyTorch's ``default_collate`` / ``default_convert``, split so arrays travel zero-copy.

Workers run :func:`collate_to_numpy`: PyTorch's own ``collate`` walk (the same
recursion, error messages and container rules), with every leaf that PyTorch
would turn into a tensor built as a numpy array of the same dtype and shape
instead. The engine places those arrays in shared memory; the main process
runs :func:`numpy_to_tensors`, which wraps each one with ``torch.from_numpy``
(no copy). Tensors an example already holds are collated by PyTorch itself.

Every ``ndarray`` in a collated batch is one PyTorch would have made a tensor
(``default_collate`` rejects string and object arrays, and leaves strings as
lists), so the main-process step needs no markers.
"""

from __future__ import annotations

import collections.abc
import copy
from typing import Any

import numpy as np
import torch
from torch.utils.data._utils import collate as _torch_collate

from dataset_kit import _gather
from dataset_kit.batch import ExampleBatch, RaggedColumn


def _stack_arrays(batch: list, *, collate_fn_map: Any = None) -> np.ndarray:
    elem = batch[0]
    if _torch_collate.np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(_torch_collate.default_collate_err_msg_format.format(elem.dtype))
    if not all(isinstance(b, np.ndarray) for b in batch) or len({b.shape for b in batch}) > 1 \
            or len({b.dtype for b in batch}) > 1:
        # PyTorch's own error (torch.as_tensor of a None, torch.stack of
        # unequal shapes), raised by PyTorch itself.
        return torch.stack([torch.as_tensor(b) for b in batch]).numpy()
    return _gather.stack(batch)  # straight into shared memory, in a worker


def _via_torch(fn: Any) -> Any:
    # Scalars: tiny, so PyTorch decides the dtype (bool, int64, float64, ...).
    def collate(batch: list, *, collate_fn_map: Any = None) -> np.ndarray:
        return fn(batch, collate_fn_map=collate_fn_map).numpy()
    return collate


# PyTorch's own functions, taken at import: ours keep their meaning even where a
# harness (or a user) has put ours in torch's modules under the same names.
_torch_default_collate = _torch_collate.default_collate
_torch_default_convert = _torch_collate.default_convert

_NUMPY_MAP: dict = dict(_torch_collate.default_collate_fn_map)
_NUMPY_MAP[np.ndarray] = _stack_arrays
_NUMPY_MAP[(np.bool_, np.number, np.object_)] = _via_torch(_torch_collate.collate_numpy_scalar_fn)
_NUMPY_MAP[float] = _via_torch(_torch_collate.collate_float_fn)
_NUMPY_MAP[int] = _via_torch(_torch_collate.collate_int_fn)


def collate_to_numpy(batch: Any) -> Any:
    """``default_collate(batch)`` with numpy arrays where it would make tensors.

    A batch an array-backed dataset answered as stacked columns
    (:class:`~dataset_kit.ExampleBatch`) is collated column by column without
    restacking: a bare array stays one array, tuple examples become a list of
    columns and dict examples a dict, as ``default_collate`` makes them. One
    with a ragged column is collated example by example, as a list would be;
    a null row of a ragged column (None, which ``default_collate`` cannot
    take either) is a TypeError naming its element or key and its example.
    """
    if isinstance(batch, ExampleBatch) and batch.ragged:
        _refuse_null_rows(batch.columns)
    if isinstance(batch, ExampleBatch) and not batch.ragged:
        columns = batch.columns
        if isinstance(columns, np.ndarray):
            return _check_column(columns)
        if isinstance(columns, tuple):
            return [_check_column(c) for c in columns]
        assert isinstance(columns, dict)  # not ragged: no RaggedColumn
        return {k: _check_column(c) for k, c in columns.items()}
    return _torch_collate.collate(list(batch), collate_fn_map=_NUMPY_MAP)


def _refuse_null_rows(columns: Any) -> None:
    """Raise a TypeError naming the first null row of a ragged column of ``columns``."""
    named = [("", columns)] if isinstance(columns, RaggedColumn) else \
        [(f"element {k} of ", c) for k, c in enumerate(columns)] \
        if isinstance(columns, tuple) else [(f"key {k!r} of ", c) for k, c in columns.items()]
    for where, column in named:
        null = column.first_null() if isinstance(column, RaggedColumn) else None
        if null is not None:
            raise TypeError(f"default_collate: {where}example {null} is None (a null list); "
                            f"batch must contain tensors, numpy arrays, numbers, dicts or "
                            f"lists")


def _check_column(column: np.ndarray) -> np.ndarray:
    if _torch_collate.np_str_obj_array_pattern.search(column.dtype.str) is not None:
        raise TypeError(_torch_collate.default_collate_err_msg_format.format(column.dtype))
    return column


def numpy_to_tensors(data: Any) -> Any:
    """Turn every numpy array of a collated batch into a tensor sharing its memory.

    Containers are rebuilt as ``default_collate`` builds them: a mutable
    mapping or list is copied and updated, a named tuple rebuilt by field.
    """
    if isinstance(data, np.ndarray):
        if data.ndim == 0:
            return torch.as_tensor(data)
        return torch.from_numpy(data if data.flags.writeable else data.copy())
    if isinstance(data, torch.Tensor) or isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        if isinstance(data, collections.abc.MutableMapping):
            clone = copy.copy(data)
            clone.update({k: numpy_to_tensors(v) for k, v in data.items()})
            return clone
        kind: Any = type(data)
        try:
            return kind({k: numpy_to_tensors(v) for k, v in data.items()})
        except TypeError:
            return {k: numpy_to_tensors(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(numpy_to_tensors(v) for v in data))
    if isinstance(data, tuple):
        return tuple(numpy_to_tensors(v) for v in data)
    if isinstance(data, list):
        return [numpy_to_tensors(v) for v in data]
    if isinstance(data, collections.abc.MutableSequence):
        items = copy.copy(data)
        for i, v in enumerate(data):
            items[i] = numpy_to_tensors(v)
        return items
    return data


def default_collate(batch: Any) -> Any:
    """PyTorch's ``default_collate``, for a :class:`~dataset_kit.ExampleBatch` too.

    Called by a user's ``collate_fn``, it is PyTorch's (inside a worker, its
    tensors are in shared memory, as PyTorch makes them); a loader given it
    as ``collate_fn`` takes the zero-copy path, which builds the same batches.
    """
    if isinstance(batch, ExampleBatch):
        return numpy_to_tensors(collate_to_numpy(batch))
    return _torch_default_collate(batch)


def default_convert(data: Any) -> Any:
    """PyTorch's ``default_convert`` (numpy arrays and scalars to tensors, recursively)."""
    return _torch_default_convert(data)
