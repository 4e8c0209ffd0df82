"""What the engine asks of order samplers and datasets, as ``typing.Protocol``\\ s.

An order sampler is any callable with Chainer's signature; each further
capability is a protocol of its own, and the engine checks for it with
``isinstance`` (the protocols are runtime-checkable), never by probing names.

A dataset is a :class:`MapDataset` (``len`` and ``ds[i]``); a
:class:`BatchDataset` also answers ``get_batch(indices)``, the one batch hook
(every :class:`~dataset_kit.DatasetMixin` is one). Both are defined beside
``DatasetMixin`` in :mod:`dataset_kit.dataset`, which storage code imports
without importing the engine, and are the same objects here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from dataset_kit.dataset import BatchDataset, MapDataset


@runtime_checkable
class OrderSamplerLike(Protocol):
    """Chainer's protocol: called at each epoch start, returns the next epoch's order."""

    def __call__(self, current_order: np.ndarray, current_position: int) -> np.ndarray: ...


@runtime_checkable
class RandomAccessOrder(Protocol):
    """A sampler that answers "the order of epoch ``e``" as a pure function.

    ``epoch_order`` returns None when it cannot (then the sampler is asked
    once per epoch, and checkpoints carry the current order).
    """

    def epoch_order(self, epoch: int, size: int) -> np.ndarray | None: ...


@runtime_checkable
class OffsetOrder(Protocol):
    """A random-access sampler whose epoch can begin at an offset of the order it cuts.

    ``epoch_order_from(epoch, size, offset)`` returns what this sampler
    visits of epoch ``epoch`` when the epoch began at position ``offset`` of
    the order it takes its examples from (e.g. one rank's cut of the rest of
    a global order): at most the epoch's usual length. The engine starts such
    an epoch that many examples before its end (``order_offset`` in its state).
    """

    def epoch_order(self, epoch: int, size: int) -> np.ndarray | None: ...

    def epoch_order_from(self, epoch: int, size: int, offset: int) -> np.ndarray: ...


@runtime_checkable
class BatchStops(Protocol):
    """A sampler that also cuts its epoch into batches of its own.

    ``batch_stops`` returns where the batches of the order last returned end.
    """

    def batch_stops(self) -> np.ndarray: ...


@runtime_checkable
class StatefulSampler(Protocol):
    """A sampler whose orders depend on a JSON-ready state of its own (a seed, a stage)."""

    def state_dict(self) -> dict | None: ...

    def load_state_dict(self, state: dict | None) -> None: ...


@runtime_checkable
class BatchLocality(Protocol):
    """A dataset whose batches are cheapest where related batches were built.

    ``batch_locality(indices)`` returns the *units* a batch of those indices
    reads (e.g. the row groups it decodes into a per-process cache), as a
    tuple of hashable values, or None for no preference. With worker
    processes, a batch that shares a unit with a recent batch goes to the
    worker that built that one (and its other units are remembered there);
    a batch of new units goes to the next worker in turn; a batch without
    units goes round robin. It is asked in the main process for every
    batch, so it must be cheap (a binary search, not a read). Placement never
    changes a batch, only which worker builds it.
    """

    def batch_locality(self, indices: np.ndarray) -> tuple[Hashable, ...] | None: ...


@runtime_checkable
class BatchParts(BatchLocality, Protocol):
    """A :class:`BatchLocality` dataset that also builds a batch in parts, one per unit.

    With two or more worker processes the engine then *warms* units ahead:
    it looks ``workers * unit_examples`` examples past the prefetch window,
    and sends each unit met there for the first time to the next worker in
    turn, which reads it on a thread of its own (``prepare``) while it and
    the others serve the units before. So the workers read consecutive
    units at the same time instead of one after another. A batch whose
    units were warmed by different workers (it straddles two units) is
    built in parts, each by the worker holding its unit, and joined in the
    main process by :meth:`join_parts`, where the converter is then
    applied. Neither changes a batch.

    ``unit_examples``: the examples in a typical unit (0: warm nothing).
    ``batch_parts(indices)``: ``[(unit, positions)]``, the batch's positions
    cut by unit, or None when it should not be cut.
    ``join_parts(answers, positions)``: what the dataset answers for the
    whole index array, from its answers for the parts.
    ``prepare(indices)``: read what a batch of ``indices`` reads into this
    process's cache; a worker calls it on a thread of its own, so it must be
    thread-safe with the batches built meanwhile.
    """

    @property
    def unit_examples(self) -> int: ...

    def batch_parts(self, indices: np.ndarray) -> list[tuple[Hashable, np.ndarray]] | None: ...

    def join_parts(self, answers: Sequence[Any], positions: Sequence[np.ndarray]) -> Any: ...

    def prepare(self, indices: np.ndarray) -> None: ...


__all__ = ["BatchDataset", "BatchLocality", "BatchParts", "BatchStops", "Converter",
           "MapDataset", "OrderSamplerLike", "RandomAccessOrder", "StatefulSampler"]


#: The converter hook: ``ExecutorSpec(converter=fn)`` applies ``fn`` to each
#: batch (the list of examples, or the dataset's own batch) where the batch is
#: built, in a worker thread or process, before it reaches the door.
Converter = Callable[[Any], Any]
