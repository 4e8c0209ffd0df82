"""Shared timing helper: best of several alternating runs, to tame noisy machines."""

from __future__ import annotations

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
