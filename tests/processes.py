"""Spawned processes that tests start together, and always stop."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any


def run_together(n: int, target: Callable[..., None], *args: Any,
                 timeout: float = 60.0) -> list:
    """Run ``target(*args, barrier, results)`` in ``n`` spawned processes released at once.

    Returns what each put on ``results``, in the order they came; every
    process must exit cleanly. None outlives the call: one still running
    after its answer (or after a failure) is killed.
    """
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, barrier, results)) for _ in range(n)]
    try:
        for proc in procs:
            proc.start()
        answers = [results.get(timeout=timeout) for _ in procs]
        for proc in procs:
            proc.join(10)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join()
    assert all(proc.exitcode == 0 for proc in procs)
    return answers
