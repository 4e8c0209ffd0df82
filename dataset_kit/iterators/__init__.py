"""Iterators over datasets, and the order samplers they use."""

from dataset_kit._example_context import example_rng
from dataset_kit.iterators._engine import EngineStatistics
from dataset_kit.iterators._executor_spec import (
    DEFAULT_BATCH_TIMEOUT,
    ExecutorSpec,
    make_executor,
)
from dataset_kit.iterators._process_pool import BatchTimeoutError, WorkerDiedError, WorkerError
from dataset_kit.iterators.iterator import Iterator
from dataset_kit.iterators.multiprocess import MultiprocessIterator
from dataset_kit.iterators.multithread import MultithreadIterator
from dataset_kit.iterators.order_samplers import OrderSampler, ShuffleOrderSampler
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
