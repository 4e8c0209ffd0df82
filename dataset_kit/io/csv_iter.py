"""CSVIter: MXNet's iterator over numeric CSV files, streamed, on the engine.

======================  ==========================================================
MXNet 1.9               engine
======================  ==========================================================
``round_batch=True``    Chainer's fill: the last batch wraps to the start of the
                        file, ``pad`` counts the wrapped rows, and the next epoch
                        starts after them (as MXNet's does)
``round_batch=False``   ``last_batch='pad'`` (MXNet leaves stale rows in the pad;
                        here they are the epoch's first rows)
no ``label_csv``        zeros, named ``softmax_label``
``DataBatch.index``     the rows' line numbers
``getdata()``           the data array itself (MXNet's C++ iterators), not a list
======================  ==========================================================
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from dataset_kit._checks import positive_int
from dataset_kit.datasets import TupleDataset
from dataset_kit.datasets.csv_dataset import CSVArrayDataset
from dataset_kit.engine import Engine
from dataset_kit.io._engine_iter import NativeDataIter
from dataset_kit.io.data_iter import DataDesc


class CSVIter(NativeDataIter):
    """Batches of rows of numeric CSV files, MXNet 1.9's ``CSVIter``, resumable.

    The files are never loaded whole: an index of line offsets is built once
    and each batch is read by offset and parsed (pandas' C parser with the
    ``csv`` extra, else ``numpy.loadtxt``).

    Args:
        data_csv: the data file.
        data_shape: the shape of one row's data.
        label_csv: the label file (same number of lines), or None for zeros.
        label_shape: the shape of one row's label; ``(1,)`` gives labels of
            shape ``(batch_size,)``.
        batch_size: rows per batch.
        round_batch: wrap the last batch around to the start (see the module).
        dtype: the data's dtype.
        shuffle: visit rows in a seeded random order (read row by row).
        seed: the seed.
        fill_value: the value that replaces a missing value (an empty cell,
            ``NA``, ``N/A``, ``null``, ...) in either file; None (the default)
            makes a missing value an error, whether pandas is installed or not.
        data_name: the data's name in ``provide_data``.
        label_name: the label's name in ``provide_label``.

    Raises:
        FileNotFoundError: if a file does not exist.
        IsADirectoryError: if a file is a directory.
        ValueError: if a file is empty, the files have different numbers of
            lines, a shape is bad, or (on access) a row is malformed or has a
            missing value, naming the file and line.
    """

    def __init__(self, data_csv: str | os.PathLike, data_shape: tuple,
                 label_csv: str | os.PathLike | None = None, label_shape: tuple = (1,),
                 batch_size: int = 1, round_batch: bool = True, dtype: Any = "float32",
                 shuffle: bool = False, seed: int | None = None,
                 fill_value: float | None = None, data_name: str = "data",
                 label_name: str = "softmax_label") -> None:
        batch_size = positive_int("batch_size", batch_size)
        data = CSVArrayDataset(data_csv, data_shape, dtype, fill_value)
        if len(data) == 0:
            raise ValueError(f"data_csv {data.path} is empty: CSVIter needs at least one row")
        label_shape = tuple(label_shape)
        if label_csv is None:
            labels: Any = np.zeros(len(data), np.float32)
        else:
            labels = CSVArrayDataset(label_csv, label_shape, np.float32, fill_value)
            if len(labels) != len(data):
                raise ValueError(f"label_csv has {len(labels)} lines but data_csv has "
                                 f"{len(data)}: {os.fspath(label_csv)}, {os.fspath(data_csv)}")
        self._squeeze = label_csv is not None and label_shape == (1,)
        engine = Engine(TupleDataset(data, labels), batch_size=batch_size, shuffle=shuffle,
                        seed=seed, last_batch=None if round_batch else "pad")
        label_desc_shape = () if label_csv is None or self._squeeze else label_shape
        super().__init__(engine, [DataDesc(data_name, data.row_shape, data.dtype)],
                         [DataDesc(label_name, label_desc_shape, np.float32)],
                         "wrapped" if round_batch else "padding", with_index=True)
        self.round_batch = bool(round_batch)

    def _finish(self, columns: tuple) -> tuple:
        data, label = columns
        return data, label.reshape(-1) if self._squeeze else label
