"""``num_workers="auto"``: one controller that picks the number of worker processes.

A batch is a pure function of its plan and the seed, so the engine may build
the next batches with another number of workers and still hand out exactly
the same batches. Every ``period`` batches the engine shows the controller
the loop's wait over those batches; the controller answers with the number
of workers to use, and why. The engine then resizes its executor in place:
workers are forked into the running pool or retired from it, and the batches
in flight are kept (see ``Engine``).

The rule: start with ``start`` workers (two, or ``max_workers`` if fewer:
measured on the cost-shift benchmark, quiet, 3 runs each, a start at one
worker waited 0.4-2.6% more than the best fixed count and a start at two
-2.2% to +0.3%, the first batches being the ones a climb costs). While the loop waits at least
``WAIT_TO_ADD`` of the time and the last addition lowered the wait, add as
many workers as the wait says are missing: a loop that waited a share ``w``
of its time was fed at ``1 - w`` of its pace, so about ``n / (1 - w)``
workers would keep up; at most twice the workers at once, so a wait that
came from starting the workers does not overshoot. Add none at
``max_workers``, or where one more worker would pass ``memory_limit`` (the
workers' RSS counted), and stop adding when the last addition did not lower
the wait, until the wait grows to ``PLATEAU_LIFT`` times what it was then
(the examples grew dearer). Remove one when the loop waited less than
``WAIT_TO_REMOVE`` (workers idle), or when the workers' RSS passed
``memory_limit``.

The first decisions come quickly, while the count is still climbing: the
first after ``period // 4`` batches, each period then twice the last, up to
``period``.
"""

from __future__ import annotations

import math
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
#: Once adding stopped helping, a wait this many times the one then (dearer
#: examples) lets the controller add again.
PLATEAU_LIFT = 2.0


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
        max_workers: the most workers (None: one more than ``os.cpu_count()``:
            the loop's own process mostly waits, a worker idles while it
            sends a batch and waits for the next task, and where other
            processes share the cores one more process gets a larger share;
            the controller adds it only while additions lower the wait).
        memory_limit: bytes the workers' RSS may reach in all (None: half of
            the memory available when the controller is made).
        start: the workers to begin with (None: two, or ``max_workers`` if fewer).
        period: batches between decisions, once the first ones are made
            (the first after ``max(1, period // 4)``, each period then
            twice the last).

    Raises:
        TypeError: if a count is not an integer.
        ValueError: if a count is not positive, or ``start > max_workers``.
    """

    def __init__(self, *, max_workers: int | None = None, memory_limit: int | None = None,
                 start: int | None = None, period: int = 16) -> None:
        self.max_workers = positive_int(
            "max_workers", (os.cpu_count() or 1) + 1 if max_workers is None else max_workers)
        self.memory_limit = (available_memory() // 2 if memory_limit is None
                             else positive_int("memory_limit", memory_limit))
        self.start = min(2, self.max_workers) if start is None else positive_int("start", start)
        if self.start > self.max_workers:
            raise ValueError(f"start must be at most max_workers={self.max_workers}, "
                             f"got {self.start}")
        self.period = positive_int("period", period)
        #: Batches until the next decision (the engine counts them).
        self.next_period = max(1, self.period // 4)
        self.decisions: list[Decision] = []
        # (wait fraction, mean wait) before the last addition
        self._before_add: tuple[float, float | None] | None = None
        # The wait (per batch, else its share) when adding stopped helping, or None.
        self._plateau: float | None = None

    @classmethod
    def for_argument(cls, name: str, value: Any,
                     memory_limit: int | None) -> tuple[Any, AutoWorkers | None]:
        """Translate a door's worker-count argument: what every door with ``"auto"`` does.

        Args:
            name: the argument's name in the door (``num_workers``, ...), for errors.
            value: what the user passed: ``"auto"``, or a count the door checks.
            memory_limit: the door's ``memory_limit`` argument.

        Returns:
            ``(start, controller)`` for ``"auto"`` (start with the controller's
            ``start`` workers), else ``(value, None)``.

        Raises:
            ValueError: if ``memory_limit`` is given without ``"auto"``.
        """
        if isinstance(value, str) and value == "auto":
            controller = cls(memory_limit=memory_limit)
            return controller.start, controller
        if memory_limit is not None:
            raise ValueError(f"memory_limit is for {name}='auto', got {name}={value!r}")
        return value, None

    def decide(self, batch: int, workers: int, wait_fraction: float,
               workers_rss: int, mean_wait: float | None = None) -> Decision:
        """Return the number of workers for the next period, and why.

        Sets :attr:`next_period`, the batches until the next decision.

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
        now = wait_fraction if mean_wait is None else mean_wait
        if self._before_add is not None:
            fraction, per_batch = self._before_add
            before = fraction if per_batch is None or mean_wait is None else per_batch
            if now > before * (1 - USEFUL_DROP):
                self._plateau = now  # the last workers added did not lower the wait
                reason = (f"kept: the last workers added did not lower the wait "
                          f"({before:.3g} -> {now:.3g}); no more added")
            self._before_add = None
        elif self._plateau is not None and wait_fraction >= WAIT_TO_ADD:
            if now > PLATEAU_LIFT * self._plateau:
                # The examples grew dearer: what was enough workers is no longer.
                reason = (f"the wait grew {now / max(self._plateau, 1e-12):.1f}x since adding "
                          f"stopped helping ({self._plateau:.3g} -> {now:.3g})")
                self._plateau = None
            else:
                reason = (f"kept: the loop waited {wait_fraction:.0%}, but the last workers "
                          f"added did not lower the wait")
        if workers_rss > self.memory_limit and workers > 1:
            new = workers - 1
            reason = (f"removed: the workers' RSS {workers_rss} bytes passed memory_limit="
                      f"{self.memory_limit} bytes")
        elif wait_fraction >= WAIT_TO_ADD and self._plateau is None:
            # Fed at (1 - w) of its pace: about workers / (1 - w) would keep up.
            keep_up = math.ceil(workers / max(1 - wait_fraction, 0.01) - 1e-9)
            affordable = self.memory_limit // per_worker if per_worker else self.max_workers
            want = min(max(keep_up, workers + 1), 2 * workers, self.max_workers, affordable)
            if workers >= self.max_workers:
                reason = f"kept: the loop waits, but max_workers={self.max_workers} is reached"
            elif want <= workers:
                reason = (f"kept: one more worker would pass memory_limit="
                          f"{self.memory_limit} bytes ({per_worker} per worker)")
            else:
                new, self._before_add = want, (wait_fraction, mean_wait)
                lifted = f"{reason}: " if reason.startswith("the wait grew") else ""
                reason = (f"{lifted}added {want - workers}: the loop waited "
                          f"{wait_fraction:.0%} of the time (about {keep_up} workers would "
                          f"keep up)")
        elif wait_fraction < WAIT_TO_REMOVE and workers > 1:
            new = workers - 1
            reason = f"removed: the loop waited {wait_fraction:.1%}: workers idle"
        self.next_period = min(self.period, 2 * self.next_period)
        decision = Decision(batch, workers, new, wait_fraction, reason)
        self.decisions.append(decision)
        return decision
