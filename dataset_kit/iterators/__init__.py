"""Iterators over datasets, and the order samplers they use."""

from dataset_kit._example_context import example_rng
from dataset_kit.iterators.iterator import Iterator
from dataset_kit.iterators.order_samplers import OrderSampler, ShuffleOrderSampler
from dataset_kit.iterators.serial import SerialIterator

__all__ = [
    "Iterator",
    "OrderSampler",
    "SerialIterator",
    "ShuffleOrderSampler",
    "example_rng",
]
