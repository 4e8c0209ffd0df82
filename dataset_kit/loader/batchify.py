"""Batchify functions (Gluon / GluonNLP): a list of examples to arrays, run in the workers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from dataset_kit._mxnet_arrays import mxnet_in_use, ndarray_from
from dataset_kit.batch import ExampleBatch


def default_batchify_fn(data: Sequence[Any]) -> Any:
    """Stack a batch as Gluon does: tuples give a list of stacked fields, arrays stack.

    Examples that hold MXNet NDArrays give NDArrays, as Gluon's
    ``default_batchify_fn`` does: NDArray fields are stacked with
    ``nd.stack``, and every other field becomes an NDArray too (so
    ``data.as_in_context(ctx)`` and ``net(data)`` work on every field). Any
    other batch gives numpy arrays, and MXNet is never imported for it. A
    batch whose columns are stacked already (an
    :class:`~dataset_kit.ExampleBatch` from an array dataset) is returned
    without restacking; one with a ragged column is taken example by example,
    as Gluon takes a list (a null list stays None: pad with :class:`Dict` and
    :class:`Pad`, which refuses it naming the example).

    Args:
        data: the examples.

    Returns:
        An array, or a list of arrays for tuple examples.
    """
    if isinstance(data, ExampleBatch) and not data.ragged:
        columns = data.columns
        return list(columns) if isinstance(columns, tuple) else columns
    mx = _mxnet_of(data[0])
    if mx is not None:
        return _batchify_ndarrays(data, mx)
    if isinstance(data[0], tuple):
        return [default_batchify_fn(list(field)) for field in zip(*data)]
    return np.asarray(data)


def _mxnet_of(example: Any) -> Any:
    """MXNet, if ``example`` holds an NDArray (then it is imported already), else None."""
    mx = mxnet_in_use()
    if mx is None:
        return None
    if isinstance(example, tuple):
        return mx if any(_mxnet_of(field) is not None for field in example) else None
    return mx if isinstance(example, mx.nd.NDArray) else None


def _batchify_ndarrays(data: Sequence[Any], mx: Any) -> Any:
    """Gluon 1.9.1's ``default_batchify_fn``, for a batch that holds NDArrays."""
    numpy_mode = mx.util.is_np_array()
    if isinstance(data[0], mx.nd.NDArray):
        return mx.np.stack(data) if numpy_mode else mx.nd.stack(*data)
    if isinstance(data[0], tuple):
        return [_batchify_ndarrays(list(field), mx) for field in zip(*data)]
    return ndarray_from(mx, np.asarray(data))


class Stack:
    """Stack examples of equal shape into one array.

    Args:
        dtype: the output dtype; the input's when None.
    """

    def __init__(self, dtype: Any = None) -> None:
        self._dtype = dtype

    def __call__(self, data: Sequence[Any]) -> np.ndarray:
        out = np.asarray(data)
        return out if self._dtype is None else out.astype(self._dtype, copy=False)


class Pad:
    """Pad examples along ``axis`` to the longest (rounded up to ``round_to``) and stack.

    Args:
        axis: the axis to pad.
        pad_val: the padding value.
        ret_length: also return the original lengths (int32).
        dtype: the output dtype; the first example's when None.
        round_to: round the padded length up to a multiple of this.

    Raises:
        TypeError: if ``axis`` is not an int.
        ValueError: if ``round_to`` is not positive, or (on call) an example
            is None (a null list of a :class:`~dataset_kit.batch.RaggedColumn`).
    """

    def __init__(self, axis: int = 0, pad_val: Any = 0, ret_length: bool = False,
                 dtype: Any = None, round_to: int | None = None) -> None:
        if not isinstance(axis, int) or isinstance(axis, bool):
            raise TypeError(f"axis must be an int, got {axis!r}")
        if round_to is not None and (not isinstance(round_to, int) or round_to < 1):
            raise ValueError(f"round_to must be a positive int or None, got {round_to!r}")
        self._axis, self._pad_val, self._ret_length = axis, pad_val, ret_length
        self._dtype, self._round_to = dtype, round_to

    def __call__(self, data: Sequence[Any]) -> Any:
        for k, x in enumerate(data):
            if x is None:  # a null list of a columnar dataset: nothing to pad
                raise ValueError(f"Pad: example {k} is None (a null list); every example "
                                 f"must be an array to pad")
        arrays = [np.asarray(x) for x in data]
        dtype = arrays[0].dtype if self._dtype is None else self._dtype
        lengths = np.array([a.shape[self._axis] for a in arrays], dtype=np.int32)
        longest = int(lengths.max())
        if self._round_to:
            longest = -(-longest // self._round_to) * self._round_to
        shape = list(arrays[0].shape)
        shape[self._axis] = longest
        out = np.full((len(arrays), *shape), self._pad_val, dtype=dtype)
        for k, a in enumerate(arrays):
            region = [slice(None)] * a.ndim
            region[self._axis] = slice(0, a.shape[self._axis])
            at: tuple[Any, ...] = (k, *region)
            out[at] = a
        return (out, lengths) if self._ret_length else out


class Tuple:
    """Apply the ``k``-th function to the ``k``-th field of every example.

    ``Tuple(f, g)`` or ``Tuple([f, g])``.

    Raises:
        TypeError: if a function is not callable.
        ValueError: (on call) if an example has another number of fields.
    """

    def __init__(self, fn: Any, *args: Callable[[Sequence[Any]], Any]) -> None:
        fns = tuple(fn) if isinstance(fn, (list, tuple)) and not args else (fn, *args)
        for k, f in enumerate(fns):
            if not callable(f):
                raise TypeError(f"batchify function {k} is not callable: {f!r}")
        self._fns = fns

    def __call__(self, data: Sequence[Any]) -> tuple:
        if len(data[0]) != len(self._fns):
            raise ValueError(f"examples have {len(data[0])} fields but Tuple has "
                             f"{len(self._fns)} functions")
        return tuple(f([example[k] for example in data]) for k, f in enumerate(self._fns))


Group = Tuple


class Dict:
    """Apply a function per key to dict examples: ``Dict({'x': Pad(), 'y': Stack()})``.

    Raises:
        TypeError: if the argument is not a mapping of callables.
    """

    def __init__(self, fns: Mapping[str, Callable[[Sequence[Any]], Any]] | None = None,
                 **kwargs: Callable[[Sequence[Any]], Any]) -> None:
        fns = dict(fns or {}, **kwargs)
        for key, f in fns.items():
            if not callable(f):
                raise TypeError(f"batchify function for key {key!r} is not callable: {f!r}")
        self._fns = fns

    def __call__(self, data: Sequence[Mapping[str, Any]]) -> dict:
        return {key: f([example[key] for example in data]) for key, f in self._fns.items()}


class List:
    """Return the examples as a plain list (for text and other non-array fields)."""

    def __call__(self, data: Sequence[Any]) -> list:
        return list(data)
