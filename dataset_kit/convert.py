"""concat_examples: a list of examples to stacked (and padded) arrays."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dataset_kit import _gather
from dataset_kit._phases import phase
from dataset_kit.batch import ExampleBatch, RaggedColumn


def to_device(device: Any, x: Any, pin_memory: bool = False) -> Any:
    """Send ``x`` to ``device``.

    ``None``, ``-1``, ``"cpu"`` and ``"@numpy"`` mean host numpy arrays: ``x`` is
    returned unchanged. A PyTorch device (a ``torch.device``, or a string
    such as ``"cuda"``, ``"cuda:1"``, ``"mps"`` or ``"torch:cpu"``) gives
    ``torch.Tensor`` objects made with ``torch.from_numpy`` (no copy on the host),
    pinned first when ``pin_memory`` and CUDA is available, and moved with
    ``non_blocking=True``. PyTorch is optional (``pip install
    'dataset_kit[torch]'``).

    Args:
        device: the target device.
        x: an array, or a tuple, list or dict of them (other values pass through).
        pin_memory: pin host memory before a copy to a CUDA device.

    Returns:
        ``x`` on the device.

    Raises:
        ValueError: if ``device`` names no known device, or one PyTorch does not see.
        ImportError: for a PyTorch device when PyTorch is not installed.
    """
    if device is None or (isinstance(device, str) and device in ("cpu", "@numpy")):
        return x
    if isinstance(device, int) and not isinstance(device, bool) and device < 0:
        return x
    target = _torch_device(device)
    if target is None:
        raise ValueError(
            f"device {device!r} is not supported; use None, -1 or 'cpu' for numpy arrays, or a "
            f"PyTorch device ('cuda', 'cuda:0', 'mps', 'torch:cpu' or a torch.device)"
        )
    with phase("device copy"):  # shown apart from the loop's wait in a profile
        return _to_torch(x, target, pin_memory)


_TORCH_PREFIXES = ("cuda", "mps", "xpu", "torch:")


def _torch_device(device: Any) -> Any:
    """The torch.device ``device`` names, or None if it names none."""
    is_torch_object = type(device).__module__ == "torch" and type(device).__name__ == "device"
    if not is_torch_object and not (isinstance(device, str) and device.startswith(_TORCH_PREFIXES)):
        return None
    try:
        import torch
    except ImportError:
        raise ImportError(
            f"device {device!r} is a PyTorch device, and PyTorch is not installed; install it "
            f"with: pip install 'dataset_kit[torch]'") from None
    name = device[len("torch:"):] if isinstance(device, str) and device.startswith("torch:") \
        else device
    target = torch.device(name)
    available = {"cpu": lambda: True, "cuda": torch.cuda.is_available,
                 "mps": lambda: torch.backends.mps.is_available()}.get(target.type, lambda: True)
    if not available():
        raise ValueError(f"device {device!r} is not available: PyTorch sees no {target.type} "
                         f"device here")
    return target


def _to_torch(x: Any, device: Any, pin_memory: bool) -> Any:
    import torch

    if isinstance(x, np.ndarray):
        tensor = torch.from_numpy(x if x.flags.writeable else x.copy())
        if device.type == "cpu":
            return tensor
        if pin_memory and device.type == "cuda" and torch.cuda.is_available():
            tensor = tensor.pin_memory()
        return tensor.to(device, non_blocking=True)
    if isinstance(x, tuple):
        return tuple(_to_torch(v, device, pin_memory) for v in x)
    if isinstance(x, list):
        return [_to_torch(v, device, pin_memory) for v in x]
    if isinstance(x, Mapping):
        return {k: _to_torch(v, device, pin_memory) for k, v in x.items()}
    return x


def concat_examples(batch: Sequence[Any], device: Any = None, padding: Any = None) -> Any:
    """Stack a batch of examples into arrays, padding ragged shapes if asked.

    * examples that are tuples give a tuple of arrays, one per element;
    * examples that are dicts give a dict of arrays, one per key;
    * examples that are arrays or scalars give one array.

    Each output array has the examples along axis 0 and keeps their dtype.

    Args:
        batch: a non-empty sequence of examples (a list, or an
            :class:`~dataset_kit.ExampleBatch`, whose columns are used as they are).
        device: where to put the arrays; see :func:`to_device`.
        padding: ``None`` to require equal shapes; a scalar to pad every array to
            the per-axis maximum shape with that value; a tuple (for tuple
            examples) or dict (for dict examples) giving one value per element.

    Returns:
        An array, a tuple of arrays or a dict of arrays.

    Raises:
        ValueError: if the batch is empty, the examples mix structures (tuple vs
            dict, different lengths or keys), shapes differ without padding,
            ``padding`` does not match the example structure, or a
            :class:`~dataset_kit.batch.RaggedColumn` of the batch has a null
            row (naming the element or key and the example: a null list is
            neither stacked nor padded, so it is never mistaken for an empty one).
    """
    # Timed as its own phase: in a profile, the main process's converter
    # shows apart from the loop's wait (in a worker, the converter phase is timed whole).
    with phase("converter"):
        return _concat(batch, device, padding)


def _concat(batch: Sequence[Any], device: Any, padding: Any) -> Any:
    if isinstance(batch, ExampleBatch):
        # Checked first, and only as far as the arguments ask: the common
        # case (no padding, host arrays) costs a few attribute reads.
        if len(batch) == 0:
            raise ValueError("concat_examples got an empty batch; it needs at least one example")
        columns = batch.columns
        if padding is not None:
            if isinstance(columns, tuple):
                _padding_per_element(padding, len(columns))
            elif isinstance(columns, dict):
                _padding_per_key(padding, list(columns))
        # Columns are stacked already, so every example has the same shape:
        # padding to the per-axis maximum changes nothing. Ragged columns
        # are padded (or refused) in one vectorised step each.
        if batch.ragged:
            columns = _unragged(columns, padding)
        return columns if device is None else to_device(device, columns)
    if len(batch) == 0:
        raise ValueError("concat_examples got an empty batch; it needs at least one example")
    first = batch[0]
    if isinstance(first, tuple):
        _check_structure(batch, tuple, len(first))
        pads = _padding_per_element(padding, len(first))
        return to_device(device, tuple(
            _concat_arrays([ex[k] for ex in batch], pads[k], f"element {k} of ")
            for k in range(len(first))
        ))
    if isinstance(first, Mapping):
        keys = list(first)
        _check_structure(batch, Mapping, keys)
        key_pads = _padding_per_key(padding, keys)
        return to_device(device, {
            key: _concat_arrays([ex[key] for ex in batch], key_pads[key], f"key {key!r} of ")
            for key in keys
        })
    _check_structure(batch, None, None)
    if isinstance(padding, (tuple, Mapping)):
        raise ValueError(
            f"padding must be a scalar or None for examples that are arrays, got {padding!r}"
        )
    return to_device(device, _concat_arrays(list(batch), padding, ""))


def _unragged(columns: Any, padding: Any) -> Any:
    """``columns`` with each :class:`~dataset_kit.batch.RaggedColumn` made one array."""
    if isinstance(columns, RaggedColumn):
        if isinstance(padding, (tuple, Mapping)):
            raise ValueError(f"padding must be a scalar or None for examples that are arrays, "
                             f"got {padding!r}")
        return _ragged_array(columns, padding, "")
    if isinstance(columns, tuple):
        pads = _padding_per_element(padding, len(columns))
        return tuple(_ragged_array(c, pads[k], f"element {k} of ")
                     if isinstance(c, RaggedColumn) else c for k, c in enumerate(columns))
    key_pads = _padding_per_key(padding, list(columns))
    return {key: _ragged_array(c, key_pads[key], f"key {key!r} of ")
            if isinstance(c, RaggedColumn) else c for key, c in columns.items()}


def _ragged_array(column: RaggedColumn, padding: Any, where: str) -> np.ndarray:
    null = column.first_null()
    if null is not None:
        # A null list has no array: padding it as an empty one would make
        # it indistinguishable from one, so it is refused, padding or not.
        raise ValueError(
            f"concat_examples: {where}example {null} is None (a null list; {column.null_count} "
            f"of {len(column)} are); a null cannot be stacked or padded: leave the rows out, "
            f"or store an empty list instead")
    if padding is not None:
        # In a worker, straight into the shared-memory block the batch travels in.
        return column.padded(padding, _gather.empty)
    lengths = column.lengths
    unequal = np.flatnonzero(lengths != lengths[0])
    if len(unequal):
        k = int(unequal[0])
        raise ValueError(
            f"concat_examples: {where}example {k} has shape "
            f"{(int(lengths[k]),) + column.values.shape[1:]} but {where}example 0 has shape "
            f"{(int(lengths[0]),) + column.values.shape[1:]}; pass padding= to pad ragged shapes")
    return column.padded(0, _gather.empty)  # rows of one length: padding adds nothing


def _check_structure(batch: Sequence[Any], kind: type[tuple] | type[Mapping] | None,
                     layout: Any) -> None:
    for k, example in enumerate(batch):
        if kind is None:
            if isinstance(example, (tuple, Mapping)):
                raise ValueError(
                    f"concat_examples: example 0 is an array or scalar but example {k} is a "
                    f"{type(example).__name__}; all examples must share one structure"
                )
        elif not isinstance(example, kind):
            raise ValueError(
                f"concat_examples: example 0 is a {kind.__name__} but example {k} is a "
                f"{type(example).__name__}; all examples must share one structure"
            )
        elif kind is tuple and len(example) != layout:
            raise ValueError(
                f"concat_examples: example 0 is a tuple of length {layout} but example {k} "
                f"has length {len(example)}"
            )
        elif kind is Mapping and list(example) != layout and set(example) != set(layout):
            raise ValueError(
                f"concat_examples: example 0 has keys {sorted(layout)} but example {k} has "
                f"keys {sorted(example)}"
            )


def _padding_per_element(padding: Any, n: int) -> list:
    if isinstance(padding, tuple):
        if len(padding) != n:
            raise ValueError(
                f"padding is a tuple of length {len(padding)} but examples are tuples of "
                f"length {n}"
            )
        return list(padding)
    if isinstance(padding, Mapping):
        raise ValueError(f"padding must be a scalar or a tuple for tuple examples, got {padding!r}")
    return [padding] * n


def _padding_per_key(padding: Any, keys: list) -> dict:
    if isinstance(padding, Mapping):
        if set(padding) != set(keys):
            raise ValueError(
                f"padding has keys {sorted(padding)} but examples have keys {sorted(keys)}"
            )
        return dict(padding)
    if isinstance(padding, tuple):
        raise ValueError(f"padding must be a scalar or a dict for dict examples, got {padding!r}")
    return {key: padding for key in keys}


def _concat_arrays(values: list, padding: Any, where: str) -> np.ndarray:
    if not isinstance(values[0], np.ndarray):
        # Python and numpy scalars (and nested lists) become one array here;
        # numpy picks a common dtype, so numpy scalars keep theirs.
        values = [np.asarray(v) for v in values]
    if padding is not None:
        return _concat_with_padding(values, padding, where)
    try:
        # In a worker, straight into the shared-memory block the batch travels in.
        return _gather.stack(values)
    except ValueError:
        first = np.shape(values[0])
        for k, v in enumerate(values):
            if np.shape(v) != first:
                raise ValueError(
                    f"concat_examples: {where}example {k} has shape {np.shape(v)} but "
                    f"{where}example 0 has shape {first}; pass padding= to pad ragged shapes"
                ) from None
        raise


def _concat_with_padding(values: list, padding: Any, where: str) -> np.ndarray:
    arrays = [np.asarray(v) for v in values]
    ndim = arrays[0].ndim
    for k, a in enumerate(arrays):
        if a.ndim != ndim:
            raise ValueError(
                f"concat_examples: {where}example {k} has {a.ndim} dimensions but "
                f"{where}example 0 has {ndim}; padding cannot change the number of dimensions"
            )
    shape = tuple(max(a.shape[axis] for a in arrays) for axis in range(ndim))
    dtype = np.result_type(*arrays)
    out = np.full((len(arrays),) + shape, padding, dtype=dtype)
    for k, a in enumerate(arrays):
        out[(k,) + tuple(slice(0, s) for s in a.shape)] = a
    return out
