"""dataset_kit: datasets, iterators and converters that feed training loops."""

from dataset_kit import datasets, iterators, serializers
from dataset_kit.batch import ExampleBatch
from dataset_kit.convert import concat_examples, to_device
from dataset_kit.dataset import DatasetMixin
from dataset_kit.iterators import Iterator

__all__ = [
    "DatasetMixin",
    "ExampleBatch",
    "Iterator",
    "concat_examples",
    "datasets",
    "iterators",
    "serializers",
    "to_device",
]
