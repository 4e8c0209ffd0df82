"""Whether this process is a worker of a process pool, and how many workers the pool has.

The engine's worker processes record it when they start (:func:`enter_pool`);
storage code asks (:func:`pool_workers`) to keep its own thread pools out of
the way of the workers' parallelism, as PyTorch's workers set one intra-op
thread. This module is part of the base: it imports nothing.
"""

from __future__ import annotations

_workers = 0


def pool_workers() -> int:
    """The number of workers of the pool this process is a worker of; 0 in any other process."""
    return _workers


def enter_pool(workers: int) -> None:
    """Record that this process is a worker of a pool of ``workers`` (the worker's start).

    Raises:
        ValueError: if ``workers`` is not a positive int.
    """
    global _workers
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    _workers = workers
