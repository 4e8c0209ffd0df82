"""The order of an epoch, and moves that jump the position: an empty epoch, pinning, the
next epoch, a reset.

Plain functions over an engine (see :mod:`._parts`); each move discards the
prefetch window first, as the batches planned in it no longer come next.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataset_kit.engine import _window
from dataset_kit.engine._parts import EngineParts
from dataset_kit.engine._statemachine import Position


def current_order(engine: EngineParts, epoch: int | None = None) -> np.ndarray | None:
    """Return the order of the current epoch, or of ``epoch`` (None: identity, or an
    empty dataset)."""
    epoch = engine._position.epoch if epoch is None else epoch
    return engine._orders.order_of(epoch) if engine._spec.epoch_size else None


def order_offset(engine: EngineParts, epoch: int | None = None) -> int:
    """Return where in its sampler's order the current epoch (or ``epoch``) began.

    0 unless a state began it at an offset (``order_offset`` in the
    state: resuming at global position ``k`` of an order that other ranks
    share); the epoch then starts at :func:`order_head`.
    """
    return engine._orders.offset_of(engine._position.epoch if epoch is None else epoch)[0]


def order_head(engine: EngineParts, epoch: int | None = None) -> int:
    """Return the position where the current epoch (or ``epoch``) began (see
    :func:`order_offset`); 0 for an epoch begun at the start of its order."""
    return engine._orders.offset_of(engine._position.epoch if epoch is None else epoch)[1]


def skip_empty_epoch(engine: EngineParts) -> bool:
    """Consume the epoch about to start if it has no batch; return whether it did.

    For doors that give one epoch per ``iter()`` (Gluon's DataLoader,
    MXNet's NDArrayIter): with ``'discard'`` or ``'rollover'`` and batches
    larger than the epoch, such an epoch yields nothing, and (for
    ``'rollover'``) its examples open a later batch.

    Raises:
        RuntimeError: if the executor was closed or has failed.
    """
    p, spec = engine._position, engine._spec
    if not (spec.repeat and spec.epoch_size and p.current_position == 0
            and spec.last_batch in ("discard", "rollover")
            and spec.batches_per_epoch(p.carry) == 0):
        return False
    if engine._deferred is not None:
        error, engine._deferred = engine._deferred, None
        raise error
    engine._executor.ensure_open()
    if not engine._pending:
        _window.fill(engine)
    position, plan, handle = engine._pending.popleft()
    assert handle is None, "the step after an empty epoch's start is its empty step"
    engine._consume(position, plan)
    return True


def pin_current_order(engine: EngineParts, order: Any) -> None:
    """Use ``order`` for the rest of the current epoch (a Chainer snapshot's order).

    Later epochs' orders are asked of the sampler again.

    Raises:
        ValueError: if the iterator has no order sampler, or ``order`` does
            not fit its epochs.
    """
    if engine._order_sampler is None:
        raise ValueError("this iterator visits examples in order; it has no order to pin")
    _window.discard(engine)
    engine._orders.pin(engine._position.epoch, order)
    # Orders planned ahead for later epochs came from the replaced one.
    engine._orders.forget_after(engine._position.epoch)


def start_next_epoch(engine: EngineParts, keep_rollover: bool = True) -> None:
    """Leave the epoch in progress: the next batch opens the next epoch.

    Mid-epoch, the rest of the epoch is skipped. At an epoch boundary
    nothing changes, except that ``keep_rollover=False`` drops examples
    waiting to roll over into the next epoch.
    """
    p = engine._position
    # At a boundary the last batch ended an epoch (a crossing batch may have
    # begun the next one already), or nothing was consumed yet.
    if p.is_new_epoch or p.previous_epoch_detail is None:
        if keep_rollover or not p.carry:
            return
        next_position = p._replace(carry=0)
    else:
        next_position = Position(p.epoch + 1, 0, True, engine.epoch_detail, 0)
    _window.discard(engine)
    engine._position = engine._planned = next_position


def reset(engine: EngineParts) -> None:
    """Start over from the first batch of epoch 0 (reopening a closed executor).

    A seeded shuffle replays the same orders; a stateful order sampler is
    asked for a new epoch-0 order, as in Chainer.
    """
    _window.discard(engine)
    engine._deferred = None
    engine._orders.clear()
    engine._position = engine._planned = Position()
    engine._last_plan = None
    engine._executor.reopen()
