"""Where each epoch's order comes from, and how that source is checkpointed.

Three sources: the identity (no shuffle), a recomputable sampler (epoch →
order is a pure function of its state, so a checkpoint holds that state: a
few integers), and a stateful Chainer-style sampler (called once per epoch;
the checkpoint carries the current order). Orders are computed on demand and
cached for the epochs in flight.

The sampler object a user passed is never changed by loading a state: the
state goes into a copy that this object keeps.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from dataset_kit.iterators.order_samplers import sampler_kind

NO_SAMPLER = "none"


class Orders:
    """The order of every epoch, for a dataset of ``size`` examples.

    Args:
        sampler: an order sampler, or None for the identity order.
        size: the dataset's length.

    Raises:
        ValueError: if the sampler's first order is not a valid order.
    """

    def __init__(self, sampler: Any, size: int) -> None:
        self.sampler = sampler
        self.size = size
        self.kind = NO_SAMPLER if sampler is None else sampler_kind(sampler)
        self._owned = False
        self._cache: dict[int, np.ndarray] = {}
        first = None
        if sampler is not None and callable(getattr(sampler, "epoch_order", None)):
            first = sampler.epoch_order(0, size)
        self.recomputable = sampler is None or first is not None
        if first is not None:
            self._cache[0] = _check_order(first, size, self.kind)
        elif sampler is not None:
            # Like Chainer, ask a stateful sampler for epoch 0 at once, so a
            # broken sampler fails at construction rather than mid-training.
            self.order_of(0)

    @property
    def epoch_size(self) -> int:
        """Examples per epoch: the length of every order."""
        return self.size

    def order_of(self, epoch: int) -> np.ndarray | None:
        """Return the order of ``epoch`` (None for the identity)."""
        if self.sampler is None:
            return None
        order = self._cache.get(epoch)
        if order is None:
            order = self._compute(epoch)
            self._cache[epoch] = order
        return order

    def _compute(self, epoch: int) -> np.ndarray:
        if self.recomputable:
            order = self.sampler.epoch_order(epoch, self.size)
        else:
            # A stateful sampler only moves forward: epoch e + 1 from epoch e.
            previous = self._cache.get(epoch - 1)
            if previous is None and epoch > 0:
                raise RuntimeError(f"order of epoch {epoch} requested before epoch {epoch - 1}")
            start = np.arange(self.size) if previous is None else previous
            order = self.sampler(start, self.size if previous is not None else 0)
        return _check_order(order, self.size, self.kind)

    def clear(self) -> None:
        """Forget every cached order (a stateful sampler is asked afresh)."""
        self._cache.clear()

    def forget_before(self, epoch: int) -> None:
        """Drop cached orders of epochs before ``epoch``; they will not be asked for.

        The latest cached order is kept: a stateful sampler derives the next
        epoch's order from it. So is the order just before ``epoch``: a
        rolled-over batch starts with examples of the previous epoch.
        """
        latest = max(self._cache, default=None)
        for e in [e for e in self._cache if e < epoch - 1 and e != latest]:
            del self._cache[e]

    def state_dict(self, epoch: int, with_previous: bool = False) -> dict:
        """Return what is needed to recompute the orders from ``epoch`` on.

        ``kind`` names the sampler; ``state`` is its own state (the state
        protocol of :class:`~dataset_kit.iterators.OrderSampler`); ``order``,
        for a stateful sampler only, is the current epoch's order, and
        ``previous_order`` (when ``with_previous``: a rolled-over batch is
        pending) the one before it.
        """
        state: dict[str, Any] = {"kind": self.kind}
        own = getattr(self.sampler, "state_dict", None)
        if callable(own):
            sampler_state = own()
            if sampler_state is not None:
                state["state"] = sampler_state
        if self.sampler is not None and not self.recomputable:
            state["order"] = self.order_of(epoch).tolist()
            if with_previous:
                state["previous_order"] = self.order_of(epoch - 1).tolist()
        return state

    def load_state_dict(self, state: dict, epoch: int) -> None:
        """Restore the orders saved by :meth:`state_dict` at ``epoch``.

        Raises:
            ValueError: if the state was made by another kind of sampler, or its
                order does not fit this dataset.
        """
        kind = state.get("kind") if isinstance(state, dict) else None
        if kind != self.kind:
            raise ValueError(
                f"state was saved with order sampler {kind!r}, but this iterator uses "
                f"{self.kind!r}"
            )
        if "state" in state:
            load = getattr(self.sampler, "load_state_dict", None)
            if not callable(load):
                raise ValueError(
                    f"state carries a state for order sampler {kind!r}, but this iterator's "
                    f"sampler has no load_state_dict()")
            if not self._owned:
                self.sampler = copy.deepcopy(self.sampler)
                self._owned = True
            self.sampler.load_state_dict(state["state"])
        self._cache.clear()
        if self.sampler is not None and not self.recomputable:
            if "order" not in state:
                raise ValueError("state of a stateful order sampler lacks its 'order' array")
            self._cache[epoch] = _check_order(np.asarray(state["order"]), self.size, self.kind)
            if "previous_order" in state:
                self._cache[epoch - 1] = _check_order(
                    np.asarray(state["previous_order"]), self.size, self.kind)


def _check_order(order: Any, size: int, kind: str) -> np.ndarray:
    order = np.asarray(order)
    if order.shape != (size,) or (size and order.dtype.kind not in "iu"):
        raise ValueError(
            f"order sampler {kind} returned an order of shape {order.shape} and dtype "
            f"{order.dtype}; expected a 1-D integer array of length {size}"
        )
    if size and (order.min() < 0 or order.max() >= size):
        raise ValueError(f"order sampler {kind} returned indices outside [0, {size})")
    return order.astype(np.int64, copy=False)
