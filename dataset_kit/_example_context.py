"""Which example is being fetched right now, so augmentation can be seeded.

An iterator installs a :class:`BatchContext` (thread-local) around each batch it
builds; whichever code loops over the batch's positions sets ``cursor``. The
generator handed to dataset code is then a pure function of
``(seed, epoch, index)`` and does not depend on the thread or process that
built the batch. :func:`map_examples` is the one place that keeps the cursor
in step with the batch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

_local = threading.local()

# Domain tags keep the order stream and the example stream independent even
# when both are derived from the same user seed.
ORDER_STREAM = 0
EXAMPLE_STREAM = 1


class BatchContext:
    __slots__ = ("seed", "indices", "epochs", "cursor")

    def __init__(self, seed: int, indices: np.ndarray, epochs: int | np.ndarray) -> None:
        self.seed = seed
        self.indices = indices
        self.epochs = epochs
        self.cursor = 0


def current() -> BatchContext | None:
    """Return the batch context of this thread, or None outside an iterator."""
    return getattr(_local, "context", None)


def install(context: BatchContext | None) -> BatchContext | None:
    """Make ``context`` this thread's batch context; return the one it replaces."""
    previous = getattr(_local, "context", None)
    _local.context = context
    return previous


_new_context = object.__new__


def fetch_within(fetch: Callable[[Any, np.ndarray], Any], dataset: Any, indices: np.ndarray,
                 seed: int, epochs: int | np.ndarray) -> Any:
    """Return ``fetch(dataset, indices)`` with the batch's context installed meanwhile.

    What :func:`install` of a new :class:`BatchContext` and of the previous
    one after does, in one call: this runs once per batch on the serial path.

    Args:
        fetch: the function that fetches the batch.
        dataset: its first argument.
        indices: the batch's indices, its second argument.
        seed: the iterator's seed.
        epochs: the epoch of the batch, or of each of its indices.

    Returns:
        What ``fetch`` returned.
    """
    context = _new_context(BatchContext)
    context.seed, context.indices, context.epochs, context.cursor = seed, indices, epochs, 0
    local = _local
    previous = getattr(local, "context", None)
    local.context = context
    try:
        return fetch(dataset, indices)
    finally:
        local.context = previous


def map_examples(fn: Callable[[Any], Any], items: Iterable[Any]) -> list:
    """Return ``[fn(item) for item in items]``, with the example cursor at each item.

    The ``k``-th call runs with the cursor at position ``k`` of the batch being
    fetched, so :func:`example_rng` inside ``fn`` serves the ``k``-th example.
    Every dataset that builds a batch one example at a time goes through here.

    Args:
        fn: called once per item (an index, or an example to transform).
        items: one item per example of the batch, in batch order.

    Returns:
        The list of results.
    """
    context = current()
    if context is None:
        return [fn(item) for item in items]
    out = []
    for k, item in enumerate(items):
        context.cursor = k
        out.append(fn(item))
    return out


def example_rng(seed: int | None = None) -> np.random.Generator:
    """Return a random generator for the example being fetched.

    Inside an iterator the generator is derived from ``(seed, epoch, index)``,
    so every iterator kind, worker count and resumed run draws the same numbers
    for the same example of the same epoch. Outside an iterator a fresh,
    unseeded generator is returned.

    Args:
        seed: derive from this seed instead of the iterator's (an augmentation
            with a seed of its own, such as MXNet's ``seed_aug``).

    Returns:
        A :class:`numpy.random.Generator`.
    """
    context = current()
    if context is None:
        return np.random.default_rng()
    k = context.cursor
    epochs = context.epochs
    epoch = epochs if isinstance(epochs, int) else int(epochs[k])
    key = [context.seed if seed is None else int(seed), EXAMPLE_STREAM, epoch,
           int(context.indices[k])]
    return np.random.default_rng(np.random.SeedSequence(key))
