"""The block shuffle of ShardOrderSampler and RowGroupOrderSampler, as pure functions.

Units of consecutive examples (shards, row groups) are visited in a random
order, ``block`` units at a time, and the examples of each block are shuffled
together. Everything is drawn from one generator seeded by ``(seed,
ORDER_STREAM, epoch)``: the unit permutation first, then each block's example
permutation, in block order.
"""

from __future__ import annotations

import numpy as np

from dataset_kit._example_context import ORDER_STREAM


def blocks(seed: int, epoch: int, units: int, block: int
           ) -> tuple[np.random.Generator, list[np.ndarray]]:
    """Return the generator (the example orders are drawn from it next) and each block's units."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, ORDER_STREAM, epoch]))
    order = rng.permutation(units)
    return rng, [order[first:first + block] for first in range(0, units, block)]


def epoch_order(seed: int, epoch: int, starts: np.ndarray, block: int) -> np.ndarray:
    """The examples of epoch ``epoch``, given each unit's first example (and the total last)."""
    rng, groups = blocks(seed, epoch, len(starts) - 1, block)
    parts = [rng.permutation(np.concatenate([np.arange(starts[u], starts[u + 1])
                                             for u in units])) for units in groups]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
