"""The global order of an epoch and each rank's cut of it: pure functions.

Every rank computes the same global order for an epoch from the shared seed
(the order a single-process iterator with that seed visits) and takes every
``ranks``-th example of it, starting at its rank. After each rank has consumed
``k`` examples, the ranks together have consumed exactly the first
``k * ranks`` examples of the global order: that number, the *global
position*, is what a checkpoint records, and it means the same on any number
of ranks.

How the end of the global order is cut so that every rank gets the same
number of batches (``policy``, in the engine's words and meanings; see
:mod:`dataset_kit.engine._statemachine`):

* ``'keep'``: padded to a multiple of ``ranks`` only, as ChainerMN's
  ``scatter_dataset`` and PyTorch's ``DistributedSampler`` do: fewer than
  ``ranks`` examples are seen twice, and every rank's last batch may be short
  (by the same amount on every rank);
* ``'pad'``: padded to a multiple of ``ranks * batch_size``, so every batch is
  full;
* ``'discard'``: cut to a multiple of ``ranks * batch_size`` (up to that many
  minus one examples are not seen that epoch; every batch is full).

Padding repeats examples from the start of the epoch's global order, as the
engine's ``'pad'`` does within one iterator; :func:`first_padding` says where
it begins in a rank's share.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataset_kit.engine import ShuffleOrderSampler

SHARD_POLICIES = ("keep", "pad", "discard")


def global_order(seed: int, epoch: int, size: int, shuffle: bool, sampler: Any = None
                 ) -> np.ndarray:
    """Return the global order of ``epoch``: that of a single-process iterator with ``seed``.

    With ``sampler`` (a random-access order sampler), its order of ``epoch``
    instead: every rank computes the same one from the sampler's state.
    """
    if sampler is not None:
        return np.asarray(sampler.epoch_order(epoch, size), dtype=np.int64)
    if not shuffle:
        return np.arange(size, dtype=np.int64)
    return ShuffleOrderSampler(seed).epoch_order(epoch, size)


def share_length(remaining: int, ranks: int, batch_size: int, policy: str) -> int:
    """Return how many examples each rank gets from ``remaining`` examples of a global order."""
    if policy == "pad":
        return -(-remaining // (ranks * batch_size)) * batch_size
    if policy == "discard":
        return remaining // (ranks * batch_size) * batch_size
    return -(-remaining // ranks)


def first_padding(remaining: int, rank: int, ranks: int) -> int:
    """Return the index, in rank ``rank``'s share of ``remaining`` examples, of its first padding.

    The share's ``j``-th example is at offset ``rank + ranks * j`` of the
    remaining global order; offsets from ``remaining`` on wrap around.
    """
    return max(0, -(-(remaining - rank) // ranks))


def rank_share(order: np.ndarray, start: int, rank: int, ranks: int, batch_size: int,
               policy: str) -> np.ndarray:
    """Return rank ``rank``'s examples of ``order[start:]``, cut by ``policy``.

    Rank ``r`` gets the global positions ``start + r``, ``start + r + ranks``,
    ...; positions past the end of the order wrap to its beginning (padding).
    """
    size = len(order)
    length = share_length(size - start, ranks, batch_size, policy)
    if length == 0:
        return np.zeros(0, dtype=np.int64)
    positions = start + rank + ranks * np.arange(length, dtype=np.int64)
    return order[positions % size]
