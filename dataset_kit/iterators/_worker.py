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
from dataset_kit.iterators._statemachine import BatchPlan
from dataset_kit.iterators._stream import fetch_batch

# How often an idle worker checks that its parent is still alive.
PARENT_POLL_SECONDS = 0.5


def worker_main(index: int, n_workers: int, payload: Any, conn: Any, parent_pid: int,
                prefix: str, use_shm: bool) -> None:
    """Serve tasks from ``conn`` until told to stop or the parent dies."""
    # Ctrl-C goes to the whole process group; the main process decides what
    # happens to workers, so they must not die with a KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    dataset, converter, worker_init, max_tasks = (
        pickle.loads(payload) if isinstance(payload, bytes) else payload)
    if worker_init is not None:
        worker_init(index, n_workers)
    blocks: dict[str, _shm.Block] = {}
    created = 0
    done = 0
    while True:
        if not conn.poll(PARENT_POLL_SECONDS):
            if os.getppid() != parent_pid:
                # Orphaned: nobody else will clean this iterator's blocks.
                _shm.unlink_prefix(prefix)
                return
            continue
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        if message[0] == "forget":
            for name in message[1]:
                block = blocks.pop(name, None)
                if block is not None:
                    block.close()
            continue
        _, task_id, indices, epochs, seed, lent = message
        try:
            batch = fetch_batch(dataset, BatchPlan(indices, epochs), seed)
            if converter is not None:
                batch = converter(batch)
            if use_shm:
                reply, created = _pack(task_id, batch, lent, blocks, prefix, index, created)
            else:
                reply = ("ok", task_id, batch, None, 0, 0)
        except Exception as error:  # noqa: BLE001 - every failure goes to the parent
            reply = ("error", task_id, _picklable(error), traceback.format_exc())
        conn.send(reply)
        done += 1
        if max_tasks is not None and done >= max_tasks:
            conn.send(("retire",))
            return


def _pack(task_id: int, batch: Any, lent: tuple | None, blocks: dict, prefix: str,
          index: int, created: int) -> tuple[tuple, int]:
    arrays: list = []
    skeleton = _shm.split_arrays(batch, arrays)
    offsets, total = _shm.layout(arrays)
    if total == 0:
        return ("ok", task_id, skeleton, None, 0, 0), created
    if lent is not None and lent[1] >= total:
        name, size = lent
        block = blocks.get(name)
        if block is None:
            block = blocks[name] = _shm.Block(name, size, create=False)
    else:
        name = f"{prefix}w{index}-{created}"
        created += 1
        size = _shm.block_size_for(total)
        block = blocks[name] = _shm.Block(name, size, create=True)
    skeleton = _shm.place_arrays(skeleton, arrays, offsets, block.mmap)
    return ("ok", task_id, skeleton, name, size, total), created


def _picklable(error: BaseException) -> BaseException | None:
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # noqa: BLE001 - any failure means "send the text only"
        return None
    return error
