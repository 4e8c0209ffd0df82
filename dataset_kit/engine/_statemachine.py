"""Which indices come next: one pure function shared by every iterator.

Serial, multithread and multiprocess iterators, and every front door built on
them, call :func:`advance` (through :meth:`BatchSpec.advance`), so they cannot
disagree about which examples form a batch. Threads, processes and
checkpoints only decide when and where a batch is built.

How an epoch ends is the *last-batch policy*:

========== ===========================================================================
policy     the end of each epoch
========== ===========================================================================
None       Chainer's: with ``repeat`` a batch that crosses the end is filled from the
           next epoch's order (``is_new_epoch`` on it); without, as ``'keep'``.
'keep'     a short last batch; the next epoch starts on a fresh batch.
'discard'  the short tail is dropped; every batch is full.
'rollover' the tail's examples open the next epoch's first batch (Gluon); every batch
           is full and belongs to the epoch its last example comes from (a tail may
           gather several epochs when batches are larger than epochs).
'pad'      the short last batch is filled up with examples from the start of the
           same epoch's order, and ``BatchPlan.pad`` counts them (MXNet).
========== ===========================================================================

With ``'discard'`` or ``'rollover'`` an epoch may hold no full batch at all (batches
larger than the epoch, as Gluon's DataLoader and MXNet's NDArrayIter allow). A
repeating stream then takes an *empty step*: a plan with no indices that ends the
epoch (rolling its examples over, for ``'rollover'``). Whoever consumes batches
decides what an empty epoch means: a Gluon-style door ends ``iter()`` there, a
Chainer-style ``next()`` steps over it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


@dataclass(frozen=True)
class LastBatch:
    """A last-batch policy: how each epoch ends, as the properties the engine reads.

    Every check of a policy reads one of these properties, never its name, so
    a new policy is a new row of :data:`LAST_BATCH` (and, if it needs a new
    property, the state machine's use of it).

    Attributes:
        name: the policy's name in the engine's vocabulary and in states
            (None for Chainer's).
        drops_tail: a short tail is never a batch of its own: every batch is
            full ('discard', 'rollover').
        carries: the tail's examples open the next epoch's first batch ('rollover').
        pads: a short last batch is filled up from the start of the epoch's
            order ('pad').
        fills_across: with ``repeat``, a batch that crosses the end of an
            epoch is filled from the next epoch's order (Chainer's); without
            ``repeat`` the policy acts as ``'keep'``.
    """

    name: str | None
    drops_tail: bool = False
    carries: bool = False
    pads: bool = False
    fills_across: bool = False

    @property
    def may_yield_empty_epochs(self) -> bool:
        """Whether an epoch may have no batch at all (batches larger than the epoch)."""
        return self.drops_tail

    @property
    def may_yield_nothing(self) -> bool:
        """Whether batches larger than the epoch leave every epoch empty (none carries over)."""
        return self.drops_tail and not self.carries


#: Every last-batch policy of the engine, by name (a state records the name).
LAST_BATCH: dict[str | None, LastBatch] = {policy.name: policy for policy in (
    LastBatch(None, fills_across=True),
    LastBatch("keep"),
    LastBatch("discard", drops_tail=True),
    LastBatch("rollover", drops_tail=True, carries=True),
    LastBatch("pad", pads=True),
)}
LAST_BATCH_POLICIES = tuple(LAST_BATCH)


def last_batch_policy(last_batch: str | LastBatch | None) -> LastBatch:
    """Return the :class:`LastBatch` of a policy given by name (or the policy itself).

    Raises:
        ValueError: if ``last_batch`` names no policy of :data:`LAST_BATCH`.
    """
    if isinstance(last_batch, LastBatch):
        return last_batch
    try:
        return LAST_BATCH[last_batch]
    except (KeyError, TypeError):
        raise ValueError(f"last_batch must be one of {list(LAST_BATCH)} or a LastBatch, got "
                         f"{last_batch!r}") from None


class Position(NamedTuple):
    """Where an iterator stands: everything needed to compute what comes next.

    Attributes:
        epoch: completed epochs.
        current_position: index into the current epoch's order.
        is_new_epoch: whether the last batch completed an epoch.
        previous_epoch_detail: ``epoch_detail`` before the last batch, or None
            before the first one.
        carry: (``'rollover'`` only) the next batch starts with the last
            ``carry`` examples of the stream before this epoch (the previous
            epoch's order, and earlier ones when ``carry`` exceeds an epoch).
    """

    epoch: int = 0
    current_position: int = 0
    is_new_epoch: bool = False
    previous_epoch_detail: float | None = None
    carry: int = 0


class BatchPlan(NamedTuple):
    """The indices of one batch and the epoch they belong to.

    ``epochs`` is an int when the whole batch lies in one epoch (the common
    case, kept cheap) and an array of one epoch per index otherwise. ``pad``
    counts the trailing entries that repeat examples to fill a short batch.
    """

    indices: np.ndarray
    epochs: int | np.ndarray
    pad: int = 0

    def epoch_at(self, k: int) -> int:
        """Return the epoch of the ``k``-th index of the batch."""
        return self.epochs if isinstance(self.epochs, int) else int(self.epochs[k])


OrderOf = Callable[[int], "np.ndarray | None"]


def _chunk(order: np.ndarray | None, start: int, stop: int) -> np.ndarray:
    return np.arange(start, stop) if order is None else order[start:stop]


def _plan(parts: list, epochs: list, pad: int = 0) -> BatchPlan:
    if len(parts) == 1:
        return BatchPlan(parts[0].astype(np.int64, copy=False), epochs[0][0], pad)
    return BatchPlan(np.concatenate(parts).astype(np.int64, copy=False),
                     np.repeat([e for e, _ in epochs], [t for _, t in epochs]), pad)


def advance(
    position: Position, batch_size: int, epoch_size: int, repeat: bool, order_of: OrderOf,
    last_batch: str | LastBatch | None = None, stops_of: OrderOf | None = None,
) -> tuple[Position, BatchPlan] | None:
    """Return the position after the next batch and that batch's plan.

    With ``repeat`` the examples form an endless stream, epoch after epoch;
    without, one epoch is cut into batches and iteration then stops.
    ``last_batch`` says how each epoch ends (see the module's table).

    Args:
        position: the current position.
        batch_size: examples per batch (positive).
        epoch_size: examples per epoch (the length of each order).
        repeat: whether epochs repeat.
        order_of: maps an epoch number to its order array, or None for the
            identity order.
        last_batch: the last-batch policy: a name of :data:`LAST_BATCH`, or a
            :class:`LastBatch`.
        stops_of: maps an epoch to the positions where its batches end (a
            batch sampler's own batches), or None for batches of
            ``batch_size``. With stops, each epoch ends with its last batch.

    Returns:
        ``(next_position, plan)``, or None when a non-repeating iterator is done.
        A plan without indices is an empty step: the epoch ends without a batch.

    Raises:
        ValueError: if ``repeat`` is set and the dataset is empty.
    """
    n = epoch_size
    if not repeat and (position.epoch > 0 or n == 0):
        return None
    if n == 0:
        raise ValueError("an iterator that repeats needs a non-empty dataset, got length 0")
    if stops_of is not None:
        stops = stops_of(position.epoch)
        if stops is not None:
            return _advance_to_stop(position, n, order_of, stops)
    policy = last_batch_policy(last_batch)
    if policy.fills_across:
        if repeat:
            return _advance_filling_across_epochs(position, batch_size, n, order_of)
        policy = LAST_BATCH["keep"]
    epoch, pos, carry = position.epoch, position.current_position, position.carry
    detail = position.epoch + position.current_position / n
    if policy.drops_tail and carry + n - pos < batch_size:
        # No full batch is left. A batch that leaves less than a full batch
        # ends its epoch, so this happens only at an epoch's start.
        if not repeat:
            return None
        order_of(epoch)
        order_of(epoch + 1)  # asked when the epoch ends, as Chainer asks its sampler
        next_carry = carry + n - pos if policy.carries else 0
        return (Position(epoch + 1, 0, True, detail, next_carry),
                BatchPlan(np.empty(0, dtype=np.int64), epoch))
    order = order_of(epoch)
    parts, epochs = _carried(order_of, epoch, carry, n)
    stop = min(pos + batch_size - carry, n)
    parts.append(_chunk(order, pos, stop))
    epochs.append((epoch, stop - pos))
    remaining, pad = n - stop, 0
    if policy.drops_tail:
        ends = remaining < batch_size  # no further full batch fits in this epoch
    else:
        ends = remaining == 0
        short = batch_size - carry - (stop - pos)
        if policy.pads and short:
            pad = short
            parts.append(np.resize(_chunk(order, 0, n), short))
            epochs.append((epoch, short))
    if ends:
        order_of(epoch + 1)  # asked when the epoch ends, as Chainer asks its sampler
        next_carry = remaining if policy.carries else 0
        next_position = Position(epoch + 1, 0, True, detail, next_carry)
    else:
        next_position = Position(epoch, stop, False, detail, 0)
    plan = _plan(parts, [(e, t) for e, t in epochs if t], pad)
    return next_position, plan


def plain_bounds(position: Position, batch_size: int, epoch_size: int, repeat: bool,
                 last_batch: str | LastBatch | None = None,
                 stops: np.ndarray | None = None) -> Sequence[int] | None:
    """Return where the *plain* batches ahead of ``position`` start and end, if any.

    A plain batch lies inside one epoch's order, takes no carried, padding or
    next-epoch example and does not end its epoch: batch ``k`` is then
    ``order[bounds[k]:bounds[k + 1]]`` of the epoch in progress, and
    :func:`advance` would return ``Position(epoch, bounds[k + 1], False,
    epoch + bounds[k] / epoch_size, 0)`` for it, asking no order but the
    epoch's own. Most batches of an epoch are plain, so an engine can cut them
    from the order without stepping the machine (and the batches around them,
    which end epochs or cross them, are left to :func:`advance`).

    Args:
        position: the current position.
        batch_size: examples per batch.
        epoch_size: examples per epoch.
        repeat: whether epochs repeat.
        last_batch: the last-batch policy.
        stops: the epoch's batch ends (a batch sampler's), or None.

    Returns:
        The bounds (at least two, the first being the current position), or
        None when the next batch is not plain.
    """
    n, pos, b = epoch_size, position.current_position, batch_size
    if n == 0 or position.carry or (not repeat and position.epoch > 0):
        return None
    bounds: Sequence[int]
    if stops is not None:
        if np.any(np.diff(stops) <= 0):
            return None  # not a batch sampler's ends; advance() reports what it makes of them
        ahead = stops[np.searchsorted(stops, pos, side="right"):]
        bounds = [pos] + ahead[ahead < n].tolist()
    elif last_batch_policy(last_batch).drops_tail:
        bounds = range(pos, n - b + 1, b)  # each batch leaves a full one in its epoch
    else:
        bounds = range(pos, n, b)  # each batch ends before the epoch does
    return bounds if len(bounds) > 1 else None


def _carried(order_of: OrderOf, epoch: int, carry: int, n: int) -> tuple[list, list]:
    """The last ``carry`` examples of the epochs before ``epoch``, oldest first."""
    parts: list = []
    epochs: list = []
    while carry > 0:
        epoch -= 1
        take = min(carry, n)
        parts.insert(0, _chunk(order_of(epoch), n - take, n))
        epochs.insert(0, (epoch, take))
        carry -= take
    return parts, epochs


def _advance_to_stop(position: Position, n: int, order_of: OrderOf,
                     stops: np.ndarray) -> tuple[Position, BatchPlan]:
    """The batch from the current position to the next of the epoch's own batch ends."""
    epoch, pos = position.epoch, position.current_position
    stop = int(stops[np.searchsorted(stops, pos, side="right")])
    plan = _plan([_chunk(order_of(epoch), pos, stop)], [(epoch, stop - pos)])
    detail = epoch + pos / n
    if stop == n:
        order_of(epoch + 1)  # asked when the epoch ends, as Chainer asks its sampler
        return Position(epoch + 1, 0, True, detail, 0), plan
    return Position(epoch, stop, False, detail, 0), plan


def _advance_filling_across_epochs(
    position: Position, batch_size: int, n: int, order_of: OrderOf
) -> tuple[Position, BatchPlan]:
    """Chainer's repeating stream: a crossing batch is completed from the next epoch(s)."""
    epoch, pos, need = position.epoch, position.current_position, batch_size
    parts, epochs = [], []
    while need > 0:
        take = min(need, n - pos)
        parts.append(_chunk(order_of(epoch), pos, pos + take))
        epochs.append((epoch, take))
        pos += take
        need -= take
        if pos == n:
            epoch, pos = epoch + 1, 0
            order_of(epoch)  # asked when the epoch ends, as Chainer asks its sampler
    next_position = Position(
        epoch=epoch,
        current_position=pos,
        is_new_epoch=epoch > position.epoch,
        previous_epoch_detail=position.epoch + position.current_position / n,
    )
    return next_position, _plan(parts, epochs)
