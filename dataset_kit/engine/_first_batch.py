"""The first batch of a fresh worker pool, split across its workers and joined again.

Until the first batch arrives nothing else can be delivered, and with one
worker building it every other worker is idle: the first batch then costs a
whole batch's time in one process. Cutting it into one consecutive part per
worker and joining the parts brings it in that time divided by the workers.
The join lays the examples out as one worker would have, so the batch is the
same either way.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np

from dataset_kit.dataset import builds_one_by_one
from dataset_kit.engine import _wire
from dataset_kit.engine._statemachine import BatchPlan


def worth_splitting(plan: BatchPlan, n_workers: int, dataset: Any, converter: Any) -> bool:
    """Whether the first batch of a fresh pool of ``n_workers`` is built in parts.

    Only where examples are built one by one (a batch gather is cheap) and
    without a converter (its output cannot be joined).
    """
    return n_workers > 1 and converter is None and len(plan.indices) >= 2 * n_workers \
        and builds_one_by_one(dataset)


def split(plan: BatchPlan, parts: int) -> list[BatchPlan]:
    """Cut a plan into ``parts`` consecutive plans (the example rng keys go with them)."""
    bounds = np.linspace(0, len(plan.indices), parts + 1).astype(int)
    epochs = plan.epochs
    return [plan._replace(indices=plan.indices[a:b],
                          epochs=epochs if isinstance(epochs, int) else epochs[a:b])
            for a, b in pairwise(bounds)]


def join(parts: list) -> Any:
    """Join the batches of a split plan into what one worker would have delivered.

    The examples are put back in order and laid out the way a worker lays out
    a whole batch: stacked columns when they are uniform across every part
    (each part may have been uniform on its own, with other shapes), a list
    otherwise.
    """
    examples = [example for part in parts for example in part]
    uniform = _wire.uniform_columns(examples)
    return examples if uniform is None else _wire.stacked_batch(*uniform)
