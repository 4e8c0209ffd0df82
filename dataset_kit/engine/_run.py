"""A run of plain batches: the stretch of an epoch an engine cuts straight from its order.

Most batches of an epoch are *plain* (see
:func:`~._statemachine.plain_bounds`): a slice of the epoch's order that
takes no carried, padding or next-epoch example and does not end the epoch.
Once per epoch, after the batch that began it, the engine computes where
those batches start and end (:class:`PlainRun`); each of them is then a slice
of the order and two small tuples (the plan and the position
:func:`~._statemachine.advance` would have returned), instead of a step of
the state machine (:meth:`~._engine.Engine.next`). The batches
around a run (the first of an epoch when it holds rolled-over examples, the
last one, one that crosses into the next epoch) still go through
:func:`~._statemachine.advance`, and so does everything after a checkpoint
is loaded, a reset or an order is pinned: the engine then drops its run.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

from dataset_kit.engine._orders import Orders
from dataset_kit.engine._spec import BatchSpec
from dataset_kit.engine._statemachine import Position

# A run covers at most this many examples (and at least one batch): its
# bounds are a list and an unshuffled run's indices one arange, so their
# size stays bounded whatever the epoch; the next run starts where it ends.
RUN_EXAMPLES = 1 << 16


class PlainRun:
    """The plain batches ahead of a position, in one epoch's order.

    Args:
        epoch: the epoch in progress.
        order: its order (int64), or None for the identity.
        bounds: where the batches start and end (from ``plain_bounds``);
            the run takes as many of them as :data:`RUN_EXAMPLES` allows.
        epoch_size: examples per epoch.
        recomputable: whether the orders are recomputable (else the engine
            notes where each batch starts, for its stateful sampler).
        fetches: whether the engine fetches the batches itself (its own
            serial executor) rather than through its executor.

    Attributes:
        epoch: the epoch in progress.
        indices: the indices the run's batches are cut from, starting at
            position ``base`` of the epoch: batch ``k`` is
            ``indices[bounds[k] - base:bounds[k + 1] - base]``.
        bounds: where the run's batches start and end (positions in the epoch).
        count: how many batches the run has.
        taken: how many of them were consumed.
        settled: up to which of them the engine recorded its position and
            plan (it does when they are read, for the last batch taken).
        epoch_size: examples per epoch.
        recomputable: as the argument.
        fetches: as the argument.
    """

    __slots__ = ("epoch", "indices", "base", "bounds", "count", "taken", "settled",
                 "epoch_size", "recomputable", "fetches")

    def __init__(self, epoch: int, order: np.ndarray | None, bounds: Sequence[int],
                 epoch_size: int, recomputable: bool, fetches: bool) -> None:
        first = bounds[0]
        kept = bisect.bisect_right(bounds, first + RUN_EXAMPLES, lo=2)  # at least one batch
        self.bounds = list(bounds[:kept])
        self.count = len(self.bounds) - 1
        last = self.bounds[-1]
        self.base = first
        self.indices = np.arange(first, last, dtype=np.int64) if order is None \
            else order[first:last]
        self.epoch = epoch
        self.taken = 0
        self.settled = 0
        self.epoch_size = epoch_size
        self.recomputable = recomputable
        self.fetches = fetches


def plain_run(position: Position, orders: Orders, spec: BatchSpec,
              fetches: bool) -> PlainRun | None:
    """Return the run of plain batches ahead of ``position``, if the next batch is one.

    Args:
        position: where the caller is.
        orders: the engine's orders.
        spec: its batching spec.
        fetches: whether the engine fetches the batches itself.
    """
    epoch = position.epoch
    stops = orders.stops_of(epoch) if orders.stops_of is not None else None
    bounds = spec.plain_bounds(position, stops)
    if bounds is None:
        return None
    # The epoch's order is cached: the step that entered the epoch asked for it.
    order = orders.order_of(epoch)
    return PlainRun(epoch, None if order is None else order.astype(np.int64, copy=False),
                    bounds, spec.epoch_size, orders.recomputable, fetches)
