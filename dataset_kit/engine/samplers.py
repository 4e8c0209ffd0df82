"""Order samplers: which permutation of the dataset each epoch visits.

Also the adapters that turn a user's iterable of indices (:class:`IterableOrder`)
or of index lists (:class:`BatchListOrder`) into an order sampler, for every
door whose users bring their own samplers.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from dataset_kit._checks import non_negative_int
from dataset_kit._example_context import ORDER_STREAM


def draw_seed() -> int:
    """Return a fresh 63-bit seed from the operating system's entropy."""
    return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> np.uint64(1))


class OrderSampler:
    """Base class of order samplers (Chainer's protocol).

    A sampler is called as ``sampler(current_order, current_position)`` at the
    start of every epoch and returns the next epoch's order: an integer array
    that is a permutation of ``range(len(current_order))``.

    A sampler that can also answer :meth:`epoch_order` random-access (epoch →
    order, a pure function) lets iterators checkpoint a few integers instead of
    an order array, and resume exactly across any number of epochs.

    State protocol: a sampler whose orders depend on state of its own (a
    seed, a curriculum stage) returns it from :meth:`state_dict` as a
    JSON-ready dict and takes it back in :meth:`load_state_dict`. Checkpoints
    record it under the sampler's :attr:`state_kind`, a stable name that does
    not change when the class moves between modules. An iterator loads a
    state into its own copy of the sampler, never into the object you passed.

    Attributes:
        state_kind: the name checkpoints record; None means the class's
            ``__qualname__``.
    """

    state_kind: ClassVar[str | None] = None

    def __call__(self, current_order: np.ndarray, current_position: int) -> np.ndarray:
        raise NotImplementedError

    def epoch_order(self, epoch: int, size: int) -> np.ndarray | None:
        """Return the order of ``epoch`` for a dataset of ``size``, if this sampler can.

        Returns:
            The order array, or None when the sampler is stateful and cannot
            recompute past or future orders (the default).
        """
        return None

    def state_dict(self) -> dict | None:
        """Return the state the orders depend on (JSON-ready), or None if there is none."""
        return None

    def load_state_dict(self, state: dict | None) -> None:
        """Restore a state returned by :meth:`state_dict`."""


def sampler_kind(sampler: Any) -> str:
    """Return the stable name a checkpoint records for ``sampler``."""
    return getattr(sampler, "state_kind", None) or type(sampler).__qualname__


def order_identity(sampler: Any) -> dict:
    """Return what a ledger records of the sampler an iterator's orders come from.

    ``{"sampler": name, "seed": seed or None, "rank": [rank, ranks] or None}``:
    the name is :func:`sampler_kind`'s; the seed is the sampler's integer
    ``seed`` attribute, where it has one. A sampler says more (the samplers it
    wraps, the rank it serves) with an ``identity()`` method returning a dict
    of any of these keys. A load that finds another name, rank or seed
    refuses the state (cause ``"sampler"``, ``"ranks"`` or ``"seed"``).

    Args:
        sampler: an order sampler, or None (the identity order).

    Raises:
        TypeError: if ``identity()`` returns something else than such a dict.
    """
    if sampler is None:
        return {"sampler": "none", "seed": None, "rank": None}
    seed = getattr(sampler, "seed", None)
    found: dict = {"sampler": sampler_kind(sampler),
                   "seed": seed if type(seed) is int and seed >= 0 else None, "rank": None}
    identity = getattr(sampler, "identity", None)
    if callable(identity):
        said = identity()
        if not (isinstance(said, dict) and set(said) <= set(found)):
            raise TypeError(f"{type(sampler).__qualname__}.identity() must return a dict of "
                            f"{sorted(found)}, got {said!r:.200}")
        found.update(said)
    return check_order_identity(found, f"{type(sampler).__qualname__}.identity()",
                                error=TypeError)


def check_order_identity(value: Any, where: str, error: type[Exception] = ValueError) -> dict:
    """Return ``value`` if it is :func:`order_identity`'s form.

    Raises:
        ValueError: (or ``error``) naming ``where`` and the field, if it is not.
    """
    if not isinstance(value, dict) or set(value) != {"sampler", "seed", "rank"}:
        raise error(f"{where} must be a dict of 'sampler', 'seed' and 'rank', got "
                    f"{value!r:.200}")
    name, seed, rank = value["sampler"], value["seed"], value["rank"]
    if not isinstance(name, str):
        raise error(f"{where}['sampler'] must be a string, got {name!r:.200}")
    if seed is not None and (type(seed) is not int or seed < 0):
        raise error(f"{where}['seed'] must be an integer >= 0 or None, got {seed!r:.200}")
    if rank is not None and not (isinstance(rank, (list, tuple)) and len(rank) == 2
                                 and all(type(r) is int for r in rank)
                                 and 0 <= rank[0] < rank[1]):
        raise error(f"{where}['rank'] must be None or [rank, ranks] with 0 <= rank < ranks, "
                    f"got {rank!r:.200}")
    return {"sampler": name, "seed": seed, "rank": None if rank is None else list(rank)}


class ShuffleOrderSampler(OrderSampler):
    """A fresh random permutation every epoch, recomputable from a seed.

    The permutation of epoch ``e`` is a pure function of ``(seed, e)``, so an
    iterator's checkpoint needs only the seed and its position.

    Args:
        random_state: None (draw a seed from the OS), an int seed, or a
            :class:`numpy.random.RandomState` / :class:`numpy.random.Generator`
            from which one seed is drawn at construction.

    Raises:
        TypeError: if ``random_state`` is of another type.
        ValueError: if it is a negative int.
    """

    state_kind = "shuffle"

    def __init__(self, random_state: Any = None) -> None:
        if random_state is None:
            self.seed = draw_seed()
        elif isinstance(random_state, np.random.RandomState):
            self.seed = int(random_state.randint(0, 2**63 - 1, dtype=np.int64))
        elif isinstance(random_state, np.random.Generator):
            self.seed = int(random_state.integers(0, 2**63 - 1))
        else:
            try:
                self.seed = non_negative_int("random_state", random_state)
            except TypeError:
                raise TypeError(
                    "random_state must be None, an int seed, a numpy RandomState or Generator, "
                    f"got {type(random_state).__name__}"
                ) from None
        self._calls = 0

    def epoch_order(self, epoch: int, size: int) -> np.ndarray:
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, ORDER_STREAM, epoch]))
        return rng.permutation(size)

    def state_dict(self) -> dict:
        """Return ``{"seed": seed}``."""
        return {"seed": self.seed}

    def load_state_dict(self, state: dict | None) -> None:
        """Take the seed of a state returned by :meth:`state_dict`.

        Raises:
            ValueError: if the state has no valid ``seed``.
        """
        seed = state.get("seed") if isinstance(state, dict) else None
        if seed is None:
            raise ValueError(f"ShuffleOrderSampler state needs a 'seed', got {state!r}")
        self.seed = non_negative_int("state['seed']", seed)

    def __call__(self, current_order: np.ndarray, current_position: int) -> np.ndarray:
        # Chainer's protocol: each call is the next epoch.
        self._calls += 1
        return self.epoch_order(self._calls, len(current_order))

    def __repr__(self) -> str:
        return f"ShuffleOrderSampler(random_state={self.seed})"


class IterableOrder(OrderSampler):
    """Any iterable of indices as an engine order sampler, asked once per epoch."""

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler
        self.state_kind = f"iterable:{type(sampler).__qualname__}"  # type: ignore[misc]

    def __call__(self, current_order: np.ndarray, current_position: int) -> np.ndarray:
        return np.fromiter((int(i) for i in self.sampler), dtype=np.int64)


class BatchListOrder(OrderSampler):
    """A batch sampler of any kind (an iterable of index lists) as an engine order.

    Asked once per epoch; the engine cuts the epoch at its batches' ends
    (:meth:`batch_stops`), and a checkpoint carries the epoch's order and ends.

    Raises:
        ValueError: (when asked) if the batch sampler yields an empty batch.
    """

    def __init__(self, batch_sampler: Any) -> None:
        self.batch_sampler = batch_sampler
        self.state_kind = f"batches:{type(batch_sampler).__qualname__}"  # type: ignore[misc]
        self._stops = np.zeros(0, np.int64)

    def __call__(self, current_order: np.ndarray, current_position: int) -> np.ndarray:
        batches = [np.asarray([int(i) for i in batch], dtype=np.int64)
                   for batch in self.batch_sampler]
        if any(len(b) == 0 for b in batches):
            raise ValueError(f"batch sampler {type(self.batch_sampler).__name__} yielded an "
                             f"empty batch")
        self._stops = np.cumsum([len(b) for b in batches], dtype=np.int64)
        return np.concatenate(batches) if batches else np.zeros(0, np.int64)

    def batch_stops(self) -> np.ndarray:
        """Where the batches of the order last returned end."""
        return self._stops
