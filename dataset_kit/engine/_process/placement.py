"""Which worker builds a batch: the one that recently read what the batch reads.

A dataset that keeps a per-process cache (decoded row groups, open files)
tells the engine what each batch reads, as a tuple of *units*
(:class:`~dataset_kit.engine.protocols.BatchLocality`). A batch that shares a
unit with a recent batch goes to the worker that built that one, so a unit is
read (decoded) by one worker rather than by every worker in turn; the units of
a batch placed so are remembered at that worker too. Which worker builds a
batch never changes the batch (batches are a pure function of the plan and
the seed), only what it costs.

A batch of new units goes to the least loaded worker (fewest tasks sent and
not yet collected), the earliest in turn on a tie: a new unit means a read,
and the worker with the shortest queue starts it soonest, while a worker still
serving the last unit's batches keeps them. A batch without units (None: the
dataset has no preference, e.g. a fully random shuffle) keeps plain round
robin by task id.

The worker count is read from the loads at each call, so a pool whose
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

    def choose(self, task_id: int, units: Sequence[Hashable] | None,
               loads: Sequence[int]) -> int:
        """Return the worker (an index into ``loads``) for task ``task_id``.

        Args:
            task_id: the task's number (round robin for a batch without units).
            units: what the batch reads, or None for no preference.
            loads: each worker's tasks in flight; its length is the worker count.
        """
        workers = len(loads)
        if workers < 1:
            raise ValueError(f"loads must name at least one worker, got {list(loads)!r}")
        if units is None:
            return task_id % workers
        worker = next((self._where[unit] for unit in units
                       if self._where.get(unit, workers) < workers), None)
        if worker is None:
            # Least loaded, the first in turn from self._turn on a tie.
            worker = min(range(workers),
                         key=lambda w: (loads[w], (w - self._turn) % workers))
            self._turn = (worker + 1) % workers
        self.settle(units, worker)
        return worker

    def settle(self, units: Sequence[Hashable] | None, worker: int) -> None:
        """Remember that ``worker`` reads ``units`` (for a task placed elsewhere: a first batch)."""
        for unit in units or ():
            self._where[unit] = worker
            self._where.move_to_end(unit)
        while len(self._where) > self.memory:
            self._where.popitem(last=False)
