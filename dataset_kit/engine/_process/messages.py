"""The messages between the main process and its worker processes, by name.

Every message is a small named tuple (cheap to pickle, read by field name),
and :class:`WorkerConfig` is everything a worker is started with. Extending
the protocol means adding a field or a type here, nowhere else.

Main process → worker: :class:`Task`, :class:`Warm`, :class:`Forget`, :class:`Retire` (and a
stop through the lifeline, :mod:`._lifeline`, which no batch being built delays).
Worker → main process: :class:`Done`, :class:`Failed`, :class:`Retire`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np


class Task(NamedTuple):
    """Build the batch of ``indices`` (see :class:`~._statemachine.BatchPlan`)."""

    task_id: int
    indices: np.ndarray
    epochs: int | np.ndarray
    seed: int
    lent: tuple[str, int] | None  # (name, size) of a free block to fill, if any
    # False: send the dataset's own answer, unconverted and unstacked (a part
    # of a batch, joined and converted in the main process; or a warm-up).
    convert: bool = True


class Warm(NamedTuple):
    """Read what a batch of ``indices`` reads, in the background; answer nothing.

    The worker calls the dataset's ``prepare(indices)`` on a thread of its
    own (see ``BatchParts``), so the batches it builds meanwhile do not wait.
    """

    indices: np.ndarray


class Forget(NamedTuple):
    """Unmap these blocks: the main process retired them."""

    names: list[str]


class Done(NamedTuple):
    """A built batch: its skeleton, and where its arrays lie (block None: no block used)."""

    task_id: int
    skeleton: Any
    block_name: str | None
    block_size: int
    nbytes: int
    # perf_counter readings: the worker fell idle, began the task, had
    # fetched, had converted, had packed into shared memory (for profiles).
    phases: tuple[float, float, float, float, float] | tuple[()] = ()
    # The user's marked spans (dataset_kit.phase) in this batch: (name, seconds, spans).
    marks: tuple[tuple[str, float, int], ...] = ()


class Failed(NamedTuple):
    """Building the batch raised; ``error`` is None when it could not be pickled."""

    task_id: int
    error: BaseException | None
    traceback: str


class Retire(NamedTuple):
    """Retirement: the worker answers the tasks sent before it, says so, and exits.

    From a worker: it built its ``max_tasks`` batches. To a worker: the pool
    has one worker fewer (``num_workers="auto"`` removed it); the worker
    answers what it was sent, sends ``Retire`` back and exits.
    """


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker process is started with.

    Attributes:
        index: the worker's slot, ``0 <= index < workers``.
        workers: how many workers the pool has.
        payload: ``(dataset, converter, worker_init, max_tasks)``, pickled to
            bytes unless the worker is forked.
        prefix: the name prefix of the iterator's shared-memory blocks.
        use_shm: whether arrays travel through shared memory.
        first: the task to build before reading the pipe, or None (a fresh
            pool's first tasks travel with the worker, so a worker starts on
            its part of the first batch while the next one is still forked).
        claims: ``(fd, chunk)``: build only the chunks of ``first`` claimed
            from the inherited pipe ``fd`` (see ``_first_batch.Claims``), or None.
    """

    index: int
    workers: int
    payload: Any
    prefix: str
    use_shm: bool
    first: Task | None = None
    claims: tuple[int, int] | None = None
