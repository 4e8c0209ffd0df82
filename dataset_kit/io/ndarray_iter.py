"""NDArrayIter: MXNet's iterator over in-memory arrays, on the engine.

===========================  =========================================
MXNet 1.9                    engine
===========================  =========================================
``last_batch_handle='pad'``  ``last_batch='pad'``; pad = added examples
``'discard'``                ``last_batch='discard'``
``'roll_over'``              ``last_batch='rollover'``; pad = examples
                             rolled over (as MXNet reports them)
``shuffle=True``             the seeded shuffle (``seed``)
data / label names           array: its name; list: ``_k_name``; dict: sorted keys
``DataBatch.index``          None, as in MXNet
``idx``                      the current epoch's order
mx.nd arrays                 taken through ``asnumpy()``; sparse ones
                             raise NotImplementedError
``batch_size > len`` with    empty epochs (no batch, StopIteration),
'discard' / 'roll_over'      as in MXNet
===========================  =========================================
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataset_kit._checks import positive_int
from dataset_kit.datasets import TupleDataset
from dataset_kit.engine import Engine
from dataset_kit.io._engine_iter import LAST_BATCH_HANDLE, EngineDataIter
from dataset_kit.io._inputs import to_numpy
from dataset_kit.io.data_iter import DataDesc

# How this class counts DataBatch.pad under each policy (MXNet's NDArrayIter).
_PAD_RULES = {"pad": "padding", "discard": "padding", "roll_over": "rolled"}


def named_arrays(data: Any, default_name: str, allow_empty: bool) -> list[tuple[str, np.ndarray]]:
    """MXNet's naming: one array keeps ``default_name``; a list gets ``_k_<name>``; a dict its keys.

    Raises:
        ValueError: if ``data`` is empty and that is not allowed.
        TypeError: if ``data`` is not an array, a list or a dict of arrays.
        NotImplementedError: if an array is sparse.
    """
    if data is None:
        items: list = []
    elif isinstance(data, dict):
        items = sorted(data.items())
    elif isinstance(data, (list, tuple)):
        items = [(f"_{k}_{default_name}", d) for k, d in enumerate(data)]
    elif hasattr(data, "__len__"):
        items = [(default_name, data)]
    else:
        raise TypeError(f"{default_name} must be an array, a list or a dict of arrays, got "
                        f"{type(data).__name__}")
    if not items and not allow_empty:
        raise ValueError(f"{default_name} must not be empty")
    return [(name, to_numpy(d, name)) for name, d in items]


class NDArrayIter(EngineDataIter):
    """Batches of in-memory arrays with MXNet 1.9's ``NDArrayIter`` semantics, resumable.

    Args:
        data: an array, a list of arrays or a dict of arrays (by name); numpy
            arrays, MXNet NDArrays or anything ``numpy.asarray`` takes.
        label: likewise, or None.
        batch_size: examples per batch.
        shuffle: shuffle every epoch (seeded by ``seed``; MXNet used numpy's global RNG).
        last_batch_handle: ``'pad'``, ``'discard'`` or ``'roll_over'``.
        data_name: the name of a single data array.
        label_name: the name of a single label array.
        seed: seeds the shuffle and :func:`~dataset_kit.example_rng`.
        layout: MXNet's layout string; the batch axis (``N``) must come first.

    Raises:
        ValueError: for an unknown ``last_batch_handle``, empty data, arrays
            of different lengths, or a layout whose batch axis is not first.
        NotImplementedError: for sparse arrays (MXNet takes CSR only with
            ``'discard'``; dataset_kit not at all).
    """

    def __init__(self, data: Any, label: Any = None, batch_size: int = 1, shuffle: bool = False,
                 last_batch_handle: str = "pad", data_name: str = "data",
                 label_name: str = "softmax_label", seed: int | None = None,
                 layout: str = "NCHW") -> None:
        if last_batch_handle not in LAST_BATCH_HANDLE:
            raise ValueError(f"last_batch_handle must be one of {list(LAST_BATCH_HANDLE)}, got "
                             f"{last_batch_handle!r}")
        batch_size = positive_int("batch_size", batch_size)
        if DataDesc.get_batch_axis(layout) != 0:
            raise ValueError(f"layout must have its batch axis N first, got {layout!r}")
        self.data = named_arrays(data, data_name, allow_empty=False)
        self.label = named_arrays(label, label_name, allow_empty=True)
        lengths = {name: len(a) for name, a in self.data + self.label}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"data and label arrays must have the same length, got {lengths}")
        policy, pad_rule = LAST_BATCH_HANDLE[last_batch_handle], _PAD_RULES[last_batch_handle]
        self.last_batch_handle, self.shuffle = last_batch_handle, bool(shuffle)
        arrays = [a for _, a in self.data + self.label]
        engine = Engine(TupleDataset(*arrays), batch_size=batch_size, shuffle=self.shuffle,
                        seed=seed, last_batch=policy)
        descs = [[DataDesc(name, a.shape[1:], a.dtype, layout) for name, a in part]
                 for part in (self.data, self.label)]
        super().__init__(engine, descs[0], descs[1], pad_rule, with_index=False)
        self.num_data = len(arrays[0])

    @property
    def idx(self) -> np.ndarray:
        """The order of the epoch being read (MXNet's ``idx``).

        Batch k holds ``idx[k*b:(k+1)*b]``.
        """
        return self.epoch_order()
