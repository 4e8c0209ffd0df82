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
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit.engine import _engine_state, _moves, _window
from dataset_kit.engine._epoch import EpochIterator
from dataset_kit.engine._executor_spec import ExecutorSpec, make_executor
from dataset_kit.engine._executors import Executor, SerialExecutor
from dataset_kit.engine._fetch import fetch_batch
from dataset_kit.engine._orders import Orders
from dataset_kit.engine._run import PlainRun, plain_run
from dataset_kit.engine._spec import BatchSpec
from dataset_kit.engine._statemachine import BatchPlan, Position
from dataset_kit.engine._window import EngineStatistics
from dataset_kit.engine.protocols import BatchStops
from dataset_kit.engine.samplers import ShuffleOrderSampler, draw_seed

# The NamedTuples' own constructors are Python functions; a plain batch builds
# its plan and position directly (equal objects, for a fraction of the cost).
_new = tuple.__new__


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
        hold_between_epochs: prefetch no batch of an epoch before the caller
            asks for one (Gluon's ``auto_reload=False``); by default a
            prefetching executor works on across epoch ends.

    Raises:
        TypeError: if ``batch_size`` or ``seed`` is not an integer, or
            ``order_sampler`` is not callable.
        ValueError: if ``batch_size`` is not positive, ``seed`` is negative,
            both ``shuffle`` and ``order_sampler`` are given, or ``last_batch``
            is unknown or gives empty epochs that the caller cannot take.
    """

    def __init__(self, dataset: Any, *, batch_size: int | None, repeat: bool = True,
                 shuffle: bool | None = None, order_sampler: Any = None,
                 seed: int | None = None, last_batch: str | None = None,
                 executor: Executor | ExecutorSpec | None = None,
                 hold_between_epochs: bool = False) -> None:
        if batch_size is not None or not isinstance(order_sampler, BatchStops):
            positive_int("batch_size", batch_size)
        if shuffle is not None and order_sampler is not None:
            raise ValueError(
                f"pass either shuffle or order_sampler, not both (got shuffle={shuffle!r} "
                f"and order_sampler={order_sampler!r})"
            )
        if order_sampler is not None and not callable(order_sampler):
            raise TypeError(f"order_sampler must be callable, got {type(order_sampler).__name__}")
        self._seed = draw_seed() if seed is None else non_negative_int("seed", seed)
        if order_sampler is None and (shuffle is None or shuffle):
            order_sampler = ShuffleOrderSampler(self._seed)
        self._dataset = dataset
        self._order_sampler = order_sampler
        self._dataset_length = len(dataset)
        self._orders = Orders(order_sampler, self._dataset_length)
        if batch_size is None:
            # Checked above: without a batch size the sampler gives batch stops.
            assert self._orders.stops_of is not None
            sizes = np.diff(self._orders.stops_of(0), prepend=0)
            batch_size = int(sizes.max()) if len(sizes) else 1
        self._spec = BatchSpec(batch_size, self._orders.epoch_size, bool(repeat), last_batch)
        if isinstance(executor, ExecutorSpec):
            executor = make_executor(executor, dataset)
        # Our own serial executor builds a batch with fetch_batch and nothing
        # else, so a plain batch can be fetched without its submit/collect.
        self._fetches_itself = executor is None
        self._executor = SerialExecutor(dataset) if executor is None else executor
        self._hold = bool(hold_between_epochs)
        # The position, planned position and last plan as of the last batch
        # not taken from a run; see _settle() and the properties below.
        self._settled_position = self._settled_planned = Position()
        self._settled_plan: BatchPlan | None = None
        self._pending: deque = deque()  # (position after, plan, handle), in plan order
        self._deferred: BaseException | None = None
        self._most_in_flight = 0
        # The plain batches ahead of the position (see _run), for an executor
        # that builds each batch when asked; None while there are none.
        self._run: PlainRun | None = None

    # -- what doors read ---------------------------------------------------------

    @property
    def dataset(self) -> Any:
        """The dataset batches are built from."""
        return self._dataset

    @property
    def dataset_length(self) -> int:
        """``len(dataset)``, taken once at construction."""
        return self._dataset_length

    @property
    def seed(self) -> int:
        """The seed of the shuffle and of :func:`~dataset_kit.example_rng` (kept in states)."""
        return self._seed

    @property
    def order_sampler(self) -> Any:
        """The order sampler (the engine's own copy after a state was loaded), or None."""
        return self._order_sampler

    @property
    def spec(self) -> BatchSpec:
        """The batching spec: batch size, epoch size, repeat and last-batch policy."""
        return self._spec

    @property
    def batch_size(self) -> int:
        """Examples per batch (the largest of a sampler's own batches)."""
        return self._spec.batch_size

    @property
    def epoch_size(self) -> int:
        """Examples per epoch."""
        return self._spec.epoch_size

    @property
    def position(self) -> Position:
        """Where the caller is: the state after the last batch handed out (immutable)."""
        return self._position

    @property
    def last_plan(self) -> BatchPlan | None:
        """The plan of the last batch handed out (its indices, epochs and pad), or None."""
        return self._last_plan

    def batches_in_epoch(self) -> int:
        """Return how many batches the current epoch gives, rolled-over examples included."""
        return self._spec.batches_per_epoch(self._position.carry)

    def epoch(self) -> EpochIterator:
        """Return an iterator over the batches of one epoch: the one in progress, or the next one.

        It ends after the batch that ends the epoch, or when a non-repeating
        engine has no batch left. An epoch without a batch (an empty
        dataset, or ``'discard'``/``'rollover'`` with batches larger than
        the epoch) yields nothing and is consumed. This is the loop every
        door that gives one epoch per ``iter()`` uses; a batch whose building
        raised is not consumed, and the iterator can be asked again.

        Raises:
            RuntimeError: (on ``next``) if the executor was closed or has failed.
            Exception: (on ``next``) whatever building a batch raised.
        """
        return EpochIterator(self)

    # -- batches ---------------------------------------------------------------

    def next(self) -> Any:
        """Return the next batch, stepping over epochs that have none.

        Raises:
            StopIteration: when a non-repeating engine has finished its epoch.
            ValueError: if no epoch has a batch (``'discard'`` with batches
                larger than the epochs, repeating): there is no next batch.
            RuntimeError: if the executor was closed or has failed.
            Exception: whatever building the batch raised; the batch was not
                consumed, so the next call asks for it again.
        """
        run = self._run
        if run is not None and run.taken < run.count:
            # A plain batch (see _run): what advance() would plan, cut from the
            # order directly. Inline, as it is most batches of most epochs.
            k, epoch, bounds, base = run.taken, run.epoch, run.bounds, run.base
            start, stop = bounds[k], bounds[k + 1]
            plan = _new(BatchPlan, (run.indices[start - base:stop - base], epoch, 0))
            if not run.recomputable:
                self._orders.note_start(epoch, start)  # as _window.fill notes it (stateful sampler)
            if run.fetches:
                batch = fetch_batch(self._dataset, plan, self._seed, True)
            else:
                executor = self._executor
                executor.ensure_open()
                batch = executor.collect(executor.submit(plan, self._seed))
            # Consumed only once built: a batch whose building raised is asked again.
            # The position and plan it leaves are derived when asked (_settle).
            run.taken = k + 1
            return batch
        spec = self._spec
        if spec.repeat and spec.epoch_size and not spec.yields_batches:
            raise ValueError(
                f"last_batch={spec.last_batch!r} with batch_size={spec.batch_size} larger than "
                f"the epoch ({spec.epoch_size} examples): every epoch is empty, so there is "
                f"no next batch")
        if self._deferred is not None:
            error, self._deferred = self._deferred, None
            raise error
        self._executor.ensure_open()
        while True:
            try:
                _window.fill(self)
            except BaseException:
                _window.discard(self)
                raise
            if not self._pending:
                raise StopIteration
            position, plan, handle = self._pending.popleft()
            if handle is not None:
                break
            self._consume(position, plan)  # an epoch without a batch
        try:
            batch = self._executor.collect(handle)
        except BaseException:
            # Not consumed: drop what was planned after it, so the next call
            # asks for the same batch again.
            _window.discard(self)
            raise
        self._consume(position, plan)
        if self._executor.prefetches:
            if not (self._hold and position.is_new_epoch):
                try:
                    _window.fill(self)
                except BaseException as error:
                    # The batch in hand is consumed already: deliver it, and
                    # report the failure on the next call.
                    _window.discard(self)
                    self._deferred = error
        elif self._executor.depth == 1:
            # Each batch is built when asked: the plain batches ahead need no planning.
            self._run = plain_run(self._position, self._orders, self._spec,
                                 self._fetches_itself)
        return batch

    # -- the position, kept lazily while a run is taken ---------------------------

    def _settle(self) -> None:
        """Record the position and plan the last batch taken from the run left.

        A plain batch only counts itself in its run (``taken``); its position
        and plan are what advance() would have returned, built here when
        something reads them, and only for the last one.
        """
        run = self._run
        if run is None or run.settled == run.taken:
            return
        # Inline, not a method of the run: a loop that reads the position after
        # every batch (Chainer's ``while it.epoch < n``) settles every batch.
        k, epoch, base = run.taken - 1, run.epoch, run.base
        start, stop = run.bounds[k], run.bounds[k + 1]
        self._settled_position = self._settled_planned = _new(
            Position, (epoch, stop, False, epoch + start / run.epoch_size, 0))
        self._settled_plan = _new(BatchPlan, (run.indices[start - base:stop - base], epoch, 0))
        run.settled = run.taken

    def _drop_run(self) -> None:
        self._settle()
        self._run = None

    @property
    def _position(self) -> Position:
        self._settle()
        return self._settled_position

    @_position.setter
    def _position(self, position: Position) -> None:
        self._drop_run()
        self._settled_position = position

    @property
    def _planned(self) -> Position:
        self._settle()
        return self._settled_planned

    @_planned.setter
    def _planned(self, position: Position) -> None:
        self._drop_run()
        self._settled_planned = position

    @property
    def _last_plan(self) -> BatchPlan | None:
        self._settle()
        return self._settled_plan

    @_last_plan.setter
    def _last_plan(self, plan: BatchPlan | None) -> None:
        self._drop_run()
        self._settled_plan = plan

    def skip_empty_epoch(self) -> bool:
        """Consume the epoch about to start if it has no batch; return whether it did."""
        return _moves.skip_empty_epoch(self)

    def _consume(self, position: Position, plan: BatchPlan) -> None:
        self._drop_run()
        if position.epoch != self._position.epoch:
            # Keep the orders a rolled-over batch still takes examples from.
            reach = -(-position.carry // self._spec.epoch_size) if position.carry else 1
            self._orders.forget_before(position.epoch - reach + 1)
        self._position = position
        self._last_plan = plan

    # -- the prefetch window (see _window) ----------------------------------------

    def prefetch(self) -> None:
        """Start building the next batches now, before the first ``next()``.

        Raises:
            RuntimeError: if the executor was closed or has failed.
        """
        _window.prefetch(self)

    @property
    def depth(self) -> int:
        """Batches the executor may have in flight."""
        return self._executor.depth

    def statistics(self) -> EngineStatistics:
        """Return what is in flight now, and the most that ever was."""
        return _window.statistics(self)

    # -- copies ----------------------------------------------------------------

    def __getstate__(self) -> dict:
        # A copy starts from the consumed position: batches in flight (and
        # the threads or processes building them) belong to the original.
        self._settle()
        state = self.__dict__.copy()
        state.update(_pending=deque(), _settled_planned=self._settled_position, _deferred=None,
                     _run=None)
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
        n = self._spec.epoch_size
        return float(self._position.epoch) if n == 0 else \
            self._position.epoch + self._position.current_position / n

    def current_order(self, epoch: int | None = None) -> np.ndarray | None:
        """Return the order of the current epoch, or of ``epoch`` (see :mod:`._moves`)."""
        return _moves.current_order(self, epoch)

    def order_offset(self, epoch: int | None = None) -> int:
        """Return where in its sampler's order the current epoch (or ``epoch``) began."""
        return _moves.order_offset(self, epoch)

    def order_head(self, epoch: int | None = None) -> int:
        """Return the position where the current epoch (or ``epoch``) began."""
        return _moves.order_head(self, epoch)

    def pin_current_order(self, order: Any) -> None:
        """Use ``order`` for the rest of the current epoch (a Chainer snapshot's order)."""
        _moves.pin_current_order(self, order)

    def start_next_epoch(self, keep_rollover: bool = True) -> None:
        """Leave the epoch in progress: the next batch opens the next epoch."""
        _moves.start_next_epoch(self, keep_rollover)

    def reset(self) -> None:
        """Start over from the first batch of epoch 0 (reopening a closed executor)."""
        _moves.reset(self)

    def close(self) -> None:
        """Release the executor's threads, processes and memory. Idempotent."""
        _window.discard(self)
        self._executor.close()

    # -- checkpoints -----------------------------------------------------------

    def state_dict(self) -> dict:
        """Return the engine's state: a small JSON-ready dict (see :mod:`._engine_state`)."""
        return _engine_state.state_dict(self)

    def load_state_dict(self, state: dict) -> None:
        """Restore a state from :meth:`state_dict` of any engine over the same data."""
        _engine_state.load_state_dict(self, state)
