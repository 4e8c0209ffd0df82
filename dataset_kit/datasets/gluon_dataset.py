"""Gluon's ``Dataset`` base: subclasses define ``__getitem__`` and ``__len__``.

A class written for ``mxnet.gluon.data.Dataset`` keeps its body: it defines
``__getitem__(idx)`` and ``__len__()``, and gets Gluon's ``transform``,
``transform_first``, ``filter``, ``shard``, ``take`` and ``sample`` (the views
of :mod:`dataset_kit.datasets.gluon_ops`). Iterators fetch its batches one
``__getitem__`` at a time, with :func:`~dataset_kit.example_rng` kept in step.
"""

from __future__ import annotations

import sys
from typing import Any

from dataset_kit.dataset import DatasetMixin


class Dataset(DatasetMixin):
    """Gluon's abstract dataset: override ``__getitem__`` and ``__len__``.

    It is a :class:`~dataset_kit.DatasetMixin`, so every iterator and loader
    of dataset_kit takes it, and a subclass may define ``get_example``
    instead of ``__getitem__`` (then slices and index arrays work too).
    """


def mxnet_in_use() -> Any:
    """MXNet, if this program has imported it (every Gluon program has), else None.

    Gluon's datasets give NDArrays; dataset_kit's give them when MXNet is in
    use, and never import MXNet itself (MXNet 1.9.1 does not import under
    numpy >= 1.24 without a shim, and costs seconds to import).
    """
    mx = sys.modules.get("mxnet")
    return mx if mx is not None and hasattr(mx, "nd") else None
