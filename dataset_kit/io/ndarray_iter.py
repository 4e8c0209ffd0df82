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
numpy arrays, lists          float32, as MXNet's ``mx.nd.array`` makes them
mx.nd arrays, h5py datasets  their own dtype (NDArrays through ``asnumpy()``)
CSR (scipy, ``CSRNDArray``)  rows gathered as CSR, with ``'discard'`` only
                             (else NotImplementedError, as in MXNet)
batch arrays                 NDArrays when MXNet is in use, else
                             :class:`~dataset_kit.io.MXArray` views
``batch_size > len`` with    empty epochs (no batch, StopIteration),
'discard' / 'roll_over'      as in MXNet
===========================  =========================================
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataset_kit._checks import positive_int
from dataset_kit.batch import ExampleBatch
from dataset_kit.engine import Engine, ExecutorSpec
from dataset_kit.io._engine_iter import LAST_BATCH_HANDLE, EngineDataIter
from dataset_kit.io._inputs import as_column
from dataset_kit.io.csr import make_csr
from dataset_kit.io.data_iter import DataDesc

# How this class counts DataBatch.pad under each policy (MXNet's NDArrayIter).
_PAD_RULES = {"pad": "padding", "discard": "padding", "roll_over": "rolled"}


def named_arrays(data: Any, default_name: str, allow_empty: bool) -> list[tuple[str, Any]]:
    """MXNet's naming: one array keeps ``default_name``; a list gets ``_k_<name>``; a dict its keys.

    Each array as :func:`~dataset_kit.io._inputs.as_column` makes it.

    Raises:
        ValueError: if ``data`` is empty and that is not allowed.
        TypeError: if ``data`` is not an array, a list or a dict of arrays.
        NotImplementedError: if an array is sparse but not CSR.
    """
    if data is None:
        items: list = []
    elif isinstance(data, dict):
        items = sorted(data.items())
    elif isinstance(data, (list, tuple)):
        # MXNet: a list of one array keeps the plain name.
        items = [(default_name, data[0])] if len(data) == 1 else \
            [(f"_{k}_{default_name}", d) for k, d in enumerate(data)]
    elif hasattr(data, "__len__"):
        items = [(default_name, data)]
    else:
        raise TypeError(f"{default_name} must be an array, a list or a dict of arrays, got "
                        f"{type(data).__name__}")
    if not items and not allow_empty:
        raise ValueError(f"{default_name} must not be empty")
    return [(name, as_column(d, name)) for name, d in items]


def _rows(column: Any, indices: np.ndarray) -> Any:
    if isinstance(column, np.ndarray):
        return column[indices]
    rows = column[indices]  # a scipy CSR matrix: its rows, as CSR
    return make_csr(rows.data, rows.indices, rows.indptr, rows.shape)


class _Gather:
    """The converter: a batch of example indices to one gather per column (CSR stays CSR)."""

    def __init__(self, columns: list) -> None:
        self.columns = columns

    def __call__(self, batch: Any) -> tuple:
        indices = np.asarray(batch.columns if isinstance(batch, ExampleBatch) else batch,
                             dtype=np.int64)
        return tuple(_rows(column, indices) for column in self.columns)


class NDArrayIter(EngineDataIter):
    """Batches of in-memory arrays with MXNet 1.9's ``NDArrayIter`` semantics, resumable.

    Args:
        data: an array, a list of arrays or a dict of arrays (by name); numpy
            arrays, MXNet NDArrays, scipy CSR matrices, MXNet CSR arrays or
            anything ``numpy.asarray`` takes. As in MXNet, numpy arrays and
            lists become float32; NDArrays and h5py datasets keep their dtype.
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
        NotImplementedError: for a CSR matrix without ``'discard'``, or a
            sparse array that is not CSR (as MXNet).
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
        if last_batch_handle != "discard" and any(
                not isinstance(a, np.ndarray) for _, a in self.data + self.label):
            raise NotImplementedError("NDArrayIter only supports CSR matrices with "
                                      "last_batch_handle set to 'discard' (as MXNet)")
        lengths = {name: a.shape[0] for name, a in self.data + self.label}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"data and label arrays must have the same length, got {lengths}")
        policy, pad_rule = LAST_BATCH_HANDLE[last_batch_handle], _PAD_RULES[last_batch_handle]
        self.last_batch_handle, self.shuffle = last_batch_handle, bool(shuffle)
        arrays = [a for _, a in self.data + self.label]
        self.num_data = arrays[0].shape[0]
        # The examples are their indices; the converter gathers each column once per batch.
        engine = Engine(np.arange(self.num_data), batch_size=batch_size, shuffle=self.shuffle,
                        seed=seed, last_batch=policy,
                        executor=ExecutorSpec(converter=_Gather(arrays)))
        descs = [[DataDesc(name, a.shape[1:], a.dtype, layout) for name, a in part]
                 for part in (self.data, self.label)]
        super().__init__(engine, descs[0], descs[1], pad_rule, with_index=False)

    @property
    def idx(self) -> np.ndarray:
        """The order of the epoch being read (MXNet's ``idx``).

        Batch k holds ``idx[k*b:(k+1)*b]``.
        """
        return self.epoch_order()
