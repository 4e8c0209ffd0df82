"""scatter_dataset: ChainerMN's split of a dataset into one SubDataset per rank."""

from __future__ import annotations

from typing import Any

import numpy as np

from dataset_kit._checks import non_negative_int
from dataset_kit.datasets.sub_dataset import SubDataset
from dataset_kit.distributed.communicators import DistributedError, _check_root, as_communicator
from dataset_kit.engine import draw_seed


def scatter_index(n_total_samples: int, comm: Any, root: int = 0, *,
                  force_equal_length: bool = True) -> tuple[int, int]:
    """Return ``(begin, end)``: this rank's slice of ``n_total_samples`` examples.

    ChainerMN's split: with ``force_equal_length`` every rank gets
    ``ceil(n / size)`` examples and neighbouring slices overlap where
    ``n`` does not divide; without it the first ``n % size`` ranks get one
    example more and no example is on two ranks. Computed on every rank
    alike, so nothing travels.

    Raises:
        TypeError: if ``n_total_samples`` is not an integer.
        ValueError: if it is negative or ``root`` is not a rank.
    """
    comm = as_communicator(comm)
    n = non_negative_int("n_total_samples", n_total_samples)
    _check_root(root, comm.size)
    return _bounds(n, comm.size, force_equal_length)[comm.rank]


def scatter_dataset(dataset: Any, comm: Any, root: int = 0, shuffle: bool = False,
                    seed: int | None = None, force_equal_length: bool = True) -> SubDataset:
    """Return this rank's :class:`~dataset_kit.datasets.SubDataset` of ``dataset``.

    ChainerMN's signature and semantics: rank ``root``'s dataset is split
    into ``comm.size`` nearly equal parts (:func:`scatter_index`), after a
    permutation ``numpy.random.RandomState(seed).permutation(n)`` when
    ``shuffle`` (the same one ChainerMN draws for the same seed).

    What travels: when every rank passes a dataset (each can open its own
    copy: arrays it loaded, files it can read), only the seed and the lengths
    travel, and the lengths must agree. When the other ranks pass None, rank
    ``root``'s dataset itself travels, pickled, in one broadcast; that works
    for any picklable dataset (arrays and ``TupleDataset`` included) but
    costs a copy of the whole dataset on every rank.

    Args:
        dataset: the dataset on rank ``root``; on the others, the same
            dataset, or None to receive rank ``root``'s.
        comm: a communicator or anything
            :func:`~dataset_kit.distributed.as_communicator` takes.
        root: the rank whose dataset (and seed) is used.
        shuffle: whether to permute the examples before splitting.
        seed: the permutation's seed; drawn on rank ``root`` when None.
        force_equal_length: give every rank the same length (repeating
            examples) rather than no example twice.

    Raises:
        ValueError: if ``root`` is not a rank, or ``dataset`` is None on rank ``root``.
        DistributedError: on every rank, if the ranks' dataset lengths differ
            (the message names rank ``root``'s and the other rank's lengths).
    """
    comm = as_communicator(comm)
    _check_root(root, comm.size)
    if seed is not None:
        seed = non_negative_int("seed", seed) % 2**32  # RandomState takes 32 bits
    mine = None if dataset is None else len(dataset)
    if comm.rank == root and seed is None and shuffle:
        seed = draw_seed() % 2**32
    lengths_and_seed = comm.allgather((mine, seed))
    lengths = [length for length, _ in lengths_and_seed]
    if lengths[root] is None:
        raise ValueError(f"scatter_dataset needs a dataset on rank {root} (root), got None")
    for rank, length in enumerate(lengths):
        if length is not None and length != lengths[root]:
            raise DistributedError(
                f"dataset lengths differ: rank {root} (root) has {lengths[root]}, rank {rank} "
                f"has {length}")
    if any(length is None for length in lengths):
        # Some rank cannot open the dataset itself: rank root's travels.
        received = comm.bcast(dataset if comm.rank == root else None, root=root)
        dataset = received if dataset is None else dataset
    n = lengths[root]
    order = None
    if shuffle:
        order = np.random.RandomState(lengths_and_seed[root][1]).permutation(n)
    begin, end = _bounds(n, comm.size, force_equal_length)[comm.rank]
    return SubDataset(dataset, begin, end, order)


def _bounds(n: int, size: int, force_equal_length: bool) -> list[tuple[int, int]]:
    if force_equal_length:
        length = -(-n // size)
        return [(n * i // size, n * i // size + length) for i in range(size)]
    small, extra = divmod(n, size)
    bounds, begin = [], 0
    for i in range(size):
        end = begin + small + (i < extra)
        bounds.append((begin, end))
        begin = end
    return bounds

