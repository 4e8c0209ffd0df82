"""The ledger of an engine's position, computed from its orders, never per batch.

Orders are pure functions of the state, so what a run has consumed is too:
the stream of consumed ids is each epoch's order from its head to its end
(the last full batch for ``'discard'``), one epoch after the other, cut where
the position stands (a rolled-over tail waiting for the next batch is not
consumed yet; pads are not examples). A :class:`LedgerBook` memoises the chain
and the count at each epoch's start, so a ledger costs hashing the epoch in
progress, and a batch costs nothing.

A state carries, beside its :class:`~.ledger.Ledger`, a *base*: the chain and
count at the start of the epoch that holds the last consumed id (or of the
epoch in progress). Loading recomputes the ids from the base on with the
loader's own orders and compares the chain: at most about one epoch is
hashed, however long the run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataset_kit.engine._orders import Orders
from dataset_kit.engine._spec import BatchSpec
from dataset_kit.engine._statemachine import Position
from dataset_kit.engine.ledger import CHAIN_START, Ledger, extend_chain, read_chain
from dataset_kit.engine.samplers import order_identity


class LedgerBook:
    """The chain and count at each epoch's start, memoised, and the ledger of any position.

    Args:
        spec: the engine's batching spec.
        dataset_length: the dataset's length.
        fingerprint: the identity of the dataset's files, or None.
        starts: known ``{epoch: (chain, consumed)}`` at epochs' starts; by
            default epoch 0 starts with nothing consumed.
    """

    def __init__(self, spec: BatchSpec, dataset_length: int, fingerprint: str | None,
                 starts: dict[int, tuple[int, int]] | None = None) -> None:
        self.spec = spec
        self.dataset_length = dataset_length
        self.fingerprint = fingerprint
        self._starts = {0: (CHAIN_START, 0)} if starts is None else dict(starts)
        # Epochs whose start follows an epoch left before its end (start_next_epoch):
        # no later state may put its base before one, since a load recomputes whole
        # epochs from the base on.
        self._cut: set[int] = set()
        # The last ledger computed: a checkpoint every few batches hashes only
        # the batches since.
        self._last: tuple[int, int, int, int] | None = None  # epoch, stop, chain, total

    def copy(self) -> LedgerBook:
        """Return a book with the same memo (a copied engine's)."""
        other = LedgerBook(self.spec, self.dataset_length, self.fingerprint, self._starts)
        other._cut = set(self._cut)
        return other

    def _end(self) -> int:
        """Where each epoch's consumed ids end in its order."""
        spec = self.spec
        if spec.policy.drops_tail and not spec.policy.carries:
            return spec.epoch_size // spec.batch_size * spec.batch_size
        return spec.epoch_size

    def _ids(self, orders: Orders, epoch: int, start: int, stop: int) -> np.ndarray:
        order = orders.order_of(epoch)
        return np.arange(start, stop) if order is None else order[start:stop]

    def _head(self, orders: Orders, epoch: int) -> int:
        return orders.offset_of(epoch)[1]

    def start(self, orders: Orders, epoch: int) -> tuple[int, int]:
        """Return ``(chain, consumed)`` at the start of ``epoch``, memoising it."""
        known = self._starts.get(epoch)
        if known is not None:
            return known
        before = max((e for e in self._starts if e < epoch), default=None)
        if before is None:
            raise RuntimeError(f"no chain is known before epoch {epoch}")
        chain, total = self._starts[before]
        end = self._end()
        for e in range(before, epoch):
            head = self._head(orders, e)
            chain = extend_chain(chain, self._ids(orders, e, head, end))
            total += max(end - head, 0)
            self._starts[e + 1] = (chain, total)
        return chain, total

    def leave(self, orders: Orders, epoch: int, stop: int | None = None) -> None:
        """Note the start of ``epoch + 1`` now, while ``epoch``'s order is still known.

        For an order that cannot be asked again (a stateful sampler's, a
        pinned one), or an epoch left at ``stop`` before its end.
        """
        if stop is None:
            self.start(orders, epoch + 1)
            return
        chain, total = self.start(orders, epoch)
        head = self._head(orders, epoch)
        self._starts[epoch + 1] = (extend_chain(chain, self._ids(orders, epoch, head, stop)),
                                   total + max(stop - head, 0))
        for e in [e for e in self._starts if e > epoch + 1]:
            del self._starts[e]
        self._cut = {e for e in self._cut if e <= epoch} | {epoch + 1}

    def base_of(self, orders: Orders, position: Position) -> int:
        """Return the epoch whose start a state records: the one holding the last consumed id.

        At an epoch's start (nothing of it consumed) it is the epoch before,
        when that epoch's order can be asked again, so a checkpoint at an
        epoch's end still proves an epoch's worth of ids.
        """
        epoch, head = position.epoch, self._head(orders, position.epoch)
        # Nothing is known before the earliest start noted (a loaded state's base),
        # and nothing re-derivable before an epoch whose predecessor was left early.
        earliest = max([min(self._starts), *(e for e in self._cut if e <= epoch)])
        if position.current_position > head or epoch <= earliest:
            return epoch
        total = self.start(orders, epoch)[1] - position.carry
        base = epoch - 1
        while base > earliest and self.start(orders, base)[1] >= total:
            base -= 1
        if position.carry or orders.replayable(base):
            return base
        return epoch

    def ledger(self, orders: Orders, position: Position) -> Ledger:
        """Return the ledger of ``position``: counts, chain and the data's identity."""
        epoch, stop = position.epoch, position.current_position
        if position.carry:
            # The rolled-over tail is not consumed yet: the stream ends before it.
            total = self.start(orders, epoch)[1] - position.carry
            base = self.base_of(orders, position)
            chain, base_total = self.start(orders, base)
            head = self._head(orders, base)
            chain = extend_chain(chain, self._ids(orders, base, head,
                                                  head + total - base_total))
            return Ledger(epoch, 0, total, chain, self.dataset_length, self.fingerprint)
        head = self._head(orders, epoch)
        last = self._last
        if last is not None and last[0] == epoch and last[1] <= stop and epoch in self._starts:
            _, done, chain, total = last
        else:
            (chain, total), done = self.start(orders, epoch), head
        if stop > done:
            chain = extend_chain(chain, self._ids(orders, epoch, done, stop))
            total += stop - done
        self._last = (epoch, max(stop, head), chain, total)
        return Ledger(epoch, max(stop - head, 0), total, chain, self.dataset_length,
                      self.fingerprint)

    def state(self, orders: Orders, position: Position) -> dict:
        """The ledger's state (:meth:`Ledger.to_state`) with the base the load check starts at.

        And ``orders``: the sampler's name, seed and rank
        (:func:`~dataset_kit.engine.samplers.order_identity`), so a load
        names what changed, not only that the ids differ.
        """
        ledger = self.ledger(orders, position)
        base = self.base_of(orders, position)
        chain, total = self.start(orders, base)
        return {**ledger.to_state(), "base": {"epoch": base, "chain": f"{chain:016x}",
                                              "consumed": total},
                "orders": order_identity(orders.sampler)}


def read_base(state: Any, where: str = "state['ledger']['base']") -> tuple[int, int, int]:
    """Return ``(epoch, chain, consumed)`` of a state's ledger base.

    Raises:
        ValueError: naming ``where`` and the field, if it is not a base.
    """
    if not isinstance(state, dict):
        raise ValueError(f"{where} must be a dict, got {type(state).__name__}")
    unknown = sorted(map(str, set(state) - {"epoch", "chain", "consumed"}))
    if unknown:
        raise ValueError(f"{where} has unknown keys {unknown}")
    values = []
    for key in ("epoch", "consumed"):
        value = state.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{where}[{key!r}] must be an integer >= 0, got {value!r}")
        values.append(value)
    chain_value = read_chain(state.get("chain"), f"{where}['chain']")
    return values[0], chain_value, values[1]
