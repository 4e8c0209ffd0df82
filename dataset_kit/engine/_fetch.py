"""Fetch one planned batch: the only code that builds batches, in any thread or process.

Every executor (the calling thread, a thread pool, worker processes) calls
:func:`fetch_batch`, so a batch is the same wherever it is built. Worker
processes import this module, not the Chainer-facing iterator classes.
"""

from __future__ import annotations

from typing import Any

from dataset_kit import _example_context
from dataset_kit.dataset import fetch_examples
from dataset_kit.engine._statemachine import BatchPlan


def fetch_batch(dataset: Any, plan: BatchPlan, seed: int) -> Any:
    """Fetch a planned batch with the example-rng context of ``(seed, epoch, index)`` installed.

    Args:
        dataset: any sized, indexable dataset.
        plan: the batch's indices and epochs.
        seed: the iterator's seed.

    Returns:
        The batch: a sequence of examples in plan order.
    """
    previous = _example_context.install(
        _example_context.BatchContext(seed, plan.indices, plan.epochs))
    try:
        return fetch_examples(dataset, plan.indices)
    finally:
        _example_context.install(previous)
