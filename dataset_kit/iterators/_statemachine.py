"""Which indices come next: one pure function shared by every iterator.

Serial, multithread and multiprocess iterators all call :func:`advance`, so
they cannot disagree about which examples form a batch. Threads, processes and
checkpoints only decide when and where a batch is built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np


class Position(NamedTuple):
    """Where an iterator stands: everything needed to compute what comes next.

    Attributes:
        epoch: completed epochs.
        current_position: index into the current epoch's order.
        is_new_epoch: whether the last batch reached or crossed an epoch end.
        previous_epoch_detail: ``epoch_detail`` before the last batch, or None
            before the first one.
    """

    epoch: int = 0
    current_position: int = 0
    is_new_epoch: bool = False
    previous_epoch_detail: float | None = None


class BatchPlan(NamedTuple):
    """The indices of one batch and the epoch they belong to.

    ``epochs`` is an int when the whole batch lies in one epoch (the common
    case, kept cheap) and an array of one epoch per index otherwise.
    """

    indices: np.ndarray
    epochs: int | np.ndarray

    def epoch_at(self, k: int) -> int:
        """Return the epoch of the ``k``-th index of the batch."""
        return self.epochs if isinstance(self.epochs, int) else int(self.epochs[k])


OrderOf = Callable[[int], "np.ndarray | None"]


def advance(
    position: Position, batch_size: int, dataset_length: int, repeat: bool, order_of: OrderOf
) -> tuple[Position, BatchPlan] | None:
    """Return the position after the next batch and that batch's plan.

    With ``repeat`` the examples form an endless stream, epoch after epoch, and
    a batch that crosses an epoch end is filled from the next epoch's order (it
    may span several epochs when ``batch_size`` exceeds the dataset). Without
    ``repeat`` the single epoch is cut into batches, the last possibly short.

    Args:
        position: the current position.
        batch_size: examples per batch (positive).
        dataset_length: examples per epoch.
        repeat: whether epochs repeat.
        order_of: maps an epoch number to its order array, or None for the
            identity order.

    Returns:
        ``(next_position, plan)``, or None when a non-repeating iterator is done.

    Raises:
        ValueError: if ``repeat`` is set and the dataset is empty.
    """
    if not repeat and (position.epoch > 0 or dataset_length == 0):
        return None
    if dataset_length == 0:
        raise ValueError("an iterator that repeats needs a non-empty dataset, got length 0")
    epoch, pos, need = position.epoch, position.current_position, batch_size
    parts, epochs = [], []
    while need > 0:
        order = order_of(epoch)
        take = min(need, dataset_length - pos)
        parts.append(np.arange(pos, pos + take) if order is None else order[pos:pos + take])
        epochs.append((epoch, take))
        pos += take
        need -= take
        if pos == dataset_length:
            epoch, pos = epoch + 1, 0
            if not repeat:
                break
    if len(parts) == 1:
        plan = BatchPlan(parts[0].astype(np.int64, copy=False), epochs[0][0])
    else:
        plan = BatchPlan(np.concatenate(parts).astype(np.int64, copy=False),
                         np.repeat([e for e, _ in epochs], [t for _, t in epochs]))
    next_position = Position(
        epoch=epoch,
        current_position=pos,
        is_new_epoch=epoch > position.epoch,
        previous_epoch_detail=position.epoch + position.current_position / dataset_length,
    )
    return next_position, plan
