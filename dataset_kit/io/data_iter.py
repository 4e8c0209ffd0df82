"""MXNet's DataIter vocabulary: DataDesc, DataBatch, and the DataIter base class."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from dataset_kit.engine import Ledger


class DataDesc(NamedTuple):
    """The name, shape, dtype and layout of one input (MXNet's ``DataDesc``)."""

    name: str
    shape: tuple
    dtype: Any = np.float32
    layout: str = "NCHW"

    @staticmethod
    def get_batch_axis(layout: str | None) -> int:
        """The position of ``N`` in ``layout`` (0 for None)."""
        return 0 if layout is None else layout.find("N")


class DataBatch:
    """One batch: lists of data and label arrays, how many trailing rows are padding, indices.

    Args:
        data: the data arrays.
        label: the label arrays, or None.
        pad: trailing rows that are padding, not data.
        index: the examples' indices, where the iterator knows them.
        provide_data: the data's :class:`DataDesc` list.
        provide_label: the labels' :class:`DataDesc` list.

    Raises:
        TypeError: if ``data`` or ``label`` is not a list or tuple.
    """

    def __init__(self, data: list, label: list | None = None, pad: int = 0, index: Any = None,
                 provide_data: list | None = None, provide_label: list | None = None) -> None:
        for name, value in (("data", data), ("label", label)):
            if value is not None and not isinstance(value, (list, tuple)):
                raise TypeError(f"{name} must be a list of arrays, got {type(value).__name__}")
        self.data, self.label, self.pad, self.index = data, label, pad, index
        self.provide_data, self.provide_label = provide_data, provide_label

    def __repr__(self) -> str:
        data = [np.shape(d) for d in self.data]
        label = None if not self.label else [np.shape(x) for x in self.label]
        return f"DataBatch: data shapes: {data} label shapes: {label} pad: {self.pad}"


class DataIter:
    """Base of MXNet-style iterators: ``next()`` gives a :class:`DataBatch` until an epoch ends.

    An epoch ends with ``StopIteration``; ``reset()`` starts the next one.
    Subclasses implement :meth:`iter_next` and the getters, and
    :meth:`state_dict` / :meth:`load_state_dict`.

    Args:
        batch_size: examples per batch.
    """

    def __init__(self, batch_size: int = 0) -> None:
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[DataBatch]:
        return self

    def __next__(self) -> DataBatch:
        return self.next()

    def next(self) -> DataBatch:
        """Return the next batch.

        Raises:
            StopIteration: at the end of the epoch (call :meth:`reset`).
        """
        if not self.iter_next():
            raise StopIteration
        return DataBatch(self.getdata(), self.getlabel(), self.getpad(), self.getindex(),
                         self.provide_data, self.provide_label)

    def reset(self) -> None:
        """Start the next epoch."""

    def iter_next(self) -> bool:
        """Move to the next batch; False at the end of the epoch."""
        raise NotImplementedError

    def getdata(self) -> list:
        """The current batch's data arrays."""
        raise NotImplementedError

    def getlabel(self) -> list | None:
        """The current batch's label arrays (None for an iterator without labels)."""
        raise NotImplementedError

    def getpad(self) -> int:
        """How many trailing rows of the current batch are padding."""
        return 0

    def getindex(self) -> Any:
        """The current batch's example indices, or None."""
        return None

    @property
    def provide_data(self) -> list:
        """The data's :class:`DataDesc` list."""
        return []

    @property
    def provide_label(self) -> list:
        """The labels' :class:`DataDesc` list."""
        return []

    def state_dict(self) -> dict:
        """Return the iterator's position: a small JSON-ready dict."""
        raise NotImplementedError

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Resume from :meth:`state_dict` (``strict``: refuse a state whose ledger differs)."""
        raise NotImplementedError

    def ledger(self) -> Ledger:
        """Return what has been consumed (:class:`~dataset_kit.engine.Ledger`)."""
        raise NotImplementedError
