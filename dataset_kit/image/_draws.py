"""The random generator mx.image's functions and augmenters draw from: one per example.

:func:`~dataset_kit.example_rng` gives the same stream each time it is called
for an example, so two augmenters that each called it would draw the same
numbers (a crop offset and a flip would be correlated). A chain of augmenters
(:class:`~dataset_kit.image.SequentialAug`, ``ImageIter``) therefore opens
:func:`one_generator` once per example, and everything inside draws from that
one generator in turn. Outside an iterator the generator is unseeded, as
MXNet's (``random`` and ``numpy.random``) are.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import numpy as np

from dataset_kit._example_context import example_rng

_local = threading.local()


def draws() -> np.random.Generator:
    """The generator of the chain being applied, else the example's own (:func:`example_rng`)."""
    rng = getattr(_local, "rng", None)
    return example_rng() if rng is None else rng


@contextlib.contextmanager
def one_generator() -> Iterator[np.random.Generator]:
    """Within the block, :func:`draws` returns one generator (an enclosing block's, if any)."""
    outer = getattr(_local, "rng", None)
    if outer is not None:
        yield outer
        return
    _local.rng = example_rng()
    try:
        yield _local.rng
    finally:
        _local.rng = None
