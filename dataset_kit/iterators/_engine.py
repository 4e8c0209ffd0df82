"""The engine: plans batches with the pure state machine and has an executor build them.

Every iterator and every front door is a vocabulary over one :class:`Engine`.
The engine owns the order (samplers, seeds), the batching spec, the
position, the batches in flight and the checkpoint; an executor (serial,
threads, processes) only decides where a planned batch is built.

It keeps two positions: ``position``, what the caller has consumed (the only
thing a checkpoint records), and ``_planned``, how far batches have been
planned ahead (equal for a serial executor, ahead of it for prefetching ones).
Prefetched batches are never consumed by a checkpoint: after a load they are
discarded and planned again.
"""

from __future__ import annotations

import copy
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit.iterators import _checkpoint
from dataset_kit.iterators._executor_spec import ExecutorSpec, make_executor
from dataset_kit.iterators._executors import Executor, SerialExecutor
from dataset_kit.iterators._orders import Orders
from dataset_kit.iterators._spec import BatchSpec
from dataset_kit.iterators._statemachine import BatchPlan, Position
from dataset_kit.iterators.order_samplers import ShuffleOrderSampler, draw_seed


@dataclass(frozen=True)
class EngineStatistics:
    """What an engine has in flight, for monitoring and tests.

    Attributes:
        depth: batches the executor may have in flight at once.
        in_flight: batches submitted to the executor and not yet delivered.
        most_in_flight: the largest ``in_flight`` seen since the engine was made.
    """

    depth: int
    in_flight: int
    most_in_flight: int


class Engine:
    """Batches of a dataset, in an order owned here, built by an executor.

    Args:
        dataset: any sized, indexable dataset.
        batch_size: examples per batch; None when the order sampler gives its
            own batches (``batch_stops()``), whose largest is then the batch size.
        repeat: whether to loop over the dataset forever.
        shuffle: whether to shuffle; None means True unless ``order_sampler``
            is given.
        order_sampler: a Chainer-style order sampler.
        seed: seeds the shuffle (when no sampler is given) and
            :func:`~dataset_kit.example_rng`; drawn from the OS when None and
            kept in the checkpoint.
        last_batch: how each epoch ends: None (Chainer's), ``'keep'``,
            ``'discard'``, ``'rollover'`` or ``'pad'``.
        executor: where batches are built: an :class:`ExecutorSpec` (built
            with :func:`make_executor`), an executor, or None for a
            :class:`SerialExecutor`.

    Raises:
        TypeError: if ``batch_size`` or ``seed`` is not an integer, or
            ``order_sampler`` is not callable.
        ValueError: if ``batch_size`` is not positive, ``seed`` is negative,
            both ``shuffle`` and ``order_sampler`` are given, or ``last_batch``
            is unknown or cannot be honoured.
    """

    def __init__(self, dataset: Any, *, batch_size: int | None, repeat: bool = True,
                 shuffle: bool | None = None, order_sampler: Any = None,
                 seed: int | None = None, last_batch: str | None = None,
                 executor: Executor | ExecutorSpec | None = None) -> None:
        if batch_size is not None or not callable(getattr(order_sampler, "batch_stops", None)):
            positive_int("batch_size", batch_size)
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
        self.order_sampler = order_sampler
        self.dataset_length = len(dataset)
        self._orders = Orders(order_sampler, self.dataset_length)
        if batch_size is None:
            sizes = np.diff(self._orders.stops_of(0), prepend=0)
            batch_size = int(sizes.max()) if len(sizes) else 1
        self.spec = BatchSpec(batch_size, self._orders.epoch_size, bool(repeat), last_batch)
        if isinstance(executor, ExecutorSpec):
            executor = make_executor(executor, dataset)
        self._executor = SerialExecutor(dataset) if executor is None else executor
        self.position = Position()
        self._planned = Position()
        self._pending: deque = deque()  # (position after, plan, handle), in plan order
        self._deferred: BaseException | None = None
        self.last_plan: BatchPlan | None = None
        self._most_in_flight = 0

    # -- batches ---------------------------------------------------------------

    def next(self) -> Any:
        """Return the next batch.

        Raises:
            StopIteration: when a non-repeating engine has finished its epoch.
            RuntimeError: if the executor was closed or has failed.
            Exception: whatever building the batch raised; the batch was not
                consumed, so the next call asks for it again.
        """
        if self._deferred is not None:
            error, self._deferred = self._deferred, None
            raise error
        self._executor.ensure_open()
        try:
            self._fill()
        except BaseException:
            self._discard_planned()
            raise
        if not self._pending:
            raise StopIteration
        position, plan, handle = self._pending.popleft()
        try:
            batch = self._executor.collect(handle)
        except BaseException:
            # Not consumed: drop what was planned after it, so the next call
            # asks for the same batch again.
            self._discard_planned()
            raise
        if position.epoch != self.position.epoch:
            self._orders.forget_before(position.epoch)
        self.position = position
        self.last_plan = plan
        if self._executor.prefetches:
            try:
                self._fill()
            except BaseException as error:
                # The batch in hand is consumed already: deliver it, and
                # report the failure on the next call.
                self._discard_planned()
                self._deferred = error
        return batch

    def _fill(self) -> None:
        executor, pending, orders = self._executor, self._pending, self._orders
        while len(pending) < executor.depth:
            planned = self._planned
            if not orders.recomputable:
                orders.note_start(planned.epoch, planned.current_position)
            step = self.spec.advance(planned, orders.order_of, orders.stops_of)
            if step is None:
                return
            position, plan = step
            self._planned = position
            pending.append((position, plan, executor.submit(plan, self.seed)))
            self._most_in_flight = max(self._most_in_flight, len(pending))

    def _discard_planned(self) -> None:
        handles = [handle for _, _, handle in self._pending]
        self._pending.clear()
        if handles:
            self._executor.cancel(handles)
        self._planned = self.position

    @property
    def depth(self) -> int:
        """Batches the executor may have in flight."""
        return self._executor.depth

    def statistics(self) -> EngineStatistics:
        """Return what is in flight now, and the most that ever was."""
        return EngineStatistics(self._executor.depth, len(self._pending), self._most_in_flight)

    # -- copies ----------------------------------------------------------------

    def __getstate__(self) -> dict:
        # A copy starts from the consumed position: batches in flight (and
        # the threads or processes building them) belong to the original.
        state = self.__dict__.copy()
        state.update(_pending=deque(), _planned=self.position, _deferred=None)
        return state

    def __copy__(self) -> Engine:
        other = Engine.__new__(Engine)
        other.__dict__.update(self.__getstate__())
        other._orders = copy.copy(self._orders)
        other._executor = copy.copy(self._executor)
        return other

    # -- epochs ----------------------------------------------------------------

    @property
    def epoch_detail(self) -> float:
        """Epochs consumed, as a float: ``epoch + current_position / epoch_size``."""
        n = self.spec.epoch_size
        return float(self.position.epoch) if n == 0 else \
            self.position.epoch + self.position.current_position / n

    def current_order(self) -> np.ndarray | None:
        """Return the order of the current epoch (None: identity, or an empty dataset)."""
        return self._orders.order_of(self.position.epoch) if self.spec.epoch_size else None

    def pin_current_order(self, order: Any) -> None:
        """Use ``order`` for the rest of the current epoch (a Chainer snapshot's order).

        Later epochs' orders are asked of the sampler again.

        Raises:
            ValueError: if the iterator has no order sampler, or ``order`` does
                not fit its epochs.
        """
        if self.order_sampler is None:
            raise ValueError("this iterator visits examples in order; it has no order to pin")
        self._discard_planned()
        self._orders.pin(self.position.epoch, order)
        # Orders planned ahead for later epochs came from the replaced one.
        self._orders.forget_after(self.position.epoch)

    def start_next_epoch(self, keep_rollover: bool = True) -> None:
        """Leave the epoch in progress: the next batch opens the next epoch.

        Mid-epoch, the rest of the epoch is skipped. At an epoch boundary
        nothing changes, except that ``keep_rollover=False`` drops examples
        waiting to roll over into the next epoch.
        """
        p = self.position
        # At a boundary the last batch ended an epoch (a crossing batch may have
        # begun the next one already), or nothing was consumed yet.
        if p.is_new_epoch or p.previous_epoch_detail is None:
            if keep_rollover or not p.carry:
                return
            next_position = p._replace(carry=0)
        else:
            next_position = Position(p.epoch + 1, 0, True, self.epoch_detail, 0)
        self._discard_planned()
        self.position = self._planned = next_position

    def reset(self) -> None:
        """Start over from the first batch of epoch 0 (reopening a closed executor).

        A seeded shuffle replays the same orders; a stateful order sampler is
        asked for a new epoch-0 order, as in Chainer.
        """
        self._discard_planned()
        self._deferred = None
        self._orders.clear()
        self.position = self._planned = Position()
        self.last_plan = None
        self._executor.reopen()

    def close(self) -> None:
        """Release the executor's threads, processes and memory. Idempotent."""
        self._discard_planned()
        self._executor.close()

    # -- checkpoints -----------------------------------------------------------

    def state_dict(self) -> dict:
        """Return the state: a small JSON-ready dict (see :mod:`._checkpoint`).

        It counts only the batches already handed to the caller, and does not
        grow with the dataset unless a stateful order sampler forces it to
        carry the current epoch's order.
        """
        p = self.position
        sampler = self._orders.state_dict(p.epoch, with_previous=p.carry > 0)
        return _checkpoint.make_state(self.spec, self.dataset_length, p, self.seed, sampler)

    def load_state_dict(self, state: dict) -> None:
        """Restore a state from :meth:`state_dict` of any engine over the same data.

        The engine then yields exactly the batches the saved one would have
        yielded next. States of dataset_kit 0.1 (format version 1) load too.

        Raises:
            ValueError: if the state is not an iterator state, has an unknown
                format version, or was saved for another dataset length,
                batching spec or order sampler.
        """
        state = _checkpoint.read_state(state, self.spec, self.dataset_length, self._orders.kind)
        position = _checkpoint.position_of(state)
        seed = non_negative_int("state['seed']", state.get("seed"))
        self._discard_planned()
        self._deferred = None
        self._orders.load_state_dict(state["order_sampler"], position.epoch)
        self.seed = seed
        self.position = self._planned = position
