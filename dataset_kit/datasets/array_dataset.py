"""Gluon's ArrayDataset (SimpleDataset lives with Gluon's Dataset, and is re-exported here)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dataset_kit._gather import take_rows
from dataset_kit._mxnet_arrays import mxnet_in_use
from dataset_kit.batch import ExampleBatch
from dataset_kit.dataset import MapDataset, fetch_examples
from dataset_kit.datasets.gluon_dataset import Dataset, SimpleDataset
from dataset_kit.datasets.tuple_dataset import _check_lengths

__all__ = ["ArrayDataset", "SimpleDataset"]


class ArrayDataset(Dataset):
    """Parallel arrays: example ``i`` is ``a[i]`` for one array, ``(a[i], b[i], ...)`` for several.

    A batch of array columns is an :class:`~dataset_kit.ExampleBatch` (one
    gather per column). MXNet NDArrays are taken as Gluon takes them: a 1-D
    one becomes a numpy array (so its examples are scalars), others stay
    NDArrays, and their examples and batches are NDArrays.

    Args:
        *arrays: arrays, lists or datasets of one length.

    Raises:
        ValueError: if no array is given or the lengths differ.
    """

    def __init__(self, *arrays: MapDataset) -> None:
        if not arrays:
            raise ValueError("ArrayDataset needs at least one array, got none")
        self._length = _check_lengths({f"array {k}": a for k, a in enumerate(arrays)},
                                      "ArrayDataset")
        mx = mxnet_in_use()
        if mx is not None:  # Gluon's rule for 1-D NDArrays
            arrays = tuple(a.asnumpy() if isinstance(a, mx.nd.NDArray) and a.ndim == 1 else a
                           for a in arrays)
        self._arrays = arrays
        stacked = tuple(a for a in arrays if isinstance(a, np.ndarray) and a.ndim >= 1)
        # All arrays as numpy arrays when every one is (one fancy index each), else None.
        self._stacked = stacked if len(stacked) == len(arrays) else None

    def __len__(self) -> int:
        return self._length

    def get_example(self, i: int) -> Any:
        if len(self._arrays) == 1:
            return self._arrays[0][i]
        return tuple(a[i] for a in self._arrays)

    def get_batch(self, indices: np.ndarray) -> Sequence[Any]:
        if self._stacked is not None:
            gathered = tuple(take_rows(a, indices) for a in self._stacked)
            return ExampleBatch.from_checked(gathered[0] if len(gathered) == 1 else gathered,
                                         len(indices))
        columns = [fetch_examples(a, indices) for a in self._arrays]
        return list(columns[0]) if len(columns) == 1 else list(zip(*columns))
