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

An epoch of a recomputable sampler can begin at an *offset* of its order
(resuming at global position ``k`` of an order cut among other ranks): the
epoch's order is then the sampler's order from that offset on
(``epoch_order_from`` of an :class:`~.protocols.OffsetOrder`, else the
order's tail), placed at the end of an epoch-sized order so that positions
and the end of the epoch keep their meaning; the epoch starts at its
*head*, the first position of that tail. The checkpoint holds the offset,
never the order.

The sampler object a user passed is never changed by loading a state: the
state goes into a copy that this object keeps.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dataset_kit.engine._checkpoint import short
from dataset_kit.engine._statemachine import Position
from dataset_kit.engine.errors import SamplerMismatchError
from dataset_kit.engine.protocols import (
    BatchStops,
    OffsetOrder,
    RandomAccessOrder,
    StatefulSampler,
)
from dataset_kit.engine.samplers import ShuffleOrderSampler, sampler_kind

NO_SAMPLER = "none"
# Samplers whose every order is a permutation of range(len(dataset)): a saved
# order for them must be one too. Chainer lets any other sampler return any
# in-range indices (its iterators check only an order's length), so for those
# a saved order is checked for shape, range and length alone.
PERMUTING_KINDS = frozenset({ShuffleOrderSampler.state_kind})


@dataclass
class _Epoch:
    """What is known of one epoch's order (one record per epoch in flight).

    Attributes:
        order: the epoch's order, once computed, pinned or loaded; else None.
        pinned: the order was given (a snapshot's), not asked of the sampler.
        start: where the latest planned chunk of the epoch began: Chainer
            passes it to a stateful sampler as ``current_position``.
        stops: a batch sampler's own batch ends of the epoch.
        offset: ``(offset, head)`` of an epoch begun at an offset of its order.
    """

    order: np.ndarray | None = None
    pinned: bool = False
    start: int | None = None
    stops: np.ndarray | None = None
    offset: tuple[int, int] | None = None


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
        self._epochs: dict[int, _Epoch] = {}
        self.stops_of = self._stops_of if isinstance(sampler, BatchStops) else None
        first = None
        if isinstance(sampler, RandomAccessOrder):
            first = sampler.epoch_order(0, size)
        self.recomputable = sampler is None or first is not None
        if first is not None:
            self._record(0).order = self._first(first)
        elif sampler is not None:
            # Like Chainer, ask a stateful sampler for epoch 0 at once, so a
            # broken sampler fails at construction rather than mid-training.
            self._record(0).order = self._first(sampler(np.arange(size), 0))

    def _record(self, epoch: int) -> _Epoch:
        """The record of ``epoch``, made empty if there is none."""
        record = self._epochs.get(epoch)
        if record is None:
            record = self._epochs[epoch] = _Epoch()
        return record

    def _first(self, order: Any) -> np.ndarray:
        order = _check_indices(order, self.size, self.kind)
        self.epoch_size = len(order)
        self._note_stops(0)
        return order

    def _note_stops(self, epoch: int) -> None:
        """Keep the batch ends the sampler gave with the order it just returned."""
        if self.stops_of is not None:
            self._record(epoch).stops = np.asarray(self.sampler.batch_stops(), dtype=np.int64)

    def _stops_of(self, epoch: int) -> np.ndarray:
        """The positions where the batches of ``epoch`` end."""
        record = self._epochs.get(epoch)
        if record is None or record.stops is None:
            self.order_of(epoch)
            record = self._epochs[epoch]
        assert record.stops is not None  # order_of noted them
        return record.stops

    def note_start(self, epoch: int, position: int) -> None:
        """Record that a batch is planned from ``position`` of ``epoch``."""
        self._record(epoch).start = position

    def order_of(self, epoch: int) -> np.ndarray | None:
        """Return the order of ``epoch`` (None for the identity)."""
        if self.sampler is None:
            return None
        record = self._epochs.get(epoch)
        if record is not None and record.order is not None:
            return record.order
        order = self._compute(epoch)
        self._record(epoch).order = order
        return order

    def replayable(self, epoch: int) -> bool:
        """Whether the order of ``epoch`` can be asked again later, as it was used.

        True for the identity and a recomputable sampler's own orders; False
        for a stateful sampler, a pinned order or an epoch begun at an offset.
        """
        record = self._epochs.get(epoch)
        return self.recomputable and (record is None or (not record.pinned
                                                          and record.offset is None))

    def offset_of(self, epoch: int) -> tuple[int, int]:
        """Return ``(offset, head)`` of ``epoch``: ``(0, 0)`` unless it began at an offset."""
        record = self._epochs.get(epoch)
        return (0, 0) if record is None or record.offset is None else record.offset

    def _compute(self, epoch: int) -> np.ndarray:
        record = self._epochs.get(epoch)
        if record is not None and record.offset is not None:
            return self._from_offset(epoch, record.offset[0])[0]
        if self.recomputable:
            order = self.sampler.epoch_order(epoch, self.size)
        else:
            # A stateful sampler only moves forward: epoch e + 1 from epoch e,
            # called as Chainer calls it, with the position where the last
            # chunk of epoch e began.
            before = self._epochs.get(epoch - 1)
            if before is None or before.order is None:
                raise RuntimeError(f"order of epoch {epoch} requested before epoch {epoch - 1}")
            order = self.sampler(before.order, before.start or 0)
        order = _check_indices(order, self.size, self.kind)
        if len(order) != self.epoch_size:
            raise ValueError(
                f"order sampler {self.kind} returned an order of length {len(order)} for epoch "
                f"{epoch}, but its first order had length {self.epoch_size}; every order must "
                f"have the same length")
        if not self.recomputable:
            self._note_stops(epoch)
        return order

    def _from_offset(self, epoch: int, offset: int) -> tuple[np.ndarray, int]:
        """The order of ``epoch`` begun at ``offset`` of the sampler's order, and its head.

        Raises:
            ValueError: if nothing of the epoch is left from ``offset``, or the
                sampler's answer is not a valid order.
        """
        full = self.sampler.epoch_order(epoch, self.size)
        full = _check_indices(full, self.size, self.kind)
        if isinstance(self.sampler, OffsetOrder):
            rest = _check_indices(self.sampler.epoch_order_from(epoch, self.size, offset),
                                  self.size, self.kind)
        else:
            rest = full[offset:]
        if not 0 < len(rest) <= self.epoch_size:
            raise ValueError(
                f"order sampler {self.kind} leaves {len(rest)} examples of epoch {epoch} from "
                f"offset {offset}; an epoch begun at an offset needs 1 to {self.epoch_size}")
        head = self.epoch_size - len(rest)
        # The head is never visited from this position on; it keeps the start
        # of the usual order, which is what 'pad' repeats.
        return np.concatenate([full[:head], rest]), head

    def pin(self, epoch: int, order: Any, where: str = "the saved order") -> None:
        """Use ``order`` for ``epoch`` instead of asking the sampler.

        Args:
            epoch: the epoch the order is for.
            order: a 1-D integer array-like.
            where: how to name the order in an error (a state's key).

        Raises:
            ValueError: if ``order`` is not a 1-D integer array of the epoch
                size with indices inside the dataset, or, for a sampler whose
                orders are permutations (:data:`PERMUTING_KINDS`), not a
                permutation of the dataset's indices.
        """
        order = _saved_indices(where, order, self.size)
        if len(order) != self.epoch_size:
            raise ValueError(
                f"{where} has length {len(order)}, but this iterator's epochs have "
                f"{self.epoch_size} examples")
        if self.kind in PERMUTING_KINDS and not _is_permutation(order, self.size):
            raise ValueError(
                f"{where} is not a permutation of range({self.size}), but order sampler "
                f"{self.kind!r} visits every example once per epoch: {short(order.tolist())}")
        record = self._record(epoch)
        record.order, record.offset = order, None
        if self.recomputable:
            record.pinned = True

    def forget_after(self, epoch: int) -> None:
        """Drop cached orders of epochs after ``epoch``: they derive from its order."""
        for e in [e for e in self._epochs if e > epoch]:
            del self._epochs[e]

    def clear(self) -> None:
        """Forget every cached and pinned order (a stateful sampler is asked afresh)."""
        self._epochs.clear()
        if not self.recomputable:
            self.pin(0, self.sampler(np.arange(self.size), 0))
            self._note_stops(0)

    def forget_before(self, epoch: int) -> None:
        """Drop cached orders of epochs before ``epoch``; they will not be asked for.

        The latest cached order is kept: a stateful sampler derives the next
        epoch's order from it. So is the order just before ``epoch``: a
        rolled-over batch starts with examples of the previous epoch.
        """
        latest = max((e for e, r in self._epochs.items() if r.order is not None), default=None)
        for e in [e for e in self._epochs if e < epoch - 1]:
            if e == latest:
                self._epochs[e] = _Epoch(order=self._epochs[e].order)  # its order alone
            else:
                del self._epochs[e]

    def state_dict(self, epoch: int, with_previous: bool = False) -> dict:
        """Return what is needed to recompute the orders from ``epoch`` on.

        ``kind`` names the sampler; ``state`` is its own state (the state
        protocol of :class:`~dataset_kit.iterators.OrderSampler`); ``order``,
        for a stateful sampler or a pinned epoch, is the current epoch's order,
        and ``previous_order`` (when ``with_previous``: a rolled-over batch is
        pending) the one before it.
        """
        state: dict[str, Any] = {"kind": self.kind}
        if isinstance(self.sampler, StatefulSampler):
            sampler_state = self.sampler.state_dict()
            if sampler_state is not None:
                state["state"] = sampler_state
        stored = self.sampler is not None and not self.recomputable
        if stored or self._pinned(epoch):
            state["order"] = self._stored_order(epoch)
        if with_previous and (stored or self._pinned(epoch - 1)):
            state["previous_order"] = self._stored_order(epoch - 1)
        if self.stops_of is not None:
            state["stops"] = self._stops_of(epoch).tolist()
        return state

    def _pinned(self, epoch: int) -> bool:
        record = self._epochs.get(epoch)
        return record is not None and record.pinned

    def _stored_order(self, epoch: int) -> list[int]:
        order = self.order_of(epoch)
        assert order is not None  # stored or pinned: there is a sampler, so an order
        return order.tolist()

    def loaded(self, state: Any, position: Position, offset: int = 0) -> Orders:
        """Return a copy of these orders with a :meth:`state_dict` loaded; ``self`` is unchanged.

        Everything is checked here, so the caller can swap the copy in knowing
        that the state is whole: the kind, the sampler's own state (loaded into
        a private copy of the sampler), the saved orders, a batch sampler's
        batch ends, and that the orders the position needs can be computed.

        Args:
            state: ``state['order_sampler']`` of an iterator state.
            position: the (checked) position the state records.
            offset: where in the sampler's order the current epoch began
                (``state['order_offset']``).

        Raises:
            SamplerMismatchError: if the state was made by another kind of sampler.
            ValueError: if any part of it does not fit this sampler or dataset
                (the message names the key).
        """
        where = "state['order_sampler']"
        kind = state.get("kind") if isinstance(state, dict) else None
        if not (isinstance(kind, str) and kind == self.kind):
            raise SamplerMismatchError(
                f"state was saved with order sampler {short(kind)}, but this iterator uses "
                f"{self.kind!r}"
            )
        epoch = position.epoch
        other = copy.copy(self)
        other._epochs.clear()
        other._load_sampler_state(state)
        stored = self.sampler is not None and not self.recomputable
        if self.sampler is None and ("order" in state or "previous_order" in state):
            raise ValueError(f"{where} carries an order, but this iterator visits the examples "
                             f"in their own order (it has no order sampler)")
        if stored and "order" not in state:
            raise ValueError(f"{where} lacks the 'order' of stateful order sampler {kind!r}")
        if "order" in state:
            other.pin(epoch, state["order"], f"{where}['order']")
        if "previous_order" in state:
            other.pin(epoch - 1, state["previous_order"], f"{where}['previous_order']")
        elif position.carry and stored:
            raise ValueError(f"{where} lacks the 'previous_order' that the {position.carry} "
                             f"examples carried into epoch {epoch} come from")
        if self.stops_of is not None:
            if "stops" not in state:
                raise ValueError(f"{where} of a batch sampler lacks its batch ends ('stops')")
            other._record(epoch).stops = _saved_stops(f"{where}['stops']", state["stops"],
                                                      self.epoch_size, position.current_position)
        if offset:
            other._load_offset(epoch, offset, position, state)
        try:
            # The orders the next batch needs; a recomputable sampler's loaded
            # state must produce them now rather than fail mid-epoch.
            other.order_of(epoch)
            if position.carry:
                other.order_of(epoch - 1)
        except Exception as error:  # a user's sampler may raise anything on a bad state
            raise ValueError(f"order sampler {kind!r} cannot compute the orders of epoch "
                             f"{epoch} from {where}: {type(error).__name__}: {error}") from error
        return other

    def _load_offset(self, epoch: int, offset: int, position: Position, state: dict) -> None:
        """Begin ``epoch`` at ``offset`` of the sampler's order (checked against ``position``)."""
        if not self.recomputable or self.stops_of is not None or "order" in state:
            raise ValueError(
                f"state['order_offset'] is {offset}, but order sampler {self.kind!r} cannot "
                f"begin an epoch at an offset (it needs a random-access order without batches "
                f"of its own, and no saved order)")
        if self.sampler is None:  # the identity: the epoch's tail from the offset on
            if offset >= self.epoch_size:
                raise ValueError(f"state['order_offset'] must be below the epoch size "
                                 f"{self.epoch_size}, got {offset}")
            order, head = None, offset
        else:
            try:
                order, head = self._from_offset(epoch, offset)
            except Exception as error:  # a user's sampler may raise anything on a bad offset
                raise ValueError(f"state['order_offset'] {offset} does not fit order sampler "
                                 f"{self.kind!r}: {type(error).__name__}: {error}") from error
        if position.current_position < head:
            raise ValueError(
                f"state['current_position'] is {position.current_position}, but epoch {epoch} "
                f"begun at order_offset {offset} starts at position {head}")
        record = self._record(epoch)
        if order is not None:
            record.order = order
        record.offset = (offset, head)

    def _load_sampler_state(self, state: dict) -> None:
        """Load the sampler's own state into a private copy of the sampler."""
        where = "state['order_sampler']['state']"
        stateful = isinstance(self.sampler, StatefulSampler)
        if "state" not in state:
            if stateful and self.sampler.state_dict() is not None:
                raise ValueError(f"{where} is missing, but order sampler {self.kind!r} has a "
                                 f"state of its own")
            return
        if not stateful:
            raise ValueError(
                f"state carries a state for order sampler {self.kind!r}, but this iterator's "
                f"sampler has no state_dict()/load_state_dict() (StatefulSampler)")
        # Always a fresh copy: the sampler object is shared with copies of
        # this iterator (and is the user's until the first load).
        self.sampler = copy.deepcopy(self.sampler)
        try:
            self.sampler.load_state_dict(state["state"])
        except Exception as error:  # a user's sampler may raise anything on a bad state
            if isinstance(error, ValueError) and type(error) is not ValueError:
                raise  # a specific error (ManifestChangedError, ...): the caller catches its type
            raise ValueError(f"{where} does not fit order sampler {self.kind!r}: "
                             f"{type(error).__name__}: {error}") from error

    def __copy__(self) -> Orders:
        # Its own caches; the sampler object stays shared, as in Chainer.
        other = Orders.__new__(Orders)
        other.__dict__.update(self.__dict__)
        other._epochs = {e: replace(record) for e, record in self._epochs.items()}
        if other.stops_of is not None:
            other.stops_of = other._stops_of
        return other


def _saved_indices(where: str, value: Any, size: int) -> np.ndarray:
    """``value`` as an int64 index array, or a ValueError naming ``where``."""
    try:
        return _check_indices(value, size, "")
    except (ValueError, TypeError) as error:
        raise ValueError(f"{where} must be a 1-D array of integers in [0, {size}), got "
                         f"{short(value)}") from error


def _saved_stops(where: str, value: Any, epoch_size: int, position: int) -> np.ndarray:
    """A batch sampler's saved batch ends: increasing, ending at the epoch size."""
    stops = _saved_indices(where, value, epoch_size + 1)
    if not (np.all(np.diff(stops, prepend=0) > 0) and (stops[-1] if len(stops) else 0)
            == epoch_size):
        raise ValueError(f"{where} must increase strictly from above 0 to the epoch size "
                         f"{epoch_size}, got {short(stops.tolist())}")
    if position and position not in stops:
        raise ValueError(f"state['current_position'] {position} is not one of the batch ends "
                         f"{where}; a batch sampler's batches start only there")
    return stops


def _is_permutation(order: np.ndarray, size: int) -> bool:
    return len(order) == size and bool(np.all(np.bincount(order, minlength=size) == 1))


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
