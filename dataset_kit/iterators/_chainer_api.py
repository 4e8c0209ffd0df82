"""Chainer's iterator vocabulary over the engine: attributes, reset, checkpoints.

:class:`ChainerIterator` holds one :class:`~._engine.Engine` and translates
Chainer's names onto it; :class:`~dataset_kit.iterators.SerialIterator`,
:class:`~dataset_kit.iterators.MultithreadIterator` and
:class:`~dataset_kit.iterators.MultiprocessIterator` only choose the
executor. Nothing here plans, fetches or prefetches a batch.
"""

from __future__ import annotations

import json
from typing import Any

from dataset_kit.iterators._engine import Engine
from dataset_kit.iterators.iterator import Iterator
from dataset_kit.serializers import Deserializer


class ChainerIterator(Iterator):
    """A Chainer-style iterator over an engine.

    Args:
        engine: the engine that plans, builds and checkpoints the batches.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def __next__(self) -> Any:
        return self._engine.next()

    # -- Chainer's attributes ------------------------------------------------

    @property
    def dataset(self) -> Any:
        """The dataset."""
        return self._engine.dataset

    @property
    def batch_size(self) -> int:
        """Examples per batch."""
        return self._engine.spec.batch_size

    @property
    def repeat(self) -> bool:
        """Whether the iterator loops over the dataset forever."""
        return self._engine.spec.repeat

    @property
    def last_batch(self) -> str | None:
        """How each epoch ends: None (Chainer's), 'keep', 'discard', 'rollover' or 'pad'."""
        return self._engine.spec.last_batch

    @property
    def order_sampler(self) -> Any:
        """The order sampler passed in (or the default shuffle), never changed by a load."""
        return self._engine.order_sampler

    @property
    def seed(self) -> int:
        """The seed of the shuffle and of :func:`~dataset_kit.example_rng`."""
        return self._engine.seed

    @property
    def epoch(self) -> int:
        """Completed epochs."""
        return self._engine.position.epoch

    @property
    def current_position(self) -> int:
        """Index of the next example in the current epoch's order."""
        return self._engine.position.current_position

    @property
    def is_new_epoch(self) -> bool:
        """Whether the last batch completed an epoch."""
        return self._engine.position.is_new_epoch

    @property
    def epoch_detail(self) -> float:
        """Epochs consumed, as a float: ``epoch + current_position / epoch size``."""
        return self._engine.epoch_detail

    @property
    def previous_epoch_detail(self) -> float | None:
        """``epoch_detail`` before the last batch, or None before the first batch."""
        return self._engine.position.previous_epoch_detail

    @property
    def last_pad(self) -> int:
        """How many trailing examples of the last batch are padding (``last_batch='pad'``)."""
        plan = self._engine.last_plan
        return 0 if plan is None else plan.pad

    def reset(self) -> None:
        """Start over from the first batch of epoch 0.

        A seeded shuffle replays the same orders; a stateful order sampler is
        asked for a new epoch-0 order, as in Chainer. Unlike Chainer, this
        also works after :meth:`finalize`.
        """
        self._engine.reset()

    def finalize(self) -> None:
        """Release threads, processes and shared memory. Idempotent.

        Arrays already handed out stay valid.
        """
        self._engine.close()

    # -- checkpoints ---------------------------------------------------------

    def state_dict(self) -> dict:
        """Return the iterator's state: a small JSON-serialisable dict.

        It counts only the batches already handed to the caller, and does not
        grow with the dataset unless a stateful order sampler forces it to
        carry the current epoch's order.
        """
        return self._engine.state_dict()

    def load_state_dict(self, state: dict) -> None:
        """Restore a state from :meth:`state_dict` of any dataset_kit iterator.

        The iterator then yields exactly the batches the saved one would have
        yielded next.

        Args:
            state: the state.

        Raises:
            ValueError: if the state is not an iterator state, has an unknown
                format version, or was saved for another dataset length, batch
                size, repeat mode, last-batch policy or order sampler.
        """
        self._engine.load_state_dict(state)

    def serialize(self, serializer: Any) -> None:
        """Save or load the state through Chainer's serializer protocol.

        Writes Chainer's keys (``current_position``, ``epoch``, ``is_new_epoch``,
        ``previous_epoch_detail`` and, when shuffled, ``order``) for
        readability, plus ``dataset_kit_state``, the JSON of
        :meth:`state_dict`, which is what loading reads.
        """
        if isinstance(serializer, Deserializer):
            self.load_state_dict(json.loads(serializer("dataset_kit_state", "")))
            return
        state = self.state_dict()
        serializer("current_position", state["current_position"])
        serializer("epoch", state["epoch"])
        serializer("is_new_epoch", state["is_new_epoch"])
        previous = state["previous_epoch_detail"]
        serializer("previous_epoch_detail", -1.0 if previous is None else previous)
        order = self._engine.current_order()
        if order is not None:
            serializer("order", order)
        serializer("dataset_kit_state", json.dumps(state))
