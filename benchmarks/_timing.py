"""Shared timing helper: best of several alternating runs, to tame noisy machines."""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Callable


def best_of(runs: int, **candidates: Callable[[], object]) -> dict[str, float]:
    """Time each candidate ``runs`` times, interleaved, and return the best seconds."""
    best = {name: float("inf") for name in candidates}
    for _ in range(runs):
        for name, fn in candidates.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def median_of(runs: int, **candidates: Callable[[], object]) -> dict[str, float]:
    """Time each candidate ``runs`` times, interleaved, and return the median seconds.

    Medians, not best runs, are what we report: a best run hides the noise a
    user's machine has too.
    """
    return median_of_timed(runs, **{name: _timed(fn) for name, fn in candidates.items()})


def _timed(fn: Callable[[], object]) -> Callable[[], float]:
    """``fn``, returning the seconds it took."""

    def run() -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    return run


def median_of_timed(runs: int, **candidates: Callable[[], float]) -> dict[str, float]:
    """Like :func:`median_of`, for candidates that return the seconds they timed themselves.

    For a candidate whose warm-up must stay out of the figure (a loader's
    batches made ready while the other candidates ran). The candidates run
    in turn, each round starting one later than the last.
    """
    times: dict[str, list[float]] = {name: [] for name in candidates}
    names = list(candidates)
    for run in range(runs):
        # Each round starts one candidate later: what a candidate leaves
        # behind (a loaded machine, a warm or cold cache) then falls on
        # each of the others in turn, not always on the one after it.
        # Measured: a 2-worker epoch of ours took 5.0 s (median of 4) when
        # it followed the other candidates, 4.1 s after an epoch of its own.
        for name in names[run % len(names):] + names[:run % len(names)]:
            times[name].append(candidates[name]())
    return {name: statistics.median(t) for name, t in times.items()}


def children_reaped(seconds: float = 5.0) -> None:
    """Wait (at most ``seconds``) until no child process of ours is left unreaped.

    A finalized iterator's workers finish exiting, and are joined, just after
    ``finalize()`` returns; their CPU time reaches ``RUSAGE_CHILDREN`` only
    once they are. Call this before reading it.
    """
    deadline = time.monotonic() + seconds
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.001)
