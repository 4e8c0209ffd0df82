"""dataset_kit: datasets, iterators and converters that feed training loops."""

from dataset_kit import datasets, distributed, io, iterators, loader, serializers, sources, tabular
from dataset_kit._example_context import example_rng
from dataset_kit._phases import phase
from dataset_kit.batch import ExampleBatch
from dataset_kit.convert import concat_examples, to_device
from dataset_kit.dataset import DatasetMixin
from dataset_kit.download import (
    DownloadError,
    HashMismatchError,
    OfflineError,
    UnsafeArchiveError,
    cache_or_load_file,
    cached_download,
    cached_download_path,
    cached_extract,
    download_file,
    extract_archive,
    get_dataset_directory,
    get_dataset_root,
    set_dataset_root,
)
from dataset_kit.engine import EngineStatistics, ResumeMismatchError
from dataset_kit.engine.profiling import Profile, profile
from dataset_kit.iterators import Iterator
from dataset_kit.tabular import TabularDataset

__all__ = [
    "DatasetMixin",
    "DownloadError",
    "EngineStatistics",
    "ExampleBatch",
    "HashMismatchError",
    "Iterator",
    "OfflineError",
    "Profile",
    "ResumeMismatchError",
    "UnsafeArchiveError",
    "cache_or_load_file",
    "cached_download",
    "cached_download_path",
    "cached_extract",
    "concat_examples",
    "download_file",
    "extract_archive",
    "get_dataset_directory",
    "get_dataset_root",
    "datasets",
    "distributed",
    "example_rng",
    "io",
    "iterators",
    "loader",
    "phase",
    "profile",
    "serializers",
    "sources",
    "set_dataset_root",
    "tabular",
    "TabularDataset",
    "to_device",
]
