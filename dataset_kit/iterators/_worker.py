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
        try:
            batch = fetch_batch(dataset, BatchPlan(task.indices, task.epochs), task.seed)
            if converter is not None:
                batch = converter(batch)
            if config.use_shm:
                reply, created = _pack(task, batch, blocks, config, created)
            else:
                reply = Done(task.task_id, batch, None, 0, 0)
        except Exception as error:  # noqa: BLE001 - every failure goes to the parent
            reply = Failed(task.task_id, _picklable(error), traceback.format_exc())
        conn.send(reply)
        done += 1
        if max_tasks is not None and done >= max_tasks:
            conn.send(Retire())
            return


def _pack(task: Task, batch: Any, blocks: dict, config: WorkerConfig,
          created: int) -> tuple[Done, int]:
    arrays: list = []
    skeleton = _shm.split_arrays(batch, arrays)
    offsets, total = _shm.layout(arrays)
    if total == 0:
        return Done(task.task_id, skeleton, None, 0, 0), created
    if task.lent is not None and task.lent[1] >= total:
        name, size = task.lent
        block = blocks.get(name)
        if block is None:
            block = blocks[name] = _shm.Block(name, size, create=False)
    else:
        name = f"{config.prefix}w{config.index}-{created}"
        created += 1
        size = _shm.block_size_for(total)
        block = blocks[name] = _shm.Block(name, size, create=True)
    skeleton = _shm.place_arrays(skeleton, arrays, offsets, block.mmap)
    return Done(task.task_id, skeleton, name, size, total), created


def _picklable(error: BaseException) -> BaseException | None:
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # noqa: BLE001 - any failure means "send the text only"
        return None
    return error
