"""Where each epoch's order comes from, and how that source is checkpointed.

Three sources: the identity (no shuffle), a recomputable sampler (epoch →
order is a pure function of its state, so a checkpoint holds that state: a
few integers), and a stateful Chainer-style sampler (called once per epoch,
as Chainer calls it; the checkpoint carries the current order). Orders are
computed on demand and cached for the epochs in flight.

An order may be longer or shorter than the dataset (a sampler that visits
every example twice); its length is the epoch size, and every later order
must have the same length. An order can also be *pinned* for one epoch (a
Chainer snapshot brings its own order for the epoch in progress); a pinned
order is checkpointed as it is.

The sampler object a user passed is never changed by loading a state: the
state goes into a copy that this object keeps.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from dataset_kit.iterators.order_samplers import sampler_kind

NO_SAMPLER = "none"


class SamplerMismatchError(ValueError):
    """A state was saved with another kind of order sampler than this iterator's."""


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
        self.epoch_size = size
        self._owned = False
        self._cache: dict[int, np.ndarray] = {}
        self._pinned: set[int] = set()
        # epoch -> position where its latest planned chunk began: Chainer
        # passes it to a stateful sampler as ``current_position``.
        self._starts: dict[int, int] = {}
        # A batch sampler's own batch ends per epoch (see stops_of).
        self._stops: dict[int, np.ndarray] = {}
        self.stops_of = self._stops_of if callable(getattr(sampler, "batch_stops", None)) \
            else None
        first = None
        if sampler is not None and callable(getattr(sampler, "epoch_order", None)):
            first = sampler.epoch_order(0, size)
        self.recomputable = sampler is None or first is not None
        if first is not None:
            self._cache[0] = self._first(first)
        elif sampler is not None:
            # Like Chainer, ask a stateful sampler for epoch 0 at once, so a
            # broken sampler fails at construction rather than mid-training.
            self._cache[0] = self._first(sampler(np.arange(size), 0))

    def _first(self, order: Any) -> np.ndarray:
        order = _check_indices(order, self.size, self.kind)
        self.epoch_size = len(order)
        self._note_stops(0)
        return order

    def _note_stops(self, epoch: int) -> None:
        """Keep the batch ends the sampler gave with the order it just returned."""
        if self.stops_of is not None:
            self._stops[epoch] = np.asarray(self.sampler.batch_stops(), dtype=np.int64)

    def _stops_of(self, epoch: int) -> np.ndarray:
        """The positions where the batches of ``epoch`` end."""
        if epoch not in self._stops:
            self.order_of(epoch)
        return self._stops[epoch]

    def note_start(self, epoch: int, position: int) -> None:
        """Record that a batch is planned from ``position`` of ``epoch``."""
        self._starts[epoch] = position

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
            # A stateful sampler only moves forward: epoch e + 1 from epoch e,
            # called as Chainer calls it, with the position where the last
            # chunk of epoch e began.
            previous = self._cache.get(epoch - 1)
            if previous is None:
                raise RuntimeError(f"order of epoch {epoch} requested before epoch {epoch - 1}")
            order = self.sampler(previous, self._starts.get(epoch - 1, 0))
        order = _check_indices(order, self.size, self.kind)
        if len(order) != self.epoch_size:
            raise ValueError(
                f"order sampler {self.kind} returned an order of length {len(order)} for epoch "
                f"{epoch}, but its first order had length {self.epoch_size}; every order must "
                f"have the same length")
        if not self.recomputable:
            self._note_stops(epoch)
        return order

    def pin(self, epoch: int, order: Any) -> None:
        """Use ``order`` for ``epoch`` instead of asking the sampler.

        Raises:
            ValueError: if ``order`` has another length than the epoch size or
                indices outside the dataset.
        """
        order = _check_indices(order, self.size, self.kind)
        if len(order) != self.epoch_size:
            raise ValueError(
                f"the saved order has length {len(order)}, but this iterator's epochs have "
                f"{self.epoch_size} examples")
        self._cache[epoch] = order
        if self.recomputable:
            self._pinned.add(epoch)

    def forget_after(self, epoch: int) -> None:
        """Drop cached orders of epochs after ``epoch``: they derive from its order."""
        for kept in (self._cache, self._starts, self._stops):
            for e in [e for e in kept if e > epoch]:
                del kept[e]
        self._pinned = {e for e in self._pinned if e <= epoch}

    def clear(self) -> None:
        """Forget every cached and pinned order (a stateful sampler is asked afresh)."""
        self._cache.clear()
        self._pinned.clear()
        self._starts.clear()
        self._stops.clear()
        if not self.recomputable:
            self.pin(0, self.sampler(np.arange(self.size), 0))
            self._note_stops(0)

    def forget_before(self, epoch: int) -> None:
        """Drop cached orders of epochs before ``epoch``; they will not be asked for.

        The latest cached order is kept: a stateful sampler derives the next
        epoch's order from it. So is the order just before ``epoch``: a
        rolled-over batch starts with examples of the previous epoch.
        """
        latest = max(self._cache, default=None)
        for e in [e for e in self._cache if e < epoch - 1 and e != latest]:
            del self._cache[e]
        self._pinned = {e for e in self._pinned if e >= epoch - 1}
        self._starts = {e: p for e, p in self._starts.items() if e >= epoch - 1}
        self._stops = {e: s for e, s in self._stops.items() if e >= epoch - 1}

    def state_dict(self, epoch: int, with_previous: bool = False) -> dict:
        """Return what is needed to recompute the orders from ``epoch`` on.

        ``kind`` names the sampler; ``state`` is its own state (the state
        protocol of :class:`~dataset_kit.iterators.OrderSampler`); ``order``,
        for a stateful sampler or a pinned epoch, is the current epoch's order,
        and ``previous_order`` (when ``with_previous``: a rolled-over batch is
        pending) the one before it.
        """
        state: dict[str, Any] = {"kind": self.kind}
        own = getattr(self.sampler, "state_dict", None)
        if callable(own):
            sampler_state = own()
            if sampler_state is not None:
                state["state"] = sampler_state
        stored = self.sampler is not None and not self.recomputable
        if stored or epoch in self._pinned:
            state["order"] = self.order_of(epoch).tolist()
        if with_previous and (stored or epoch - 1 in self._pinned):
            state["previous_order"] = self.order_of(epoch - 1).tolist()
        if self.stops_of is not None:
            state["stops"] = self._stops_of(epoch).tolist()
        return state

    def load_state_dict(self, state: dict, epoch: int) -> None:
        """Restore the orders saved by :meth:`state_dict` at ``epoch``.

        Raises:
            SamplerMismatchError: if the state was made by another kind of sampler.
            ValueError: if its order does not fit this dataset.
        """
        kind = state.get("kind") if isinstance(state, dict) else None
        if kind != self.kind:
            raise SamplerMismatchError(
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
        self._pinned.clear()
        self._starts.clear()
        self._stops.clear()
        if self.sampler is not None and not self.recomputable and "order" not in state:
            raise ValueError("state of a stateful order sampler lacks its 'order' array")
        if "order" in state:
            self.pin(epoch, state["order"])
        if "previous_order" in state:
            self.pin(epoch - 1, state["previous_order"])
        if self.stops_of is not None:
            if "stops" not in state:
                raise ValueError("state of a batch sampler lacks its batch ends ('stops')")
            self._stops[epoch] = np.asarray(state["stops"], dtype=np.int64)

    def __copy__(self) -> Orders:
        # Its own caches; the sampler object stays shared, as in Chainer.
        other = Orders.__new__(Orders)
        other.__dict__.update(self.__dict__)
        other._cache = dict(self._cache)
        other._pinned = set(self._pinned)
        other._starts = dict(self._starts)
        other._stops = dict(self._stops)
        if other.stops_of is not None:
            other.stops_of = other._stops_of
        return other


def _check_indices(order: Any, size: int, kind: str) -> np.ndarray:
    order = np.asarray(order)
    if order.ndim != 1 or (order.size and order.dtype.kind not in "iu"):
        raise ValueError(
            f"order sampler {kind} returned an order of shape {order.shape} and dtype "
            f"{order.dtype}; expected a 1-D integer array"
        )
    if order.size and (order.min() < 0 or order.max() >= size):
        raise ValueError(
            f"order sampler {kind} returned indices outside [0, {size}) (the dataset's length)")
    return order.astype(np.int64, copy=False)
