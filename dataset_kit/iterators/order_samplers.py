"""Order samplers: which permutation of the dataset each epoch visits."""

from __future__ import annotations

from typing import Any

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
    """

    def __call__(self, current_order: np.ndarray, current_position: int) -> np.ndarray:
        raise NotImplementedError

    def epoch_order(self, epoch: int, size: int) -> np.ndarray | None:
        """Return the order of ``epoch`` for a dataset of ``size``, if this sampler can.

        Returns:
            The order array, or None when the sampler is stateful and cannot
            recompute past or future orders (the default).
        """
        return None


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

    def __call__(self, current_order: np.ndarray, current_position: int) -> np.ndarray:
        # Chainer's protocol: each call is the next epoch.
        self._calls += 1
        return self.epoch_order(self._calls, len(current_order))

    def __repr__(self) -> str:
        return f"ShuffleOrderSampler(random_state={self.seed})"
