"""LibSVMIter: MXNet's iterator over LibSVM files, sparse batches on the engine.

=======================  =========================================================
MXNet 1.9 (C++)          dataset_kit
=======================  =========================================================
``data_libsvm``          ``label idx:value ...`` lines, zero-based indices as
                         written (MXNet's rule), read into memory once
data                     a CSR batch (:func:`~dataset_kit.io.csr.make_csr`:
                         scipy's CSR with ``asnumpy()``, or a
                         :class:`~dataset_kit.io.csr.CSRMatrix`)
``label_libsvm``         labels as CSR rows of ``label_shape`` (the file's
                         leading numbers ignored); else the data's leading
                         numbers, dense float32 ``(batch,)``
``round_batch=True``     the last batch wraps to the start, ``pad`` counts the
                         wrapped rows and the next epoch starts after them
                         (the only mode MXNet supports)
``num_parts``            part ``part_index`` of ``num_parts`` contiguous parts
bad index                MXNetError naming the file and line
=======================  =========================================================
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from dataset_kit._checks import positive_int
from dataset_kit.dataset import DatasetMixin
from dataset_kit.datasets import SubDataset
from dataset_kit.engine import Engine, ExecutorSpec
from dataset_kit.formats import libsvm
from dataset_kit.io._engine_iter import NativeDataIter
from dataset_kit.io._options import ignore_unknown
from dataset_kit.io.csr import make_csr
from dataset_kit.io.data_iter import DataDesc
from dataset_kit.io.errors import mxnet_error
from dataset_kit.io.mnist_iter import _part


def read_libsvm(path: str | os.PathLike, columns: int) -> tuple[np.ndarray, tuple]:
    """Read a LibSVM file (:func:`dataset_kit.formats.libsvm.read_libsvm`), MXNet's errors.

    Raises:
        FileNotFoundError: if the file does not exist.
        MXNetError: for a malformed line or an index outside ``[0, columns)``,
            naming the file and line.
    """
    try:
        return libsvm.read_libsvm(path, columns)
    except libsvm.LibSVMFormatError as error:
        raise mxnet_error(str(error)) from None


class _Rows(DatasetMixin):
    """Example ``i``: ``(values, column indices, label)``; a label row is itself such a pair."""

    def __init__(self, csr: tuple, labels: Any) -> None:
        self._data, self._indices, self._indptr = csr
        self._labels = labels

    def __len__(self) -> int:
        return len(self._indptr) - 1

    def get_example(self, i: int) -> tuple:
        lo, hi = self._indptr[i], self._indptr[i + 1]
        return self._data[lo:hi], self._indices[lo:hi], self._labels[i]


class _Batcher:
    """Rows to ``(CSR data, labels)``: dense labels, or CSR labels of ``label_columns``."""

    def __init__(self, columns: int, label_columns: int | None) -> None:
        self.columns, self.label_columns = columns, label_columns

    @staticmethod
    def _csr(rows: list, columns: int) -> Any:
        lengths = [len(values) for values, _ in rows]
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        data = np.concatenate([v for v, _ in rows]) if rows else np.zeros(0, np.float32)
        indices = np.concatenate([i for _, i in rows]) if rows else np.zeros(0, np.int64)
        return make_csr(data.astype(np.float32), indices.astype(np.int64), indptr,
                        (len(rows), columns))

    def __call__(self, batch: Any) -> tuple:
        examples = list(batch)
        data = self._csr([(v, i) for v, i, _ in examples], self.columns)
        if self.label_columns is None:
            return data, np.asarray([label for _, _, label in examples], np.float32)
        return data, self._csr([label for _, _, label in examples], self.label_columns)


class _LabelRows:
    """Row ``i`` of a label file: ``(values, indices)``."""

    def __init__(self, csr: tuple) -> None:
        self._data, self._indices, self._indptr = csr

    def __getitem__(self, i: int) -> tuple:
        lo, hi = self._indptr[i], self._indptr[i + 1]
        return self._data[lo:hi], self._indices[lo:hi]


class LibSVMIter(NativeDataIter):
    """Sparse batches of a LibSVM file, MXNet 1.9's ``LibSVMIter``, resumable.

    Args:
        data_libsvm: the data file (zero-based indices).
        data_shape: ``(columns,)``.
        label_libsvm: a LibSVM file of labels, or None (MXNet's ``'NULL'``):
            the data file's leading numbers.
        label_shape: ``(1,)`` without ``label_libsvm``; ``(columns,)`` with it.
        batch_size: rows per batch.
        round_batch: must be True (MXNet supports nothing else).
        num_parts: split the rows into this many contiguous parts...
        part_index: ...and read this one.
        prefetch_buffer: accepted (the engine prefetches where its executor does).
        ctx: accepted; batches are host arrays.
        dtype: accepted; values are float32, as MXNet's.
        data_name: the data's name in ``provide_data``.
        label_name: the label's name in ``provide_label``.
        **unknown: ignored with a warning, as MXNet ignores them.

    Raises:
        FileNotFoundError: if a file does not exist.
        MXNetError: for shapes MXNet refuses, a malformed line, an index
            outside the shape, or a label file with fewer rows than the data.
    """

    def __init__(self, data_libsvm: str | os.PathLike, data_shape: tuple,
                 label_libsvm: str | os.PathLike | None = None, label_shape: tuple = (1,),
                 batch_size: int = 1, round_batch: bool = True, num_parts: int = 1,
                 part_index: int = 0, prefetch_buffer: int = 4, ctx: str = "gpu",
                 dtype: Any = None, data_name: str = "data", label_name: str = "softmax_label",
                 **unknown: Any) -> None:
        batch_size = positive_int("batch_size", batch_size)
        data_shape, label_shape = tuple(data_shape), tuple(label_shape)
        if len(data_shape) != 1:
            raise mxnet_error(f"dimension of data_shape is expected to be 1, got {data_shape}")
        if label_libsvm in (None, "NULL"):
            label_libsvm = None
            if int(np.prod(label_shape)) != 1:
                raise mxnet_error(f"label_shape is expected to be (1,) when label_libsvm is "
                                  f"NULL, got {label_shape}")
        elif len(label_shape) != 1 or label_shape[0] <= 1:
            raise mxnet_error(f"label_shape is not expected to be (1,) when label_libsvm is "
                              f"set, got {label_shape}")
        if not round_batch:
            raise mxnet_error("LibSVMIter only supports round_batch=True (as MXNet's)")
        ignore_unknown("LibSVMIter", unknown)
        labels, csr = read_libsvm(data_libsvm, int(data_shape[0]))
        label_rows: Any = labels
        if label_libsvm is not None:
            _, label_csr = read_libsvm(label_libsvm, int(label_shape[0]))
            if len(label_csr[2]) < len(csr[2]):
                raise mxnet_error(f"Data LibSVM's row is smaller than the number of rows in "
                                  f"label_libsvm: {os.fspath(label_libsvm)} has "
                                  f"{len(label_csr[2]) - 1} rows, {os.fspath(data_libsvm)} "
                                  f"{len(csr[2]) - 1}")
            label_rows = _LabelRows(label_csr)
        rows = _Rows(csr, label_rows)
        part = _part(len(rows), int(num_parts), int(part_index))
        dataset = SubDataset(rows, part.start, part.stop)
        batcher = _Batcher(int(data_shape[0]), None if label_libsvm is None else
                           int(label_shape[0]))
        engine = Engine(dataset, batch_size=batch_size, shuffle=False, seed=0,
                        executor=ExecutorSpec(converter=batcher))
        label_desc = () if label_libsvm is None else label_shape
        super().__init__(engine, [DataDesc(data_name, data_shape, np.float32)],
                         [DataDesc(label_name, label_desc, np.float32)], "wrapped",
                         with_index=True)

