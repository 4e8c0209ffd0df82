"""Data-parallel training across ranks: MPI, torch.distributed or one process.

One global order per epoch, cut per rank (:class:`ShardedIterator`), or
ChainerMN's per-rank sub-datasets (:func:`scatter_dataset`); both talk to the
other ranks only through the small :class:`Communicator` protocol.
"""

from dataset_kit.distributed.communicators import (
    Communicator,
    DistributedError,
    MpiCommunicator,
    SingleProcessCommunicator,
    ThreadRankCommunicator,
    ThreadRanks,
    TorchCommunicator,
    as_communicator,
)
from dataset_kit.distributed.scatter import scatter_dataset, scatter_index
from dataset_kit.distributed.sharded_iterator import ShardedIterator

__all__ = [
    "Communicator",
    "DistributedError",
    "MpiCommunicator",
    "ShardedIterator",
    "SingleProcessCommunicator",
    "ThreadRankCommunicator",
    "ThreadRanks",
    "TorchCommunicator",
    "as_communicator",
    "scatter_dataset",
    "scatter_index",
]
