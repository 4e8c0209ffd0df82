"""Iterators over datasets, and the order samplers they use."""

from dataset_kit._example_context import example_rng
from dataset_kit.engine import (
    DEFAULT_BATCH_TIMEOUT,
    EngineStatistics,
    ExecutorSpec,
    OrderSampler,
    ShuffleOrderSampler,
    make_executor,
)
from dataset_kit.engine.errors import BatchTimeoutError, WorkerDiedError, WorkerError
from dataset_kit.iterators.iterator import Iterator
from dataset_kit.iterators.multiprocess import MultiprocessIterator
from dataset_kit.iterators.multithread import MultithreadIterator
from dataset_kit.iterators.serial import SerialIterator

__all__ = [
    "DEFAULT_BATCH_TIMEOUT",
    "BatchTimeoutError",
    "EngineStatistics",
    "ExecutorSpec",
    "Iterator",
    "MultiprocessIterator",
    "MultithreadIterator",
    "OrderSampler",
    "SerialIterator",
    "ShuffleOrderSampler",
    "WorkerDiedError",
    "WorkerError",
    "example_rng",
    "make_executor",
]
