"""BatchSpec: how a stream of examples is cut into batches, fixed once and validated once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit.engine._statemachine import (
    LAST_BATCH,
    BatchPlan,
    LastBatch,
    OrderOf,
    Position,
    advance,
    plain_bounds,
)


@dataclass(frozen=True)
class BatchSpec:
    """How batches are cut: what the pure state machine reads, and what a state records.

    Attributes:
        batch_size: examples per batch.
        epoch_size: examples per epoch (the length of each epoch's order,
            which a sampler may make differ from the dataset's length).
        repeat: whether epochs repeat forever.
        last_batch: how an epoch ends: None (Chainer's), ``'keep'``,
            ``'discard'``, ``'rollover'`` or ``'pad'``; see
            :mod:`dataset_kit.engine._statemachine`.

    A ``'discard'`` or ``'rollover'`` spec whose batches are larger than its
    epochs is valid: some epochs have no batch (see :attr:`yields_batches`).

    Raises:
        TypeError: if ``batch_size`` or ``epoch_size`` is not an integer.
        ValueError: if ``batch_size`` is not positive, ``epoch_size`` is
            negative or ``last_batch`` is unknown.
    """

    batch_size: int
    epoch_size: int
    repeat: bool = True
    last_batch: str | None = None

    def __post_init__(self) -> None:
        positive_int("batch_size", self.batch_size)
        non_negative_int("epoch_size", self.epoch_size)
        if self.last_batch not in LAST_BATCH:
            raise ValueError(
                f"last_batch must be one of {list(LAST_BATCH)}, got {self.last_batch!r}")

    @property
    def policy(self) -> LastBatch:
        """The last-batch policy's properties (:class:`LastBatch`); the spec keeps its name."""
        return LAST_BATCH[self.last_batch]

    @property
    def yields_batches(self) -> bool:
        """Whether a repeating stream ever yields a batch.

        False for ``'discard'`` with batches larger than the epochs: every epoch
        is empty, so an iterator asking for the next batch would wait forever.
        (``'rollover'`` gathers examples over several epochs into a batch.)
        """
        return not (self.policy.may_yield_nothing and self.batch_size > self.epoch_size)

    def advance(self, position: Position, order_of: OrderOf,
                stops_of: OrderOf | None = None) -> tuple[Position, BatchPlan] | None:
        """Plan the batch after ``position``; see :func:`~._statemachine.advance`."""
        return advance(position, self.batch_size, self.epoch_size, self.repeat, order_of,
                       self.policy, stops_of)

    def plain_bounds(self, position: Position, stops: np.ndarray | None = None
                     ) -> Sequence[int] | None:
        """Where the plain batches ahead of ``position`` start and end; see
        :func:`~._statemachine.plain_bounds`."""
        return plain_bounds(position, self.batch_size, self.epoch_size, self.repeat,
                            self.policy, stops)

    def batches_per_epoch(self, carry: int = 0) -> int:
        """Return how many batches the epoch starting with ``carry`` rolled-over examples has."""
        n, b = self.epoch_size, self.batch_size
        if self.policy.drops_tail:
            return (n + carry) // b
        return -(-n // b)
