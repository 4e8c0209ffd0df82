"""The engine: plans batches with the pure state machine and has an executor build them.

Every iterator and every front door is a vocabulary over one :class:`Engine`.
The engine owns the order (samplers, seeds), the batching spec, the
position, the batches in flight and the checkpoint; an executor (serial,
threads, processes) only decides where a planned batch is built.

It keeps two positions: ``position``, what the caller has consumed (the only
thing a checkpoint records), and how far batches have been planned ahead,
which its :class:`~._window.PrefetchWindow` owns (equal for a serial
executor, ahead of it for prefetching ones). Prefetched batches are never
consumed by a checkpoint: after a load, a seek or a move they are discarded
and planned again.

The parts that own state of their own are classes of their own, each tested
alone: :class:`~._orders.Orders` (the order of each epoch),
:class:`~._window.PrefetchWindow` (the batches in flight),
:class:`~._run.PlainRun` (the plain batches ahead, cut straight from the
order), :class:`~._epoch.EpochIterator` (one epoch's batches). The state
format is :mod:`._checkpoint`'s.
"""

from __future__ import annotations

import copy
import dataclasses
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit._identity import identity_digest
from dataset_kit._resume_errors import MIXTURE_FINGERPRINT
from dataset_kit.engine import _checkpoint
from dataset_kit.engine._epoch import EpochIterator
from dataset_kit.engine._executor_spec import ExecutorSpec, make_executor
from dataset_kit.engine._executors import Executor, Resizable, SerialExecutor
from dataset_kit.engine._fetch import fetch_batch
from dataset_kit.engine._ledger_book import LedgerBook, read_base
from dataset_kit.engine._orders import Orders
from dataset_kit.engine._run import PlainRun, plain_run
from dataset_kit.engine._spec import BatchSpec
from dataset_kit.engine._statemachine import BatchPlan, LastBatch, Position, last_batch_policy
from dataset_kit.engine._stats import (
    Counters,
    EngineStatistics,
    children_rss,
    note_decision,
    shm_blocks_in_use,
)
from dataset_kit.engine._window import PrefetchWindow
from dataset_kit.engine.autotune import AutoWorkers
from dataset_kit.engine.errors import ResumeMismatchError, ResumeMismatchWarning
from dataset_kit.engine.ledger import Ledger
from dataset_kit.engine.protocols import BatchStops
from dataset_kit.engine.samplers import (
    ShuffleOrderSampler,
    check_order_identity,
    draw_seed,
    order_identity,
)

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
            ``'discard'``, ``'rollover'`` or ``'pad'``, or that policy's
            :class:`LastBatch` (a door's table translates its own words).
        executor: where batches are built: an :class:`ExecutorSpec` (built
            with :func:`make_executor`), an executor, or None for a
            :class:`SerialExecutor`.
        hold_between_epochs: prefetch no batch of an epoch before the caller
            asks for one (Gluon's ``auto_reload=False``); by default a
            prefetching executor works on across epoch ends.
        identity: the object whose ``fingerprint`` names the data in the
            ledger, when ``dataset`` wraps it (a door's fetching wrapper);
            None: the dataset itself.

    Raises:
        TypeError: if ``batch_size`` or ``seed`` is not an integer, or
            ``order_sampler`` is not callable.
        ValueError: if ``batch_size`` is not positive, ``seed`` is negative,
            both ``shuffle`` and ``order_sampler`` are given, or ``last_batch``
            is unknown or gives empty epochs that the caller cannot take.
    """

    def __init__(self, dataset: Any, *, batch_size: int | None, repeat: bool = True,
                 shuffle: bool | None = None, order_sampler: Any = None,
                 seed: int | None = None, last_batch: str | LastBatch | None = None,
                 executor: Executor | ExecutorSpec | None = None,
                 hold_between_epochs: bool = False, identity: Any = None,
                 autotune: AutoWorkers | None = None) -> None:
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
        self._spec = BatchSpec(batch_size, self._orders.epoch_size, bool(repeat),
                               last_batch_policy(last_batch).name)
        if autotune is not None and not (isinstance(executor, ExecutorSpec)
                                         and executor.kind != "serial"):
            raise ValueError(f"autotune needs a thread or process ExecutorSpec as executor, "
                             f"got {executor!r}")
        self._autotune = autotune
        self._executor_spec = executor if isinstance(executor, ExecutorSpec) else None
        # (time, total wait, batches) where the controller's next period began,
        # and the batches handed out when it decides next.
        self._tune_mark = (time.perf_counter(), 0.0, 0)
        self._tune_at = 0 if autotune is None else autotune.next_period
        if isinstance(executor, ExecutorSpec):
            executor = make_executor(executor, dataset)
        # Our own serial executor builds a batch with fetch_batch and nothing
        # else, so a plain batch can be fetched without its submit/collect.
        self._fetches_itself = executor is None
        self._executor = SerialExecutor(dataset) if executor is None else executor
        self._window = PrefetchWindow(self._executor, self._spec, bool(hold_between_epochs))
        self._position = Position()  # what the caller consumed
        self._last_plan: BatchPlan | None = None
        # A failure of prefetching after a batch was handed out: raised on the next call.
        self._deferred: BaseException | None = None
        # The plain batches ahead of the position (see _run), for an executor
        # that builds each batch when asked; None while there are none. While
        # there is a run the window is empty and plans from the position.
        self._run: PlainRun | None = None
        self._fingerprint = dataset_fingerprint(dataset if identity is None else identity)
        self._book = LedgerBook(self._spec, self._dataset_length, self._fingerprint)
        self._counters = Counters()

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
        """The order sampler given, or None (loads never change it: see active_sampler)."""
        return self._order_sampler

    @property
    def active_sampler(self) -> Any:
        """The sampler the orders come from: the one given, or, once a state was loaded,
        the engine's copy holding the loaded state (what a door saves), or None."""
        return self._orders.sampler

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
        start = time.perf_counter()
        batch = self._next_batch()
        plan = self._last_plan
        counters = self._counters
        counters.record(self, start, 0 if plan is None else len(plan.indices))
        if self._autotune is not None:
            if counters.batches == 1:
                # Starting the workers is a wait no worker count removes: the
                # first period is measured from the first batch on.
                self._tune_mark = (time.perf_counter(), counters.wait, 1)
            elif counters.batches >= self._tune_at:
                self._retune()
        return batch

    def _retune(self) -> None:
        """Ask the controller for the number of workers; resize the executor if it changed."""
        spec, autotune = self._executor_spec, self._autotune
        assert spec is not None and autotune is not None  # checked in __init__
        now, wait, batches = time.perf_counter(), self._counters.wait, self._counters.batches
        since, waited, counted = self._tune_mark
        self._tune_mark = (now, wait, batches)
        rss = sum(children_rss().values()) if spec.kind == "process" else 0
        decision = autotune.decide(batches, spec.workers,
                                   (wait - waited) / max(now - since, 1e-9), rss,
                                   (wait - waited) / max(batches - counted, 1))
        self._tune_at = batches + autotune.next_period
        note_decision(self, decision)
        if decision.new_workers == spec.workers:
            return
        self._executor_spec = spec = dataclasses.replace(spec, workers=decision.new_workers)
        executor = self._executor
        if not isinstance(executor, Resizable):
            # (Ray's actors) Drop the batches in flight and plan them again on
            # a new executor: the same plans, so the same batches.
            self._discard()
            executor.close()
            self._executor = make_executor(spec, self._dataset)
            self._window = self._window.copy_for(self._executor, self._position)
            return
        # In place: the batches in flight stay, the window's depth follows the
        # workers, and a new worker gets the next plans at once. The batch in
        # hand is consumed already: a failure is raised on the next call.
        try:
            executor.resize(decision.new_workers)
            if not self._window.holds_at(self._position):
                self._fill()
        except BaseException as error:
            self._deferred = error

    def _next_batch(self) -> Any:
        run = self._run
        if run is not None and run.taken < run.count:
            # A plain batch (see _run): what advance() would plan, cut from the
            # order directly. Inline, as it is most batches of most epochs.
            k, epoch, bounds, base = run.taken, run.epoch, run.bounds, run.base
            start, stop = bounds[k], bounds[k + 1]
            plan = _new(BatchPlan, (run.indices[start - base:stop - base], epoch, 0))
            if not run.recomputable:
                self._orders.note_start(epoch, start)  # as the window notes it (stateful sampler)
            if run.fetches:
                batch = fetch_batch(self._dataset, plan, self._seed, True)
            else:
                executor = self._executor
                executor.ensure_open()
                batch = executor.collect(executor.submit(plan, self._seed))
            # Consumed only once built: a batch whose building raised is asked again.
            run.taken = k + 1
            self._position = _new(Position, (epoch, stop, False, epoch + start / run.epoch_size, 0))
            self._last_plan = plan
            return batch
        spec = self._spec
        if spec.repeat and spec.epoch_size and not spec.yields_batches:
            raise ValueError(
                f"last_batch={spec.last_batch!r} with batch_size={spec.batch_size} larger than "
                f"the epoch ({spec.epoch_size} examples): every epoch is empty, so there is "
                f"no next batch")
        self._raise_deferred()
        self._executor.ensure_open()
        if run is not None:
            self._discard()  # the run is used up: plan from the position again
        window = self._window
        while True:
            self._fill()
            if not len(window):
                raise StopIteration
            position, plan, handle = window.pop()
            if handle is not None:
                break
            self._consume(position, plan)  # an epoch without a batch
        try:
            batch = self._executor.collect(handle)
        except BaseException:
            # Not consumed: drop what was planned after it, so the next call
            # asks for the same batch again.
            self._discard()
            raise
        self._consume(position, plan)
        if self._executor.prefetches:
            if not self._window.holds_at(position):
                try:
                    self._fill()
                except BaseException as error:
                    # The batch in hand is consumed already: deliver it, and
                    # report the failure on the next call.
                    self._deferred = error
        elif self._executor.depth == 1:
            # Each batch is built when asked: the plain batches ahead need no planning.
            self._run = plain_run(position, self._orders, spec, self._fetches_itself)
        return batch

    def _fill(self) -> None:
        """Fill the prefetch window; if that raises, discard it (and re-raise)."""
        try:
            self._window.fill(self._position, self._orders, self._seed)
        except BaseException:
            self._discard()
            raise

    def _discard(self) -> None:
        """Drop the run and the window: the next batch is planned from the position."""
        self._run = None
        self._window.discard(self._position)

    def _raise_deferred(self) -> None:
        if self._deferred is not None:
            error, self._deferred = self._deferred, None
            raise error

    def _consume(self, position: Position, plan: BatchPlan) -> None:
        if position.epoch != self._position.epoch:
            # Once per epoch: an order that cannot be asked again is hashed
            # into the ledger before it is forgotten (a seeded one never is).
            for epoch in range(self._position.epoch, position.epoch):
                if not self._orders.replayable(epoch):
                    self._book.leave(self._orders, epoch)
            # Keep the orders a rolled-over batch still takes examples from.
            reach = -(-position.carry // self._spec.epoch_size) if position.carry else 1
            self._orders.forget_before(position.epoch - reach + 1)
        self._position = position
        self._last_plan = plan

    def skip_empty_epoch(self) -> bool:
        """Consume the epoch about to start if it has no batch; return whether it did.

        For doors that give one epoch per ``iter()`` (Gluon's DataLoader,
        MXNet's NDArrayIter): with ``'discard'`` or ``'rollover'`` and batches
        larger than the epoch, such an epoch yields nothing, and (for
        ``'rollover'``) its examples open a later batch.

        Raises:
            RuntimeError: if the executor was closed or has failed.
        """
        p, spec = self._position, self._spec
        if not (spec.repeat and spec.epoch_size and p.current_position == 0
                and spec.policy.may_yield_empty_epochs
                and spec.batches_per_epoch(p.carry) == 0):
            return False
        self._raise_deferred()
        self._executor.ensure_open()
        if self._run is not None:
            self._discard()
        if not len(self._window):
            self._fill()
        position, plan, handle = self._window.pop()
        assert handle is None, "the step after an empty epoch's start is its empty step"
        self._consume(position, plan)
        return True

    # -- the prefetch window ------------------------------------------------------

    def prefetch(self) -> None:
        """Start building the next batches now, before the first ``next()``.

        Raises:
            RuntimeError: if the executor was closed or has failed.
        """
        self._executor.ensure_open()
        if self._executor.prefetches:
            self._fill()

    @property
    def depth(self) -> int:
        """Batches the executor may have in flight."""
        return self._executor.depth

    def statistics(self) -> EngineStatistics:
        """Return the counters: batches, examples, wait of ``next()``, batches in flight."""
        c = self._counters
        shm = shm_blocks_in_use() if self._executor.prefetches else None
        return dataclasses.replace(self._window.statistics(), batches=c.batches,
                                   examples=c.examples, wait_seconds=c.wait, shm_blocks=shm)

    def add_statistics_hook(self, callback: Callable[[EngineStatistics], Any], *,
                            every: int) -> Callable[[], None]:
        """Call ``callback(statistics())`` after every ``every``-th batch handed out.

        Args:
            callback: takes an :class:`EngineStatistics` (a logger's call).
            every: how many batches between calls.

        Returns:
            A function that removes the hook.

        Raises:
            TypeError: if ``callback`` is not callable or ``every`` is not an integer.
            ValueError: if ``every`` is not positive.
        """
        return self._counters.add_hook(callback, every)

    # -- copies ----------------------------------------------------------------

    def __getstate__(self) -> dict:
        # A copy starts from the consumed position: batches in flight (and
        # the threads or processes building them) belong to the original.
        state = self.__dict__.copy()
        state.update(_window=self._window.copy_for(self._executor, self._position),
                     _deferred=None, _run=None, _counters=Counters())
        return state

    def __copy__(self) -> Engine:
        other = Engine.__new__(Engine)
        other.__dict__.update(self.__getstate__())
        other._orders = copy.copy(self._orders)
        other._book = self._book.copy()
        other._executor = copy.copy(self._executor)
        other._window = self._window.copy_for(other._executor, self._position)
        return other

    # -- epochs and their orders ------------------------------------------------

    @property
    def epoch_detail(self) -> float:
        """Epochs consumed, as a float: ``epoch + current_position / epoch_size``."""
        n = self._spec.epoch_size
        return float(self._position.epoch) if n == 0 else \
            self._position.epoch + self._position.current_position / n

    def current_order(self, epoch: int | None = None) -> np.ndarray | None:
        """Return the order of the current epoch, or of ``epoch`` (None: identity, or an
        empty dataset)."""
        epoch = self._position.epoch if epoch is None else epoch
        return self._orders.order_of(epoch) if self._spec.epoch_size else None

    def order_offset(self, epoch: int | None = None) -> int:
        """Return where in its sampler's order the current epoch (or ``epoch``) began.

        0 unless a state or :meth:`seek` began it at an offset (resuming at
        global position ``k`` of an order that other ranks share); the epoch
        then starts at :meth:`order_head`.
        """
        return self._orders.offset_of(self._position.epoch if epoch is None else epoch)[0]

    def order_head(self, epoch: int | None = None) -> int:
        """Return the position where the current epoch (or ``epoch``) began (see
        :meth:`order_offset`); 0 for an epoch begun at the start of its order."""
        return self._orders.offset_of(self._position.epoch if epoch is None else epoch)[1]

    def pin_current_order(self, order: Any) -> None:
        """Use ``order`` for the rest of the current epoch (a Chainer snapshot's order).

        Later epochs' orders are asked of the sampler again.

        Raises:
            ValueError: if the iterator has no order sampler, or ``order`` does
                not fit its epochs.
        """
        if self._order_sampler is None:
            raise ValueError("this iterator visits examples in order; it has no order to pin")
        self._discard()
        self._orders.pin(self._position.epoch, order)
        # Orders planned ahead for later epochs came from the replaced one.
        self._orders.forget_after(self._position.epoch)

    def start_next_epoch(self, keep_rollover: bool = True) -> None:
        """Leave the epoch in progress: the next batch opens the next epoch.

        Mid-epoch, the rest of the epoch is skipped. At an epoch boundary
        nothing changes, except that ``keep_rollover=False`` drops examples
        waiting to roll over into the next epoch.
        """
        p = self._position
        # At a boundary the last batch ended an epoch (a crossing batch may have
        # begun the next one already), or nothing was consumed yet.
        if p.is_new_epoch or p.previous_epoch_detail is None:
            if keep_rollover or not p.carry:
                return
            next_position = p._replace(carry=0)
        else:
            next_position = Position(p.epoch + 1, 0, True, self.epoch_detail, 0)
            self._book.leave(self._orders, p.epoch, p.current_position)
        self._position = next_position
        self._discard()

    def reset(self) -> None:
        """Start over from the first batch of epoch 0 (reopening a closed executor).

        A seeded shuffle replays the same orders; a stateful order sampler is
        asked for a new epoch-0 order, as in Chainer.
        """
        self._deferred = None
        self._orders.clear()
        self._position = Position()
        self._book = LedgerBook(self._spec, self._dataset_length, self._fingerprint)
        self._last_plan = None
        self._discard()
        self._executor.reopen()

    def close(self) -> None:
        """Release the executor's threads, processes and memory. Idempotent."""
        self._discard()
        self._executor.close()

    # -- checkpoints -----------------------------------------------------------

    def state_dict(self) -> dict:
        """Return the engine's state: a small JSON-ready dict (see :mod:`._checkpoint`).

        A door puts it in its own state with
        :func:`~dataset_kit.engine.states.wrap_state`.

        It counts only the batches already handed to the caller, and does not
        grow with the dataset unless a stateful order sampler forces it to
        carry the current epoch's order.

        Raises:
            ValueError: if a stateful order sampler's orders would be needed for
                a rolled-over tail longer than an epoch (only the previous
                epoch's order is kept).
        """
        state = self._state()
        state["ledger"] = self._book.state(self._orders, self._position)
        return state

    def _state(self) -> dict:
        """The state without its ledger (see :meth:`state_dict`)."""
        p, spec, orders = self._position, self._spec, self._orders
        if p.carry > spec.epoch_size and not orders.recomputable:
            raise ValueError(
                f"cannot checkpoint a rolled-over tail of {p.carry} examples that spans several "
                f"epochs of {spec.epoch_size} with order sampler {orders.kind!r}: "
                f"it keeps one order per epoch; use a seeded sampler")
        sampler = orders.state_dict(p.epoch, with_previous=p.carry > 0)
        return _checkpoint.make_state(spec, self._dataset_length, p, self._seed, sampler,
                                      self.order_offset())

    def ledger(self) -> Ledger:
        """Return what has been consumed: counts, the chain of the ids, the data's identity.

        Log it beside the model's step: two runs that logged the same ledger
        consumed the same examples in the same order. It is computed from
        the orders (costing the hashing of the epoch in progress, never
        anything per batch).
        """
        return self._book.ledger(self._orders, self._position)

    @property
    def fingerprint(self) -> str | None:
        """The identity of the dataset's files (its ``fingerprint``), or None."""
        return self._fingerprint

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Restore a state from :meth:`state_dict` of any engine over the same data.

        The engine then yields exactly the batches the saved one would have
        yielded next. Bare engine states of format versions 1 and 2 load too.
        A state may begin the epoch in progress at an offset of its sampler's
        order (``order_offset``, see :meth:`order_offset`).

        The state's ledger is checked: the ids it says were consumed are
        recomputed with this engine's orders and hashed, and the chain, the
        counts and the data's fingerprint must equal the saved ones. A state
        without a ledger (saved before it existed) loads with one
        :class:`ResumeMismatchWarning`; the next state saved carries one.

        Args:
            state: an engine state.
            strict: refuse a state whose ledger differs (else warn, naming
                what changed, and load it).

        Raises:
            ResumeMismatchError: (``strict``) if the ledger or the data's
                identity differs, naming the cause (``"files"``, ``"epoch"``,
                ``"order"``), or (always) the state was saved for another
                dataset length or sampler.
            ValueError: if the state is not an engine state, has an unknown
                format version, or was saved for another dataset length,
                batching spec or order sampler, or its offset does not fit
                the sampler.
        """
        # Check everything first, then apply: a rejected state changes nothing.
        self._load(state, strict, check=True)

    def _load(self, state: dict, strict: bool, check: bool) -> None:
        has_ledger = isinstance(state, dict) and "ledger" in state
        saved_ledger = state["ledger"] if has_ledger else None
        if has_ledger:
            state = {key: value for key, value in state.items() if key != "ledger"}
        state = _checkpoint.read_state(_checkpoint.upgrade_engine_part(state, self._orders.kind),
                                       self._spec, self._dataset_length)
        position = _checkpoint.position_of(state)
        orders = self._orders.loaded(state["order_sampler"], position, int(state["order_offset"]))
        if not has_ledger:
            if check:
                warnings.warn("the state has no ledger (it was saved before dataset_kit kept "
                              "one): the resume is not checked; the next state saved carries "
                              "a ledger", ResumeMismatchWarning, stacklevel=3)
            book = self._fresh_book(orders, position)
        else:
            book = self._checked_book(saved_ledger, orders, position, strict)
        self._book = book
        self._deferred = None
        self._orders = orders
        self._seed = int(state["seed"])
        self._position = position
        self._discard()

    def seek(self, *, epoch: int, position: int = 0, is_new_epoch: bool = False,
             previous_epoch_detail: float | None = None, order_offset: int = 0,
             order: Any = None, sampler_state: Any = None) -> None:
        """Move to ``position`` of ``epoch``, as if a state saying so were loaded.

        For a door whose saved state is not the engine's own (Chainer's keys
        in a snapshot, a global state cut among any number of ranks): it says
        where to continue, and the engine checks and applies it exactly as
        :meth:`load_state_dict` does. No example rolls over into the epoch.

        Args:
            epoch: the epoch to continue in.
            position: where in that epoch's order the next batch starts.
            is_new_epoch: whether the last batch handed out ended an epoch.
            previous_epoch_detail: ``epoch_detail`` before that batch, or None.
            order_offset: where in the sampler's order the epoch begins (the
                rest of an order shared with other ranks; see
                :meth:`order_offset`).
            order: the epoch's order, to use instead of the sampler's (a
                Chainer snapshot's), or None.
            sampler_state: the order sampler's own state to load
                (:class:`StatefulSampler`), or None to keep its current one.

        Raises:
            ValueError: naming the argument (as the state's key) and its value,
                if one does not fit this engine: an epoch or position out of
                range, an order of another length or not of the dataset's
                indices, an offset the sampler cannot begin at, or a sampler
                state the sampler refuses.
        """
        state = self._state()
        state.update(epoch=epoch, current_position=position, is_new_epoch=is_new_epoch,
                     previous_epoch_detail=previous_epoch_detail, carry=0,
                     order_offset=order_offset)
        sampler = dict(state["order_sampler"])
        if order is not None:
            sampler["order"] = np.asarray(order).tolist()
            sampler.pop("previous_order", None)
        if sampler_state is not None:
            sampler["state"] = sampler_state
        state["order_sampler"] = sampler
        self._load(state, strict=True, check=False)

    # -- the ledger's book --------------------------------------------------------

    def _fresh_book(self, orders: Orders, position: Position) -> LedgerBook:
        """The book of a position reached without a ledger (an old state, a seek)."""
        if orders.recomputable:
            # Every epoch's order can be asked again: the chain starts at epoch 0.
            return LedgerBook(self._spec, self._dataset_length, self._fingerprint)
        # Earlier orders are gone: count them, and chain from this epoch on.
        total = position.epoch * self._book_epoch_total()
        return LedgerBook(self._spec, self._dataset_length, self._fingerprint,
                          {position.epoch: (0, total)})

    def _book_epoch_total(self) -> int:
        spec = self._spec
        if spec.policy.drops_tail and not spec.policy.carries:
            return spec.epoch_size // spec.batch_size * spec.batch_size
        return spec.epoch_size

    def _checked_book(self, saved: Any, orders: Orders, position: Position,
                      strict: bool) -> LedgerBook:
        """The book of a loaded state whose ledger is checked against ``orders``.

        Raises:
            ResumeMismatchError: (``strict``) naming what differs.
            ValueError: if the ledger is malformed.
        """
        ledger = Ledger.from_state(saved)
        unknown = sorted(map(str, set(saved) - set(ledger.to_state()) - {"base", "orders"}))
        if unknown:
            raise ValueError(f"state['ledger'] has unknown keys {unknown}")
        base_epoch, base_chain, base_total = read_base(
            saved.get("base") if isinstance(saved, dict) else None)
        # The first ledgers (before 0.3) did not record the sampler: nothing to compare.
        then = (check_order_identity(saved["orders"], "state['ledger']['orders']")
                if "orders" in saved else None)
        now = order_identity(orders.sampler)
        book = LedgerBook(self._spec, self._dataset_length, self._fingerprint,
                          {base_epoch: (base_chain, base_total)})
        problems: list[tuple[str, str]] = []
        # A state saved before the dataset said its fingerprint has none to compare.
        if ledger.fingerprint is not None and ledger.fingerprint != self._fingerprint:
            problems.append(_fingerprint_problem(ledger.fingerprint, self._fingerprint))
        if then is not None and then["rank"] != now["rank"]:
            problems.append(("ranks", f"the state was saved by {_rank_text(then['rank'])}, "
                                      f"this iterator is {_rank_text(now['rank'])}"))
        if then is not None and then["sampler"] != now["sampler"]:
            problems.append(("sampler", f"the state's orders came from sampler "
                                        f"{then['sampler']!r}, this iterator's come from "
                                        f"{now['sampler']!r}"))
        elif then is not None and then["seed"] != now["seed"]:
            # Even where the ids consumed so far agree (nothing consumed yet), the
            # orders still to come would not be the saved run's.
            problems.append(("seed", f"the sampler's seed changed ({then['seed']} -> "
                                     f"{now['seed']})"))
        if ledger.dataset_length != self._dataset_length:
            problems.append(("dataset length", f"the state's ledger counts a dataset of "
                                               f"{ledger.dataset_length} examples, this one "
                                               f"has {self._dataset_length}"))
        if ledger.epoch != position.epoch or base_epoch > position.epoch:
            problems.append(("epoch", f"the state's ledger is of epoch {ledger.epoch} (base "
                                      f"{base_epoch}), but its position is in epoch "
                                      f"{position.epoch}"))
        else:
            try:
                mine = book.ledger(orders, position)
            except Exception as error:  # a user's sampler may raise anything
                raise ValueError(f"cannot recompute the ids the state says were consumed: "
                                 f"{type(error).__name__}: {error}") from error
            if (mine.consumed_total, mine.consumed_in_epoch) != (ledger.consumed_total,
                                                                 ledger.consumed_in_epoch):
                problems.append(("epoch", f"the state's ledger counts {ledger.consumed_total} "
                                          f"examples consumed ({ledger.consumed_in_epoch} in "
                                          f"its epoch), its position {mine.consumed_total} "
                                          f"({mine.consumed_in_epoch})"))
            elif mine.chain != ledger.chain:
                problems.append(("order", f"the {mine.consumed_total - base_total} ids "
                                          f"consumed since epoch {base_epoch} began are not "
                                          f"those this iterator's orders give (chain "
                                          f"{ledger.chain:016x} saved, {mine.chain:016x} "
                                          f"recomputed): the seed, the sampler or the data's "
                                          f"order changed"))
        if problems:
            cause = problems[0][0]
            message = "the resume does not fit: " + "; ".join(text for _, text in problems)
            if strict:
                raise ResumeMismatchError(message + " (pass strict=False to load it anyway)",
                                          cause=cause)
            warnings.warn(message, ResumeMismatchWarning, stacklevel=4)
        return book


def _fingerprint_problem(saved: str, mine: str | None) -> tuple[str, str]:
    if saved.startswith(MIXTURE_FINGERPRINT) and (mine or "").startswith(MIXTURE_FINGERPRINT):
        return ("mixture", f"the mixture's sources, weights or files changed since the state "
                           f"was saved (fingerprint {saved} -> {mine})")
    return ("files", f"the dataset's files changed since the state was saved "
                     f"(fingerprint {saved} -> {mine})")


def _rank_text(rank: list[int] | None) -> str:
    return "no rank of several" if rank is None else f"rank {rank[0]} of {rank[1]}"


def dataset_fingerprint(dataset: Any) -> str | None:
    """Return the identity of a dataset's files: its ``fingerprint`` (method or attribute).

    None when the dataset does not say (arrays, a dataset built in memory).
    A fingerprint that is a JSON-ready dict or list (a columnar dataset's
    stamps) is hashed into a string.

    Raises:
        TypeError: if the fingerprint is not a string, None or JSON-ready.
    """
    value = getattr(dataset, "fingerprint", None)
    if callable(value):
        value = value()
    if isinstance(value, (dict, list)):
        try:
            digest = identity_digest(value, "sha256", strict=True)
        except (TypeError, ValueError) as error:
            raise TypeError(f"dataset.fingerprint must be a string, None or JSON-ready, got "
                            f"{type(value).__name__}: {error}") from None
        value = "sha256:" + digest.hex()
    if value is not None and not isinstance(value, str):
        raise TypeError(f"dataset.fingerprint must be a string or None, got "
                        f"{type(value).__name__}")
    return value
