"""Which worker builds a batch: the one that recently read what the batch reads.

A dataset that keeps a per-process cache (decoded row groups, open files)
tells the engine what each batch reads, as a tuple of *units*
(:class:`~dataset_kit.engine.protocols.BatchLocality`). A batch that shares a
unit with a recent batch goes to the worker that built that one, so a unit is
read (decoded) by one worker rather than by every worker in turn; the units of
a batch placed so are remembered at that worker too. Which worker builds a
batch never changes the batch (batches are a pure function of the plan and
the seed), only what it costs.

A batch of new units goes to the next worker in turn (new units only move
the turn): consecutive units of a block shuffle then go to consecutive
workers, which is what the engine's warming ahead counts on (see
``BatchParts``: with ``n`` workers it warms ``n`` units ahead, so each
worker reads its next unit while it serves its current one). The least
loaded worker was the choice before warming: with a unit warmed ahead, the
worker still serving the current unit has the most tasks in flight, and
the two units after it both went to the other. A batch without units
(None: the dataset has no preference, e.g. a fully random shuffle) keeps
plain round robin by task id.

The worker count is given at each call, so a pool whose
workers are added or removed in place needs nothing more: a unit remembered
at a worker that is gone counts as new.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence

# Units remembered: a few epochs' worth of row groups of a block shuffle; the
# oldest are forgotten first.
MEMORY = 256


class Placement:
    """Chooses a worker for each task; remembers where recent units went.

    Args:
        memory: how many units are remembered (least recently placed forgotten first).
    """

    def __init__(self, memory: int = MEMORY) -> None:
        if not isinstance(memory, int) or isinstance(memory, bool) or memory < 1:
            raise ValueError(f"memory must be a positive number of units, got {memory!r}")
        self.memory = memory
        self._where: OrderedDict[Hashable, int] = OrderedDict()
        self._turn = 0

    def choose(self, task_id: int, units: Sequence[Hashable] | None, workers: int) -> int:
        """Return the worker (``0 <= worker < workers``) for task ``task_id``.

        Args:
            task_id: the task's number (round robin for a batch without units).
            units: what the batch reads, or None for no preference.
            workers: the workers there are now.

        Raises:
            ValueError: if ``workers`` is less than 1.
        """
        if not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers!r}")
        if units is None:
            return task_id % workers
        worker = next((self._where[unit] for unit in units
                       if self._where.get(unit, workers) < workers), None)
        if worker is None:
            worker = self._turn % workers
        self.settle(units, worker)
        return worker

    def where(self, unit: Hashable, workers: int) -> int | None:
        """The worker ``unit`` was placed at, or None (never, forgotten, or a worker gone)."""
        worker = self._where.get(unit)
        return worker if worker is not None and worker < workers else None

    def settle(self, units: Sequence[Hashable] | None, worker: int) -> None:
        """Remember that ``worker`` reads ``units`` (for a task placed elsewhere: a first batch).

        A new unit moves the turn past ``worker``, as if it had been chosen.
        """
        if any(unit not in self._where for unit in units or ()):
            self._turn = worker + 1
        for unit in units or ():
            self._where[unit] = worker
            self._where.move_to_end(unit)
        while len(self._where) > self.memory:
            self._where.popitem(last=False)
