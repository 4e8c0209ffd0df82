"""``num_workers="auto"``: one controller that picks the number of worker processes.

A batch is a pure function of its plan and the seed, so the engine may build
the next batches with another number of workers and still hand out exactly
the same batches. Every ``period`` batches the engine shows the controller
the loop's wait over those batches; the controller answers with the number
of workers to use, and why. The engine then drops the batches in flight and
rebuilds its executor with that many workers (see ``Engine``).

The rule: start with ``start`` workers; add one while the loop waits at least
``WAIT_TO_ADD`` of the time and the last addition lowered the wait; stop
adding when it did not, or when one more worker would pass ``memory_limit``
(the workers' RSS counted); remove one when the loop waited less than
``WAIT_TO_REMOVE`` (workers idle).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from dataset_kit._checks import positive_int

#: The share of its time the loop must wait for a worker to be added.
WAIT_TO_ADD = 0.10
#: Below this share of waiting, a worker is idle enough to be removed.
WAIT_TO_REMOVE = 0.01
#: An addition must lower the wait by this share of itself to count as useful.
USEFUL_DROP = 0.2


def available_memory() -> int:
    """Return the bytes of memory available now (MemAvailable; 4 GiB when unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 4 << 30


@dataclass(frozen=True)
class Decision:
    """One decision of the controller.

    Attributes:
        batch: batches handed out when it was made.
        workers: the workers before.
        new_workers: the workers after (equal: kept).
        wait_fraction: the loop's share of waiting over the last period.
        reason: why, in words.
    """

    batch: int
    workers: int
    new_workers: int
    wait_fraction: float
    reason: str


class AutoWorkers:
    """The controller behind ``num_workers="auto"`` (every door uses this one).

    Args:
        max_workers: the most workers (None: ``os.cpu_count()``).
        memory_limit: bytes the workers' RSS may reach in all (None: half of
            the memory available when the controller is made).
        start: the workers to begin with.
        period: batches between decisions.

    Raises:
        TypeError: if a count is not an integer.
        ValueError: if a count is not positive, or ``start > max_workers``.
    """

    def __init__(self, *, max_workers: int | None = None, memory_limit: int | None = None,
                 start: int = 1, period: int = 16) -> None:
        self.max_workers = positive_int(
            "max_workers", (os.cpu_count() or 1) if max_workers is None else max_workers)
        self.memory_limit = (available_memory() // 2 if memory_limit is None
                             else positive_int("memory_limit", memory_limit))
        self.start = positive_int("start", start)
        if self.start > self.max_workers:
            raise ValueError(f"start must be at most max_workers={self.max_workers}, "
                             f"got {self.start}")
        self.period = positive_int("period", period)
        self.decisions: list[Decision] = []
        # (wait fraction, mean wait) before the last addition
        self._before_add: tuple[float, float | None] | None = None
        self._plateau = False

    @classmethod
    def for_argument(cls, name: str, value: Any,
                     memory_limit: int | None) -> tuple[Any, AutoWorkers | None]:
        """Translate a door's worker-count argument: what every door with ``"auto"`` does.

        Args:
            name: the argument's name in the door (``num_workers``, ...), for errors.
            value: what the user passed: ``"auto"``, or a count the door checks.
            memory_limit: the door's ``memory_limit`` argument.

        Returns:
            ``(1, controller)`` for ``"auto"`` (start with one worker), else
            ``(value, None)``.

        Raises:
            ValueError: if ``memory_limit`` is given without ``"auto"``.
        """
        if isinstance(value, str) and value == "auto":
            return 1, cls(memory_limit=memory_limit)
        if memory_limit is not None:
            raise ValueError(f"memory_limit is for {name}='auto', got {name}={value!r}")
        return value, None

    def decide(self, batch: int, workers: int, wait_fraction: float,
               workers_rss: int, mean_wait: float | None = None) -> Decision:
        """Return the number of workers for the next period, and why.

        Args:
            batch: batches handed out so far.
            workers: the workers now.
            wait_fraction: the loop's share of waiting over the last period.
            workers_rss: the workers' resident memory now, bytes in all.
            mean_wait: the mean wait of ``next()`` per batch over the last
                period, in seconds; whether an added worker helped is judged
                on it (a loop with no work of its own waits all the time,
                however fast the batches come). None: on ``wait_fraction``.

        Raises:
            ValueError: if one worker alone needs more than ``memory_limit``
                (both figures named).
        """
        per_worker = workers_rss // workers if workers else 0
        if per_worker > self.memory_limit:
            raise ValueError(
                f"num_workers='auto': one worker needs {per_worker} bytes, more than "
                f"memory_limit={self.memory_limit} bytes")
        new, reason = workers, "kept: the loop's wait is between the thresholds"
        if self._before_add is not None:
            fraction, per_batch = self._before_add
            before, now = ((per_batch, mean_wait) if per_batch is not None and mean_wait is not None
                           else (fraction, wait_fraction))
            if now > before * (1 - USEFUL_DROP):
                self._plateau = True  # the last worker did not lower the wait
                reason = (f"kept: the last worker added did not lower the wait "
                          f"({before:.3g} -> {now:.3g}); no more added")
            self._before_add = None
        if wait_fraction >= WAIT_TO_ADD and not self._plateau:
            if workers >= self.max_workers:
                reason = f"kept: the loop waits, but max_workers={self.max_workers} is reached"
            elif per_worker * (workers + 1) > self.memory_limit:
                reason = (f"kept: one more worker would pass memory_limit="
                          f"{self.memory_limit} bytes ({per_worker} per worker)")
            else:
                new, self._before_add = workers + 1, (wait_fraction, mean_wait)
                reason = f"added: the loop waited {wait_fraction:.0%} of the time"
        elif wait_fraction < WAIT_TO_REMOVE and workers > 1:
            new = workers - 1
            reason = f"removed: the loop waited {wait_fraction:.1%}: workers idle"
        decision = Decision(batch, workers, new, wait_fraction, reason)
        self.decisions.append(decision)
        return decision
