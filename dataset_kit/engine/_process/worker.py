"""The loop each MultiprocessIterator worker runs.

A worker receives whole-batch tasks on its own pipe (the first one of a fresh
pool comes with its start-up config), builds each batch with the same
:func:`fetch_batch` the serial iterator uses (so indices, order and
augmentation are identical), optionally converts it, places its arrays in a
shared-memory block and answers with a small skeleton. It never decides what
to build: the main process owns the order. It exits when the main process
dies or tells it to stop, through the lifeline, even in the middle of a batch.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import queue
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Any, NoReturn

from dataset_kit import _gather, _phases, _worker_process
from dataset_kit.engine import _wire
from dataset_kit.engine._fetch import fetch_batch
from dataset_kit.engine._process import first_batch as _first_batch
from dataset_kit.engine._process import lifeline as _lifeline
from dataset_kit.engine._process import shm as _shm
from dataset_kit.engine._process.messages import (
    Done,
    Failed,
    Forget,
    Retire,
    Task,
    Warm,
    WorkerConfig,
)
from dataset_kit.engine._statemachine import BatchPlan

_PR_SET_NAME = 15
# How long the lifeline's watcher may wait for the GIL when a stop comes (see
# worker_main); CPython's default is 5 ms.
SWITCH_SECONDS = 0.0005
# glibc's mallopt parameters, and the values a worker runs with (see _keep_freed_memory).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_TRIM_THRESHOLD = 64 << 20
_MMAP_THRESHOLD = 32 << 20  # glibc's largest
# Held while this worker creates a shared-memory block, and for good once it exits.
_creating = threading.Lock()


def worker_main(config: WorkerConfig, conn: Any, lifeline: Any) -> None:
    """Serve tasks from ``conn`` until told to stop or the parent dies.

    Args:
        config: what the pool started this worker with.
        conn: this worker's end of its duplex pipe to the main process.
        lifeline: the read end of the pool's lifeline (see :mod:`._lifeline`).
    """
    # Ctrl-C goes to the whole process group; the main process decides what
    # happens to workers, so they must not die with a KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _name_process(f"dsk-worker-{config.index}")
    _worker_process.enter_pool(config.workers)
    # A stop reaches the watcher thread while the main thread builds examples
    # in Python; the watcher then waits for the GIL up to the switch interval.
    # Shorter here, finalize() took 1.3 ms instead of 3.2 (medians of 15, a
    # worker of a torch process). It costs nothing while no other thread
    # wants the GIL, which is all the time unless the dataset runs threads.
    sys.setswitchinterval(SWITCH_SECONDS)
    _keep_freed_memory()
    # A forked worker inherits the parent's listeners (an active profile):
    # its spans go back with each batch instead (see the loop below).
    _phases.forget_listeners()
    # From now on, whatever the main thread is doing, the parent's death or
    # its request to stop ends this process within milliseconds.
    _lifeline.watch_parent(lifeline, lambda: _orphaned(config.prefix),
                           lambda: _stopped(conn))
    payload = config.payload
    dataset, converter, worker_init, max_tasks = (
        pickle.loads(payload) if isinstance(payload, bytes) else payload)
    init_failure: BaseException | None = None
    if worker_init is not None:
        try:
            worker_init(config.index, config.workers)
        except Exception as error:  # noqa: BLE001 - reported as each task's failure
            init_failure = error
    blocks: dict[str, _shm.Block] = {}
    warmer = _Warmer(dataset)
    created = 0
    done = 0
    # A fresh pool starts each worker with its first task (no pipe round trip),
    # whose examples it may have to claim (see _first_batch).
    first, claims = config.first, config.claims  # claims: only for the first task
    clock = time.perf_counter
    while True:
        idle = clock()
        if first is not None:
            message, first = first, None
        else:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                _orphaned(config.prefix)  # the main process closed our pipe: it is gone
        if isinstance(message, Retire):
            # The pool shrank: every task sent before this was answered (the
            # pipe keeps their order), so the worker is done.
            try:
                conn.send(Retire())
            except OSError:
                _orphaned(config.prefix)
            return
        if isinstance(message, Warm):
            warmer.warm(message.indices)
            continue
        if isinstance(message, Forget):
            for name in message.names:
                block = blocks.pop(name, None)
                if block is not None:
                    block.close()
            continue
        task: Task = message
        reply: Done | Failed
        # Gathers write straight into the block lent with the task, if any.
        arena = _arena_for(task, blocks) if config.use_shm else None
        previous = _gather.install(arena)
        _phases.collect()  # the user's marked spans, summed for this batch
        started = clock()
        try:
            if init_failure is not None:  # the caller sees its message and traceback
                raise init_failure
            # What a batch is (see _fetch): with shared memory, _pack stacks
            # uniform examples straight into the block instead.
            batch: Any
            # A part (convert=False) is the dataset's answer as it is: the main
            # process joins the parts, then converts or stacks the whole.
            stack = converter is None and task.convert
            if claims is not None:
                batch = _first_batch.build_claimed(
                    dataset, BatchPlan(task.indices, task.epochs), task.seed, *claims)
            else:
                batch = fetch_batch(dataset, BatchPlan(task.indices, task.epochs), task.seed,
                                    stack=stack and not config.use_shm)
            fetched = clock()
            marks = _phases.collected()  # the fetch's only: the converter is a phase itself
            if converter is not None and task.convert:
                batch = converter(batch)
            converted = clock()
            if config.use_shm:
                reply, created = _pack(task, batch, blocks, config, created, arena,
                                       stack=stack)
            else:
                reply = Done(task.task_id, batch, None, 0, 0)
            # Clock readings, not durations: perf_counter is system-wide, so
            # the main process can place the phases on its own timeline.
            reply = reply._replace(phases=(idle, started, fetched, converted, clock()),
                                   marks=marks)
        except Exception as error:  # noqa: BLE001 - every failure goes to the parent
            reply = Failed(task.task_id, _picklable(error), traceback.format_exc())
        finally:
            _gather.install(previous)
            _phases.collected()  # stop summing (a failed batch sends none)
            claims = None
        batch = arena = None  # no view of a block outlives the task
        try:
            conn.send(reply)
            done += 1
            if max_tasks is not None and done >= max_tasks:
                conn.send(Retire())
                return
        except OSError:  # a broken pipe: the main process is gone
            _orphaned(config.prefix)


def _name_process(name: str) -> None:
    """Show ``name`` in ``ps``/``top`` (Linux's ``/proc/<pid>/comm``), where possible."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the name is cosmetic
        pass


def _keep_freed_memory() -> None:
    """Let glibc keep freed memory for reuse instead of returning it to the kernel at once.

    A worker allocates and frees the same large temporaries for every example
    (a decoded image, its resized and normalised copies, 0.2-0.6 MB each).
    With glibc's defaults the top of the heap is trimmed as soon as 1-2 MB
    lie free there, so each new temporary is fresh pages: a page fault and
    a zeroed page per 4 KiB, which took a quarter of a worker's time on
    image pipelines. Here up to 64 MB stay with the worker, and allocations
    up to 32 MB come from the heap. Only worker processes do this: the
    user's own process keeps its allocator settings.
    """
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
        libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
    except (OSError, AttributeError):  # not glibc: its allocator has its own policy
        pass


def _orphaned(prefix: str) -> NoReturn:
    """The main process is gone: nobody else will unlink this iterator's blocks.

    Called from the lifeline's watcher thread or from the main thread,
    whichever notices first; the lock is never released, so no block can be
    created between the unlinking and the exit.
    """
    _creating.acquire()
    _shm.unlink_prefix(prefix)
    os._exit(0)


def _stopped(conn: Any) -> NoReturn:
    """The main process wants no more batches: exit now, even in the middle of one.

    Called from the lifeline's watcher thread. The lock keeps a block from
    being left half-created (the main process unlinks every block once its
    workers have stopped). What the dataset printed is flushed, as a normal
    exit would. Then the worker says it has stopped (see :func:`_say_stopped`)
    and exits.
    """
    _creating.acquire()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # closed, or a pipe nobody reads
            stream.flush()
    _say_stopped(conn)
    os._exit(0)


def _say_stopped(conn: Any) -> None:
    """End this worker's side of its pipe now: the main process reads end-of-file.

    An exiting process's memory is torn down before its descriptors are
    closed, and for a worker forked from a large process (one that imported
    PyTorch: some 250 MB of page tables to undo) that took 3-4 ms, which
    ``finalize()`` used to wait for. A worker that holds ``_creating`` can
    create no more blocks, so once it says so the main process may unlink
    them all and leave the exit to finish on its own. ``shutdown`` rather
    than ``close``: the pipe ends at once even while the main thread is
    blocked in a read or write of it (a close would wait for that call).
    """
    with contextlib.suppress(OSError, ValueError):  # not a socket, or already gone
        with socket.socket(fileno=os.dup(conn.fileno())) as end:
            end.shutdown(socket.SHUT_WR)


class _Warmer:
    """One daemon thread per worker that runs the dataset's ``prepare`` for each
    :class:`Warm`, in the order they came.

    One thread, not one per warm-up: at most one read ahead runs beside the
    batches, however many warm-ups arrive (small row groups, a slow remote
    read), and pyarrow's allocator keeps reusing that thread's heap (a new
    thread per warm-up left the workers more system time in 4 of 6 epochs:
    1.2-3.8 s against 2.7-3.5 s, 1M rows, 2 workers). A failure is dropped:
    it is only a read ahead, and the batch that needs the data reads it again
    and reports the failure then.
    """

    def __init__(self, dataset: Any) -> None:
        self._prepare = getattr(dataset, "prepare", None)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def warm(self, indices: Any) -> None:
        """Queue ``prepare(indices)``; start the thread on the first warm-up."""
        if self._prepare is None:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="dataset_kit-warm",
                                            daemon=True)
            self._thread.start()
        self._queue.put(indices)

    def _run(self) -> None:
        assert self._prepare is not None  # warm() starts no thread without it
        while True:
            indices = self._queue.get()
            try:
                self._prepare(indices)
            except Exception:  # noqa: BLE001, S110 - reported by the batch that needs it
                pass


def _arena_for(task: Task, blocks: dict) -> _gather.Arena | None:
    if task.lent is None:
        return None
    name, size = task.lent
    block = blocks.get(name)
    if block is None:
        block = blocks[name] = _shm.Block(name, size, create=False)
    return _gather.Arena(block.mmap)


def _pack(task: Task, batch: Any, blocks: dict, config: WorkerConfig, created: int,
          arena: _gather.Arena | None, stack: bool) -> tuple[Done, int]:
    start = 0 if arena is None else arena.used  # what gathers wrote stays where it is
    # A list of uniform examples travels as stacked columns, stacked straight
    # into the block: the main process then needs no restacking (and
    # concat_examples returns the columns as they are).
    uniform = _wire.uniform_columns(batch) if stack else None
    if uniform is not None:
        structure, columns = uniform
        sizes = [len(column) * column[0].nbytes for column in columns]
        if sum(sizes) < _wire.MIN_SHARED_BYTES:  # cheaper pickled
            return Done(task.task_id, _wire.stacked_batch(structure, columns), None, 0, 0), \
                created
        offsets, total = _wire.layout_sizes(sizes, start)
        # A lent block is what the arena writes into (there is one iff one was lent).
        fresh = task.lent is not None and total > task.lent[1]
        if fresh:  # a new block; the lent one holds what the columns are read from
            offsets, total = _wire.layout_sizes(sizes)
        name, size, block, created = _block_for(task, total, blocks, config, created, fresh)
        skeleton = _wire.stack_columns(structure, columns, offsets, block.mmap)
        return Done(task.task_id, skeleton, name, size, total), created
    arrays: list = []
    skeleton = _wire.split_arrays(batch, arrays)
    if not arrays:
        return Done(task.task_id, skeleton, None, 0, 0), created
    # Arrays gathered into the lent block stay; the others go after them.
    at = [None if arena is None else arena.offset_of(a) for a in arrays]
    placed, total = _wire.layout([a for a, o in zip(arrays, at) if o is None])
    others = iter(o + start for o in placed)
    offsets = [next(others) if o is None else o for o in at]
    total += start
    in_place: list[bool] | None = [o is not None for o in at]
    fresh = task.lent is not None and total > task.lent[1]
    if fresh:  # a new block; the lent one holds arrays to copy from
        offsets, total = _wire.layout(arrays)
        in_place = None
    name, size, block, created = _block_for(task, total, blocks, config, created, fresh)
    skeleton = _wire.place_arrays(skeleton, arrays, offsets, block.mmap, in_place)
    return Done(task.task_id, skeleton, name, size, total), created


def _block_for(task: Task, total: int, blocks: dict, config: WorkerConfig, created: int,
               fresh: bool = False) -> tuple[str, int, _shm.Block, int]:
    """The block lent with ``task`` if ``total`` bytes fit in it (and not ``fresh``),
    else a new one."""
    if task.lent is not None and task.lent[1] >= total and not fresh:
        name, size = task.lent
        block = blocks.get(name)
        if block is None:
            block = blocks[name] = _shm.Block(name, size, create=False)
    else:
        # The pid too: a replacement worker (max_tasks) reuses the index.
        name = f"{config.prefix}w{config.index}-{os.getpid()}-{created}"
        created += 1
        size = _shm.block_size_for(total)
        with _creating:  # never a block created after _orphaned() unlinked them all
            block = blocks[name] = _shm.Block(name, size, create=True)
    return name, size, block, created


def _picklable(error: BaseException) -> BaseException | None:
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # noqa: BLE001 - any failure means "send the text only"
        return None
    return error
