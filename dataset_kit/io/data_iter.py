"""MXNet's DataIter vocabulary: DataDesc, DataBatch, and the DataIter base class."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from dataset_kit.engine import Ledger


class _NameShape(NamedTuple):
    name: str
    shape: tuple


class DataDesc(_NameShape):
    """The name and shape of one input, carrying its dtype and layout (MXNet's ``DataDesc``).

    As MXNet 1.9.1's, a 2-field named tuple ``(name, shape)`` (so
    ``for name, shape in it.provide_data`` works, and equality compares name
    and shape only) with ``dtype`` and ``layout`` as attributes.

    Args:
        name: the input's name.
        shape: its shape.
        dtype: its dtype.
        layout: its layout (``N`` marks the batch axis).
    """

    dtype: Any
    layout: str

    def __new__(cls, name: str, shape: tuple, dtype: Any = np.float32,
                layout: str = "NCHW") -> DataDesc:
        desc = super().__new__(cls, name, shape)
        desc.dtype, desc.layout = dtype, layout
        return desc

    def __getnewargs__(self) -> tuple:  # copies and pickles keep dtype and layout
        return self.name, self.shape, self.dtype, self.layout

    def _replace(self, **changes: Any) -> DataDesc:
        """A copy with some of ``name``, ``shape``, ``dtype``, ``layout`` changed."""
        fields = {"name": self.name, "shape": self.shape, "dtype": self.dtype,
                  "layout": self.layout}
        unknown = set(changes) - set(fields)
        if unknown:
            raise ValueError(f"DataDesc has no fields {sorted(unknown)}")
        return DataDesc(**{**fields, **changes})

    def __repr__(self) -> str:
        return f"DataDesc[{self.name},{self.shape},{self.dtype},{self.layout}]"

    @staticmethod
    def get_batch_axis(layout: str | None) -> int:
        """The position of ``N`` in ``layout`` (0 for None)."""
        return 0 if layout is None else layout.find("N")

    @staticmethod
    def get_list(shapes: Any, types: Any = None) -> list[DataDesc]:
        """DataDescs from ``(name, shape)`` pairs and, optionally, ``(name, dtype)`` pairs."""
        dtypes = dict(types) if types is not None else {}
        return [DataDesc(name, shape, dtypes.get(name, np.float32)) for name, shape in shapes]


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
