"""Fetch one planned batch: the only code that builds batches, in any thread or process.

Every executor (the calling thread, a thread pool, worker processes) calls
:func:`fetch_batch`, so a batch is the same wherever it is built. Worker
processes import this module, not the Chainer-facing iterator classes.

What a batch is (the same for every iterator and executor, with or without
shared memory): what the dataset answers for the batch's index array, except
that a ``list`` of *uniform* examples (numpy arrays or numpy scalars, or
tuples or dicts of them, with one structure, shape and dtype per element
throughout) becomes an :class:`~dataset_kit.ExampleBatch` of stacked columns.
So a batch is a mutable ``list`` when an example holds a Python ``int``,
``float``, string or object, or when shapes differ; it is a read-only
:class:`~dataset_kit.ExampleBatch` when everything is numpy and stacks, or
when the dataset answered with one. A converter receives the dataset's own
answer, unstacked, in every executor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dataset_kit import _example_context
from dataset_kit.dataset import fetch_examples
from dataset_kit.engine import _wire
from dataset_kit.engine._statemachine import BatchPlan


def fetch_batch(dataset: Any, plan: BatchPlan, seed: int, stack: bool = False) -> Any:
    """Fetch a planned batch with the example-rng context of ``(seed, epoch, index)`` installed.

    Args:
        dataset: any sized, indexable dataset.
        plan: the batch's indices and epochs.
        seed: the iterator's seed.
        stack: give the batch in its delivered form (:func:`as_batch`); False
            gives the dataset's own answer (for a converter, or for a worker
            that stacks uniform examples straight into shared memory).

    Returns:
        The batch: a sequence of examples in plan order.
    """
    examples = _example_context.fetch_within(fetch_examples, dataset, plan.indices, seed,
                                             plan.epochs)
    # Only a list is stacked (as_batch): checked here, as most batches are not lists.
    return as_batch(examples) if stack and type(examples) is list else examples


def as_batch(examples: Sequence[Any]) -> Sequence[Any]:
    """Return ``examples`` as a delivered batch: a list of uniform examples, stacked.

    Args:
        examples: what a dataset answered for an index array.

    Returns:
        An :class:`~dataset_kit.ExampleBatch` for a list of uniform numpy
        examples, else ``examples`` itself.
    """
    uniform = _wire.uniform_columns(examples)
    return examples if uniform is None else _wire.stacked_batch(*uniform)
