"""Gluon's data loading vocabulary (DataLoader, samplers, batchify) over dataset_kit's engine."""

from dataset_kit.datasets.array_dataset import ArrayDataset, SimpleDataset
from dataset_kit.loader.batchify import Dict, Group, List, Pad, Stack, Tuple, default_batchify_fn
from dataset_kit.loader.dataloader import DataLoader
from dataset_kit.loader.samplers import (
    BatchSampler,
    FilterSampler,
    IntervalSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
)

__all__ = [
    "ArrayDataset",
    "BatchSampler",
    "DataLoader",
    "Dict",
    "FilterSampler",
    "Group",
    "IntervalSampler",
    "List",
    "Pad",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SimpleDataset",
    "Stack",
    "Tuple",
    "default_batchify_fn",
]
