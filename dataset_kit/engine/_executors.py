"""Executors: where and when planned batches are built (never which).

The engine plans every batch itself and hands the plan to an executor:

* :class:`SerialExecutor` builds it in the calling thread when collected;
* :class:`ThreadExecutor` builds batches ahead on a thread pool;
* :class:`ProcessExecutor` builds them ahead in worker processes and
  delivers their arrays through shared memory.

Each runs the same :func:`~._fetch.fetch_batch`, then the optional converter,
so the batches are identical whatever the executor.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, NamedTuple, Protocol, runtime_checkable

from dataset_kit._checks import positive_int
from dataset_kit.engine._fetch import as_batch, fetch_batch
from dataset_kit.engine._process import first_batch as _first_batch
from dataset_kit.engine._process.pool import (
    BatchTimeoutError,
    ProcessPool,
    WorkerDiedError,
    WorkerError,
)
from dataset_kit.engine._statemachine import BatchPlan
from dataset_kit.engine.protocols import BatchLocality, BatchParts, Converter


class Executor(Protocol):
    """What the engine asks of an executor.

    Attributes:
        depth: batches the engine may keep in flight (submitted, not collected).
        prefetches: whether to submit the next batches as soon as one is
            collected, rather than on the next request.
    """

    depth: int
    prefetches: bool

    def submit(self, plan: BatchPlan, seed: int) -> Any:
        """Start building ``plan``'s batch; return a handle for :meth:`collect`."""

    def collect(self, handle: Any) -> Any:
        """Wait for the batch behind ``handle`` and return it."""

    def cancel(self, handles: list) -> None:
        """Forget batches whose results are no longer wanted."""

    def ensure_open(self) -> None:
        """Raise RuntimeError if the executor can build no more batches."""

    def reopen(self) -> None:
        """Make a closed (not failed) executor usable again."""

    def close(self) -> None:
        """Release threads, processes and memory. Idempotent."""


@runtime_checkable
class Resizable(Protocol):
    """An executor whose number of workers can change while it runs (``"auto"``).

    ``resize`` keeps every batch in flight: the handles already given out
    are collected as before. ``depth`` follows the workers unless it was
    given.
    """

    workers: int

    def resize(self, workers: int) -> None:
        """Build the next batches with ``workers`` workers."""


@runtime_checkable
class Hinted(Protocol):
    """An executor that is told the plans coming after its window (see :class:`BatchParts`).

    The prefetch window plans ``lookahead`` examples past what it submits
    and passes each such plan to ``hint`` once, in order; 0 asks for none.
    A hint only prepares (warms a worker); the plan is submitted later as
    any other, or never, if the window is discarded first.
    """

    lookahead: int

    def hint(self, plan: BatchPlan, seed: int) -> None:
        """Prepare for ``plan``, which the window will submit later."""


def _build(dataset: Any, plan: BatchPlan, seed: int, converter: Converter | None) -> Any:
    if converter is None:
        return fetch_batch(dataset, plan, seed, stack=True)
    return converter(fetch_batch(dataset, plan, seed))


class SerialExecutor:
    """Builds each batch in the calling thread, when it is asked for.

    Args:
        dataset: the dataset.
        converter: applied to each batch, or None.
    """

    depth = 1
    prefetches = False

    def __init__(self, dataset: Any, converter: Converter | None = None) -> None:
        self._dataset = dataset
        self._converter = converter

    def submit(self, plan: BatchPlan, seed: int) -> tuple[BatchPlan, int]:
        return plan, seed

    def collect(self, handle: tuple[BatchPlan, int]) -> Any:
        plan, seed = handle
        return _build(self._dataset, plan, seed, self._converter)

    def cancel(self, handles: list) -> None:
        pass

    def ensure_open(self) -> None:
        pass  # nothing to release, so a finalized serial iterator keeps working

    def reopen(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Closable:
    """Open / closed / failed bookkeeping shared by the executors that hold resources."""

    closed = False
    _failure: BaseException | None = None

    def ensure_open(self) -> None:
        if self._failure is not None:
            raise RuntimeError(
                "the iterator stopped after a worker failure; create a new iterator"
            ) from self._failure
        if self.closed:
            raise RuntimeError("the iterator was finalized; create a new iterator")


class ThreadExecutor(_Closable):
    """Builds whole batches ahead on ``workers`` threads.

    Args:
        dataset: the dataset (accessed from several threads).
        workers: worker threads.
        converter: applied to each batch in its thread, or None.
        depth: batches in flight; ``2 * workers`` when None.
        timeout: seconds after which a batch not yet built is a
            :class:`~dataset_kit.iterators.BatchTimeoutError` (None: wait).
    """

    prefetches = True

    def __init__(self, dataset: Any, workers: int, converter: Converter | None = None,
                 depth: int | None = None, timeout: float | None = None) -> None:
        self._dataset = dataset
        self._converter = converter
        self.workers = workers
        self._depth = depth
        self.depth = 2 * workers if depth is None else depth
        self.timeout = timeout
        self._pool = self._new_pool()

    def _new_pool(self) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(self.workers, thread_name_prefix="dataset_kit")

    def resize(self, workers: int) -> None:
        """Build the next batches on ``workers`` threads; those in flight finish where they are.

        Raises:
            ValueError: if ``workers`` is not positive.
        """
        positive_int("workers", workers)
        if workers == self.workers:
            return
        self.workers = workers
        self.depth = 2 * workers if self._depth is None else self._depth
        if not self.closed:
            # The old pool's threads finish the batches submitted to it (their
            # futures are the handles in flight), then end.
            old, self._pool = self._pool, self._new_pool()
            old.shutdown(wait=False)

    def submit(self, plan: BatchPlan, seed: int) -> Future:
        return self._pool.submit(_build, self._dataset, plan, seed, self._converter)

    def collect(self, handle: Future) -> Any:
        try:
            return handle.result(self.timeout)
        except FutureTimeout:
            if handle.done():
                # The batch's own TimeoutError (a ShardTimeoutError): since
                # Python 3.11 the wait's is the same class. Raise the batch's.
                return handle.result()
            error = BatchTimeoutError(
                f"no batch came from the thread pool for {self.timeout} s (timeout="
                f"{self.timeout} s); a thread is stuck (a dataset blocked in I/O) or a batch "
                f"takes longer than that to build: then pass a larger timeout, or None")
            self._failure = error
            self._abandon()
            raise error from None

    def _abandon(self) -> None:
        """Stop without waiting for batches being built (they are abandoned)."""
        if not self.closed:
            self.closed = True
            self._pool.shutdown(wait=False, cancel_futures=True)

    def cancel(self, handles: list) -> None:
        for future in handles:
            future.cancel()

    def reopen(self) -> None:
        if self.closed:
            self._pool = self._new_pool()
            self.closed = False

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_pool"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._pool = self._new_pool()

    def close(self) -> None:
        """Stop the threads, waiting for batches being built. Idempotent."""
        if not self.closed:
            self.closed = True
            self._pool.shutdown(wait=True, cancel_futures=True)


class _Task(NamedTuple):
    """A handle: one task sent to one worker."""

    task_id: int
    worker: Any


class _Split(NamedTuple):
    """A handle: a fresh pool's first batch, cut in parts that are joined in order."""

    parts: list[_Task]


class _Claimed(NamedTuple):
    """A handle: a fresh pool's first batch, whose chunks forked workers claimed."""

    parts: list[_Task]
    size: int


class _Parts(NamedTuple):
    """A handle: a batch built in parts by the workers holding its units, joined here."""

    parts: list[_Task]
    positions: list[Any]


class ProcessExecutor(_Closable):
    """Builds whole batches ahead in worker processes, started on the first submit.

    A worker that dies (or anything else that breaks the pipeline, such as an
    interrupt) stops every worker and fails the executor for good; a worker
    that *raises* only fails its batch, which the engine then asks for again.

    Args:
        dataset: the dataset (pickled for ``spawn``/``forkserver``).
        workers: worker processes.
        start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"``.
        converter: applied to each batch in its worker, or None.
        worker_init: ``worker_init(index, workers)`` run once per worker.
        max_tasks: batches a worker builds before it is replaced, or None.
        warn_after: seconds after which a slow batch is warned about.
        timeout: seconds after which a batch not delivered is a
            :class:`~dataset_kit.iterators.BatchTimeoutError` (None: wait).
        depth: batches in flight; ``2 * workers`` when None.

    The names are :class:`~._executor_spec.ExecutorSpec`'s, end to end.
    """

    prefetches = True

    def __init__(self, dataset: Any, *, workers: int, start_method: str = "fork",
                 converter: Converter | None = None, worker_init: Any = None,
                 max_tasks: int | None = None, warn_after: float | None = None,
                 timeout: float | None = None, depth: int | None = None) -> None:
        self._depth = depth
        self.depth = 2 * workers if depth is None else max(depth, 1)
        self._options = dict(workers=workers, start_method=start_method, dataset=dataset,
                             converter=converter, worker_init=worker_init, max_tasks=max_tasks,
                             warn_after=warn_after, timeout=timeout)
        self._pool: ProcessPool | None = None
        self._next_task = 0
        # Asked in this process for each batch: what it reads, for the pool's placement.
        self._locality = dataset.batch_locality if isinstance(dataset, BatchLocality) else None
        # A dataset that builds batches in parts: units are warmed ahead (hint).
        self._parts = dataset if isinstance(dataset, BatchParts) else None
        # Units hinted lately (each is warmed once as it comes into view).
        self._hinted: OrderedDict[Any, None] = OrderedDict()
        self._unit_examples: int | None = None
        self._finalizer: weakref.finalize | None = None

    def _start(self, plan: BatchPlan, seed: int) -> _Task | _Split | _Claimed:
        """Start the workers with the first batch in hand; return its handle.

        The first batch is split across the workers (see _first_batch), and
        each worker is forked with its part, so it starts building while the
        next one is forked.
        """
        n = self._options["workers"]
        split = _first_batch.worth_splitting(plan, n, self._options["dataset"],
                                             self._options["converter"])
        claims = _first_batch.Claims(len(plan.indices), n) \
            if split and self._options["start_method"] == "fork" else None
        # Claimed: every worker holds the whole batch and builds the chunks it claims.
        parts = [plan] * n if claims else _first_batch.split(plan, n) if split else [plan]
        first = [(self._next_task + k, part.indices, part.epochs, seed)
                 for k, part in enumerate(parts)]
        try:
            self._pool = ProcessPool(**self._options, first=first,
                                     claims=(claims.fd, claims.chunk) if claims else None)
        finally:
            if claims:
                claims.close()  # the workers hold their own copies
        # Close on garbage collection and at interpreter exit too; the
        # callback holds the pool, never the executor.
        self._finalizer = weakref.finalize(self, self._pool.close)
        self._next_task += len(parts)
        handles = [_Task(task_id, self._pool.workers[k]) for k, (task_id, *_) in enumerate(first)]
        if len(first) == 1:
            units = self._units(plan)
            self._pool.placement.settle(units, 0)
            if self._parts is not None:
                for unit in units or ():
                    self._hinted[unit] = None  # worker 0 reads it now
        if claims:
            return _Claimed(handles, len(plan.indices))
        return _Split(handles) if len(handles) > 1 else handles[0]

    def submit(self, plan: BatchPlan, seed: int) -> _Task | _Split | _Claimed | _Parts:
        try:
            if self._pool is None:
                return self._start(plan, seed)
            return self._submit_one(self._pool, plan, seed)
        except BaseException as error:
            self._fail(error)
            raise

    def _submit_one(self, pool: ProcessPool, plan: BatchPlan, seed: int) -> _Task | _Parts:
        if self._parts is None:
            units = self._units(plan)
        else:
            parts = self._parts.batch_parts(plan.indices)
            units = None if parts is None else tuple(unit for unit, _ in parts)
            if parts:
                # Units the scout did not reach (the first window) are placed
                # as it would have placed them, and warmed.
                self._warm_new_units(pool, plan, parts)
            if parts is not None and len(parts) > 1:
                held = {pool.placement.where(unit, len(pool.workers)) for unit in units or ()}
                if len(held) > 1 and None not in held:
                    # Its units are held by different workers (a batch that
                    # straddles two): each builds its part, joined in collect().
                    return _Parts([self._submit_part(pool, plan, seed, unit, where)
                                   for unit, where in parts], [where for _, where in parts])
        task_id = self._next_task
        self._next_task += 1
        return _Task(task_id, pool.submit(task_id, plan.indices, plan.epochs, seed, units))

    def _submit_part(self, pool: ProcessPool, plan: BatchPlan, seed: int, unit: Any,
                     positions: Any) -> _Task:
        """Send the examples at ``positions`` of ``plan`` (which read ``unit``) as one task."""
        task_id = self._next_task
        self._next_task += 1
        epochs = plan.epochs if isinstance(plan.epochs, int) else plan.epochs[positions]
        return _Task(task_id, pool.submit(task_id, plan.indices[positions], epochs, seed,
                                          (unit,), convert=False))

    @property
    def lookahead(self) -> int:
        """Examples past the window to warm units for: a unit's worth per worker.

        Each worker then reads its next unit while it serves its current one
        (the read is on a thread of its own, so it delays no batch queued
        before it). With ``workers - 1`` units, the reads waited for the
        worker's last unit to end: 1M rows, 2 workers, medians of 5
        interleaved rounds, 5.12 s an epoch against 4.75 s with ``workers``
        (a bare read 4.21 s).
        """
        if self._parts is None or self.workers < 2:
            return 0
        if self._unit_examples is None:  # asked at every fill: asked of the dataset once
            self._unit_examples = max(int(self._parts.unit_examples), 0)
        return self.workers * self._unit_examples

    def hint(self, plan: BatchPlan, seed: int) -> None:
        """Warm the units of ``plan`` not hinted lately: a worker reads them now.

        That worker reads them in the background, so its cache holds them
        when the plan's batches come to it (see :meth:`_warm_new_units`).
        """
        pool = self._pool
        if pool is None or self.closed or self._parts is None:
            return
        parts = self._parts.batch_parts(plan.indices)
        if parts:
            self._warm_new_units(pool, plan, parts)

    def _warm_new_units(self, pool: ProcessPool, plan: BatchPlan, parts: list) -> None:
        """Place the units of ``parts`` not seen lately, and have their worker read them.

        New units that the plan cleanly follows the known ones into (every
        position of a new unit after every position of a known one: the
        order moved on to the next block) go to the next worker in turn;
        new units mixed with known ones (the same block) go where the known
        ones are.
        """
        new = [(unit, where) for unit, where in parts if unit not in self._hinted]
        if not new:
            for unit, _ in parts:
                self._hinted.move_to_end(unit)
            return
        known = [(unit, where) for unit, where in parts if unit in self._hinted]
        for unit, _ in parts:
            self._hinted[unit] = None
            self._hinted.move_to_end(unit)
        # A few units per worker: a unit seen again much later (the next
        # epoch) is warmed again, where it is placed.
        while len(self._hinted) > 4 * len(pool.workers):
            self._hinted.popitem(last=False)
        mixed = known and min(int(where[0]) for _, where in new) < \
            max(int(where[-1]) for _, where in known)
        units = tuple(unit for unit, _ in (known + new if mixed else new))
        try:
            pool.warm(units, plan.indices[[int(where[0]) for _, where in new]])
        except BaseException as error:
            self._fail(error)
            raise

    def _units(self, plan: BatchPlan) -> Any:
        """What the plan's batch reads (the dataset's ``batch_locality``), or None."""
        return None if self._locality is None else self._locality(plan.indices)

    def collect(self, handle: _Task | _Split | _Claimed | _Parts) -> Any:
        if isinstance(handle, _Split):
            return _first_batch.join([self._collect_one(part) for part in handle.parts])
        if isinstance(handle, _Claimed):
            return _first_batch.join_claimed((self._collect_one(part) for part in handle.parts),
                                             handle.size)
        if isinstance(handle, _Parts):
            assert self._parts is not None, "a batch in parts from a dataset without parts"
            answer = self._parts.join_parts([self._collect_one(p) for p in handle.parts],
                                            handle.positions)
            converter = self._options["converter"]
            if converter is not None:
                return converter(answer)
            return as_batch(answer) if type(answer) is list else answer
        return self._collect_one(handle)

    def _collect_one(self, handle: _Task) -> Any:
        task_id, worker = handle
        try:
            # submit() started the pool the handle came from; only close() and
            # reopen() drop it, and a closed executor is never asked to collect.
            assert self._pool is not None, "collect() of a handle from a dropped pool"
            return self._pool.receive(worker, task_id)
        except WorkerError as error:
            if isinstance(error, (WorkerDiedError, BatchTimeoutError)):
                self._fail(error)
            raise  # a worker's own exception: the next request retries the batch
        except BaseException as error:
            # An interrupt or a broken pipe leaves the pipeline in an unknown
            # state: stop everything at once.
            self._fail(error)
            raise

    @property
    def workers(self) -> int:
        """The worker processes (those the next batches are built by)."""
        return int(self._options["workers"])

    def resize(self, workers: int) -> None:
        """Build the next batches with ``workers`` processes, in place.

        Workers are forked into the running pool or retired from it (a
        retired worker answers what it was sent, then exits); the batches in
        flight stay where they are, and their handles collect them as before.

        Raises:
            ValueError: if ``workers`` is not positive.
            WorkerDiedError: (later, on ``collect``) if a worker dies meanwhile.
        """
        positive_int("workers", workers)
        self._options["workers"] = workers
        self.depth = 2 * workers if self._depth is None else max(self._depth, 1)
        if self._pool is not None and not self.closed:
            try:
                self._pool.resize(workers)
            except BaseException as error:
                self._fail(error)
                raise

    def cancel(self, handles: list) -> None:
        # Nothing to send: the pool reads and drops answers to tasks that
        # are no longer awaited when it next reads from their worker.
        pass

    def _fail(self, error: BaseException) -> None:
        self._failure = error
        self.close()

    def reopen(self) -> None:
        if self.closed and self._failure is None:
            self._pool = None
            self.closed = False

    def __getstate__(self) -> dict:
        # A copy or unpickled executor starts workers of its own when first used.
        state = self.__dict__.copy()
        state.update(_pool=None, _finalizer=None, _next_task=0)
        return state

    def close(self) -> None:
        """Stop every worker and unlink every shared-memory block. Idempotent.

        Arrays already handed out stay valid: their memory is released when
        the last reference to them goes.
        """
        if self.closed:
            return
        self.closed = True
        if self._finalizer is not None:
            self._finalizer()
