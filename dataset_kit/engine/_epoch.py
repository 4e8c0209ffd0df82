"""The iterator over one epoch's batches that :meth:`Engine.epoch` returns."""

from __future__ import annotations

from typing import Any, Protocol

from dataset_kit.engine._statemachine import Position


class _Stepper(Protocol):
    """What an epoch needs of the engine (a protocol, so this module never imports it)."""

    @property
    def epoch_size(self) -> int: ...

    @property
    def position(self) -> Position: ...

    def skip_empty_epoch(self) -> bool: ...

    def next(self) -> Any: ...


class EpochIterator:
    """The batches of one epoch of an :class:`~dataset_kit.engine.Engine`.

    An iterator object, not a generator, so that a door can go on after a
    batch whose building raised: the exception reaches the caller, the batch
    is not consumed, and the next ``next()`` asks the engine again (a door
    that wants PyTorch's "skip the failed batch" turns failures into values
    where batches are built, and this iterator consumes them like batches).

    It ends after the batch that ends the epoch, when a non-repeating engine
    has no batch left, or at once for an epoch without a batch (which it
    consumes on the first ``next()``).
    """

    def __init__(self, engine: _Stepper) -> None:
        self._engine = engine
        self._started = False
        self._done = False

    def __iter__(self) -> EpochIterator:
        return self

    def __next__(self) -> Any:
        engine = self._engine
        if not self._started:
            self._started = True
            # Checked at the first next(), not at epoch(): a door may build the
            # iterator before the caller asks for a batch, as a generator would.
            if engine.epoch_size == 0 or engine.skip_empty_epoch():
                self._done = True
        if self._done:
            raise StopIteration
        try:
            batch = engine.next()
        except StopIteration:
            self._done = True
            raise
        if engine.position.is_new_epoch:
            self._done = True
        return batch
