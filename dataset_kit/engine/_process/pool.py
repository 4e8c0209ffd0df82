"""The main process's side of the workers: start, talk, watch, and clean up.

Each worker has its own duplex pipe, so no lock is shared between processes
(a worker killed while holding a shared queue's lock would hang everyone).
The pipes are driven by the transport's threads (:mod:`._transport`); the
caller's thread only ever waits on the transport's notifications *and* every
worker's sentinel, with a timeout, so a worker that dies, hangs or stops
mid-message becomes an exception instead of a hang. Workers watch a lifeline
(:mod:`._lifeline`) and exit within milliseconds of the main process's death.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import multiprocessing
import multiprocessing.connection
import pickle
import signal
import threading
import time
import warnings
import weakref
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from dataset_kit._checks import positive_int
from dataset_kit.engine import _stats, _wire
from dataset_kit.engine._process import reaper as _reaper
from dataset_kit.engine._process import shm as _shm
from dataset_kit.engine._process.lifeline import Lifeline, keep_from_children, release
from dataset_kit.engine._process.messages import (
    Failed,
    Forget,
    Retire,
    Task,
    Warm,
    WorkerConfig,
)
from dataset_kit.engine._process.placement import Placement
from dataset_kit.engine._process.transport import Channel, Transport, _Undecodable
from dataset_kit.engine._process.worker import worker_main
from dataset_kit.engine.errors import (
    BatchTimeoutError,
    TimeoutWarning,
    WorkerDiedError,
    WorkerError,
    worker_failure,
)

# The longest the caller's thread sleeps between checks of the timeouts.
POLL_SECONDS = 0.25
# How long close() waits for told-to-stop workers to exit before killing them.
STOP_GRACE_SECONDS = 1.0


@dataclass
class _Worker:
    index: int
    process: Any
    channel: Channel
    pending: deque = field(default_factory=deque)  # (task id, lent block), in send order
    sent: int = 0
    exited: bool = False  # exited with code 0 (retired); its sentinel is no longer watched


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "is still running"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"was killed by {name} (exit code {exitcode})"
    return f"exited with code {exitcode}"


class ProcessPool:
    """Worker processes for one iterator, and the shared-memory blocks they fill.

    Args:
        workers: how many processes.
        start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"``.
        dataset: the dataset, handed to each worker (pickled unless forking).
        converter: applied to each batch in the worker, or None.
        worker_init: ``worker_init(index, workers)`` run once per worker, or None.
        max_tasks: tasks per worker before it is replaced, or None.
        warn_after: seconds after which a slow batch is warned about.
        timeout: seconds a worker may stay silent while the caller waits for
            its batch before that is a :class:`BatchTimeoutError` (None: wait
            as long as the workers live).
        first: at most ``workers`` first tasks, ``(task_id, indices, epochs,
            seed)`` each; the k-th is forked with worker k, which starts on it
            at once, while the next worker is still being forked.
        claims: ``(fd, chunk)`` of a first batch's claims pipe
            (``_first_batch.Claims``), for forked workers whose first tasks
            each hold the whole batch and claim its chunks; or None.

    Raises:
        TypeError: if the dataset, converter or worker_init cannot be pickled
            for a start method that needs it.
    """

    def __init__(self, *, workers: int, start_method: str, dataset: Any, converter: Any = None,
                 worker_init: Any = None, max_tasks: int | None = None,
                 warn_after: float | None = None, timeout: float | None = None,
                 first: Sequence[tuple[int, Any, Any, int]] = (),
                 claims: tuple[int, int] | None = None) -> None:
        if len(first) > workers:
            raise ValueError(f"first has {len(first)} tasks, more than workers={workers}")
        if claims is not None and start_method != "fork":
            raise ValueError(f"claims need workers that inherit the pipe (start_method='fork'), "
                             f"got start_method={start_method!r}")
        self._claims = claims
        self._context = multiprocessing.get_context(start_method)
        self._payload: Any = (dataset, converter, worker_init, max_tasks)
        if start_method != "fork":
            try:
                self._payload = pickle.dumps(self._payload)
            except Exception as error:  # noqa: BLE001 - any pickling failure
                raise TypeError(
                    f"start_method={start_method!r} sends the dataset, converter and "
                    f"worker_init to each worker by pickling, and that failed for dataset of "
                    f"type {type(dataset).__name__}: {error}. Use start_method='fork' or make "
                    f"them picklable."
                ) from error
        self.use_shm = _shm.available()
        if self.use_shm:
            _shm.unlink_orphans()
        self.prefix = _shm.pool_prefix()
        self.blocks = _shm.BlockPool(self.prefix)
        self.worker_count = workers
        self.max_tasks = max_tasks
        self.warn_after = warn_after
        self.timeout = timeout
        self.workers: list[_Worker] = []
        #: Which worker builds each task (see :mod:`.placement`).
        self.placement = Placement()
        self._retiring: list[_Worker] = []
        self.closed = False
        self._cleaned = False
        _unfinished.add(self)
        self._lifeline = Lifeline(self._context)
        self._started_transport: Transport | None = None
        forked: list[tuple[Any, Any, Task | None]] = []
        try:
            for index in range(workers):
                task = Task(*first[index], None) if index < len(first) else None
                forked.append((*self._fork(index, task), task))
            # The transport's threads start once the workers run: starting a
            # thread waits until it is scheduled, which on a busy machine held
            # the first fork back by milliseconds, and no answer can come sooner.
            self._started_transport = Transport()
        except BaseException:
            for process, parent_end, _ in forked:
                _kill_unwatched(process, parent_end)
            self.close()
            raise
        self.workers = [self._watch(index, process, parent_end, task)
                        for index, (process, parent_end, task) in enumerate(forked)]

    def resize(self, workers: int) -> None:
        """Have ``workers`` workers from now on, in place.

        An added worker is forked into the running pool and takes tasks at
        once. A removed worker (the last ones: the slots stay ``0..n-1``) is
        sent :class:`Retire`: it answers every task it was sent, which the
        handles that name it still receive, and exits. A worker that dies
        meanwhile is a :class:`WorkerDiedError` as always.

        Raises:
            ValueError: if ``workers`` is not positive.
            Exception: whatever forking raised (the workers started so far stay).
        """
        positive_int("workers", workers)
        self._reap_retired()
        try:
            self.worker_count = workers  # what the new workers are told (worker_init)
            while len(self.workers) < workers:
                self.workers.append(self._start(len(self.workers)))
        finally:
            self.worker_count = len(self.workers)
        while len(self.workers) > workers:
            worker = self.workers.pop()
            self.worker_count = len(self.workers)
            self._retiring.append(worker)
            self._transport.send(worker.channel, Retire())

    def _start(self, index: int) -> _Worker:
        """Start a worker in slot ``index`` (a replacement, in a running pool)."""
        return self._watch(index, *self._fork(index, None), None)

    def _fork(self, index: int, first: Task | None) -> tuple[Any, Any]:
        """Start the process of worker ``index``; return it and the main process's pipe end."""
        parent_end, child_end = self._context.Pipe(duplex=True)
        # A forked sibling must not keep the main process's end open: then a
        # worker blocked sending to a dead parent would never see EOF.
        keep_from_children(parent_end.fileno())
        config = WorkerConfig(index=index, workers=self.worker_count, payload=self._payload,
                              prefix=self.prefix, use_shm=self.use_shm, first=first,
                              claims=self._claims if first is not None else None)
        # typeshed types get_context()'s result as BaseContext, which lacks Process;
        # every concrete context (fork, spawn, forkserver) has it.
        process = self._context.Process(  # type: ignore[attr-defined]
            target=worker_main, name=f"dataset_kit-worker-{index}", daemon=True,
            args=(config, child_end, self._lifeline.child_end))
        try:
            with _objects_frozen(self._context.get_start_method() == "fork"):
                process.start()
        except BaseException:
            release(parent_end.fileno())
            parent_end.close()
            raise
        finally:
            child_end.close()
        return process, parent_end

    def _watch(self, index: int, process: Any, parent_end: Any, first: Task | None) -> _Worker:
        """Hand a started worker's pipe to the transport; count its first task as sent."""
        worker = _Worker(index, process, self._transport.add(parent_end))
        if first is not None:
            worker.pending.append((first.task_id, None))
            worker.sent += 1
        return worker

    @property
    def _transport(self) -> Transport:
        # Started in __init__ right after the first workers; a pool whose
        # __init__ failed is closed, never used.
        assert self._started_transport is not None, "the pool's transport never started"
        return self._started_transport

    # -- tasks ----------------------------------------------------------------

    def submit(self, task_id: int, indices: Any, epochs: Any, seed: int,
               units: Sequence[Any] | None = None, convert: bool = True) -> _Worker:
        """Queue a task for its worker; return that worker.

        The worker is the one that recently built a task reading any of
        ``units`` (what the batch reads, see :mod:`.placement`), else the
        next in turn; without units, round robin by id. Never blocks: the
        transport's sender thread delivers the task. ``convert=False`` asks
        for the dataset's own answer (a part of a batch, or a warm-up).
        """
        worker = self._placed(task_id, units)
        if self.max_tasks is not None and worker.sent >= self.max_tasks:
            # The old process answers what it has, says "retire" and exits;
            # a new one takes its slot at once.
            self._retiring.append(worker)
            worker = self.workers[worker.index] = self._start(worker.index)
        block = self.blocks.take() if self.use_shm else None
        lent = None if block is None else (block.name, block.size)
        self._transport.send(worker.channel, Task(task_id, indices, epochs, seed, lent, convert))
        worker.pending.append((task_id, block))
        worker.sent += 1
        return worker

    def warm(self, units: Sequence[Any], indices: Any) -> None:
        """Have the worker that will build the batches reading ``units`` read ``indices`` now.

        The worker is placement's choice for a batch of ``units`` (where one
        is remembered, else the next in turn); it reads in the background
        and answers nothing (:class:`Warm`).
        """
        self._transport.send(self._placed(-1, units).channel, Warm(indices))

    def _placed(self, task_id: int, units: Sequence[Any] | None) -> _Worker:
        """Placement's worker for a task reading ``units``.

        Raises:
            WorkerDiedError: if that worker is dead.
        """
        self._reap_retired()
        worker = self.workers[self.placement.choose(task_id, units, len(self.workers))]
        if worker.channel.send_failed or (worker.channel.ended and not worker.channel.inbox):
            self._raise_dead(worker)
        return worker

    def receive(self, worker: _Worker, task_id: int) -> Any:
        """Wait for the answer to ``task_id`` from ``worker``; return the batch.

        Each worker answers in the order it was sent tasks, and the caller
        asks in task order, so any answer that comes first belongs to a
        cancelled task: it is read and dropped.

        Raises:
            WorkerDiedError: if any worker dies.
            BatchTimeoutError: if ``worker`` stays silent for ``timeout`` seconds.
            WorkerError: if the task raised in the worker.
        """
        while True:
            message = self._read(worker, task_id)
            if isinstance(message, Retire):
                continue
            answered, lent = worker.pending.popleft()
            result = self._accept(message, lent, worker, answered)
            if answered == task_id:
                if isinstance(result, WorkerError):
                    raise result
                return result
            del result  # a dropped batch's block returns to the pool

    def _reap_retired(self) -> None:
        """Forget retiring workers that have answered everything and exited."""
        for worker in list(self._retiring):
            if not worker.pending and worker.process.exitcode is not None:
                worker.process.join()
                self._retiring.remove(worker)
                release(worker.channel.conn.fileno())
                self._transport.discard(worker.channel)

    def _accept(self, message: Any, lent: Any, worker: _Worker, task_id: int) -> Any:
        if isinstance(message, (Failed, _Undecodable)):
            if lent is not None:
                self.blocks.give_back(lent)
            if isinstance(message, _Undecodable):
                failure = WorkerError(
                    f"the answer of worker {worker.index} (pid {worker.process.pid}) to batch "
                    f"{task_id} could not be unpickled in the main process: "
                    f"{message.error!r}")
                failure.__cause__ = message.error
                return failure
            return worker_failure(
                f"worker {worker.index} (pid {worker.process.pid}) raised while building "
                f"batch {message.task_id}:\n{message.traceback}", message.error)
        if message.phases:
            _stats.note_phases(worker.index, message.phases, message.marks)
        name = message.block_name
        if name is None:
            if lent is not None:
                self.blocks.give_back(lent)
            # Without shared memory the worker sent the batch itself; with it,
            # a batch too small to place still carries batch markers to rebuild.
            return _wire.restore(message.skeleton, None) if self.use_shm else message.skeleton
        if lent is not None and lent.name == name:
            block = lent
        else:
            block = self.blocks.adopt(name, message.block_size)
            if lent is not None:
                self.blocks.retire(lent)
                self._tell_all(Forget([lent.name]))
        return _wire.unpack(message.skeleton, self.blocks.lease(block, message.nbytes))

    def _tell_all(self, message: Forget) -> None:
        for worker in self.workers:
            self._transport.send(worker.channel, message)

    def _read(self, worker: _Worker, task_id: int) -> Any:
        start = time.monotonic()
        warned = False
        channel = worker.channel
        while True:
            self._transport.drain()
            if channel.inbox:
                return channel.inbox.popleft()
            if channel.ended:
                self._raise_dead(worker)
            everyone = [w for w in self.workers + self._retiring if not w.exited]
            now = time.monotonic()
            silent = now - max(start, channel.last_heard)
            wait = POLL_SECONDS if self.timeout is None else \
                max(0.0, min(POLL_SECONDS, self.timeout - silent))
            ready = multiprocessing.connection.wait(
                [self._transport.notify_fd] + [w.process.sentinel for w in everyone], wait)
            for other in everyone:
                if other.process.sentinel in ready:
                    other.process.join(STOP_GRACE_SECONDS)
                    if other.process.exitcode != 0:
                        self._raise_dead(other)
                    # A clean exit is a retirement (or, for the awaited worker,
                    # an exit its pipe's end-of-file reports once its last
                    # answers are read).
                    other.exited = True
            if channel.inbox:
                continue
            silent = time.monotonic() - max(start, channel.last_heard)
            if (not warned and self.warn_after is not None
                    and silent > self.warn_after):
                warnings.warn(
                    f"batch {task_id} has taken {silent:.1f} s in worker {worker.index} "
                    f"(pid {worker.process.pid}), over dataset_timeout={self.warn_after}",
                    TimeoutWarning, stacklevel=5)
                warned = True
            if self.timeout is not None and silent >= self.timeout:
                raise BatchTimeoutError(
                    f"worker {worker.index} (pid {worker.process.pid}) has been silent for "
                    f"{silent:.1f} s while batch {task_id} was awaited (timeout={self.timeout} "
                    f"s); it is stuck (a dataset blocked in I/O, a stopped process) or a batch "
                    f"takes longer than that to build: then pass a larger timeout, or None")

    def _raise_dead(self, worker: _Worker) -> None:
        worker.process.join(STOP_GRACE_SECONDS)
        raise WorkerDiedError(
            f"worker {worker.index} (pid {worker.process.pid}) "
            f"{describe_exit(worker.process.exitcode)} while building batches",
            pid=worker.process.pid, exitcode=worker.process.exitcode)

    # -- shutdown -------------------------------------------------------------

    def close(self) -> None:
        """Stop every worker and unlink every block. Idempotent; safe at exit.

        A Ctrl-C that arrives while this runs (in the main thread) is held
        until the cleanup is done, then raised; if the cleanup is interrupted
        all the same, calling close() again (the exit hook does) finishes it.
        """
        self.closed = True
        if self._cleaned:
            return
        with _interrupts_held():
            self._stop_workers()
            if self._started_transport is not None:
                self._started_transport.close()
            self._lifeline.cut()
            self.blocks.close()
            self._cleaned = True
            _unfinished.discard(self)

    def _stop_workers(self) -> None:
        workers = self.workers + self._retiring
        # At once, even in the middle of a batch: nobody wants it any more.
        self._lifeline.stop(len(workers))
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        left = self._await_stopped(workers, deadline)
        for worker in left:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            if worker.process.exitcode is None:
                worker.process.kill()
                worker.process.join(5)
        waited = {id(worker) for worker in left}
        for worker in workers:
            if id(worker) not in waited:
                _reaper.reaper.reap(worker.process)  # said it stopped: it is exiting
            with contextlib.suppress(OSError, ValueError):
                release(worker.channel.conn.fileno())

    def _await_stopped(self, workers: list[_Worker], deadline: float) -> list[_Worker]:
        """Wait until each worker has said it stopped or has exited; return the others.

        A stopping worker ends its pipe before it exits (see the worker's
        ``_say_stopped``); from then on it creates no block, so the blocks
        can be unlinked while the kernel finishes its exit, and the reaper
        thread (:mod:`._reaper`) joins it.
        """
        transport = self._started_transport
        if transport is None:  # the pool failed to start: nobody reads the pipes
            return workers
        left = workers
        while True:
            transport.drain()
            left = [w for w in left if not w.channel.ended and w.process.exitcode is None]
            remaining = deadline - time.monotonic()
            if not left or remaining <= 0:
                return left
            multiprocessing.connection.wait(
                [transport.notify_fd] + [w.process.sentinel for w in left], remaining)


@contextlib.contextmanager
def _objects_frozen(forking: bool) -> Iterator[None]:
    """Fork with the main process's objects out of the child's garbage collector's sight.

    A forked worker inherits every object of the main process (torch's alone
    are some 170,000). Its first full collection walks them all and writes to
    each one's header, copying every page they lie on: measured in a worker
    of a process that imported torch, 60-80 ms and 10,000 page faults (40 MB
    no longer shared), against 0.3 ms and 138 faults when they were frozen.
    So, as CPython's documentation of :func:`gc.freeze` advises for servers
    that fork, the objects are frozen across the fork: the child keeps them
    frozen (they live as long as it does anyway), and the main process
    unfreezes them at once (into the oldest generation). A process that
    froze objects itself keeps its own policy: nothing is done then.
    """
    if not forking or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _kill_unwatched(process: Any, parent_end: Any) -> None:
    """Stop a worker whose pool failed to start, before the transport knew of it."""
    with contextlib.suppress(Exception):
        process.kill()
        process.join(5)
    release(parent_end.fileno())
    parent_end.close()


# Pools whose cleanup has not finished: the exit hook finishes it.
_unfinished: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_unfinished_pools() -> None:
    for pool in list(_unfinished):
        with contextlib.suppress(Exception):
            pool.close()


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Hold SIGINT while the block runs (main thread only); raise it afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    except (ValueError, TypeError):  # not the main interpreter, or a handler set in C
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received and callable(previous):
            previous(signal.SIGINT, None)
        elif received and previous == signal.SIG_DFL:
            raise KeyboardInterrupt
