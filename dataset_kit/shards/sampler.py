"""ShardOrderSampler: shuffle shards, then samples within blocks of shards.

The shuffle-quality / download-cost knob is ``block_shards``: an epoch visits
the shards in a random order, ``block_shards`` at a time, and shuffles the
samples of each block together. A block of 1 reads each shard start to end
(in a random sample order); a block of all shards is a full shuffle. Each
process needs only the shards of the current block, so a cache of
``block_shards`` shards (per process reading a different block) suffices.

When the engine asks for an epoch's order, the sampler tells its
:class:`StreamingDataset` that it is the order being followed, so the dataset
can prefetch the shards that order reaches next (see ``_prefetch``).

The order of epoch ``e`` is a pure function of ``(seed, e)``, so an
iterator's checkpoint holds the seed, the block size and a summary of the
manifest; resuming against a manifest that changed is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataset_kit import _block_order
from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit.engine import OrderSampler, draw_seed
from dataset_kit.formats.shards.manifest import Manifest


class ShardOrderSampler(OrderSampler):
    """An order sampler that keeps readers on a few shards at a time.

    Args:
        dataset: a :class:`StreamingDataset` (or a :class:`Manifest`).
        block_shards: shards whose samples are shuffled together.
        seed: the seed (None: drawn from the OS).

    Raises:
        TypeError: if ``dataset`` has no manifest.
        ValueError: if ``block_shards`` or ``seed`` is out of range.
    """

    state_kind = "shard_blocks"

    def __init__(self, dataset: Any, block_shards: int = 4, seed: int | None = None) -> None:
        manifest = dataset if isinstance(dataset, Manifest) else getattr(dataset, "manifest",
                                                                          None)
        if not isinstance(manifest, Manifest):
            raise TypeError(f"dataset must be a StreamingDataset or a Manifest, got "
                            f"{type(dataset).__name__}")
        self.manifest = manifest
        # The dataset's prefetch plan: told which sampler the engine follows.
        self._plan = getattr(dataset, "prefetch_plan", None)
        self.block_shards = positive_int("block_shards", block_shards)
        self.seed = draw_seed() if seed is None else non_negative_int("seed", seed)
        self._starts = manifest.starts
        self._calls = 0

    def epoch_order(self, epoch: int, size: int) -> np.ndarray:
        """Return epoch ``epoch``'s order (a permutation of ``range(size)``).

        Raises:
            ValueError: if ``size`` is not the manifest's number of samples.
        """
        if size != self._starts[-1]:
            raise ValueError(f"ShardOrderSampler was built for {self._starts[-1]} samples, "
                             f"but the dataset has {size}")
        if self._plan is not None:
            self._plan.follow(self)  # the engine plans with this sampler (or this copy)
        return _block_order.epoch_order(self.seed, epoch, self._starts, self.block_shards)

    def blocks(self, epoch: int) -> list[np.ndarray]:
        """Return the shards of each block of epoch ``epoch``, blocks in reading order.

        Every sample of a block comes before any sample of the next one, so
        this is what a reader needs next, at the cost of one shard permutation
        (no sample order).
        """
        return _block_order.blocks(self.seed, epoch, len(self._starts) - 1,
                                   self.block_shards)[1]

    def shards_of(self, order: np.ndarray) -> np.ndarray:
        """Return the shard number of each index of ``order`` (to plan prefetching)."""
        return np.searchsorted(self._starts, order, side="right") - 1

    def state_dict(self) -> dict:
        """Return the seed, the block size and a summary of the manifest."""
        return {"seed": self.seed, "block_shards": self.block_shards,
                "manifest": self.manifest.summary()}

    def load_state_dict(self, state: dict | None) -> None:
        """Take the seed and block size of a saved state, if it fits this manifest.

        Raises:
            ManifestChangedError: if the manifest changed since the state was saved.
            ValueError: if the state lacks a valid seed or block size.
        """
        if not isinstance(state, dict):
            raise ValueError(f"ShardOrderSampler state must be a dict, got {state!r}")
        self.manifest.check_unchanged(state.get("manifest"))
        seed = non_negative_int("state['seed']", state.get("seed"))
        self.block_shards = positive_int("state['block_shards']", state.get("block_shards"))
        self.seed = seed

    def __call__(self, current_order: np.ndarray, current_position: int) -> np.ndarray:
        # Chainer's protocol: each call is the next epoch.
        self._calls += 1
        return self.epoch_order(self._calls, len(current_order))

    def __repr__(self) -> str:
        return f"ShardOrderSampler(block_shards={self.block_shards}, seed={self.seed})"
