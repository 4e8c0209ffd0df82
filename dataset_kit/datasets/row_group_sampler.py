"""RowGroupOrderSampler: shuffle row groups, then rows within blocks of row groups.

The same protocol and knob as :class:`~dataset_kit.shards.ShardOrderSampler`:
an epoch visits the row groups in a random order, ``block_row_groups`` at a
time, and shuffles the rows of each block together. A block of 1 reads each
row group whole before the next (in a random row order), so a reader decodes
each row group once per epoch and holds one at a time; a block of all row
groups is a full shuffle, which decodes a row group for nearly every batch
unless the decoded cache holds them all.

The order of epoch ``e`` is a pure function of ``(seed, e)``: a checkpoint
holds the seed, the block size and the files' stamps (size, modification
time, ETag), and resuming on files that changed is refused, naming the file.
The sampler keeps no reference to its dataset (iterators copy samplers).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataset_kit import _block_order
from dataset_kit._checks import non_negative_int, positive_int
from dataset_kit.formats.parquet import check_stamps


class RowGroupOrderSampler:
    """An order sampler that keeps reads sequential within a few row groups at a time.

    Args:
        dataset: a :class:`ParquetDataset` or a dataset from :func:`from_hf`.
        block_row_groups: row groups whose rows are shuffled together.
        seed: the seed (None: drawn from the operating system).

    Raises:
        TypeError: if ``dataset`` is not stored in row groups.
        ValueError: if ``block_row_groups`` or ``seed`` is out of range.
    """

    state_kind = "row_group_blocks"

    def __init__(self, dataset: Any, block_row_groups: int = 1, *,
                 seed: int | None = None) -> None:
        starts = getattr(dataset, "row_group_starts", None)
        if not isinstance(starts, np.ndarray) or not hasattr(dataset, "fingerprint"):
            raise TypeError(f"dataset must be a ParquetDataset or a from_hf dataset (stored in "
                            f"row groups), got {type(dataset).__name__}")
        self.block_row_groups = positive_int("block_row_groups", block_row_groups)
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> np.uint64(1))
        self.seed = non_negative_int("seed", seed)
        self._starts = starts.copy()
        self._fingerprint = dataset.fingerprint()
        self._calls = 0

    def blocks(self, epoch: int) -> list[np.ndarray]:
        """Return the row groups of each block of epoch ``epoch``, blocks in reading order."""
        return _block_order.blocks(self.seed, epoch, len(self._starts) - 1,
                                   self.block_row_groups)[1]

    def epoch_order(self, epoch: int, size: int) -> np.ndarray:
        """Return epoch ``epoch``'s order (a permutation of ``range(size)``).

        Raises:
            ValueError: if ``size`` is not the dataset's number of rows.
        """
        if size != self._starts[-1]:
            raise ValueError(f"RowGroupOrderSampler was built for {self._starts[-1]} rows, but "
                             f"the dataset has {size}")
        return _block_order.epoch_order(self.seed, epoch, self._starts,
                                        self.block_row_groups)

    def state_dict(self) -> dict:
        """Return the seed, the block size and the files' fingerprint."""
        return {"seed": self.seed, "block_row_groups": self.block_row_groups,
                "files": self._fingerprint}

    def load_state_dict(self, state: dict | None) -> None:
        """Take the seed and block size of a saved state, if it was made on these files.

        Raises:
            FileChangedError: naming a file that changed, appeared or went since.
            ValueError: if the state lacks a valid seed or block size, or the
                row count differs.
        """
        if not isinstance(state, dict):
            raise ValueError(f"RowGroupOrderSampler state must be a dict, got {state!r}")
        saved = state.get("files")
        if not isinstance(saved, dict):
            raise ValueError(f"the state records no fingerprint of the files, got {saved!r}")
        check_stamps(self._fingerprint["files"], saved.get("files"))
        if saved.get("rows") != self._fingerprint["rows"]:
            raise ValueError(f"the state was made for {saved.get('rows')!r} rows, but the "
                             f"dataset has {self._fingerprint['rows']}")
        seed = non_negative_int("state['seed']", state.get("seed"))
        self.block_row_groups = positive_int("state['block_row_groups']",
                                             state.get("block_row_groups"))
        self.seed = seed

    def __call__(self, current_order: np.ndarray, current_position: int) -> np.ndarray:
        # Chainer's protocol: each call is the next epoch.
        self._calls += 1
        return self.epoch_order(self._calls, len(current_order))

    def __repr__(self) -> str:
        return f"RowGroupOrderSampler(block_row_groups={self.block_row_groups}, seed={self.seed})"
