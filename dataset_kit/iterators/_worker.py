"""The loop each MultiprocessIterator worker runs.

A worker receives whole-batch tasks on its own pipe, builds each batch with the
same :func:`fetch_batch` the serial iterator uses (so indices, order and
augmentation are identical), optionally converts it, places its arrays in a
shared-memory block and answers with a small skeleton. It never decides what
to build: the main process owns the order.
"""

from __future__ import annotations

import os
import pickle
import signal
import traceback
from typing import Any

from dataset_kit import _gather
from dataset_kit.iterators import _shm
from dataset_kit.iterators._fetch import fetch_batch
from dataset_kit.iterators._messages import (
    Done,
    Failed,
    Forget,
    Retire,
    Stop,
    Task,
    WorkerConfig,
)
from dataset_kit.iterators._statemachine import BatchPlan

# How often an idle worker checks that its parent is still alive.
PARENT_POLL_SECONDS = 0.5


def worker_main(config: WorkerConfig, conn: Any) -> None:
    """Serve tasks from ``conn`` until told to stop or the parent dies."""
    # Ctrl-C goes to the whole process group; the main process decides what
    # happens to workers, so they must not die with a KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    payload = config.payload
    dataset, converter, worker_init, max_tasks = (
        pickle.loads(payload) if isinstance(payload, bytes) else payload)
    if worker_init is not None:
        worker_init(config.index, config.n_workers)
    blocks: dict[str, _shm.Block] = {}
    created = 0
    done = 0
    while True:
        if not conn.poll(PARENT_POLL_SECONDS):
            if os.getppid() != config.parent_pid:
                # Orphaned: nobody else will clean this iterator's blocks.
                _shm.unlink_prefix(config.prefix)
                return
            continue
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if isinstance(message, Stop):
            return
        if isinstance(message, Forget):
            for name in message.names:
                block = blocks.pop(name, None)
                if block is not None:
                    block.close()
            continue
        task: Task = message
        # Gathers write straight into the block lent with the task, if any.
        arena = _arena_for(task, blocks) if config.use_shm else None
        previous = _gather.install(arena)
        try:
            batch = fetch_batch(dataset, BatchPlan(task.indices, task.epochs), task.seed)
            if converter is not None:
                batch = converter(batch)
            if config.use_shm:
                reply, created = _pack(task, batch, blocks, config, created, arena,
                                       stack=converter is None)
            else:
                reply = Done(task.task_id, batch, None, 0, 0)
        except Exception as error:  # noqa: BLE001 - every failure goes to the parent
            reply = Failed(task.task_id, _picklable(error), traceback.format_exc())
        finally:
            _gather.install(previous)
        batch = arena = None  # no view of a block outlives the task
        conn.send(reply)
        done += 1
        if max_tasks is not None and done >= max_tasks:
            conn.send(Retire())
            return


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
    uniform = _shm.uniform_columns(batch) if stack else None
    if uniform is not None:
        structure, columns = uniform
        sizes = [len(column) * column[0].nbytes for column in columns]
        if sum(sizes) < _shm.MIN_SHARED_BYTES:  # cheaper pickled
            return Done(task.task_id, _shm.stacked_batch(structure, columns), None, 0, 0), \
                created
        offsets, total = _shm.layout_sizes(sizes, start)
        fresh = arena is not None and total > task.lent[1]
        if fresh:  # a new block; the lent one holds what the columns are read from
            offsets, total = _shm.layout_sizes(sizes)
        name, size, block, created = _block_for(task, total, blocks, config, created, fresh)
        skeleton = _shm.stack_columns(structure, columns, offsets, block.mmap)
        return Done(task.task_id, skeleton, name, size, total), created
    arrays: list = []
    skeleton = _shm.split_arrays(batch, arrays)
    if not arrays:
        return Done(task.task_id, skeleton, None, 0, 0), created
    # Arrays gathered into the lent block stay; the others go after them.
    at = [None if arena is None else arena.offset_of(a) for a in arrays]
    others, total = _shm.layout([a for a, o in zip(arrays, at) if o is None])
    others = iter(o + start for o in others)
    offsets = [next(others) if o is None else o for o in at]
    total += start
    in_place = [o is not None for o in at]
    fresh = arena is not None and total > task.lent[1]
    if fresh:  # a new block; the lent one holds arrays to copy from
        offsets, total = _shm.layout(arrays)
        in_place = None
    name, size, block, created = _block_for(task, total, blocks, config, created, fresh)
    skeleton = _shm.place_arrays(skeleton, arrays, offsets, block.mmap, in_place)
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
        block = blocks[name] = _shm.Block(name, size, create=True)
    return name, size, block, created


def _picklable(error: BaseException) -> BaseException | None:
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # noqa: BLE001 - any failure means "send the text only"
        return None
    return error
