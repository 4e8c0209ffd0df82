"""Gluon's data loading vocabulary (DataLoader, samplers, batchify) over dataset_kit's engine.

``dataset_kit.loader`` stands where ``mxnet.gluon.data`` stood, and
``dataset_kit.loader.vision`` where ``mxnet.gluon.data.vision`` did.
"""

from dataset_kit.datasets.array_dataset import ArrayDataset, SimpleDataset
from dataset_kit.datasets.gluon_dataset import Dataset
from dataset_kit.datasets.record_dataset import RecordFileDataset
from dataset_kit.loader import vision
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
    "Dataset",
    "Dict",
    "FilterSampler",
    "Group",
    "IntervalSampler",
    "List",
    "Pad",
    "RandomSampler",
    "RecordFileDataset",
    "Sampler",
    "SequentialSampler",
    "SimpleDataset",
    "Stack",
    "Tuple",
    "default_batchify_fn",
    "vision",
]
