"""Ranks as threads of one process, for checking many shapes of sharding quickly.

A real collective implementation (a barrier and a shared slot per rank), not
a mock: every rank runs the same code as under MPI or torch.distributed.
The real engines are exercised in test_mpi.py and test_torch.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class ThreadGroup:
    """``size`` ranks that meet at a barrier."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._barrier = threading.Barrier(size, timeout=30)
        self._slots: list = [None] * size

    def allgather(self, rank: int, obj: Any) -> list:
        self._slots[rank] = obj
        self._barrier.wait()
        out = list(self._slots)
        self._barrier.wait()  # nobody writes the next round before all have read
        return out


class ThreadComm:
    """Rank ``rank`` of a :class:`ThreadGroup` (the communicator protocol)."""

    def __init__(self, group: ThreadGroup, rank: int) -> None:
        self.group, self.rank, self.size = group, rank, group.size

    def allgather(self, obj: Any) -> list:
        return self.group.allgather(self.rank, obj)

    def bcast(self, obj: Any, root: int = 0) -> Any:
        return self.allgather(obj)[root]

    def barrier(self) -> None:
        self.allgather(None)


def run_ranks(size: int, body: Callable[[ThreadComm], Any]) -> list:
    """Run ``body(comm)`` on ``size`` thread ranks; return results (or exceptions) by rank."""
    group = ThreadGroup(size)
    results: list = [None] * size

    def run(rank: int) -> None:
        try:
            results[rank] = body(ThreadComm(group, rank))
        except BaseException as error:  # handed to the test, which asserts on it
            results[rank] = error

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def unwrap(results: list) -> list:
    """Return ``results``, raising the first exception a rank raised."""
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results
