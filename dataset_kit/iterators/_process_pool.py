"""The main process's side of the workers: start, talk, watch, and clean up.

Each worker has its own duplex pipe, so no lock is shared between processes
(a worker killed while holding a shared queue's lock would hang everyone).
Waiting always covers the awaited pipe *and* every worker's sentinel, with a
timeout, so a dead worker becomes an exception at once instead of a hang.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import time
import warnings
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from dataset_kit.iterators import _shm
from dataset_kit.iterators._messages import (
    Done,
    Failed,
    Forget,
    Retire,
    Stop,
    Task,
    WorkerConfig,
)
from dataset_kit.iterators._worker import worker_main

POLL_SECONDS = 0.25


class TimeoutWarning(RuntimeWarning):
    """A batch has taken longer than ``dataset_timeout`` seconds to build."""


class WorkerError(RuntimeError):
    """A worker process raised while building a batch.

    The message names the worker and its pid and holds the worker's
    traceback; ``__cause__`` is the original exception when it could be
    pickled. The iterator stays usable: the next call retries the batch.
    """


class BatchTimeoutError(WorkerError, TimeoutError):
    """A batch did not arrive within the iterator's ``timeout`` (Gluon's ``timeout``).

    The iterator stops every worker: a worker that hangs leaves the pipeline
    in an unknown state.
    """


class WorkerDiedError(WorkerError):
    """A worker process died (a signal, ``os._exit``, a crash).

    The message names the worker's pid and its exit code or signal. The
    iterator has stopped every worker and cannot continue.
    """


@dataclass
class _Worker:
    index: int
    process: Any
    conn: Any
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
        n_workers: how many processes.
        start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"``.
        dataset: the dataset, handed to each worker (pickled unless forking).
        converter: applied to each batch in the worker, or None.
        worker_init: ``worker_init(index, n_workers)`` run once per worker, or None.
        max_tasks: tasks per worker before it is replaced, or None.
        dataset_timeout: seconds after which a slow batch is warned about.
        timeout: seconds after which a batch still not delivered is a
            :class:`BatchTimeoutError` (None: wait as long as workers live).

    Raises:
        TypeError: if the dataset, converter or worker_init cannot be pickled
            for a start method that needs it.
    """

    def __init__(self, *, n_workers: int, start_method: str, dataset: Any, converter: Any = None,
                 worker_init: Any = None, max_tasks: int | None = None,
                 dataset_timeout: float | None = None, timeout: float | None = None) -> None:
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
        self.prefix = f"dsk-{os.getpid()}-{os.urandom(4).hex()}-"
        self.blocks = _shm.BlockPool(self.prefix)
        self.n_workers = n_workers
        self.max_tasks = max_tasks
        self.dataset_timeout = dataset_timeout
        self.timeout = timeout
        self.workers: list[_Worker] = []
        self._retiring: list[_Worker] = []
        self.closed = False
        try:
            for index in range(n_workers):
                self.workers.append(self._start(index))
        except BaseException:
            self.close()
            raise

    def _start(self, index: int) -> _Worker:
        parent_end, child_end = self._context.Pipe(duplex=True)
        config = WorkerConfig(index=index, n_workers=self.n_workers, payload=self._payload,
                              parent_pid=os.getpid(), prefix=self.prefix, use_shm=self.use_shm)
        process = self._context.Process(
            target=worker_main, name=f"dataset_kit-worker-{index}", daemon=True,
            args=(config, child_end))
        process.start()
        child_end.close()
        return _Worker(index, process, parent_end)

    # -- tasks ----------------------------------------------------------------

    def submit(self, task_id: int, indices: Any, epochs: Any, seed: int) -> _Worker:
        """Send a task to its worker (round robin by id); return that worker."""
        self._retiring = [w for w in self._retiring if not self._gone(w)]
        worker = self.workers[task_id % self.n_workers]
        if self.max_tasks is not None and worker.sent >= self.max_tasks:
            # The old process answers what it has, says "retire" and exits;
            # a new one takes its slot at once.
            self._retiring.append(worker)
            worker = self.workers[worker.index] = self._start(worker.index)
        block = self.blocks.take() if self.use_shm else None
        lent = None if block is None else (block.name, block.size)
        try:
            worker.conn.send(Task(task_id, indices, epochs, seed, lent))
        except OSError:
            if block is not None:
                self.blocks.give_back(block)
            self._raise_dead(worker)
        worker.pending.append((task_id, block))
        worker.sent += 1
        return worker

    def receive(self, worker: _Worker, task_id: int) -> Any:
        """Wait for the answer to ``task_id`` from ``worker``; return the batch.

        Each worker answers in the order it was sent tasks, and the caller
        asks in task order, so any answer that comes first belongs to a
        cancelled task: it is read and dropped.

        Raises:
            WorkerDiedError: if any worker dies.
            WorkerError: if the task raised in the worker.
        """
        while True:
            message = self._read(worker, task_id)
            if isinstance(message, Retire):
                continue
            answered, lent = worker.pending.popleft()
            result = self._accept(message, lent, worker)
            if answered == task_id:
                if isinstance(result, WorkerError):
                    raise result
                return result
            del result  # a dropped batch's block returns to the pool

    @staticmethod
    def _gone(worker: _Worker) -> bool:
        """Whether a retiring worker has answered everything and exited (then reap it)."""
        if worker.pending or worker.process.exitcode is None:
            return False
        worker.process.join()
        worker.conn.close()
        return True

    def _accept(self, message: Done | Failed, lent: Any, worker: _Worker) -> Any:
        if isinstance(message, Failed):
            if lent is not None:
                self.blocks.give_back(lent)
            failure = WorkerError(
                f"worker {worker.index} (pid {worker.process.pid}) raised while building "
                f"batch {message.task_id}:\n{message.traceback}")
            failure.__cause__ = message.error
            return failure
        name = message.block_name
        if name is None:
            if lent is not None:
                self.blocks.give_back(lent)
            # Without shared memory the worker sent the batch itself; with it,
            # a batch too small to place still carries batch markers to rebuild.
            return _shm.restore(message.skeleton, None) if self.use_shm else message.skeleton
        if lent is not None and lent.name == name:
            block = lent
        else:
            block = self.blocks.adopt(name, message.block_size)
            if lent is not None:
                self.blocks.retire(lent)
                self._tell_all(Forget([lent.name]))
        return self.blocks.unpack(message.skeleton, block, message.nbytes)

    def _tell_all(self, message: Forget) -> None:
        for worker in self.workers:
            try:
                worker.conn.send(message)
            except OSError:
                pass

    def _read(self, worker: _Worker, task_id: int) -> Done | Failed | Retire:
        start = time.monotonic()
        warned = False
        while True:
            everyone = [w for w in self.workers + self._retiring if not w.exited]
            ready = multiprocessing.connection.wait(
                [worker.conn] + [w.process.sentinel for w in everyone], POLL_SECONDS)
            if worker.conn in ready:
                try:
                    return worker.conn.recv()
                except (EOFError, OSError):
                    self._raise_dead(worker)
            for other in everyone:
                if other.process.sentinel in ready:
                    other.process.join(1.0)
                    if other.process.exitcode != 0 or other is worker:
                        self._raise_dead(other)
                    # A clean exit is a retirement; anything it still owed
                    # is reported when its pipe is read (EOF).
                    other.exited = True
            elapsed = time.monotonic() - start
            if (not warned and self.dataset_timeout is not None
                    and elapsed > self.dataset_timeout):
                warnings.warn(
                    f"batch {task_id} has taken {elapsed:.1f} s in worker {worker.index} "
                    f"(pid {worker.process.pid}), over dataset_timeout={self.dataset_timeout}",
                    TimeoutWarning, stacklevel=5)
                warned = True
            if self.timeout is not None and elapsed > self.timeout:
                raise BatchTimeoutError(
                    f"batch {task_id} did not arrive within timeout={self.timeout} s from worker "
                    f"{worker.index} (pid {worker.process.pid}); a slow transform needs a larger "
                    f"timeout")

    def _raise_dead(self, worker: _Worker) -> None:
        worker.process.join(1.0)
        raise WorkerDiedError(
            f"worker {worker.index} (pid {worker.process.pid}) "
            f"{describe_exit(worker.process.exitcode)} while building batches")

    # -- shutdown -------------------------------------------------------------

    def close(self) -> None:
        """Stop every worker and unlink every block. Idempotent; safe at exit."""
        if self.closed:
            return
        self.closed = True
        workers = self.workers + self._retiring
        for worker in workers:
            try:
                worker.conn.send(Stop())
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 1.0
        for worker in workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
        for worker in workers:
            if worker.process.exitcode is None:
                worker.process.kill()
                worker.process.join(5)
            worker.conn.close()
        self.blocks.close()


