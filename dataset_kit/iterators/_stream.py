"""The shared core of every iterator: position, orders, epochs and checkpoints.

:class:`BatchStream` keeps two positions: ``_position``, what the caller has
consumed (the only thing a checkpoint records), and ``_planned``, how far
batches have been planned ahead (equal for the serial iterator, ahead of it for
prefetching ones).
"""

from __future__ import annotations

import json
from typing import Any

from dataset_kit import _example_context
from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit.dataset import fetch_examples
from dataset_kit.iterators._orders import Orders
from dataset_kit.iterators._statemachine import BatchPlan, Position, advance
from dataset_kit.iterators.iterator import Iterator
from dataset_kit.iterators.order_samplers import ShuffleOrderSampler, draw_seed
from dataset_kit.serializers import Deserializer

STATE_FORMAT = "dataset_kit.iterator"
STATE_VERSION = 1


def fetch_batch(dataset: Any, plan: BatchPlan, seed: int) -> Any:
    """Fetch a planned batch with the example-rng context installed."""
    previous = _example_context.install(
        _example_context.BatchContext(seed, plan.indices, plan.epochs))
    try:
        return fetch_examples(dataset, plan.indices)
    finally:
        _example_context.install(previous)


class BatchStream(Iterator):
    """Common base of the serial, multithread and multiprocess iterators.

    Args:
        dataset: any sized, indexable dataset.
        batch_size: examples per batch.
        repeat: whether to loop over the dataset forever.
        shuffle: whether to shuffle; None means True unless ``order_sampler``
            is given.
        order_sampler: a Chainer-style order sampler.
        seed: seeds the shuffle (when no sampler is given) and
            :func:`~dataset_kit.iterators.example_rng`; drawn from the OS when None
            and kept in the checkpoint.

    Raises:
        TypeError: if ``batch_size`` or ``seed`` is not an integer, or
            ``order_sampler`` is not callable.
        ValueError: if ``batch_size`` is not positive, ``seed`` is negative, or
            both ``shuffle`` and ``order_sampler`` are given.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int,
        repeat: bool = True,
        shuffle: bool | None = None,
        order_sampler: Any = None,
        seed: int | None = None,
    ) -> None:
        batch_size = positive_int("batch_size", batch_size)
        if shuffle is not None and order_sampler is not None:
            raise ValueError(
                f"pass either shuffle or order_sampler, not both (got shuffle={shuffle!r} "
                f"and order_sampler={order_sampler!r})"
            )
        if order_sampler is not None and not callable(order_sampler):
            raise TypeError(f"order_sampler must be callable, got {type(order_sampler).__name__}")
        self.seed = draw_seed() if seed is None else non_negative_int("seed", seed)
        if order_sampler is None and (shuffle is None or shuffle):
            order_sampler = ShuffleOrderSampler(self.seed)
        self.dataset = dataset
        self.batch_size = batch_size
        self.repeat = bool(repeat)
        self.order_sampler = order_sampler
        self._length = len(dataset)
        self._orders = Orders(order_sampler, self._length)
        self._position = Position()
        self._planned = Position()

    # -- planning ------------------------------------------------------------

    def _plan_next(self) -> tuple[Position, BatchPlan] | None:
        """Plan the batch after ``_planned`` and move ``_planned`` past it."""
        step = advance(self._planned, self.batch_size, self._length, self.repeat,
                       self._orders.order_of)
        if step is not None:
            self._planned = step[0]
        return step

    def _consume(self, position: Position) -> None:
        """Record that the batch ending at ``position`` was handed to the caller."""
        if position.epoch != self._position.epoch:
            self._orders.forget_before(position.epoch)
        self._position = position

    def _discard_planned(self) -> None:
        """Forget batches planned but not consumed (prefetching iterators override)."""
        self._planned = self._position

    # -- Chainer's attributes ------------------------------------------------

    @property
    def epoch(self) -> int:
        """Completed epochs."""
        return self._position.epoch

    @property
    def current_position(self) -> int:
        """Index of the next example in the current epoch's order."""
        return self._position.current_position

    @property
    def is_new_epoch(self) -> bool:
        """Whether the last batch reached or crossed the end of an epoch."""
        return self._position.is_new_epoch

    @property
    def epoch_detail(self) -> float:
        """Epochs consumed, as a float: ``epoch + current_position / len(dataset)``."""
        if self._length == 0:
            return float(self.epoch)
        return self.epoch + self.current_position / self._length

    @property
    def previous_epoch_detail(self) -> float | None:
        """``epoch_detail`` before the last batch, or None before the first batch."""
        return self._position.previous_epoch_detail

    def reset(self) -> None:
        """Start over from the first batch of epoch 0.

        A seeded shuffle replays the same orders; a stateful order sampler is
        asked for a new epoch-0 order, as in Chainer.
        """
        self._discard_planned()
        self._orders.clear()
        self._position = self._planned = Position()

    # -- checkpoints ---------------------------------------------------------

    def state_dict(self) -> dict:
        """Return the iterator's state: a small JSON-serialisable dict.

        It counts only the batches already handed to the caller, and does not
        grow with the dataset unless a stateful order sampler forces it to
        carry the current epoch's order.
        """
        p = self._position
        return {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "dataset_length": self._length,
            "batch_size": self.batch_size,
            "repeat": self.repeat,
            "epoch": p.epoch,
            "current_position": p.current_position,
            "is_new_epoch": p.is_new_epoch,
            "previous_epoch_detail": p.previous_epoch_detail,
            "seed": self.seed,
            "order_sampler": self._orders.state_dict(p.epoch),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a state from :meth:`state_dict` of any dataset_kit iterator.

        The iterator then yields exactly the batches the saved one would have
        yielded next.

        Args:
            state: the state.

        Raises:
            ValueError: if the state is not an iterator state, has an unknown
                format version, or was saved for another dataset length, batch
                size, repeat mode or order sampler.
        """
        position = self._validate(state)
        self._discard_planned()
        self._orders.load_state_dict(state["order_sampler"], position.epoch)
        self.seed = non_negative_int("state['seed']", state["seed"])
        self._position = self._planned = position

    def _validate(self, state: Any) -> Position:
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise ValueError(f"state is not a dataset_kit iterator state: {_short(state)}")
        if state.get("version") != STATE_VERSION:
            raise ValueError(
                f"state has format version {state.get('version')!r}; this dataset_kit reads "
                f"version {STATE_VERSION}"
            )
        for key, mine in (("dataset_length", self._length), ("batch_size", self.batch_size),
                          ("repeat", self.repeat)):
            if state.get(key) != mine:
                raise ValueError(
                    f"state was saved with {key}={state.get(key)!r}, but this iterator has "
                    f"{key}={mine!r}"
                )
        epoch, pos = state.get("epoch"), state.get("current_position")
        if not (isinstance(epoch, int) and epoch >= 0 and isinstance(pos, int)
                and 0 <= pos < max(self._length, 1)):
            raise ValueError(f"state has an invalid position: epoch={epoch!r}, "
                             f"current_position={pos!r}")
        previous = state.get("previous_epoch_detail")
        return Position(epoch, pos, bool(state.get("is_new_epoch")),
                        None if previous is None else float(previous))

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
        order = self._orders.order_of(state["epoch"]) if self._length else None
        if order is not None:
            serializer("order", order)
        serializer("dataset_kit_state", json.dumps(state))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
