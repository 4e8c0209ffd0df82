"""What an engine counts as it hands out batches, and who is told.

Every engine keeps a :class:`Counters`: batches and examples handed out and
how long its ``next()`` blocked. A user reads them as an
:class:`EngineStatistics` (``statistics()``), has them passed to a callback
every N batches (``add_statistics_hook``), or records every batch of every
engine of the process with :func:`dataset_kit.profile`, which listens here
(:func:`add_observer`). Counting is two clock reads and a few additions per
batch, so it is always on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dataset_kit._checks import positive_int


@dataclass(frozen=True)
class EngineStatistics:
    """What an engine has handed out and has in flight: counters to log every N steps.

    Attributes:
        depth: batches the executor may have in flight at once.
        in_flight: batches submitted to the executor and not yet delivered.
        most_in_flight: the largest ``in_flight`` seen since the engine was made.
        batches: batches handed out since the engine was made.
        examples: examples in those batches.
        wait_seconds: how long the caller's ``next()`` blocked, in total.
        shm_blocks: this process's shared-memory blocks in use (every
            multiprocess iterator's), or None where they cannot be counted.
    """

    depth: int
    in_flight: int
    most_in_flight: int
    batches: int = 0
    examples: int = 0
    wait_seconds: float = 0.0
    shm_blocks: int | None = None

    @property
    def mean_wait_seconds(self) -> float:
        """The mean wait of ``next()`` per batch (0.0 before the first batch)."""
        return self.wait_seconds / self.batches if self.batches else 0.0


#: ``observer(engine, start, wait, examples)``: called after each batch an
#: engine hands out; ``start`` is a :func:`time.perf_counter` reading.
Observer = Callable[[Any, float, float, int], None]

_observers: list[Observer] = []


def add_observer(observer: Observer) -> None:
    """Have ``observer`` told of every batch every engine of this process hands out."""
    _observers.append(observer)


def remove_observer(observer: Observer) -> None:
    """Stop telling ``observer`` (no error if it was not added)."""
    if observer in _observers:
        _observers.remove(observer)


_decision_observers: list[Callable[[Any, Any], None]] = []


def add_decision_observer(observer: Callable[[Any, Any], None]) -> None:
    """Have ``observer(engine, decision)`` told of every ``num_workers="auto"`` decision."""
    _decision_observers.append(observer)


def remove_decision_observer(observer: Callable[[Any, Any], None]) -> None:
    """Stop telling ``observer`` of decisions (no error if it was not added)."""
    if observer in _decision_observers:
        _decision_observers.remove(observer)


def note_decision(engine: Any, decision: Any) -> None:
    """Tell the decision observers of ``decision``, made for ``engine``."""
    for observer in _decision_observers:
        observer(engine, decision)


#: ``observer(worker_index, phases, marks)``: see :func:`add_phase_observer`.
PhaseObserver = Callable[[int, tuple, tuple], None]

_phase_observers: list[PhaseObserver] = []


def add_phase_observer(observer: PhaseObserver) -> None:
    """Have ``observer(worker_index, phases, marks)`` told of each batch a worker process built.

    ``phases`` is five :func:`time.perf_counter` readings taken by the worker
    (comparable with this process's, the clock being system-wide): it fell
    idle, began the task, had fetched (the dataset's getitem or batch hook),
    had run the converter, had copied into shared memory. ``marks`` is
    ``(name, seconds, spans)`` per phase the user marked
    (:class:`dataset_kit.phase`) while the batch was built.
    """
    _phase_observers.append(observer)


def remove_phase_observer(observer: PhaseObserver) -> None:
    """Stop telling ``observer`` of workers' phases (no error if it was not added)."""
    if observer in _phase_observers:
        _phase_observers.remove(observer)


def note_phases(worker: int, phases: tuple, marks: tuple = ()) -> None:
    """Tell the phase observers what worker ``worker`` spent on a batch."""
    for observer in _phase_observers:
        observer(worker, phases, marks)


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def children_rss() -> dict[int, int]:
    """Return ``{pid: rss bytes}`` of this process's child processes (Linux; else empty)."""
    pid = os.getpid()
    children: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                children.extend(int(c) for c in f.read().split())
    except OSError:
        return {}
    rss = {}
    for child in children:
        try:
            with open(f"/proc/{child}/statm") as f:
                rss[child] = int(f.read().split()[1]) * _PAGE
        except (OSError, IndexError, ValueError):
            continue  # the child ended meanwhile
    return rss


def shm_blocks_in_use() -> int | None:
    """Count this process's shared-memory blocks (their names begin ``dsk-<pid>-``)."""
    prefix = f"dsk-{os.getpid()}-"
    try:
        return sum(1 for name in os.listdir("/dev/shm") if name.startswith(prefix))
    except OSError:
        return None  # no /dev/shm on this platform


class _Hook:
    __slots__ = ("every", "callback")

    def __init__(self, every: int, callback: Callable[[EngineStatistics], Any]) -> None:
        self.every = every
        self.callback = callback


class Counters:
    """An engine's counters and its statistics hooks."""

    __slots__ = ("batches", "examples", "wait", "_hooks")

    def __init__(self) -> None:
        self.batches = 0
        self.examples = 0
        self.wait = 0.0
        self._hooks: list[_Hook] = []

    def add_hook(self, callback: Callable[[EngineStatistics], Any],
                 every: int) -> Callable[[], None]:
        """Register ``callback``; return the function that removes it.

        Raises:
            TypeError: if ``callback`` is not callable or ``every`` not an integer.
            ValueError: if ``every`` is not positive.
        """
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {type(callback).__name__}")
        hook = _Hook(positive_int("every", every), callback)
        self._hooks.append(hook)

        def remove() -> None:
            if hook in self._hooks:
                self._hooks.remove(hook)
        return remove

    def record(self, engine: Any, start: float, examples: int) -> None:
        """Count one batch handed out whose ``next()`` began at ``start``."""
        wait = time.perf_counter() - start
        self.batches += 1
        self.examples += examples
        self.wait += wait
        for observer in _observers:
            observer(engine, start, wait, examples)
        for hook in self._hooks:
            if self.batches % hook.every == 0:
                hook.callback(engine.statistics())

    def __copy__(self) -> Counters:
        # A copy counts its own batches from zero and is told to no hook.
        return Counters()

    def __getstate__(self) -> dict:
        return {}

    def __setstate__(self, state: dict) -> None:
        self.__init__()  # type: ignore[misc]
