"""Gluon's samplers, which are also engine order samplers.

Each sampler is an iterable of indices (Gluon's protocol: ``__iter__`` and
``__len__``) *and* an :class:`~dataset_kit.iterators.OrderSampler` whose order
of epoch ``e`` is recomputable, so a ``DataLoader`` checkpoint holds a few
integers. Any other iterable of indices works in a ``DataLoader`` too; it is
then asked once per epoch, and a checkpoint carries its current order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit._example_context import ORDER_STREAM
from dataset_kit.engine import LAST_BATCH as _ENGINE_LAST_BATCH
from dataset_kit.engine import BatchListOrder as BatchListOrder  # dataloader.py imports it here
from dataset_kit.engine import IterableOrder, LastBatch, OrderSampler, draw_seed

# Gluon's last_batch words, each the engine's policy of the same name.
LAST_BATCH: dict[str, LastBatch] = {word: _ENGINE_LAST_BATCH[word]
                                    for word in ("keep", "discard", "rollover")}


class Sampler(OrderSampler):
    """Base class: an iterable of indices whose order of each epoch is fixed or seeded."""

    _epochs_iterated = 0

    def indices(self, epoch: int) -> np.ndarray:
        """Return the indices of ``epoch`` (a pure function of the sampler and ``epoch``)."""
        raise NotImplementedError

    def __iter__(self) -> Iterator[int]:
        epoch, self._epochs_iterated = self._epochs_iterated, self._epochs_iterated + 1
        return iter(self.indices(epoch).tolist())

    def __len__(self) -> int:
        raise NotImplementedError

    def epoch_order(self, epoch: int, size: int) -> np.ndarray:
        return self.indices(epoch)

    def __call__(self, current_order: np.ndarray, current_position: int) -> np.ndarray:
        return self.indices(0)


class SequentialSampler(Sampler):
    """``start, start + 1, ..., start + length - 1``, every epoch.

    Raises:
        TypeError, ValueError: for a negative or non-integer ``length`` or ``start``.
    """

    state_kind = "gluon-sequential"

    def __init__(self, length: int, start: int = 0) -> None:
        self._length = non_negative_int("length", length)
        self._start = non_negative_int("start", start)

    def indices(self, epoch: int) -> np.ndarray:
        return np.arange(self._start, self._start + self._length, dtype=np.int64)

    def __len__(self) -> int:
        return self._length


class RandomSampler(Sampler):
    """A fresh permutation of ``range(length)`` every epoch, from ``(seed, epoch)``.

    Gluon draws from numpy's global generator; here each epoch's permutation
    is recomputable, so a checkpoint holds the seed.

    Args:
        length: the number of indices.
        seed: the seed; drawn from the OS when None.
    """

    state_kind = "gluon-random"

    def __init__(self, length: int, seed: int | None = None) -> None:
        self._length = non_negative_int("length", length)
        self.seed = draw_seed() if seed is None else non_negative_int("seed", seed)

    def indices(self, epoch: int) -> np.ndarray:
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, ORDER_STREAM, epoch]))
        return rng.permutation(self._length)

    def __len__(self) -> int:
        return self._length

    def state_dict(self) -> dict:
        return {"seed": self.seed}

    def load_state_dict(self, state: dict | None) -> None:
        self.seed = non_negative_int("state['seed']", (state or {}).get("seed"))


class IntervalSampler(Sampler):
    """Every ``interval``-th index: ``0, interval, 2 * interval, ...``.

    With ``rollover`` the pass is repeated from ``1``, ``2``, ... so every index
    appears once (``length=10, interval=3``: 0 3 6 9 1 4 7 2 5 8).

    Raises:
        ValueError: if ``interval`` is not positive or exceeds ``length``
            (MXNet 1.9.1 allows ``interval == length``: the indices in order).
    """

    state_kind = "gluon-interval"

    def __init__(self, length: int, interval: int, rollover: bool = True) -> None:
        self._length = non_negative_int("length", length)
        self._interval = positive_int("interval", interval)
        if self._interval > self._length:
            raise ValueError(
                f"interval must be smaller than or equal to length, got interval={interval} "
                f"and length={length}")
        self._rollover = bool(rollover)

    def indices(self, epoch: int) -> np.ndarray:
        starts = range(self._interval) if self._rollover else range(1)
        return np.concatenate([np.arange(s, self._length, self._interval) for s in starts])

    def __len__(self) -> int:
        return self._length if self._rollover else -(-self._length // self._interval)


class FilterSampler(Sampler):
    """The indices of the examples of ``dataset`` for which ``fn(example)`` is true."""

    state_kind = "gluon-filter"

    def __init__(self, fn: Callable[[Any], bool], dataset: Any) -> None:
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        self._indices = np.array([i for i in range(len(dataset)) if fn(dataset[i])],
                                 dtype=np.int64)

    def indices(self, epoch: int) -> np.ndarray:
        return self._indices

    def __len__(self) -> int:
        return len(self._indices)


class BatchSampler:
    """Groups a sampler's indices into batches (Gluon's ``BatchSampler``).

    Used alone it yields lists of indices; given to a ``DataLoader`` it becomes
    the engine's batch size and last-batch policy over ``sampler``'s order.

    Args:
        sampler: the indices (a :class:`Sampler` or any iterable with ``len``).
        batch_size: indices per batch.
        last_batch: ``'keep'``, ``'discard'`` or ``'rollover'``.

    Raises:
        ValueError: for a bad ``batch_size`` or ``last_batch``.
    """

    def __init__(self, sampler: Any, batch_size: int, last_batch: str = "keep") -> None:
        self.sampler = sampler
        self.batch_size = positive_int("batch_size", batch_size)
        if last_batch not in LAST_BATCH:
            raise ValueError(f"last_batch must be one of {list(LAST_BATCH)}, got {last_batch!r}")
        self.last_batch = last_batch
        self._carry: list = []

    def __iter__(self) -> Iterator[list]:
        batch, self._carry = self._carry, []
        for index in self.sampler:
            batch.append(int(index))
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and self.last_batch == "keep":
            yield batch
        elif batch and self.last_batch == "rollover":
            self._carry = batch

    def __len__(self) -> int:
        n = len(self.sampler)
        if self.last_batch == "keep":
            return -(-n // self.batch_size)
        if self.last_batch == "discard":
            return n // self.batch_size
        return (len(self._carry) + n) // self.batch_size


def as_order_sampler(sampler: Any) -> OrderSampler:
    """Return ``sampler`` if it is one of ours, else an :class:`IterableOrder` over it.

    Raises:
        TypeError: if ``sampler`` is not iterable.
    """
    if isinstance(sampler, Sampler):
        return sampler
    if not hasattr(sampler, "__iter__"):
        raise TypeError(f"sampler must be an iterable of indices, got {type(sampler).__name__}")
    return IterableOrder(sampler)
