"""Which example is being fetched right now, so augmentation can be seeded.

An iterator installs a :class:`_BatchContext` (thread-local) around each batch it
builds; whichever code loops over the batch's positions sets ``cursor``. The
generator handed to dataset code is then a pure function of
``(seed, epoch, index)`` and does not depend on the thread or process that
built the batch.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator as _Iter

import numpy as np

_local = threading.local()

# Domain tags keep the order stream and the example stream independent even
# when both are derived from the same user seed.
ORDER_STREAM = 0
EXAMPLE_STREAM = 1


class _BatchContext:
    __slots__ = ("seed", "indices", "epochs", "cursor")

    def __init__(self, seed: int, indices: np.ndarray, epochs: np.ndarray) -> None:
        self.seed = seed
        self.indices = indices
        self.epochs = epochs
        self.cursor = 0


def current() -> _BatchContext | None:
    """Return the batch context of this thread, or None outside an iterator."""
    return getattr(_local, "context", None)


@contextlib.contextmanager
def batch_context(seed: int, indices: np.ndarray, epochs: np.ndarray) -> _Iter[None]:
    """Install a batch context for the duration of the ``with`` block."""
    previous = current()
    _local.context = _BatchContext(seed, indices, epochs)
    try:
        yield
    finally:
        _local.context = previous


def example_rng() -> np.random.Generator:
    """Return a random generator for the example being fetched.

    Inside an iterator the generator is derived from ``(seed, epoch, index)``,
    so every iterator kind, worker count and resumed run draws the same numbers
    for the same example of the same epoch. Outside an iterator a fresh,
    unseeded generator is returned.

    Returns:
        A :class:`numpy.random.Generator`.
    """
    context = current()
    if context is None:
        return np.random.default_rng()
    k = context.cursor
    key = [context.seed, EXAMPLE_STREAM, int(context.epochs[k]), int(context.indices[k])]
    return np.random.default_rng(np.random.SeedSequence(key))
